// bench_transformer — d2l's Transformer EncoderBlock (d2l 10.7.4) and MultiHeadAttention
// (d2l 10.5), forward and forward+backward, float.
//
// Goals (compare_transformer.py prints them next to PyTorch running d2l's own modules on
// the same machine, with the same thread count):
//   (a) EncoderBlock(512, 512, 512, 512, {512}, 512, 2048, 8 heads, dropout 0) forward +
//       backward on X (8, 128, 512) with 1-D valid_lens: at least as fast as PyTorch;
//   (b) MultiHeadAttention(512, 512, 512, 512, 8 heads, dropout 0) self-attention forward
//       (eval, no grad) on X (8, 512, 512) with 1-D valid_lens: at least as fast;
//   (c) the peak memory of the forward + backward of (a) and of MultiHeadAttention at
//       the size of (b) no more than PyTorch's (--peak-memory, below).
//
// Forward+backward iterations run the module in training mode (dropout 0, so the same
// arithmetic) on an input X that requires grad (as a block inside a stack does: its
// input's gradient is needed), call out.backward(g) with a fixed random g, then clear
// every .grad() (module.zero_grad() and X.zero_grad() drop the tensors; timed, and
// negligible), so each iteration writes fresh gradients, as the first backward of a
// training step does. Forward-only iterations run in eval mode under heed::NoGradGuard
// (PyTorch: eval() and torch.no_grad()). keep / no_keep: the attention weights kept
// (the default, attention_weights() after a forward) or not (keep_attention_weights(false)).
//
// The valid lengths are heed::randint(1, steps + 1, {batch}, Generator(seed)), which
// compare_transformer.py reproduces (std::mt19937_64), so both sides mask the same keys.
//
// Peak memory: `bench_transformer --peak-memory=encoder_block` (or multi_head_attention,
// or enc_attention / enc_addnorm / enc_ffn, the block's sublayers) builds the module
// (training mode) and its full-size inputs, runs one tiny forward + backward of a
// separate small module (so that OpenMP's threads and the like exist before the
// baseline, without touching the measured module's gradients), records the peak
// resident size, runs ONE full-size forward + backward, records the peak again and
// prints one JSON line with the growth in MiB, then exits without running any
// benchmark (benchmarks/peak_memory.hpp says what is measured and why);
// --buffer-cache-limit=0 shows the footprint without heed's buffer cache. Run it in a
// fresh process per measurement.
//
// BM_*Steps: both modules forward + backward at 128 and 512 steps, for
// compare_fused_attention.py.
//
// Benchmark names are read by compare_transformer.py and compare_fused_attention.py;
// keep them in step.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>

#include <heed/attention/multi_head.hpp>
#include <heed/heed.hpp>
#include <heed/transformer/add_norm.hpp>
#include <heed/transformer/encoder.hpp>
#include <heed/transformer/ffn.hpp>

#include "peak_memory.hpp"

