// bench_fused_attention — scaled dot-product attention at growing sequence lengths:
// heed's fused path (DotProductAttention with keep_attention_weights(false), i.e.
// heed::scaled_dot_product_attention) next to its classic path (weights kept:
// matmul → masked_softmax → matmul) and next to Eigen's GEMM throughput.
//
// Goals (compare_fused_attention.py prints them next to PyTorch on the same machine):
//   fused forward+backward at L = 2048 at least 1.5× PyTorch's bmm → softmax → bmm, and
//   at least 50 % of the GEMM throughput measured in the same run; the peak memory of
//   the fused forward+backward at L = 8192 at most a tenth of the classic path's.
//
// Cases: queries, keys and values of (8 batch, 8 heads, L, 64), randn; 1-D valid_lens
// heed::randint(1, L + 1, {8}, Generator(kValidLensSeed)), which the script reproduces;
// L ∈ {128, 512, 2048, 8192}. The classic path stops at 2048: at 8192 its
// (8, 8, 8192, 8192) weights alone are 16 GiB.
//   BM_Fused/L, BM_Classic/L:             forward, eval, under NoGradGuard
//   BM_FusedFwdBwd/L, BM_ClassicFwdBwd/L: forward + out.backward(g), g fixed and random,
//                                         then the leaves' gradients dropped (timed, negligible)
//   BM_DecodeStep/0, /1:                  one decoding step's self- and cross-attention
//                                         (one query per sentence and head, batch 128)
//   BM_EigenGemm:                         heed::matmul of two 2048 × 2048 floats, the
//                                         machine's practical GEMM ceiling (2·2048³ flops)
// Counter "useful_flops" (per iteration): the multiply-adds of the products over
// visible (query, key) pairs, ×2: forward 4·d·pairs (Q Kᵀ and P V), forward+backward
// 3× that (the backward's four products; the scores it recomputes are not counted).
//
// Peak memory: `bench_fused_attention --peak-memory=fused:L:B` (or classic:L:B) runs
// ONE forward + backward at sequence length L and batch B (8 heads, d 64) and prints the
// growth of the peak resident size (benchmarks/peak_memory.hpp), then exits.
//
// Benchmark names are read by compare_fused_attention.py; keep them in step.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>

#include <heed/heed.hpp>

#include "peak_memory.hpp"

