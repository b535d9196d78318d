// heed/seq2seq/translate_run.hpp — what the translate program does, as one call: train
// d2l's model (10.4's Bahdanau GRU or 10.7's Transformer, d2l's sizes, batch 64, lr
// 0.005) on a corpus, data-parallel over a communicator's ranks, or load a Translator;
// save it; then translate d2l's four test sentences with their BLEU (after training, or
// when a loaded model is given no sentences; or score a file of pairs with corpus BLEU-4
// and its worst translations, warning of sentences it trained on) and the sentences given, writing
// their attention heatmaps and word alignments when asked. The lines written to `out`
// are translate's.
//
//   heed::TranslateRunOptions options;              // d2l's Transformer on the built-in corpus
//   options.sentences = {"i'm calm ."};
//   heed::run_translate(options, std::cout);
#pragma once

#include "heed/detail/header_begin.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <ostream>
#include <sstream>
#include <string>
#include <vector>

#include "heed/dist/communicator.hpp"
#include "heed/dist/settings.hpp"
#include "heed/seq2seq/corpus.hpp"
#include "heed/seq2seq/held_out.hpp"
#include "heed/seq2seq/progress.hpp"
#include "heed/seq2seq/shortlist.hpp"
#include "heed/seq2seq/train.hpp"
#include "heed/seq2seq/translator.hpp"

namespace heed {

/// What translate is asked: its flags (translate --help).
struct TranslateRunOptions {
  std::string model = "transformer";                             // or "bahdanau"
  std::string data, save, load, heatmaps, alignments, evaluate;  // empty: not given (data: the built-in corpus)
  std::string marian;  // a MarianMT model directory to load (Translator::from_marian); empty: not given
  index_t num_examples = 600, epochs = -1, micro_batches = 1, worst = 5;
  PredictOptions decoding;
  std::uint64_t seed = 1;
  Device device;              // where the model trains and decodes (a Transformer or MarianMT: cuda)
  bool quiet = false;         // no progress report
  bool stream = false;        // print each translation's words as they are decoded (greedy)
  std::string target_prefix;  // every translation starts with this text; empty: none
  std::string shortlist;      // a vocabulary map file (heed/seq2seq/shortlist.hpp); empty: decoding.shortlist
  std::vector<std::string> sentences;
  dist::Communicator* communicator = nullptr;  // data-parallel over its ranks when it has several; rank 0 reports
  /// Called once the model is built or loaded, before training or decoding: the
  /// caller's checks of the decoding options against it (translate's of --max-length).
  std::function<void(const Translator&)> check_model;

