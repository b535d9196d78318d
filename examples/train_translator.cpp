// examples/train_translator.cpp — train an English→French translator of any size on a
// fra.txt-format file, with validation, checkpoints and resume; no C++ to write.
//
//   train_translator                                   d2l's Transformer on the built-in corpus
//   train_translator --train ../shared/data/fra-eng-large/train.txt --num-examples 0
//       --valid-fraction 0.02 --num-hiddens 128 --ffn-num-hiddens 512 --num-steps 12
//       --batch-size 128 --lr 0.001 --bucket 32 --micro-batches 2 --epochs 6 --out run
//   train_translator ... --resume run/last.safetensors --epochs 8      two more epochs
//   translate --load run/best.safetensors "i'm calm ."
//
// Every hyper-parameter has a flag (train_translator --help); the defaults are d2l's
// (batch 64, 10 steps, lr 0.005, 32 hidden, 2 layers, dropout 0.1, 200 epochs for the
// Transformer and 250 for the Bahdanau model). After each --valid-every epochs it
// reports the validation loss and corpus BLEU-4; with --out DIR it keeps DIR/last.safetensors
// (the training checkpoint: parameters, Adam's state, the generators, the epoch and step)
// and DIR/best.safetensors (the parameters of the best validation BLEU so far).
// --resume continues from a last.safetensors: the same command line with a larger
// --epochs gives the parameters an uninterrupted run gives, bit for bit (with --schedule
// cosine, whose length is --epochs, the same --epochs).
#include <heed/seq2seq/corpus.hpp>
#include <heed/seq2seq/progress.hpp>
#include <heed/seq2seq/train.hpp>

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "translator.hpp"

