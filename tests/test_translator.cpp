// heed::Translator (heed/seq2seq/translator.hpp) and the TrainState of a training
// checkpoint (heed/io/training_checkpoint.hpp): checkpoints written before the translator
// moved into the library still load and translate as they did (tests/data's
// translator_v1_*, made by tests/data/make_translator_v1.cpp at bb6ca6e), a saved
// translator loads back the same, and the refusals name the file.
#include <heed/seq2seq/translator.hpp>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "check.hpp"

namespace {

const std::string kV1Dir = HEED_TEST_DATA_DIR;
const std::vector<std::string> kV1Sentences = {"go .", "i lost .", "he's calm .", "i'm home ."};

std::vector<std::string> v1_texts(heed::Translator& translator) {
  heed::PredictOptions options;
  options.save_attention_weights = false;
  std::vector<std::string> out;
  for (const auto& t : translator.translate(kV1Sentences, options)) out.push_back(t.text);
  return out;
}

}  // namespace

TEST_CASE("A Transformer checkpoint written before the translator moved into the library loads as it did",
          "[seq2seq][translator]") {
  heed::Translator translator = heed::Translator::load(kV1Dir + "/translator_v1_transformer.safetensors");
  CHECK(translator.config().model == "transformer");
  CHECK(translator.config().num_hiddens == 8);
  CHECK(translator.config().num_steps == 6);
  CHECK(translator.num_parameters() == 1776);
  CHECK_FALSE(translator.tokenizers().subwords());
  // What examples/translator.hpp translated from it (make_translator_v1.cpp's output).
  CHECK(v1_texts(translator) == std::vector<std::string>(4, "je il . . . ."));
  heed::PredictOptions options;
  options.save_attention_weights = false;
  CHECK(translator.translate({"go ."}, options)[0].score == Approx(-11.706).margin(5e-4));
  const heed::NetLayout layout =
      heed::net_layout(translator.config(), translator.src_vocab().size(), translator.tgt_vocab().size());
  CHECK(layout.parameters == 1776);
}

TEST_CASE("A train_translator training checkpoint of the old format loads, and its TrainState reads",
          "[seq2seq][translator]") {
  const std::string path = kV1Dir + "/translator_v1_last.safetensors";
  heed::Translator translator = heed::Translator::load(path);  // Adam's state read and dropped
  CHECK(translator.config().model == "bahdanau");
  CHECK(translator.num_parameters() == 1256);
  CHECK(v1_texts(translator) ==
        std::vector<std::string>{"! ! ! ! ! !", "! ! ! <unk> ! <unk>", "! ! ! ! <unk> <unk>", "! ! ! ! ! !"});
  const heed::TrainState state = heed::TrainState::from_metadata(heed::read_safetensors_metadata(path), path);
  CHECK(state.epochs_done == 1);
  CHECK(state.steps_done == 3);
  CHECK(state.epoch_batches_done == 2);
  CHECK(state.best_metric == 12.5);
  CHECK(state.loader_generator == heed::Generator(5).get_state());
  CHECK(state.default_generator == heed::Generator(6).get_state());
  heed::check_train_state(state, {2, 3, 10}, path);
  CHECK_ERROR(heed::FileError, "metadata 'epochs_done' is 1, more than this run's --epochs 0",
              heed::check_train_state(state, {0, 3, 10}, path));
  CHECK_ERROR(heed::FileError, "holds a bahdanau model, not a transformer one",
              heed::Translator::load(path, "transformer"));
  // Its metadata is the state's, key for key: what train_translator wrote by hand before.
  const std::map<std::string, std::string> metadata = state.to_metadata();
  const std::map<std::string, std::string> file = heed::read_safetensors_metadata(path);
  for (const auto& [key, value] : metadata) CHECK(file.at(key) == value);
}

