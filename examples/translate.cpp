// examples/translate.cpp — English→French end to end (d2l 10.4 and 10.7): train the
// Bahdanau GRU seq2seq or the Transformer, or load a checkpoint, then translate.
//
//   translate                                    the Transformer on the built-in corpus
//   translate --model bahdanau --data ../shared/data/fra-eng/fra.txt --num-examples 600
//   translate --load model.safetensors "i'm calm ." -     (- reads sentences from stdin)
//   translate --load model.safetensors --evaluate pairs.txt   (corpus BLEU of a file of pairs)
//   mpiexec -n 2 translate ...                   data-parallel on 2 processes (built with heed::mpi)
//
// The model is a heed::Translator (heed/seq2seq/translator.hpp): this program is its
// command line. After training it translates d2l's four sentences with their BLEU (or,
// with --evaluate, a file of pairs), then the sentences given as arguments. Under
// mpiexec every process trains its share of each batch (TrainOptions::communicator);
// rank 0 alone reports, saves and translates (docs/distributed.md). Every rank must be
// given the same training flags and data: they are compared before training, and any
// rank's error ends every rank with its message, since the others would wait forever.
#ifdef HEED_WITH_MPI
#include <heed/dist/mpi.hpp>
#endif
#include <heed/dist/settings.hpp>
#include <heed/seq2seq/corpus.hpp>
#include <heed/seq2seq/predict_flags.hpp>
#include <heed/seq2seq/progress.hpp>
#include <heed/seq2seq/train.hpp>
#include <heed/seq2seq/translator.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <optional>

