// heed::Translator (heed/seq2seq/translator.hpp) and the TrainState of a training
// checkpoint (heed/io/training_checkpoint.hpp): checkpoints written before the translator
// moved into the library still load and translate as they did (tests/data's
// translator_v1_*, made by tests/data/make_translator_v1.cpp at bb6ca6e), a saved
// translator loads back the same, and the refusals name the file.
#include <heed/seq2seq/translator.hpp>

#include <filesystem>
#include <map>
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
