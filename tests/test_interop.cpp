// PyTorch -> heed: d2l's two English-to-French models, trained with d2l's own PyTorch
// code and saved as safetensors by tests/data/make_interop_golden.py, load into heed's
// matching models, which then give d2l's logits and the same greedy translations.
//
// The checkpoints carry what heed's translate example writes into its own: the model
// kind (heed.model), the vocabularies (src_vocab, tgt_vocab: idx_to_token, one token per
// line) and num_steps, so the models are rebuilt from the files alone.
#include <heed/heed.hpp>
#include <heed/io/checkpoint.hpp>
#include <heed/io/safetensors.hpp>
#include <heed/seq2seq/encoder_decoder.hpp>
#include <heed/seq2seq/predict.hpp>

#include "golden.hpp"

#include <cstdint>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

namespace {

using heed::index_t;
using heed_test::check_close;
using heed_test::Golden;
using heed_test::tolerance;

using BahdanauNet = heed::EncoderDecoder<float, heed::Seq2SeqEncoder<float>, heed::Seq2SeqAttentionDecoder<float>>;
using TransformerNet = heed::EncoderDecoder<float, heed::TransformerEncoder<float>, heed::TransformerDecoder<float>>;

// make_interop_golden.py's hyper-parameters (dropout 0).
constexpr index_t kEmbed = 16, kHiddens = 16, kLayers = 2, kFfnHiddens = 32, kHeads = 4, kNumSteps = 10;

// d2l's four test sentences, then four training sentences; the golden file holds their
// source indices (sentence.<i>) and each model's translation (<model>.translation.<i>).
const std::vector<std::string> kSentences = {"go .",      "i lost .",  "he's calm .", "i'm home .",
                                             "i'm ill .", "go home .", "help me .",   "i'm tom ."};

std::string checkpoint_path(const std::string& model) {
  return std::string(HEED_TEST_DATA_DIR) + "/interop_" + model + ".safetensors";
}

std::vector<std::string> split(const std::string& text, char separator) {
  std::vector<std::string> parts;
  std::istringstream in(text);
  for (std::string part; std::getline(in, part, separator);) parts.push_back(part);
  return parts;
}

std::string join(const std::vector<std::string>& words) {
  std::string out;
  for (const auto& w : words) out += (out.empty() ? "" : " ") + w;
  return out;
}

// The vocabulary stored under `key` (idx_to_token, one token per line).
heed::Vocab vocab_from(const std::map<std::string, std::string>& metadata, const std::string& key) {
  const auto it = metadata.find(key);
  REQUIRE(it != metadata.end());
  const std::vector<std::string> tokens = split(it->second, '\n');
  heed::Vocab vocab = heed::Vocab::from_idx_to_token(tokens);
  REQUIRE(vocab.idx_to_token() == tokens);
  return vocab;
}

std::unique_ptr<BahdanauNet> make_net(const heed::Vocab& src, const heed::Vocab& tgt, BahdanauNet*) {
  return heed::make_encoder_decoder<float>(
      std::make_unique<heed::Seq2SeqEncoder<float>>(src.size(), kEmbed, kHiddens, kLayers, 0.0),
      std::make_unique<heed::Seq2SeqAttentionDecoder<float>>(tgt.size(), kEmbed, kHiddens, kLayers, 0.0));
}

std::unique_ptr<TransformerNet> make_net(const heed::Vocab& src, const heed::Vocab& tgt, TransformerNet*) {
  const index_t h = kHiddens;
  return heed::make_encoder_decoder<float>(
      std::make_unique<heed::TransformerEncoder<float>>(src.size(), h, h, h, h, heed::Shape{h}, h, kFfnHiddens, kHeads,
                                                        kLayers, 0.0),
      std::make_unique<heed::TransformerDecoder<float>>(tgt.size(), h, h, h, h, heed::Shape{h}, h, kFfnHiddens, kHeads,
                                                        kLayers, 0.0));
}

std::vector<std::int64_t> values(const heed::IndexTensor& t) {
  return std::vector<std::int64_t>(t.data(), t.data() + t.numel());
}

// The model a checkpoint describes, its parameters loaded, and its vocabularies.
template <typename Net>
struct Loaded {
  std::map<std::string, std::string> metadata;
  heed::Vocab src_vocab, tgt_vocab;
  std::unique_ptr<Net> net;
};

template <typename Net>
Loaded<Net> load(const std::string& model) {
  Loaded<Net> loaded;
  const std::string path = checkpoint_path(model);
  loaded.metadata = heed::read_safetensors_metadata(path);
  REQUIRE(loaded.metadata.count("heed.model") == 1);
  CHECK(loaded.metadata.at("heed.model") == model);
  REQUIRE(loaded.metadata.count("num_steps") == 1);
  CHECK(loaded.metadata.at("num_steps") == std::to_string(kNumSteps));
  loaded.src_vocab = vocab_from(loaded.metadata, "src_vocab");
  loaded.tgt_vocab = vocab_from(loaded.metadata, "tgt_vocab");
  loaded.net = make_net(loaded.src_vocab, loaded.tgt_vocab, static_cast<Net*>(nullptr));
  CHECK(heed::load_checkpoint(*loaded.net, path) == loaded.metadata);
  return loaded;
}

// d2l's logits on the golden batch, in eval mode and, every dropout being 0, in
// training mode (for the Transformer: one causal pass, as in d2l's training mode).
template <typename Net>
void check_logits(Net& net, const Golden& golden, const std::string& model) {
  const heed::IndexTensor enc_X = golden.tensor<std::int64_t>("batch.enc_X");
  const heed::IndexTensor dec_X = golden.tensor<std::int64_t>("batch.dec_X");
  const heed::IndexTensor enc_valid_lens = golden.tensor<std::int64_t>("batch.enc_valid_lens");
  const heed::Tensor<float> expected = golden.tensor<float>(model + ".logits");
  for (const bool training : {false, true}) {
    INFO((training ? "training" : "eval") << " mode");
    net.train(training);
    heed::NoGradGuard no_grad;
    check_close(net(enc_X, dec_X, enc_valid_lens), expected, tolerance<float>());
  }
}

// The greedy translations of the eight sentences, in one batch and one at a time.
template <typename Net>
void check_translations(Loaded<Net>& loaded, const Golden& golden, const std::string& model) {
  const auto batch =
      heed::predict_seq2seq<float>(*loaded.net, kSentences, loaded.src_vocab, loaded.tgt_vocab, kNumSteps);
  REQUIRE(batch.size() == kSentences.size());
  for (std::size_t i = 0; i < kSentences.size(); ++i) {
    const std::vector<std::int64_t> expected =
        values(golden.tensor<std::int64_t>(model + ".translation." + std::to_string(i)));
    INFO("sentence '" << kSentences[i] << "', heed's translation '" << batch[i].text << "', d2l's '"
                      << join(loaded.tgt_vocab.to_tokens(expected)) << "'");
    CHECK(batch[i].tokens == expected);
    const auto single =
        heed::predict_seq2seq<float>(*loaded.net, kSentences[i], loaded.src_vocab, loaded.tgt_vocab, kNumSteps);
    CHECK(single.tokens == expected);
    CHECK(single.text == batch[i].text);
  }
}

template <typename Net>
void check_interop(const std::string& model) {
  const Golden golden("interop_golden.txt");
  Loaded<Net> loaded = load<Net>(model);
  // d2l's vocabularies of the first 200 pairs (min_freq 2): the sentences' source
  // indices are the golden ones.
  CHECK(loaded.src_vocab.size() == 69);
  CHECK(loaded.tgt_vocab.size() == 67);
  for (std::size_t i = 0; i < kSentences.size(); ++i) {
    INFO("sentence '" << kSentences[i] << "'");
    std::vector<std::string> tokens = split(kSentences[i], ' ');
    tokens.push_back("<eos>");
    CHECK(loaded.src_vocab[tokens] == values(golden.tensor<std::int64_t>("sentence." + std::to_string(i))));
  }
  check_logits(*loaded.net, golden, model);
  check_translations(loaded, golden, model);
}

}  // namespace

