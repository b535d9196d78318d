// heed/seq2seq/held_out.hpp — which pairs a translator trained on and which it held out.
// train_translator splits its pairs by English sentence (every French line of a sentence
// drawn for validation goes with it), writes the held-out pairs beside its checkpoints
// and records in them where the training pairs came from, so that an evaluation can say
// how many of its English sentences the model saw in training:
//
//   heed::TrainingData data;                       // train_translator --train fra.txt --valid-fraction 0.1
//   data.train = "fra.txt";
//   data.valid_fraction = 0.1;
//   heed::TrainingSplit split = heed::split_training_data(data);
//   heed::write_pairs(split.valid, "run/valid.txt");           // translate --evaluate takes it
//   auto metadata = data.to_metadata(split.crc32c);            // saved in the checkpoints
//   heed::TrainingOverlap seen = heed::training_overlap(metadata, "ckpt", pairs);
//
// The files of d2l's chapter are not held out from each other: most of fra.txt's last
// sentences are in fra-eng-large's train.txt, so a model trained on one and scored on
// the other is scored on what it learned.
#pragma once

#include "heed/detail/header_begin.hpp"

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "heed/core/error.hpp"
#include "heed/core/generator.hpp"
#include "heed/detail/files.hpp"
#include "heed/detail/inline.hpp"
#include "heed/io/crc32c.hpp"
#include "heed/seq2seq/corpus.hpp"
#include "heed/seq2seq/data.hpp"
#include "heed/seq2seq/text.hpp"

namespace heed {

/// Where a translator's training pairs come from and how the validation pairs were
/// split off (train_translator's --train, --valid, --num-examples, --valid-fraction and
/// --seed).
struct TrainingData {
  std::string train;            // a file of pairs; empty: the built-in corpus
  std::string valid;            // a file of validation pairs; empty: valid_fraction of train's sentences
  index_t num_examples = 0;     // train's first pairs read; 0: all
  double valid_fraction = 0.0;  // of train's distinct English sentences, drawn with seed
  std::uint64_t seed = 1;
  // d2l's preprocess_nmt before splitting on spaces (lowercased, punctuation apart); false
  // keeps the text as written, for a pretrained model whose own tokenizer reads it.
  bool preprocess = true;

  static constexpr const char* kTrainKey = "heed.train_data";
  static constexpr const char* kCrcKey = "heed.train_data_crc32c";

  /// The checkpoint metadata recording it; `crc32c` is the training file's as read
  /// (TrainingSplit::crc32c).
  std::map<std::string, std::string> to_metadata(std::uint32_t crc32c) const {
    std::ostringstream fraction;
    fraction.precision(17);
    fraction << valid_fraction;
    return {{kTrainKey, train.empty() ? "" : absolute_path(train)},
            {kCrcKey, std::to_string(crc32c)},
            {"heed.valid_data", valid.empty() ? "" : absolute_path(valid)},
            {"heed.num_examples", std::to_string(num_examples)},
            {"heed.valid_fraction", fraction.str()},
            {"heed.split_seed", std::to_string(seed)}};
  }

  /// The entries of a checkpoint's `metadata` that to_metadata writes: its record, to
  /// carry over to another file.
  static std::map<std::string, std::string> record_in(const std::map<std::string, std::string>& metadata) {
    std::map<std::string, std::string> record;
    for (const auto& entry : TrainingData().to_metadata(0)) {
      const auto it = metadata.find(entry.first);
      if (it != metadata.end()) record.insert(*it);
    }
    return record;
  }

 private:
  static std::string absolute_path(const std::string& path) {
    std::error_code error;
    const auto absolute = std::filesystem::absolute(path, error);
    return error ? path : absolute.lexically_normal().string();
  }
};

/// The pairs trained on and those held out for validation, in words; crc32c is the
/// training text's (the built-in corpus's when TrainingData::train is empty).
struct TrainingSplit {
  NmtTokens train, valid;
  std::uint32_t crc32c = 0;
};

/// Reads data.train (and data.valid) and splits them as train_translator does: with
/// valid_fraction > 0, each distinct English sentence is drawn for validation with that
/// probability (from a Generator seeded with data.seed), all its French lines with it.
/// FileError for an unreadable file or one without pairs; ValueError when the fraction
/// leaves either side empty.
TrainingSplit split_training_data(const TrainingData& data);

namespace detail {
/// train_translator's draw of English sentences for validation: each distinct sentence,
/// at its first appearance, with probability `fraction` from a Generator seeded `seed`.
class HeldOutDraw {
 public:
  HeldOutDraw(std::uint64_t seed, double fraction) : gen_(seed), fraction_(fraction) {}