  /// The epochs trained: `epochs`, or d2l's for the model (250 Bahdanau, 200 Transformer).
  index_t total_epochs() const { return epochs >= 0 ? epochs : (model == "bahdanau" ? 250 : 200); }
};

namespace detail {

/// printf's formatting into a stream.
template <typename... Args>
void print_to(std::ostream& out, const char* format, Args... args) {
  const int n = std::snprintf(nullptr, 0, format, args...);
  std::string text(static_cast<std::size_t>(std::max(n, 0)) + 1, '\0');
  std::snprintf(text.data(), text.size(), format, args...);
  text.pop_back();
  out << text;
}

/// Trains d2l's model of args.model on --data (d2l's batch 64 and lr 0.005); nullopt on the
/// ranks other than 0, whose parameters are rank 0's.
inline std::optional<Translator> train_d2l_translator(const TranslateRunOptions& args, std::ostream& out) {
  TranslatorConfig config;  // d2l's sizes
  config.model = args.model;
  const NmtData data = args.data.empty()
                           ? load_data_nmt_text(builtin_fra_eng(), 64, config.num_steps, args.num_examples, args.seed)
                           : load_data_nmt(args.data, 64, config.num_steps, args.num_examples, args.seed);
  Translator translator(config, data.src_vocab, data.tgt_vocab);
  translator.to(args.device);
  if (args.check_model) args.check_model(translator);
  // The same flags (main compared them) may still read other files.
  if (args.communicator) dist::check_same_settings(*args.communicator, {{"--data", describe_nmt_data(data)}}, "");
  const index_t epochs = args.total_epochs();
  const bool rank0 = !args.communicator || args.communicator->rank() == 0;
  if (rank0)
    out << args.model << " on " << (args.data.empty() ? "the built-in corpus" : args.data) << ": "
        << data.data_iter.num_examples() << " pairs, vocabularies " << translator.src_vocab().size() << " / "
        << translator.tgt_vocab().size() << ", " << translator.num_parameters() << " parameters, " << epochs
        << " epochs\n";
  TrainOptions options;
  options.micro_batches = args.micro_batches;
  options.communicator = args.communicator;
  if (!args.quiet) options.on_epoch = ProgressReport();
  NmtDataLoader loader = data.data_iter;
  const TrainResult result = translator.visit(
      [&](auto& net) { return train_seq2seq<float>(net, loader, 0.005, epochs, translator.tgt_vocab(), options); });
  if (!rank0) return std::nullopt;
  detail::print_to(out, "trained %lld epochs in %.2f s: loss %.3f, %.0f tokens/s\n", static_cast<long long>(epochs),
                   result.seconds, result.losses.empty() ? 0.0 : result.losses.back(), result.tokens_per_second);
  if (args.communicator)
    detail::print_to(out, "%d processes; the gradients' all-reduce took %.1f %% of rank 0's time\n",
                     args.communicator->size(), 100.0 * result.communication_seconds / std::max(result.seconds, 1e-9));
  return translator;
}

/// What the model was trained on, as a checkpoint records it (held_out.hpp): the loaded
/// file's record, or this run's --data.
inline std::map<std::string, std::string> training_record(const TranslateRunOptions& args) {
  if (!args.load.empty()) return TrainingData::record_in(read_safetensors_metadata(args.load));
  TrainingData data;
  data.train = args.data;
  data.num_examples = args.num_examples;
  data.seed = args.seed;
  return data.to_metadata(split_training_data(data).crc32c);
}

/// The English of each of `sources` (read_data_nmt's text after preprocess_nmt and
/// tokenize_nmt) as the file writes it: its first line.
inline std::vector<std::string> raw_sources(const std::string& text, const std::vector<std::string>& sources) {
  std::map<std::string, std::string> raw;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    const std::string english = line.substr(0, line.find('\t'));
    raw.emplace(d2l_words(english), english);
  }
  std::vector<std::string> out;
  for (const std::string& s : sources) out.push_back(raw.count(s) ? raw[s] : s);
  return out;
}

/// Translates each distinct English sentence of --evaluate once, in batches, scores the
/// translations against all of that sentence's French lines, and prints the worst; warns
/// when the model was trained on some of the sentences. With a shortlist when not null.
inline void evaluate_file(Translator& translator, const TranslateRunOptions& args,
                          const std::shared_ptr<const Shortlist>& shortlist,
                          const std::map<std::string, std::string>& trained_on, std::ostream& out) {
  const std::string text = read_data_nmt(args.evaluate);
  const NmtTokens pairs = tokenize_nmt(preprocess_nmt(text));
  if (pairs.source.empty()) throw FileError(args.evaluate + ": holds no sentence pairs");
  const TrainingOverlap overlap = training_overlap(trained_on, args.load, pairs);
  if (overlap.known && overlap.seen > 0)
    out << "warning: " << overlap.seen << " of the " << overlap.sentences << " English sentences of " << args.evaluate
        << " are in this model's training data (" << overlap.data
        << "): its BLEU is not of held-out data (train_translator --valid-fraction holds some out, in OUT/valid.txt)\n";
  else if (!overlap.known && !overlap.why_not.empty())
    out << "note: not checked whether " << args.evaluate << " is held out: " << overlap.why_not << "\n";
  References refs = group_references(pairs);
  // A pretrained model reads the English as written (cased, its own tokens): each
  // distinct sentence's first line as it is in the file.
  if (translator.tokenizers().is_pretrained()) refs.sources = raw_sources(text, refs.sources);
  PredictOptions options = args.decoding;
  options.shortlist = shortlist;
  options.save_attention_weights = false;
  const Scored scored = translator.evaluate(refs, options);
  out << args.evaluate << ": " << refs.sources.size() << " English sentences, " << pairs.source.size()
      << " references\n"
      << scored.bleu.to_string() << "\n";
  detail::print_to(out, "decoded in %.2f s: %.0f sentences/s\n", scored.seconds,
                   static_cast<double>(refs.sources.size()) / std::max(scored.seconds, 1e-9));
  const auto worst = worst_translations(scored, refs, static_cast<std::size_t>(args.worst));
  if (!worst.empty()) out << "worst " << worst.size() << " (d2l's bleu, k = 2, against the best-matching reference):\n";
  for (const WorstTranslation& w : worst)
    detail::print_to(out, "  %.3f  %s => %s  (reference: %s)\n", w.bleu, refs.sources[w.sentence].c_str(),
                     scored.hypotheses[w.sentence].c_str(), refs.references[w.sentence][w.reference].c_str());
}

/// Translates the sentences one at a time, greedily, printing each translation's text as
/// its tokens come (the text so far, detokenised, wherever it extends what was printed).
inline void translate_streaming(Translator& translator, const std::vector<std::string>& sentences,
                                const PredictOptions& base, std::ostream& out) {
  HEED_CHECK(base.beam_size == 1, ValueError, "run_translate: stream decodes greedily (beam_size 1), got beam_size ",
             base.beam_size);
  const PackedWeightsGuard packed_weights(base.precision);  // converted once for every sentence
  for (std::size_t i = 0; i < sentences.size(); ++i) {
    out << sentences[i] << " => " << std::flush;
    std::vector<std::string> pieces;
    std::string shown;
    const auto show = [&](const std::string& text) {
      if (text.compare(0, shown.size(), shown) != 0) return;  // a detokenised text that rewrote its end
      out << text.substr(shown.size()) << std::flush;
      shown = text;
    };
    PredictOptions options = base;
    options.save_attention_weights = false;
    if (!base.target_prefix.empty()) options.target_prefix = {base.target_prefix[i]};
    options.on_token = [&](std::size_t, index_t token, bool) {
      if (token == translator.tgt_vocab().eos_index()) return;
      pieces.push_back(translator.tgt_vocab().to_tokens(token));
      show(translator.tokenizers().target_text(pieces));
    };
    const Translation<float> t = translator.translate({sentences[i]}, options).front();
    show(t.text);
    out << (t.text.compare(0, shown.size(), shown) == 0 ? "" : "\n  (final) " + t.text) << "\n";
  }
}

}  // namespace detail