namespace {

using heed::index_t;
using translator::BahdanauNet;
using translator::Float;
using translator::TransformerNet;

struct Args {
  translator::ModelConfig model;
  std::string train, valid, out, resume, schedule = "constant";
  index_t num_examples = 600, batch_size = 64, batch_tokens = 0, bucket = 0, min_freq = 2, epochs = -1, warmup = 0;
  index_t sentencepiece = 0;  // pieces per language; 0: d2l's words
  index_t max_steps = 0;      // updates in all, mid-epoch if so; 0: --epochs alone
  index_t accumulation_steps = 1, micro_batches = 1, valid_every = 1, beam = 1;
  double valid_fraction = 0.0, lr = 0.005, min_lr = 0.0, grad_clip = 1.0, time_budget = 0.0, label_smoothing = 0.0;
  std::uint64_t seed = 1;
  bool quiet = false;
};

// ---- data -------------------------------------------------------------------------------

/// The training pairs and the validation pairs (from --valid, or the sentences of a
/// --valid-fraction of the distinct English sentences, all their French lines with them).
struct Split {
  heed::NmtTokens train, valid;
};

Split read_pairs(const Args& args) {
  const std::string name = args.train.empty() ? "the built-in corpus" : args.train;
  const std::string text = args.train.empty() ? heed::builtin_fra_eng() : heed::read_data_nmt(args.train);
  std::optional<std::size_t> limit;
  if (args.num_examples > 0) limit = static_cast<std::size_t>(args.num_examples);
  Split split;
  heed::NmtTokens all = heed::tokenize_nmt(heed::preprocess_nmt(text), limit);
  if (all.source.empty()) throw heed::FileError(name + ": holds no sentence pairs (lines 'English<TAB>French')");
  // A pair longer than num_steps is cut (d2l's truncate_pad); a file of nothing else is a
  // wrong --num-steps.
  const auto fits = [&](std::size_t i) {
    return static_cast<index_t>(all.source[i].size()) < args.model.num_steps &&
           static_cast<index_t>(all.target[i].size()) < args.model.num_steps;
  };
  std::size_t fitting = 0;
  for (std::size_t i = 0; i < all.source.size(); ++i) fitting += fits(i) ? 1 : 0;
  if (fitting == 0)
    throw heed::ValueError(name + ": every one of its " + std::to_string(all.source.size()) +
                           " pairs is longer than --num-steps " + std::to_string(args.model.num_steps) +
                           " tokens with <eos>: raise --num-steps");
  if (!args.valid.empty()) {
    split.train = std::move(all);
    split.valid = heed::tokenize_nmt(heed::preprocess_nmt(heed::read_data_nmt(args.valid)));
    if (split.valid.source.empty()) throw heed::FileError(args.valid + ": holds no sentence pairs");
    return split;
  }
  if (args.valid_fraction <= 0.0) {
    split.train = std::move(all);
    return split;
  }
  // By English sentence: one drawn for validation takes all of its translations along,
  // so that no validation source was seen in training.
  heed::Generator gen(args.seed);
  std::map<std::string, bool> held_out;
  for (std::size_t i = 0; i < all.source.size(); ++i) {
    const auto [it, is_new] = held_out.emplace(translator::join_words(all.source[i]), false);
    if (is_new) it->second = gen.uniform() < args.valid_fraction;
    heed::NmtTokens& to = it->second ? split.valid : split.train;
    to.source.push_back(std::move(all.source[i]));
    to.target.push_back(std::move(all.target[i]));
  }
  std::ostringstream fraction;
  fraction << args.valid_fraction;
  if (split.train.source.empty() || split.valid.source.empty())
    throw heed::ValueError(name + ": --valid-fraction " + fraction.str() + " leaves " +
                           std::to_string(split.train.source.size()) + " training and " +
                           std::to_string(split.valid.source.size()) + " validation pairs; both need some");
  return split;
}

struct Arrays {
  heed::NmtArray src, tgt;
};

Arrays arrays_of(const heed::NmtTokens& pairs, const heed::Vocab& src_vocab, const heed::Vocab& tgt_vocab,
                 index_t num_steps) {
  return {heed::build_array_nmt(pairs.source, src_vocab, num_steps),
          heed::build_array_nmt(pairs.target, tgt_vocab, num_steps)};
}

// ---- validation ---------------------------------------------------------------------------

struct Validation {
  double loss = 0.0;  // summed sequence losses / target tokens, unsmoothed: the targets' mean −log p
  heed::CorpusBleu bleu;
};

template <typename Net>
Validation validate(Net& net, heed::NmtDataLoader& batches, const translator::Tokenizers& tokenizers,
                    const translator::References& refs, const heed::Vocab& src_vocab, const heed::Vocab& tgt_vocab,
                    const Args& args) {
  Validation out;
  net.eval();
  {
    heed::NoGradGuard no_grad;
    double loss_sum = 0.0;
    index_t tokens = 0;
    const index_t bos = tgt_vocab["<bos>"];
    for (const heed::NmtBatch& batch : batches) {
      const heed::Tensor<Float> Y_hat = net(batch.X, heed::detail::shift_right(batch.Y, bos), batch.X_valid_len);
      loss_sum += heed::sum(heed::masked_softmax_ce_loss(Y_hat, batch.Y, batch.Y_valid_len)).item();
      for (index_t i = 0; i < batch.Y_valid_len.numel(); ++i) tokens += batch.Y_valid_len.data()[i];
    }
    out.loss = loss_sum / static_cast<double>(std::max<index_t>(tokens, 1));
  }
  heed::PredictOptions options;
  options.beam_size = args.beam;
  options.save_attention_weights = false;
  options.micro_batches = args.micro_batches;
  out.bleu =
      translator::translate_and_score(net, tokenizers, refs, src_vocab, tgt_vocab, args.model.num_steps, options).bleu;
  net.train();
  return out;
}

// ---- resume -------------------------------------------------------------------------------

/// What the command line and a checkpoint to resume from must agree on: every difference
/// named, as "num_hiddens: 128 in the checkpoint, 32 here".
void check_same_model(const std::map<std::string, std::string>& saved, const std::map<std::string, std::string>& here,
                      const std::string& path) {
  std::string differences;
  for (const auto& [key, value] : here) {
    const auto it = saved.find(key);
    // The models' checksums came later than the models: a checkpoint without them is
    // compared by the models themselves.
    const bool checksum = key == translator::Tokenizers::kSourceCrcKey || key == translator::Tokenizers::kTargetCrcKey;
    if (checksum && it == saved.end()) continue;
    const std::string in_file = it == saved.end() ? "(absent)" : it->second;
    if (in_file == value) continue;
    // Vocabularies by their sizes, SentencePiece models by theirs, the rest by value.
    const bool vocab = key == "src_vocab" || key == "tgt_vocab";
    const bool model = key == translator::Tokenizers::kSourceKey || key == translator::Tokenizers::kTargetKey;
    const auto shown = [&](const std::string& text, bool absent) {
      if (absent) return text;
      if (vocab) return std::to_string(translator::split_lines(text).size()) + " tokens";
      if (model) return std::to_string(text.size()) + " base64 characters";
      return "'" + text + "'";
    };
    differences += (differences.empty() ? "" : "; ") + key + ": " + shown(in_file, it == saved.end()) +
                   " in the checkpoint, " + shown(value, false) + " here" +
                   (vocab || model ? " (built from the training data)" : "");
  }
  if (!differences.empty())
    throw heed::FileError("--resume " + path + ": another model or data than this command line's: " + differences);
}

// ---- training -----------------------------------------------------------------------------

std::optional<heed::LrSchedule> schedule_of(const Args& args, index_t total_steps) {
  if (args.schedule == "inverse-sqrt") return heed::LrSchedule::inverse_sqrt(args.lr, args.warmup);
  if (args.schedule == "cosine") return heed::LrSchedule::cosine(args.lr, args.warmup, total_steps, args.min_lr);
  if (args.warmup > 0) return heed::LrSchedule::constant(args.lr, args.warmup);
  return std::nullopt;
}

template <typename Net>
int run(const Args& args) {
  heed::manual_seed(args.seed);
  const Split words = read_pairs(args);
  // The model's tokens: the words, or SentencePiece's pieces of them (--sentencepiece).
  const translator::Tokenizers tokenizers = args.sentencepiece > 0
                                                ? translator::Tokenizers::train(words.train, args.sentencepiece)
                                                : translator::Tokenizers();
  const Split split{tokenizers.to_model(words.train), tokenizers.to_model(words.valid)};
  const heed::Vocab src_vocab = tokenizers.vocab(split.train.source, /*target=*/false, args.min_freq);
  const heed::Vocab tgt_vocab = tokenizers.vocab(split.train.target, /*target=*/true, args.min_freq);
  const index_t num_steps = args.model.num_steps;
  const Arrays train = arrays_of(split.train, src_vocab, tgt_vocab, num_steps);
  heed::NmtDataLoader loader(train.src.array, train.src.valid_len, train.tgt.array, train.tgt.valid_len,
                             args.batch_size, args.seed);
  loader.set_bucketing(args.bucket);
  loader.set_max_tokens(args.batch_tokens);
  std::optional<heed::NmtDataLoader> valid_batches;
  translator::References valid_refs;
  if (!split.valid.source.empty()) {
    const Arrays valid = arrays_of(split.valid, src_vocab, tgt_vocab, num_steps);
    valid_batches.emplace(valid.src.array, valid.src.valid_len, valid.tgt.array, valid.tgt.valid_len, args.batch_size,
                          args.seed, /*shuffle=*/false);
    valid_refs = translator::group_references(words.valid);  // scored in words, whatever the tokens
  }

  auto net = translator::make_net(args.model, src_vocab, tgt_vocab, static_cast<Net*>(nullptr));
  heed::Adam<Float> optimizer(net->parameters(), args.lr);
  std::map<std::string, std::string> model_metadata = args.model.to_metadata();
  model_metadata.merge(translator::vocab_metadata(src_vocab, tgt_vocab));
  model_metadata.merge(tokenizers.metadata());
  const index_t epochs = args.epochs >= 0 ? args.epochs : (args.model.model == "bahdanau" ? 250 : 200);
  // Batches by tokens vary in number from epoch to epoch: the schedule counts the first's.
  heed::NmtDataLoader first_epoch = loader;
  first_epoch.begin();
  const index_t batches_per_epoch = first_epoch.num_batches();
  const index_t steps_per_epoch = (batches_per_epoch + args.accumulation_steps - 1) / args.accumulation_steps;

  index_t epochs_done = 0, steps_done = 0;
  index_t skip_batches = 0;  // of a run stopped by --max-steps in mid-epoch: that epoch's batches done
  double best_bleu = -1.0;
  if (!args.resume.empty()) {
    // Everything is read and checked before anything is set: a refused checkpoint leaves
    // the run as it was.
    const std::map<std::string, std::string> saved = heed::read_safetensors_metadata(args.resume);
    check_same_model(saved, model_metadata, args.resume);
    const translator::ResumePoint point = translator::read_resume_point(saved, args.resume);
    heed::NmtDataLoader resumed_epoch = loader;  // the epoch it resumes in, as the loader will draw it
    resumed_epoch.generator().set_state(point.loader_generator);
    resumed_epoch.begin();
    translator::check_resume_point(
        point, {epochs, resumed_epoch.num_batches(), static_cast<index_t>(split.train.source.size())}, args.resume);
    heed::load_training_checkpoint(*net, optimizer, args.resume);
    epochs_done = point.epochs_done;
    steps_done = point.steps_done;
    skip_batches = point.epoch_batches_done;
    best_bleu = point.best_bleu;
    loader.generator().set_state(point.loader_generator);
    heed::default_generator().set_state(point.default_generator);
    std::cout << "resumed from " << args.resume << " after epoch " << epochs_done;
    if (skip_batches > 0) std::cout << " and " << skip_batches << " batches of epoch " << epochs_done + 1;
    std::cout << ", step " << steps_done << "\n";
  }
  std::cout << args.model.model << " on " << (args.train.empty() ? "the built-in corpus" : args.train) << ": "
            << split.train.source.size() << " training pairs, " << split.valid.source.size()
            << " validation pairs, vocabularies " << src_vocab.size() << " / " << tgt_vocab.size() << ", "
            << net->num_parameters() << " parameters, " << batches_per_epoch << " batches an epoch\n";
  const heed::PaddingStats padding = heed::padding_of_next_epoch(loader);
  std::printf("padding: %.1f %% of the next epoch's positions (--bucket %lld)\n", 100.0 * padding.fraction(),
              static_cast<long long>(args.bucket));

  heed::TrainOptions options;
  options.micro_batches = args.micro_batches;
  options.accumulation_steps = args.accumulation_steps;
  options.grad_clip = args.grad_clip;
  options.label_smoothing = args.label_smoothing;
  options.max_steps = args.max_steps;
  options.lr_schedule = schedule_of(
      args, args.max_steps > 0 ? std::min(args.max_steps, epochs * steps_per_epoch) : epochs * steps_per_epoch);
  if (!args.quiet) options.on_epoch = heed::ProgressReport();
  if (!args.out.empty()) std::filesystem::create_directories(args.out);
  double seconds = 0.0;  // training alone, this run's
  index_t tokens = 0, epochs_run = 0;
  // last.safetensors after every epoch, best.safetensors when the validation BLEU rose. A
  // run stopped in mid-epoch saves the epochs before it, the loader's generator as it was
  // when that epoch began, and the epoch's batches done.
  const auto save = [&](index_t epochs_complete, bool best, index_t epoch_batches, const std::string& loader_state) {
    if (best) heed::save_checkpoint(*net, args.out + "/best.safetensors", model_metadata);
    std::map<std::string, std::string> state = model_metadata;
    state["loader_generator"] = loader_state;
    state["default_generator"] = heed::default_generator().get_state();
    state["epochs_done"] = std::to_string(epochs_complete);
    state["steps_done"] = std::to_string(steps_done);
    if (epoch_batches > 0) state["epoch_batches_done"] = std::to_string(epoch_batches);
    std::ostringstream best_text;
    best_text.precision(17);
    best_text << best_bleu;
    state["best_bleu"] = best_text.str();
    heed::save_training_checkpoint(*net, optimizer, args.out + "/last.safetensors", state);
  };
  for (index_t epoch = epochs_done + 1; epoch <= epochs; ++epoch) {
    if (args.max_steps > 0 && steps_done >= args.max_steps) break;
    options.xavier_init = epoch == 1 && skip_batches == 0;  // a resumed or continued run keeps its parameters
    options.epochs_done = epoch - 1;
    options.steps_done = steps_done;
    options.skip_batches = skip_batches;
    const std::string loader_before = loader.generator().get_state();
    heed::TrainResult result = heed::train_seq2seq<Float>(*net, loader, optimizer, 1, tgt_vocab, options);
    skip_batches = 0;
    steps_done += result.steps;
    seconds += result.seconds;
    tokens += result.tokens;
    ++epochs_run;
    const bool validate_now =
        valid_batches && (epoch % args.valid_every == 0 || epoch == epochs || result.stopped_mid_epoch);
    std::string report = "epoch " + std::to_string(epoch) + "/" + std::to_string(epochs);
    if (result.stopped_mid_epoch)
      report += " (" + std::to_string(result.epoch_batches) + " of " + std::to_string(loader.num_batches()) +
                " batches: --max-steps " + std::to_string(args.max_steps) + ")";
    char line[256];
    std::snprintf(line, sizeof line, ": loss %.4f, %.0f tokens/s, %.1f s", result.losses.back(),
                  result.tokens_per_second, seconds);
    report += line;
    bool best = false;
    // "validation loss L, BLEU B", with " (best)" when B is the best so far.
    const auto validation = [&] {
      const Validation v = validate(*net, *valid_batches, tokenizers, valid_refs, src_vocab, tgt_vocab, args);
      best = v.bleu.score > best_bleu;
      if (best) best_bleu = v.bleu.score;
      std::snprintf(line, sizeof line, "validation loss %.4f, BLEU %.2f%s", v.loss, v.bleu.score,
                    best ? " (best)" : "");
      return std::string(line);
    };
    if (validate_now) report += "; " + validation();
    std::cout << report << std::endl;
    const bool out_of_time = args.time_budget > 0.0 && seconds >= 60.0 * args.time_budget;
    if (out_of_time && valid_batches && !validate_now) std::cout << "epoch " << epoch << " " << validation() << "\n";
    if (!args.out.empty()) {
      if (result.stopped_mid_epoch)
        save(epoch - 1, best, result.epoch_batches, loader_before);
      else
        save(epoch, best, 0, loader.generator().get_state());
    }
    if (result.stopped_mid_epoch) break;
    if (out_of_time) {
      std::printf("stopped after epoch %lld: %.1f s of training reached --time-budget %g min\n",
                  static_cast<long long>(epoch), seconds, args.time_budget);
      break;
    }
  }
  std::printf("trained %lld epochs (%lld steps in all) in %.2f s: %.0f tokens/s\n", static_cast<long long>(epochs_run),
              static_cast<long long>(steps_done), seconds, static_cast<double>(tokens) / std::max(seconds, 1e-9));
  if (!args.out.empty())
    std::cout << "checkpoints in " << args.out << ": last.safetensors (to --resume), best.safetensors (to translate)\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  CLI::App app{
      "Trains an English-to-French translator (d2l's Transformer or Bahdanau model) on a fra.txt-format "
      "file, with validation, checkpoints and resume. The defaults are d2l's.",
      "train_translator"};
  app.option_defaults()->always_capture_default();
  auto* data = "Data";
  app.add_option("--train", args.train, "training pairs, 'English<TAB>French' per line (default: the built-in corpus)")
      ->group(data);
  app.add_option("--valid", args.valid, "validation pairs in the same format")->group(data);
  app.add_option("--valid-fraction", args.valid_fraction,
                 "hold out this fraction of the training file's English sentences (with all their translations) "
                 "for validation, when there is no --valid")
      ->check(CLI::Range(0.0, 0.9))
      ->excludes("--valid")
      ->group(data);
  app.add_option("--num-examples", args.num_examples, "pairs to read, d2l's num_examples; 0 reads all")
      ->check(CLI::Range(index_t(0), index_t(1) << 40))
      ->group(data);
  app.add_option("--num-steps", args.model.num_steps, "tokens per sentence, <eos> included; longer ones are cut")
      ->check(CLI::Range(index_t(2), index_t(4096)))
      ->group(data);
  app.add_option("--min-freq", args.min_freq, "a word seen fewer times is <unk>")
      ->check(CLI::Range(index_t(0), index_t(1) << 40))
      ->group(data);
  app.add_option("--batch-size", args.batch_size, "sentences per batch (at most, with --batch-tokens)")
      ->check(CLI::Range(index_t(1), index_t(1) << 20))
      ->group(data);
  app.add_option("--batch-tokens", args.batch_tokens,
                 "positions per batch, rows × (longest source + longest target), at most (0: by --batch-size)")
      ->check(CLI::Range(index_t(0), index_t(1) << 40))
      ->group(data);
  app.add_option("--sentencepiece", args.sentencepiece,
                 "subword tokens: a SentencePiece model of this many pieces per language, trained on the training "
                 "pairs and kept in the checkpoints (a build with HEED_WITH_SENTENCEPIECE; 0: d2l's words)")
      ->check(CLI::Range(index_t(0), index_t(1) << 20))
      ->group(data);
  app.add_option("--bucket", args.bucket, "sort by length within windows of this many batches (0: d2l's shuffle)")
      ->check(CLI::Range(index_t(0), index_t(1) << 20))
      ->group(data);

