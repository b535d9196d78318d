// heed/ops/small_gemm.hpp — heed's own kernel for products with few output columns
// and a short inner dim: attention per head (d2l's 10×10×8 and 10×8×10, their
// backward), and thin linear layers (640×32×32).
//
// A GEMM library's fixed costs (the interface, packing both operands, a β pass) are
// most of the time of a product of a few hundred multiply-adds, and the d2l Transformer
// runs thousands of them per step: its attention per head went to Eigen's lazy product
// or OpenBLAS's small-matrix kernels, and those were 20 % of a training step. This
// kernel reads op(b)'s rows in place when they are whole 256-bit vectors (otherwise,
// and for a transposed b, it copies them to a zero-padded panel on the stack), keeps
// 12 vectors of c in registers (12 rows × 8 floats, down to 3 rows × 32), and masks the
// store of the last vector of a row. Measured in one run against both
// (bench_gemm_shapes, one thread, AMD Zen 4): 10×10×8 (a·bᵀ) 0.076 µs against
// OpenBLAS 0.171 and Eigen 0.341; 10×8×10 (aᵀ·b) 0.047 against 0.145 and 0.235;
// 640×32×32 (a·bᵀ) 14.1 against 18.4 and 32.6.
//
// Each element of c is one multiply-add chain over k in order, from zero, whatever the
// block of c asked for: the bits do not depend on how a product is split among threads.
#pragma once

#include "heed/detail/header_begin.hpp"

#include <algorithm>
#include <cstring>
#include <type_traits>

#include "heed/core/shape.hpp"
#include "heed/detail/simd.hpp"