  /// Whether the sentence (its words joined by spaces) is held out.
  bool operator()(std::string sentence) {
    const auto [it, is_new] = held_out_.emplace(std::move(sentence), false);
    if (is_new) it->second = gen_.uniform() < fraction_;
    return it->second;
  }

 private:
  Generator gen_;
  double fraction_;
  std::map<std::string, bool> held_out_;
};
}  // namespace detail

/// Writes pairs as a file of fra.txt's format ("english words\tfrench words\n"),
/// atomically; read_data_nmt, translate --evaluate and train_translator --valid read it.
void write_pairs(const NmtTokens& pairs, const std::string& path);

/// How many of an evaluation's distinct English sentences a model trained on.
struct TrainingOverlap {
  bool known = false;   // false: the checkpoint records no training data, or it could not be read again
  std::string data;     // the training data, as the checkpoint names it
  std::string why_not;  // when !known and the checkpoint names its data: why it was not checked
  std::size_t seen = 0, sentences = 0;
};

/// The overlap of `pairs` with the training pairs recorded in `metadata` (a checkpoint's,
/// read from `path`): the training file is read and split again as training did. A
/// checkpoint without the record gives known = false; one whose file is gone or changed
/// too, with why_not saying so. Malformed records are a FileError naming `path`.
TrainingOverlap training_overlap(const std::map<std::string, std::string>& metadata, const std::string& path,
                                 const NmtTokens& pairs);

#if HEED_NON_TEMPLATE_DEFINITIONS

HEED_INLINE TrainingSplit split_training_data(const TrainingData& data) {
  HEED_CHECK(data.num_examples >= 0 && data.valid_fraction >= 0.0 && data.valid_fraction <= 0.9, ValueError,
             "split_training_data: num_examples must be >= 0 and valid_fraction in [0, 0.9], got ", data.num_examples,
             " and ", data.valid_fraction);
  HEED_CHECK(data.valid.empty() || data.valid_fraction == 0.0, ValueError,
             "split_training_data: valid and valid_fraction exclude each other");
  const std::string name = data.train.empty() ? "the built-in corpus" : data.train;
  const std::string text = data.train.empty() ? builtin_fra_eng() : read_data_nmt(data.train);
  std::optional<std::size_t> limit;
  if (data.num_examples > 0) limit = static_cast<std::size_t>(data.num_examples);
  TrainingSplit split;
  split.crc32c = crc32c(text.data(), text.size());
  const auto prepared = [&](const std::string& pairs) { return data.preprocess ? preprocess_nmt(pairs) : pairs; };
  NmtTokens all = tokenize_nmt(prepared(text), limit);
  if (all.source.empty()) throw FileError(name + ": holds no sentence pairs (lines 'English<TAB>French')");
  if (!data.valid.empty()) {
    split.train = std::move(all);
    split.valid = tokenize_nmt(prepared(read_data_nmt(data.valid)));
    if (split.valid.source.empty()) throw FileError(data.valid + ": holds no sentence pairs");
    return split;
  }
  if (data.valid_fraction <= 0.0) {
    split.train = std::move(all);
    return split;
  }
  detail::HeldOutDraw held_out(data.seed, data.valid_fraction);
  for (std::size_t i = 0; i < all.source.size(); ++i) {
    NmtTokens& to = held_out(detail::join_words(all.source[i])) ? split.valid : split.train;
    to.source.push_back(std::move(all.source[i]));
    to.target.push_back(std::move(all.target[i]));
  }
  std::ostringstream fraction;
  fraction << data.valid_fraction;
  if (split.train.source.empty() || split.valid.source.empty())
    throw ValueError(name + ": a valid_fraction of " + fraction.str() + " leaves " +
                     std::to_string(split.train.source.size()) + " training and " +
                     std::to_string(split.valid.source.size()) + " validation pairs; both need some");
  return split;
}

HEED_INLINE void write_pairs(const NmtTokens& pairs, const std::string& path) {
  HEED_CHECK(pairs.source.size() == pairs.target.size(), ValueError, "write_pairs: ", pairs.source.size(),
             " sources but ", pairs.target.size(), " targets");
  std::string text;
  for (std::size_t i = 0; i < pairs.source.size(); ++i)
    text += detail::join_words(pairs.source[i]) + "\t" + detail::join_words(pairs.target[i]) + "\n";
  detail::save_atomically("write_pairs", path,
                          [&text](const detail::SaveSink& file) { file.write(text.data(), text.size()); });
}

HEED_INLINE TrainingOverlap training_overlap(const std::map<std::string, std::string>& metadata,
                                             const std::string& path, const NmtTokens& pairs) {
  TrainingOverlap out;
  std::set<std::string> sources;
  for (const auto& s : pairs.source) sources.insert(detail::join_words(s));
  out.sentences = sources.size();
  const auto train = metadata.find(TrainingData::kTrainKey);
  if (train == metadata.end()) return out;
  const auto field = [&](const char* key) {
    const auto it = metadata.find(key);
    if (it == metadata.end()) throw FileError(path + ": records " + TrainingData::kTrainKey + " without " + key);
    return it->second;
  };
  const auto number = [&](const char* key, auto parse) {
    const std::string text = field(key);
    try {
      std::size_t end = 0;
      const auto value = parse(text, &end);
      if (end == text.size() && !text.empty()) return value;
    } catch (const std::exception&) {
    }
    throw FileError(path + ": " + key + " '" + text.substr(0, 40) + "' is no number");
  };
  TrainingData data;
  data.train = train->second;
  data.valid = field("heed.valid_data");
  data.num_examples =
      number("heed.num_examples", [](const std::string& s, std::size_t* end) { return std::stoll(s, end); });
  data.valid_fraction =
      number("heed.valid_fraction", [](const std::string& s, std::size_t* end) { return std::stod(s, end); });
  data.seed = number("heed.split_seed", [](const std::string& s, std::size_t* end) { return std::stoull(s, end); });
  const auto crc =
      number(TrainingData::kCrcKey, [](const std::string& s, std::size_t* end) { return std::stoull(s, end); });
  out.data = data.train.empty() ? "the built-in corpus" : data.train;
  if (data.num_examples < 0 || !(data.valid_fraction >= 0.0 && data.valid_fraction <= 0.9) ||
      (!data.valid.empty() && data.valid_fraction != 0.0))
    throw FileError(path + ": its training data record is inconsistent (num_examples " +
                    std::to_string(data.num_examples) + ", valid_fraction " + field("heed.valid_fraction") + ")");
  // The training file's English sentences split again as training split them, a line at
  // a time: split_training_data's tokens of both sides of a whole training file were
  // most of an evaluation's memory (56 MiB of 110 for the README recipe's model).
  std::string text;
  try {
    text = data.train.empty() ? builtin_fra_eng() : read_data_nmt(data.train);
    if (crc32c(text.data(), text.size()) != crc) {
      out.why_not = out.data + " has changed since the model was trained";
      return out;
    }
    text = preprocess_nmt(text);
  } catch (const Error& e) {
    out.why_not = e.what();
    return out;
  }
  std::optional<std::size_t> limit;
  if (data.num_examples > 0) limit = static_cast<std::size_t>(data.num_examples);
  const bool drawn = data.valid.empty() && data.valid_fraction > 0.0;  // else every pair trained
  detail::HeldOutDraw held_out(data.seed, data.valid_fraction);
  std::set<std::string> seen;
  detail::for_each_nmt_pair(text, limit, [&](std::string_view source, std::string_view) {
    std::string sentence(source);  // its words joined by spaces, as tokenize_nmt splits them
    const bool trained = !drawn || !held_out(sentence);
    if (trained && sources.count(sentence)) seen.insert(std::move(sentence));
  });
  out.seen = seen.size();
  out.known = true;
  return out;
}

#endif  // HEED_NON_TEMPLATE_DEFINITIONS

}  // namespace heed

#include "heed/detail/header_end.hpp"
