// heed/seq2seq/data.hpp — d2l's English–French data pipeline (d2l 0.17, section 9.5
// "Machine Translation and the Dataset"): preprocess_nmt, tokenize_nmt, Vocab,
// truncate_pad, build_array_nmt, load_data_nmt, with d2l's semantics exactly, plus a
// checked reader for Tatoeba's fra.txt and a seeded shuffling batch loader.
//
//   heed::NmtData data = heed::load_data_nmt("fra-eng/fra.txt", /*batch_size=*/64, /*num_steps=*/10);
//   for (const heed::NmtBatch& batch : data.data_iter) {  // each loop is an epoch, freshly shuffled
//     // batch.X: (64, 10) source indices, batch.X_valid_len: (64), batch.Y, batch.Y_valid_len
//     std::string first = data.tgt_vocab.to_tokens(batch.Y.at({0, 0}));
//   }
//
// load_data_nmt_text(heed::builtin_fra_eng(), 64, 10) does the same on text in memory
// (heed/seq2seq/corpus.hpp generates a small corpus, so no download is needed).
//
// Where heed differs from d2l, it says so: read_data_nmt validates the file (UTF-8, a
// tab on every line), refuses what is not a regular file and can stop after max_pairs;
// tokenize_nmt takes the first two columns of a line with extra ones (d2l skips such
// lines) and counts num_examples in sentence pairs, so that blank lines count nowhere
// (d2l counts every line); preprocess_nmt lowercases only the scripts listed at
// detail::to_lower (d2l's str.lower() knows all of Unicode).
//
// Vocab is in heed/seq2seq/vocab.hpp; the UTF-8 decoding and lowercasing under
// read_data_nmt and preprocess_nmt in heed/seq2seq/text.hpp.
#pragma once

#include "heed/detail/header_begin.hpp"

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <iterator>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "heed/core/error.hpp"
#include "heed/core/generator.hpp"
#include "heed/core/tensor.hpp"
#include "heed/detail/batch_iterator.hpp"
#include "heed/detail/deprecated.hpp"
#include "heed/detail/files.hpp"
#include "heed/detail/inline.hpp"
#include "heed/seq2seq/text.hpp"
#include "heed/seq2seq/vocab.hpp"

