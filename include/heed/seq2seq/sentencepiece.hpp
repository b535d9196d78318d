// heed/seq2seq/sentencepiece.hpp — subword tokens from SentencePiece (Kudo and
// Richardson, 2018), so that a rare word is pieces of known ones instead of <unk>.
// Optional: it needs SentencePiece (Debian: libsentencepiece-dev) and the CMake option
// HEED_WITH_SENTENCEPIECE, whose target heed::sentencepiece brings it; heed::heed
// itself needs nothing but Eigen. The translation examples use it with
// train_translator --sentencepiece N.
//
//   auto sp = heed::SentencePiece::train(french_sentences, /*vocab_size=*/8000);
//   std::vector<std::string> pieces = sp.encode("je suis calme .");  // "▁je", "▁suis", ...
//   std::string text = sp.decode(pieces);                            // "je suis calme ."
//   heed::Vocab vocab = sp.vocab();   // the pieces in id order: <unk> 0, <pad> 1, <bos> 2, <eos> 3
//
// The ids are laid out as d2l's Vocab lays out the reserved tokens, so that a model's
// vocabulary is sp.vocab() and the NMT pipeline (heed/seq2seq/data.hpp) runs on the
// pieces as on words: a piece never holds a space ("▁" marks a word's start), so pieces
// joined by spaces split back into the same pieces. serialized() is the whole model
// (its pieces, their scores and its settings: about 1 KB at 90 pieces, growing with the
// pieces), which a checkpoint can keep (base64 in its metadata, heed/io/base64.hpp) so
// that it is a complete translator.
// Training is SentencePiece's, on one thread so that the same sentences always give the
// same model, with the identity normaliser: the text is taken as given (d2l's
// preprocess_nmt has lowercased it and spaced its punctuation).
#pragma once

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "heed/core/error.hpp"
#include "heed/seq2seq/vocab.hpp"

namespace heed {

class SentencePiece {
 public:
  /// A model of at most vocab_size pieces (fewer when the sentences hold fewer), the four
  /// reserved ones included, trained on `sentences`; model_type "unigram" (the default)
  /// or "bpe".
  static SentencePiece train(const std::vector<std::string>& sentences, index_t vocab_size,
                             const std::string& model_type = "unigram") {
    constexpr const char* op = "SentencePiece::train";
    HEED_CHECK(vocab_size >= 5 && vocab_size <= (index_t(1) << 24), ValueError, op,
               ": vocab_size must be in [5, 2^24] (4 reserved pieces and one more at least), got ", vocab_size);
    HEED_CHECK(model_type == "unigram" || model_type == "bpe", ValueError, op,
               ": model_type must be unigram or bpe, got '", model_type, "'");
    HEED_CHECK(!sentences.empty(), ValueError, op, ": no sentences to train on");
    Sentences input(sentences);
    std::string serialized;
    const sentencepiece::util::Status status = sentencepiece::SentencePieceTrainer::Train(
        {{"vocab_size", std::to_string(vocab_size)},
         {"model_type", model_type},
         {"hard_vocab_limit", "false"},  // a small corpus may hold fewer pieces
         {"character_coverage", "1.0"},
         {"normalization_rule_name", "identity"},
         {"num_threads", "1"},
         {"minloglevel", "2"},
         {"unk_id", "0"},
         {"pad_id", "1"},
         {"bos_id", "2"},
         {"eos_id", "3"},
         {"unk_piece", "<unk>"},
         {"pad_piece", "<pad>"},
         {"bos_piece", "<bos>"},
         {"eos_piece", "<eos>"}},
        &input, &serialized);
    HEED_CHECK(status.ok(), ValueError, op, ": SentencePiece failed on ", sentences.size(),
               " sentences: ", status.ToString());
    return from_serialized(serialized, op);
  }

  /// The model whose serialized() is `bytes` (or a SentencePiece .model file's bytes).
  /// Bytes that are not one, or a model without heed's reserved pieces, throw FileError
  /// naming `what`.
  static SentencePiece from_serialized(std::string bytes, std::string_view what = "SentencePiece") {
    SentencePiece out = from_pretrained(std::move(bytes), what);
    static const char* const kReserved[] = {"<unk>", "<pad>", "<bos>", "<eos>"};
    for (int id = 0; id < 4; ++id)
      HEED_CHECK(out.processor_->GetPieceSize() > id && out.processor_->IdToPiece(id) == kReserved[id], FileError, what,
                 ": a SentencePiece model whose piece ", id, " is not ", kReserved[id]);
    return out;
  }

  /// A model of any pieces (a pretrained model's source.spm, whose pieces its own
  /// vocabulary maps to ids: vocab() is not that vocabulary). Bytes that are not a model
  /// throw FileError naming `what`.
  static SentencePiece from_pretrained(std::string bytes, std::string_view what = "SentencePiece") {
    auto processor = std::make_shared<sentencepiece::SentencePieceProcessor>();
    const sentencepiece::util::Status status = processor->LoadFromSerializedProto(bytes);
    HEED_CHECK(status.ok(), FileError, what, ": not a SentencePiece model (", bytes.size(),
               " bytes): ", status.ToString());
    SentencePiece out;
    out.processor_ = std::move(processor);
    out.serialized_ = std::move(bytes);
    return out;
  }

  /// The pieces of `text` (none for an empty one).
  std::vector<std::string> encode(std::string_view text) const {
    std::vector<std::string> pieces;
    const sentencepiece::util::Status status = processor_->Encode(text, &pieces);
    HEED_CHECK(status.ok(), ValueError, "SentencePiece::encode: ", status.ToString());
    return pieces;
  }

  /// The text of `pieces`, as encode's input (the reserved pieces and unknown ones give
  /// nothing or ⁇, as SentencePiece writes them).
  std::string decode(const std::vector<std::string>& pieces) const {
    std::string text;
    const sentencepiece::util::Status status = processor_->Decode(pieces, &text);
    HEED_CHECK(status.ok(), ValueError, "SentencePiece::decode: ", status.ToString());
    return text;
  }

  /// Every piece in id order: a Vocab with <unk> 0, <pad> 1, <bos> 2, <eos> 3 (a model
  /// from from_serialized).
  Vocab vocab() const {
    std::vector<std::string> pieces;
    for (int id = 0; id < processor_->GetPieceSize(); ++id) pieces.push_back(processor_->IdToPiece(id));
    return Vocab::from_idx_to_token(std::move(pieces));
  }

  index_t size() const { return processor_->GetPieceSize(); }
  /// The model as bytes: from_serialized(serialized()) is the same model.
  const std::string& serialized() const { return serialized_; }

 private:
  SentencePiece() = default;

  /// The sentences as SentencePiece's trainer reads them.
  class Sentences : public sentencepiece::SentenceIterator {
   public:
    explicit Sentences(const std::vector<std::string>& sentences) : sentences_(sentences) {}
    bool done() const override { return at_ >= sentences_.size(); }
    void Next() override { ++at_; }
    const std::string& value() const override { return sentences_[at_]; }
    sentencepiece::util::Status status() const override { return {}; }

   private:
    const std::vector<std::string>& sentences_;
    std::size_t at_ = 0;
  };

  std::shared_ptr<const sentencepiece::SentencePieceProcessor> processor_;
  std::string serialized_;
};

}  // namespace heed