namespace {

using heed::index_t;

// EncoderBlock case: (batch, steps, hiddens), FFN width, heads.
constexpr index_t kBatch = 8, kEncSteps = 128, kHiddens = 512, kFfnHiddens = 2048, kHeads = 8;
// MultiHeadAttention case: (batch, steps, hiddens) with kHeads heads.
constexpr index_t kMhaSteps = 512;

// Seeds, shared with compare_transformer.py where it needs the same values.
constexpr std::uint64_t kEncValidLensSeed = 10, kMhaValidLensSeed = 11;  // read by the script
constexpr std::uint64_t kEncDataSeed = 12, kMhaDataSeed = 13, kInitSeed = 14;

struct Inputs {
  heed::Tensor<float> X, out_gradient;
  heed::IndexTensor valid_lens;
};

Inputs make_inputs(index_t steps, std::uint64_t data_seed, std::uint64_t lens_seed) {
  heed::Generator gen(data_seed);
  Inputs in;
  in.X = heed::randn<float>({kBatch, steps, kHiddens}, gen);
  in.out_gradient = heed::randn<float>({kBatch, steps, kHiddens}, gen);
  heed::Generator lens(lens_seed);
  in.valid_lens = heed::randint(1, steps + 1, {kBatch}, lens);
  return in;
}

// Made once and shared (read-only) by every run.
const Inputs& encoder_inputs() {
  static const Inputs in = make_inputs(kEncSteps, kEncDataSeed, kEncValidLensSeed);
  return in;
}
const Inputs& mha_inputs() {
  static const Inputs in = make_inputs(kMhaSteps, kMhaDataSeed, kMhaValidLensSeed);
  return in;
}

// d2l's sizes: EncoderBlock(512, 512, 512, 512, [512], 512, 2048, 8, 0).
struct EncoderBlockModel {
  heed::Generator gen{kInitSeed};
  heed::TransformerOptions options = [this] {
    heed::TransformerOptions o;
    o.generator = &gen;
    return o;
  }();
  heed::EncoderBlock<float> block{kHiddens, kHiddens, kHiddens, kHiddens, heed::Shape{kHiddens}, kHiddens, kFfnHiddens,
                                  kHeads,   0.0,      false,    options};
};

// d2l's MultiHeadAttention(512, 512, 512, 512, 8, 0).
struct MultiHeadAttentionModel {
  heed::Generator gen{kInitSeed};
  heed::MultiHeadAttention<float> attention{kHiddens, kHiddens, kHiddens, kHiddens, kHeads, 0.0, false, 0, gen};
};

// ---- EncoderBlock ---------------------------------------------------------------------

void BM_EncoderBlock(benchmark::State& state, bool keep_weights) {
  const auto& in = encoder_inputs();
  const heed::AttentionMask<float> mask = in.valid_lens;
  EncoderBlockModel m;
  m.block.eval();
  m.block.attention.keep_attention_weights(keep_weights);
  heed::NoGradGuard no_grad;
  for (auto _ : state) {
    auto out = m.block(in.X, mask);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
}

void encoder_block_fwd_bwd(benchmark::State& state, const Inputs& in, bool keep_weights) {
  auto X = in.X.detach().requires_grad_();  // a leaf of its own over the shared data
  const heed::AttentionMask<float> mask = in.valid_lens;
  EncoderBlockModel m;
  m.block.train();
  m.block.attention.keep_attention_weights(keep_weights);
  for (auto _ : state) {
    auto out = m.block(X, mask);
    out.backward(in.out_gradient);
    benchmark::DoNotOptimize(X.grad().data());
    benchmark::DoNotOptimize(m.block.attention.W_q.weight.grad().data());
    benchmark::ClobberMemory();
    X.zero_grad();
    m.block.zero_grad();
  }
}

void BM_EncoderBlockFwdBwd(benchmark::State& state, bool keep_weights) {
  encoder_block_fwd_bwd(state, encoder_inputs(), keep_weights);
}

// Mixed precision (heed/ops/autocast.hpp): the products in bf16, as PyTorch's
// torch.autocast('cpu', dtype=torch.bfloat16), against which compare_transformer.py runs it.
void BM_EncoderBlockFwdBwdBf16(benchmark::State& state) {
  const heed::AutocastGuard autocast(heed::Precision::bf16);
  encoder_block_fwd_bwd(state, encoder_inputs(), false);
}

BENCHMARK_CAPTURE(BM_EncoderBlock, keep, true)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_EncoderBlock, no_keep, false)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_EncoderBlockFwdBwd, keep, true)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_EncoderBlockFwdBwd, no_keep, false)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_EncoderBlockFwdBwdBf16)->Unit(benchmark::kMillisecond)->UseRealTime();

// The block's sublayers on their own, forward+backward at the block's size, to show
// where its time goes: block = attention + 2 × AddNorm + FFN (+ the graph's glue).

void BM_EncoderPart_AttentionFwdBwd(benchmark::State& state) {  // MultiHeadAttention at (8, 128, 512)
  const auto& in = encoder_inputs();
  auto X = in.X.detach().requires_grad_();
  const heed::AttentionMask<float> mask = in.valid_lens;
  MultiHeadAttentionModel m;
  for (auto _ : state) {
    auto out = m.attention(X, X, X, mask);
    out.backward(in.out_gradient);
    benchmark::DoNotOptimize(X.grad().data());
    benchmark::ClobberMemory();
    X.zero_grad();
    m.attention.zero_grad();
  }
}

void BM_EncoderPart_AddNormFwdBwd(benchmark::State& state) {  // LayerNorm(Y + X)
  const auto& in = encoder_inputs();
  auto X = in.X.detach().requires_grad_();
  auto Y = in.out_gradient.detach().requires_grad_();
  heed::AddNorm<float> add_norm(heed::Shape{kHiddens}, 0.0);
  for (auto _ : state) {
    auto out = add_norm(X, Y);
    out.backward(in.out_gradient);
    benchmark::DoNotOptimize(X.grad().data());
    benchmark::DoNotOptimize(Y.grad().data());
    benchmark::ClobberMemory();
    X.zero_grad();
    Y.zero_grad();
    add_norm.zero_grad();
  }
}