namespace {

using heed::index_t;

constexpr index_t kBatch = 8, kHeads = 8, kHeadDim = 64;
constexpr std::uint64_t kDataSeed = 20, kValidLensSeed = 21;  // the second is read by the script

struct Inputs {
  heed::Tensor<float> queries, keys, values, out_gradient;
  heed::IndexTensor valid_lens;
  double visible_pairs = 0;  // (query, key) pairs the mask leaves visible, over batch and heads
};

Inputs make_inputs(index_t steps, index_t batch = kBatch) {
  heed::Generator gen(kDataSeed);
  const heed::Shape shape{batch, kHeads, steps, kHeadDim};
  Inputs in{heed::randn<float>(shape, gen),
            heed::randn<float>(shape, gen),
            heed::randn<float>(shape, gen),
            heed::randn<float>(shape, gen),
            {}};
  heed::Generator lens(kValidLensSeed);
  in.valid_lens = heed::randint(1, steps + 1, {batch}, lens);
  for (index_t b = 0; b < batch; ++b)
    in.visible_pairs += static_cast<double>(kHeads * steps) * static_cast<double>(in.valid_lens.data()[b]);
  return in;
}

// Made once per length and shared (read-only) by every run.
const Inputs& inputs(index_t steps) {
  static std::map<index_t, Inputs> cache;  // benchmarks run one at a time
  auto it = cache.find(steps);
  if (it == cache.end()) it = cache.emplace(steps, make_inputs(steps)).first;
  return it->second;
}

void forward(benchmark::State& state, bool fused) {
  const Inputs& in = inputs(state.range(0));
  const heed::AttentionMask<float> mask = in.valid_lens;
  heed::DotProductAttention<float> a(0.0);
  a.keep_attention_weights(!fused);  // not kept: the fused path
  a.eval();
  heed::NoGradGuard no_grad;
  for (auto _ : state) {
    auto out = a(in.queries, in.keys, in.values, mask);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.counters["useful_flops"] = 4.0 * kHeadDim * in.visible_pairs;
}

void forward_backward(benchmark::State& state, bool fused) {
  const Inputs& in = inputs(state.range(0));
  const heed::AttentionMask<float> mask = in.valid_lens;
  heed::DotProductAttention<float> a(0.0);
  a.keep_attention_weights(!fused);  // not kept: the fused path
  a.train();
  // Leaves of their own over the shared data.
  auto q = in.queries.detach().requires_grad_(), k = in.keys.detach().requires_grad_(),
       v = in.values.detach().requires_grad_();
  for (auto _ : state) {
    auto out = a(q, k, v, mask);
    out.backward(in.out_gradient);
    benchmark::DoNotOptimize(q.grad().data());
    benchmark::ClobberMemory();
    q.zero_grad(), k.zero_grad(), v.zero_grad();
  }
  state.counters["useful_flops"] = 12.0 * kHeadDim * in.visible_pairs;
}

void BM_Fused(benchmark::State& state) { forward(state, true); }
void BM_FusedFwdBwd(benchmark::State& state) { forward_backward(state, true); }
void BM_Classic(benchmark::State& state) { forward(state, false); }
void BM_ClassicFwdBwd(benchmark::State& state) { forward_backward(state, false); }

// One decoding step's attention at MarianMT's size (opus-mt-en-fr: 512 hidden, 8 heads):
// a query per (sentence, head) for a batch of 128 against 12 cached steps of keys and
// values (self-attention, read in place from a cache of 16) or against 15 encoder
// steps with valid_lens 1..15 (cross-attention). Decoding calls this 12 times a step.
void BM_DecodeStep(benchmark::State& state) {
  constexpr index_t batch = 128, capacity = 16, cached = 12, source = 15;
  const bool cross = state.range(0) == 1;
  heed::Generator gen(kDataSeed);
  const auto queries = heed::randn<float>({batch, kHeads, 1, kHeadDim}, gen);
  const index_t steps = cross ? source : capacity;
  const auto keys = heed::randn<float>({batch, kHeads, steps, kHeadDim}, gen),
             values = heed::randn<float>({batch, kHeads, steps, kHeadDim}, gen);
  heed::Generator lens(kValidLensSeed);
  const heed::AttentionMask<float> mask =
      cross ? heed::AttentionMask<float>(heed::randint(1, source + 1, {batch}, lens)) : heed::AttentionMask<float>();
  heed::DotProductAttention<float> a(0.0);
  a.keep_attention_weights(false);
  a.eval();
  heed::NoGradGuard no_grad;
  for (auto _ : state) {
    auto out = a.forward_prefix(queries, keys, values, cross ? source : cached, mask);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.SetLabel(cross ? "cross" : "self");
}

void BM_EigenGemm(benchmark::State& state) {
  constexpr index_t n = 2048;
  heed::Generator gen(kDataSeed);
  const auto a = heed::randn<float>({n, n}, gen), b = heed::randn<float>({n, n}, gen);
  heed::NoGradGuard no_grad;
  for (auto _ : state) {
    auto c = heed::matmul(a, b);
    benchmark::DoNotOptimize(c.data());
    benchmark::ClobberMemory();
  }
  state.counters["useful_flops"] = 2.0 * n * n * n;
}

BENCHMARK(BM_DecodeStep)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_EigenGemm)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Fused)->Arg(128)->Arg(512)->Arg(2048)->Arg(8192)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_FusedFwdBwd)->Arg(128)->Arg(512)->Arg(2048)->Arg(8192)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Classic)->Arg(128)->Arg(512)->Arg(2048)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_ClassicFwdBwd)->Arg(128)->Arg(512)->Arg(2048)->Unit(benchmark::kMillisecond)->UseRealTime();

/// --peak-memory=fused:L:B or classic:L:B.
int peak_memory(const std::string& spec) {
  const auto first = spec.find(':'), second = spec.rfind(':');
  const std::string path = spec.substr(0, first);
  if (first == std::string::npos || first == second || (path != "fused" && path != "classic")) {
    std::fprintf(stderr, "--peak-memory: expected fused:L:B or classic:L:B, got '%s'\n", spec.c_str());
    return 2;
  }
  const index_t steps = std::stoll(spec.substr(first + 1, second - first - 1)),
                batch = std::stoll(spec.substr(second + 1));
  const Inputs in = make_inputs(steps, batch);
  auto q = in.queries.detach().requires_grad_(), k = in.keys.detach().requires_grad_(),
       v = in.values.detach().requires_grad_();
  const heed::AttentionMask<float> mask = in.valid_lens;
  heed::DotProductAttention<float> a(0.0);
  a.keep_attention_weights(path != "fused");
  a.train();
  return heed_bench::report_peak(spec, [&] {
    a(q, k, v, mask).backward(in.out_gradient);
    benchmark::DoNotOptimize(q.grad().data());
  });
}

}  // namespace

int main(int argc, char** argv) {
  constexpr const char* kPeakFlag = "--peak-memory=";
  for (int i = 1; i < argc; ++i)
    if (std::strncmp(argv[i], kPeakFlag, std::strlen(kPeakFlag)) == 0)
      return peak_memory(argv[i] + std::strlen(kPeakFlag));
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
