// Writes the fuzz targets' seed corpora, committed under tests/fuzz/corpus/<target>/:
//
//   build/fuzz/tests/fuzz/fuzz_make_seeds tests/fuzz/corpus
//
// Checkpoints come from heed's own writer (so they are valid and follow TinyNet, which
// the checkpoint target loads into), plus a few files laid out as other writers lay them
// out, a few lines of Tatoeba's fra.txt, the device names, tiny translators as translate
// and train_translator write them (words; SentencePiece pieces where the build has it)
// and train_translator's resume metadata. Deterministic: a rerun rewrites the same bytes.
#include "tiny_net.hpp"

#include <heed/seq2seq/translator.hpp>

#include <heed/core/generator.hpp>
#include <heed/io/checkpoint.hpp>
#include <heed/io/safetensors.hpp>
#include <heed/nn/convert_weights.hpp>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace fs = std::filesystem;

namespace {

using Records = std::vector<std::pair<std::string, heed::TensorRecord>>;

void write_file(const fs::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) throw heed::FileError("make_seeds: cannot write " + path.string());
}

heed::TensorRecord record(std::string dtype, std::vector<heed::index_t> shape, std::size_t element_size) {
  heed::TensorRecord r{std::move(dtype), std::move(shape), {}};
  r.data.resize(static_cast<std::size_t>(r.numel()) * element_size);
  for (std::size_t i = 0; i < r.data.size(); ++i) r.data[i] = static_cast<unsigned char>(i * 37 + 1);
  return r;
}

// A file whose header is written as given: another writer's key order, spacing, null metadata.
std::string raw_safetensors(std::string header, const std::string& data) {
  header.append((8 - header.size() % 8) % 8, ' ');
  std::string bytes;
  for (int i = 0; i < 8; ++i) bytes += static_cast<char>(static_cast<std::uint64_t>(header.size()) >> 8 * i & 0xFF);
  return bytes + header + data;
}

void safetensors_seeds(const fs::path& dir) {
  heed::Generator gen(7);
  heed_fuzz::TinyNet net(gen);
  heed::save_checkpoint(net, (dir / "tiny_checkpoint.safetensors").string(), {{"epochs", "200"}});
  heed::save_safetensors((dir / "mixed_dtypes.safetensors").string(),
                         Records{{"f64", record("F64", {2}, 8)},
                                 {"i64_scalar", record("I64", {}, 8)},
                                 {"i32_empty", record("I32", {0, 3}, 4)},
                                 {"bf16", record("BF16", {2, 1}, 2)},
                                 {"mask", record("BOOL", {3}, 1)},
                                 {"rank7", record("F32", {1, 1, 1, 1, 1, 1, 2}, 4)}});
  heed::save_safetensors((dir / "empty.safetensors").string(), Records{});
  heed::save_safetensors((dir / "metadata_only.safetensors").string(), Records{},
                         {{"note", "caf\xc3\xa9"}, {"num_hiddens", "32"}});
  write_file(dir / "other_writer.safetensors",
             raw_safetensors("{\"w\": {\"data_offsets\": [0, 8], \"shape\": [2], \"dtype\": \"F32\"}, "
                             "\"__metadata__\": null}",
                             std::string("\0\0\x80?\0\0\0@", 8)));
}

