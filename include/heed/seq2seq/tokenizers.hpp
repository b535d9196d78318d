// heed/seq2seq/tokenizers.hpp — how a translator's sentences become its tokens and back:
// d2l's words, or the pieces of two SentencePiece models (heed/seq2seq/sentencepiece.hpp,
// in a build with HEED_WITH_SENTENCEPIECE) kept in its checkpoint's metadata, each with
// its checksum, and checked against the vocabularies beside them when loaded.
//
// Like sentencepiece.hpp, this header is left out of heed.hpp: what it holds depends on
// HEED_WITH_SENTENCEPIECE (a build without it reads and writes checkpoints of words, and
// refuses those of pieces with a message saying so).
#pragma once

#include "heed/detail/header_begin.hpp"

#include <cstdint>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "heed/io/base64.hpp"
#include "heed/io/crc32c.hpp"
#include "heed/io/safetensors.hpp"
#include "heed/io/safetensors_reader.hpp"
#include "heed/io/training_checkpoint.hpp"
#include "heed/seq2seq/data.hpp"
#include "heed/seq2seq/text.hpp"
#include "heed/seq2seq/vocab.hpp"
#ifdef HEED_WITH_SENTENCEPIECE
#include "heed/seq2seq/sentencepiece.hpp"
#endif

namespace heed {

namespace detail {

inline std::string join_lines(const std::vector<std::string>& tokens) {
  std::string out;
  for (const auto& t : tokens) out += t + "\n";
  return out;
}

inline std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

/// The vocabularies as metadata, d2l's idx_to_token one per line.
inline std::map<std::string, std::string> vocab_metadata(const Vocab& src, const Vocab& tgt) {
  return {{"src_vocab", join_lines(src.idx_to_token())}, {"tgt_vocab", join_lines(tgt.idx_to_token())}};
}

}  // namespace detail

/// How a model's sentences become its tokens and back: d2l's words, or the pieces of the
/// SentencePiece models a checkpoint holds (train_translator --sentencepiece N, in a build
/// with HEED_WITH_SENTENCEPIECE), base64 in its metadata under heed.src_spm / heed.tgt_spm,
/// each with the CRC-32C of its bytes under heed.src_spm_crc32c / heed.tgt_spm_crc32c.
class Tokenizers {
 public:
  static constexpr const char* kSourceKey = "heed.src_spm";
  static constexpr const char* kTargetKey = "heed.tgt_spm";
  static constexpr const char* kSourceCrcKey = "heed.src_spm_crc32c";
  static constexpr const char* kTargetCrcKey = "heed.tgt_spm_crc32c";

  bool subwords() const {
#ifdef HEED_WITH_SENTENCEPIECE
    return src_ != nullptr;
#else
    return false;
#endif
  }

  /// A pretrained model's tokens (MarianMT's source.spm and target.spm, whose pieces the
  /// model's own vocabulary maps to ids): sentences are encoded as they are (no
  /// preprocess_nmt), a leading ">>fra<<" language code kept as one token. FileError
  /// naming `what_source` / `what_target` for bytes that are not SentencePiece models.
  static Tokenizers pretrained([[maybe_unused]] std::string source_model, [[maybe_unused]] std::string target_model,
                               const std::string& what_source, [[maybe_unused]] const std::string& what_target) {
#ifdef HEED_WITH_SENTENCEPIECE
    Tokenizers t;
    t.src_ =
        std::make_shared<const SentencePiece>(SentencePiece::from_pretrained(std::move(source_model), what_source));
    t.tgt_ =
        std::make_shared<const SentencePiece>(SentencePiece::from_pretrained(std::move(target_model), what_target));
    t.pretrained_ = true;
    return t;
#else
    throw FileError(what_source + ": a SentencePiece model, which this build cannot read (configure with " +
                    "-DHEED_WITH_SENTENCEPIECE=ON)");
#endif
  }
  /// Whether these are a pretrained model's (pretrained()).
  bool is_pretrained() const { return pretrained_; }

