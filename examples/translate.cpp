// examples/translate.cpp — English→French end to end (d2l 10.4 and 10.7): train the
// Bahdanau GRU seq2seq or the Transformer, or load a checkpoint, then translate.
//
//   translate                                    the Transformer on the built-in corpus
//   translate --model bahdanau --data ../shared/data/fra-eng/fra.txt --num-examples 600
//   translate --load model.safetensors "i'm calm ." -     (- reads sentences from stdin)
//   translate --load model.safetensors --evaluate pairs.txt   (corpus BLEU of a file of pairs)
//   translate --marian opus-mt-en-fr "The cat sleeps."       (a pretrained MarianMT model)
//   mpiexec --allow-run-as-root -n 2 translate   data-parallel on 2 processes (built with heed::mpi)
//
// The work is heed::run_translate's (heed/seq2seq/translate_run.hpp, over a
// heed::Translator): this program is its command line. After training (or for a loaded model given no sentence) it
// translates d2l's four sentences with their BLEU (or, with --evaluate, a file of pairs), then the sentences given as
// arguments. Under mpiexec every process
// trains its share of each batch (TrainOptions::communicator); rank 0 alone reports, saves and translates
// (docs/distributed.md). Every rank must be given the same training flags and data: they are compared before training,
// and any rank's error ends every rank with its message, since the others would wait forever.
#ifdef HEED_WITH_MPI
#include <heed/dist/mpi.hpp>
#endif
#include <heed/dist/settings.hpp>
#include <heed/seq2seq/predict_flags.hpp>
#include <heed/seq2seq/translate_run.hpp>

#include <algorithm>
#include <functional>
#include <iostream>
#include <map>