void checkpoint_seeds(const fs::path& dir) {
  heed::Generator gen(11);
  heed_fuzz::TinyNet net(gen);
  heed::save_checkpoint(net, (dir / "tiny.safetensors").string());
  heed::save_checkpoint(net, (dir / "tiny_metadata.safetensors").string(), {{"epochs", "200"}, {"lr", "0.005"}});
  // Quantised checkpoints: the weights in int8 (with their scales) and in bf16.
  for (const heed::Precision precision : {heed::Precision::int8, heed::Precision::bf16}) {
    heed::Generator again(11);
    heed_fuzz::TinyNet converted(again);
    heed::convert_weights_(converted, precision);
    heed::save_checkpoint(converted,
                          (dir / ("tiny_" + std::string(heed::to_string(precision)) + ".safetensors")).string());
  }
  // Near misses: one wrong shape, one tensor missing, the right names in F64.
  heed::save_safetensors((dir / "wrong_shape.safetensors").string(), Records{{"fc.weight", record("F32", {2, 3}, 4)},
                                                                             {"fc.bias", record("F32", {2}, 4)},
                                                                             {"emb.weight", record("F32", {3, 4}, 4)}});
  heed::save_safetensors((dir / "missing_one.safetensors").string(),
                         Records{{"fc.weight", record("F32", {2, 3}, 4)}, {"fc.bias", record("F32", {2}, 4)}});
  heed::save_safetensors((dir / "f64.safetensors").string(), Records{{"fc.weight", record("F64", {2, 3}, 8)},
                                                                     {"fc.bias", record("F64", {2}, 8)},
                                                                     {"emb.weight", record("F64", {4, 3}, 8)}});
}

void nmt_seeds(const fs::path& dir) {
  // Tatoeba's layout: English, French (a narrow no-break space before ! and ?), attribution.
  write_file(dir / "fra_head.txt",
             "Go.\tVa !\tCC-BY 2.0 (France) Attribution: tatoeba.org #2877272 (CM) & #1158250 (Wittydev)\n"
             "Hi.\tSalut\xe2\x80\xaf!\tCC-BY 2.0 (France) Attribution: tatoeba.org #538123 (CM) & #509819 (Aiji)\n"
             "Run!\tCours\xe2\x80\xaf!\tCC-BY 2.0 (France) Attribution: tatoeba.org #906328 (papabear)\n"
             "Who?\tQui ?\tCC-BY 2.0 (France) Attribution: tatoeba.org #2083030 (CK)\n"
             "I'm OK.\tJe vais bien.\n");
  write_file(dir / "crlf.txt", "Hi.\tSalut !\r\nRun!\tCours !\r\n\r\nWow!\tÇa alors !\r\n");
  write_file(dir / "scripts.txt",
             "\xce\xa3\xce\x91\xce\xa3 \xce\x9f\xce\x94\xce\x9f\xce\xa3.\t\xc4\xb0stanbul \xc5\xb8 "
             "\xc3\x80\xc3\x89.\n\xd0\x9f\xd1\x80\xd0\xb8\xd0\xb2\xd0\xb5\xd1\x82.\t\xd0\x97\xd0\xb4\xd1\x80"
             "\xd0\xb0\xd0\xb2\xd1\x81\xd1\x82\xd0\xb2\xd1\x83\xd0\xb9\xd1\x82\xd0\xb5.\n");
  write_file(dir / "malformed.txt", "no tab here\nok\tbien\n\xff\xfe\tbad\n\xc3\tcut\n");
}

void device_seeds(const fs::path& dir) {
  const std::map<std::string, std::string> names = {{"cpu", "cpu"},          {"cuda", "cuda"},   {"cuda1", "cuda:1"},
                                                    {"cuda5", "cuda:65535"}, {"colon", "cuda:"}, {"minus", "cuda:-1"}};
  for (const auto& [file, name] : names) write_file(dir / file, name);
}

// Translators as small as they come (a few hundred parameters), so that a seed is a few
// KB, most of it the header the target's checks read.
heed::TranslatorConfig tiny_config(const std::string& model) {
  heed::TranslatorConfig c;
  c.model = model;
  c.num_hiddens = 4, c.embed_size = 4, c.ffn_num_hiddens = 8, c.num_heads = 2, c.num_layers = 1, c.num_steps = 6;
  return c;
}

const std::vector<std::string> kEnglish = {"go .", "i lost .", "he's calm .", "i'm home ."};
const std::vector<std::string> kFrench = {"va !", "j'ai perdu .", "il est calme .", "je suis chez moi ."};