namespace heed {

// ---- preprocess_nmt, tokenize_nmt ------------------------------------------------

/// d2l's preprocess_nmt: U+202F and U+00A0 become ' ', letters are lowercased (see
/// detail::to_lower for the coverage; a capital sigma becomes ς when it follows a
/// letter and no letter follows, σ otherwise, as str.lower() does), and a space is
/// inserted before each , . ! ? whose previous code point is not a space, on the whole
/// text as d2l does ("go.\tva!" → "go .\tva !", "\t." → "\t ."). Invalid UTF-8 throws
/// ValueError.
std::string preprocess_nmt(std::string_view text);

/// Token sequences of the sentence pairs: source[i] and target[i] are one pair.
struct NmtTokens {
  std::vector<std::vector<std::string>> source;
  std::vector<std::vector<std::string>> target;
};

/// d2l's tokenize_nmt: lines split on '\n', columns on '\t', tokens on ' ' (empty tokens
/// kept, as Python's split(' ')). Stops after num_examples + 1 pairs, as d2l's test
/// i > num_examples does on a file without blank lines (num_examples = 600 yields up to
/// 601 pairs); num_examples absent or 0 reads every line. A line with fewer than two
/// columns (a blank line, the empty line after the last '\n') is skipped and not
/// counted, so blank lines change nothing, here or in read_data_nmt; a line with more
/// columns uses the first two (d2l skips it; Tatoeba's third column is attribution).
NmtTokens tokenize_nmt(const std::string& text, std::optional<std::size_t> num_examples = std::nullopt);

namespace detail {
/// f(source, target) with the first two columns of each pair tokenize_nmt reads, in
/// order, without holding the text's lines or tokens at once (held_out.hpp's overlap
/// walks a whole training file so).
template <typename F>
void for_each_nmt_pair(std::string_view text, std::optional<std::size_t> num_examples, F&& f) {
  std::size_t pairs = 0;
  for (std::size_t start = 0; start <= text.size();) {
    if (num_examples && *num_examples > 0 && pairs > *num_examples) break;
    std::size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view line = text.substr(start, end - start);
    start = end + 1;
    const std::size_t tab = line.find('\t');
    if (tab == std::string_view::npos) continue;
    const std::size_t second = line.find('\t', tab + 1);
    f(line.substr(0, tab),
      line.substr(tab + 1, second == std::string_view::npos ? std::string_view::npos : second - tab - 1));
    ++pairs;
  }
}
}  // namespace detail

// ---- truncate_pad, build_array_nmt -----------------------------------------------

/// d2l's truncate_pad: the first num_steps entries of line, padded with padding_token.
inline std::vector<index_t> truncate_pad(std::vector<index_t> line, index_t num_steps, index_t padding_token) {
  HEED_CHECK(num_steps >= 0, ValueError, "truncate_pad: num_steps must be >= 0, got ", num_steps);
  detail::check_fits_in_memory(num_steps, sizeof(index_t), "truncate_pad", " (num_steps of token ids)");
  line.resize(static_cast<std::size_t>(num_steps), padding_token);
  return line;
}

/// The token indices of n sentences and their lengths.
struct NmtArray {
  IndexTensor array;      // (n, num_steps)
  IndexTensor valid_len;  // (n)
};

/// d2l's build_array_nmt: each line's indices plus <eos>, truncated or padded with <pad>
/// to num_steps; valid_len counts the entries that are not <pad>.
NmtArray build_array_nmt(const std::vector<std::vector<std::string>>& lines, const Vocab& vocab, index_t num_steps);

// ---- read_data_nmt ---------------------------------------------------------------

HEED_IGNORE_DEPRECATED_BEGIN  // the struct, or its copies warn in every program (detail/deprecated.hpp)
struct ReadNmtOptions {
  /// Skip a malformed line (no tab, invalid UTF-8) instead of throwing FileError.
  bool skip_malformed = false;
  /// Stop after this many sentence pairs (absent: read them all). Blank and skipped
  /// lines do not count, as in tokenize_nmt.
  std::optional<std::size_t> max_pairs;
  /// Where to store the number of lines skipped as malformed (nullptr: nowhere).
  std::size_t* skipped_lines = nullptr;
  /// Before 0.2: read only the first max_lines lines of the file, blank ones counted
  /// (still honoured, with max_pairs if both are set).
  [[deprecated(
      "use max_pairs, which counts sentence pairs, not lines")]] detail::DeprecatedValue<std::optional<std::size_t>>
      max_lines;
};
HEED_IGNORE_DEPRECATED_END

/// Reads a Tatoeba / d2l fra.txt file: UTF-8, one `English<TAB>French` pair per line,
/// further tab-separated columns (attribution) dropped, "\r\n" accepted, empty lines
/// ignored. Returns the pairs as "English\tFrench\n" lines, the text d2l's read_data_nmt
/// returns. A missing or unreadable file, or one that is not a regular file (a
/// directory; a FIFO, which would block), throws FileError naming it; a line without a
/// tab or with invalid UTF-8 throws FileError "<path>:<line>: ..." (1-based) unless
/// options.skip_malformed is set, which skips and counts it.
std::string read_data_nmt(const std::string& path, const ReadNmtOptions& options = {});

// ---- NmtDataLoader ---------------------------------------------------------------

/// One minibatch of sentence pairs.
struct NmtBatch {
  IndexTensor X;            // (B, num_steps) source indices
  IndexTensor X_valid_len;  // (B)
  IndexTensor Y;            // (B, num_steps) target indices
  IndexTensor Y_valid_len;  // (B)
};

/// d2l's load_array(data_arrays, batch_size, is_train=True): a DataLoader with
/// shuffle=True, drop_last=False. Each begin() starts an epoch with a fresh permutation
/// (Fisher–Yates, drawn from the loader's Generator), so the same seed gives the same
/// batches epoch after epoch; the last batch holds what is left (601 examples in batches
/// of 64: nine of 64, one of 25). An iterator is valid until the next begin().
///
///   heed::NmtDataLoader loader(src, src_len, tgt, tgt_len, /*batch_size=*/64, /*seed=*/0);
///   for (int epoch = 0; epoch < 10; ++epoch)
///     for (const heed::NmtBatch& batch : loader) train_step(batch.X, batch.Y);
///
/// Length bucketing (set_bucketing(w), off by default): in batches of shuffled sentences
/// of varied lengths much is padding (36 % of the positions of fra-eng-large's batches of
/// 128, 12 steps), as training cuts each batch after its longest sequence only. With w > 0, each epoch's permutation
/// is cut into windows of w batches; each window is sorted by target length, then source
/// length (stably, so equal lengths stay in random order), and cut into batches; then the
/// order of all the epoch's batches is shuffled, so that lengths do not rise through the
/// epoch. Only the epoch's last window can leave a partial batch, which is shuffled with
/// the rest. The draws are the permutation's, then the batch order's, from the same
/// Generator; with bucketing off the batches are d2l's, draw for draw.
///
/// Batches by tokens (set_max_tokens(m), off by default): a batch then takes sentences
/// in the epoch's order (within a window when bucketing) while its rows × (longest
/// source + longest target), the positions it runs once cut after its longest sequences,
/// stay within m, and at most batch_size of them; a sentence longer than m alone is a
/// batch of one. Sorted windows make such batches even in cost: many short sentences
/// or few long ones. num_batches() is then the current epoch's count.
class NmtDataLoader {
 public:
  using Iterator = detail::BatchIterator<NmtDataLoader, NmtBatch>;

