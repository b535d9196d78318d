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
#pragma once

#include "heed/detail/header_begin.hpp"

#include <algorithm>
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
#include "heed/detail/files.hpp"

namespace heed {

// ---- UTF-8 and lowercasing -------------------------------------------------------

namespace detail {

/// One decoded code point: `length` bytes, or `error` (a static string) when the bytes
/// at that place are not UTF-8.
struct Utf8Char {
  char32_t code_point = 0;
  std::size_t length = 1;
  const char* error = nullptr;
};

/// Decodes the code point starting at s[i] (i < s.size()), rejecting what RFC 3629
/// rejects: stray continuation bytes, bytes 0xF8–0xFF, truncated sequences, overlong
/// encodings, surrogates and code points above U+10FFFF.
inline Utf8Char decode_utf8(std::string_view s, std::size_t i) {
  const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char lead = byte(i);
  if (lead < 0x80) return {lead, 1, nullptr};
  if (lead < 0xC0) return {0, 1, "unexpected continuation byte"};
  if (lead >= 0xF8) return {0, 1, "invalid lead byte"};
  const std::size_t length = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : 2;
  char32_t cp = lead & (0x7F >> length);
  for (std::size_t k = 1; k < length; ++k) {
    if (i + k >= s.size() || (byte(i + k) & 0xC0) != 0x80) return {0, k, "truncated sequence"};
    cp = (cp << 6) | (byte(i + k) & 0x3F);
  }
  static constexpr char32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};  // shortest form per length
  if (cp < kMin[length]) return {0, length, "overlong encoding"};
  if (cp >= 0xD800 && cp <= 0xDFFF) return {0, length, "surrogate code point"};
  if (cp > 0x10FFFF) return {0, length, "code point above U+10FFFF"};
  return {cp, length, nullptr};
}

inline void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

/// The text as code points; invalid UTF-8 throws ValueError naming `op` and the byte.
inline std::u32string decode_utf8_text(std::string_view text, const char* op) {
  std::u32string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size();) {
    const Utf8Char c = decode_utf8(text, i);
    HEED_CHECK(!c.error, ValueError, op, ": invalid UTF-8 at byte ", i + 1, ": ", c.error);
    out += c.code_point;
    i += c.length;
  }
  return out;
}

/// Python's str.lower() for one code point, restricted to the scripts of European
/// sentence pairs: ASCII, Latin-1 Supplement (À–Þ except ×), Latin Extended-A
/// (U+0100–U+017F, with İ → "i̇" and Ÿ → ÿ), Greek capitals U+0386–U+03AB and
/// Cyrillic capitals U+0400–U+042F. Other code points are returned unchanged, where
/// Python would lowercase some of them (Armenian, Georgian, Latin Extended-B, …).
/// Capital sigma is handled by the caller (final-sigma rule). U+0130 is the only code
/// point that lowercases to two: U+0069 U+0307, written to `second`.
inline char32_t to_lower(char32_t c, char32_t* second) {
  *second = 0;
  if (c < 0x80) return c >= 'A' && c <= 'Z' ? c + 32 : c;
  if (c >= 0xC0 && c <= 0xDE && c != 0xD7) return c + 32;
  if (c >= 0x100 && c <= 0x17F) {
    if (c == 0x130) {  // İ → i + combining dot above
      *second = 0x307;
      return U'i';
    }
    if (c == 0x178) return 0xFF;
    // Pairs (capital, small) start on even code points in U+0100–U+0137 and
    // U+014A–U+0177, on odd ones in U+0139–U+0148 and U+0179–U+017E; ı, ĸ, ŉ, ſ have none.
    const bool even_pairs = c <= 0x137 || (c >= 0x14A && c <= 0x177);
    const bool odd_pairs = (c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E);
    if ((even_pairs && c % 2 == 0) || (odd_pairs && c % 2 == 1)) return c + 1;
    return c;
  }
  if (c == 0x386) return 0x3AC;                               // Ά → ά
  if (c >= 0x388 && c <= 0x38A) return c + 37;                // Έ Ή Ί
  if (c == 0x38C) return 0x3CC;                               // Ό
  if (c == 0x38E || c == 0x38F) return c + 63;                // Ύ Ώ
  if (c >= 0x391 && c <= 0x3AB && c != 0x3A2) return c + 32;  // Α–Ω, Ϊ, Ϋ
  if (c >= 0x400 && c <= 0x40F) return c + 80;                // Ѐ–Џ
  if (c >= 0x410 && c <= 0x42F) return c + 32;                // А–Я
  return c;
}

