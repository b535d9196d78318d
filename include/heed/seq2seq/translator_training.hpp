// heed/seq2seq/translator_training.hpp — a Translator trained from a file of pairs, as
// train_translator runs it: the pairs read and split for validation, the tokens (d2l's
// words or SentencePiece's pieces), the batches, train_seq2seq epoch by epoch with
// validation (loss and corpus BLEU-4), checkpoints (DIR/last.safetensors, the training
// checkpoint with its TrainState; DIR/best.safetensors, the best validation BLEU's
// parameters) and resume.
//
//   heed::TranslatorTrainOptions options;          // d2l's Transformer on the built-in corpus
//   options.train = "fra.txt";
//   options.valid_fraction = 0.02;
//   options.out = "run";
//   heed::TranslatorTrainReport report = heed::train_translator(options, std::cout);
//   std::cout << report.to_json();                 // what train_translator --json writes
//
// The lines written to `log` are train_translator's; a resumed run (options.resume, a
// last.safetensors) with the same options and a larger epochs gives the bits of an
// uninterrupted one (with the cosine schedule, whose length is epochs, the same epochs).
#pragma once

#include "heed/detail/header_begin.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <map>
#include <optional>
#include <ostream>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "heed/detail/files.hpp"
#include "heed/seq2seq/corpus.hpp"
#include "heed/seq2seq/held_out.hpp"
#include "heed/seq2seq/progress.hpp"
#include "heed/seq2seq/shortlist.hpp"
#include "heed/seq2seq/train.hpp"
#include "heed/seq2seq/translator.hpp"

namespace heed {

/// What train_translator trains, and how: its flags (train_translator --help); the
/// defaults are d2l's.
struct TranslatorTrainOptions {
  TranslatorConfig model;
  std::string train, valid, out, resume, schedule = "constant";  // schedule: constant, inverse-sqrt or cosine
  // Fine-tuning: a MarianMT directory to start from (its net, tokens and vocabulary;
  // `model` is then ignored but for num_steps), and one to write the result to.
  std::string init_marian, save_marian;
  index_t num_examples = 600, batch_size = 64, batch_tokens = 0, bucket = 0, min_freq = 2, epochs = -1, warmup = 0;
  index_t sentencepiece = 0;  // pieces per language; 0: d2l's words
  index_t max_steps = 0;      // updates in all, mid-epoch if so; 0: epochs alone
  index_t accumulation_steps = 1, micro_batches = 1, valid_every = 1, beam = 1;
  double valid_fraction = 0.0, lr = 0.005, min_lr = 0.0, grad_clip = 1.0, time_budget = 0.0, label_smoothing = 0.0;
  std::uint64_t seed = 1;
  Precision precision = Precision::fp32;  // the products' (TrainOptions::precision): fp32 or bf16
  bool quiet = false;                     // no per-epoch progress line from the training loop
  // Checkpoint averaging: keep out/epoch-K.safetensors of the last `average_last` epochs
  // and write out/averaged.safetensors, their mean (average_checkpoints), at the end,
  // validated beside last and best. 0: off.
  index_t average_last = 0;
  // Marian's exponential smoothing (TrainOptions::ema_decay): validate with the moving
  // average too and save it as out/ema.safetensors. 0: off.
  double ema = 0.0;
  // A vocabulary shortlist built from the training pairs (Shortlist::build, in the
  // model's tokens) written to this file before training, for translate --shortlist.
  // Empty: none.
  std::string shortlist;

  /// The epochs in all: `epochs`, or d2l's for the model (250 Bahdanau, 200 Transformer).
  index_t total_epochs() const { return epochs >= 0 ? epochs : (model.model == "bahdanau" ? 250 : 200); }
};

/// One epoch of a train_translator run, as its line reports it.
struct TranslatorEpoch {
  index_t epoch = 0;
  double loss = 0.0, tokens_per_second = 0.0, seconds = 0.0;  // seconds: this run's training so far
  index_t batches = 0;                                        // trained (all of them unless stopped_mid_epoch)
  bool stopped_mid_epoch = false;
  bool validated = false;
  double valid_loss = 0.0, valid_bleu = 0.0;
  bool best = false;           // the best validation BLEU so far
  bool ema_validated = false;  // with --ema: the moving average's validation
  double ema_valid_loss = 0.0, ema_valid_bleu = 0.0;
};

/// What a train_translator run did: its data and model, and every epoch.
struct TranslatorTrainReport {
  std::string model, data;
  index_t train_pairs = 0, valid_pairs = 0, src_vocab = 0, tgt_vocab = 0, parameters = 0, batches_per_epoch = 0;
  index_t epochs = 0;      // in all (options.total_epochs())
  index_t epochs_run = 0;  // by this run (a resumed one counts from its checkpoint)
  index_t steps = 0;       // optimiser steps in all, those before a resume included
  index_t tokens = 0;      // target tokens this run trained on
  double seconds = 0.0;    // this run's training
  double best_bleu = -1.0;
  double last_bleu = -1.0;      // the last validation's BLEU (-1: none)
  double averaged_bleu = -1.0;  // averaged.safetensors' (--average-last; -1: none)
  index_t averaged_epochs = 0;  // the epochs averaged.safetensors averages
  double ema_bleu = -1.0;       // the moving average's at the last validation (--ema; -1: none)
  // The epoch in which the time budget stopped it (after its last batch or in mid-epoch);
  // 0: it did not.
  index_t stopped_after = 0;
  std::vector<TranslatorEpoch> epoch_records;

