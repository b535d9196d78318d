// matmul with transpose flags (heed/ops/matmul.hpp) against matmul of transposed
// copies, by gradcheck, and its operand checks.
#include "nn_common.hpp"

#include "cpu_paths.hpp"

#include <array>
#include <cstring>
#include <utility>

#ifdef _OPENMP
#include <omp.h>
#endif

// ---- matmul with transposed operands -------------------------------------------------------------

namespace {

/// The operand as stored: (…, rows, cols), or (…, cols, rows) when it is to be transposed.
Tensord operand(heed::Shape shape, bool transposed, std::uint64_t seed) {
  if (transposed) std::swap(shape[-1], shape[-2]);
  return leaf(shape, seed);
}

Tensord op(const Tensord& x, bool transposed) { return transposed ? x.transpose(-2, -1) : x; }

}  // namespace

TEST_CASE("matmul with transpose flags equals matmul of transposed copies", "[ops]") {
  struct Case {
    heed::Shape a, b, out;  // logical op(a), op(b) shapes
  };
  const std::vector<Case> cases = {
      {{3, 4}, {4, 5}, {3, 5}},
      {{2, 3, 4}, {2, 4, 5}, {2, 3, 5}},
      {{2, 1, 3, 4}, {3, 4, 2}, {2, 3, 3, 2}},  // 4-D against 3-D, batch dims broadcast
      {{3, 4}, {2, 4, 5}, {2, 3, 5}},
      {{2, 3, 4}, {2, 1, 4, 5}, {2, 2, 3, 5}},
  };
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      for (std::size_t c = 0; c < cases.size(); ++c) {
        INFO("transpose_a " << ta << ", transpose_b " << tb << ", case " << c);
        const Tensord a = operand(cases[c].a, ta, 100 + c), b = operand(cases[c].b, tb, 200 + c);
        const Tensord got = heed::matmul(a, b, ta, tb);
        const Tensord expected = heed::matmul(op(a, ta), op(b, tb));
        REQUIRE(got.shape() == cases[c].out);
        check_close(got, expected, 1e-12);
      }

  // A small product by hand: Aᵀ Bᵀ with A (2, 2), B (2, 2).
  const auto a = heed::tensor<double>({{1, 2}, {3, 4}});
  const auto b = heed::tensor<double>({{5, 6}, {7, 8}});
  check_values(heed::matmul(a, b, false, false), {19, 22, 43, 50});
  check_values(heed::matmul(a, b, true, false), {26, 30, 38, 44});
  check_values(heed::matmul(a, b, false, true), {17, 23, 39, 53});
  check_values(heed::matmul(a, b, true, true), {23, 31, 34, 46});
}

TEST_CASE("gradcheck of matmul with transpose flags", "[ops]") {
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      INFO("transpose_a " << ta << ", transpose_b " << tb);
      const Fn f = [ta, tb](const Inputs& in) { return heed::matmul(in[0], in[1], ta, tb); };
      CHECK_GRADIENTS(f, {operand({3, 4}, ta, 1), operand({4, 2}, tb, 2)});
      CHECK_GRADIENTS(f, {operand({2, 3, 4}, ta, 3), operand({2, 4, 2}, tb, 4)});
      CHECK_GRADIENTS(f, {operand({2, 1, 3, 4}, ta, 5), operand({3, 4, 2}, tb, 6)});
      CHECK_GRADIENTS(f, {operand({2, 3, 4}, ta, 7), operand({2, 1, 4, 2}, tb, 8)});
      CHECK_GRADIENTS(f, {operand({3, 4}, ta, 9), operand({2, 4, 2}, tb, 10)});
    }
}

TEST_CASE("matmul with transpose flags checks its operands", "[ops]") {
  const auto a = heed::zeros<float>({3, 4});
  CHECK_ERROR(heed::ShapeError, "matmul: transposed operands need at least 2 dims",
              heed::matmul(a, heed::zeros<float>({4}), false, false));
  CHECK_ERROR(heed::ShapeError, "matmul: inner dims differ", heed::matmul(a, heed::zeros<float>({3, 5}), false, false));
  CHECK(heed::matmul(a, heed::zeros<float>({3, 5}), true, false).shape() == heed::Shape{4, 5});
  CHECK_ERROR(heed::ShapeError, "matmul: inner dims differ", heed::matmul(a, a, false, false));
  CHECK(heed::matmul(a, a, false, true).shape() == heed::Shape{3, 3});
  CHECK(heed::matmul(a, a, true, false).shape() == heed::Shape{4, 4});
  CHECK_ERROR(heed::ShapeError, "matmul: batch dims",
              heed::matmul(heed::zeros<float>({2, 3, 4}), heed::zeros<float>({3, 4, 5}), false, false));
}