  /// src, tgt: (n, num_steps); src_valid_len, tgt_valid_len: (n). shuffle = false keeps
  /// the examples in order (d2l's is_train=False).
  NmtDataLoader(IndexTensor src, IndexTensor src_valid_len, IndexTensor tgt, IndexTensor tgt_valid_len,
                index_t batch_size, std::uint64_t seed = Generator::kDefaultSeed, bool shuffle = true);

  index_t batch_size() const { return batch_size_; }
  index_t num_examples() const { return src_.size(0); }
  /// The batches of the current epoch (of the examples in order before the first begin()).
  index_t num_batches() const { return static_cast<index_t>(batch_starts_.size()) - 1; }

  /// Reseeds the generator: the next epochs are those of a loader built with `seed`.
  void set_seed(std::uint64_t seed) { gen_.manual_seed(seed); }
  /// The generator the epochs' orders are drawn from: its state (Generator::get_state)
  /// between epochs is where training resumes.
  Generator& generator() { return gen_; }
  const Generator& generator() const { return gen_; }

  /// Sorts by length within windows of `window_batches` batches from the next begin()
  /// on (see above); 0 turns it off.
  void set_bucketing(index_t window_batches);
  index_t bucketing() const { return bucket_batches_; }

  /// Cuts batches by tokens, at most max_tokens positions each (see above); 0 (the
  /// default) cuts them by batch_size alone. Between epochs: the current order is cut
  /// again at once (so that num_batches() counts such batches), every epoch after too.
  void set_max_tokens(index_t max_tokens);
  index_t max_tokens() const { return max_tokens_; }

  /// Starts an epoch: draws a new random permutation of the examples (Fisher–Yates on
  /// 0..n-1, as torch.randperm each epoch), unless shuffle is off.
  Iterator begin();
  Iterator end() const { return Iterator(this, num_batches()); }

  /// The example indices of the current epoch, in batch order.
  const std::vector<index_t>& order() const { return order_; }

  /// Where batch i of the current epoch starts in order() (num_batches() + 1 entries).
  const std::vector<index_t>& batch_starts() const { return batch_starts_; }

  /// Batch i (0 <= i < num_batches()) of the current epoch.
  NmtBatch batch(index_t i) const;

 private:
  IndexTensor src_, src_valid_len_, tgt_, tgt_valid_len_;
  index_t batch_size_;
  bool shuffle_;
  index_t bucket_batches_ = 0;
  index_t max_tokens_ = 0;
  Generator gen_;
  std::vector<index_t> order_;
  std::vector<index_t> batch_starts_;

