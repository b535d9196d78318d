// examples/translate.cpp — English→French end to end (d2l 10.4 and 10.7): train the
// Bahdanau GRU seq2seq or the Transformer, or load a checkpoint, then translate.
//
//   translate                                    the Transformer on the built-in corpus
//   translate --model bahdanau --data ../shared/data/fra-eng/fra.txt --num-examples 600
//   translate --load model.safetensors "i'm calm ." -     (- reads sentences from stdin)
//   translate --load model.safetensors --evaluate pairs.txt   (corpus BLEU of a file of pairs)
//   mpiexec -n 2 translate ...                   data-parallel on 2 processes (built with heed::mpi)
//
// d2l's hyper-parameters: batch 64, 10 steps, lr 0.005; Bahdanau: embedding 32, hidden
// 32, 2 layers, dropout 0.1, 250 epochs; Transformer: 32 hidden, 2 layers, 4 heads,
// FFN 64, dropout 0.1, 200 epochs. After training it translates d2l's four sentences
// with their BLEU (or, with --evaluate, a file of pairs), then the sentences given as
// arguments.
//
// Under mpiexec (a build with HEED_WITH_MPI), every process trains its share of each
// batch (TrainOptions::communicator); rank 0 alone reports, saves and translates. The
// parameters are those of one process with --micro-batches N (docs/distributed.md).
// Every rank must be given the same training flags and data: they are compared before
// training, and any rank's error (a bad flag included) ends every rank with its message,
// since the others would wait for it forever.
#ifdef HEED_WITH_MPI
#include <heed/dist/mpi.hpp>
#endif
#include <heed/dist/settings.hpp>
#include <heed/seq2seq/alignment.hpp>
#include <heed/seq2seq/corpus.hpp>
#include <heed/seq2seq/train.hpp>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "translator.hpp"