// ---- detail::gemm: the kernels (Eigen, OpenBLAS when built in) and the panels -------------------

namespace {

/// c = op(a) · op(b) by the definition, accumulated in long double.
template <typename T>
std::vector<T> reference_gemm(const std::vector<T>& a, bool ta, const std::vector<T>& b, bool tb, index_t m, index_t n,
                              index_t k) {
  std::vector<T> c(static_cast<std::size_t>(m * n));
  for (index_t i = 0; i < m; ++i)
    for (index_t j = 0; j < n; ++j) {
      long double sum = 0;
      for (index_t p = 0; p < k; ++p)
        sum += static_cast<long double>(a[static_cast<std::size_t>(ta ? p * m + i : i * k + p)]) *
               static_cast<long double>(b[static_cast<std::size_t>(tb ? j * k + p : p * n + j)]);
      c[static_cast<std::size_t>(i * n + j)] = static_cast<T>(sum);
    }
  return c;
}

/// Operands a (m × k elements) and b (k × n) drawn uniformly from [-0.5, 0.5).
template <typename T>
std::pair<std::vector<T>, std::vector<T>> random_operands(index_t m, index_t n, index_t k, std::uint64_t seed) {
  heed::Generator gen(seed);
  std::vector<T> a(static_cast<std::size_t>(m * k)), b(static_cast<std::size_t>(k * n));
  for (auto* v : {&a, &b})
    for (T& x : *v) x = static_cast<T>(gen.uniform() - 0.5);
  return {a, b};
}

template <typename T>
void check_gemm(index_t m, index_t n, index_t k, double tolerance) {
  const auto [a, b] = random_operands<T>(m, n, k, static_cast<std::uint64_t>(m * 31 + n * 7 + k));
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      INFO(m << " x " << n << " x " << k << ", transpose_a " << ta << ", transpose_b " << tb);
      // NaN first: the product overwrites its output, whatever was there. The outputs are
      // tensors' buffers, aligned as every tensor's: where Eigen's vectorised loops start
      // depends on the output's alignment, and with it the last bits of small products.
      heed::Tensor<T> c = heed::full<T>({m * n}, std::numeric_limits<T>::quiet_NaN());
      heed::detail::gemm(a.data(), ta, b.data(), tb, c.data(), m, n, k);
      const std::vector<T> expected = reference_gemm(a, ta, b, tb, m, n, k);
      for (index_t i = 0; i < m * n; ++i)
        REQUIRE(std::abs(static_cast<double>(c.data()[i]) -
                         static_cast<double>(expected[static_cast<std::size_t>(i)])) <= tolerance);
#ifdef _OPENMP
      // The panels' edges depend on the sizes alone: 1 and 3 threads give the same bits.
      const int saved = omp_get_max_threads();
      heed::Tensor<T> one = heed::zeros<T>({m * n}), three = heed::zeros<T>({m * n});
      omp_set_num_threads(1);
      heed::detail::gemm(a.data(), ta, b.data(), tb, one.data(), m, n, k);
      omp_set_num_threads(3);
      heed::detail::gemm(a.data(), ta, b.data(), tb, three.data(), m, n, k);
      omp_set_num_threads(saved);
      const std::size_t bytes = static_cast<std::size_t>(m * n) * sizeof(T);
      CHECK(std::memcmp(one.data(), three.data(), bytes) == 0);
      CHECK(std::memcmp(one.data(), c.data(), bytes) == 0);
#endif
    }
}

}  // namespace

