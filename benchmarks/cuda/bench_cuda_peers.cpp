// benchmarks/cuda/bench_cuda_peers.cpp — heed's side of benchmarks/cuda/compare_torch.py,
// which runs PyTorch on the same GPU with the same sizes and prints the ratios:
//
//   - Transformer training, tokens/s (target tokens): the realistic size (128 hidden,
//     FFN 512, 4 heads, 2+2 layers, batch 128 × 12 tokens) and the base size (512
//     hidden, FFN 2048, 8 heads, 6+6 layers, batch 64 × 32 tokens), vocabularies of
//     8,000 words, every sentence full length, train_seq2seq's loop (Adam, d2l's
//     gradient clipping, dropout 0.1), the last epoch's rate;
//   - attention forward + backward, (batch 8, 8 heads, L, head dim 64), causal and
//     padded (valid lengths L/2 to L), scaled_dot_product_attention;
//   - greedy and beam-4 decoding of 1,024 sentences of 5 to 11 words by the realistic
//     model (random weights, the same the peer loads: it decodes the same tokens).
//
//   bench_cuda_peers DIR [--quick]
//
// writes DIR/heed.json (every figure), DIR/decode_model.safetensors (the decoding
// model, a translator checkpoint with d2l's names) and DIR/decode_sources.txt (its
// sentences). --quick: small sizes, a rehearsal that runs on the emulated device too.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include <heed/cuda/runtime.hpp>
#include <heed/heed.hpp>

#include <heed/seq2seq/translator.hpp>
#include "timing.hpp"

