// bench_gemm_shapes — the matrix products heed's models run, at their shapes: Eigen's
// GEMM, OpenBLAS's cblas_sgemm, heed::detail::gemm as it is configured (which picks its
// kernel per shape: heed's own fp32 GEMM with AVX-512, heed/ops/fp32_gemm.hpp), heed's
// bf16 products (heed/ops/bf16_gemm.hpp: mixed-precision training's), heed's
// small-product kernel where it fits (heed/ops/small_gemm.hpp) and, for the forward
// products x·Wᵀ, heed's inference kernels against a weight read in place or converted
// once (heed/ops/packed_gemm.hpp, quantized_gemm.hpp). This is the measurement behind
// gemm's choices (heed/ops/gemm.hpp); benchmarks/compare_gemm.py runs it at 1 and 2
// threads and prints the ratios.
//
//   OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 build/bench/benchmarks/bench_gemm_shapes --benchmark_min_time=0.2
//
// Shapes (m × n × k, c = op(a) · op(b), row-major, float):
//   realistic Transformer (128 hidden, FFN 512, target vocabulary 9807, batch 128 ×
//   12 steps = 1536 rows): the projections 1536×128×128, the FFN 1536×512×128 and
//   1536×128×512, the vocabulary projection 1536×9807×128 and its two backward
//   products (9807×128×1536 for the weight, 1536×128×9807 for the input);
//   greedy decoding's vocabulary projection at 128, 32 and 4 live rows;
//   d2l's Transformer (32 hidden, batch 64 × 10 steps): 640×32×32, 640×201×32, 32×32×640;
//   small: 32×32×32, 16×16×128, 12×12×32 (the realistic model's attention per head),
//   10×10×8 and 10×8×10 (d2l's, forward and backward), 12×32×12 (both ways), 1×10×8 and
//   1×32×12 (decoding's), 32×32×16, 64×64×4; skinny: 16×9807×128, 8×512×128, 1×9807×1;
//   the large sizes' (512 hidden, FFN 2048: d2l's EncoderBlock at (8, 128, 512) and
//   OPUS-MT's vocabulary of 59,514).
// Threads: each side as OMP_NUM_THREADS / OPENBLAS_NUM_THREADS say (heed splits large
// products itself, see gemm.hpp; Eigen's GEMM uses OpenMP's threads; OpenBLAS its own).
// OPENBLAS_CORETYPE=SkylakeX where OpenBLAS 0.3.21 does not recognise an AVX-512 CPU
// such as AMD's Zen 4 or 5 and falls back to its Haswell kernels; the context line
// "openblas" names the kernel it ran.
#include <benchmark/benchmark.h>

#include <vector>

#include <heed/heed.hpp>

#ifdef HEED_BENCH_OPENBLAS
#include <cblas.h>
#endif