TEST_CASE("gemm computes op(a) · op(b) on every path, the same bits on any thread count", "[ops]") {
#ifdef HEED_WITH_OPENBLAS
  constexpr bool with_openblas = true;
#else
  constexpr bool with_openblas = false;
#endif
  // Eigen below kBlasMinRows rows or kBlasMinCols columns; OpenBLAS above when built in; panels
  // shared by the threads from kParallelGemmWork (512 × 256 × 128 = 2^24: 4 panels of
  // 128 rows for Eigen, 2 of 256 for OpenBLAS).
  CHECK_FALSE(heed::detail::gemm_uses_blas<float>(8, 8, 8));
  CHECK_FALSE(heed::detail::gemm_uses_blas<float>(4, 9807, 128));          // few rows: Eigen's
  CHECK(heed::detail::gemm_uses_blas<float>(10, 8, 10) == with_openblas);  // d2l's attention per head
  CHECK_FALSE(heed::detail::gemm_uses_blas<float>(10, 7, 10));
  CHECK(heed::detail::gemm_uses_blas<float>(64, 64, 64) == with_openblas);
  CHECK(heed::detail::gemm_uses_blas<double>(64, 64, 64) == with_openblas);
  REQUIRE(512 * 256 * 128 >= heed::detail::kParallelGemmWork);
  CHECK(heed::detail::gemm_panels<double>(512, 256, 127, false) == 1);  // below kParallelGemmWork
  CHECK(heed::detail::gemm_panels<double>(512, 256, 128, false) == (with_openblas ? 2 : 4));
  CHECK(heed::detail::gemm_panels<double>(1024, 512, 2048, true) == (with_openblas ? 4 : 8));
  CHECK(heed::detail::gemm_panels<double>(1536, 9807, 128, true) == (with_openblas ? 8 : 12));
  CHECK(heed::detail::gemm_panels<double>(1048576, 4, 16, false) == 12);  // heed's small kernel: Eigen's rule
  // In float, heed's fp32 GEMM (AVX-512) shares a product among the threads itself: one
  // panel; forced off, Eigen's (or OpenBLAS's) panels as in double.
  for (const heed::CpuFeatures& features : heed_test::feature_sets()) {
    const heed_test::ForcedCpuFeatures forced(features);
    INFO("features " << heed::to_string(features));
    CHECK(heed::detail::gemm_panels<float>(1024, 512, 2048, true) == (features.avx512 ? 1 : with_openblas ? 4 : 8));
    for (const auto& [m, n, k] :
         std::vector<std::array<index_t, 3>>{{3, 5, 4}, {10, 8, 10}, {64, 64, 64}, {37, 129, 70}})
      check_gemm<float>(m, n, k, 1e-4);
    check_gemm<float>(512, 256, 128, 1e-4);
    check_gemm<float>(96, 4096, 48, 1e-4);  // wider than tall: panels of columns
  }
  for (const auto& [m, n, k] : std::vector<std::array<index_t, 3>>{{3, 5, 4}, {10, 8, 10}, {64, 64, 64}, {37, 129, 70}})
    check_gemm<double>(m, n, k, 1e-12);
  check_gemm<double>(4, 3, 0, 0.0);  // k = 0: zeros
  check_gemm<float>(40, 3, 0, 0.0);
}

namespace {

/// small_gemm over every block of a product against the definition, writing only its
/// block, with the bits of the whole product in each block.
template <typename T>
void check_small_gemm(index_t m, index_t n, index_t k, double tolerance) {
  const auto [a, b] = random_operands<T>(m, n, k, static_cast<std::uint64_t>(m * 131 + n * 17 + k));
  const T nan = std::numeric_limits<T>::quiet_NaN();
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      INFO(m << " x " << n << " x " << k << ", transpose_a " << ta << ", transpose_b " << tb);
      std::vector<T> whole(static_cast<std::size_t>(m * n), nan);
      heed::detail::small_gemm(a.data(), ta, b.data(), tb, whole.data(), m, n, k, 0, m, 0, n);
      const std::vector<T> expected = reference_gemm(a, ta, b, tb, m, n, k);
      for (std::size_t i = 0; i < whole.size(); ++i)
        REQUIRE(std::abs(static_cast<double>(whole[i]) - static_cast<double>(expected[i])) <= tolerance);
      // One block in the middle: the same bits there, nothing written around it.
      const index_t r0 = m / 3, rows = m - m / 3 - m / 4, c0 = n / 3, cols = n - n / 3 - n / 4;
      std::vector<T> block(static_cast<std::size_t>(m * n), nan);
      heed::detail::small_gemm(a.data(), ta, b.data(), tb, block.data(), m, n, k, r0, rows, c0, cols);
      for (index_t i = 0; i < m; ++i)
        for (index_t j = 0; j < n; ++j) {
          const T got = block[static_cast<std::size_t>(i * n + j)];
          if (i >= r0 && i < r0 + rows && j >= c0 && j < c0 + cols)
            REQUIRE(std::memcmp(&got, &whole[static_cast<std::size_t>(i * n + j)], sizeof(T)) == 0);
          else
            REQUIRE(std::isnan(got));
        }
    }
}

}  // namespace