  /// A raw sentence as the model's source tokens: d2l's words (preprocess_nmt, split on
  /// spaces) or their pieces; a pretrained model's pieces of the sentence as it is, after
  /// its language code (a leading ">>xx<<", MarianMT's multilingual targets), as
  /// transformers' MarianTokenizer splits it.
  std::vector<std::string> sentence_tokens(const std::string& sentence) const {
    if (!pretrained_) return source_tokens(detail::split(preprocess_nmt(sentence), ' '));
    std::vector<std::string> out;
    std::string text = sentence;
    // MarianTokenizer's ">>.+<<": from the first ">>" to the last "<<" after it (greedy),
    // a token when the sentence starts with it, removed wherever it is.
    const std::size_t open = text.find(">>");
    const std::size_t close = open == std::string::npos ? std::string::npos : text.rfind("<<");
    if (close != std::string::npos && close > open + 2) {
      if (open == 0) out.push_back(text.substr(0, close + 2));
      text.erase(open, close + 2 - open);
    }
#ifdef HEED_WITH_SENTENCEPIECE
    for (std::string& piece : src_->encode(text)) out.push_back(std::move(piece));
#endif
    return out;
  }

  /// SentencePiece models of vocab_size pieces each, trained on the two sides of `words`.
  static Tokenizers train([[maybe_unused]] const NmtTokens& words, [[maybe_unused]] index_t vocab_size) {
#ifdef HEED_WITH_SENTENCEPIECE
    const auto sentences = [](const std::vector<std::vector<std::string>>& side) {
      std::vector<std::string> out;
      for (const auto& w : side) out.push_back(detail::join_words(w));
      return out;
    };
    Tokenizers t;
    t.src_ = std::make_shared<const SentencePiece>(SentencePiece::train(sentences(words.source), vocab_size));
    t.tgt_ = std::make_shared<const SentencePiece>(SentencePiece::train(sentences(words.target), vocab_size));
    return t;
#else
    throw ValueError("--sentencepiece: this build has no SentencePiece (configure with -DHEED_WITH_SENTENCEPIECE=ON)");
#endif
  }

  /// The models a checkpoint's metadata holds, if any, checked against their checksums
  /// where the metadata has them (checkpoints written before the checksums have none).
  /// check_vocabularies() then checks them against the vocabularies beside them.
  static Tokenizers from_metadata(const std::map<std::string, std::string>& metadata, const std::string& path) {
    const auto src = metadata.find(kSourceKey), tgt = metadata.find(kTargetKey);
    // A checksum without its model: the model was taken out, and the vocabulary left is
    // its pieces, which d2l's words would read as <unk>.
    for (const auto& [key, crc_key] : {std::pair{kSourceKey, kSourceCrcKey}, std::pair{kTargetKey, kTargetCrcKey}})
      if (metadata.count(crc_key) && !metadata.count(key))
        throw FileError(path + ": has " + crc_key + " but no " + key +
                        ": the SentencePiece model it is the checksum of was removed from the checkpoint");
    if (src == metadata.end() && tgt == metadata.end()) return {};
    if (src == metadata.end() || tgt == metadata.end())
      throw FileError(path + ": holds one SentencePiece model of two (" + kSourceKey + ", " + kTargetKey + ")");
#ifdef HEED_WITH_SENTENCEPIECE
    Tokenizers t;
    const auto model = [&](const char* key, const char* crc_key, const std::string& text) {
      const std::string what = path + ": " + key;
      std::string bytes = base64_decode(text, what);
      if (const auto crc = metadata.find(crc_key); crc != metadata.end()) {
        std::uint32_t expected = 0;
        if (!detail::parse_crc(crc->second, expected))
          throw FileError(path + ": " + crc_key + " is " + detail::quoted(crc->second) +
                          ", not a CRC-32C (8 hex digits)");
        const std::uint32_t actual = crc32c(bytes.data(), bytes.size());
        if (actual != expected)
          throw FileError(what + " does not match its checksum " + crc_key + " (CRC-32C " + detail::format_crc(actual) +
                          " of its " + std::to_string(bytes.size()) + " bytes, the metadata says " +
                          detail::format_crc(expected) + "): the model was changed or replaced");
      }
      return std::make_shared<const SentencePiece>(SentencePiece::from_serialized(std::move(bytes), what));
    };
    t.src_ = model(kSourceKey, kSourceCrcKey, src->second);
    t.tgt_ = model(kTargetKey, kTargetCrcKey, tgt->second);
    return t;
#else
    throw FileError(path + ": a model of SentencePiece tokens, which this build cannot read (configure with " +
                    "-DHEED_WITH_SENTENCEPIECE=ON)");
#endif
  }