namespace {

using heed::index_t;

const std::string kUsage =
    "usage: translate [--model bahdanau|transformer] [--data FILE] [--num-examples N] [--epochs N]\n"
    "                 [--beam K] [--n-best N] [--length-penalty A] [--sample] [--temperature T]\n"
    "                 [--top-k K] [--top-p P] [--min-length N] [--max-length N] [--no-repeat-ngram N]\n"
    "                 [--save FILE] [--load FILE] [--heatmaps DIR] [--alignments FILE]\n"
    "                 [--evaluate FILE] [--worst N] [--micro-batches K] [--seed S] [--quiet]\n"
    "                 [SENTENCE ... | -]\n"
    "\n"
    "Trains d2l's English-to-French model (or loads one with --load), then translates d2l's\n"
    "four test sentences and the SENTENCEs given ('-' reads one per line from stdin).\n"
    "  --model          transformer (default) or bahdanau\n"
    "  --data           a Tatoeba/d2l fra.txt file (default: the built-in corpus)\n"
    "  --num-examples   pairs to read, d2l's num_examples (default 600; at most 2^40)\n"
    "  --epochs         training epochs (default: d2l's, 200 transformer / 250 bahdanau; at most 2^30)\n" +
    std::string(heed::kPredictFlagsUsage) +
    "  --save, --load   a safetensors checkpoint (weights, vocabularies, hyper-parameters)\n"
    "  --heatmaps       write the attention heatmaps of each translation (SVG) into DIR\n"
    "  --alignments     write 'source ||| translation ||| i-j links' per sentence to FILE\n"
    "  --evaluate       translate the English side of a fra.txt-format FILE in batches and print\n"
    "                   corpus BLEU-4 (sacreBLEU's, on d2l's tokens; every French line of an\n"
    "                   English sentence is one of its references), sentences/s and the worst\n"
    "                   translations, instead of d2l's four test sentences\n"
    "  --worst          how many of the worst translations --evaluate prints (default 5)\n"
    "  --micro-batches  split each batch into K parts trained on parallel threads (1 to 1024,\n"
    "                   default 1; K = the thread count trains fastest; K, not the threads, sets\n"
    "                   the bits)\n"
    "  --seed           random seed, an unsigned 64-bit integer (default 1)\n"
    "  --quiet          no progress report\n"
    "\n"
    "Under mpiexec (a build with MPI) every process trains its share of each batch; give all\n"
    "of them the same --model, --data, --num-examples, --epochs, --micro-batches, --seed and\n"
    "--load: they are compared before training, and an error on any process ends them all.\n";

struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct Args {
  std::string model = "transformer";
  bool model_given = false;
  std::string data, save, load, heatmaps, alignments, evaluate;
  index_t num_examples = 600, epochs = -1, micro_batches = 1, worst = 5;
  heed::PredictOptions decoding;  // what the decoding flags set (heed/seq2seq/predict_flags.hpp)
  std::uint64_t seed = 1;
  bool quiet = false, help = false;
  std::vector<std::string> sentences;
  heed::dist::Communicator* communicator = nullptr;  // the processes of mpiexec, when built with MPI
};

/// The command line; a bad flag or value is a UsageError (exit status 2, with the usage).
Args parse_args(int argc, char** argv) try {
  Args a;
  using Set = std::function<void(const std::string& flag, const std::string& text)>;
  const auto count = [](index_t& field, index_t min, index_t max) -> Set {
    return [&field, min, max](const std::string& f, const std::string& text) {
      field = heed::parse_integer_flag(f, text, min, max);
    };
  };
  // An empty name would silently mean "not given" (--load "" trained a fresh model).
  const auto path = [](std::string& field, const char* what) -> Set {
    return [&field, what](const std::string& f, const std::string& text) {
      if (text.empty()) throw UsageError(f + " wants " + what + ", got ''");
      field = text;
    };
  };
  const std::map<std::string, Set> with_value = {
      {"--model",
       [&](const std::string&, const std::string& text) {
         a.model = text, a.model_given = true;
         if (a.model != "transformer" && a.model != "bahdanau")
           throw UsageError("--model must be transformer or bahdanau, got '" + a.model + "'");
       }},
      {"--data", path(a.data, "a file name")},
      {"--num-examples", count(a.num_examples, 1, index_t(1) << 40)},
      {"--epochs", count(a.epochs, 0, index_t(1) << 30)},
      {"--save", path(a.save, "a file name")},
      {"--load", path(a.load, "a file name")},
      {"--heatmaps", path(a.heatmaps, "a directory")},
      {"--alignments", path(a.alignments, "a file name")},
      {"--evaluate", path(a.evaluate, "a file name")},
      {"--worst", count(a.worst, 0, index_t(1) << 30)},
      {"--micro-batches", count(a.micro_batches, 1, 1024)},
      {"--seed", [&](const std::string& f, const std::string& text) { a.seed = heed::parse_seed_flag(f, text); }}};
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const auto it = with_value.find(arg);
    if (arg == "--sample" || arg == "--quiet") {
      (arg == "--sample" ? a.decoding.sample : a.quiet) = true;
    } else if (it != with_value.end() || heed::is_predict_flag(arg)) {
      if (i + 1 >= argc) throw UsageError(arg + " needs a value");
      if (it != with_value.end())
        it->second(arg, argv[++i]);
      else
        heed::parse_predict_flag(arg, argv[++i], a.decoding);
    } else if (arg == "-h" || arg == "--help") {
      a.help = true;  // main prints the usage (on rank 0) once every rank agrees
      return a;
    } else if (arg.size() > 1 && arg[0] == '-' && arg[1] == '-') {
      throw UsageError("unknown flag " + arg);
    } else if (arg == "-") {
      for (std::string line; std::getline(std::cin, line);)
        if (line.find_first_not_of(" \t\r") != std::string::npos) a.sentences.push_back(line);
    } else {
      a.sentences.push_back(arg);
    }
  }
  if (!a.load.empty() && !a.data.empty()) throw UsageError("--load and --data exclude each other");
  if (a.decoding.n_best > a.decoding.beam_size)
    throw UsageError("--n-best " + std::to_string(a.decoding.n_best) + " is more than --beam " +
                     std::to_string(a.decoding.beam_size));
  a.decoding.micro_batches = a.micro_batches;
  return a;
} catch (const heed::ValueError& e) {  // a flag's value, as heed's readers of flags say it
  throw UsageError(e.what());
}

/// --max-length and --min-length against the model, before any training or decoding:
/// past the positional encoding, decoding would fail only after max_len steps.
void check_lengths(const heed::Translator& translator, const Args& args) {
  const index_t limit = translator.max_positions(), max_length = args.decoding.max_length;
  const index_t decoded = max_length > 0 ? max_length : translator.config().num_steps;
  const std::string positions = std::to_string(limit) + " tokens (its decoder's positions)";
  if (decoded > limit)
    throw UsageError(max_length > 0 ? "--max-length " + std::to_string(max_length) +
                                          " is more than the model's limit of " + positions
                                    : "--max-length 0 decodes the model's num_steps, " + std::to_string(decoded) +
                                          ", more than its limit of " + positions);
  if (args.decoding.min_length > decoded)
    throw UsageError("--min-length " + std::to_string(args.decoding.min_length) + " is more than the " +
                     std::to_string(decoded) + " tokens decoded at most (--max-length, or the model's num_steps)");
}