  void cut_batches(index_t from, index_t to);
  void set_batch_starts();
  void sort_into_buckets();
};

/// Positions of an epoch's batches, source and target together, once each batch is cut
/// after its longest sequence (as train_seq2seq cuts the Transformer's).
struct PaddingStats {
  index_t real = 0;    // valid positions
  index_t padded = 0;  // positions past a sequence's valid length, before its batch's longest
  double fraction() const {
    return real + padded > 0 ? static_cast<double>(padded) / static_cast<double>(real + padded) : 0.0;
  }
};

/// The padding of the next epoch of `loader`, drawn on a copy: the loader itself is not
/// advanced.
PaddingStats padding_of_next_epoch(NmtDataLoader loader);

// ---- load_data_nmt ---------------------------------------------------------------

/// What d2l's load_data_nmt returns: the batches and both vocabularies.
struct NmtData {
  NmtDataLoader data_iter;
  Vocab src_vocab;
  Vocab tgt_vocab;
};

/// d2l's load_data_nmt on raw fra.txt-format text in memory: preprocess_nmt,
/// tokenize_nmt(num_examples), vocabularies with min_freq 2 and <pad> <bos> <eos>,
/// build_array_nmt(num_steps), a shuffling loader seeded with `seed`.
NmtData load_data_nmt_text(std::string_view raw_text, index_t batch_size, index_t num_steps,
                           std::optional<std::size_t> num_examples = 600, std::uint64_t seed = Generator::kDefaultSeed);

/// d2l's load_data_nmt on a fra.txt file (read_data_nmt, reading only the pairs that
/// num_examples lets tokenize_nmt use): the same data as
/// load_data_nmt_text(read_data_nmt(path), ...).
NmtData load_data_nmt(const std::string& path, index_t batch_size, index_t num_steps,
                      std::optional<std::size_t> num_examples = 600, std::uint64_t seed = Generator::kDefaultSeed);

#if HEED_NON_TEMPLATE_DEFINITIONS

HEED_INLINE std::string preprocess_nmt(std::string_view text) {
  const std::u32string chars = detail::decode_utf8_text(text, "preprocess_nmt");
  std::u32string lowered;
  lowered.reserve(chars.size());
  for (std::size_t i = 0; i < chars.size(); ++i) {
    const char32_t c = chars[i];
    if (c == 0x202F || c == 0xA0) {
      lowered += U' ';
    } else if (c == 0x3A3) {
      const bool is_final = i > 0 && detail::is_cased_letter(chars[i - 1]) &&
                            (i + 1 == chars.size() || !detail::is_cased_letter(chars[i + 1]));
      lowered += is_final ? char32_t{0x3C2} : char32_t{0x3C3};
    } else {
      char32_t second = 0;
      lowered += detail::to_lower(c, &second);
      if (second) lowered += second;
    }
  }
  std::string out;
  out.reserve(text.size() + text.size() / 4);
  for (std::size_t i = 0; i < lowered.size(); ++i) {
    const char32_t c = lowered[i];
    const bool punctuation = c == U',' || c == U'.' || c == U'!' || c == U'?';
    if (i > 0 && punctuation && lowered[i - 1] != U' ') out += ' ';
    detail::append_utf8(out, c);
  }
  return out;
}

HEED_INLINE NmtTokens tokenize_nmt(const std::string& text, std::optional<std::size_t> num_examples) {
  NmtTokens out;
  detail::for_each_nmt_pair(text, num_examples, [&out](std::string_view source, std::string_view target) {
    out.source.push_back(detail::split(source, ' '));
    out.target.push_back(detail::split(target, ' '));
  });
  return out;
}

HEED_INLINE NmtArray build_array_nmt(const std::vector<std::vector<std::string>>& lines, const Vocab& vocab,
                                     index_t num_steps) {
  HEED_CHECK(num_steps > 0, ValueError, "build_array_nmt: num_steps must be positive, got ", num_steps);
  HEED_CHECK(vocab.contains(vocab.special_tokens().pad) && vocab.contains(vocab.special_tokens().eos), ValueError,
             "build_array_nmt: the vocabulary needs the reserved tokens <pad> and <eos>");
  const index_t n = static_cast<index_t>(lines.size()), pad = vocab.pad_index();
  NmtArray out{IndexTensor::empty({n, num_steps}), IndexTensor::empty({n})};
  for (index_t i = 0; i < n; ++i) {
    std::vector<index_t> line = vocab[lines[static_cast<std::size_t>(i)]];
    line.push_back(vocab.eos_index());
    line = truncate_pad(std::move(line), num_steps, pad);
    std::copy(line.begin(), line.end(), out.array.data() + i * num_steps);
    out.valid_len.data()[i] = static_cast<index_t>(line.size()) - std::count(line.begin(), line.end(), pad);
  }
  return out;
}

HEED_INLINE std::string read_data_nmt(const std::string& path, const ReadNmtOptions& options) {
  detail::check_regular_file("read_data_nmt", path);
  std::ifstream in(path, std::ios::binary);
  HEED_CHECK(in, FileError, "read_data_nmt: cannot open ", path, ": ", detail::errno_message(errno));
  std::string text, line;
  std::size_t skipped = 0, pairs = 0;
  HEED_IGNORE_DEPRECATED_BEGIN
  const std::optional<std::size_t> max_lines = options.max_lines;
  HEED_IGNORE_DEPRECATED_END
  for (std::size_t number = 1; (!options.max_pairs || pairs < *options.max_pairs) &&
                               (!max_lines || number <= *max_lines) && std::getline(in, line);
       ++number) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    std::string problem;
    for (std::size_t i = 0; i < line.size() && problem.empty();) {
      const detail::Utf8Char c = detail::decode_utf8(line, i);
      if (c.error) problem = detail::concat("invalid UTF-8 at byte ", i + 1, ": ", c.error);
      i += c.length;
    }
    const std::size_t tab = line.find('\t');
    if (problem.empty() && tab == std::string::npos) problem = "no tab between the English and the French sentence";
    if (!problem.empty()) {
      HEED_CHECK(options.skip_malformed, FileError, path, ":", number, ": ", problem);
      ++skipped;
      continue;
    }
    const std::size_t second_tab = line.find('\t', tab + 1);
    text.append(line, 0, second_tab).append(1, '\n');
    ++pairs;
  }
  HEED_CHECK(!in.bad(), FileError, "read_data_nmt: error reading ", path);
  if (options.skipped_lines) *options.skipped_lines = skipped;
  return text;
}