heed::NmtTokens tiny_pairs() {
  heed::NmtTokens words;
  for (std::size_t i = 0; i < kEnglish.size(); ++i) {
    words.source.push_back(heed::detail::split(kEnglish[i], ' '));
    words.target.push_back(heed::detail::split(kFrench[i], ' '));
  }
  return words;
}

void write_translator(const fs::path& path, const std::string& model, const heed::Tokenizers& tokenizers,
                      bool training) {
  heed::manual_seed(3);
  const heed::NmtTokens pairs = tokenizers.to_model(tiny_pairs());
  heed::Translator translator(tiny_config(model), tokenizers.vocab(pairs.source, false, 0),
                              tokenizers.vocab(pairs.target, true, 0), tokenizers);
  if (!training) {
    translator.save(path.string());
    return;
  }
  // A training checkpoint, as train_translator's last.safetensors: Adam's moments for
  // the parameters (after one update) and its TrainState.
  std::map<std::string, std::string> metadata = translator.metadata();
  heed::TrainState state;
  state.loader_generator = heed::Generator(5).get_state();
  state.default_generator = heed::Generator(6).get_state();
  state.epochs_done = 1;
  state.steps_done = 1;
  metadata.merge(state.to_metadata());
  translator.visit([&](auto& net) {
    heed::Adam<float> optimizer(net.parameters(), 0.01);
    heed::Tensor<float> total;
    for (const auto& parameter : net.parameters()) total = total.defined() ? total + parameter.sum() : parameter.sum();
    total.backward();
    optimizer.step();
    heed::save_training_checkpoint(net, optimizer, path.string(), metadata);
  });
}

void translator_seeds(const fs::path& dir) {
  const heed::Tokenizers words;
  write_translator(dir / "words_transformer.safetensors", "transformer", words, false);
  write_translator(dir / "words_bahdanau.safetensors", "bahdanau", words, false);
  write_translator(dir / "words_training.safetensors", "transformer", words, true);
#ifdef HEED_WITH_SENTENCEPIECE
  // Pieces of the tiny pairs: every character (25 with the reserved pieces) and a few more.
  const heed::Tokenizers pieces = heed::Tokenizers::train(tiny_pairs(), 32);
  write_translator(dir / "spm_transformer.safetensors", "transformer", pieces, false);
#endif
}

// One key=value a line, as fuzz_resume reads them: a mid-epoch point, an epoch's end, and
// the values strtod took before (0.5 epochs, 1e15 batches).
void resume_seeds(const fs::path& dir) {
  const std::string states = "loader_generator=" + heed::Generator(5).get_state() +
                             "\ndefault_generator=" + heed::Generator(6).get_state() + "\n";
  write_file(dir / "mid_epoch.txt", "epochs_done=1\nsteps_done=10\nepoch_batches_done=3\nbest_bleu=12.5\n" + states);
  write_file(dir / "epoch_end.txt", "epochs_done=2\nsteps_done=14\nbest_bleu=-1\n@epochs=4\n" + states);
  write_file(dir / "fraction.txt", "epochs_done=0.5\nsteps_done=3\nbest_bleu=0\n" + states);
  write_file(dir / "exponent.txt", "epochs_done=0\nsteps_done=0\nepoch_batches_done=1e15\nbest_bleu=nan\n" + states);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s CORPUS_DIR (tests/fuzz/corpus)\n", argv[0]);
    return 2;
  }
  const fs::path root = argv[1];
  const std::vector<std::pair<std::string, void (*)(const fs::path&)>> targets = {
      {"safetensors", safetensors_seeds}, {"checkpoint", checkpoint_seeds}, {"nmt", nmt_seeds},
      {"device", device_seeds},           {"translator", translator_seeds}, {"resume", resume_seeds}};
  for (const auto& [name, write] : targets) {
    fs::create_directories(root / name);
    write(root / name);
  }
  return 0;
}