  /// The models as metadata, each with its checksum (nothing for words).
  std::map<std::string, std::string> metadata() const {
    if (pretrained_) return {};  // a pretrained model's tokenizers are its directory's files (save_marian)
#ifdef HEED_WITH_SENTENCEPIECE
    if (subwords()) {
      const auto crc = [](const std::string& bytes) { return detail::format_crc(crc32c(bytes.data(), bytes.size())); };
      return {{kSourceKey, base64_encode(src_->serialized())},
              {kTargetKey, base64_encode(tgt_->serialized())},
              {kSourceCrcKey, crc(src_->serialized())},
              {kTargetCrcKey, crc(tgt_->serialized())}};
    }
#endif
    return {};
  }

  /// Whether a vocabulary is a model's and these tokens' (src_vocab, tgt_vocab of a
  /// checkpoint): for SentencePiece, every piece at its id, so that a model swapped with
  /// the other language's, taken from another run, or added to a checkpoint of words is
  /// refused; for words, the reserved tokens, and no vocabulary of pieces whose models
  /// were removed. Throws FileError naming `path`, the keys and what differs.
  void check_vocabularies(const Vocab& src, const Vocab& tgt, const std::string& path) const {
#ifdef HEED_WITH_SENTENCEPIECE
    if (pretrained_) return;  // the model's own vocabulary maps pieces to ids
    if (subwords()) {
      check_pieces(*src_, src, kSourceKey, "src_vocab", path);
      check_pieces(*tgt_, tgt, kTargetKey, "tgt_vocab", path);
      return;
    }
#endif
    check_words(src, "src_vocab", kSourceKey, path);
    check_words(tgt, "tgt_vocab", kTargetKey, path);
  }

  /// The vocabulary of one side of the model's tokens: its SentencePiece model's pieces,
  /// or d2l's of the words.
  Vocab vocab(const std::vector<std::vector<std::string>>& side, [[maybe_unused]] bool target, index_t min_freq) const {
#ifdef HEED_WITH_SENTENCEPIECE
    if (subwords()) return (target ? tgt_ : src_)->vocab();
#endif
    return Vocab(side, min_freq, {"<pad>", "<bos>", "<eos>"});
  }

  /// A sentence's words (preprocess_nmt'ed and split) as the model's source tokens.
  std::vector<std::string> source_tokens(const std::vector<std::string>& words) const {
#ifdef HEED_WITH_SENTENCEPIECE
    if (subwords()) return src_->encode(detail::join_words(words));
#endif
    return words;
  }

  /// A target sentence (a translation's beginning: PredictOptions::target_prefix) as the
  /// model's target tokens: d2l's words, their pieces, or a pretrained model's pieces of
  /// the text as written.
  std::vector<std::string> target_tokens(const std::string& text) const {
#ifdef HEED_WITH_SENTENCEPIECE
    if (pretrained_) return tgt_->encode(text);
    if (subwords()) return tgt_->encode(detail::join_words(detail::split(preprocess_nmt(text), ' ')));
#endif
    return detail::split(preprocess_nmt(text), ' ');
  }