/// Whether c is a letter to_lower knows (upper or lower case), for the final-sigma rule.
inline bool is_cased_letter(char32_t c) {
  if (c < 0x80) return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z');
  if (c >= 0xC0 && c <= 0x17F) return c != 0xD7 && c != 0xF7;
  return (c >= 0x386 && c <= 0x3CE && c != 0x387) || (c >= 0x400 && c <= 0x45F);
}

/// Splits on every `sep`, keeping empty pieces, as Python's str.split(sep).
inline std::vector<std::string> split(std::string_view s, char sep) {
  std::vector<std::string> parts;
  for (std::size_t start = 0;;) {
    const std::size_t end = s.find(sep, start);
    parts.emplace_back(s.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start));
    if (end == std::string_view::npos) return parts;
    start = end + 1;
  }
}

}  // namespace detail

// ---- preprocess_nmt, tokenize_nmt ------------------------------------------------

/// d2l's preprocess_nmt: U+202F and U+00A0 become ' ', letters are lowercased (see
/// detail::to_lower for the coverage; a capital sigma becomes ς when it follows a
/// letter and no letter follows, σ otherwise, as str.lower() does), and a space is
/// inserted before each , . ! ? whose previous code point is not a space, on the whole
/// text as d2l does ("go.\tva!" → "go .\tva !", "\t." → "\t ."). Invalid UTF-8 throws
/// ValueError.
inline std::string preprocess_nmt(std::string_view text) {
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
inline NmtTokens tokenize_nmt(const std::string& text, std::optional<std::size_t> num_examples = std::nullopt) {
  NmtTokens out;
  const std::vector<std::string> lines = detail::split(text, '\n');
  for (std::size_t i = 0; i < lines.size(); ++i) {
    if (num_examples && *num_examples > 0 && out.source.size() > *num_examples) break;
    const std::vector<std::string> parts = detail::split(lines[i], '\t');
    if (parts.size() < 2) continue;
    out.source.push_back(detail::split(parts[0], ' '));
    out.target.push_back(detail::split(parts[1], ' '));
  }
  return out;
}

// ---- Vocab -----------------------------------------------------------------------

/// d2l's Vocab: index 0 is "<unk>", then the reserved tokens, then the tokens of the
/// corpus by descending frequency, ties in order of first occurrence (Counter plus a
/// stable sort), up to the first token rarer than min_freq. A corpus token equal to a
/// reserved one keeps the reserved index. Unknown tokens map to 0.
///
///   heed::Vocab vocab(source, /*min_freq=*/2, {"<pad>", "<bos>", "<eos>"});
///   std::vector<heed::index_t> ids = vocab[{"go", "."}];
class Vocab {
 public:
  explicit Vocab(const std::vector<std::vector<std::string>>& tokens = {}, index_t min_freq = 0,
                 std::vector<std::string> reserved_tokens = {}) {
    HEED_CHECK(min_freq >= 0, ValueError, "Vocab: min_freq must be >= 0, got ", min_freq);
    // count_corpus: counts, kept in order of first occurrence as collections.Counter.
    std::unordered_map<std::string, std::size_t> slot;
    for (const auto& line : tokens) {
      for (const auto& token : line) {
        const auto [it, fresh] = slot.emplace(token, token_freqs_.size());
        if (fresh)
          token_freqs_.emplace_back(token, 1);
        else
          ++token_freqs_[it->second].second;
      }
    }
    std::stable_sort(token_freqs_.begin(), token_freqs_.end(),
                     [](const auto& a, const auto& b) { return a.second > b.second; });

    add("<unk>");
    for (auto& token : reserved_tokens) {
      HEED_CHECK(!contains(token), ValueError, "Vocab: reserved token '", token, "' appears twice (or is <unk>)");
      add(std::move(token));
    }
    for (const auto& [token, freq] : token_freqs_) {
      if (freq < min_freq) break;
      if (!contains(token)) add(token);
    }
  }

  /// The vocabulary whose idx_to_token() is `tokens` (as a checkpoint stores it): the
  /// same indices, without the corpus frequencies. tokens[0] must be <unk>.
  static Vocab from_idx_to_token(std::vector<std::string> tokens) {
    HEED_CHECK(!tokens.empty() && tokens[0] == "<unk>", ValueError,
               "Vocab::from_idx_to_token: the first token must be <unk>, got ",
               tokens.empty() ? std::string("an empty list") : "'" + tokens[0] + "'");
    Vocab vocab;
    vocab.token_to_idx_.clear(), vocab.idx_to_token_.clear();
    for (auto& token : tokens) {
      HEED_CHECK(!vocab.contains(token), ValueError, "Vocab::from_idx_to_token: token '", token, "' appears twice");
      vocab.add(std::move(token));
    }
    return vocab;
  }

  /// Number of tokens, reserved ones and <unk> included.
  index_t size() const { return static_cast<index_t>(idx_to_token_.size()); }

  /// The index of a token; 0 (<unk>) for a token not in the vocabulary.
  index_t operator[](const std::string& token) const {
    const auto it = token_to_idx_.find(token);
    return it == token_to_idx_.end() ? unk() : it->second;
  }
  std::vector<index_t> operator[](const std::vector<std::string>& tokens) const {
    std::vector<index_t> out;
    out.reserve(tokens.size());
    for (const auto& token : tokens) out.push_back((*this)[token]);
    return out;
  }
  /// vocab[{"go", "."}], as d2l's vocab[['go', '.']].
  std::vector<index_t> operator[](std::initializer_list<std::string> tokens) const {
    return (*this)[std::vector<std::string>(tokens)];
  }

  const std::string& to_tokens(index_t index) const {
    HEED_CHECK(index >= 0 && index < size(), IndexError, "Vocab::to_tokens: index ", index,
               " out of range for a vocabulary of ", size(), " tokens");
    return idx_to_token_[static_cast<std::size_t>(index)];
  }
  std::vector<std::string> to_tokens(const std::vector<index_t>& indices) const {
    std::vector<std::string> out;
    out.reserve(indices.size());
    for (index_t index : indices) out.push_back(to_tokens(index));
    return out;
  }

  /// The index of the unknown token, 0.
  static constexpr index_t unk() { return 0; }
  bool contains(const std::string& token) const { return token_to_idx_.count(token) != 0; }
  const std::vector<std::string>& idx_to_token() const { return idx_to_token_; }
  /// (token, count) of every corpus token, most frequent first, ties in order of first
  /// occurrence: d2l's token_freqs, min_freq not applied.
  const std::vector<std::pair<std::string, index_t>>& token_freqs() const { return token_freqs_; }

 private:
  void add(std::string token) {
    token_to_idx_.emplace(token, size());
    idx_to_token_.push_back(std::move(token));
  }

  std::vector<std::string> idx_to_token_;
  std::unordered_map<std::string, index_t> token_to_idx_;
  std::vector<std::pair<std::string, index_t>> token_freqs_;
};

// ---- truncate_pad, build_array_nmt -----------------------------------------------

/// d2l's truncate_pad: the first num_steps entries of line, padded with padding_token.
inline std::vector<index_t> truncate_pad(std::vector<index_t> line, index_t num_steps, index_t padding_token) {
  HEED_CHECK(num_steps >= 0, ValueError, "truncate_pad: num_steps must be >= 0, got ", num_steps);
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
inline NmtArray build_array_nmt(const std::vector<std::vector<std::string>>& lines, const Vocab& vocab,
                                index_t num_steps) {
  HEED_CHECK(num_steps > 0, ValueError, "build_array_nmt: num_steps must be positive, got ", num_steps);
  HEED_CHECK(vocab.contains("<pad>") && vocab.contains("<eos>"), ValueError,
             "build_array_nmt: the vocabulary needs the reserved tokens <pad> and <eos>");
  const index_t n = static_cast<index_t>(lines.size()), pad = vocab["<pad>"];
  NmtArray out{IndexTensor::empty({n, num_steps}), IndexTensor::empty({n})};
  for (index_t i = 0; i < n; ++i) {
    std::vector<index_t> line = vocab[lines[static_cast<std::size_t>(i)]];
    line.push_back(vocab["<eos>"]);
    line = truncate_pad(std::move(line), num_steps, pad);
    std::copy(line.begin(), line.end(), out.array.data() + i * num_steps);
    out.valid_len.data()[i] = static_cast<index_t>(line.size()) - std::count(line.begin(), line.end(), pad);
  }
  return out;
}

// ---- read_data_nmt ---------------------------------------------------------------

struct ReadNmtOptions {
  /// Skip a malformed line (no tab, invalid UTF-8) instead of throwing FileError.
  bool skip_malformed = false;
  /// Stop after this many sentence pairs (absent: read them all). Blank and skipped
  /// lines do not count, as in tokenize_nmt.
  std::optional<std::size_t> max_pairs;
  /// Where to store the number of lines skipped as malformed (nullptr: nowhere).
  std::size_t* skipped_lines = nullptr;
};

/// Reads a Tatoeba / d2l fra.txt file: UTF-8, one `English<TAB>French` pair per line,
/// further tab-separated columns (attribution) dropped, "\r\n" accepted, empty lines
/// ignored. Returns the pairs as "English\tFrench\n" lines, the text d2l's read_data_nmt
/// returns. A missing or unreadable file, or one that is not a regular file (a
/// directory; a FIFO, which would block), throws FileError naming it; a line without a
/// tab or with invalid UTF-8 throws FileError "<path>:<line>: ..." (1-based) unless
/// options.skip_malformed is set, which skips and counts it.
inline std::string read_data_nmt(const std::string& path, const ReadNmtOptions& options = {}) {
  detail::check_regular_file("read_data_nmt", path);
  std::ifstream in(path, std::ios::binary);
  HEED_CHECK(in, FileError, "read_data_nmt: cannot open ", path);
  std::string text, line;
  std::size_t skipped = 0, pairs = 0;
  for (std::size_t number = 1; (!options.max_pairs || pairs < *options.max_pairs) && std::getline(in, line); ++number) {
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
class NmtDataLoader {
 public:
  class Iterator {
   public:
    using iterator_category = std::input_iterator_tag;
    using value_type = NmtBatch;
    using difference_type = std::ptrdiff_t;
    using pointer = const NmtBatch*;
    using reference = const NmtBatch&;

    Iterator(const NmtDataLoader* loader, index_t index) : loader_(loader), index_(index) { load(); }
    const NmtBatch& operator*() const { return batch_; }
    const NmtBatch* operator->() const { return &batch_; }
    Iterator& operator++() {
      ++index_;
      load();
      return *this;
    }
    bool operator==(const Iterator& other) const { return index_ == other.index_; }
    bool operator!=(const Iterator& other) const { return index_ != other.index_; }

   private:
    void load() {
      if (index_ < loader_->num_batches()) batch_ = loader_->batch(index_);
    }
    const NmtDataLoader* loader_;
    index_t index_;
    NmtBatch batch_;
  };

  /// src, tgt: (n, num_steps); src_valid_len, tgt_valid_len: (n). shuffle = false keeps
  /// the examples in order (d2l's is_train=False).
  NmtDataLoader(IndexTensor src, IndexTensor src_valid_len, IndexTensor tgt, IndexTensor tgt_valid_len,
                index_t batch_size, std::uint64_t seed = Generator::kDefaultSeed, bool shuffle = true)
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
  }

  index_t batch_size() const { return batch_size_; }
  index_t num_examples() const { return src_.size(0); }
  index_t num_batches() const { return (num_examples() + batch_size_ - 1) / batch_size_; }

  /// Reseeds the generator: the next epochs are those of a loader built with `seed`.
  void set_seed(std::uint64_t seed) { gen_.manual_seed(seed); }

  /// Starts an epoch: draws a new random permutation of the examples (Fisher–Yates on
  /// 0..n-1, as torch.randperm each epoch), unless shuffle is off.
  Iterator begin() {
    for (std::size_t i = 0; i < order_.size(); ++i) order_[i] = static_cast<index_t>(i);
    if (shuffle_) {
      for (std::size_t i = order_.size(); i > 1; --i) std::swap(order_[i - 1], order_[gen_.uniform_int(i)]);
    }
    return Iterator(this, 0);
  }
  Iterator end() const { return Iterator(this, num_batches()); }

  /// The example indices of the current epoch, in batch order.
  const std::vector<index_t>& order() const { return order_; }

  /// Batch i (0 <= i < num_batches()) of the current epoch.
  NmtBatch batch(index_t i) const {
    HEED_CHECK(i >= 0 && i < num_batches(), IndexError, "NmtDataLoader::batch: index ", i, " out of range for ",
               num_batches(), " batches");
    const index_t start = i * batch_size_, size = std::min(batch_size_, num_examples() - start);
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

 private:
  IndexTensor src_, src_valid_len_, tgt_, tgt_valid_len_;
  index_t batch_size_;
  bool shuffle_;
  Generator gen_;
  std::vector<index_t> order_;
};

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
inline NmtData load_data_nmt_text(std::string_view raw_text, index_t batch_size, index_t num_steps,
                                  std::optional<std::size_t> num_examples = 600,
                                  std::uint64_t seed = Generator::kDefaultSeed) {
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

/// d2l's load_data_nmt on a fra.txt file (read_data_nmt, reading only the pairs that
/// num_examples lets tokenize_nmt use): the same data as
/// load_data_nmt_text(read_data_nmt(path), ...).
inline NmtData load_data_nmt(const std::string& path, index_t batch_size, index_t num_steps,
                             std::optional<std::size_t> num_examples = 600,
                             std::uint64_t seed = Generator::kDefaultSeed) {
  ReadNmtOptions options;
  if (num_examples && *num_examples > 0) options.max_pairs = *num_examples + 1;
  return load_data_nmt_text(read_data_nmt(path, options), batch_size, num_steps, num_examples, seed);
}

}  // namespace heed

#include "heed/detail/header_end.hpp"