/// Runs translate as the top of this file says; returns its exit status (0). Errors are
/// heed's: a bad option a ValueError, a file a FileError.
inline int run_translate(const TranslateRunOptions& args, std::ostream& out) {
  // Read first: a bad file is refused before any training. (args.decoding is read where
  // it is used: check_model may change it.)
  const std::shared_ptr<const Shortlist> shortlist =
      args.shortlist.empty() ? args.decoding.shortlist
                             : std::make_shared<const Shortlist>(Shortlist::load(args.shortlist));
  HEED_CHECK(args.model == "transformer" || args.model == "bahdanau", ValueError,
             "run_translate: model must be transformer or bahdanau, got '", args.model, "'");
  HEED_CHECK(args.num_examples >= 1 && args.epochs >= -1 && args.micro_batches >= 1 && args.worst >= 0, ValueError,
             "run_translate: num_examples and micro_batches must be >= 1, epochs >= -1 (-1: d2l's) and worst >= 0, "
             "got ",
             args.num_examples, ", ", args.micro_batches, ", ", args.epochs, " and ", args.worst);
  HEED_CHECK(args.load.empty() || args.data.empty(), ValueError, "run_translate: load and data exclude each other");
  HEED_CHECK(args.marian.empty() || (args.load.empty() && args.data.empty() && args.save.empty()), ValueError,
             "run_translate: marian excludes load, data and save");
  HEED_CHECK(args.device.is_cpu() || args.decoding.precision == Precision::fp32, ValueError,
             "run_translate: precision ", to_string(args.decoding.precision), " runs on the CPU only, not on ",
             to_string(args.device));
  default_generator().manual_seed(args.seed);
  if (args.communicator && args.communicator->rank() != 0 && !args.load.empty()) return 0;  // rank 0 translates
  std::optional<Translator> translator;
  if (!args.marian.empty()) {
    translator.emplace(Translator::from_marian(args.marian));
    if (args.check_model) args.check_model(*translator);
    out << "loaded MarianMT from " << args.marian << " (" << translator->num_parameters() << " parameters)\n";
  } else if (!args.load.empty()) {
    translator.emplace(Translator::load(args.load, args.model));
    if (args.check_model) args.check_model(*translator);
    out << "loaded " << args.model << " from " << args.load << " (" << translator->num_parameters() << " parameters"
        << (translator->weights_precision() == Precision::fp32
                ? std::string()
                : std::string(", weights in ") + to_string(translator->weights_precision()))
        << ")\n";
  } else {
    translator = detail::train_d2l_translator(args, out);
    if (!translator) return 0;
  }
  if (translator->device() != args.device) {  // loaded: to the device asked for
    translator->to(args.device);
    out << "on " << to_string(args.device) << "\n";
  }
  std::map<std::string, std::string> trained_on;
  if (!args.save.empty() || !args.evaluate.empty()) trained_on = detail::training_record(args);
  // bf16 or int8: a Transformer's weights converted in place (half or a quarter of their
  // memory); Bahdanau's are converted per run by PredictOptions::precision.
  if (args.decoding.precision != Precision::fp32 && translator->config().model != "bahdanau") {
    const ConvertedWeights converted = translator->convert_weights_(args.decoding.precision);
    if (converted.tensors > 0)  // none when loaded so
      detail::print_to(out, "converted %lld weights to %s (%.1f MiB, fp32 %.1f MiB)\n",
                       static_cast<long long>(converted.tensors), to_string(args.decoding.precision),
                       static_cast<double>(converted.converted_bytes) / (1 << 20),
                       static_cast<double>(converted.fp32_bytes) / (1 << 20));
  }
  // After the conversion: with --precision bf16 or int8, a quantised checkpoint.
  if (!args.save.empty()) {
    translator->save(args.save, trained_on);  // a loaded subword model keeps its SentencePiece models
    out << "saved " << args.save << "\n";
  }
  // d2l's four sentences with their references after training, or when a loaded model is
  // given nothing to translate; then the user's, or the --evaluate file.
  std::vector<std::string> sentences = {"go .", "i lost .", "he's calm .", "i'm home ."};
  std::vector<std::string> references = {"va !", "j'ai perdu .", "il est calme .", "je suis chez moi ."};
  if (!args.evaluate.empty()) {
    detail::evaluate_file(*translator, args, shortlist, trained_on, out);
    sentences.clear(), references.clear();
  } else if ((!args.load.empty() || !args.marian.empty()) && !args.sentences.empty()) {
    sentences.clear(), references.clear();
  }
  sentences.insert(sentences.end(), args.sentences.begin(), args.sentences.end());
  PredictOptions options = args.decoding;
  options.shortlist = shortlist;
  options.micro_batches = 1;  // attention weights are kept: one group
  if (sentences.empty()) return 0;
  if (!args.target_prefix.empty())
    options.target_prefix.assign(sentences.size(), translator->tokenizers().target_tokens(args.target_prefix));
  if (args.stream) {
    detail::translate_streaming(*translator, sentences, options, out);
    return 0;
  }
  const auto translations = translator->translate(sentences, options);
  std::ofstream alignments;
  if (!args.alignments.empty()) {
    alignments.open(args.alignments);
    if (!alignments) throw FileError("translate: cannot write " + args.alignments);
  }
  for (std::size_t i = 0; i < sentences.size(); ++i) {
    const auto& t = translations[i];
    out << sentences[i] << " => " << t.text;
    if (i < references.size()) detail::print_to(out, ", bleu %.3f", bleu(t.text, references[i], 2));
    if (args.decoding.beam_size > 1) detail::print_to(out, " (score %.3f)", t.score);
    out << "\n";
    for (std::size_t k = 1; k < t.n_best.size(); ++k)
      detail::print_to(out, "  %zu. %s (score %.3f, log P %.3f)\n", k + 1, t.n_best[k].text.c_str(), t.n_best[k].score,
                       t.n_best[k].log_prob);
    if (!args.heatmaps.empty()) save_attention_heatmaps(t, translator->tgt_vocab(), args.heatmaps, i);
    if (alignments.is_open() && t.cross_attention.defined() && !t.tokens.empty())
      alignments << sentences[i] << " ||| " << t.text << " ||| " << word_alignment(t) << "\n";
  }
  if (!args.heatmaps.empty()) out << "heatmaps in " << args.heatmaps << "\n";
  return 0;
}

}  // namespace heed

#include "heed/detail/header_end.hpp"