namespace {

using heed::index_t;

struct Shape3 {
  index_t m, n, k;
  bool trans_a, trans_b;
};

// The products, in the order the Linear layer runs them: forward x·Wᵀ (trans_b),
// backward dX = g·W and dW = gᵀ·x (trans_a).
const std::vector<Shape3> kShapes = {
    {1536, 128, 128, false, true},
    {1536, 512, 128, false, true},
    {1536, 128, 512, false, true},
    {1536, 9807, 128, false, true},
    {1536, 128, 9807, false, false},
    {9807, 128, 1536, true, false},
    {128, 9807, 128, false, true},
    {32, 9807, 128, false, true},
    {4, 9807, 128, false, true},
    {640, 32, 32, false, true},
    {640, 201, 32, false, true},
    {32, 32, 640, true, false},
    {32, 32, 32, false, true},
    {16, 16, 128, false, true},
    {12, 12, 32, false, true},
    {16, 9807, 128, false, true},
    {8, 512, 128, false, true},
    {10, 10, 8, false, true},
    {10, 8, 10, false, false},
    {12, 32, 12, false, false},
    {1, 10, 8, false, true},
    {10, 8, 10, true, false},
    {12, 32, 12, true, false},
    {1, 32, 12, false, false},
    {32, 32, 16, false, true},
    {64, 64, 4, false, true},
    {1, 9807, 1, false, true},
    // The d2l Bahdanau decoder's steps (batch 32 per micro-batch, 3H = 96): h·W_hhᵀ and
    // x·W_ihᵀ, each also against the weight transposed once (StepWeight), and backward's
    // dgh·W_hh and dgi·W_ih.
    {32, 96, 32, false, true},
    {32, 96, 32, false, false},
    {32, 96, 64, false, true},
    {32, 96, 64, false, false},
    {32, 32, 96, false, false},
    {32, 64, 96, false, false},
    // MarianMT's (opus-mt-en-fr: 512 hidden, FFN 2048, vocabulary 59514) decoding steps
    // at 128 and 8 live rows: the projections, the FFN and the output layer.
    {128, 512, 512, false, true},
    {128, 2048, 512, false, true},
    {128, 512, 2048, false, true},
    {128, 59514, 512, false, true},
    {8, 512, 512, false, true},
    {8, 59514, 512, false, true},
};

struct Operands {
  std::vector<float> a, b, c;
  explicit Operands(const Shape3& s)
      : a(static_cast<std::size_t>(s.m * s.k)),
        b(static_cast<std::size_t>(s.k * s.n)),
        c(static_cast<std::size_t>(s.m * s.n)) {
    heed::Generator gen(0);
    for (auto* v : {&a, &b})
      for (float& x : *v) x = static_cast<float>(gen.uniform()) - 0.5f;
  }
};

void set_flops(benchmark::State& state, const Shape3& s) {
  state.counters["GFLOPS"] =
      benchmark::Counter(2.0 * static_cast<double>(s.m * s.n * s.k), benchmark::Counter::kIsIterationInvariantRate,
                         benchmark::Counter::kIs1000);
}

// Times product(shape, operands) at the benchmark's shape, with its GFLOP/s.
template <typename Product>
void time_product(benchmark::State& state, Product product) {
  const Shape3& s = kShapes[static_cast<std::size_t>(state.range(0))];
  Operands x(s);
  for (auto _ : state) {
    product(s, x);
    benchmark::DoNotOptimize(x.c.data());
    benchmark::ClobberMemory();
  }
  set_flops(state, s);
}

// Eigen's GEMM with OpenMP's threads (its own blocking per thread count).
void BM_Eigen(benchmark::State& state) {
  time_product(state, [](const Shape3& s, Operands& x) {
    heed::detail::eigen_gemm(x.a.data(), s.trans_a, x.b.data(), s.trans_b, x.c.data(), s.m, s.n, s.k, 0, s.m, 0, s.n);
  });
}

void BM_Heed(benchmark::State& state) {
  time_product(state, [](const Shape3& s, Operands& x) {
    heed::detail::gemm(x.a.data(), s.trans_a, x.b.data(), s.trans_b, x.c.data(), s.m, s.n, s.k);
  });
}

// Both operands rounded to bf16, fp32 sums (what linear and matmul run under an
// AutocastGuard of bf16), with the kernels cpu_features() picks.
void BM_Bf16Gemm(benchmark::State& state) {
  time_product(state, [](const Shape3& s, Operands& x) {
    heed::detail::bf16_gemm(x.a.data(), s.trans_a, x.b.data(), s.trans_b, x.c.data(), s.m, s.n, s.k);
  });
  state.SetLabel(heed::to_string(heed::cpu_features()));
}

// x·Wᵀ against the weight packed once (heed/ops/packed_gemm.hpp: what linear() runs
// inside a PackedWeightsGuard, as predict_seq2seq holds one), on the calling thread.
void BM_Packed(benchmark::State& state) {
  const Shape3& s = kShapes[static_cast<std::size_t>(state.range(0))];
  Operands x(s);
  const heed::detail::PackedWeight<float> packed(x.b.data(), s.n, s.k);
  for (auto _ : state) {
    const heed::detail::SerialGemmScope serial(true);
    packed.apply(x.a.data(), s.m, nullptr, x.c.data());
    benchmark::DoNotOptimize(x.c.data());
    benchmark::ClobberMemory();
  }
  set_flops(state, s);
}

// The same against the weight converted once to int8 or bf16 (heed/ops/quantized_gemm.hpp:
// linear() inside a PackedWeightsGuard(Precision)), with the kernels cpu_features() picks.
void BM_LowPrecision(benchmark::State& state, heed::Precision precision) {
  const Shape3& s = kShapes[static_cast<std::size_t>(state.range(0))];
  Operands x(s);
  const heed::detail::LowPrecisionWeight converted(x.b.data(), s.n, s.k, precision);
  for (auto _ : state) {
    const heed::detail::SerialGemmScope serial(true);
    converted.apply(x.a.data(), s.m, nullptr, x.c.data());
    benchmark::DoNotOptimize(x.c.data());
    benchmark::ClobberMemory();
  }
  set_flops(state, s);
  state.SetLabel(heed::to_string(heed::cpu_features()));
}
void BM_Int8(benchmark::State& state) { BM_LowPrecision(state, heed::Precision::int8); }
void BM_Bf16(benchmark::State& state) { BM_LowPrecision(state, heed::Precision::bf16); }

// heed's kernel for few columns and a short inner dim (heed/ops/small_gemm.hpp), at the
// shapes it takes, on the calling thread.
void BM_Small(benchmark::State& state) {
  time_product(state, [](const Shape3& s, Operands& x) {
    heed::detail::small_gemm(x.a.data(), s.trans_a, x.b.data(), s.trans_b, x.c.data(), s.m, s.n, s.k, 0, s.m, 0, s.n);
  });
}

#ifdef HEED_BENCH_OPENBLAS
void BM_OpenBLAS(benchmark::State& state) {
  const Shape3& s = kShapes[static_cast<std::size_t>(state.range(0))];
  Operands x(s);
  for (auto _ : state) {
    cblas_sgemm(CblasRowMajor, s.trans_a ? CblasTrans : CblasNoTrans, s.trans_b ? CblasTrans : CblasNoTrans,
                static_cast<int>(s.m), static_cast<int>(s.n), static_cast<int>(s.k), 1.0f, x.a.data(),
                static_cast<int>(s.trans_a ? s.m : s.k), x.b.data(), static_cast<int>(s.trans_b ? s.k : s.n), 0.0f,
                x.c.data(), static_cast<int>(s.n));
    benchmark::DoNotOptimize(x.c.data());
    benchmark::ClobberMemory();
  }
  set_flops(state, s);
}
#endif

void shapes(benchmark::internal::Benchmark* b) {
  for (std::size_t i = 0; i < kShapes.size(); ++i) b->Arg(static_cast<std::int64_t>(i));
  b->ArgName("shape")->Unit(benchmark::kMicrosecond)->UseRealTime();
}

void forward_shapes(benchmark::internal::Benchmark* b) {
  for (std::size_t i = 0; i < kShapes.size(); ++i)
    if (kShapes[i].trans_b && !kShapes[i].trans_a) b->Arg(static_cast<std::int64_t>(i));
  b->ArgName("shape")->Unit(benchmark::kMicrosecond)->UseRealTime();
}

void small_shapes(benchmark::internal::Benchmark* b) {
  for (std::size_t i = 0; i < kShapes.size(); ++i)
    if (heed::detail::small_gemm_fits<float>(kShapes[i].n, kShapes[i].k)) b->Arg(static_cast<std::int64_t>(i));
  b->ArgName("shape")->Unit(benchmark::kMicrosecond)->UseRealTime();
}

BENCHMARK(BM_Eigen)->Apply(shapes);
BENCHMARK(BM_Heed)->Apply(shapes);
BENCHMARK(BM_Bf16Gemm)->Apply(shapes);
BENCHMARK(BM_Packed)->Apply(forward_shapes);
BENCHMARK(BM_Int8)->Apply(forward_shapes);
BENCHMARK(BM_Bf16)->Apply(forward_shapes);
BENCHMARK(BM_Small)->Apply(small_shapes);
#ifdef HEED_BENCH_OPENBLAS
BENCHMARK(BM_OpenBLAS)->Apply(shapes);
#endif

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
#ifdef HEED_BENCH_OPENBLAS
  benchmark::AddCustomContext("openblas", openblas_get_corename());
#endif
  benchmark::AddCustomContext("heed_cpu_features", heed::to_string(heed::cpu_features()));
  for (std::size_t i = 0; i < kShapes.size(); ++i) {
    const Shape3& s = kShapes[i];
    benchmark::AddCustomContext("shape " + std::to_string(i), std::to_string(s.m) + "x" + std::to_string(s.n) + "x" +
                                                                  std::to_string(s.k) + (s.trans_a ? " aT" : "") +
                                                                  (s.trans_b ? " bT" : ""));
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
