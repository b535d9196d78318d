// bench_autograd — the fixed cost of recording and running the graph.
//
// Goal: forward + backward of a chain of 100 adds on scalar tensors under 100 µs per
// iteration in all (x requires grad; y = x; 100 × y = y + c; y.backward()).
// For information: 100 muls on (1)-shaped tensors whose both operands need gradients,
// and elementwise ops on a 1M-element tensor for the per-element throughput.
//
// Counters: time_per_op is the iteration's time divided by its number of ops
// (forward and backward of one op together); items_per_second counts elements.
#include <benchmark/benchmark.h>

#include <heed/heed.hpp>

namespace {

using heed::index_t;

constexpr int kChain = 100;

/// Seconds per op, shown like "time_per_op=450n" (450 ns).
void set_time_per_op(benchmark::State& state, int ops) {
  state.counters["time_per_op"] =
      benchmark::Counter(ops, benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

// ---- small tensors: the per-op overhead -----------------------------------------------

void BM_AddChainScalar(benchmark::State& state) {
  auto x = heed::scalar_tensor(1.f).requires_grad_();
  const auto c = heed::scalar_tensor(0.5f);
  for (auto _ : state) {
    x.zero_grad();
    heed::Tensor<float> y = x;
    for (int i = 0; i < kChain; ++i) y = y + c;
    y.backward();
    benchmark::DoNotOptimize(x.grad().data());
  }
  if (x.grad().item() != 1.f) state.SkipWithError("wrong gradient");
  set_time_per_op(state, kChain);
}

// Forward alone: what recording the graph costs without running it.
void BM_AddChainScalarForwardOnly(benchmark::State& state) {
  auto x = heed::scalar_tensor(1.f).requires_grad_();
  const auto c = heed::scalar_tensor(0.5f);
  for (auto _ : state) {
    heed::Tensor<float> y = x;
    for (int i = 0; i < kChain; ++i) y = y + c;
    benchmark::DoNotOptimize(y.data());
  }
  set_time_per_op(state, kChain);
}

// Forward with grad mode off: the op's own cost, no graph at all.
void BM_AddChainScalarNoGrad(benchmark::State& state) {
  const auto x = heed::scalar_tensor(1.f);
  const auto c = heed::scalar_tensor(0.5f);
  heed::NoGradGuard no_grad;
  for (auto _ : state) {
    heed::Tensor<float> y = x;
    for (int i = 0; i < kChain; ++i) y = y + c;
    benchmark::DoNotOptimize(y.data());
  }
  set_time_per_op(state, kChain);
}

void BM_MulChainShape1(benchmark::State& state) {
  auto x = heed::full<float>({1}, 1.f).requires_grad_();
  auto w = heed::full<float>({1}, 1.f).requires_grad_();
  for (auto _ : state) {
    x.zero_grad();
    w.zero_grad();
    heed::Tensor<float> y = x;
    for (int i = 0; i < kChain; ++i) y = y * w;
    y.backward();
    benchmark::DoNotOptimize(w.grad().data());
  }
  if (w.grad().item() != float(kChain)) state.SkipWithError("wrong gradient");
  set_time_per_op(state, kChain);
}

BENCHMARK(BM_AddChainScalar)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_AddChainScalarForwardOnly)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_AddChainScalarNoGrad)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_MulChainShape1)->Unit(benchmark::kMicrosecond);

// ---- a big tensor: the per-element throughput ------------------------------------------

constexpr index_t kBig = index_t(1) << 20;  // 1M floats, 4 MiB

/// Elements per second and bytes per second (every byte read and written once).
void set_throughput(benchmark::State& state, index_t elements, int tensors_touched) {
  state.SetItemsProcessed(state.iterations() * elements);
  state.SetBytesProcessed(state.iterations() * elements * tensors_touched * static_cast<std::int64_t>(sizeof(float)));
}

// z = a + b without a graph: reads a, b, writes z.
void BM_AddBig(benchmark::State& state) {
  heed::Generator gen(0);
  const auto a = heed::randn<float>({kBig}, gen);
  const auto b = heed::randn<float>({kBig}, gen);
  for (auto _ : state) {
    auto z = a + b;
    benchmark::DoNotOptimize(z.data());
  }
  set_throughput(state, kBig, 3);
}

// z = tanh(a) without a graph: reads a, writes z; tanh costs more than the memory.
void BM_TanhBig(benchmark::State& state) {
  heed::Generator gen(0);
  const auto a = heed::randn<float>({kBig}, gen);
  for (auto _ : state) {
    auto z = heed::tanh(a);
    benchmark::DoNotOptimize(z.data());
  }
  set_throughput(state, kBig, 2);
}

// (a * b).backward(g): forward reads a, b, writes z; backward reads g, a, b and
// writes da, db, then copies them into the leaves' fresh .grad() (reads 2, writes 2).
void BM_MulBigForwardBackward(benchmark::State& state) {
  heed::Generator gen(0);
  auto a = heed::randn<float>({kBig}, gen).requires_grad_();
  auto b = heed::randn<float>({kBig}, gen).requires_grad_();
  const auto g = heed::randn<float>({kBig}, gen);
  for (auto _ : state) {
    a.zero_grad();
    b.zero_grad();
    auto z = a * b;
    z.backward(g);
    benchmark::DoNotOptimize(a.grad().data());
  }
  set_throughput(state, kBig, 3 + 5 + 4);
}

BENCHMARK(BM_AddBig)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_TanhBig)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_MulBigForwardBackward)->Unit(benchmark::kMicrosecond)->UseRealTime();

}  // namespace