TEST_CASE("A Translator's weights converted to int8 translate in int8 and save a quantised checkpoint",
          "[seq2seq][translator]") {
  heed::Translator translator = heed::Translator::load(kV1Dir + "/translator_v1_transformer.safetensors");
  heed::PredictOptions options;
  options.save_attention_weights = false;
  const double fp32_score = translator.translate({"go ."}, options)[0].score;
  const heed::ConvertedWeights converted = translator.convert_weights_(heed::Precision::int8);
  CHECK(translator.weights_precision() == heed::Precision::int8);
  CHECK(converted.tensors > 0);
  CHECK(translator.num_parameters() == 1776);  // the converted weights counted too
  const auto t = translator.translate({"go ."}, options)[0];
  CHECK(t.score == Approx(fp32_score).epsilon(0.05));
  CHECK(translator.convert_weights_(heed::Precision::int8).tensors == 0);
  CHECK_ERROR(heed::ValueError, "Translator::convert_weights_: the weights are already int8, not bf16",
              translator.convert_weights_(heed::Precision::bf16));
  CHECK_ERROR(heed::ValueError, "Translator::save_marian: a transformer translator is saved with save()",
              translator.save_marian("unused"));

  // Saved, its weights stay int8 (a quarter of the file) and load back as they were.
  const auto path = std::filesystem::temp_directory_path() / "heed_test_translator_int8.safetensors";
  translator.save(path.string());
  const heed::SafetensorsHeader header = heed::read_safetensors_header(path.string());
  CHECK(header.tensors.at("encoder.embedding.weight").dtype == "I8");
  CHECK(header.metadata.at("heed.converted_weights").find("decoder.dense.weight int8\n") != std::string::npos);
  heed::Translator loaded = heed::Translator::load(path.string());
  CHECK(loaded.weights_precision() == heed::Precision::int8);
  CHECK(loaded.num_parameters() == 1776);
  const auto again = loaded.translate({"go ."}, options)[0];
  CHECK(again.tokens == t.tokens);
  CHECK(again.score == t.score);
  CHECK_ERROR(heed::ValueError, "Translator::convert_weights_: the weights are already int8, not bf16",
              loaded.convert_weights_(heed::Precision::bf16));

  heed::TranslatorConfig config;
  config.model = "bahdanau";
  config.num_hiddens = 8, config.embed_size = 4, config.num_layers = 1, config.num_steps = 6;
  heed::Translator bahdanau(config, translator.src_vocab(), translator.tgt_vocab());
  CHECK_THROWS_WITH(bahdanau.convert_weights_(heed::Precision::int8),
                    Catch::Matchers::Contains("decode it in int8 with PredictOptions::precision"));
  // A bahdanau checkpoint with converted weights (its net converted directly) is refused
  // at load: its decoder reads the fp32 weights.
  bahdanau.visit([](auto& net) { heed::convert_weights_(net, heed::Precision::int8); });
  bahdanau.save(path.string());
  CHECK_ERROR(heed::FileError, "a bahdanau translator's decoder reads its fp32 weights itself",
              heed::Translator::load(path.string()));
  std::filesystem::remove(path);
}

TEST_CASE("A Translator saved loads back with the same configuration, vocabularies and translations",
          "[seq2seq][translator]") {
  heed::TranslatorConfig config;
  config.model = "bahdanau";
  config.num_hiddens = 8, config.embed_size = 4, config.num_layers = 1, config.num_steps = 6;
  const heed::Vocab src({{"go", "."}, {"i", "lost", "."}}, 0, {"<pad>", "<bos>", "<eos>"});
  const heed::Vocab tgt({{"va", "!"}, {"j'ai", "perdu", "."}}, 0, {"<pad>", "<bos>", "<eos>"});
  heed::Generator gen(7);
  heed::Translator translator(config, src, tgt, {}, &gen);
  const auto path = std::filesystem::temp_directory_path() / "heed_test_translator.safetensors";
  translator.save(path.string());
  heed::Translator loaded = heed::Translator::load(path.string(), "bahdanau");
  std::filesystem::remove(path);
  CHECK(loaded.metadata() == translator.metadata());
  CHECK(loaded.src_vocab().idx_to_token() == src.idx_to_token());
  CHECK(v1_texts(loaded) == v1_texts(translator));
  CHECK_ERROR(heed::ValueError, "Translator: the model must be transformer or bahdanau, got 'gru'",
              heed::Translator::make_net(
                  [] {
                    heed::TranslatorConfig c;
                    c.model = "gru";
                    return c;
                  }(),
                  4, 4));
}

