// benchmarks/train_scale.cpp — heed's side of benchmarks/compare_scale.py: d2l's
// Transformer (or Bahdanau GRU seq2seq) at a realistic size on a fra.txt-format file,
// then batched greedy decoding of a file of English sentences. Its flags, its defaults
// and its JSON record are those of the libtorch peer (../shared/peers/libtorch/
// d2l_train_scale.cpp), so that the script runs both with one command line:
//
//   OMP_NUM_THREADS=2 build/bench/benchmarks/train_scale --threads 2
//     --train ../shared/data/fra-eng-large/train.txt --train-subset 2048 --epochs 1
//     --test-src test_src.txt --hyp hyp.txt --out result.json
//
// Defaults: Transformer, 128 hidden, FFN 512, 4 heads, 2 + 2 layers, dropout 0.1,
// batch 128, num_steps 12, Adam lr 0.001, clipping 1, xavier init, 2 epochs. The data
// is d2l's load_data_nmt over the first --max-pairs lines (all by default), with
// vocabularies from all of them; --train-subset K trains on K evenly spaced pairs (row
// i·n/K), as the peer does. heed's own flags: --save FILE keeps the trained weights,
// --load FILE starts from them (with --epochs 0: decoding alone), --micro-batches K
// trains each batch as K parts on parallel threads (TrainOptions::micro_batches) and
// decodes each as K groups (PredictOptions::micro_batches), --bucket W sorts by length
// within windows of W batches (NmtDataLoader::set_bucketing; 0, the default, is d2l's
// shuffle) and the first stderr line says how much of an epoch is padding, --precision
// bf16 trains in mixed precision (TrainOptions::precision; decoding stays fp32). The time is
// train_seq2seq's alone (the peer's too); tokens are the targets' valid lengths, as d2l
// counts them.
//
// Built with heed::mpi and run under `mpiexec -n N`, it trains data-parallel on the N
// processes (TrainOptions::communicator, benchmarks/compare_dist.py); rank 0 alone
// decodes and writes the record, which adds "ranks" and "allreduce_s".
#ifdef HEED_WITH_MPI
#include <heed/dist/mpi.hpp>
#endif
#include <heed/heed.hpp>
#include <heed/io/checkpoint.hpp>
#include <heed/seq2seq/data.hpp>
#include <heed/seq2seq/encoder_decoder.hpp>
#include <heed/seq2seq/predict.hpp>
#include <heed/seq2seq/train.hpp>
#include <heed/seq2seq/translator_nets.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <limits>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "peak_memory.hpp"