HEED_INLINE NmtDataLoader::NmtDataLoader(IndexTensor src, IndexTensor src_valid_len, IndexTensor tgt,
                                         IndexTensor tgt_valid_len, index_t batch_size, std::uint64_t seed,
                                         bool shuffle)
    : src_(std::move(src)),
      src_valid_len_(std::move(src_valid_len)),
      tgt_(std::move(tgt)),
      tgt_valid_len_(std::move(tgt_valid_len)),
      batch_size_(batch_size),
      shuffle_(shuffle),
      gen_(seed) {
  HEED_CHECK(batch_size > 0, ValueError, "NmtDataLoader: batch_size must be positive, got ", batch_size);
  HEED_CHECK(src_.defined() && tgt_.defined() && src_valid_len_.defined() && tgt_valid_len_.defined(), ValueError,
             "NmtDataLoader: every array must be defined");
  HEED_CHECK(src_.dim() == 2 && tgt_.dim() == 2 && src_valid_len_.dim() == 1 && tgt_valid_len_.dim() == 1 &&
                 tgt_.size(0) == src_.size(0) && src_valid_len_.size(0) == src_.size(0) &&
                 tgt_valid_len_.size(0) == src_.size(0),
             ShapeError, "NmtDataLoader: expected src (n, steps), src_valid_len (n), tgt (n, steps), ",
             "tgt_valid_len (n), got ", to_string(src_.shape()), ", ", to_string(src_valid_len_.shape()), ", ",
             to_string(tgt_.shape()), ", ", to_string(tgt_valid_len_.shape()));
  order_.resize(static_cast<std::size_t>(num_examples()));
  for (std::size_t i = 0; i < order_.size(); ++i) order_[i] = static_cast<index_t>(i);
  set_batch_starts();
}

HEED_INLINE void NmtDataLoader::set_bucketing(index_t window_batches) {
  HEED_CHECK(window_batches >= 0, ValueError, "NmtDataLoader::set_bucketing: window_batches must be >= 0, got ",
             window_batches);
  bucket_batches_ = window_batches;
}