TEST_CASE("TrainState goes through a checkpoint's metadata and refuses what no run wrote", "[seq2seq][translator]") {
  heed::TrainState state;
  state.epochs_done = 3, state.steps_done = 20, state.epoch_batches_done = 0, state.best_metric = 17.25;
  state.loader_generator = heed::Generator(1).get_state();
  state.default_generator = heed::Generator(2).get_state();
  auto metadata = state.to_metadata();
  CHECK(metadata.count("epoch_batches_done") == 0);
  const heed::TrainState back = heed::TrainState::from_metadata(metadata, "m.safetensors");
  CHECK(back.epochs_done == 3);
  CHECK(back.steps_done == 20);
  CHECK(back.best_metric == 17.25);
  metadata["steps_done"] = "1e3";
  CHECK_ERROR(heed::FileError, "m.safetensors: metadata 'steps_done' is '1e3', not a count",
              heed::TrainState::from_metadata(metadata, "m.safetensors"));
  metadata["steps_done"] = "20";
  metadata.erase("best_bleu");
  CHECK_ERROR(heed::FileError, "no 'best_bleu' in its metadata", heed::TrainState::from_metadata(metadata, "m"));
  CHECK_ERROR(heed::ValueError, "check_train_state: the limits must be", heed::check_train_state(back, {1, 0, 1}, "m"));
}

namespace {

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

// How often `text` occurs as the content of a <text> element of the SVG document.
std::size_t text_elements(const std::string& doc, const std::string& escaped) {
  std::size_t count = 0;
  for (std::size_t at = doc.find(">" + escaped + "</text>"); at != std::string::npos;
       at = doc.find(">" + escaped + "</text>", at + 1))
    ++count;
  return count;
}

// "i'm home ." translated as "je suis chez moi ." by a 2-layer, 2-head Transformer.
heed::Translation<float> made_translation(const heed::Vocab& tgt) {
  heed::Generator gen(3);
  heed::Translation<float> t;
  t.source_tokens = {"i'm", "home", ".", "<eos>"};
  t.tokens = tgt[std::vector<std::string>{"je", "suis", "chez", "moi", "."}];
  t.text = "je suis chez moi .";
  t.encoder_attention = heed::uniform<float>({2, 2, 4, 4}, 0, 1, gen);
  t.self_attention = heed::uniform<float>({2, 2, 6, 6}, 0, 1, gen);  // 5 tokens and <eos>
  t.cross_attention = heed::uniform<float>({2, 2, 6, 4}, 0, 1, gen);
  return t;
}

}  // namespace

TEST_CASE("save_attention_heatmaps names its files after the sentence and labels the axes with the tokens",
          "[seq2seq][translator]") {
  const heed::Vocab tgt({{"je", "suis", "chez", "moi", "."}}, 0, {"<pad>", "<bos>", "<eos>"});
  const heed::Translation<float> t = made_translation(tgt);
  const auto dir = std::filesystem::temp_directory_path() /
                   ("heed_heatmaps_" + std::to_string(reinterpret_cast<std::uintptr_t>(&t)));
  const std::string d = dir.string();
  const auto written = heed::save_attention_heatmaps(t, tgt, d, 1);
  CHECK(written == std::vector<std::string>{d + "/2_i-m-home_encoder_self_attention.svg",
                                            d + "/2_i-m-home_decoder_self_attention.svg",
                                            d + "/2_i-m-home_encoder_decoder_attention.svg"});
  const std::string encoder = read_text(written[0]), self = read_text(written[1]), cross = read_text(written[2]);
  // Encoder self-attention: the source tokens on both axes, <eos> included; a layer per
  // row, a head per column. Its x labels sit under the 2 bottom panels, its y labels
  // left of the 2 rows.
  for (const std::string token : {"i&apos;m", "home", ".", "&lt;eos&gt;"}) {
    INFO(token);
    CHECK(text_elements(encoder, token) == 2 + 2);
    CHECK(text_elements(cross, token) >= 2);
  }
  for (const std::string name : {"layer 1", "layer 2"}) {
    CHECK(text_elements(encoder, name) == 1);
    CHECK(text_elements(self, name) == 1);
    CHECK(text_elements(cross, name) == 1);
  }
  CHECK(text_elements(cross, "head 2") == 2);
  // Decoder: the emitted tokens and <eos> as queries; its self-attention's keys are its
  // inputs, <bos> and the tokens before the last step.
  for (const std::string token : {"je", "suis", "chez", "moi"}) {
    INFO(token);
    CHECK(text_elements(cross, token) == 2);
    CHECK(text_elements(self, token) == 2 + 2);
  }
  CHECK(text_elements(self, "&lt;bos&gt;") == 2);
  CHECK(text_elements(self, "&lt;eos&gt;") == 2);
  CHECK(text_elements(cross, "&lt;eos&gt;") == 2 + 2);  // the last query, and the last source key
  CHECK(text_elements(cross, "Keys (source)") == 2);
  CHECK(text_elements(cross, "Queries (output)") == 2);
  CHECK(text_elements(self, "Keys (inputs)") == 2);
  // Without the vocabulary, a word model's text gives the same labels.
  const auto dir2 = dir / "words";
  const auto again = heed::save_attention_heatmaps(t, dir2.string(), 0);
  CHECK(again.back() == dir2.string() + "/1_i-m-home_encoder_decoder_attention.svg");
  CHECK(read_text(again.back()) == cross);
  std::filesystem::remove_all(dir);
}

