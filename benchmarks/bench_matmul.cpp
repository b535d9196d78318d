// bench_matmul — heed::matmul against Eigen's GEMM called directly.
//
// Goal: heed::matmul of 512×512×512 float within 1.2× of Eigen's noalias product on
// row-major Eigen matrices (the same kernel heed maps its storage onto, so the gap is
// heed's own overhead: shape checks, the output allocation, the dispatch).
// For information: 1024³, and a batched bmm (64, 128, 64) @ (64, 64, 128).
//
// Counter: GFLOPS = 2·m·n·k flops per iteration as a rate; the console prints it in
// SI units, so "GFLOPS=95.3G/s" is 95.3·10⁹ flop/s (the JSON holds flop/s).
// Thread count: OpenMP's default (OMP_NUM_THREADS), which governs both heed's
// parallel_for and Eigen's own GEMM threads.
#include <benchmark/benchmark.h>

#include <Eigen/Core>
#include <cstdlib>
#include <vector>

#include <heed/heed.hpp>

namespace {

using RowMajor = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

using heed::index_t;

/// flops per iteration, reported as a rate: the console shows e.g. "GFLOPS=85.2G/s".
void set_flops(benchmark::State& state, double flops) {
  state.counters["GFLOPS"] =
      benchmark::Counter(flops, benchmark::Counter::kIsIterationInvariantRate, benchmark::Counter::kIs1000);
}

// ---- square GEMM: m = n = k = state.range(0) ---------------------------------------

void BM_HeedMatmul(benchmark::State& state) {
  const index_t n = state.range(0);
  heed::Generator gen(0);
  const auto a = heed::randn<float>({n, n}, gen);
  const auto b = heed::randn<float>({n, n}, gen);
  for (auto _ : state) {
    auto c = heed::matmul(a, b);
    benchmark::DoNotOptimize(c.data());
    benchmark::ClobberMemory();
  }
  set_flops(state, 2.0 * n * n * n);
}

void BM_EigenGemm(benchmark::State& state) {
  const Eigen::Index n = state.range(0);
  const RowMajor a = RowMajor::Random(n, n);
  const RowMajor b = RowMajor::Random(n, n);
  RowMajor c(n, n);
  for (auto _ : state) {
    c.noalias() = a * b;
    benchmark::DoNotOptimize(c.data());
    benchmark::ClobberMemory();
  }
  set_flops(state, 2.0 * n * n * n);
}

// Eigen into a fresh output buffer each iteration, allocated as heed's Storage does
// (std::aligned_alloc, 64 bytes): heed returns a new tensor per call, so this is
// Eigen under the same allocation pattern. glibc may hand such a buffer back to the
// OS on free and fault it in again on the next call, which costs GEMM time.
void BM_EigenGemmFreshBuffer(benchmark::State& state) {
  const Eigen::Index n = state.range(0);
  const RowMajor a = RowMajor::Random(n, n);
  const RowMajor b = RowMajor::Random(n, n);
  const auto bytes = static_cast<std::size_t>(n * n) * sizeof(float);
  for (auto _ : state) {
    auto* c = static_cast<float*>(std::aligned_alloc(64, bytes));
    Eigen::Map<RowMajor>(c, n, n).noalias() = a * b;
    benchmark::DoNotOptimize(c);
    benchmark::ClobberMemory();
    std::free(c);
  }
  set_flops(state, 2.0 * n * n * n);
}

BENCHMARK(BM_HeedMatmul)->Arg(512)->Arg(1024)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_EigenGemm)->Arg(512)->Arg(1024)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_EigenGemmFreshBuffer)->Arg(512)->Arg(1024)->Unit(benchmark::kMillisecond)->UseRealTime();

// ---- batched: (B, m, k) @ (B, k, n) ------------------------------------------------

constexpr index_t kBatch = 64, kM = 128, kK = 64, kN = 128;

void BM_HeedBmm(benchmark::State& state) {
  heed::Generator gen(0);
  const auto a = heed::randn<float>({kBatch, kM, kK}, gen);
  const auto b = heed::randn<float>({kBatch, kK, kN}, gen);
  for (auto _ : state) {
    auto c = heed::bmm(a, b);
    benchmark::DoNotOptimize(c.data());
    benchmark::ClobberMemory();
  }
  set_flops(state, 2.0 * kBatch * kM * kN * kK);
}

// The same batch as a serial loop of Eigen GEMMs over maps of plain buffers (each
// GEMM free to use Eigen's own OpenMP threads; heed instead gives each thread whole
// batches).
void BM_EigenBmmLoop(benchmark::State& state) {
  using Map = Eigen::Map<RowMajor>;
  using ConstMap = Eigen::Map<const RowMajor>;
  std::vector<float> a(kBatch * kM * kK), b(kBatch * kK * kN), c(kBatch * kM * kN);
  Eigen::Map<Eigen::ArrayXf>(a.data(), static_cast<Eigen::Index>(a.size())).setRandom();
  Eigen::Map<Eigen::ArrayXf>(b.data(), static_cast<Eigen::Index>(b.size())).setRandom();
  for (auto _ : state) {
    for (index_t i = 0; i < kBatch; ++i)
      Map(c.data() + i * kM * kN, kM, kN).noalias() =
          ConstMap(a.data() + i * kM * kK, kM, kK) * ConstMap(b.data() + i * kK * kN, kK, kN);
    benchmark::DoNotOptimize(c.data());
    benchmark::ClobberMemory();
  }
  set_flops(state, 2.0 * kBatch * kM * kN * kK);
}

BENCHMARK(BM_HeedBmm)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_EigenBmmLoop)->Unit(benchmark::kMicrosecond)->UseRealTime();

}  // namespace
