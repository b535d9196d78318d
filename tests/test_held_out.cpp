// What a translator trained on and what it held out (heed/seq2seq/held_out.hpp): the
// split by English sentence, the held-out file, the checkpoint record and the overlap
// an evaluation reports.
#include <heed/seq2seq/held_out.hpp>

#include "seq2seq_data_common.hpp"

namespace {

// Six English sentences, "go ." with two French lines.
const char* const kPairs =
    "Go.\tVa !\nGo.\tMarche.\nHi.\tSalut !\nRun!\tCours !\nWho?\tQui ?\nWow!\tÇa alors !\nFire!\tAu feu !\n";

std::set<std::string> english(const heed::NmtTokens& pairs) {
  std::set<std::string> out;
  for (const auto& s : pairs.source) out.insert(heed::detail::join_words(s));
  return out;
}

}  // namespace

TEST_CASE("split_training_data holds out whole English sentences, the same ones for the same seed", "[nmt][held_out]") {
  const TempFile file(kPairs);
  heed::TrainingData data;
  data.train = file.path();
  data.valid_fraction = 0.5;
  data.seed = 3;
  const heed::TrainingSplit split = heed::split_training_data(data);
  CHECK(split.train.source.size() + split.valid.source.size() == 7);
  const std::set<std::string> trained = english(split.train), held = english(split.valid);
  REQUIRE_FALSE(held.empty());
  REQUIRE_FALSE(trained.empty());
  for (const std::string& s : held) CHECK(trained.count(s) == 0);  // no sentence on both sides
  const std::size_t go_lines = static_cast<std::size_t>(
      std::count_if(split.valid.source.begin(), split.valid.source.end(),
                    [](const std::vector<std::string>& s) { return heed::detail::join_words(s) == "go ."; }));
  CHECK((go_lines == 0 || go_lines == 2));  // both of its French lines go together
  CHECK(heed::split_training_data(data).valid.source == split.valid.source);
  CHECK(split.crc32c == heed::crc32c(kPairs, std::strlen(kPairs)));

  // Written out, the held-out pairs read back as the same tokens.
  const std::string path = file.path() + ".valid.txt";
  heed::write_pairs(split.valid, path);
  const heed::NmtTokens back = heed::tokenize_nmt(heed::preprocess_nmt(heed::read_data_nmt(path)));
  std::filesystem::remove(path);
  CHECK(back.source == split.valid.source);
  CHECK(back.target == split.valid.target);

  data.valid_fraction = 0.95;
  CHECK_ERROR(heed::ValueError,
              "split_training_data: num_examples must be >= 0 and valid_fraction in [0, 0.9], got 0 and 0.95",
              heed::split_training_data(data));
  data.valid_fraction = 0.1;
  data.valid = file.path();
  CHECK_ERROR(heed::ValueError, "split_training_data: valid and valid_fraction exclude each other",
              heed::split_training_data(data));
  heed::NmtTokens uneven;
  uneven.source = {{"go", "."}};
  CHECK_ERROR(heed::ValueError, "write_pairs: 1 sources but 0 targets", heed::write_pairs(uneven, path));
}

TEST_CASE("training_overlap counts the evaluated sentences a checkpoint's model trained on", "[nmt][held_out]") {
  const TempFile file(kPairs);
  heed::TrainingData data;
  data.train = file.path();
  data.valid_fraction = 0.5;
  data.seed = 3;
  const heed::TrainingSplit split = heed::split_training_data(data);
  const std::map<std::string, std::string> record = data.to_metadata(split.crc32c);
  CHECK(record.at(heed::TrainingData::kTrainKey) == std::filesystem::absolute(file.path()).lexically_normal().string());

  // The held-out pairs overlap nothing; the whole file overlaps in its trained sentences.
  const heed::TrainingOverlap held = heed::training_overlap(record, "ckpt", split.valid);
  CHECK(held.known);
  CHECK(held.seen == 0);
  CHECK(held.sentences == english(split.valid).size());
  const heed::NmtTokens all = heed::tokenize_nmt(heed::preprocess_nmt(kPairs));
  const heed::TrainingOverlap whole = heed::training_overlap(record, "ckpt", all);
  CHECK(whole.known);
  CHECK(whole.sentences == 6);
  CHECK(whole.seen == english(split.train).size());
  CHECK(whole.data == record.at(heed::TrainingData::kTrainKey));

  // The first pairs only (num_examples 3 reads 4, d2l's test), and a separate validation
  // file (every pair of the training file trained on, the validation file never read).
  for (const bool separate_valid : {false, true}) {
    heed::TrainingData limited = data;
    limited.num_examples = 3;
    if (separate_valid) limited.valid_fraction = 0.0, limited.valid = file.path() + ".not-read";
    const std::set<std::string> trained = separate_valid ? english(heed::tokenize_nmt(heed::preprocess_nmt(kPairs), 3))
                                                         : english(heed::split_training_data(limited).train);
    INFO("separate validation file " << separate_valid << ", " << trained.size() << " trained sentences");
    if (separate_valid) CHECK(trained.size() == 3);  // go, go, hi, run
    const heed::TrainingOverlap first = heed::training_overlap(limited.to_metadata(split.crc32c), "ckpt", all);
    CHECK(first.known);
    CHECK(first.seen == trained.size());
  }

  // No record: unknown, no reason. The file changed or gone: unknown, and why.
  const heed::TrainingOverlap none = heed::training_overlap({}, "ckpt", all);
  CHECK_FALSE(none.known);
  CHECK(none.why_not.empty());
  std::map<std::string, std::string> changed = record;
  changed[heed::TrainingData::kCrcKey] = std::to_string(split.crc32c ^ 1u);
  CHECK(heed::training_overlap(changed, "ckpt", all).why_not.find("has changed since the model was trained") !=
        std::string::npos);
  std::map<std::string, std::string> gone = record;
  gone[heed::TrainingData::kTrainKey] = file.path() + ".missing";
  const heed::TrainingOverlap missing = heed::training_overlap(gone, "ckpt", all);
  CHECK_FALSE(missing.known);
  CHECK(missing.why_not.find(".missing") != std::string::npos);

  // The built-in corpus is a training source too.
  heed::TrainingData builtin;
  const std::map<std::string, std::string> builtin_record =
      builtin.to_metadata(heed::split_training_data(builtin).crc32c);
  const heed::TrainingOverlap on_builtin = heed::training_overlap(builtin_record, "ckpt", all);
  CHECK(on_builtin.known);
  CHECK(on_builtin.data == "the built-in corpus");
  CHECK(on_builtin.seen >= 1);

  // A malformed record names the checkpoint and the key.
  std::map<std::string, std::string> bad = record;
  bad["heed.num_examples"] = "1e3";
  CHECK_ERROR(heed::FileError, "ckpt: heed.num_examples '1e3' is no number", heed::training_overlap(bad, "ckpt", all));
  bad = record;
  bad.erase("heed.split_seed");
  CHECK_ERROR(heed::FileError, "ckpt: records heed.train_data without heed.split_seed",
              heed::training_overlap(bad, "ckpt", all));
  bad = record;
  bad["heed.valid_fraction"] = "2";
  CHECK_ERROR(heed::FileError, "ckpt: its training data record is inconsistent",
              heed::training_overlap(bad, "ckpt", all));
}