HEED_INLINE void NmtDataLoader::set_max_tokens(index_t max_tokens) {
  HEED_CHECK(max_tokens >= 0, ValueError, "NmtDataLoader::set_max_tokens: max_tokens must be >= 0 (0: off), got ",
             max_tokens);
  max_tokens_ = max_tokens;
  batch_starts_.clear();
  cut_batches(0, num_examples());
  batch_starts_.push_back(num_examples());
}

/// Appends the starts of the batches of order_[from, to): runs of batch_size, or by tokens.
HEED_INLINE void NmtDataLoader::cut_batches(index_t from, index_t to) {
  if (max_tokens_ == 0) {
    for (index_t start = from; start < to; start += batch_size_) batch_starts_.push_back(start);
    return;
  }
  const std::int64_t *tgt_len = tgt_valid_len_.data(), *src_len = src_valid_len_.data();
  // As train_seq2seq cuts a batch: after its longest sequence, one step at least.
  const auto steps = [](std::int64_t len, index_t width) { return std::clamp<index_t>(len, 1, width); };
  for (index_t start = from; start < to;) {
    index_t end = start, longest_source = 0, longest_target = 0;
    while (end < to && end - start < batch_size_) {
      const index_t i = order_[static_cast<std::size_t>(end)];
      const index_t source = std::max(longest_source, steps(src_len[i], src_.size(1)));
      const index_t target = std::max(longest_target, steps(tgt_len[i], tgt_.size(1)));
      if (end > start && (end - start + 1) * (source + target) > max_tokens_) break;
      longest_source = source, longest_target = target, ++end;
    }
    batch_starts_.push_back(start);
    start = end;
  }
}

HEED_INLINE void NmtDataLoader::set_batch_starts() {
  batch_starts_.clear();
  cut_batches(0, num_examples());
  batch_starts_.push_back(num_examples());
}

HEED_INLINE void NmtDataLoader::sort_into_buckets() {
  const auto n = order_.size();
  // At most the whole epoch: a larger window sorts the same, and w · batch_size could overflow.
  const index_t row_batches = (num_examples() + batch_size_ - 1) / batch_size_;
  const auto window = static_cast<std::size_t>(std::min(bucket_batches_, row_batches) * batch_size_);
  const std::int64_t *tgt_len = tgt_valid_len_.data(), *src_len = src_valid_len_.data();
  const auto shorter = [&](index_t a, index_t b) {
    return tgt_len[a] != tgt_len[b] ? tgt_len[a] < tgt_len[b] : src_len[a] < src_len[b];
  };
  // Each window sorted, then cut into batches of its own.
  batch_starts_.clear();
  for (std::size_t begin = 0; begin < n; begin += window) {
    const auto first = order_.begin() + static_cast<std::ptrdiff_t>(begin);
    const std::size_t end = begin + std::min(window, n - begin);
    std::stable_sort(first, order_.begin() + static_cast<std::ptrdiff_t>(end), shorter);
    cut_batches(static_cast<index_t>(begin), static_cast<index_t>(end));
  }
  batch_starts_.push_back(num_examples());
  if (!shuffle_) return;
  // Then the batches themselves in a random order.
  std::vector<index_t> batches(static_cast<std::size_t>(num_batches()));
  for (std::size_t b = 0; b < batches.size(); ++b) batches[b] = static_cast<index_t>(b);
  for (std::size_t i = batches.size(); i > 1; --i) std::swap(batches[i - 1], batches[gen_.uniform_int(i)]);
  const std::vector<index_t> sorted = order_, sorted_starts = batch_starts_;
  batch_starts_.assign(1, 0);
  auto out = order_.begin();
  for (const index_t b : batches) {
    const auto at = static_cast<std::size_t>(b);
    out = std::copy(sorted.begin() + sorted_starts[at], sorted.begin() + sorted_starts[at + 1], out);
    batch_starts_.push_back(static_cast<index_t>(out - order_.begin()));
  }
}

