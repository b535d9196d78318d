// heed's own fp32 GEMM (heed/ops/fp32_gemm.hpp) against a scalar std::fma chain, bit for
// bit, and gemm's choice of it (heed/ops/gemm.hpp) with the portable path forced.
#include "nn_common.hpp"

#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "cpu_paths.hpp"

namespace {

/// c (m × n at ldc) as fp32_gemm defines it: each element one std::fma chain over k
/// from 0 (from c with accumulate), then + bias.
void fma_chain_gemm(const std::vector<float>& a, index_t lda, bool ta, const std::vector<float>& b, index_t ldb,
                    bool tb, std::vector<float>& c, index_t ldc, index_t m, index_t n, index_t k, bool accumulate,
                    const float* bias) {
  for (index_t i = 0; i < m; ++i)
    for (index_t j = 0; j < n; ++j) {
      float& out = c[static_cast<std::size_t>(i * ldc + j)];
      float sum = accumulate ? out : 0.0f;
      for (index_t p = 0; p < k; ++p)
        sum = std::fma(a[static_cast<std::size_t>(ta ? p * lda + i : i * lda + p)],
                       b[static_cast<std::size_t>(tb ? j * ldb + p : p * ldb + j)], sum);
      out = bias ? sum + bias[j] : sum;
    }
}

std::vector<float> uniform(index_t size, heed::Generator& gen) {
  std::vector<float> v(static_cast<std::size_t>(size));
  for (float& x : v) x = static_cast<float>(gen.uniform() - 0.5);
  return v;
}

/// fp32_gemm on an (m × n) block inside a larger c (leading dims padded by 3), every
/// layout, with and without accumulate and bias, against fma_chain_gemm: the same bits,
/// and nothing written outside the block.
void check_fp32_gemm(index_t m, index_t n, index_t k) {
  heed::Generator gen(static_cast<std::uint64_t>(m * 1009 + n * 31 + k));
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      for (bool accumulate : {false, true})
        for (bool with_bias : {false, true}) {
          INFO(m << " x " << n << " x " << k << ", transpose_a " << ta << ", transpose_b " << tb << ", accumulate "
                 << accumulate << ", bias " << with_bias);
          const index_t lda = (ta ? m : k) + 3, ldb = (tb ? k : n) + 3, ldc = n + 3;
          const std::vector<float> a = uniform((ta ? k : m) * lda, gen), b = uniform((tb ? n : k) * ldb, gen);
          const std::vector<float> bias = uniform(n, gen);
          std::vector<float> c = uniform(m * ldc, gen), expected = c;
          fma_chain_gemm(a, lda, ta, b, ldb, tb, expected, ldc, m, n, k, accumulate, with_bias ? bias.data() : nullptr);
          heed::detail::fp32_gemm(a.data(), lda, ta, b.data(), ldb, tb, c.data(), ldc, m, n, k, accumulate,
                                  with_bias ? bias.data() : nullptr);
          REQUIRE(std::memcmp(c.data(), expected.data(), c.size() * sizeof(float)) == 0);
        }
}

}  // namespace

TEST_CASE("fp32_gemm gives the bits of a fused multiply-add chain over k, at every edge", "[ops]") {
  if (!heed::cpu_features().avx512) {
    WARN("this CPU lacks avx512: heed's fp32 GEMM is not tested (CI's machines have it)");
    return;
  }
  // Tiles of 6 rows (1 to 6 left over), panels of 64 columns (1 to 4 vectors, the last
  // masked), blocks of 256 k (257: a second block reloads c) and of 512 columns.
  for (const index_t m : {1, 5, 6, 7, 13})
    for (const index_t n : {1, 15, 16, 17, 64, 65, 130})
      for (const index_t k : {1, 16, 17, 256, 257}) check_fp32_gemm(m, n, k);
  check_fp32_gemm(101, 1030, 300);  // several tasks, two column blocks
  check_fp32_gemm(3, 4, 0);         // k = 0: zeros (or c), + bias
}

TEST_CASE("fp32_gemm gives the same bits on 1, 2 and 3 threads", "[ops]") {
  if (!heed::cpu_features().avx512) {
    WARN("this CPU lacks avx512: heed's fp32 GEMM is not tested (CI's machines have it)");
    return;
  }
  // Large enough to be shared out (kFp32ParallelWork), in several blocks of k.
  const index_t m = 200, n = 700, k = 600;
  REQUIRE(m * n * k >= heed::detail::kFp32ParallelWork);
  heed::Generator gen(5);
  const std::vector<float> a = uniform(m * k, gen), b = uniform(k * n, gen), bias = uniform(n, gen);
  std::vector<float> expected(static_cast<std::size_t>(m * n));
  fma_chain_gemm(a, k, false, b, k, true, expected, n, m, n, k, false, bias.data());
#ifdef _OPENMP
  const int saved = omp_get_max_threads();
  for (const int threads : {1, 2, 3}) {
    INFO(threads << " threads");
    omp_set_num_threads(threads);
    std::vector<float> c(static_cast<std::size_t>(m * n), std::numeric_limits<float>::quiet_NaN());
    heed::detail::fp32_gemm(a.data(), k, false, b.data(), k, true, c.data(), n, m, n, k, false, bias.data());
    CHECK(std::memcmp(c.data(), expected.data(), c.size() * sizeof(float)) == 0);
  }
  omp_set_num_threads(saved);
#else
  WARN("built without OpenMP: one thread only");
#endif
}

TEST_CASE("gemm takes heed's fp32 GEMM with AVX-512, the small kernel or Eigen when it is forced off", "[ops]") {
  using heed::detail::GemmKernel, heed::detail::gemm_kernel, heed::detail::kFp32MinWork;
  heed::Generator gen(9);
  const index_t m = 40, n = 70, k = 300;
  const std::vector<float> a = uniform(m * k, gen), b = uniform(k * n, gen), bias = uniform(n, gen);
  std::vector<float> expected(static_cast<std::size_t>(m * n));
  fma_chain_gemm(a, k, false, b, n, false, expected, n, m, n, k, false, bias.data());
  for (const heed::CpuFeatures& features : heed_test::feature_sets()) {
    const heed_test::ForcedCpuFeatures forced(features);
    INFO("features " << heed::to_string(features));
    const bool fp32 = features.avx512;
    CHECK((gemm_kernel<float>(m, n, k, false) == GemmKernel::fp32) == fp32);
    CHECK((gemm_kernel<float>(1, 9807, 128, true) == GemmKernel::fp32) == fp32);  // one row too
    CHECK((gemm_kernel<float>(m, 8, 16, false) == GemmKernel::small) == !fp32);
    // The smallest products stay with the small kernel where it fuses its multiply-adds
    // (the same bits); built without FMA, fp32_gemm takes them too.
    REQUIRE(10 * 8 * 10 <= kFp32MinWork);
    CHECK((gemm_kernel<float>(10, 8, 10, false) == GemmKernel::small) == (!fp32 || heed::detail::kSmallGemmFuses));
    CHECK(gemm_kernel<double>(m, n, k, false) != GemmKernel::fp32);
    std::vector<float> c(static_cast<std::size_t>(m * n));
    heed::detail::gemm(a.data(), false, b.data(), false, c.data(), m, n, k, bias.data());
    for (std::size_t i = 0; i < c.size(); ++i) {
      if (fp32)
        REQUIRE(std::memcmp(&c[i], &expected[i], sizeof(float)) == 0);
      else
        REQUIRE(std::abs(c[i] - expected[i]) <= 1e-4f);
    }
  }
}