  auto* model = "Model";
  app.add_option("--model", args.model.model, "transformer or bahdanau")
      ->check(CLI::IsMember({"transformer", "bahdanau"}))
      ->group(model);
  app.add_option("--num-hiddens", args.model.num_hiddens, "width of every layer (d2l's num_hiddens)")
      ->check(CLI::Range(index_t(1), index_t(1) << 16))
      ->group(model);
  app.add_option("--embed-size", args.model.embed_size, "Bahdanau: embedding width")
      ->check(CLI::Range(index_t(1), index_t(1) << 16))
      ->group(model);
  app.add_option("--ffn-num-hiddens", args.model.ffn_num_hiddens, "Transformer: hidden width of the FFN")
      ->check(CLI::Range(index_t(1), index_t(1) << 18))
      ->group(model);
  app.add_option("--num-heads", args.model.num_heads, "Transformer: attention heads (dividing --num-hiddens)")
      ->check(CLI::Range(index_t(1), index_t(1) << 10))
      ->group(model);
  app.add_option("--num-kv-heads", args.model.num_kv_heads,
                 "Transformer: key/value heads (grouped-query attention; 0: --num-heads)")
      ->check(CLI::Range(index_t(0), index_t(1) << 10))
      ->group(model);
  app.add_option("--num-layers", args.model.num_layers, "layers of the encoder and of the decoder")
      ->check(CLI::Range(index_t(1), index_t(256)))
      ->group(model);
  app.add_option("--dropout", args.model.dropout, "dropout probability")->check(CLI::Range(0.0, 0.99))->group(model);
  app.add_flag("--pre-norm", args.model.norm_first, "Transformer: LayerNorm before each sublayer")->group(model);
  app.add_option("--embedding-scale", args.model.embedding_scale,
                 "Transformer: the embeddings' factor before the positions are added (0: sqrt(--num-hiddens), d2l's; "
                 "1: none)")
      ->check(CLI::Range(0.0, 1e6))
      ->group(model);