  /// Writes to_json() to `path` atomically (a temporary file renamed over it); FileError
  /// naming the path when it cannot.
  void save_json(const std::string& path) const {
    const std::string text = to_json();
    detail::save_atomically("TranslatorTrainReport::save_json", path,
                            [&text](const detail::SaveSink& file) { file.write(text.data(), text.size()); });
  }

  /// The report as JSON (train_translator --json; benchmarks/compare_recipe.py reads it).
  std::string to_json() const {
    nlohmann::json epochs_json = nlohmann::json::array();
    for (const TranslatorEpoch& e : epoch_records) {
      nlohmann::json record = {
          {"epoch", e.epoch},     {"loss", e.loss},       {"tokens_per_second", e.tokens_per_second},
          {"seconds", e.seconds}, {"batches", e.batches}, {"stopped_mid_epoch", e.stopped_mid_epoch}};
      if (e.validated) record.update({{"valid_loss", e.valid_loss}, {"valid_bleu", e.valid_bleu}, {"best", e.best}});
      if (e.ema_validated) record.update({{"ema_valid_loss", e.ema_valid_loss}, {"ema_valid_bleu", e.ema_valid_bleu}});
      epochs_json.push_back(std::move(record));
    }
    nlohmann::json out = {{"model", model},
                          {"data", data},
                          {"train_pairs", train_pairs},
                          {"valid_pairs", valid_pairs},
                          {"src_vocab", src_vocab},
                          {"tgt_vocab", tgt_vocab},
                          {"parameters", parameters},
                          {"batches_per_epoch", batches_per_epoch},
                          {"epochs", epochs},
                          {"epochs_run", epochs_run},
                          {"steps", steps},
                          {"tokens", tokens},
                          {"seconds", seconds},
                          {"tokens_per_second", static_cast<double>(tokens) / std::max(seconds, 1e-9)},
                          {"best_bleu", best_bleu},
                          {"last_bleu", last_bleu},
                          {"averaged_bleu", averaged_bleu},
                          {"averaged_epochs", averaged_epochs},
                          {"ema_bleu", ema_bleu},
                          {"stopped_after", stopped_after},
                          {"epoch_records", std::move(epochs_json)}};
    // A NaN loss (a diverged run) is written as null: JSON has no NaN.
    return out.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  }
};

namespace detail {

/// Where train_translator's pairs come from (heed/seq2seq/held_out.hpp).
inline TrainingData training_data_of(const TranslatorTrainOptions& options) {
  TrainingData data;
  data.train = options.train;
  data.valid = options.valid;
  data.num_examples = options.num_examples;
  data.valid_fraction = options.valid_fraction;
  data.seed = options.seed;
  data.preprocess = options.init_marian.empty();  // a pretrained model reads the text as written
  return data;
}

/// The training pairs and the validation pairs (split_training_data), checked against
/// num_steps: a pair longer is cut (d2l's truncate_pad), a file of nothing else is a
/// wrong --num-steps.
inline TrainingSplit read_translator_pairs(const TranslatorTrainOptions& options) {
  TrainingSplit split = split_training_data(training_data_of(options));
  const index_t num_steps = options.model.num_steps;
  std::size_t fitting = 0;
  for (std::size_t i = 0; i < split.train.source.size(); ++i)
    fitting += static_cast<index_t>(split.train.source[i].size()) < num_steps &&
                       static_cast<index_t>(split.train.target[i].size()) < num_steps
                   ? 1
                   : 0;
  if (fitting == 0)
    throw ValueError((options.train.empty() ? "the built-in corpus" : options.train) + ": every one of its " +
                     std::to_string(split.train.source.size()) + " training pairs is longer than --num-steps " +
                     std::to_string(num_steps) + " tokens with <eos>: raise --num-steps");
  return split;
}

/// What the options and a checkpoint to resume from must agree on: every difference
/// named, as "num_hiddens: 128 in the checkpoint, 32 here".
inline void check_same_model(const std::map<std::string, std::string>& saved,
                             const std::map<std::string, std::string>& here, const std::string& path) {
  std::string differences;
  for (const auto& [key, value] : here) {
    const auto it = saved.find(key);
    // The models' checksums came later than the models: a checkpoint without them is
    // compared by the models themselves.
    const bool checksum = key == Tokenizers::kSourceCrcKey || key == Tokenizers::kTargetCrcKey;
    if (checksum && it == saved.end()) continue;
    const std::string in_file = it == saved.end() ? "(absent)" : it->second;
    if (in_file == value) continue;
    // Vocabularies by their sizes, SentencePiece models by theirs, the rest by value.
    const bool vocab = key == "src_vocab" || key == "tgt_vocab";
    const bool model = key == Tokenizers::kSourceKey || key == Tokenizers::kTargetKey;
    const auto shown = [&](const std::string& text, bool absent) {
      if (absent) return text;
      if (vocab) return std::to_string(split_lines(text).size()) + " tokens";
      if (model) return std::to_string(text.size()) + " base64 characters";
      return "'" + text + "'";
    };
    differences += (differences.empty() ? "" : "; ") + key + ": " + shown(in_file, it == saved.end()) +
                   " in the checkpoint, " + shown(value, false) + " here" +
                   (vocab || model ? " (built from the training data)" : "");
  }
  if (!differences.empty())
    throw FileError("--resume " + path + ": another model or data than this command line's: " + differences);
}

/// The validation loss (summed sequence losses / target tokens, unsmoothed) and BLEU.
struct Validation {
  double loss = 0.0;
  CorpusBleu bleu;
};

template <typename Net>
Validation validate_translator(Net& net, NmtDataLoader& batches, const Translator& translator, const References& refs,
                               const TranslatorTrainOptions& options) {
  const Vocab &src_vocab = translator.src_vocab(), &tgt_vocab = translator.tgt_vocab();
  Validation out;
  net.eval();
  {
    NoGradGuard no_grad;
    double loss_sum = 0.0;
    index_t tokens = 0;
    const index_t bos = tgt_vocab.bos_index();
    for (const NmtBatch& batch : batches) {
      const Tensor<float> Y_hat = net(batch.X, shift_right(batch.Y, bos), batch.X_valid_len);
      loss_sum += sum(masked_softmax_ce_loss(Y_hat, batch.Y, batch.Y_valid_len)).item();
      for (index_t i = 0; i < batch.Y_valid_len.numel(); ++i) tokens += batch.Y_valid_len.data()[i];
    }
    out.loss = loss_sum / static_cast<double>(std::max<index_t>(tokens, 1));
  }
  PredictOptions predict;
  predict.beam_size = options.beam;
  predict.save_attention_weights = false;
  predict.micro_batches = options.micro_batches;
  out.bleu = translate_and_score(net, translator.tokenizers(), refs, src_vocab, tgt_vocab, options.model.num_steps,
                                 translator.decoding_options(predict))
                 .bleu;
  net.train();
  return out;
}

inline std::optional<LrSchedule> schedule_of(const TranslatorTrainOptions& options, index_t total_steps) {
  if (options.schedule == "inverse-sqrt") return LrSchedule::inverse_sqrt(options.lr, options.warmup);
  if (options.schedule == "cosine") return LrSchedule::cosine(options.lr, options.warmup, total_steps, options.min_lr);
  if (options.schedule != "constant")
    throw ValueError("train_translator: schedule must be constant, inverse-sqrt or cosine, got '" + options.schedule +
                     "'");
  if (options.warmup > 0) return LrSchedule::constant(options.lr, options.warmup);
  return std::nullopt;
}

/// --average-last: out/averaged.safetensors, the mean of the epoch checkpoints of the
/// last average_last epochs that are there (a run resumed in another directory may have
/// fewer), validated as the run's own validation, its BLEU in the report.
inline void average_last_epochs(const TranslatorTrainOptions& options, std::optional<NmtDataLoader>& valid_batches,
                                const References& valid_refs, TranslatorTrainReport& report, std::ostream& log) {
  index_t last_epoch = 0;  // the last complete epoch
  for (const TranslatorEpoch& e : report.epoch_records)
    if (!e.stopped_mid_epoch) last_epoch = e.epoch;
  std::vector<std::string> files;
  index_t first = last_epoch + 1;
  for (index_t epoch = last_epoch; epoch >= 1 && epoch > last_epoch - options.average_last; --epoch) {
    const std::string file = options.out + "/epoch-" + std::to_string(epoch) + ".safetensors";
    if (!std::filesystem::exists(file)) break;
    files.insert(files.begin(), file);
    first = epoch;
  }
  if (files.empty()) {
    log << "--average-last " << options.average_last << ": no epoch checkpoints in " << options.out << " to average\n";
    return;
  }
  const std::string out = options.out + "/averaged.safetensors";
  average_checkpoints(files, out);
  report.averaged_epochs = static_cast<index_t>(files.size());
  char line[256];
  std::snprintf(line, sizeof line, "averaged epochs %lld to %lld (%zu checkpoints) into %s",
                static_cast<long long>(first), static_cast<long long>(last_epoch), files.size(), out.c_str());
  log << line;
  if (!valid_batches) {
    log << "\n";
    return;
  }
  // The average validated in a net of its own: the trained one stays as it is. A
  // MarianMT model's is the pretrained translator with the averaged weights, written as a
  // MarianMT directory beside the checkpoint.
  const bool marian = !options.init_marian.empty();
  Translator averaged = marian ? Translator::from_marian(options.init_marian) : Translator::load(out);
  if (marian) {
    averaged.visit([&](auto& averaged_net) { load_checkpoint(averaged_net, out); });
    averaged.save_marian(options.out + "/averaged");
  }
  const Validation v = averaged.visit([&](auto& averaged_net) {
    return validate_translator(averaged_net, *valid_batches, averaged, valid_refs, options);
  });
  report.averaged_bleu = v.bleu.score;
  std::snprintf(line, sizeof line, ": validation loss %.4f, BLEU %.2f (last %.2f, best %.2f", v.loss, v.bleu.score,
                report.last_bleu, report.best_bleu);
  log << line;
  if (report.ema_bleu >= 0.0) {
    std::snprintf(line, sizeof line, ", EMA %.2f", report.ema_bleu);
    log << line;
  }
  log << ")\n";
}

/// train_translator's epochs on the net of `translator` (its own type), from the data
/// train_translator set up.
template <typename Net>
TranslatorTrainReport train_translator_net(Net& net, const Translator& translator,
                                           const TranslatorTrainOptions& options, const TrainingSplit& split,
                                           const NmtTokens& held_out_words, NmtDataLoader& loader,
                                           std::optional<NmtDataLoader>& valid_batches, const References& valid_refs,
                                           std::ostream& log) {
  Adam<float> optimizer(net.parameters(), options.lr);
  const bool marian = translator.marian_config().has_value();
  ExponentialMovingAverage ema;  // --ema: carried from epoch to epoch and in last.safetensors
  const std::map<std::string, std::string> model_metadata = translator.metadata();
  const index_t epochs = options.total_epochs();
  // Batches by tokens vary in number from epoch to epoch: the schedule counts the first's.
  NmtDataLoader first_epoch = loader;
  first_epoch.begin();
  const index_t batches_per_epoch = first_epoch.num_batches();
  const index_t steps_per_epoch = (batches_per_epoch + options.accumulation_steps - 1) / options.accumulation_steps;

  TrainState state;  // epoch_batches_done: of a run stopped by max_steps in mid-epoch, that epoch's batches done
  if (!options.resume.empty()) {
    // Everything is read and checked before anything is set: a refused checkpoint leaves
    // the run as it was.
    const std::map<std::string, std::string> saved = read_safetensors_metadata(options.resume);
    check_same_model(saved, model_metadata, options.resume);
    const TrainState point = TrainState::from_metadata(saved, options.resume);
    NmtDataLoader resumed_epoch = loader;  // the epoch it resumes in, as the loader will draw it
    resumed_epoch.generator().set_state(point.loader_generator);
    resumed_epoch.begin();
    check_train_state(point, {epochs, resumed_epoch.num_batches(), static_cast<index_t>(split.train.source.size())},
                      options.resume);
    load_training_checkpoint(net, optimizer, options.resume, options.ema > 0.0 ? &ema : nullptr);
    state = point;
    loader.generator().set_state(point.loader_generator);
    default_generator().set_state(point.default_generator);
    log << "resumed from " << options.resume << " after epoch " << state.epochs_done;
    if (state.epoch_batches_done > 0)
      log << " and " << state.epoch_batches_done << " batches of epoch " << state.epochs_done + 1;
    log << ", step " << state.steps_done << "\n";
  }
  TranslatorTrainReport report;
  report.model = options.model.model;
  report.data = options.train.empty() ? "the built-in corpus" : options.train;
  report.train_pairs = static_cast<index_t>(split.train.source.size());
  report.valid_pairs = static_cast<index_t>(split.valid.source.size());
  report.src_vocab = translator.src_vocab().size();
  report.tgt_vocab = translator.tgt_vocab().size();
  report.parameters = static_cast<index_t>(net.num_parameters());
  report.batches_per_epoch = batches_per_epoch;
  report.epochs = epochs;
  log << report.model << " on " << report.data << ": " << report.train_pairs << " training pairs, "
      << report.valid_pairs << " validation pairs, vocabularies " << report.src_vocab << " / " << report.tgt_vocab
      << ", " << report.parameters << " parameters, " << batches_per_epoch << " batches an epoch\n";
  char line[256];
  std::snprintf(line, sizeof line, "padding: %.1f %% of the next epoch's positions (--bucket %lld)\n",
                100.0 * padding_of_next_epoch(loader).fraction(), static_cast<long long>(options.bucket));
  log << line;
  if (!options.out.empty() && options.valid.empty() && report.valid_pairs > 0)
    log << "held out: " << report.valid_pairs << " pairs in " << options.out
        << "/valid.txt (translate --evaluate takes it)\n";

  TrainOptions train;
  train.micro_batches = options.micro_batches;
  train.precision = options.precision;
  train.accumulation_steps = options.accumulation_steps;
  train.grad_clip = options.grad_clip;
  train.label_smoothing = options.label_smoothing;
  train.max_steps = options.max_steps;
  train.ema_decay = options.ema;
  train.ema = &ema;
  train.lr_schedule = schedule_of(options, options.max_steps > 0 ? std::min(options.max_steps, epochs * steps_per_epoch)
                                                                 : epochs * steps_per_epoch);
  // train_seq2seq runs an epoch at a time here: the progress line counts the run's epochs
  // and seconds, as the summary does.
  if (!options.quiet)
    train.on_epoch = [epochs, epochs_before = state.epochs_done, &report](EpochStats stats) {
      stats.num_epochs = epochs;
      stats.epochs_before = epochs_before;
      stats.elapsed_seconds += report.seconds;
      ProgressReport()(stats);
    };
  if (!options.out.empty()) {
    std::filesystem::create_directories(options.out);
    // The held-out split in words, to evaluate later (--valid names a file already).
    if (options.valid.empty() && !held_out_words.source.empty())
      write_pairs(held_out_words, options.out + "/valid.txt");
  }
  // last.safetensors after every epoch, best.safetensors when the validation BLEU rose. A
  // run stopped in mid-epoch saves the epochs before it, the loader's generator as it was
  // when that epoch began, and the epoch's batches done.
  // Both checkpoints record the training data, for translate --evaluate's overlap check.
  std::map<std::string, std::string> best_metadata = model_metadata;
  best_metadata.merge(training_data_of(options).to_metadata(split.crc32c));
  const auto epoch_checkpoint = [&](index_t epoch) {
    return options.out + "/epoch-" + std::to_string(epoch) + ".safetensors";
  };
  const auto save = [&](index_t epochs_complete, bool best, index_t epoch_batches, const std::string& loader_state) {
    if (best && marian) translator.save_marian(options.out + "/best");
    if (best && !marian) save_checkpoint(net, options.out + "/best.safetensors", best_metadata);
    TrainState saved = state;
    saved.epochs_done = epochs_complete;
    saved.epoch_batches_done = epoch_batches;
    saved.loader_generator = loader_state;
    saved.default_generator = default_generator().get_state();
    std::map<std::string, std::string> metadata = best_metadata;
    for (auto& [key, value] : saved.to_metadata()) metadata[key] = value;
    save_training_checkpoint(net, optimizer, options.out + "/last.safetensors", metadata,
                             options.ema > 0.0 ? &ema : nullptr);
    if (options.ema > 0.0 && ema.started()) {
      std::map<std::string, std::string> ema_metadata = best_metadata;
      ema_metadata["heed.ema_decay"] = std::to_string(options.ema);
      ema.swap_into(net.parameters());
      try {
        if (marian)
          translator.save_marian(options.out + "/ema");
        else
          save_checkpoint(net, options.out + "/ema.safetensors", ema_metadata);
      } catch (...) {
        ema.swap_into(net.parameters());
        throw;
      }
      ema.swap_into(net.parameters());
    }
    // --average-last N: this epoch's parameters, and the one N epochs before removed.
    if (options.average_last > 0 && epoch_batches == 0) {
      save_checkpoint(net, epoch_checkpoint(epochs_complete), best_metadata);
      if (epochs_complete > options.average_last) {
        std::error_code ignored;
        std::filesystem::remove(epoch_checkpoint(epochs_complete - options.average_last), ignored);
      }
    }
  };
  for (index_t epoch = state.epochs_done + 1; epoch <= epochs; ++epoch) {
    if (options.max_steps > 0 && state.steps_done >= options.max_steps) break;
    // A resumed or continued run keeps its parameters, and a pretrained model its own.
    train.xavier_init = epoch == 1 && state.epoch_batches_done == 0 && !marian;
    TrainState at;
    at.epochs_done = epoch - 1;
    at.steps_done = state.steps_done;
    at.epoch_batches_done = state.epoch_batches_done;
    const std::string loader_before = loader.generator().get_state();
    // The budget stops training after the batch that passes it, mid-epoch if so.
    if (options.time_budget > 0.0) train.max_seconds = std::max(60.0 * options.time_budget - report.seconds, 1e-9);
    const TrainResult result = train_seq2seq<float>(net, loader, optimizer, 1, translator.tgt_vocab(), train, at);
    state.epoch_batches_done = 0;
    state.steps_done += result.steps;
    report.seconds += result.seconds;
    report.tokens += result.tokens;
    ++report.epochs_run;
    TranslatorEpoch record;
    record.epoch = epoch;
    record.loss = result.losses.back();
    record.tokens_per_second = result.tokens_per_second;
    record.seconds = report.seconds;
    record.batches = result.epoch_batches;
    record.stopped_mid_epoch = result.stopped_mid_epoch;
    const bool validate_now =
        valid_batches && (epoch % options.valid_every == 0 || epoch == epochs || result.stopped_mid_epoch);
    std::string text = "epoch " + std::to_string(epoch) + "/" + std::to_string(epochs);
    if (result.stopped_mid_epoch)
      text +=
          " (" + std::to_string(result.epoch_batches) + " of " + std::to_string(loader.num_batches()) +
          " batches: " + (result.out_of_time ? "--time-budget" : "--max-steps " + std::to_string(options.max_steps)) +
          ")";
    std::snprintf(line, sizeof line, ": loss %.4f, %.0f tokens/s, %.1f s", result.losses.back(),
                  result.tokens_per_second, report.seconds);
    text += line;
    // "validation loss L, BLEU B", with " (best)" when B is the best so far.
    const auto validation = [&] {
      const Validation v = validate_translator(net, *valid_batches, translator, valid_refs, options);
      record.validated = true;
      record.valid_loss = v.loss;
      record.valid_bleu = v.bleu.score;
      record.best = v.bleu.score > state.best_metric;
      if (record.best) state.best_metric = v.bleu.score;
      std::snprintf(line, sizeof line, "validation loss %.4f, BLEU %.2f%s", v.loss, v.bleu.score,
                    record.best ? " (best)" : "");
      return std::string(line);
    };
    // With --ema, the moving average's validation too (the parameters swapped and back).
    const auto ema_validation = [&] {
      if (options.ema <= 0.0 || !ema.started()) return std::string();
      ema.swap_into(net.parameters());
      Validation v;
      try {
        v = validate_translator(net, *valid_batches, translator, valid_refs, options);
      } catch (...) {
        ema.swap_into(net.parameters());
        throw;
      }
      ema.swap_into(net.parameters());
      record.ema_validated = true;
      record.ema_valid_loss = v.loss;
      record.ema_valid_bleu = v.bleu.score;
      std::snprintf(line, sizeof line, "; EMA: validation loss %.4f, BLEU %.2f", v.loss, v.bleu.score);
      return std::string(line);
    };
    if (validate_now) text += "; " + validation() + ema_validation();
    log << text << std::endl;
    const bool out_of_time =
        result.out_of_time || (options.time_budget > 0.0 && report.seconds >= 60.0 * options.time_budget);
    if (out_of_time && valid_batches && !validate_now)
      log << "epoch " << epoch << " " << validation() << ema_validation() << "\n";
    if (record.validated) report.last_bleu = record.valid_bleu;
    if (record.ema_validated) report.ema_bleu = record.ema_valid_bleu;
    report.epoch_records.push_back(record);
    if (!options.out.empty()) {
      if (result.stopped_mid_epoch)
        save(epoch - 1, record.best, result.epoch_batches, loader_before);
      else
        save(epoch, record.best, 0, loader.generator().get_state());
    }
    if (out_of_time) {
      report.stopped_after = epoch;
      if (result.stopped_mid_epoch)
        std::snprintf(line, sizeof line,
                      "stopped in epoch %lld after %lld of its %lld batches: %.1f s of training reached --time-budget "
                      "%g min (--resume goes on from there)\n",
                      static_cast<long long>(epoch), static_cast<long long>(result.epoch_batches),
                      static_cast<long long>(loader.num_batches()), report.seconds, options.time_budget);
      else
        std::snprintf(line, sizeof line, "stopped after epoch %lld: %.1f s of training reached --time-budget %g min\n",
                      static_cast<long long>(epoch), report.seconds, options.time_budget);
      log << line;
      break;
    }
    if (result.stopped_mid_epoch) break;
  }
  report.steps = state.steps_done;
  report.best_bleu = state.best_metric;
  std::snprintf(line, sizeof line, "trained %lld epochs (%lld steps in all) in %.2f s: %.0f tokens/s\n",
                static_cast<long long>(report.epochs_run), static_cast<long long>(report.steps), report.seconds,
                static_cast<double>(report.tokens) / std::max(report.seconds, 1e-9));
  log << line;
  if (options.average_last > 0) average_last_epochs(options, valid_batches, valid_refs, report, log);
  if (!options.out.empty())
    log << "checkpoints in " << options.out << ": last.safetensors (to --resume), "
        << (marian ? "best/ (a MarianMT directory: translate --marian)" : "best.safetensors (to translate)")
        << (options.ema > 0.0 && ema.started()
                ? (marian ? ", ema/ (the moving average)" : ", ema.safetensors (the moving average)")
                : "")
        << (report.averaged_epochs > 0 ? (marian ? ", averaged/" : ", averaged.safetensors") : "") << "\n";
  if (!options.save_marian.empty()) {
    translator.save_marian(options.save_marian);
    log << "saved the MarianMT model to " << options.save_marian << "\n";
  }
  return report;
}

}  // namespace detail

/// Trains a translator as the top of this file says, writing train_translator's lines to
/// `log`; returns what it did. Bad options throw ValueError, unreadable or refused files
/// (a --resume checkpoint of another model, or whose state is past these options')
/// FileError, before anything is trained.
inline TranslatorTrainReport train_translator(const TranslatorTrainOptions& options, std::ostream& log) {
  const TranslatorConfig& model = options.model;
  HEED_CHECK(model.num_steps >= 2 &&
                 (model.model != "transformer" || model.num_steps <= TranslatorConfig::kMaxTransformerSteps),
             ValueError, "train_translator: num_steps must be from 2 to ", TranslatorConfig::kMaxTransformerSteps,
             " for a Transformer (its positional encoding's positions), >= 2 for the Bahdanau model, got ",
             model.num_steps);
  HEED_CHECK(options.batch_size >= 1 && options.batch_tokens >= 0 && options.bucket >= 0 && options.min_freq >= 0 &&
                 options.sentencepiece >= 0 && options.max_steps >= 0 && options.warmup >= 0 &&
                 options.num_examples >= 0,
             ValueError,
             "train_translator: batch_size must be >= 1 and batch_tokens, bucket, min_freq, "
             "sentencepiece, max_steps, warmup and num_examples >= 0, got ",
             options.batch_size, ", ", options.batch_tokens, ", ", options.bucket, ", ", options.min_freq, ", ",
             options.sentencepiece, ", ", options.max_steps, ", ", options.warmup, " and ", options.num_examples);
  HEED_CHECK(
      options.accumulation_steps >= 1 && options.micro_batches >= 1 && options.valid_every >= 1 && options.beam >= 1,
      ValueError, "train_translator: accumulation_steps, micro_batches, valid_every and beam must be >= 1, got ",
      options.accumulation_steps, ", ", options.micro_batches, ", ", options.valid_every, " and ", options.beam);
  HEED_CHECK(options.average_last >= 0 && (options.average_last == 0 || !options.out.empty()), ValueError,
             "train_translator: average_last must be >= 0, and needs out (the epoch checkpoints' directory), got ",
             options.average_last, options.out.empty() ? " without out" : "");
  HEED_CHECK(options.ema >= 0.0 && options.ema < 1.0, ValueError, "train_translator: ema must be in [0, 1), got ",
             options.ema);
  HEED_CHECK(options.precision != Precision::int8, ValueError,
             "train_translator: precision int8 is for decoding only (translate --precision int8); training takes fp32 "
             "or bf16");
  HEED_CHECK(options.valid_fraction >= 0.0 && options.valid_fraction <= 0.9, ValueError,
             "train_translator: valid_fraction must be in [0, 0.9], got ", options.valid_fraction);
  HEED_CHECK(options.valid.empty() || options.valid_fraction == 0.0, ValueError,
             "train_translator: valid and valid_fraction exclude each other");
  const bool marian = !options.init_marian.empty();
  HEED_CHECK(!marian || options.sentencepiece == 0, ValueError,
             "train_translator: a MarianMT model (init_marian) keeps its own SentencePiece models: no sentencepiece");
  HEED_CHECK(!options.save_marian.empty() <= marian, ValueError,
             "train_translator: save_marian writes a model started from init_marian");
  heed::manual_seed(options.seed);
  std::optional<Translator> pretrained;
  TranslatorTrainOptions run = options;  // with a pretrained model's configuration
  if (marian) {
    pretrained.emplace(Translator::from_marian(options.init_marian));
    run.model = pretrained->config();
    // Sentences of pieces are longer than d2l's words: 128 unless num_steps is given.
    const index_t positions = pretrained->config().num_steps;
    run.model.num_steps =
        model.num_steps == TranslatorConfig().num_steps ? std::min<index_t>(128, positions) : model.num_steps;
    HEED_CHECK(run.model.num_steps <= positions, ValueError, "train_translator: num_steps ", run.model.num_steps,
               " is more than the ", positions, " positions of ", options.init_marian);
  }
  const TrainingSplit words = detail::read_translator_pairs(run);
  // The model's tokens: the words, or SentencePiece's pieces of them (sentencepiece), or
  // the pretrained model's.
  const Tokenizers tokenizers = marian                      ? pretrained->tokenizers()
                                : options.sentencepiece > 0 ? Tokenizers::train(words.train, options.sentencepiece)
                                                            : Tokenizers();
  const TrainingSplit split{tokenizers.to_model(words.train), tokenizers.to_model(words.valid), words.crc32c};
  Vocab src_vocab = marian ? pretrained->src_vocab() : tokenizers.vocab(split.train.source, false, options.min_freq);
  Vocab tgt_vocab = marian ? pretrained->tgt_vocab() : tokenizers.vocab(split.train.target, true, options.min_freq);
  const index_t num_steps = run.model.num_steps;
  const NmtArray train_src = build_array_nmt(split.train.source, src_vocab, num_steps);
  const NmtArray train_tgt = build_array_nmt(split.train.target, tgt_vocab, num_steps);
  NmtDataLoader loader(train_src.array, train_src.valid_len, train_tgt.array, train_tgt.valid_len, options.batch_size,
                       options.seed);
  loader.set_bucketing(options.bucket);
  loader.set_max_tokens(options.batch_tokens);
  std::optional<NmtDataLoader> valid_batches;
  References valid_refs;
  if (!split.valid.source.empty()) {
    const NmtArray valid_src = build_array_nmt(split.valid.source, src_vocab, num_steps);
    const NmtArray valid_tgt = build_array_nmt(split.valid.target, tgt_vocab, num_steps);
    valid_batches.emplace(valid_src.array, valid_src.valid_len, valid_tgt.array, valid_tgt.valid_len,
                          options.batch_size, options.seed, /*shuffle=*/false);
    valid_refs = group_references(words.valid);  // scored in words, whatever the tokens
    // A pretrained model translates the English as written; both sides scored in d2l's words.
    if (marian)
      for (auto& references : valid_refs.references)
        for (std::string& reference : references) reference = detail::d2l_words(reference);
  }
  if (!options.shortlist.empty()) {
    const Shortlist shortlist = Shortlist::build(split.train);
    shortlist.save(options.shortlist);
    log << "shortlist: " << shortlist.size() << " source tokens' target candidates and the "
        << shortlist.always().size() << " most frequent target tokens in " << options.shortlist << "\n";
  }
  Translator translator =
      marian ? std::move(*pretrained) : Translator(model, std::move(src_vocab), std::move(tgt_vocab), tokenizers);
  return translator.visit([&](auto& net) {
    return detail::train_translator_net(net, translator, run, split, words.valid, loader, valid_batches, valid_refs,
                                        log);
  });
}

}  // namespace heed

#include "heed/detail/header_end.hpp"