/// The epochs trained: --epochs, or d2l's for the model.
index_t epochs_of(const Args& args) { return args.epochs >= 0 ? args.epochs : (args.model == "bahdanau" ? 250 : 200); }

/// Trains d2l's model of args.model on --data (d2l's batch 64 and lr 0.005); nullopt on the
/// ranks other than 0, whose parameters are rank 0's.
std::optional<heed::Translator> train(const Args& args) {
  heed::TranslatorConfig config;  // d2l's sizes
  config.model = args.model;
  const heed::NmtData data =
      args.data.empty()
          ? heed::load_data_nmt_text(heed::builtin_fra_eng(), 64, config.num_steps, args.num_examples, args.seed)
          : heed::load_data_nmt(args.data, 64, config.num_steps, args.num_examples, args.seed);
  heed::Translator translator(config, data.src_vocab, data.tgt_vocab);
  check_lengths(translator, args);
  // The same flags (main compared them) may still read other files.
  if (args.communicator)
    heed::dist::check_same_settings(*args.communicator, {{"--data", heed::describe_nmt_data(data)}}, "");
  const index_t epochs = epochs_of(args);
  const bool rank0 = !args.communicator || args.communicator->rank() == 0;
  if (rank0)
    std::cout << args.model << " on " << (args.data.empty() ? "the built-in corpus" : args.data) << ": "
              << data.data_iter.num_examples() << " pairs, vocabularies " << translator.src_vocab().size() << " / "
              << translator.tgt_vocab().size() << ", " << translator.num_parameters() << " parameters, " << epochs
              << " epochs\n";
  heed::TrainOptions options;
  options.micro_batches = args.micro_batches;
  options.communicator = args.communicator;
  if (!args.quiet) options.on_epoch = heed::ProgressReport();
  heed::NmtDataLoader loader = data.data_iter;
  const heed::TrainResult result = translator.visit([&](auto& net) {
    return heed::train_seq2seq<float>(net, loader, 0.005, epochs, translator.tgt_vocab(), options);
  });
  if (!rank0) return std::nullopt;
  std::printf("trained %lld epochs in %.2f s: loss %.3f, %.0f tokens/s\n", static_cast<long long>(epochs),
              result.seconds, result.losses.empty() ? 0.0 : result.losses.back(), result.tokens_per_second);
  if (args.communicator)
    std::printf("%d processes; the gradients' all-reduce took %.1f %% of rank 0's time\n", args.communicator->size(),
                100.0 * result.communication_seconds / std::max(result.seconds, 1e-9));
  return translator;
}

/// Translates each distinct English sentence of --evaluate once, in batches, scores the
/// translations against all of that sentence's French lines, and prints the worst.
void evaluate(heed::Translator& translator, const Args& args) {
  const heed::NmtTokens pairs = heed::tokenize_nmt(heed::preprocess_nmt(heed::read_data_nmt(args.evaluate)));
  if (pairs.source.empty()) throw heed::FileError(args.evaluate + ": holds no sentence pairs");
  const heed::References refs = heed::group_references(pairs);
  heed::PredictOptions options = args.decoding;
  options.save_attention_weights = false;
  const heed::Scored scored = translator.evaluate(refs, options);
  std::cout << args.evaluate << ": " << refs.sources.size() << " English sentences, " << pairs.source.size()
            << " references\n"
            << scored.bleu.to_string() << "\n";
  std::printf("decoded in %.2f s: %.0f sentences/s\n", scored.seconds,
              static_cast<double>(refs.sources.size()) / std::max(scored.seconds, 1e-9));
  const auto worst = heed::worst_translations(scored, refs, static_cast<std::size_t>(args.worst));
  if (!worst.empty())
    std::cout << "worst " << worst.size() << " (d2l's bleu, k = 2, against the best-matching reference):\n";
  for (const heed::WorstTranslation& w : worst)
    std::printf("  %.3f  %s => %s  (reference: %s)\n", w.bleu, refs.sources[w.sentence].c_str(),
                scored.hypotheses[w.sentence].c_str(), refs.references[w.sentence][w.reference].c_str());
}

