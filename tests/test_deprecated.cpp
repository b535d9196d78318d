// The old spellings heed keeps for one release still compile and still work. This file
// is built with -Wno-deprecated-declarations (tests/CMakeLists.txt); everywhere else the
// project's -Werror makes a use of them an error.
#include <heed/heed.hpp>

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <random>
#include <string>

TEST_CASE("the version macros say 0.2.0 or later and agree with HEED_VERSION", "[deprecated]") {
  CHECK(HEED_VERSION == HEED_VERSION_MAJOR * 10000 + HEED_VERSION_MINOR * 100 + HEED_VERSION_PATCH);
  CHECK(HEED_VERSION >= 200);
}

TEST_CASE("ReadNmtOptions::max_lines still reads the first lines of the file, blank ones counted", "[deprecated]") {
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("heed_test_deprecated-" + std::to_string(std::random_device{}()) + ".txt"))
                               .string();
  std::ofstream(path, std::ios::binary) << "Go.\tVa !\n\nHi.\tSalut !\nRun!\tCours !\nWow!\tÇa alors !\n";
  heed::ReadNmtOptions options;
  options.max_lines = 3;  // "Go.", the blank line, "Hi."
  CHECK(heed::read_data_nmt(path, options) == "Go.\tVa !\nHi.\tSalut !\n");
  options.max_pairs = 1;  // both set: the first limit reached
  CHECK(heed::read_data_nmt(path, options) == "Go.\tVa !\n");
  options = {};
  const std::optional<std::size_t> lines = options.max_lines;
  CHECK(!lines);
  CHECK(heed::read_data_nmt(path, options) == "Go.\tVa !\nHi.\tSalut !\nRun!\tCours !\nWow!\tÇa alors !\n");
  std::filesystem::remove(path);
}

TEST_CASE("TrainOptions' old members still start a run where they say and report progress", "[deprecated]") {
  heed::TrainOptions options;
  CHECK(options.epochs_done == 0);
  CHECK(options.steps_done == 0);
  CHECK(options.skip_batches == 0);
  CHECK_FALSE(options.progress);
  options.epochs_done = 2;
  options.progress = true;
  const heed::TrainOptions copy = options;
  CHECK(copy.epochs_done == 2);
  CHECK(copy.progress);
  // Trained from "epoch 2 done": the one epoch run is reported as epoch 3, on stderr too.
  const heed::NmtData data = heed::load_data_nmt_text(heed::builtin_fra_eng(), 8, 6, 16);
  heed::manual_seed(0);
  heed::EncoderDecoder<float, heed::Seq2SeqEncoder<float>, heed::Seq2SeqAttentionDecoder<float>> net(
      std::make_unique<heed::Seq2SeqEncoder<float>>(static_cast<heed::index_t>(data.src_vocab.size()), 8, 8, 1),
      std::make_unique<heed::Seq2SeqAttentionDecoder<float>>(static_cast<heed::index_t>(data.tgt_vocab.size()), 8, 8,
                                                             1));
  std::vector<heed::index_t> epochs;
  options.on_epoch = [&](const heed::EpochStats& stats) { epochs.push_back(stats.epoch); };
  auto loader = data.data_iter;
  heed::train_seq2seq<float>(net, loader, 0.005, 1, data.tgt_vocab, options);
  CHECK(epochs == std::vector<heed::index_t>{3});
}