void BM_EncoderPart_FFNFwdBwd(benchmark::State& state) {  // dense2(relu(dense1(X))), 512 -> 2048 -> 512
  const auto& in = encoder_inputs();
  auto X = in.X.detach().requires_grad_();
  heed::Generator gen(kInitSeed);
  heed::PositionWiseFFN<float> ffn(kHiddens, kFfnHiddens, kHiddens, heed::Activation::relu, gen);
  for (auto _ : state) {
    auto out = ffn(X);
    out.backward(in.out_gradient);
    benchmark::DoNotOptimize(X.grad().data());
    benchmark::ClobberMemory();
    X.zero_grad();
    ffn.zero_grad();
  }
}

BENCHMARK(BM_EncoderPart_AttentionFwdBwd)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_EncoderPart_AddNormFwdBwd)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_EncoderPart_FFNFwdBwd)->Unit(benchmark::kMillisecond)->UseRealTime();

// ---- MultiHeadAttention at (8, 512, 512) -----------------------------------------------

void BM_MultiHeadAttention(benchmark::State& state, bool keep_weights) {
  const auto& in = mha_inputs();
  const heed::AttentionMask<float> mask = in.valid_lens;
  MultiHeadAttentionModel m;
  m.attention.eval();
  m.attention.keep_attention_weights(keep_weights);
  heed::NoGradGuard no_grad;
  for (auto _ : state) {
    auto out = m.attention(in.X, in.X, in.X, mask);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
}

void multi_head_attention_fwd_bwd(benchmark::State& state, const Inputs& in, bool keep_weights) {
  auto X = in.X.detach().requires_grad_();
  const heed::AttentionMask<float> mask = in.valid_lens;
  MultiHeadAttentionModel m;
  m.attention.train();
  m.attention.keep_attention_weights(keep_weights);
  for (auto _ : state) {
    auto out = m.attention(X, X, X, mask);
    out.backward(in.out_gradient);
    benchmark::DoNotOptimize(X.grad().data());
    benchmark::DoNotOptimize(m.attention.W_q.weight.grad().data());
    benchmark::ClobberMemory();
    X.zero_grad();
    m.attention.zero_grad();
  }
}

// The forward's two kinds of work on their own (eval, no grad): one of the four 512 ×
// 512 projections, and the attention proper over the split heads (8, 8, 512, 64).
void BM_MhaPart_Projection(benchmark::State& state) {
  const auto& in = mha_inputs();
  heed::Generator gen(kInitSeed);
  heed::Linear<float> W(kHiddens, kHiddens, false, gen);
  heed::NoGradGuard no_grad;
  for (auto _ : state) {
    auto out = W(in.X);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
}

void BM_MhaPart_Attention(benchmark::State& state) {
  const auto& in = mha_inputs();
  const auto heads = heed::split_heads(in.X, kHeads);  // (8, 8, 512, 64), a contiguous copy
  const heed::AttentionMask<float> mask = in.valid_lens;
  heed::DotProductAttention<float> attention(0.0);
  attention.eval();
  heed::NoGradGuard no_grad;
  for (auto _ : state) {
    auto out = attention(heads, heads, heads, mask);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
}

void BM_MultiHeadAttentionFwdBwd(benchmark::State& state, bool keep_weights) {
  multi_head_attention_fwd_bwd(state, mha_inputs(), keep_weights);
}

BENCHMARK_CAPTURE(BM_MultiHeadAttention, keep, true)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_MultiHeadAttention, no_keep, false)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_MultiHeadAttentionFwdBwd, keep, true)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_MultiHeadAttentionFwdBwd, no_keep, false)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_MhaPart_Projection)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_MhaPart_Attention)->Unit(benchmark::kMillisecond)->UseRealTime();

// ---- both modules at 128 and 512 steps (compare_fused_attention.py) ---------------------
// The inputs of steps T: make_inputs(T, kEncDataSeed, kEncValidLensSeed), so valid_lens
// are heed::randint(1, T + 1, {8}, Generator(10)).

const Inputs& steps_inputs(index_t steps) {
  static std::map<index_t, Inputs> cache;  // benchmarks run one at a time
  auto it = cache.find(steps);
  if (it == cache.end()) it = cache.emplace(steps, make_inputs(steps, kEncDataSeed, kEncValidLensSeed)).first;
  return it->second;
}