namespace {

using heed::index_t;
using Float = float;
using BahdanauNet = heed::BahdanauNet<Float>;
using TransformerNet = heed::TransformerNet<Float>;

struct Args {
  std::string model = "transformer", train_path = "../shared/data/fra-eng-large/train.txt";
  std::string test_src, hyp_path, out_path, save_path, load_path;
  long max_pairs = 0, train_subset = 0, epochs = 2, decode_batch = 128, micro_batches = 1;
  int threads = 2;
  std::uint64_t seed = 0;
  heed::dist::Communicator* communicator = nullptr;  // mpiexec's processes, when more than one
  bool quiet = false;
  index_t bucket = 0;  // NmtDataLoader::set_bucketing: windows of this many batches sorted by length
  heed::Precision precision = heed::Precision::fp32;  // training's products (TrainOptions::precision)
  index_t batch_size = 128, num_steps = 12, num_hiddens = 128, num_layers = 2, embed_size = 128, ffn_num_hiddens = 512,
          num_heads = 4;
  double lr = 0.001, dropout = 0.1;
};

/// `text` as a Number in [min, max], all of it, or invalid_argument naming the flag.
template <typename Number>
Number parse_number(const std::string& flag, const std::string& text, Number min,
                    Number max = std::numeric_limits<Number>::max()) {
  std::istringstream in(text);
  Number value{};
  in >> value;
  if (text.empty() || in.fail() || !in.eof() || !(value >= min && value <= max))
    throw std::invalid_argument(flag + " wants a number in [" + std::to_string(min) + ", " + std::to_string(max) +
                                "], got '" + text + "'");
  return value;
}

Args parse_args(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) throw std::invalid_argument("missing value for " + flag);
      return argv[++i];
    };
    if (flag == "--model")
      a.model = next();
    else if (flag == "--train")
      a.train_path = next();
    else if (flag == "--max-pairs")
      a.max_pairs = parse_number<long>(flag, next(), 0);
    else if (flag == "--train-subset")
      a.train_subset = parse_number<long>(flag, next(), 0);
    else if (flag == "--epochs")
      a.epochs = parse_number<long>(flag, next(), 0);
    else if (flag == "--threads")
      a.threads = parse_number<int>(flag, next(), 1);
    else if (flag == "--micro-batches")
      a.micro_batches = parse_number<long>(flag, next(), 1);
    else if (flag == "--bucket")
      a.bucket = parse_number<long>(flag, next(), 0);
    else if (flag == "--precision")
      try {
        a.precision = heed::parse_precision(next(), "--precision");
      } catch (const heed::ValueError& e) {
        throw std::invalid_argument(e.what());
      }
    else if (flag == "--seed")
      a.seed = static_cast<std::uint64_t>(parse_number<long>(flag, next(), 0));
    else if (flag == "--batch-size")
      a.batch_size = parse_number<long>(flag, next(), 1);
    else if (flag == "--num-steps")
      a.num_steps = parse_number<long>(flag, next(), 1);
    else if (flag == "--lr")
      a.lr = parse_number<double>(flag, next(), 1e-12, 10.0);
    else if (flag == "--num-hiddens")
      a.num_hiddens = parse_number<long>(flag, next(), 1);
    else if (flag == "--embed-size")
      a.embed_size = parse_number<long>(flag, next(), 1);
    else if (flag == "--ffn-num-hiddens")
      a.ffn_num_hiddens = parse_number<long>(flag, next(), 1);
    else if (flag == "--num-heads")
      a.num_heads = parse_number<long>(flag, next(), 1);
    else if (flag == "--num-layers")
      a.num_layers = parse_number<long>(flag, next(), 1);
    else if (flag == "--dropout")
      a.dropout = parse_number<double>(flag, next(), 0.0, 1.0);
    else if (flag == "--test-src")
      a.test_src = next();
    else if (flag == "--hyp")
      a.hyp_path = next();
    else if (flag == "--decode-batch")
      a.decode_batch = parse_number<long>(flag, next(), 1);
    else if (flag == "--out")
      a.out_path = next();
    else if (flag == "--quiet")
      a.quiet = true;
    else if (flag == "--save")
      a.save_path = next();
    else if (flag == "--load")
      a.load_path = next();
    else
      throw std::invalid_argument("unknown flag " + flag);
  }
  if (a.model != "bahdanau" && a.model != "transformer")
    throw std::invalid_argument("--model wants transformer or bahdanau, got '" + a.model + "'");
  return a;
}

/// The net of --model at these sizes: heed's factories (heed/seq2seq/translator_nets.hpp),
/// as translate and train_translator build theirs.
template <typename Net>
std::unique_ptr<Net> make_net(const Args& a, const heed::Vocab& src, const heed::Vocab& tgt) {
  heed::TranslatorConfig c;
  c.model = a.model;
  c.num_hiddens = a.num_hiddens, c.embed_size = a.embed_size, c.ffn_num_hiddens = a.ffn_num_hiddens;
  c.num_heads = a.num_heads, c.num_layers = a.num_layers, c.dropout = a.dropout;
  if constexpr (std::is_same_v<Net, BahdanauNet>)
    return heed::make_bahdanau_net<Float>(c, src.size(), tgt.size());
  else
    return heed::make_transformer_net<Float>(c, src.size(), tgt.size());
}