  /// Pairs of words as the model's tokens.
  NmtTokens to_model(const NmtTokens& words) const {
    if (!subwords()) return words;
    NmtTokens out;
#ifdef HEED_WITH_SENTENCEPIECE
    for (const auto& w : words.source)
      out.source.push_back(pretrained_ ? sentence_tokens(detail::join_words(w)) : src_->encode(detail::join_words(w)));
    for (const auto& w : words.target) out.target.push_back(tgt_->encode(detail::join_words(w)));
#endif
    return out;
  }

  /// The model's target tokens as text in d2l's words, joined by spaces.
  std::string target_text(const std::vector<std::string>& tokens) const {
#ifdef HEED_WITH_SENTENCEPIECE
    if (subwords()) return tgt_->decode(tokens);
#endif
    return detail::join_words(tokens);
  }

 private:
  static constexpr const char* kReserved[] = {"<unk>", "<pad>", "<bos>", "<eos>"};

  /// d2l's words need the reserved tokens (decoding starts with <bos>, stops at <eos>,
  /// pads with <pad>), and are never SentencePiece's pieces: those start words with "▁",
  /// which d2l's preprocessing never writes. A vocabulary of pieces without its model is
  /// refused, since every word would be <unk>.
  static void check_words(const Vocab& vocab, const char* vocab_key, const char* model_key, const std::string& path) {
    for (const char* token : kReserved)
      if (!vocab.contains(token)) throw FileError(path + ": " + vocab_key + " has no " + token + " token");
    index_t marked = 0;  // tokens that begin with "▁" (U+2581), SentencePiece's mark of a word's start
    for (const std::string& token : vocab.idx_to_token()) marked += token.rfind("\xe2\x96\x81", 0) == 0 ? 1 : 0;
    // A fifth or more of a model's pieces begin words (on the built-in corpus, 22 % of
    // 50 pieces, 40 % of 90); a tenth is far from a stray "▁" in a corpus of words.
    if (marked > 0 && 10 * marked >= vocab.size() - 4)
      throw FileError(path + ": " + vocab_key + " holds SentencePiece pieces (" + std::to_string(marked) + " of its " +
                      std::to_string(vocab.size()) + " tokens begin with \xe2\x96\x81) but " +
                      "the checkpoint has no " + model_key +
                      ": its SentencePiece models were removed, and words would be read as <unk>");
  }

#ifdef HEED_WITH_SENTENCEPIECE
  /// The vocabulary must be the model's pieces in id order: its size, the reserved ids,
  /// then every piece.
  static void check_pieces(const SentencePiece& model, const Vocab& vocab, const char* model_key, const char* vocab_key,
                           const std::string& path) {
    const std::string what = path + ": " + model_key + " does not match " + vocab_key + ": ";
    if (model.size() != vocab.size())
      throw FileError(what + std::to_string(model.size()) + " pieces, vocabulary of " + std::to_string(vocab.size()) +
                      " tokens");
    for (index_t id = 0; id < 4; ++id) {
      const char* token = kReserved[id];
      if (!vocab.contains(token) || vocab[token] != id)
        throw FileError(what + token + " is piece " + std::to_string(id) + " of the model, " +
                        (vocab.contains(token) ? "token " + std::to_string(vocab[token]) : "no token") +
                        " of the vocabulary");
    }
    const Vocab pieces = model.vocab();
    for (index_t id = 4; id < vocab.size(); ++id)
      if (pieces.to_tokens(id) != vocab.to_tokens(id))
        throw FileError(what + "piece " + std::to_string(id) + " is " + detail::quoted(pieces.to_tokens(id)) +
                        ", token " + std::to_string(id) + " is " + detail::quoted(vocab.to_tokens(id)) +
                        " (a model of another language or run)");
  }
#endif

#ifdef HEED_WITH_SENTENCEPIECE
 public:
  /// The SentencePiece models (null for words).
  const std::shared_ptr<const SentencePiece>& source_model() const { return src_; }
  const std::shared_ptr<const SentencePiece>& target_model() const { return tgt_; }

 private:
  std::shared_ptr<const SentencePiece> src_, tgt_;
#endif
  bool pretrained_ = false;
};

}  // namespace heed

#include "heed/detail/header_end.hpp"
