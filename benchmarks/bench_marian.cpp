// benchmarks/bench_marian.cpp — heed's side of benchmarks/compare_marian.py: beam-search
// decoding with an opus-mt-en-fr-shaped MarianMT net (d_model 512, 6 + 6 layers, 8 heads,
// FFN 2048, vocabulary 59,514, SiLU, 512 positions: 74.67 M parameters), random weights
// or a MarianMT directory's (--dir: config.json, generation_config.json when present,
// model.safetensors, loaded with marian_from_pretrained).
//
//   OMP_NUM_THREADS=1 build-bench/bench_marian --src src_ids.txt --length 32 [--dir DIR]
//       [--beam 4] [--batch 32] [--micro-batches 1] [--sentences N] [--out hyp_ids.txt]
//       [--precision fp32|bf16|int8]
//
// --src holds one sentence a line as space-separated token ids of the shared vocabulary
// (compare_marian.py writes it: no SentencePiece on either side), </s> (0) last; the </s>
// is dropped here because predict_seq2seq_tokens appends it. Token id i is the string
// "</s>" (0), "<unk>" (1), "<pad>" (V − 1) or "t<i>"; the Vocab's specials are unk <unk>,
// pad <pad>, bos <pad> (MarianMT's decoder start token) and eos </s>.
//
// The sentences are decoded in batches of --batch by predict_seq2seq_tokens: beam_size
// --beam, min_length = max_length = --length (</s> forbidden until the last step, so
// every sentence decodes exactly --length steps of batch × beam rows, whatever the
// weights), no attention weights kept, PredictOptions::micro_batches as given, all under
// one PackedWeightsGuard. --precision bf16 or int8 converts the weights in place when
// they are loaded (heed::convert_weights_, their fp32 tensors freed: as PyTorch's
// quantize_dynamic before decoding). The time is
// the loop over the batches alone (wall clock), not the build, load or conversion of the net; tokens
// are sentences × length (each sentence's best hypothesis; the beams compute beam ×
// that).
//
// Memory: VmHWM of /proc/self/status (benchmarks/peak_memory.hpp). "peak_mib" is the
// process's peak at the end (loading included); "load_peak_mib" the peak before
// decoding; then the high-water mark is reset (writing 5 to /proc/self/clear_refs) and
// "decode_peak_mib" is the peak reached while decoding, from "rss_before_decode_mib".
// "decode_tensors_peak_mib" and "decode_buffers_peak_mib" are heed's buffer cache's peaks
// while decoding (heed::buffer_usage: in tensors, and held in all, idle buffers included).
// Prints one JSON line; --out writes each sentence's best hypothesis as token ids.
#include <heed/heed.hpp>
#include <heed/seq2seq/marian.hpp>
#include <heed/seq2seq/predict.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "peak_memory.hpp"

namespace {

using heed::index_t;

struct Args {
  std::string src, dir, out;
  index_t length = 32, beam = 4, batch = 32, micro_batches = 1, sentences = 0;
  std::uint64_t seed = 1;
  heed::Precision precision = heed::Precision::fp32;
};

[[noreturn]] void usage(const std::string& why) {
  std::cerr << "bench_marian: " << why
            << "\nusage: bench_marian --src IDS_FILE [--dir MARIAN_DIR] [--length 32] [--beam 4] [--batch 32]\n"
               "                    [--micro-batches 1] [--sentences N] [--seed 1] [--out HYP_IDS_FILE]\n"
               "                    [--precision fp32|bf16|int8]\n";
  std::exit(2);
}

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) usage(flag + " needs a value");
    const std::string value = argv[++i];
    const auto number = [&]() -> index_t {
      try {
        std::size_t used = 0;
        const long long v = std::stoll(value, &used);
        if (used != value.size() || v < 0) throw std::invalid_argument(value);
        return static_cast<index_t>(v);
      } catch (const std::exception&) {
        usage(flag + ": not a non-negative integer: " + value);
      }
    };
    if (flag == "--src")
      a.src = value;
    else if (flag == "--dir")
      a.dir = value;
    else if (flag == "--out")
      a.out = value;
    else if (flag == "--length")
      a.length = number();
    else if (flag == "--beam")
      a.beam = number();
    else if (flag == "--batch")
      a.batch = number();
    else if (flag == "--precision")
      a.precision = heed::parse_precision(value, flag);
    else if (flag == "--micro-batches")
      a.micro_batches = number();
    else if (flag == "--sentences")
      a.sentences = number();
    else if (flag == "--seed")
      a.seed = static_cast<std::uint64_t>(number());
    else
      usage("unknown flag " + flag);
  }
  if (a.src.empty()) usage("--src is required");
  if (a.length < 1 || a.beam < 1 || a.batch < 1 || a.micro_batches < 1)
    usage("--length, --beam, --batch and --micro-batches must be positive");
  return a;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