TEST_CASE("d2l's Bahdanau model trained in PyTorch runs in heed", "[interop]") {
  check_interop<BahdanauNet>("bahdanau");
}

TEST_CASE("d2l's Transformer trained in PyTorch runs in heed", "[interop]") {
  check_interop<TransformerNet>("transformer");
}

TEST_CASE("a PyTorch checkpoint loads only into the model it was saved from", "[interop]") {
  // The Bahdanau checkpoint in a Transformer: the names differ, and nothing is touched.
  Loaded<BahdanauNet> bahdanau = load<BahdanauNet>("bahdanau");
  auto transformer = make_net(bahdanau.src_vocab, bahdanau.tgt_vocab, static_cast<TransformerNet*>(nullptr));
  const auto before = transformer->named_parameters();
  std::vector<std::vector<float>> saved;
  for (const auto& [name, p] : before) saved.emplace_back(p.data(), p.data() + p.numel());
  CHECK_ERROR(heed::FileError, "not parameters of the model",
              heed::load_checkpoint(*transformer, checkpoint_path("bahdanau")));
  std::size_t k = 0;
  for (const auto& [name, p] : transformer->named_parameters()) {
    INFO("parameter " << name);
    CHECK(std::vector<float>(p.data(), p.data() + p.numel()) == saved[k++]);
  }

  // A model of another size: the shapes differ, and the message names one.
  auto wider = heed::make_encoder_decoder<float>(
      std::make_unique<heed::Seq2SeqEncoder<float>>(bahdanau.src_vocab.size(), kEmbed, 2 * kHiddens, kLayers, 0.0),
      std::make_unique<heed::Seq2SeqAttentionDecoder<float>>(bahdanau.tgt_vocab.size(), kEmbed, 2 * kHiddens, kLayers,
                                                             0.0));
  CHECK_ERROR(heed::FileError, "tensor 'decoder.dense.weight': shape (67, 16) in the file, model wants (67, 32)",
              heed::load_checkpoint(*wider, checkpoint_path("bahdanau")));
}
