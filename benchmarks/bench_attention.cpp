// bench_attention — heed::masked_softmax against plain heed::softmax, and
// DotProductAttention (d2l 10.3.3) forward and forward+backward.
//
// Goals (compare_attention.py prints them next to PyTorch on the same machine):
//   (a) masked_softmax on (64, 512, 512) float takes at most 1.3× the time of
//       heed::softmax(x, -1) on the same tensor (forward; forward+backward reported too);
//   (b) DotProductAttention forward (eval, dropout 0) on Q, K, V of (64, 512, 64) with
//       1-D valid_lens is at least as fast as PyTorch's bmm → d2l masked_softmax → bmm
//       with the same thread count.
//
// Bytes convention (SetBytesProcessed): every byte a kernel must read plus every byte it
// must write, once each, per call, as in bench_softmax:
//   softmax / masked_softmax forward:       read x, write y                     = 2 × 64 MiB
//   forward+backward:                        forward, then read g and y, write dx = 5 × 64 MiB
//   (masks and valid_lens are at most 1 MiB and not counted)
//   DotProductAttention forward, unfused:    read Q, K, write S; read S, write W;
//                                            read W, V, write out = 4 × 64 MiB + 4 × 8 MiB
//   DotProductAttention forward+backward:    forward, plus the backward's traffic:
//                                            (64, 512, 512) tensors: write dW (= dO Vᵀ),
//                                            read W for dV, read dW and W, write dS,
//                                            read dS for dQ and again for dK
//                                            = 7 × 64 MiB; (64, 512, 64) tensors: read dO
//                                            twice, V, K, Q, write dQ, dK, dV = 8 × 8 MiB
// So bytes_per_second of softmax and masked_softmax variants are directly comparable.
//
// Forward+backward iterations call out.backward(g) with a fixed random g, as a training
// step does, then clear the leaves' .grad() (zero_grad() drops the tensor; timed, and
// negligible), so every iteration's backward writes a fresh .grad() as the first
// backward of a step does.
//
// Benchmark names are read by compare_attention.py; keep them in step.
#include <benchmark/benchmark.h>

#include <cstdint>

#include <heed/heed.hpp>

namespace {

using heed::index_t;

constexpr index_t kB = 64, kT = 512, kK = 512, kD = 64;
constexpr std::int64_t kScoresBytes = kB * kT * kK * static_cast<std::int64_t>(sizeof(float));  // 64 MiB
constexpr std::int64_t kQkvBytes = kB * kT * kD * static_cast<std::int64_t>(sizeof(float));     // 8 MiB

// Made once and shared (read-only) by every run: generating 16M normals takes longer
// than a run itself.
const heed::Tensor<float>& scores() {
  static const heed::Tensor<float> x = [] {
    heed::Generator gen(0);
    return heed::randn<float>({kB, kT, kK}, gen);
  }();
  return x;
}
const heed::Tensor<float>& scores_gradient() {
  static const heed::Tensor<float> g = [] {
    heed::Generator gen(1);
    return heed::randn<float>({kB, kT, kK}, gen);
  }();
  return g;
}

// Valid lengths uniform in [1, kK], from a seeded generator.
const heed::IndexTensor& valid_lens_1d() {
  static const heed::IndexTensor v = [] {
    heed::Generator gen(2);
    return heed::randint(1, kK + 1, {kB}, gen);
  }();
  return v;
}
const heed::IndexTensor& valid_lens_2d() {
  static const heed::IndexTensor v = [] {
    heed::Generator gen(3);
    return heed::randint(1, kK + 1, {kB, kT}, gen);
  }();
  return v;
}

// A (B, 1, K) padding mask, broadcast over the queries: true = may attend. Built from
// the 1-D valid lengths, so it masks exactly the keys valid_lens_1d() masks.
const heed::BoolTensor& boolean_mask() {
  static const heed::BoolTensor m = [] {
    auto mask = heed::BoolTensor::empty({kB, 1, kK});
    const std::int64_t* lens = valid_lens_1d().data();
    for (index_t b = 0; b < kB; ++b)
      for (index_t j = 0; j < kK; ++j) mask.data()[b * kK + j] = j < lens[b];
    return mask;
  }();
  return m;
}

enum class Mask { kNone, kValidLens1d, kValidLens2d, kCausal, kBoolean };

heed::AttentionMask<float> make_mask(Mask kind) {
  switch (kind) {
    case Mask::kNone:
      return {};
    case Mask::kValidLens1d:
      return valid_lens_1d();
    case Mask::kValidLens2d:
      return valid_lens_2d();
    case Mask::kCausal:
      return heed::AttentionMask<float>::causal();
    case Mask::kBoolean:
      return boolean_mask();
  }
  return {};
}

// ---- plain softmax: the reference of goal (a) ----------------------------------------

void BM_Softmax(benchmark::State& state) {
  const auto x = scores();
  for (auto _ : state) {
    auto y = heed::softmax(x, -1);
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * 2 * kScoresBytes);
}

void BM_SoftmaxFwdBwd(benchmark::State& state) {
  auto x = scores().detach().requires_grad_();  // a leaf of its own over the shared data
  const auto& g = scores_gradient();
  for (auto _ : state) {
    auto y = heed::softmax(x, -1);
    y.backward(g);
    benchmark::DoNotOptimize(x.grad().data());
    benchmark::ClobberMemory();
    x.zero_grad();
  }
  state.SetBytesProcessed(state.iterations() * 5 * kScoresBytes);
}

// ---- masked_softmax -----------------------------------------------------------------

void BM_MaskedSoftmax(benchmark::State& state, Mask kind) {
  const auto x = scores();
  const auto mask = make_mask(kind);
  for (auto _ : state) {
    auto y = heed::masked_softmax(x, mask);
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * 2 * kScoresBytes);
}

void BM_MaskedSoftmaxFwdBwd(benchmark::State& state, Mask kind) {
  auto x = scores().detach().requires_grad_();
  const auto& g = scores_gradient();
  const auto mask = make_mask(kind);
  for (auto _ : state) {
    auto y = heed::masked_softmax(x, mask);
    y.backward(g);
    benchmark::DoNotOptimize(x.grad().data());
    benchmark::ClobberMemory();
    x.zero_grad();
  }
  state.SetBytesProcessed(state.iterations() * 5 * kScoresBytes);
}

BENCHMARK(BM_Softmax)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_SoftmaxFwdBwd)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_MaskedSoftmax, none, Mask::kNone)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_MaskedSoftmax, valid_lens_1d, Mask::kValidLens1d)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_MaskedSoftmax, valid_lens_2d, Mask::kValidLens2d)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_MaskedSoftmax, causal, Mask::kCausal)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_MaskedSoftmax, boolean, Mask::kBoolean)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_MaskedSoftmaxFwdBwd, none, Mask::kNone)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_MaskedSoftmaxFwdBwd, valid_lens_1d, Mask::kValidLens1d)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_MaskedSoftmaxFwdBwd, valid_lens_2d, Mask::kValidLens2d)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_MaskedSoftmaxFwdBwd, causal, Mask::kCausal)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_MaskedSoftmaxFwdBwd, boolean, Mask::kBoolean)->Unit(benchmark::kMillisecond)->UseRealTime();