TEST_CASE("save_attention_heatmaps labels Bahdanau's alignment and a translation cut short", "[seq2seq][translator]") {
  const heed::Vocab tgt({{"va", "!"}}, 0, {"<pad>", "<bos>", "<eos>"});
  heed::Translation<float> t;
  t.source_tokens = {"go", ".", "<eos>"};
  t.tokens = tgt[std::vector<std::string>{"va", "!", "!"}];
  t.text = "va ! !";
  heed::Generator gen(4);
  t.cross_attention = heed::uniform<float>({1, 1, 3, 2}, 0, 1, gen);  // no <eos> step; the source cut to 2 steps
  const auto dir = std::filesystem::temp_directory_path() /
                   ("heed_heatmaps_" + std::to_string(reinterpret_cast<std::uintptr_t>(&t)));
  const auto written = heed::save_attention_heatmaps(t, tgt, dir.string(), 9);
  REQUIRE(written == std::vector<std::string>{(dir / "10_go_bahdanau_alignment.svg").string()});
  const std::string doc = read_text(written[0]);
  CHECK(text_elements(doc, "go") == 1);
  CHECK(text_elements(doc, ".") == 1);
  CHECK(text_elements(doc, "&lt;eos&gt;") == 0);
  CHECK(text_elements(doc, "va") == 1);
  CHECK(text_elements(doc, "!") == 2);
  CHECK(doc.find("layer 1") == std::string::npos);  // one layer, one head: no names
  std::filesystem::remove_all(dir);
}

