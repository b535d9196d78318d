// heed/seq2seq/sentencepiece.hpp (built with HEED_WITH_SENTENCEPIECE): a model trained on
// the built-in corpus, its reserved pieces, encoding and decoding, the serialized model,
// and bad arguments and bytes.
#include <heed/seq2seq/corpus.hpp>
#include <heed/seq2seq/data.hpp>
#include <heed/seq2seq/sentencepiece.hpp>

#include <string>
#include <vector>

#include "check.hpp"

namespace {

/// The French side of the built-in corpus, as d2l's pipeline prepares it.
std::vector<std::string> french_sentences() {
  const heed::NmtTokens tokens = heed::tokenize_nmt(heed::preprocess_nmt(heed::builtin_fra_eng()), std::nullopt);
  std::vector<std::string> sentences;
  for (const auto& words : tokens.target) {
    std::string sentence;
    for (const auto& w : words) sentence += (sentence.empty() ? "" : " ") + w;
    sentences.push_back(sentence);
  }
  return sentences;
}

}  // namespace

TEST_CASE("SentencePiece trains a model whose pieces round-trip the corpus, ids laid out as d2l's Vocab",
          "[data][sentencepiece]") {
  const std::vector<std::string> sentences = french_sentences();
  REQUIRE(sentences.size() > 100);
  const heed::SentencePiece sp = heed::SentencePiece::train(sentences, 120);
  CHECK(sp.size() <= 120);
  CHECK(sp.size() > 20);
  const heed::Vocab vocab = sp.vocab();
  CHECK(vocab.size() == sp.size());
  CHECK(vocab.to_tokens(0) == "<unk>");
  CHECK(vocab["<pad>"] == 1);
  CHECK(vocab["<bos>"] == 2);
  CHECK(vocab["<eos>"] == 3);
  std::size_t pieces_total = 0, words_total = 0;
  for (const std::string& s : sentences) {
    const std::vector<std::string> pieces = sp.encode(s);
    pieces_total += pieces.size();
    words_total += heed::detail::split(s, ' ').size();
    for (const std::string& p : pieces) {
      CHECK(p.find(' ') == std::string::npos);  // joined by spaces, they split back
      CHECK(vocab[p] >= 4);                     // known, not <unk>
    }
    REQUIRE(sp.decode(pieces) == s);
  }
  // Subwords: more pieces than words, but not one per character.
  CHECK(pieces_total > words_total);
  CHECK(pieces_total < 4 * words_total);
  // An unseen word still encodes, in known pieces, and decodes to itself.
  const std::vector<std::string> unseen = sp.encode("nous sommes contents .");
  CHECK(sp.decode(unseen) == "nous sommes contents .");
  CHECK(sp.encode("").empty());

  // The serialized model is the whole model; training is deterministic.
  const heed::SentencePiece again = heed::SentencePiece::from_serialized(sp.serialized());
  CHECK(again.encode(sentences[5]) == sp.encode(sentences[5]));
  CHECK(heed::SentencePiece::train(sentences, 120).serialized() == sp.serialized());
  CHECK(sp.serialized().size() < 64 * 1024);  // the identity normaliser: no 230 KB character map
  const heed::SentencePiece bpe = heed::SentencePiece::train(sentences, 120, "bpe");
  CHECK(bpe.decode(bpe.encode(sentences[7])) == sentences[7]);
}

TEST_CASE("SentencePiece refuses bad arguments and bytes that are not its model", "[data][sentencepiece][errors]") {
  const std::vector<std::string> sentences = {"a b c", "a b d"};
  CHECK_ERROR(heed::ValueError, "SentencePiece::train: vocab_size must be in [5, 2^24]",
              heed::SentencePiece::train(sentences, 4));
  CHECK_ERROR(heed::ValueError, "SentencePiece::train: model_type must be unigram or bpe, got 'word'",
              heed::SentencePiece::train(sentences, 10, "word"));
  CHECK_ERROR(heed::ValueError, "SentencePiece::train: no sentences to train on", heed::SentencePiece::train({}, 10));
  CHECK_ERROR(heed::FileError, "ckpt.safetensors: heed.tgt_spm: not a SentencePiece model (7 bytes)",
              heed::SentencePiece::from_serialized("garbage", "ckpt.safetensors: heed.tgt_spm"));
  CHECK_ERROR(heed::FileError, "x: not a SentencePiece model (0 bytes)", heed::SentencePiece::from_serialized("", "x"));
}