double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (const char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

std::string json_number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.10g", v);
  return buf;
}

template <typename Net>
int run(const Args& a) {
#ifdef _OPENMP
  omp_set_num_threads(a.threads);
#endif
  heed::default_generator().manual_seed(a.seed);
  const double t0 = now_s();
  heed::ReadNmtOptions read_options;
  if (a.max_pairs > 0) read_options.max_pairs = static_cast<std::size_t>(a.max_pairs);
  auto tokens = std::make_unique<heed::NmtTokens>(
      heed::tokenize_nmt(heed::preprocess_nmt(heed::read_data_nmt(a.train_path, read_options))));
  if (tokens->source.empty()) throw heed::ValueError(a.train_path + ": no sentence pairs");
  const std::vector<std::string> reserved{"<pad>", "<bos>", "<eos>"};
  const heed::Vocab src_vocab(tokens->source, 2, reserved), tgt_vocab(tokens->target, 2, reserved);
  heed::NmtArray src = heed::build_array_nmt(tokens->source, src_vocab, a.num_steps);
  heed::NmtArray tgt = heed::build_array_nmt(tokens->target, tgt_vocab, a.num_steps);
  tokens.reset();  // the words are in the arrays now, as load_data_nmt leaves them
  const index_t n_pairs_read = src.array.size(0);
  if (a.train_subset > 0) {
    const index_t k = std::min<index_t>(a.train_subset, n_pairs_read);
    heed::IndexTensor rows = heed::detail::make_tensor<std::int64_t>(heed::Shape{k});
    for (index_t i = 0; i < k; ++i) rows.data()[i] = i * n_pairs_read / k;
    src = {heed::index_select(src.array, 0, rows), heed::index_select(src.valid_len, 0, rows)};
    tgt = {heed::index_select(tgt.array, 0, rows), heed::index_select(tgt.valid_len, 0, rows)};
  }
  heed::NmtDataLoader loader(src.array, src.valid_len, tgt.array, tgt.valid_len, a.batch_size, a.seed);
  loader.set_bucketing(a.bucket);
  const heed::PaddingStats padding = heed::padding_of_next_epoch(loader);
  const double data_load_s = now_s() - t0;

  const auto net = make_net<Net>(a, src_vocab, tgt_vocab);
#ifdef HEED_WITH_OPENBLAS
  const std::string gemm = std::string(openblas_get_config()) + ", core " + openblas_get_corename() +
                           " (heed/ops/gemm.hpp picks it or Eigen per shape)";
#else
  const std::string gemm = "Eigen";
#endif
  const bool rank0 = !a.communicator || a.communicator->rank() == 0;
  if (rank0)
    std::fprintf(stderr,
                 "heed: %lld pairs, vocab %lld/%lld, %lld params, %d threads, GEMM %s; bucketing %lld: %.1f %% of the "
                 "first epoch's positions are padding\n",
                 static_cast<long long>(loader.num_examples()), static_cast<long long>(src_vocab.size()),
                 static_cast<long long>(tgt_vocab.size()), static_cast<long long>(net->num_parameters()), a.threads,
                 gemm.c_str(), static_cast<long long>(a.bucket), 100.0 * padding.fraction());
  heed::TrainOptions options;
  options.micro_batches = a.micro_batches;
  options.precision = a.precision;
  options.communicator = a.communicator;
  if (!a.quiet)
    options.on_epoch = [](const heed::EpochStats& s) {
      std::fprintf(stderr, "epoch %lld: loss %.4f\n", static_cast<long long>(s.epoch), s.loss);
    };
  if (!a.load_path.empty()) {
    heed::load_checkpoint(*net, a.load_path);
    options.xavier_init = false;
  }
  const std::uint64_t allocations_before_training = heed::buffer_allocations();
  const heed::TrainResult result = heed::train_seq2seq<Float>(*net, loader, a.lr, a.epochs, tgt_vocab, options);
  const std::uint64_t train_allocations = heed::buffer_allocations() - allocations_before_training;
  const heed::BufferUsage train_usage = heed::buffer_usage();  // peaks since the start: training's
  if (!rank0) return 0;                                        // its parameters are rank 0's
  if (!a.save_path.empty()) heed::save_checkpoint(*net, a.save_path);

  std::vector<std::string> sentences, hyps;
  if (!a.test_src.empty()) {
    std::ifstream in(a.test_src);
    if (!in) throw heed::FileError("train_scale: cannot open " + a.test_src);
    for (std::string line; std::getline(in, line);) sentences.push_back(line);
  }
  heed::PredictOptions predict_options;
  predict_options.save_attention_weights = false;
  predict_options.micro_batches = a.micro_batches;  // each decode batch as K groups, on parallel threads
  const std::uint64_t allocations_before_decoding = heed::buffer_allocations();  // after saving, if asked
  const double t1 = now_s();
  const heed::PackedWeightsGuard packed_weights;  // the weights packed once for all batches, not once per batch
  for (std::size_t b = 0; b < sentences.size(); b += static_cast<std::size_t>(a.decode_batch)) {
    const auto last = std::min(sentences.size(), b + static_cast<std::size_t>(a.decode_batch));
    const std::vector<std::string> chunk(sentences.begin() + static_cast<long>(b),
                                         sentences.begin() + static_cast<long>(last));
    for (const auto& t : heed::predict_seq2seq<Float>(*net, chunk, src_vocab, tgt_vocab, a.num_steps, predict_options))
      hyps.push_back(t.text);
  }
  const double decode_s = now_s() - t1;
  const std::uint64_t decode_allocations = heed::buffer_allocations() - allocations_before_decoding;
  if (!a.hyp_path.empty()) {
    std::ofstream f(a.hyp_path);
    for (const auto& h : hyps) f << h << "\n";
    if (!f) throw heed::FileError("train_scale: cannot write " + a.hyp_path);
  }
  const double final_loss = result.losses.empty() ? 0.0 : result.losses.back();
  const int ranks = a.communicator ? a.communicator->size() : 1;
  if (ranks > 1)
    std::printf(
        "heed %d processes: the gradients' all-reduce took %.2f s, %.1f %% of training, after %.2f s of "
        "waiting for the slowest rank\n",
        ranks, result.communication_seconds, 100.0 * result.communication_seconds / std::max(result.seconds, 1e-9),
        result.wait_seconds);
  std::printf(
      "heed threads %d, micro-batches %ld: train %.2f s, %.0f tokens/s, final loss %.4f; decode %zu sentences in %.2f "
      "s; "
      "tensor buffers allocated: %llu training, %llu decoding; peak tensor memory %.1f MiB in use, "
      "%.1f MiB held\n",
      a.threads, a.micro_batches, result.seconds, result.tokens_per_second, final_loss, sentences.size(), decode_s,
      static_cast<unsigned long long>(train_allocations), static_cast<unsigned long long>(decode_allocations),
      static_cast<double>(train_usage.peak_in_use) / 1048576.0, static_cast<double>(train_usage.peak_held) / 1048576.0);
  std::fflush(stdout);
  if (!a.out_path.empty()) {
    const double elements_per_step =
        result.steps > 0 ? static_cast<double>(result.elements_summed) / static_cast<double>(result.steps) : 0.0;
    std::ostringstream js;
    js << "{\"impl\": \"heed\", \"model\": " << json_string(a.model) << ", \"threads\": " << a.threads
       << ", \"ranks\": " << ranks << ", \"allreduce_s\": " << json_number(result.communication_seconds)
       << ", \"allreduce_wait_s\": " << json_number(result.wait_seconds)
       << ", \"allreduce_elements_per_step\": " << json_number(elements_per_step)
       << ", \"micro_batches\": " << a.micro_batches << ", \"bucket\": " << a.bucket
       << ", \"precision\": " << json_string(heed::to_string(a.precision))
       << ", \"padded_fraction\": " << json_number(padding.fraction()) << ", \"seed\": " << a.seed
       << ", \"train_file\": " << json_string(a.train_path) << ", \"max_pairs\": " << a.max_pairs
       << ", \"train_subset\": " << a.train_subset << ", \"n_pairs_read\": " << n_pairs_read
       << ", \"n_train_pairs\": " << loader.num_examples() << ", \"src_vocab\": " << src_vocab.size()
       << ", \"tgt_vocab\": " << tgt_vocab.size() << ", \"n_params\": " << net->num_parameters()
       << ", \"epochs\": " << a.epochs << ", \"batch_size\": " << a.batch_size << ", \"num_steps\": " << a.num_steps
       << ", \"lr\": " << json_number(a.lr) << ", \"num_hiddens\": " << a.num_hiddens
       << ", \"ffn_num_hiddens\": " << a.ffn_num_hiddens << ", \"num_heads\": " << a.num_heads
       << ", \"num_layers\": " << a.num_layers << ", \"dropout\": " << json_number(a.dropout)
       << ", \"data_load_s\": " << json_number(data_load_s) << ", \"train_wall_s\": " << json_number(result.seconds)
       << ", \"tokens\": " << result.tokens << ", \"tokens_per_s\": " << json_number(result.tokens_per_second)
       << ", \"final_loss\": " << json_number(final_loss) << ", \"epoch_losses\": [";
    for (std::size_t i = 0; i < result.losses.size(); ++i) js << (i ? ", " : "") << json_number(result.losses[i]);
    js << "], \"decode_sentences\": " << sentences.size() << ", \"decode_batch\": " << a.decode_batch
       << ", \"decode_wall_s\": " << json_number(decode_s) << ", \"sentences_per_s\": "
       << json_number(decode_s > 0 ? static_cast<double>(sentences.size()) / decode_s : 0.0)
       << ", \"train_buffer_allocations\": " << train_allocations
       << ", \"decode_buffer_allocations\": " << decode_allocations
       << ", \"train_peak_tensor_mib\": " << json_number(static_cast<double>(train_usage.peak_in_use) / 1048576.0)
       << ", \"train_peak_held_mib\": " << json_number(static_cast<double>(train_usage.peak_held) / 1048576.0)
       << ", \"peak_rss_mib\": " << json_number(heed_bench::status_mib("VmHWM")) << ", \"gemm\": " << json_string(gemm)
       << "}\n";
    std::ofstream f(a.out_path);
    f << js.str();
    if (!f) throw heed::FileError("train_scale: cannot write " + a.out_path);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
#ifdef HEED_WITH_MPI
  heed::dist::MpiSession mpi(&argc, &argv);
  heed::dist::MpiCommunicator world;
#endif
  Args args;
  try {
    args = parse_args(argc, argv);
#ifdef HEED_WITH_MPI
    if (world.size() > 1) args.communicator = &world;
#endif
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr,
                 "train_scale: %s\nusage: train_scale [--model transformer|bahdanau] [--train FILE] [--max-pairs N]"
                 " [--train-subset K] [--epochs N] [--threads N] [--seed N] [--batch-size N] [--num-steps N] [--lr X]"
                 " [--num-hiddens N] [--embed-size N] [--ffn-num-hiddens N] [--num-heads N] [--num-layers N]"
                 " [--dropout X] [--test-src FILE --hyp FILE] [--decode-batch N] [--out FILE] [--quiet]"
                 " [--save FILE] [--load FILE] [--micro-batches K] [--bucket W] [--precision fp32|bf16]\n",
                 e.what());
    return 2;
  }
  try {
    return args.model == "bahdanau" ? run<BahdanauNet>(args) : run<TransformerNet>(args);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "train_scale: %s\n", e.what());
    return 1;
  }
}