int run(const Args& args) {
  heed::default_generator().manual_seed(args.seed);
  if (args.communicator && args.communicator->rank() != 0 && !args.load.empty()) return 0;  // rank 0 translates
  std::optional<heed::Translator> translator;
  if (!args.load.empty()) {
    translator.emplace(heed::Translator::load(args.load, args.model));
    check_lengths(*translator, args);
    std::cout << "loaded " << args.model << " from " << args.load << " (" << translator->num_parameters()
              << " parameters)\n";
  } else {
    translator = train(args);
    if (!translator) return 0;
  }
  if (!args.save.empty()) {
    translator->save(args.save);  // a loaded subword model keeps its SentencePiece models
    std::cout << "saved " << args.save << "\n";
  }
  // d2l's four sentences, with their references (or the --evaluate file), then the user's.
  std::vector<std::string> sentences = {"go .", "i lost .", "he's calm .", "i'm home ."};
  std::vector<std::string> references = {"va !", "j'ai perdu .", "il est calme .", "je suis chez moi ."};
  if (!args.evaluate.empty()) {
    evaluate(*translator, args);
    sentences.clear(), references.clear();
  }
  sentences.insert(sentences.end(), args.sentences.begin(), args.sentences.end());
  heed::PredictOptions options = args.decoding;
  options.micro_batches = 1;  // attention weights are kept: one group
  if (sentences.empty()) return 0;
  const auto translations = translator->translate(sentences, options);
  std::ofstream alignments;
  if (!args.alignments.empty()) {
    alignments.open(args.alignments);
    if (!alignments) throw heed::FileError("translate: cannot write " + args.alignments);
  }
  for (std::size_t i = 0; i < sentences.size(); ++i) {
    const auto& t = translations[i];
    std::cout << sentences[i] << " => " << t.text;
    if (i < references.size()) std::printf(", bleu %.3f", heed::bleu(t.text, references[i], 2));
    if (args.decoding.beam_size > 1) std::printf(" (score %.3f)", t.score);
    std::cout << "\n";
    for (std::size_t k = 1; k < t.n_best.size(); ++k)
      std::printf("  %zu. %s (score %.3f, log P %.3f)\n", k + 1, t.n_best[k].text.c_str(), t.n_best[k].score,
                  t.n_best[k].log_prob);
    if (!args.heatmaps.empty()) heed::save_attention_heatmaps(t, args.heatmaps, i);
    if (alignments.is_open() && t.cross_attention.defined() && !t.tokens.empty())
      alignments << sentences[i] << " ||| " << t.text << " ||| " << heed::word_alignment(t) << "\n";
  }
  if (!args.heatmaps.empty()) std::cout << "heatmaps in " << args.heatmaps << "\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  heed::dist::Communicator* communicator = nullptr;  // several processes: mpiexec's
#ifdef HEED_WITH_MPI
  heed::dist::MpiSession mpi(&argc, &argv);
  heed::dist::MpiCommunicator world;
  if (world.size() > 1) communicator = &world;
#endif
  // Several processes: any error ends them all, with its message, since the others would
  // wait for this one forever (a rank returning early leaves them in their next sum).
  const auto fail = [&](const std::string& message, bool usage) {
    if (communicator) communicator->abort("translate: " + message);
    std::cerr << "translate: " << message << "\n";
    if (usage) std::cerr << "\n" << kUsage;
    return usage ? 2 : 1;
  };
  try {
    Args args = parse_args(argc, argv);
    args.communicator = communicator;
    // --help on some processes only would leave the others waiting: compared first, alone,
    // since a rank given --help has parsed nothing after it. (No operation named: fail()
    // starts every message with "translate: ".)
    if (communicator)
      heed::dist::check_same_settings(*communicator, {{"--help", args.help ? "given" : "not given"}}, "");
    if (args.help) {
      if (!communicator || communicator->rank() == 0) std::cout << kUsage;
      return 0;
    }
    if (!args.load.empty() && !args.model_given) {
      const auto metadata = heed::read_safetensors_metadata(args.load);
      const auto it = metadata.find("heed.model");
      if (it != metadata.end()) args.model = it->second;
    }
    // What changes the bits that the processes train; --data's pairs are compared once read.
    if (communicator)
      heed::dist::check_same_settings(*communicator,
                                      {{"--model", args.model},
                                       {"--load", args.load},
                                       {"--epochs", std::to_string(epochs_of(args))},
                                       {"--seed", std::to_string(args.seed)},
                                       {"--micro-batches", std::to_string(args.micro_batches)},
                                       {"--num-examples", std::to_string(args.num_examples)}},
                                      "");
    return run(args);
  } catch (const UsageError& e) {
    return fail(e.what(), true);
  } catch (const std::exception& e) {  // heed's errors, and the standard library's: still a message, not an abort
    return fail(e.what(), false);
  }
}