void BM_EncoderBlockFwdBwdSteps(benchmark::State& state, bool keep_weights) {
  encoder_block_fwd_bwd(state, steps_inputs(state.range(0)), keep_weights);
}
void BM_MultiHeadAttentionFwdBwdSteps(benchmark::State& state, bool keep_weights) {
  multi_head_attention_fwd_bwd(state, steps_inputs(state.range(0)), keep_weights);
}

void at_128_and_512_steps(benchmark::internal::Benchmark* b) {
  b->Arg(128)->Arg(512)->Unit(benchmark::kMillisecond)->UseRealTime();
}

BENCHMARK_CAPTURE(BM_EncoderBlockFwdBwdSteps, keep, true)->Apply(at_128_and_512_steps);
BENCHMARK_CAPTURE(BM_EncoderBlockFwdBwdSteps, no_keep, false)->Apply(at_128_and_512_steps);
BENCHMARK_CAPTURE(BM_MultiHeadAttentionFwdBwdSteps, keep, true)->Apply(at_128_and_512_steps);
BENCHMARK_CAPTURE(BM_MultiHeadAttentionFwdBwdSteps, no_keep, false)->Apply(at_128_and_512_steps);

// ---- peak memory (--peak-memory=...) ---------------------------------------------------

/// The peak of one forward(X) + backward on `in`, X a fresh leaf; the module is built
/// by the caller, before the baseline.
template <typename Forward>
int report_fwd_bwd_peak(const char* which, const Inputs& in, Forward&& forward) {
  auto X = in.X.detach().requires_grad_();
  return heed_bench::report_peak(which, [&] {
    forward(X).backward(in.out_gradient);
    benchmark::DoNotOptimize(X.grad().data());
  });
}

int peak_memory(const std::string& which) {
  const heed::AttentionMask<float> enc_mask = encoder_inputs().valid_lens;
  if (which == "encoder_block") {
    EncoderBlockModel m;
    m.block.train();
    return report_fwd_bwd_peak("encoder_block", encoder_inputs(), [&](const auto& X) { return m.block(X, enc_mask); });
  }
  if (which == "multi_head_attention" || which == "enc_attention") {
    // The second at the block's size, like the sublayers below: where the block's memory goes.
    const Inputs& in = which == "enc_attention" ? encoder_inputs() : mha_inputs();
    const heed::AttentionMask<float> mask = in.valid_lens;
    MultiHeadAttentionModel m;
    m.attention.train();
    return report_fwd_bwd_peak(which.c_str(), in, [&](const auto& X) { return m.attention(X, X, X, mask); });
  }
  if (which == "enc_addnorm") {
    auto Y = encoder_inputs().out_gradient.detach().requires_grad_();
    heed::AddNorm<float> add_norm(heed::Shape{kHiddens}, 0.0);
    return report_fwd_bwd_peak("enc_addnorm", encoder_inputs(), [&](const auto& X) { return add_norm(X, Y); });
  }
  if (which == "enc_ffn") {
    heed::Generator gen(kInitSeed);
    heed::PositionWiseFFN<float> ffn(kHiddens, kFfnHiddens, kHiddens, heed::Activation::relu, gen);
    return report_fwd_bwd_peak("enc_ffn", encoder_inputs(), [&](const auto& X) { return ffn(X); });
  }
  std::fprintf(stderr,
               "--peak-memory: unknown case '%s' (encoder_block, multi_head_attention, enc_attention, "
               "enc_addnorm, enc_ffn)\n",
               which.c_str());
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  // --peak-memory=CASE: measure and exit. --buffer-cache-limit=BYTES (with it or with
  // the benchmarks): heed::set_buffer_cache_limit first, e.g. 0 to see what the cache adds.
  constexpr const char* kPeakFlag = "--peak-memory=";
  constexpr const char* kCacheFlag = "--buffer-cache-limit=";
  std::string peak_case;
  int kept = 1;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], kPeakFlag, std::strlen(kPeakFlag)) == 0) {
      peak_case = argv[i] + std::strlen(kPeakFlag);
    } else if (std::strncmp(argv[i], kCacheFlag, std::strlen(kCacheFlag)) == 0) {
      heed::set_buffer_cache_limit(std::stoull(argv[i] + std::strlen(kCacheFlag)));
    } else {
      argv[kept++] = argv[i];
    }
  }
  argc = kept;
  if (!peak_case.empty()) return peak_memory(peak_case);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