namespace {

using heed::index_t;
using translator::BahdanauNet;
using translator::Float;
using translator::TransformerNet;

const char* const kUsage =
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
    "  --epochs         training epochs (default: d2l's, 200 transformer / 250 bahdanau; at most 2^30)\n"
    "  --beam           beam width, 1 to 1024; 1 (default) decodes greedily; with --sample, samples\n"
    "                   per sentence\n"
    "  --n-best         hypotheses printed per sentence, best first with their scores (<= --beam)\n"
    "  --length-penalty beam search's alpha in log P / length^alpha, 0 to 10 (default 0.75)\n"
    "  --sample         draw each token instead of taking the best, from a generator seeded by --seed\n"
    "  --temperature    sampling: divide the logits by T (default 1)\n"
    "  --top-k          sampling: only the K most probable tokens (default 0: all)\n"
    "  --top-p          sampling: only the fewest tokens holding probability P (default 1: all)\n"
    "  --min-length     no <eos> before N tokens (default 0; at most the tokens decoded)\n"
    "  --max-length     N tokens at most (default 0: the model's num_steps; at most the positions\n"
    "                   the model has: 1000 for the Transformer's positional encoding)\n"
    "  --no-repeat-ngram no N-gram twice in a translation, N up to 1024 (default 0: off)\n"
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

// The flags' upper bounds: beyond them a value is a mistake, and beams and lengths
// that large would exhaust memory (or overflow) before they said so.
constexpr index_t kMaxBeam = 1024;
constexpr index_t kMaxLength = index_t(1) << 20;  // the model's limit is checked once it is built

struct Args {
  std::string model = "transformer";
  bool model_given = false;
  std::string data, save, load, heatmaps, alignments, evaluate;
  index_t num_examples = 600, epochs = -1, beam = 1, micro_batches = 1, worst = 5, n_best = 1;
  heed::PredictOptions decoding;  // what the decoding flags set (beam, n-best and micro-batches: below)
  std::uint64_t seed = 1;
  bool quiet = false, help = false;
  std::vector<std::string> sentences;
  heed::dist::Communicator* communicator = nullptr;  // the processes of mpiexec, when built with MPI
};

/// An integer in [min, max], in decimal digits (a leading '-' for negatives).
index_t parse_count(const std::string& flag, const std::string& text, index_t min, index_t max) {
  char* end = nullptr;
  errno = 0;
  const long long value = std::strtoll(text.c_str(), &end, 10);
  const bool starts_well = !text.empty() && (std::isdigit(static_cast<unsigned char>(text[0])) || text[0] == '-');
  if (!starts_well || *end != '\0' || errno == ERANGE || value < min || value > max)
    throw UsageError(flag + " wants an integer in [" + std::to_string(min) + ", " + std::to_string(max) + "], got '" +
                     text + "'");
  return static_cast<index_t>(value);
}

/// An unsigned 64-bit integer: strtoull alone would take "-1" as 2^64 - 1.
std::uint64_t parse_seed(const std::string& flag, const std::string& text) {
  char* end = nullptr;
  errno = 0;
  const unsigned long long value = std::strtoull(text.c_str(), &end, 10);
  if (text.empty() || !std::isdigit(static_cast<unsigned char>(text[0])) || *end != '\0' || errno == ERANGE)
    throw UsageError(flag + " wants an integer in [0, " + std::to_string(std::numeric_limits<std::uint64_t>::max()) +
                     "], got '" + text + "'");
  return static_cast<std::uint64_t>(value);
}

/// A real number in (low, high] (or [low, high] when low_included).
double parse_real(const std::string& flag, const std::string& text, double low, double high, bool low_included) {
  char* end = nullptr;
  errno = 0;
  const double value = std::strtod(text.c_str(), &end);
  const bool above = low_included ? value >= low : value > low;
  if (text.empty() || *end != '\0' || errno == ERANGE || !std::isfinite(value) || !above || value > high) {
    std::ostringstream range;
    range << (low_included ? "[" : "(") << low << ", " << high << "]";
    throw UsageError(flag + " wants a number in " + range.str() + ", got '" + text + "'");
  }
  return value;
}

Args parse_args(int argc, char** argv) {
  Args args;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw UsageError(arg + " needs a value");
      return argv[++i];
    };
    // An empty name would silently mean "not given" (--load "" trained a fresh model).
    auto path = [&](const char* what) {
      std::string text = value();
      if (text.empty()) throw UsageError(arg + " wants " + what + ", got ''");
      return text;
    };
    if (arg == "--model") {
      args.model = value(), args.model_given = true;
      if (args.model != "transformer" && args.model != "bahdanau")
        throw UsageError("--model must be transformer or bahdanau, got '" + args.model + "'");
    } else if (arg == "--data") {
      args.data = path("a file name");
    } else if (arg == "--num-examples") {
      args.num_examples = parse_count(arg, value(), 1, index_t(1) << 40);
    } else if (arg == "--epochs") {
      args.epochs = parse_count(arg, value(), 0, index_t(1) << 30);
    } else if (arg == "--beam") {
      args.beam = parse_count(arg, value(), 1, kMaxBeam);
    } else if (arg == "--n-best") {
      args.n_best = parse_count(arg, value(), 1, kMaxBeam);
    } else if (arg == "--length-penalty") {
      args.decoding.length_penalty = parse_real(arg, value(), 0.0, 10.0, true);
    } else if (arg == "--sample") {
      args.decoding.sample = true;
    } else if (arg == "--temperature") {
      args.decoding.temperature = parse_real(arg, value(), 0.0, 1e6, false);
    } else if (arg == "--top-k") {
      args.decoding.top_k = parse_count(arg, value(), 0, index_t(1) << 30);
    } else if (arg == "--top-p") {
      args.decoding.top_p = parse_real(arg, value(), 0.0, 1.0, false);
    } else if (arg == "--min-length") {
      args.decoding.min_length = parse_count(arg, value(), 0, kMaxLength);
    } else if (arg == "--max-length") {
      args.decoding.max_length = parse_count(arg, value(), 0, kMaxLength);
    } else if (arg == "--no-repeat-ngram") {
      args.decoding.no_repeat_ngram_size = parse_count(arg, value(), 0, 1024);
    } else if (arg == "--save") {
      args.save = path("a file name");
    } else if (arg == "--load") {
      args.load = path("a file name");
    } else if (arg == "--heatmaps") {
      args.heatmaps = path("a directory");
    } else if (arg == "--alignments") {
      args.alignments = path("a file name");
    } else if (arg == "--evaluate") {
      args.evaluate = path("a file name");
    } else if (arg == "--worst") {
      args.worst = parse_count(arg, value(), 0, index_t(1) << 30);
    } else if (arg == "--micro-batches") {
      args.micro_batches = parse_count(arg, value(), 1, 1024);
    } else if (arg == "--seed") {
      args.seed = parse_seed(arg, value());
    } else if (arg == "--quiet") {
      args.quiet = true;
    } else if (arg == "-h" || arg == "--help") {
      args.help = true;  // main prints the usage (on rank 0) once every rank agrees
      return args;
    } else if (arg.size() > 1 && arg[0] == '-' && arg[1] == '-') {
      throw UsageError("unknown flag " + arg);
    } else if (arg == "-") {
      for (std::string line; std::getline(std::cin, line);)
        if (line.find_first_not_of(" \t\r") != std::string::npos) args.sentences.push_back(line);
    } else {
      args.sentences.push_back(arg);
    }
  }
  if (!args.load.empty() && !args.data.empty()) throw UsageError("--load and --data exclude each other");
  if (args.n_best > args.beam)
    throw UsageError("--n-best " + std::to_string(args.n_best) + " is more than --beam " + std::to_string(args.beam));
  args.decoding.beam_size = args.beam;
  args.decoding.n_best = args.n_best;
  args.decoding.micro_batches = args.micro_batches;
  return args;
}