namespace {

using heed::Device;
using heed::index_t;
using heed::Shape;
using heed::Tensor;

const Device gpu = Device::cuda();

using heed_bench::seconds;

struct TrainSize {
  const char* name;
  index_t hidden, ffn, heads, layers, batch, steps, batches;
};

/// Target tokens per second of train_seq2seq's last epoch on random full-length sentences.
double training(const TrainSize& s, index_t vocab_size, index_t epochs) {
  using Net = heed::EncoderDecoder<float, heed::TransformerEncoder<float>, heed::TransformerDecoder<float>>;
  heed::Generator gen(7);
  const index_t n = s.batch * s.batches;
  const heed::IndexTensor src = heed::randint(4, vocab_size, {n, s.steps}, gen);
  const heed::IndexTensor tgt = heed::randint(4, vocab_size, {n, s.steps}, gen);
  const heed::IndexTensor lens = heed::full<std::int64_t>({n}, s.steps);
  heed::NmtDataLoader loader(src, lens, tgt, lens, s.batch, 8);
  std::vector<std::vector<std::string>> words;
  for (index_t i = 4; i < vocab_size; ++i) words.push_back({"w" + std::to_string(i)});
  const heed::Vocab tgt_vocab(words, 0, {"<pad>", "<bos>", "<eos>"});
  const Shape norm{s.hidden};
  Net net(std::make_unique<heed::TransformerEncoder<float>>(vocab_size, s.hidden, s.hidden, s.hidden, s.hidden, norm,
                                                            s.hidden, s.ffn, s.heads, s.layers, 0.1),
          std::make_unique<heed::TransformerDecoder<float>>(vocab_size, s.hidden, s.hidden, s.hidden, s.hidden, norm,
                                                            s.hidden, s.ffn, s.heads, s.layers, 0.1));
  net.to(gpu);
  heed::TrainOptions options;
  double last = 0;
  options.on_epoch = [&](const heed::EpochStats& stats) { last = stats.tokens_per_second; };
  heed::train_seq2seq<float>(net, loader, 0.001, epochs, tgt_vocab, options);
  return last;
}

/// Forward + backward seconds of scaled_dot_product_attention on (8, 8, L, 64), and the
/// device memory the run reserved (the caching allocator's blocks, from empty).
std::pair<double, double> attention(index_t L, bool causal, index_t batch, index_t heads, int reps) {
  heed::Generator gen(9);
  const Shape shape{batch, heads, L, 64};
  const Tensor<float> q = heed::randn<float>(shape, gen).to(gpu).requires_grad_();
  const Tensor<float> k = heed::randn<float>(shape, gen).to(gpu).requires_grad_();
  const Tensor<float> v = heed::randn<float>(shape, gen).to(gpu).requires_grad_();
  const Tensor<float> g = heed::randn<float>(shape, gen).to(gpu);
  heed::AttentionMask<float> mask;
  if (causal) {
    mask.with_causal(true);
  } else {
    std::vector<std::int64_t> lens;
    for (index_t b = 0; b < batch; ++b) lens.push_back(L / 2 + (L / 2) * b / std::max<index_t>(batch - 1, 1));
    mask.with_valid_lens(heed::IndexTensor(lens, Shape{batch}).to(gpu));
  }
  heed::cuda::synchronize(0);
  heed::cuda::empty_cache();
  const std::size_t before = heed::cuda::allocated_bytes(0);
  const double t = seconds([&] { heed::scaled_dot_product_attention(q, k, v, mask).backward(g); }, reps);
  const std::size_t reserved = heed::cuda::allocated_bytes(0) + heed::cuda::cached_bytes(0) - before;
  return {t, static_cast<double>(reserved)};
}

/// Random sentences of 5 to 11 of the words w4 ... w{V-1}.
std::vector<std::string> sentences(index_t count, index_t vocab_size) {
  heed::Generator gen(11);
  std::vector<std::string> out;
  for (index_t i = 0; i < count; ++i) {
    const index_t length = 5 + static_cast<index_t>(gen.next_u64() % 7);
    std::string s;
    for (index_t w = 0; w < length; ++w)
      s += (w ? " w" : "w") + std::to_string(4 + static_cast<index_t>(gen.next_u64() % (vocab_size - 4)));
    out.push_back(s);
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) try {
  if (argc < 2 || argv[1][0] == '-') {
    std::fprintf(stderr, "usage: bench_cuda_peers DIR [--quick]\n");
    return 2;
  }
  const std::string dir = argv[1];
  const bool quick = argc > 2 && std::strcmp(argv[2], "--quick") == 0;
  if (heed::cuda_device_count() == 0) {
    std::printf("bench_cuda_peers: no CUDA device: nothing to time\n");
    return 77;
  }
  const index_t vocab_size = quick ? 60 : 8000;
  std::string json = "{\"quick\": " + std::string(quick ? "true" : "false") + ", \"training\": [";

  const std::vector<TrainSize> sizes =
      quick ? std::vector<TrainSize>{{"realistic", 16, 32, 2, 1, 8, 6, 2}, {"base", 32, 64, 4, 2, 4, 8, 2}}
            : std::vector<TrainSize>{{"realistic", 128, 512, 4, 2, 128, 12, 40}, {"base", 512, 2048, 8, 6, 64, 32, 20}};
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    const TrainSize& s = sizes[i];
    const double rate = training(s, vocab_size, quick ? 2 : 3);
    std::printf("training %s: %.0f tokens/s\n", s.name, rate);
    std::fflush(stdout);
    char row[256];
    std::snprintf(row, sizeof row,
                  "%s{\"size\": \"%s\", \"hidden\": %lld, \"ffn\": %lld, \"heads\": %lld, \"layers\": %lld, "
                  "\"batch\": %lld, \"steps\": %lld, \"batches\": %lld, \"vocab\": %lld, \"tokens_per_second\": %.1f}",
                  i ? ", " : "", s.name, static_cast<long long>(s.hidden), static_cast<long long>(s.ffn),
                  static_cast<long long>(s.heads), static_cast<long long>(s.layers), static_cast<long long>(s.batch),
                  static_cast<long long>(s.steps), static_cast<long long>(s.batches),
                  static_cast<long long>(vocab_size), rate);
    json += row;
  }

  json += "], \"attention\": [";
  const index_t batch = quick ? 2 : 8, heads = quick ? 2 : 8;
  bool first = true;
  for (const index_t L : quick ? std::vector<index_t>{32, 64} : std::vector<index_t>{512, 1024, 2048, 4096, 8192})
    for (const bool causal : {true, false}) {
      std::string cell;
      try {
        const auto [t, bytes] = attention(L, causal, batch, heads, quick ? 2 : 5);
        std::printf("attention L=%lld %s: %.3f ms, %.0f MiB\n", static_cast<long long>(L), causal ? "causal" : "padded",
                    1e3 * t, bytes / (1 << 20));
        char text[96];
        std::snprintf(text, sizeof text, "\"seconds\": %.6g, \"bytes\": %.0f", t, bytes);
        cell = text;
      } catch (const heed::OutOfMemoryError& e) {  // the classic path's (L, L) weights at the longest L
        std::printf("attention L=%lld %s: out of memory\n", static_cast<long long>(L), causal ? "causal" : "padded");
        cell = "\"error\": \"out of memory\"";
      }
      std::fflush(stdout);
      json += std::string(first ? "" : ", ") + "{\"batch\": " + std::to_string(batch) +
              ", \"heads\": " + std::to_string(heads) + ", \"L\": " + std::to_string(L) + ", \"mask\": \"" +
              (causal ? "causal" : "padded") + "\", " + cell + "}";
      first = false;
    }

  json += "], \"decoding\": [";
  heed::TranslatorConfig config;
  config.num_hiddens = config.embed_size = quick ? 16 : 128;
  config.ffn_num_hiddens = quick ? 32 : 512;
  config.num_heads = quick ? 2 : 4;
  config.num_layers = 2;
  config.num_steps = 12;
  config.dropout = 0.0;
  std::vector<std::vector<std::string>> words;
  for (index_t i = 4; i < vocab_size; ++i) words.push_back({"w" + std::to_string(i)});
  const heed::Vocab vocab(words, 0, {"<pad>", "<bos>", "<eos>"});
  heed::Generator init(13);
  heed::Translator translator(config, vocab, vocab, {}, &init);
  translator.save(dir + "/decode_model.safetensors");
  const std::vector<std::string> sources = sentences(quick ? 16 : 1024, vocab_size);
  std::ofstream(dir + "/decode_sources.txt") << [&] {
    std::string all;
    for (const std::string& s : sources) all += s + "\n";
    return all;
  }();
  translator.to(gpu);
  for (const index_t beam : {1, 4}) {
    heed::PredictOptions options;
    options.beam_size = beam;
    options.save_attention_weights = false;
    index_t tokens = 0;
    const double t = seconds(
        [&] {
          tokens = 0;
          for (const auto& translation : translator.translate(sources, options))
            tokens += static_cast<index_t>(translation.tokens.size());
        },
        quick ? 1 : 3, 1);
    std::printf("decoding beam %lld: %.1f sentences/s (%lld tokens out)\n", static_cast<long long>(beam),
                static_cast<double>(sources.size()) / t, static_cast<long long>(tokens));
    std::fflush(stdout);
    json += std::string(beam == 1 ? "" : ", ") + "{\"beam\": " + std::to_string(beam) +
            ", \"sentences\": " + std::to_string(sources.size()) + ", \"seconds\": " + std::to_string(t) +
            ", \"tokens\": " + std::to_string(tokens) + "}";
  }
  json += "]}\n";
  std::ofstream(dir + "/heed.json") << json;
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "bench_cuda_peers: %s\n", e.what());
  return 1;
}