namespace heed {
namespace detail {

/// 256-bit vectors (heed/detail/simd.hpp) and masked stores for the last, partial vector
/// of a row: AVX-512VL masks, AVX2's vmaskmov, or (baseline) 128-bit GNU vectors with a
/// copy of the live lanes.
template <typename T>
struct SmallSimd : Simd<T, HEED_SIMD_256 ? 32 : 16> {
  using Base = Simd<T, HEED_SIMD_256 ? 32 : 16>;
  using Base::load;
  using Base::store;
#if defined(__AVX512F__) && defined(__AVX512VL__)
  using Mask = __mmask8;
  static Mask mask(index_t live) { return static_cast<Mask>((1u << live) - 1u); }
  static __m256 load(const float* p, Mask m) { return _mm256_maskz_loadu_ps(m, p); }
  static __m256d load(const double* p, Mask m) { return _mm256_maskz_loadu_pd(m, p); }
  static void store(float* p, __m256 v, Mask m) { _mm256_mask_storeu_ps(p, m, v); }
  static void store(double* p, __m256d v, Mask m) { _mm256_mask_storeu_pd(p, m, v); }
#elif defined(__AVX2__) && defined(__FMA__)
  using Mask = __m256i;  // all ones in the live lanes
  static Mask mask(index_t live) {
    if constexpr (std::is_same_v<T, float>)
      return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(live)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    else
      return _mm256_cmpgt_epi64(_mm256_set1_epi64x(live), _mm256_setr_epi64x(0, 1, 2, 3));
  }
  static __m256 load(const float* p, Mask m) { return _mm256_maskload_ps(p, m); }
  static __m256d load(const double* p, Mask m) { return _mm256_maskload_pd(p, m); }
  static void store(float* p, __m256 v, Mask m) { _mm256_maskstore_ps(p, m, v); }
  static void store(double* p, __m256d v, Mask m) { _mm256_maskstore_pd(p, m, v); }
#else
  using V = typename Base::V;
  using Mask = index_t;  // the number of live lanes
  static Mask mask(index_t live) { return live; }
  static V load(const T* p, Mask live) {
    V v{};
    std::memcpy(&v, p, sizeof(T) * static_cast<std::size_t>(live));
    return v;
  }
  static void store(T* p, V v, Mask live) { std::memcpy(p, &v, sizeof(T) * static_cast<std::size_t>(live)); }
#endif
};

/// The widest product the kernel takes: 4 vectors of columns (32 floats or 16 doubles
/// with AVX2, half that on the baseline), and an inner dim whose transposed b fits the
/// panel on the stack (16 KB).
template <typename T>
constexpr index_t kSmallGemmMaxCols = 4 * SmallSimd<T>::lanes;
constexpr index_t kSmallGemmMaxDepth = 128;

/// c[0 .. R)[0 .. cols) = a's R rows · b's k × cols block, NV vectors per row of c (the
/// last holding cols − (NV − 1) · lanes live lanes). Element (r, p) of a is at
/// a[r · lda + p], or a[r + p · lda] when TransA; row p of b, NV whole vectors, starts
/// at b + p · b_row; row r of c at c + r · c_row. No masked load in the k loop: GCC 12
/// takes the masked-load builtin for a write to memory, and then kept the accumulators
/// on the stack, stored back on every step (small_gemm_vectors pads b instead).
template <typename T, bool TransA, index_t R, index_t NV>
void small_gemm_tile(const T* a, index_t lda, const T* b, index_t b_row, index_t k, T* c, index_t c_row, index_t cols) {
  static_assert(NV >= 1 && NV <= 4, "small_gemm_tile: 1 to 4 vectors");
  using Simd = SmallSimd<T>;
  using V = typename Simd::V;
  constexpr index_t L = Simd::lanes;
  const typename Simd::Mask last = Simd::mask(cols - (NV - 1) * L);
  V acc[R][NV];
  for (index_t r = 0; r < R; ++r)
    for (index_t v = 0; v < NV; ++v) acc[r][v] = V{};
  for (index_t p = 0; p < k; ++p) {
    V bv[NV];
    for (index_t v = 0; v < NV; ++v) bv[v] = Simd::load(b + p * b_row + v * L);
    for (index_t r = 0; r < R; ++r) {
      const V av = Simd::broadcast(TransA ? a[r + p * lda] : a[r * lda + p]);
      for (index_t v = 0; v < NV; ++v) acc[r][v] = Simd::fma(av, bv[v], acc[r][v]);
    }
  }
  for (index_t r = 0; r < R; ++r) {
    T* out = c + r * c_row;
    for (index_t v = 0; v + 1 < NV; ++v) Simd::store(out + v * L, acc[r][v]);
    Simd::store(out + (NV - 1) * L, acc[r][NV - 1], last);  // masked even when whole
  }
}

/// small_gemm_tile<left rows>, for left < R.
template <typename T, bool TransA, index_t R, index_t NV>
void small_gemm_tail(index_t left, const T* a, index_t lda, const T* b, index_t b_row, index_t k, T* c, index_t c_row,
                     index_t cols) {
  if constexpr (R > 0) {
    if (left == R) return small_gemm_tile<T, TransA, R, NV>(a, lda, b, b_row, k, c, c_row, cols);
    small_gemm_tail<T, TransA, R - 1, NV>(left, a, lda, b, b_row, k, c, c_row, cols);
  }
}

/// The rows [0, rows) of small_gemm's block, in tiles of kTile rows and one tile for
/// the rest.
template <typename T, bool TransA, index_t NV>
void small_gemm_rows(const T* a, index_t lda, const T* b, index_t b_row, index_t k, T* c, index_t c_row, index_t rows,
                     index_t cols) {
  constexpr index_t kTile = 12 / NV;  // 12 accumulators
  const index_t a_step = TransA ? 1 : lda;
  index_t r = 0;
  for (; r + kTile <= rows; r += kTile)
    small_gemm_tile<T, TransA, kTile, NV>(a + r * a_step, lda, b, b_row, k, c + r * c_row, c_row, cols);
  if (r < rows)
    small_gemm_tail<T, TransA, kTile - 1, NV>(rows - r, a + r * a_step, lda, b, b_row, k, c + r * c_row, c_row, cols);
}

/// small_gemm for cols ≤ NV vectors.
template <typename T, index_t NV>
void small_gemm_vectors(const T* a, bool trans_a, const T* b, bool trans_b, T* c, index_t m, index_t n, index_t k,
                        index_t r0, index_t rows, index_t c0, index_t cols) {
  constexpr index_t kPanelRow = NV * SmallSimd<T>::lanes;
  alignas(32) T panel[kSmallGemmMaxDepth * kPanelRow];
  const T* b_rows = b + c0;
  index_t b_row = n;
  if (trans_b) {  // b stored (n, k): its columns c0 .. c0 + cols become the panel's rows
    for (index_t j = 0; j < cols; ++j) {
      const T* column = b + (c0 + j) * k;
      for (index_t p = 0; p < k; ++p) panel[p * kPanelRow + j] = column[p];
    }
    for (index_t p = 0; p < k; ++p) std::fill(panel + p * kPanelRow + cols, panel + (p + 1) * kPanelRow, T(0));
    b_rows = panel;
    b_row = kPanelRow;
  } else if (cols != kPanelRow) {  // rows of b padded to whole vectors
    for (index_t p = 0; p < k; ++p) {
      std::copy(b + p * n + c0, b + p * n + c0 + cols, panel + p * kPanelRow);
      std::fill(panel + p * kPanelRow + cols, panel + (p + 1) * kPanelRow, T(0));
    }
    b_rows = panel;
    b_row = kPanelRow;
  }
  // a stored (m, k), or (k, m) when transposed.
  T* c_rows = c + r0 * n + c0;
  if (trans_a)
    small_gemm_rows<T, true, NV>(a + r0, m, b_rows, b_row, k, c_rows, n, rows, cols);
  else
    small_gemm_rows<T, false, NV>(a + r0 * k, k, b_rows, b_row, k, c_rows, n, rows, cols);
}

/// c[r0 : r0 + rows, c0 : c0 + cols] = op(a) · op(b) over that block (row-major, c has n
/// columns; op(a) is m × k, op(b) k × n), for cols ≤ kSmallGemmMaxCols and
/// k ≤ kSmallGemmMaxDepth (small_gemm_fits).
template <typename T>
void small_gemm(const T* a, bool trans_a, const T* b, bool trans_b, T* c, index_t m, index_t n, index_t k, index_t r0,
                index_t rows, index_t c0, index_t cols) {
  constexpr index_t L = SmallSimd<T>::lanes;
  if (rows == 0 || cols == 0) return;
  if (k == 0) {
    for (index_t r = 0; r < rows; ++r) std::fill_n(c + (r0 + r) * n + c0, cols, T(0));
    return;
  }
  if (cols <= L)
    small_gemm_vectors<T, 1>(a, trans_a, b, trans_b, c, m, n, k, r0, rows, c0, cols);
  else if (cols <= 2 * L)
    small_gemm_vectors<T, 2>(a, trans_a, b, trans_b, c, m, n, k, r0, rows, c0, cols);
  else if (cols <= 3 * L)
    small_gemm_vectors<T, 3>(a, trans_a, b, trans_b, c, m, n, k, r0, rows, c0, cols);
  else
    small_gemm_vectors<T, 4>(a, trans_a, b, trans_b, c, m, n, k, r0, rows, c0, cols);
}

/// Whether small_gemm can compute an m × n × k product (any m).
template <typename T>
constexpr bool small_gemm_fits(index_t n, index_t k) {
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>)
    return n <= kSmallGemmMaxCols<T> && k <= kSmallGemmMaxDepth;
  else
    return false;
}

}  // namespace detail
}  // namespace heed

#include "heed/detail/header_end.hpp"