namespace {

using heed::index_t;

const std::string kUsage =
    "usage: translate [--model bahdanau|transformer] [--data FILE] [--num-examples N] [--epochs N]\n"
    "                 [--beam K] [--n-best N] [--length-penalty A] [--sample] [--temperature T]\n"
    "                 [--top-k K] [--top-p P] [--min-length N] [--max-length N] [--no-repeat-ngram N]\n"
    "                 [--save FILE] [--load FILE] [--marian DIR] [--heatmaps DIR] [--alignments FILE]\n"
    "                 [--evaluate FILE] [--worst N] [--micro-batches K] [--seed S] [--quiet]\n"
    "                 [--stream] [--target-prefix TEXT] [--precision fp32|bf16|int8]\n"
    "                 [--shortlist FILE] [--device cpu|cuda[:N]]\n"
    "                 [SENTENCE ... | -]\n"
    "\n"
    "Trains d2l's English-to-French model (or loads one with --load), then translates d2l's\n"
    "four test sentences (after training, or for a loaded model given nothing to translate)\n"
    "and the SENTENCEs given ('-' reads one per line from stdin).\n"
    "  --model          transformer (default) or bahdanau\n"
    "  --data           a Tatoeba/d2l fra.txt file (default: the built-in corpus)\n"
    "  --num-examples   pairs to read, d2l's num_examples (default 600; at most 2^40)\n"
    "  --epochs         training epochs (default: d2l's, 200 transformer / 250 bahdanau; at most 2^30)\n" +
    std::string(heed::kPredictFlagsUsage) +
    "  --save, --load   a safetensors checkpoint (weights, vocabularies, hyper-parameters);\n"
    "                   with --precision bf16 or int8, --save writes the converted weights (a\n"
    "                   quantised checkpoint, a half or a quarter of the size), which --load\n"
    "                   reads back in that precision\n"
    "  --marian         load a MarianMT (OPUS-MT) model directory as transformers writes it\n"
    "                   (config.json, model.safetensors, source.spm, target.spm, vocab.json);\n"
    "                   sentences are read as written (cased), --beam and --length-penalty\n"
    "                   default to the model's, and beam search follows transformers'\n"
    "  --heatmaps       write the attention heatmaps of each translation (SVG) into DIR\n"
    "  --alignments     write 'source ||| translation ||| i-j links' per sentence to FILE\n"
    "  --evaluate       translate the English side of a fra.txt-format FILE in batches and print\n"
    "                   corpus BLEU-4 (sacreBLEU's, on d2l's tokens; every French line of an\n"
    "                   English sentence is one of its references), sentences/s and the worst\n"
    "                   translations, instead of d2l's four test sentences, and warns of\n"
    "                   sentences the model trained on (train_translator's checkpoints say)\n"
    "  --worst          how many of the worst translations --evaluate prints (default 5)\n"
    "  --stream         print each translation's words as they are decoded (greedy: --beam 1)\n"
    "  --target-prefix  every translation starts with TEXT (forced, then decoded on)\n"
    "  --shortlist      score only the target words that FILE (train_translator --shortlist, or\n"
    "                   CTranslate2's vocabulary map) gives for the batch's source words, its\n"
    "                   always-kept words, <eos> and <unk>; log P over those words\n"
    "  --device         where the model trains and decodes: cpu (default) or cuda[:N] (a build\n"
    "                   with heed::cuda; fp32)\n"
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

struct Args : heed::TranslateRunOptions {
  bool model_given = false, help = false, beam_given = false, length_penalty_given = false;
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
      {"--marian", path(a.marian, "a MarianMT model directory")},
      {"--target-prefix", path(a.target_prefix, "the text every translation starts with")},
      {"--heatmaps", path(a.heatmaps, "a directory")},
      {"--alignments", path(a.alignments, "a file name")},
      {"--evaluate", path(a.evaluate, "a file name")},
      {"--shortlist", path(a.shortlist, "a vocabulary map file")},
      {"--worst", count(a.worst, 0, index_t(1) << 30)},
      {"--micro-batches", count(a.micro_batches, 1, 1024)},
      {"--seed", [&](const std::string& f, const std::string& text) { a.seed = heed::parse_seed_flag(f, text); }},
      {"--device", [&](const std::string& f, const std::string& text) {
         try {
           a.device = heed::Device(text);
         } catch (const heed::ValueError&) {
           throw UsageError(f + " wants cpu, cuda or cuda:N, got '" + text + "'");
         }
       }}};
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const auto it = with_value.find(arg);
    if (arg == "--sample" || arg == "--quiet" || arg == "--stream") {
      (arg == "--sample" ? a.decoding.sample : arg == "--quiet" ? a.quiet : a.stream) = true;
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
  if (!a.marian.empty() && (!a.load.empty() || !a.data.empty() || !a.save.empty()))
    throw UsageError("--marian excludes --load, --data and --save");
  if (a.stream && a.decoding.beam_size > 1)
    throw UsageError("--stream prints greedy decoding as it goes: it excludes --beam " +
                     std::to_string(a.decoding.beam_size));
  if (a.decoding.n_best > a.decoding.beam_size)
    throw UsageError("--n-best " + std::to_string(a.decoding.n_best) + " is more than --beam " +
                     std::to_string(a.decoding.beam_size));
  a.decoding.micro_batches = a.micro_batches;
  for (int i = 1; i < argc; ++i) {
    a.beam_given = a.beam_given || std::string(argv[i]) == "--beam";
    a.length_penalty_given = a.length_penalty_given || std::string(argv[i]) == "--length-penalty";
  }
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
                                       {"--epochs", std::to_string(args.total_epochs())},
                                       {"--seed", std::to_string(args.seed)},
                                       {"--micro-batches", std::to_string(args.micro_batches)},
                                       {"--num-examples", std::to_string(args.num_examples)}},
                                      "");
    args.check_model = [&args](const heed::Translator& translator) {
      // transformers' generate() takes the beam size from the model's configuration.
      if (const auto& marian = translator.marian_config()) {
        if (!args.beam_given && !args.stream)
          args.decoding.beam_size = std::max(args.decoding.n_best, marian->num_beams);
        if (!args.length_penalty_given) args.decoding.length_penalty = marian->length_penalty;
      }
      check_lengths(translator, args);
    };
    return heed::run_translate(args, std::cout);
  } catch (const UsageError& e) {
    return fail(e.what(), true);
  } catch (const std::exception& e) {  // heed's errors, and the standard library's: still a message, not an abort
    return fail(e.what(), false);
  }
}