TEST_CASE("save_attention_heatmaps refuses tokens that do not match the weights", "[seq2seq][translator]") {
  const heed::Vocab tgt({{"je", "suis", "chez", "moi", "."}}, 0, {"<pad>", "<bos>", "<eos>"});
  const auto dir = std::filesystem::temp_directory_path() /
                   ("heed_heatmaps_refused_" + std::to_string(reinterpret_cast<std::uintptr_t>(&tgt)));
  std::filesystem::remove_all(dir);
  heed::Translation<float> t = made_translation(tgt);
  t.source_tokens = {"i'm", "home", "<eos>"};
  CHECK_ERROR(heed::ValueError,
              "save_attention_heatmaps: the encoder self-attention covers 4 source steps, but the translation has 3 "
              "source tokens (<eos> included)",
              heed::save_attention_heatmaps(t, tgt, dir.string(), 0));
  t = made_translation(tgt);
  t.tokens.pop_back();
  t.tokens.pop_back();
  CHECK_ERROR(heed::ValueError,
              "save_attention_heatmaps: the decoder self-attention has 6 output steps for a translation of 3 tokens",
              heed::save_attention_heatmaps(t, tgt, dir.string(), 0));
  t = made_translation(tgt);
  t.tokens.push_back(99);
  CHECK_ERROR(heed::ValueError, "save_attention_heatmaps: token id 99 is not in the target vocabulary of 9 tokens",
              heed::save_attention_heatmaps(t, tgt, dir.string(), 0));
  t = made_translation(tgt);
  t.text = "je suis chez-moi.";  // a subword model's detokenised text
  CHECK_ERROR(heed::ValueError, "save_attention_heatmaps: the text 'je suis chez-moi.' has 3 words for 5 tokens",
              heed::save_attention_heatmaps(t, dir.string(), 0));
  CHECK_ERROR(heed::ValueError, "save_attention_heatmaps: the directory is empty",
              heed::save_attention_heatmaps(made_translation(tgt), tgt, "", 0));
  // The last picture refused: none written, not even the directory.
  t = made_translation(tgt);
  heed::Generator gen(5);
  t.cross_attention = heed::uniform<float>({2, 2, 6, 5}, 0, 1, gen);
  CHECK_ERROR(heed::ValueError, "save_attention_heatmaps: the encoder-decoder attention covers 5 source steps",
              heed::save_attention_heatmaps(t, tgt, dir.string(), 0));
  CHECK_FALSE(std::filesystem::exists(dir));
  // A directory that cannot be made: a file stands in its way.
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "file") << "x";
  CHECK_ERROR(heed::FileError, "save_attention_heatmaps: cannot create the directory",
              heed::save_attention_heatmaps(made_translation(tgt), tgt, (dir / "file" / "sub").string(), 0));
  std::filesystem::remove_all(dir);
}

TEST_CASE("sentence_slug makes a file name's piece of a sentence", "[seq2seq][translator]") {
  using heed::detail::sentence_slug;
  CHECK(sentence_slug({"he's", "calm", ".", "<eos>"}) == "he-s-calm");
  CHECK(sentence_slug({"I", "LOST", "<eos>"}) == "i-lost");
  CHECK(sentence_slug({".", "?", "<eos>"}) == "sentence");
  CHECK(sentence_slug({}) == "sentence");
  CHECK(sentence_slug({"▁été", "/../x"}) == "t-x");  // ASCII only: no path separators, no dots
  CHECK(sentence_slug({"abcdefghij", "abcdefghij", "abcdefghij", "abcdefghij", "abcdefghij"}) ==
        "abcdefghij-abcdefghij-abcdefghij-abcdefg");
  CHECK(sentence_slug({"abcdefghij", "abcdefghij", "abcdefghij", "abcdefg"}) ==
        "abcdefghij-abcdefghij-abcdefghij-abcdefg");
  CHECK(sentence_slug({"abcdefghij", "abcdefghij", "abcdefghij", "abcdef", "z"}) ==
        "abcdefghij-abcdefghij-abcdefghij-abcdef");  // no '-' left at the cut
}

TEST_CASE("A loaded Transformer's heatmaps carry its tokens", "[seq2seq][translator]") {
  heed::Translator translator = heed::Translator::load(kV1Dir + "/translator_v1_transformer.safetensors");
  const auto translations = translator.translate(kV1Sentences);
  const auto dir = std::filesystem::temp_directory_path() /
                   ("heed_heatmaps_" + std::to_string(reinterpret_cast<std::uintptr_t>(&translator)));
  const auto written = heed::save_attention_heatmaps(translations[2], translator.tgt_vocab(), dir.string(), 2);
  REQUIRE(written.size() == 3);
  CHECK(written[0] == (dir / "3_he-s-calm_encoder_self_attention.svg").string());
  const std::string encoder = read_text(written[0]);
  CHECK(text_elements(encoder, "he&apos;s") >= 2);
  CHECK(text_elements(encoder, "calm") >= 2);
  CHECK(text_elements(encoder, "layer 1") == 1);
  const std::string cross = read_text(written[2]);
  CHECK(text_elements(cross, "je") >= 1);  // "je il . . . ."
  CHECK(text_elements(cross, "il") >= 1);
  std::filesystem::remove_all(dir);
}
