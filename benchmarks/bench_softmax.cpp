// bench_softmax — heed::softmax over the last dim against a plain memory copy.
//
// Goal: softmax over the last dim of a (64, 512, 512) float tensor (64 MiB) reaches
// at least 40% of the throughput of copying the same 64 MiB.
//
// Bytes convention (SetBytesProcessed, shown as bytes_per_second): every byte a
// kernel must read plus every byte it must write, once each, per call:
//   copy, softmax, log_softmax forward:  read x, write y        = 2 × 64 MiB
//   softmax / log_softmax backward:       read g and y, write dx = 3 × 64 MiB
// So equal bytes_per_second means equal use of memory bandwidth.
//
// heed returns a new tensor per call, so its timings include allocating (and the
// kernel's first touch of) a fresh 64 MiB output; BM_CopyFreshOutput shows what that
// alone costs next to BM_Copy's preallocated destination.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include <heed/heed.hpp>

namespace {

using heed::index_t;

constexpr index_t kB = 64, kT = 512, kC = 512;
constexpr index_t kElements = kB * kT * kC;
constexpr std::int64_t kTensorBytes = kElements * static_cast<std::int64_t>(sizeof(float));  // 64 MiB

heed::Tensor<float> random_tensor(std::uint64_t seed) {
  heed::Generator gen(seed);
  return heed::randn<float>({kB, kT, kC}, gen);
}

// Made once and shared (read-only) by every run: generating 16M normals takes longer
// than a run itself.
const heed::Tensor<float>& input() {
  static const heed::Tensor<float> x = random_tensor(0);
  return x;
}
const heed::Tensor<float>& incoming_gradient() {
  static const heed::Tensor<float> g = random_tensor(1);
  return g;
}

// ---- the reference: a copy of the same bytes ----------------------------------------

void BM_Copy(benchmark::State& state) {
  const auto x = input();
  std::vector<float> dst(static_cast<std::size_t>(kElements));
  for (auto _ : state) {
    std::memcpy(dst.data(), x.data(), static_cast<std::size_t>(kTensorBytes));
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * 2 * kTensorBytes);
}

// The copy with Eigen's vectorised assignment instead of memcpy.
void BM_CopyEigen(benchmark::State& state) {
  const auto x = input();
  auto y = heed::Tensor<float>::empty(x.shape());
  for (auto _ : state) {
    y.array() = x.array();
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * 2 * kTensorBytes);
}

// The copy into a freshly allocated tensor each call, as heed's ops do.
void BM_CopyFreshOutput(benchmark::State& state) {
  const auto x = input();
  for (auto _ : state) {
    auto y = heed::Tensor<float>::empty(x.shape());
    std::memcpy(y.data(), x.data(), static_cast<std::size_t>(kTensorBytes));
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * 2 * kTensorBytes);
}

// ---- forward ------------------------------------------------------------------------

void BM_Softmax(benchmark::State& state) {
  const auto x = input();
  for (auto _ : state) {
    auto y = heed::softmax(x, -1);
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * 2 * kTensorBytes);
}

void BM_LogSoftmax(benchmark::State& state) {
  const auto x = input();
  for (auto _ : state) {
    auto y = heed::log_softmax(x, -1);
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * 2 * kTensorBytes);
}

// ---- backward -------------------------------------------------------------------------

/// Times the backward function that softmax (or log_softmax) recorded, called as the
/// engine calls it: g in, dx out. Calling it directly leaves out the engine's
/// accumulation of dx into the leaf's .grad(), which is the same for every op.
template <typename Op>
void backward_of(benchmark::State& state, Op op) {
  auto x = input().detach().requires_grad_();  // a leaf of its own over the shared data
  const auto y = op(x);
  const auto& g = incoming_gradient();
  const auto& node = heed::detail::impl(y).grad_fn;
  heed::NoGradGuard no_grad;  // as the engine runs backward functions
  for (auto _ : state) {
    auto dx = node->backward(g);
    benchmark::DoNotOptimize(dx[0].data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * 3 * kTensorBytes);
}

void BM_SoftmaxBackward(benchmark::State& state) {
  backward_of(state, [](const heed::Tensor<float>& x) { return heed::softmax(x, -1); });
}

void BM_LogSoftmaxBackward(benchmark::State& state) {
  backward_of(state, [](const heed::Tensor<float>& x) { return heed::log_softmax(x, -1); });
}

BENCHMARK(BM_Copy)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_CopyEigen)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_CopyFreshOutput)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Softmax)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_LogSoftmax)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_SoftmaxBackward)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_LogSoftmaxBackward)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