  auto* training = "Training";
  app.add_option("--epochs", args.epochs, "epochs in all (a resumed run counts those done; default: d2l's)")
      ->check(CLI::Range(index_t(0), index_t(1) << 30))
      ->group(training);
  app.add_option("--lr", args.lr, "Adam's learning rate (the peak of a schedule)")
      ->check(CLI::Range(1e-12, 10.0))
      ->group(training);
  app.add_option("--schedule", args.schedule,
                 "constant, inverse-sqrt (\"Attention Is All You Need\") or cosine, after --warmup steps")
      ->check(CLI::IsMember({"constant", "inverse-sqrt", "cosine"}))
      ->group(training);
  app.add_option("--warmup", args.warmup, "steps of linear warm-up")
      ->check(CLI::Range(index_t(0), index_t(1) << 40))
      ->group(training);
  app.add_option("--min-lr", args.min_lr, "cosine: the rate at the last step")
      ->check(CLI::Range(0.0, 10.0))
      ->group(training);
  app.add_option("--grad-clip", args.grad_clip, "clip the gradients' global norm to this (0: off)")
      ->check(CLI::Range(0.0, 1e12))
      ->group(training);
  app.add_option("--label-smoothing", args.label_smoothing,
                 "ε of the training targets, (1 − ε) one-hot + ε / vocabulary (validation loss stays unsmoothed)")
      ->check(CLI::Range(0.0, 1.0))
      ->group(training);
  app.add_option("--accumulation-steps", args.accumulation_steps, "batches summed into one update")
      ->check(CLI::Range(index_t(1), index_t(1) << 20))
      ->group(training);
  app.add_option("--micro-batches", args.micro_batches,
                 "parts of each batch trained on parallel threads (the thread count trains fastest; the parts, "
                 "not the threads, set the bits)")
      ->check(CLI::Range(index_t(1), index_t(1024)))
      ->group(training);
  app.add_option("--max-steps", args.max_steps,
                 "stop after this many optimiser steps in all, in mid-epoch if so (0: --epochs alone); a --resume "
                 "with more goes on from there")
      ->check(CLI::Range(index_t(0), index_t(1) << 40))
      ->group(training);
  app.add_option("--time-budget", args.time_budget,
                 "stop after the first epoch that ends past this many minutes of training (0: no limit)")
      ->check(CLI::Range(0.0, 1e9))
      ->group(training);
  // CLI11 reads integers with strtoull, which takes "-1" and 2^64 (both as 2^64 - 1) and
  // "010" as octal: the seed is checked as decimal digits first.
  app.add_option("--seed", args.seed, "seeds the initialisation, dropout, the data order and the split")
      ->transform(CLI::Validator(
          [](std::string& text) -> std::string {
            const std::string digits = "a decimal integer from 0 to 18446744073709551615";
            if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos)
              return "'" + text + "' is not " + digits;
            const std::size_t first = std::min(text.find_first_not_of('0'), text.size() - 1);
            text.erase(0, first);  // "007" is 7, not octal
            if (text.size() > 20 || (text.size() == 20 && text > "18446744073709551615"))
              return text + " is more than 18446744073709551615 (2^64 - 1)";
            return {};
          },
          ""))
      ->group(training);

  auto* output = "Validation and checkpoints";
  app.add_option("--valid-every", args.valid_every, "validate after every this many epochs (and after the last)")
      ->check(CLI::Range(index_t(1), index_t(1) << 30))
      ->group(output);
  app.add_option("--beam", args.beam, "beam width of the validation translations (1: greedy)")
      ->check(CLI::Range(index_t(1), index_t(64)))
      ->group(output);
  app.add_option("--out", args.out, "directory for last.safetensors and best.safetensors")->group(output);
  app.add_option("--resume", args.resume, "a last.safetensors to continue from (the same flags, more --epochs)")
      ->check(CLI::ExistingFile)
      ->group(output);
  app.add_flag("--quiet", args.quiet, "no per-epoch progress line from the training loop")->group(output);
  try {
    app.parse(argc, argv);
    if (args.model.model == "transformer" && args.model.num_steps > translator::kMaxTransformerSteps)
      throw CLI::ValidationError(
          "--num-steps", "a Transformer reads at most " + std::to_string(translator::kMaxTransformerSteps) +
                             " positions (its positional encoding), got " + std::to_string(args.model.num_steps));
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    return args.model.model == "bahdanau" ? run<BahdanauNet>(args) : run<TransformerNet>(args);
  } catch (const std::exception& e) {  // heed::Error and the standard library's: a message, not an abort
    std::cerr << "train_translator: " << e.what() << "\n";
    return 1;
  }
}