// d2l's batch and learning rate (the sizes are translator::ModelConfig's defaults).
constexpr index_t kBatchSize = 64;
constexpr double kLearningRate = 0.005;

// ---- heatmaps --------------------------------------------------------------------------

std::vector<std::string> head_titles(index_t num_heads) {
  std::vector<std::string> titles;
  for (index_t h = 1; h <= num_heads; ++h) titles.push_back("Head " + std::to_string(h));
  return titles;
}

void write_heatmaps(const std::string& dir, std::size_t index, const heed::Translation<Float>& t) {
  std::filesystem::create_directories(dir);
  const std::string stem = dir + "/sentence" + std::to_string(index + 1) + "_";
  auto save = [&](const heed::Tensor<Float>& w, const std::string& name, const char* xlabel, const char* ylabel) {
    if (!w.defined() || w.numel() == 0) return;
    const bool one = w.shape()[0] == 1 && w.shape()[1] == 1;
    heed::show_heatmaps(w, xlabel, ylabel, one ? std::vector<std::string>{} : head_titles(w.shape()[1]),
                        one ? std::pair<double, double>{3.5, 3.5} : std::pair<double, double>{7.0, 3.5})
        .save(stem + name + ".svg");
  };
  save(t.encoder_attention, "encoder_self_attention", "Key positions", "Query positions");
  save(t.self_attention, "decoder_self_attention", "Key positions", "Query positions");
  save(t.cross_attention, t.self_attention.defined() ? "encoder_decoder_attention" : "bahdanau_alignment",
       "Key positions", "Query positions");
}

// ---- --evaluate -----------------------------------------------------------------------

/// Translates each distinct English sentence of `path` once, in batches, and scores the
/// translations against all of that sentence's French lines.
template <typename Net>
void evaluate(Net& net, const translator::Tokenizers& tokenizers, const heed::Vocab& src_vocab,
              const heed::Vocab& tgt_vocab, index_t num_steps, const Args& args) {
  const heed::NmtTokens pairs = heed::tokenize_nmt(heed::preprocess_nmt(heed::read_data_nmt(args.evaluate)));
  if (pairs.source.empty()) throw heed::FileError(args.evaluate + ": holds no sentence pairs");
  const translator::References refs = translator::group_references(pairs);
  const std::vector<std::string>& sources = refs.sources;
  const std::vector<std::vector<std::string>>& references = refs.references;
  heed::PredictOptions options = args.decoding;
  options.save_attention_weights = false;
  const translator::Scored scored =
      translator::translate_and_score(net, tokenizers, refs, src_vocab, tgt_vocab, num_steps, options);
  const std::vector<std::string>& hypotheses = scored.hypotheses;
  std::cout << args.evaluate << ": " << sources.size() << " English sentences, " << pairs.source.size()
            << " references\n"
            << scored.bleu.to_string() << "\n";
  std::printf("decoded in %.2f s: %.0f sentences/s\n", scored.seconds,
              static_cast<double>(sources.size()) / std::max(scored.seconds, 1e-9));
  // The worst: the lowest d2l BLEU (k = 2) against the best-matching reference.
  std::vector<std::pair<double, std::size_t>> scores;
  std::vector<std::size_t> best_reference(sources.size(), 0);
  for (std::size_t i = 0; i < sources.size(); ++i) {
    double best = -1.0;
    for (std::size_t r = 0; r < references[i].size(); ++r) {
      const double score = heed::bleu(hypotheses[i], references[i][r], 2);
      if (score > best) best = score, best_reference[i] = r;
    }
    scores.emplace_back(best, i);
  }
  const auto shown = std::min(scores.size(), static_cast<std::size_t>(args.worst));
  std::partial_sort(scores.begin(), scores.begin() + static_cast<long>(shown), scores.end());
  if (shown > 0) std::cout << "worst " << shown << " (d2l's bleu, k = 2, against the best-matching reference):\n";
  for (std::size_t k = 0; k < shown; ++k) {
    const std::size_t i = scores[k].second;
    std::printf("  %.3f  %s => %s  (reference: %s)\n", scores[k].first, sources[i].c_str(), hypotheses[i].c_str(),
                references[i][best_reference[i]].c_str());
  }
}

