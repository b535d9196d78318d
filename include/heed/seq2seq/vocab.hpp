// heed/seq2seq/vocab.hpp — d2l's Vocab (d2l 0.17, section 8.2 "Text Preprocessing"):
// tokens to indices and back, built from a tokenized corpus by frequency, or restored
// from the token list a checkpoint stores. The NMT pipeline that uses it is in
// heed/seq2seq/data.hpp.
#pragma once

#include <algorithm>
#include <cstddef>
#include <initializer_list>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "heed/core/error.hpp"
#include "heed/core/shape.hpp"
#include "heed/detail/inline.hpp"

namespace heed {

/// d2l's Vocab: index 0 is "<unk>", then the reserved tokens, then the tokens of the
/// corpus by descending frequency, ties in order of first occurrence (Counter plus a
/// stable sort), up to the first token rarer than min_freq. A corpus token equal to a
/// reserved one keeps the reserved index. Unknown tokens map to 0.
///
///   heed::Vocab vocab(source, /*min_freq=*/2, {"<pad>", "<bos>", "<eos>"});
///   std::vector<heed::index_t> ids = vocab[{"go", "."}];
/// The names of the tokens decoding needs, as a vocabulary spells them: d2l's, or a
/// pretrained model's (MarianMT: unk "<unk>", pad "<pad>", decoding starts from "<pad>",
/// ends at "</s>").
struct SpecialTokens {
  std::string unk = "<unk>";
  std::string pad = "<pad>";  // fills sources and targets to a batch's length
  std::string bos = "<bos>";  // the decoder's first input (MarianMT's decoder_start_token)
  std::string eos = "<eos>";  // ends every source sentence and every translation
};

class Vocab {
 public:
  explicit Vocab(const std::vector<std::vector<std::string>>& tokens = {}, index_t min_freq = 0,
                 std::vector<std::string> reserved_tokens = {});

  /// The vocabulary whose idx_to_token() is `tokens` (as a checkpoint stores it): the
  /// same indices, without the corpus frequencies. tokens[0] must be <unk>.
  static Vocab from_idx_to_token(std::vector<std::string> tokens);
  /// The vocabulary whose idx_to_token() is `tokens`, its special tokens named by
  /// `specials` (each must be among the tokens, the unknown one anywhere): a pretrained
  /// model's, whose ids its embeddings fix.
  static Vocab from_idx_to_token(std::vector<std::string> tokens, SpecialTokens specials);

  /// Number of tokens, reserved ones and <unk> included.
  index_t size() const { return static_cast<index_t>(idx_to_token_.size()); }

  /// The index of a token; 0 (<unk>) for a token not in the vocabulary.
  index_t operator[](const std::string& token) const {
    const auto it = token_to_idx_.find(token);
    return it == token_to_idx_.end() ? unk_index_ : it->second;
  }
  std::vector<index_t> operator[](const std::vector<std::string>& tokens) const;
  /// vocab[{"go", "."}], as d2l's vocab[['go', '.']].
  std::vector<index_t> operator[](std::initializer_list<std::string> tokens) const {
    return (*this)[std::vector<std::string>(tokens)];
  }

  const std::string& to_tokens(index_t index) const {
    HEED_CHECK(index >= 0 && index < size(), IndexError, "Vocab::to_tokens: index ", index,
               " out of range for a vocabulary of ", size(), " tokens");
    return idx_to_token_[static_cast<std::size_t>(index)];
  }
  std::vector<std::string> to_tokens(const std::vector<index_t>& indices) const;

  /// The index of the unknown token in d2l's vocabularies, 0 (unk_index() is this
  /// vocabulary's).
  static constexpr index_t unk() { return 0; }
  /// The names of the special tokens, and their indices (that of <unk> for one absent).
  const SpecialTokens& special_tokens() const { return specials_; }
  index_t unk_index() const { return unk_index_; }
  index_t pad_index() const { return (*this)[specials_.pad]; }
  index_t bos_index() const { return (*this)[specials_.bos]; }
  index_t eos_index() const { return (*this)[specials_.eos]; }
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
  SpecialTokens specials_;
  index_t unk_index_ = 0;
};

#if HEED_NON_TEMPLATE_DEFINITIONS

HEED_INLINE Vocab::Vocab(const std::vector<std::vector<std::string>>& tokens, index_t min_freq,
                         std::vector<std::string> reserved_tokens) {
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

HEED_INLINE Vocab Vocab::from_idx_to_token(std::vector<std::string> tokens) {
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

HEED_INLINE Vocab Vocab::from_idx_to_token(std::vector<std::string> tokens, SpecialTokens specials) {
  const auto it = std::find(tokens.begin(), tokens.end(), specials.unk);
  HEED_CHECK(it != tokens.end(), ValueError, "Vocab::from_idx_to_token: no unknown token '", specials.unk,
             "' among the ", tokens.size(), " tokens");
  const auto unk = static_cast<index_t>(it - tokens.begin());
  Vocab vocab;
  vocab.token_to_idx_.clear(), vocab.idx_to_token_.clear();
  for (auto& token : tokens) {
    HEED_CHECK(!vocab.contains(token), ValueError, "Vocab::from_idx_to_token: token '", token, "' appears twice");
    vocab.add(std::move(token));
  }
  for (const std::string* special : {&specials.pad, &specials.bos, &specials.eos})
    HEED_CHECK(vocab.contains(*special), ValueError, "Vocab::from_idx_to_token: no special token '", *special,
               "' among the ", vocab.size(), " tokens");
  vocab.specials_ = std::move(specials);
  vocab.unk_index_ = unk;
  return vocab;
}
HEED_INLINE std::vector<index_t> Vocab::operator[](const std::vector<std::string>& tokens) const {
  std::vector<index_t> out;
  out.reserve(tokens.size());
  for (const auto& token : tokens) out.push_back((*this)[token]);
  return out;
}

HEED_INLINE std::vector<std::string> Vocab::to_tokens(const std::vector<index_t>& indices) const {
  std::vector<std::string> out;
  out.reserve(indices.size());
  for (index_t index : indices) out.push_back(to_tokens(index));
  return out;
}

#endif  // HEED_NON_TEMPLATE_DEFINITIONS

}  // namespace heed