HEED_INLINE NmtDataLoader::Iterator NmtDataLoader::begin() {
  for (std::size_t i = 0; i < order_.size(); ++i) order_[i] = static_cast<index_t>(i);
  if (shuffle_) {
    for (std::size_t i = order_.size(); i > 1; --i) std::swap(order_[i - 1], order_[gen_.uniform_int(i)]);
  }
  if (bucket_batches_ > 0)
    sort_into_buckets();
  else
    set_batch_starts();
  return Iterator(this, 0);
}

HEED_INLINE NmtBatch NmtDataLoader::batch(index_t i) const {
  HEED_CHECK(i >= 0 && i < num_batches(), IndexError, "NmtDataLoader::batch: index ", i, " out of range for ",
             num_batches(), " batches");
  const auto at = static_cast<std::size_t>(i);
  const index_t start = batch_starts_[at], size = batch_starts_[at + 1] - start;
  const auto rows = [&](const IndexTensor& from) {
    const index_t width = from.dim() == 2 ? from.size(1) : 1;
    IndexTensor to = IndexTensor::empty(from.dim() == 2 ? Shape{size, width} : Shape{size});
    for (index_t r = 0; r < size; ++r) {
      const std::int64_t* row = from.data() + order_[static_cast<std::size_t>(start + r)] * width;
      std::copy(row, row + width, to.data() + r * width);
    }
    return to;
  };
  return {rows(src_), rows(src_valid_len_), rows(tgt_), rows(tgt_valid_len_)};
}

HEED_INLINE PaddingStats padding_of_next_epoch(NmtDataLoader loader) {
  PaddingStats stats;
  for (const NmtBatch& batch : loader)
    for (const IndexTensor* lens : {&batch.X_valid_len, &batch.Y_valid_len}) {
      const std::int64_t* len = lens->data();
      const index_t rows = lens->numel(), longest = rows > 0 ? *std::max_element(len, len + rows) : 0;
      for (index_t r = 0; r < rows; ++r) {
        stats.real += len[r];
        stats.padded += longest - len[r];
      }
    }
  return stats;
}

HEED_INLINE NmtData load_data_nmt_text(std::string_view raw_text, index_t batch_size, index_t num_steps,
                                       std::optional<std::size_t> num_examples, std::uint64_t seed) {
  HEED_CHECK(batch_size > 0, ValueError, "load_data_nmt: batch_size must be positive, got ", batch_size);
  HEED_CHECK(num_steps > 0, ValueError, "load_data_nmt: num_steps must be positive, got ", num_steps);
  const NmtTokens tokens = tokenize_nmt(preprocess_nmt(raw_text), num_examples);
  HEED_CHECK(!tokens.source.empty(), ValueError, "load_data_nmt: the text holds no sentence pairs");
  const std::vector<std::string> reserved{"<pad>", "<bos>", "<eos>"};
  Vocab src_vocab(tokens.source, 2, reserved), tgt_vocab(tokens.target, 2, reserved);
  NmtArray src = build_array_nmt(tokens.source, src_vocab, num_steps);
  NmtArray tgt = build_array_nmt(tokens.target, tgt_vocab, num_steps);
  return {NmtDataLoader(src.array, src.valid_len, tgt.array, tgt.valid_len, batch_size, seed), std::move(src_vocab),
          std::move(tgt_vocab)};
}

HEED_INLINE NmtData load_data_nmt(const std::string& path, index_t batch_size, index_t num_steps,
                                  std::optional<std::size_t> num_examples, std::uint64_t seed) {
  ReadNmtOptions options;
  if (num_examples && *num_examples > 0) options.max_pairs = *num_examples + 1;
  const std::string text = read_data_nmt(path, options);
  if (text.find_first_not_of(" \t\r\n") == std::string::npos) {
    std::error_code error;
    const bool empty = std::filesystem::file_size(path, error) == 0 && !error;
    throw FileError(detail::concat("load_data_nmt: ", path, " holds no sentence pairs (",
                                   empty ? "the file is empty" : "only blank lines", ")"));
  }
  return load_data_nmt_text(text, batch_size, num_steps, num_examples, seed);
}

#endif  // HEED_NON_TEMPLATE_DEFINITIONS

}  // namespace heed

#include "heed/detail/header_end.hpp"