// ---- train or load, then translate ---------------------------------------------------

/// The most tokens a net can decode, as predict_seq2seq bounds them: the Transformer's
/// decoder reads position t at step t, and its positional encoding has max_len() of them;
/// the GRU has no limit of its own, and PredictOptions::kMaxLength bounds it.
template <typename Net>
index_t decodable_positions(const Net& net) {
  return heed::detail::max_positions(net.decoder());
}

/// --max-length and --min-length against the model, before any training or decoding:
/// past the positional encoding, decoding would fail only after max_len steps.
template <typename Net>
void check_lengths(const Net& net, const translator::ModelConfig& config, const Args& args) {
  const index_t limit = decodable_positions(net), max_length = args.decoding.max_length;
  const index_t decoded = max_length > 0 ? max_length : config.num_steps;
  if (decoded > limit)
    throw UsageError(
        max_length > 0 ? "--max-length " + std::to_string(max_length) + " is more than the model's limit of " +
                             std::to_string(limit) + " tokens (its decoder's positions)"
                       : "--max-length 0 decodes the model's num_steps, " + std::to_string(decoded) +
                             ", more than its limit of " + std::to_string(limit) + " tokens (its decoder's positions)");
  if (args.decoding.min_length > decoded)
    throw UsageError("--min-length " + std::to_string(args.decoding.min_length) + " is more than the " +
                     std::to_string(decoded) + " tokens decoded at most (--max-length, or the model's num_steps)");
}

/// What the ranks train on, to compare: the pairs read, as the loader's index tensors in
/// their first order, and the vocabularies' tokens.
std::string describe_data(const heed::NmtData& data) {
  std::uint64_t hash = heed::dist::kFnv1aOffset;
  for (index_t i = 0; i < data.data_iter.num_batches(); ++i)
    hash = heed::detail::batch_fingerprint(data.data_iter.batch(i), hash);
  for (const heed::Vocab* vocab : {&data.src_vocab, &data.tgt_vocab})
    for (const std::string& token : vocab->idx_to_token())
      hash = heed::dist::fnv1a(token.c_str(), token.size() + 1, hash);
  std::ostringstream out;
  out << data.data_iter.num_examples() << " pairs, vocabularies " << data.src_vocab.size() << " / "
      << data.tgt_vocab.size() << ", FNV-1a " << std::hex << hash;
  return out.str();
}

/// The epochs trained: --epochs, or d2l's for the model.
index_t epochs_of(const Args& args) { return args.epochs >= 0 ? args.epochs : (args.model == "bahdanau" ? 250 : 200); }