/// opus-mt-en-fr's sizes (Helsinki-NLP/opus-mt-en-fr config.json).
heed::MarianConfig opus_mt_en_fr() {
  heed::MarianConfig c;
  c.d_model = 512;
  c.encoder_layers = c.decoder_layers = 6;
  c.encoder_attention_heads = c.decoder_attention_heads = 8;
  c.encoder_ffn_dim = c.decoder_ffn_dim = 2048;
  c.vocab_size = 59514;
  c.max_position_embeddings = 512;
  c.activation = heed::Activation::silu;
  c.pad_token_id = c.decoder_start_token_id = c.vocab_size - 1;
  c.eos_token_id = 0;
  c.forced_eos_token_id = 0;
  c.bad_words_ids = {c.vocab_size - 1};
  return c;
}

std::string token_name(index_t id, index_t V) {
  if (id == 0) return "</s>";
  if (id == 1) return "<unk>";
  if (id == V - 1) return "<pad>";
  return "t" + std::to_string(id);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Args args = parse(argc, argv);
    heed::MarianConfig config = opus_mt_en_fr();
    const auto load_start = std::chrono::steady_clock::now();
    if (!args.dir.empty()) {
      const std::string path = args.dir + "/config.json";
      config = heed::MarianConfig::from_json(read_text(path), path);
      const std::string generation = args.dir + "/generation_config.json";
      if (std::ifstream(generation)) config.read_generation_config(read_text(generation), generation);
    }
    heed::Generator gen(args.seed);
    auto net = args.dir.empty() ? heed::make_marian_net<float>(config, &gen)
                                : heed::marian_from_pretrained<float>(config, args.dir + "/model.safetensors");
    // bf16 or int8: the weights converted in place at load, their fp32 tensors freed
    // (heed/nn/convert_weights.hpp), as PyTorch's quantize_dynamic before decoding.
    if (args.precision != heed::Precision::fp32) heed::convert_weights_(*net, args.precision);
    const double load_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - load_start).count();
    const index_t V = config.vocab_size;

    std::vector<std::string> names;
    names.reserve(static_cast<std::size_t>(V));
    for (index_t i = 0; i < V; ++i) names.push_back(token_name(i, V));
    heed::SpecialTokens specials;
    specials.unk = "<unk>";
    specials.pad = "<pad>";
    specials.bos = "<pad>";
    specials.eos = "</s>";
    const heed::Vocab vocab = heed::Vocab::from_idx_to_token(names, specials);

    std::vector<std::vector<std::string>> sources;
    std::size_t longest = 0;
    {
      std::ifstream in(args.src);
      if (!in) throw std::runtime_error("cannot read " + args.src);
      std::string line;
      while (std::getline(in, line)) {
        if (args.sentences > 0 && static_cast<index_t>(sources.size()) == args.sentences) break;
        std::istringstream ids(line);
        std::vector<index_t> sentence;
        long long id = 0;
        while (ids >> id) {
          if (id < 0 || id >= V)
            throw std::runtime_error(args.src + ": token id " + std::to_string(id) + " not in [0, V)");
          sentence.push_back(static_cast<index_t>(id));
        }
        if (!sentence.empty() && sentence.back() == 0) sentence.pop_back();  // predict appends </s>
        std::vector<std::string> tokens;
        for (const index_t t : sentence) tokens.push_back(token_name(t, V));
        longest = std::max(longest, tokens.size());
        sources.push_back(std::move(tokens));
      }
    }
    if (sources.empty()) throw std::runtime_error(args.src + ": no sentences");
    const auto num_steps = static_cast<index_t>(longest) + 1;  // the encoder's steps: the longest source + </s>

    heed::PredictOptions options;
    options.beam_size = args.beam;
    options.min_length = options.max_length = args.length;
    options.save_attention_weights = false;
    options.micro_batches = args.micro_batches;
    options.forbidden_tokens = config.bad_words_ids;

    heed_bench::tiny_warm_up();  // OpenMP's threads, outside the measurement
    const double load_peak = heed_bench::status_mib("VmHWM");
    bool reset = false;
    {
      std::ofstream clear("/proc/self/clear_refs");
      reset = static_cast<bool>(clear << "5" << std::flush);
    }
    const double rss_before = heed_bench::status_mib("VmRSS");
    heed::reset_buffer_peaks();

    std::vector<std::vector<index_t>> hypotheses;
    hypotheses.reserve(sources.size());
    const auto start = std::chrono::steady_clock::now();
    {
      const heed::PackedWeightsGuard packed;  // for all the batches
      for (std::size_t first = 0; first < sources.size(); first += static_cast<std::size_t>(args.batch)) {
        const std::size_t last = std::min(sources.size(), first + static_cast<std::size_t>(args.batch));
        const std::vector<std::vector<std::string>> batch(sources.begin() + static_cast<std::ptrdiff_t>(first),
                                                          sources.begin() + static_cast<std::ptrdiff_t>(last));
        for (auto& t : heed::predict_seq2seq_tokens(*net, batch, vocab, vocab, num_steps, options))
          hypotheses.push_back(std::move(t.tokens));
      }
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const double decode_peak = heed_bench::status_mib("VmHWM");
    const heed::BufferUsage buffers = heed::buffer_usage();
    constexpr double kMiB = 1024.0 * 1024.0;

    std::size_t tokens = 0;
    for (const auto& h : hypotheses) tokens += h.size();
    if (!args.out.empty()) {
      std::ofstream out(args.out);
      for (const auto& h : hypotheses) {
        for (std::size_t i = 0; i < h.size(); ++i) out << (i ? " " : "") << h[i];
        out << '\n';
      }
      if (!out) throw std::runtime_error("cannot write " + args.out);
    }
    int threads = 1;
#ifdef _OPENMP
    threads = omp_get_max_threads();
#endif
    std::printf(
        "{\"side\": \"heed\", \"sentences\": %zu, \"batch\": %lld, \"beam\": %lld, \"length\": %lld, "
        "\"micro_batches\": %lld, \"precision\": \"%s\", \"threads\": %d, \"parameters\": %llu, \"encoder_steps_max\": "
        "%lld, "
        "\"tokens\": %zu, \"seconds\": %.4f, \"tokens_per_s\": %.2f, \"load_s\": %.3f, \"load_peak_mib\": %.1f, "
        "\"rss_before_decode_mib\": %.1f, \"decode_peak_mib\": %.1f, \"peak_mib\": %.1f, \"hwm_reset\": %s, "
        "\"maxrss_mib\": %.1f, \"decode_tensors_peak_mib\": %.1f, \"decode_buffers_peak_mib\": %.1f}\n",
        sources.size(), static_cast<long long>(args.batch), static_cast<long long>(args.beam),
        static_cast<long long>(args.length), static_cast<long long>(args.micro_batches),
        heed::to_string(args.precision), threads, static_cast<unsigned long long>(heed::marian_parameter_count(config)),
        static_cast<long long>(num_steps), tokens, seconds, static_cast<double>(tokens) / seconds, load_s, load_peak,
        rss_before, decode_peak, std::max(load_peak, decode_peak), reset ? "true" : "false", heed_bench::max_rss_mib(),
        static_cast<double>(buffers.peak_in_use) / kMiB, static_cast<double>(buffers.peak_held) / kMiB);
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "bench_marian: " << e.what() << '\n';
    return 1;
  }
}