TEST_CASE("small_gemm computes every block of op(a) · op(b) and writes nothing else", "[ops]") {
  // Tiles of 12 / vectors rows; the last vector of a row masked (n not a multiple of 8
  // floats or 4 doubles); 1 to 4 vectors of columns; k from 1 to kSmallGemmMaxDepth.
  using heed::detail::kSmallGemmMaxCols;
  for (const index_t m : {1, 5, 12, 13, 40})
    for (const index_t n : {1, 3, 8, 9, 16, 17, 25, 32})
      for (const index_t k : {1, 8, 33, 128}) {
        if (n <= kSmallGemmMaxCols<float>) check_small_gemm<float>(m, n, k, 1e-4);
        if (n <= kSmallGemmMaxCols<double>) check_small_gemm<double>(m, n, k, 1e-12);
      }
  std::vector<float> c(6, 1.0f);  // k = 0: zeros
  heed::detail::small_gemm<float>(nullptr, false, nullptr, true, c.data(), 2, 3, 0, 0, 2, 0, 3);
  CHECK(c == std::vector<float>(6, 0.0f));
}

TEST_CASE("gemm takes the small kernel for few columns and a short inner dim", "[ops]") {
#ifdef HEED_WITH_OPENBLAS
  constexpr bool with_openblas = true;
#else
  constexpr bool with_openblas = false;
#endif
  using heed::detail::gemm_uses_small, heed::detail::kSmallGemmMaxCols;
  // 4 vectors of columns: 32 floats and 16 doubles with AVX2, 16 and 8 on the baseline.
  CHECK((kSmallGemmMaxCols<float> == 32 || kSmallGemmMaxCols<float> == 16));
  CHECK(kSmallGemmMaxCols<double> * 2 == kSmallGemmMaxCols<float>);
  const index_t two_vectors = kSmallGemmMaxCols<float> / 2;  // 16 floats with AVX2, 8 on the baseline
  // Up to two vectors of columns, wherever it fits (d2l's attention per head).
  CHECK(gemm_uses_small<float>(10, two_vectors, 8, true));
  CHECK(gemm_uses_small<float>(10, 8, 10, false));
  CHECK(gemm_uses_small<float>(640, two_vectors, 32, true));
  CHECK(gemm_uses_small<double>(640, kSmallGemmMaxCols<double> / 2, 128, false));
  CHECK_FALSE(gemm_uses_small<float>(640, kSmallGemmMaxCols<float> + 1, 32, false));  // too wide
  CHECK_FALSE(gemm_uses_small<double>(640, kSmallGemmMaxCols<double> + 1, 32, false));
  CHECK_FALSE(gemm_uses_small<float>(640, 8, 129, false));  // too deep for the panel
  // Not for a transposed b with k > 16 and fewer than 64 rows.
  CHECK_FALSE(gemm_uses_small<float>(12, 8, 32, true));
  CHECK_FALSE(gemm_uses_small<float>(1, 8, 32, true));
  CHECK(gemm_uses_small<float>(12, 8, 32, false));
  CHECK(gemm_uses_small<float>(64, 8, 32, true));
  // More than two vectors: only where OpenBLAS does not take the product (fewer than
  // 10 rows), or without OpenBLAS.
  CHECK(gemm_uses_small<float>(640, kSmallGemmMaxCols<float>, 32, true) == !with_openblas);
  CHECK(gemm_uses_small<float>(1, kSmallGemmMaxCols<float>, 32, false));
  // Through gemm, whose panels split a large product: 1 and 3 threads, the same bits.
  for (const auto& [m, n, k] : std::vector<std::array<index_t, 3>>{{10, 10, 8}, {12, 12, 32}, {8192, 32, 128}})
    check_gemm<double>(m, n, k, 1e-12), check_gemm<float>(m, n, k, 1e-4);
}