template <typename Net>
int run(const Args& args) {
  heed::default_generator().manual_seed(args.seed);
  std::unique_ptr<Net> net;
  std::unique_ptr<heed::Vocab> src_vocab, tgt_vocab;
  translator::ModelConfig config;  // d2l's
  config.model = args.model;
  translator::Tokenizers tokenizers;  // d2l's words, unless the checkpoint has SentencePiece models
  if (!args.load.empty()) {
    if (args.communicator && args.communicator->rank() != 0) return 0;  // nothing to train: rank 0 translates
    translator::Loaded<Net> loaded = translator::load_translator<Net>(args.load);
    if (loaded.config.model != args.model)
      throw heed::FileError(args.load + ": holds a " + loaded.config.model + " model, not a " + args.model + " one");
    net = std::move(loaded.net);
    src_vocab = std::move(loaded.src_vocab);
    tgt_vocab = std::move(loaded.tgt_vocab);
    config = loaded.config;
    tokenizers = loaded.tokenizers;
    check_lengths(*net, config, args);
    std::cout << "loaded " << args.model << " from " << args.load << " (" << net->num_parameters() << " parameters)\n";
  } else {
    heed::NmtData data =
        args.data.empty() ? heed::load_data_nmt_text(heed::builtin_fra_eng(), kBatchSize, config.num_steps,
                                                     args.num_examples, args.seed)
                          : heed::load_data_nmt(args.data, kBatchSize, config.num_steps, args.num_examples, args.seed);
    src_vocab = std::make_unique<heed::Vocab>(data.src_vocab);
    tgt_vocab = std::make_unique<heed::Vocab>(data.tgt_vocab);
    net = translator::make_net(config, *src_vocab, *tgt_vocab, static_cast<Net*>(nullptr));
    check_lengths(*net, config, args);
    // The same flags (main compared them) may still read other files.
    if (args.communicator) heed::dist::check_same_settings(*args.communicator, {{"--data", describe_data(data)}}, "");
    const index_t epochs = epochs_of(args);
    const bool rank0 = !args.communicator || args.communicator->rank() == 0;
    if (rank0)
      std::cout << args.model << " on " << (args.data.empty() ? "the built-in corpus" : args.data) << ": "
                << data.data_iter.num_examples() << " pairs, vocabularies " << src_vocab->size() << " / "
                << tgt_vocab->size() << ", " << net->num_parameters() << " parameters, " << epochs << " epochs\n";
    heed::TrainOptions options;
    options.micro_batches = args.micro_batches;
    options.communicator = args.communicator;
    if (!args.quiet) options.on_epoch = heed::ProgressReport();
    const heed::TrainResult result =
        heed::train_seq2seq<Float>(*net, data.data_iter, kLearningRate, epochs, *tgt_vocab, options);
    if (!rank0) return 0;  // the other ranks' parameters are rank 0's: it saves and translates
    std::printf("trained %lld epochs in %.2f s: loss %.3f, %.0f tokens/s\n", static_cast<long long>(epochs),
                result.seconds, result.losses.empty() ? 0.0 : result.losses.back(), result.tokens_per_second);
    if (args.communicator)
      std::printf("%d processes; the gradients' all-reduce took %.1f %% of rank 0's time\n", args.communicator->size(),
                  100.0 * result.communication_seconds / std::max(result.seconds, 1e-9));
  }
  if (args.communicator && args.communicator->rank() != 0) return 0;
  if (!args.save.empty()) {
    std::map<std::string, std::string> metadata = config.to_metadata();
    metadata.merge(translator::vocab_metadata(*src_vocab, *tgt_vocab));
    metadata.merge(tokenizers.metadata());  // a loaded subword model keeps its SentencePiece models
    heed::save_checkpoint(*net, args.save, metadata);
    std::cout << "saved " << args.save << "\n";
  }

  // d2l's four sentences, with their references (or the --evaluate file), then the user's.
  std::vector<std::string> sentences = {"go .", "i lost .", "he's calm .", "i'm home ."};
  std::vector<std::string> references = {"va !", "j'ai perdu .", "il est calme .", "je suis chez moi ."};
  if (!args.evaluate.empty()) {
    evaluate(*net, tokenizers, *src_vocab, *tgt_vocab, config.num_steps, args);
    sentences.clear();
    references.clear();
  }
  sentences.insert(sentences.end(), args.sentences.begin(), args.sentences.end());
  heed::PredictOptions options = args.decoding;
  options.micro_batches = 1;  // attention weights are kept: one group
  if (sentences.empty()) return 0;
  const auto translations =
      translator::translate(*net, tokenizers, sentences, *src_vocab, *tgt_vocab, config.num_steps, options);
  std::ofstream alignments;
  if (!args.alignments.empty()) {
    alignments.open(args.alignments);
    if (!alignments) throw heed::FileError("translate: cannot write " + args.alignments);
  }
  for (std::size_t i = 0; i < sentences.size(); ++i) {
    const auto& t = translations[i];
    std::cout << sentences[i] << " => " << t.text;
    if (i < references.size()) std::printf(", bleu %.3f", heed::bleu(t.text, references[i], 2));
    if (args.beam > 1) std::printf(" (score %.3f)", t.score);
    std::cout << "\n";
    for (std::size_t k = 1; k < t.n_best.size(); ++k)
      std::printf("  %zu. %s (score %.3f, log P %.3f)\n", k + 1, t.n_best[k].text.c_str(), t.n_best[k].score,
                  t.n_best[k].log_prob);
    if (!args.heatmaps.empty()) write_heatmaps(args.heatmaps, i, t);
    if (alignments.is_open() && t.cross_attention.defined() && !t.tokens.empty()) {
      // Words only: the <eos> steps of both sides are cut off.
      const index_t source_words = static_cast<index_t>(t.source_tokens.size()) - 1;
      const heed::Tensor<Float> words =
          heed::narrow(heed::narrow(t.cross_attention, 2, 0, static_cast<index_t>(t.tokens.size())), 3, 0,
                       std::min(source_words, t.cross_attention.shape()[3]));
      alignments << sentences[i] << " ||| " << t.text << " ||| " << heed::pharaoh(heed::align(words)) << "\n";
    }
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
    return args.model == "bahdanau" ? run<BahdanauNet>(args) : run<TransformerNet>(args);
  } catch (const UsageError& e) {
    return fail(e.what(), true);
  } catch (const std::exception& e) {  // heed's errors, and the standard library's: still a message, not an abort
    return fail(e.what(), false);
  }
}