// ---- DotProductAttention ------------------------------------------------------------

struct Qkv {
  heed::Tensor<float> queries, keys, values, out_gradient;
};

const Qkv& qkv() {
  static const Qkv t = [] {
    heed::Generator gen(4);
    Qkv q;
    q.queries = heed::randn<float>({kB, kT, kD}, gen);
    q.keys = heed::randn<float>({kB, kK, kD}, gen);
    q.values = heed::randn<float>({kB, kK, kD}, gen);
    q.out_gradient = heed::randn<float>({kB, kT, kD}, gen);
    return q;
  }();
  return t;
}

constexpr std::int64_t kAttentionForwardBytes = 4 * kScoresBytes + 4 * kQkvBytes;
constexpr std::int64_t kAttentionBackwardBytes = 7 * kScoresBytes + 8 * kQkvBytes;

// keep_weights = false shows whether keeping the attention weights costs anything.
void BM_DotProductAttention(benchmark::State& state, bool keep_weights) {
  const auto& t = qkv();
  const heed::AttentionMask<float> mask = valid_lens_1d();
  heed::DotProductAttention<float> attention(0.0);
  attention.eval();
  attention.keep_attention_weights(keep_weights);
  for (auto _ : state) {
    auto out = attention(t.queries, t.keys, t.values, mask);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * kAttentionForwardBytes);
}

void BM_DotProductAttentionFwdBwd(benchmark::State& state, bool keep_weights) {
  const auto& t = qkv();
  auto queries = t.queries.detach().requires_grad_();
  auto keys = t.keys.detach().requires_grad_();
  auto values = t.values.detach().requires_grad_();
  const heed::AttentionMask<float> mask = valid_lens_1d();
  heed::DotProductAttention<float> attention(0.0);
  attention.eval();
  attention.keep_attention_weights(keep_weights);
  for (auto _ : state) {
    auto out = attention(queries, keys, values, mask);
    out.backward(t.out_gradient);
    benchmark::DoNotOptimize(queries.grad().data());
    benchmark::DoNotOptimize(keys.grad().data());
    benchmark::DoNotOptimize(values.grad().data());
    benchmark::ClobberMemory();
    queries.zero_grad();
    keys.zero_grad();
    values.zero_grad();
  }
  state.SetBytesProcessed(state.iterations() * (kAttentionForwardBytes + kAttentionBackwardBytes));
}

// The forward's three steps on their own (no graph), to show where its time goes.
void BM_AttentionPart_Scores(benchmark::State& state) {  // (Q / √d) Kᵀ
  const auto& t = qkv();
  const float scale = 1.0f / 8.0f;  // 1 / √64
  for (auto _ : state) {
    auto s = heed::matmul(t.queries * scale, t.keys, false, true);
    benchmark::DoNotOptimize(s.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * (2 * kQkvBytes + kScoresBytes));
}

void BM_AttentionPart_WeightsTimesValues(benchmark::State& state) {  // W V
  const auto& t = qkv();
  const auto weights = heed::masked_softmax(scores(), valid_lens_1d());
  for (auto _ : state) {
    auto out = heed::matmul(weights, t.values);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * (kScoresBytes + 2 * kQkvBytes));
}

BENCHMARK_CAPTURE(BM_DotProductAttention, keep, true)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_DotProductAttention, no_keep, false)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_DotProductAttentionFwdBwd, keep, true)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_AttentionPart_Scores)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_AttentionPart_WeightsTimesValues)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
