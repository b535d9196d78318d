// heed/ops/bf16_gemm.hpp — c = op(a) · op(b) with bf16 operands and fp32 sums: the
// products of mixed-precision training (AutocastGuard, heed/ops/autocast.hpp).
//
//   heed::detail::bf16_gemm(a, trans_a, b, trans_b, c, m, n, k);  // row-major floats, as gemm
//
// Both operands are rounded to bf16 (to nearest, even) as they are packed, and the
// product runs on fp32_gemm.hpp's engine with vdpbf16ps in place of the FMA: op(b) in
// blocks of kBf16Depth k × kFp32Width columns, panels of 64 columns holding each pair
// of k (k, k + 1) in one 32-bit lane; op(a)'s rows converted kBf16ChunkRows at a time
// into pairs the tiles broadcast. Packing reads either layout of either operand (the
// backward's dY·W and dYᵀ·X take them transposed): no transposed copy in fp32.
// Every element of c is one chain over the pairs in order from 0 (from c's value with
// `accumulate`), each pair adding the product of the high halves, then of the low ones
// (vdpbf16ps's order), then + bias: the bits depend on neither the threads nor the
// tiling. The portable path (no AVX512_BF16, or forced) computes the same chain with
// std::fma (a product of two bf16 is exact in fp32) and gives the same bits, but where
// the instruction flushes denormals to zero.
#pragma once

#include "heed/detail/header_begin.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "heed/core/tensor.hpp"
#include "heed/detail/parallel.hpp"
#include "heed/ops/cpu_features.hpp"
#include "heed/ops/fp32_gemm.hpp"
#include "heed/ops/quantized_gemm.hpp"

#if HEED_X86_64
#define HEED_BF16_GEMM_TARGET __attribute__((target("avx512f,avx512bw,avx512vl")))
#endif

namespace heed::detail {

/// k per packed block of op(b): 256 pairs × 64 columns, 64 KiB a panel, as fp32's.
constexpr index_t kBf16Depth = 2 * kFp32Depth;
/// Rows of op(a) converted together (16 tiles of 6): 96 × 256 pairs, 96 KiB.
constexpr index_t kBf16ChunkRows = 16 * kFp32TileRows;
/// Rows of a (m, k) ahead whose values are prefetched while a row is converted.
constexpr index_t kBf16PrefetchRows = 2;

/// The value of x rounded to bf16 (float_to_bf16_bits), as a float.
inline float bf16_rounded(float x) { return bf16_bits_to_float(float_to_bf16_bits(x)); }

/// The portable path: the engine's chains, one element at a time.
inline void bf16_gemm_portable(const float* a, bool trans_a, const float* b, bool trans_b, float* c, index_t m,
                               index_t n, index_t k, const float* bias, bool accumulate) {
  // op(a)'s rows and op(b)'s columns rounded, each padded with a zero to an even length.
  const index_t k_even = k + k % 2;
  std::vector<float> rows(static_cast<std::size_t>(m * k_even), 0.0f), columns(static_cast<std::size_t>(n * k_even));
  for (index_t i = 0; i < m; ++i)
    for (index_t l = 0; l < k; ++l) rows[i * k_even + l] = bf16_rounded(trans_a ? a[l * m + i] : a[i * k + l]);
  for (index_t j = 0; j < n; ++j)
    for (index_t l = 0; l < k; ++l) columns[j * k_even + l] = bf16_rounded(trans_b ? b[j * k + l] : b[l * n + j]);
  parallel_tasks(m, m * n * k, [&](index_t i) {
    for (index_t j = 0; j < n; ++j) {
      const float* x = rows.data() + i * k_even;
      const float* y = columns.data() + j * k_even;
      float sum = accumulate ? c[i * n + j] : 0.0f;
      for (index_t l = 0; l < k_even; l += 2) sum = std::fma(x[l], y[l], std::fma(x[l + 1], y[l + 1], sum));
      c[i * n + j] = bias ? sum + bias[j] : sum;
    }
  });
}

#if HEED_X86_64
/// 16 floats from `at` (the first `count`; zeros past them) as bf16 bits, one per 32-bit lane.
HEED_BF16_GEMM_TARGET inline __m512i bf16_lanes(const float* at, index_t count) {
  return bf16_bits_avx512(_mm512_maskz_loadu_epi32(first_lanes(count), at));
}

/// 32 floats from `at` (the first `count`; zeros past them) as 16 pairs of bf16.
HEED_BF16_GEMM_TARGET inline __m512i bf16_pairs_along(const float* at, index_t count) {
  // The low halves of the 32-bit lanes of both: words 0, 2, ..., 62 of the two vectors.
  const __m512i even_words = _mm512_set_epi16(62, 60, 58, 56, 54, 52, 50, 48, 46, 44, 42, 40, 38, 36, 34, 32, 30, 28,
                                              26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
  const __m512i high = count > 16 ? bf16_lanes(at + 16, count - 16) : _mm512_setzero_si512();
  return _mm512_maskz_permutex2var_epi16(~__mmask32(0), bf16_lanes(at, count), even_words, high);
}

/// Lane i: bf16(lo[i]) | bf16(hi[i]) << 16 for i < count (hi null: 0), zeros past count.
HEED_BF16_GEMM_TARGET inline __m512i bf16_pairs_across(const float* lo, const float* hi, index_t count) {
  const __m512i low = bf16_lanes(lo, count);
  return hi ? _mm512_or_si512(low, _mm512_maskz_slli_epi32(kAllLanes, bf16_lanes(hi, count), 16)) : low;
}

/// Packs op(b)[p0 : p0 + kc][j0 : j0 + cols] (cols ≤ kFp32Panel) into a panel: (kc + 1)
/// / 2 rows of 64 pairs, zeros past k and past cols in its last vector (vectors wholly
/// past cols are not written, as fp32_pack_panel). b is (k, n), or (n, k) when trans_b.
HEED_BF16_GEMM_TARGET inline void bf16_pack_panel(const float* b, index_t k, index_t n, bool trans_b, index_t p0,
                                                  index_t kc, index_t j0, index_t cols, std::uint32_t* panel) {
  const index_t pairs = (kc + 1) / 2;
  if (!trans_b) {  // b's rows 2g and 2g + 1: a vector of pairs per 16 columns
    for (index_t g = 0; g < pairs; ++g) {
      const float* lo = b + (p0 + 2 * g) * n + j0;
      const float* hi = 2 * g + 1 < kc ? lo + n : nullptr;
      if (2 * g + kFp32PrefetchRows < kc)  // rows n floats apart: the prefetchers do not follow
        for (index_t j = 0; j < cols; j += kFp32Lanes) __builtin_prefetch(lo + kFp32PrefetchRows * n + j);
      for (index_t v = 0; v * kFp32Lanes < cols; ++v)
        _mm512_store_si512(
            panel + g * kFp32Panel + v * kFp32Lanes,
            bf16_pairs_across(lo + v * kFp32Lanes, hi ? hi + v * kFp32Lanes : nullptr, cols - v * kFp32Lanes));
    }
    return;
  }
  // b's rows are op(b)'s columns, each pair of k side by side: 16 rows' 16 pairs at a
  // time, transposed in registers.
  for (index_t v = 0; v * kFp32Lanes < cols; ++v) {
    const index_t rows = std::min(kFp32Lanes, cols - v * kFp32Lanes);
    for (index_t g = 0; g < pairs; g += 16) {
      const index_t depth = std::min<index_t>(16, pairs - g);
      __m512 t[16], columns[16];
      for (index_t j = 0; j < 16; ++j)
        t[j] = j < rows ? _mm512_castsi512_ps(bf16_pairs_along(b + (j0 + v * kFp32Lanes + j) * k + p0 + 2 * g,
                                                               std::min<index_t>(32, kc - 2 * g)))
                        : _mm512_setzero_ps();
      transpose_16x16(t, columns);
      for (index_t gg = 0; gg < depth; ++gg)
        _mm512_store_ps(reinterpret_cast<float*>(panel + (g + gg) * kFp32Panel + v * kFp32Lanes), columns[gg]);
    }
  }
}

/// Converts op(a)'s rows [i0, i0 + rows) over k [p0, p0 + kc) into pairs: for a (m, k),
/// row r's pairs at out[r · pairs + g] (the tile reads them along the row); for a (k, m)
/// (trans_a), pair g's rows at out[g · kBf16ChunkRows + r] (the tile reads them across).
HEED_BF16_GEMM_TARGET inline void bf16_convert_rows(const float* a, index_t k, index_t m, bool trans_a, index_t p0,
                                                    index_t kc, index_t i0, index_t rows, std::uint32_t* out) {
  const index_t pairs = (kc + 1) / 2;
  if (!trans_a) {
    for (index_t r = 0; r < rows; ++r) {
      const float* row = a + (i0 + r) * k + p0;
      for (index_t g = 0; g < pairs; g += 16) {
        // A row's kc values are 2 KiB of a row k floats long: ask for the next rows' early.
        if (r + kBf16PrefetchRows < rows) {
          __builtin_prefetch(row + kBf16PrefetchRows * k + 2 * g);
          __builtin_prefetch(row + kBf16PrefetchRows * k + 2 * g + 16);
        }
        _mm512_storeu_si512(out + r * pairs + g, bf16_pairs_along(row + 2 * g, std::min<index_t>(32, kc - 2 * g)));
      }
    }
    return;  // the last store may run past `pairs` into the next row's, which it then writes
  }
  for (index_t g = 0; g < pairs; ++g) {
    const float* lo = a + (p0 + 2 * g) * m + i0;
    const float* hi = 2 * g + 1 < kc ? lo + m : nullptr;
    if (2 * g + kFp32PrefetchRows < kc)
      for (index_t r = 0; r < rows; r += kFp32Lanes) __builtin_prefetch(lo + kFp32PrefetchRows * m + r);
    for (index_t r = 0; r < rows; r += kFp32Lanes)
      _mm512_mask_storeu_epi32(out + g * kBf16ChunkRows + r, first_lanes(rows - r),
                               bf16_pairs_across(lo + r, hi ? hi + r : nullptr, rows - r));
  }
}

/// The tiles of a chunk's `rows` rows (bf16_convert_rows's layout, `across` for trans_a's)
/// times the packed panels of `cols` columns, `pairs` deep, into c (row stride ldc): c's
/// first row and column are the chunk's and the first panel's.
inline void bf16_chunk_tiles(const std::uint32_t* row_pairs, bool across, index_t rows, const std::uint32_t* panels,
                             index_t pairs, index_t cols, float* c, index_t ldc, bool load_c, const float* bias) {
  for (index_t i = 0; i < rows; i += kFp32TileRows) {
    const index_t tile_rows = std::min(kFp32TileRows, rows - i);
    for (index_t j = 0; j < cols; j += kFp32Panel) {
      const index_t panel_cols = std::min(kFp32Panel, cols - j), vectors = (panel_cols + kFp32Lanes - 1) / kFp32Lanes;
      const GemmTile<std::uint32_t> tile{across ? row_pairs + i : row_pairs + i * pairs,
                                         across ? kBf16ChunkRows : pairs,
                                         panels + j * pairs,
                                         kFp32Panel,
                                         pairs,
                                         c + i * ldc + j,
                                         ldc,
                                         first_lanes(panel_cols - (vectors - 1) * kFp32Lanes),
                                         load_c,
                                         bias ? bias + j : nullptr};
      if (across)
        gemm_tile_of<Bf16Dot, true, kFp32TileRows>(tile_rows, vectors, tile);
      else
        gemm_tile_of<Bf16Dot, false, kFp32TileRows>(tile_rows, vectors, tile);
    }
  }
}
#endif

/// c = op(a) · op(b) (+ bias, n values, one per column), or with `accumulate` c + that;
/// c row-major (m × n), op(a) m × k (a stored (m, k), or (k, m) when trans_a), op(b)
/// k × n (b stored (k, n), or (n, k) when trans_b). Threads as fp32_gemm.
inline void bf16_gemm(const float* a, bool trans_a, const float* b, bool trans_b, float* c, index_t m, index_t n,
                      index_t k, const float* bias = nullptr, bool accumulate = false) {
  if (m <= 0 || n <= 0) return;
#if HEED_X86_64
  if (cpu_features().avx512_bf16 && k > 0) {
    const GemmTasks tasks(m, n, k);  // as fp32_gemm's
    const index_t depth_pairs = (std::min(k, kBf16Depth) + 1) / 2, width = std::min(n, kFp32Width);
    const index_t panel_floats = depth_pairs * kFp32Panel;
    const index_t block_floats = (width + kFp32Panel - 1) / kFp32Panel * panel_floats;
    // A row's last pairs may be stored 16 at a time (bf16_convert_rows): 16 more.
    const index_t chunk_floats = kBf16ChunkRows * depth_pairs + kFp32Lanes;
    parallel_tasks(tasks.count, tasks.work, [&](index_t task) {
      const auto [j0, nc, i_begin, i_end] = tasks[task];
      if (i_begin >= i_end) return;
      const index_t panels = (nc + kFp32Panel - 1) / kFp32Panel;
      // Idle buffers of the buffer cache (64-byte aligned storage).
      Tensor<float> packed_b = make_tensor<float>(Shape{block_floats}, Device::cpu(), "bf16_gemm op(b)");
      Tensor<float> packed_a = make_tensor<float>(Shape{chunk_floats}, Device::cpu(), "bf16_gemm op(a)");
      auto* const panel_pairs = reinterpret_cast<std::uint32_t*>(packed_b.data());
      auto* const row_pairs = reinterpret_cast<std::uint32_t*>(packed_a.data());
      for (index_t p0 = 0; p0 < k; p0 += kBf16Depth) {
        const index_t kc = std::min(kBf16Depth, k - p0), pairs = (kc + 1) / 2;
        const bool load_c = accumulate || p0 > 0, last_block = p0 + kc == k;
        for (index_t p = 0; p < panels; ++p) {
          const index_t first = j0 + p * kFp32Panel;
          bf16_pack_panel(b, k, n, trans_b, p0, kc, first, std::min(kFp32Panel, n - first),
                          panel_pairs + p * pairs * kFp32Panel);
        }
        for (index_t i_first = i_begin; i_first < i_end; i_first += kBf16ChunkRows) {
          const index_t rows = std::min(i_end, i_first + kBf16ChunkRows) - i_first;
          bf16_convert_rows(a, k, m, trans_a, p0, kc, i_first, rows, row_pairs);
          bf16_chunk_tiles(row_pairs, trans_a, rows, panel_pairs, pairs, nc, c + i_first * n + j0, n, load_c,
                           last_block && bias ? bias + j0 : nullptr);
        }
      }
    });
    return;
  }
#endif
  bf16_gemm_portable(a, trans_a, b, trans_b, c, m, n, k, bias, accumulate);
}

/// op(b) packed once for many bf16 products of depth k ≤ kBf16Depth (the fused linear
/// cross entropy multiplies the same weight and inputs tile after tile): the panels
/// bf16_gemm packs on every call, for all n columns. Products from it have bf16_gemm's
/// bits.
class Bf16PackedB {
 public:
  /// Whether products of depth k can run from packed operands here: AVX512_BF16 (not
  /// forced off) and one block of k.
  static bool available(index_t k) {
#if HEED_X86_64
    return k > 0 && k <= kBf16Depth && cpu_features().avx512_bf16;
#else
    (void)k;
    return false;  // the portable path packs nothing
#endif
  }

  Bf16PackedB() = default;
  /// Packs op(b), k × n: b stored (k, n), or (n, k) when trans_b.
  Bf16PackedB(const float* b, bool trans_b, index_t k, index_t n) : k_(k), n_(n), pairs_((k + 1) / 2) {
    HEED_CHECK(available(k) && n > 0, ValueError, "Bf16PackedB: cannot pack ", k, " × ", n,
               " here (AVX512_BF16 and 0 < k ≤ ", kBf16Depth, " needed)");
#if HEED_X86_64
    const index_t panels = (n + kFp32Panel - 1) / kFp32Panel;
    panels_ = make_tensor<float>(Shape{panels * pairs_ * kFp32Panel}, Device::cpu(), "Bf16PackedB");
    for (index_t p = 0; p < panels; ++p)
      bf16_pack_panel(b, k, n, trans_b, 0, k, p * kFp32Panel, std::min(kFp32Panel, n - p * kFp32Panel),
                      reinterpret_cast<std::uint32_t*>(panels_.data()) + p * pairs_ * kFp32Panel);
#else
    (void)b, (void)trans_b;
#endif
  }

  bool defined() const { return panels_.defined(); }

  /// c = op(a) · op(b)[:, j0 : j0 + cols] (+ bias, cols values), or with `accumulate` c
  /// + that, on the calling thread: op(a) m × k, a stored (m, k), or (k, m) when
  /// trans_a; c row-major with row stride ldc; j0 a multiple of kFp32Panel.
  void multiply(const float* a, bool trans_a, index_t m, index_t j0, index_t cols, float* c, index_t ldc,
                const float* bias = nullptr, bool accumulate = false) const {
    check_columns(m, j0, cols);
#if HEED_X86_64
    const index_t chunk = std::min(m, kBf16ChunkRows);
    Tensor<float> buffer =
        make_tensor<float>(Shape{kBf16ChunkRows * pairs_ + kFp32Lanes}, Device::cpu(), "Bf16PackedB op(a)");
    auto* const row_pairs = reinterpret_cast<std::uint32_t*>(buffer.data());
    for (index_t i = 0; i < m; i += chunk) {
      const index_t rows = std::min(chunk, m - i);
      bf16_convert_rows(a, k_, m, trans_a, 0, k_, i, rows, row_pairs);
      bf16_chunk_tiles(row_pairs, trans_a, rows, panels(j0), pairs_, cols, c + i * ldc, ldc, accumulate, bias);
    }
#else
    (void)a, (void)trans_a, (void)c, (void)ldc, (void)bias, (void)accumulate, (void)k_;
#endif
  }

  /// The same with op(a)'s rows converted already: `rows` from bf16_convert_rows over a
  /// (m, k) whole (row i's pairs at i · (k + 1) / 2).
  void multiply_rows(const std::uint32_t* rows, index_t m, index_t j0, index_t cols, float* c, index_t ldc,
                     const float* bias = nullptr, bool accumulate = false) const {
    check_columns(m, j0, cols);
#if HEED_X86_64
    bf16_chunk_tiles(rows, false, m, panels(j0), pairs_, cols, c, ldc, accumulate, bias);
#else
    (void)rows, (void)c, (void)ldc, (void)bias, (void)accumulate;
#endif
  }

 private:
  const std::uint32_t* panels(index_t j0) const {
    return reinterpret_cast<const std::uint32_t*>(panels_.data()) + j0 * pairs_;
  }
  void check_columns(index_t m, index_t j0, index_t cols) const {
    HEED_CHECK(defined() && m >= 0 && j0 >= 0 && j0 % kFp32Panel == 0 && cols >= 0 && j0 + cols <= n_, ValueError,
               "Bf16PackedB::multiply: columns [", j0, ", ", j0 + cols, ") of ", n_, " packed (", m, " rows)");
  }

  Tensor<float> panels_;
  index_t k_ = 0, n_ = 0, pairs_ = 0;
};

/// op(a)'s rows (a (m, k), k ≤ kBf16Depth) converted once into the pairs that
/// Bf16PackedB::multiply_rows reads: row i at rows() + i · (k + 1) / 2.
class Bf16Rows {
 public:
  Bf16Rows() = default;
  Bf16Rows(const float* a, index_t m, index_t k) : pairs_((k + 1) / 2) {
    HEED_CHECK(Bf16PackedB::available(k) && m >= 0, ValueError, "Bf16Rows: cannot convert ", m, " × ", k,
               " here (AVX512_BF16 and 0 < k ≤ ", kBf16Depth, " needed)");
    // bf16_convert_rows's last store may run 16 pairs past the last row.
    rows_ = make_tensor<float>(Shape{m * pairs_ + kFp32Lanes}, Device::cpu(), "Bf16Rows");
#if HEED_X86_64
    bf16_convert_rows(a, k, m, false, 0, k, 0, m, reinterpret_cast<std::uint32_t*>(rows_.data()));
#else
    (void)a;
#endif
  }
  /// Row i's pairs.
  const std::uint32_t* row(index_t i) const {
    return reinterpret_cast<const std::uint32_t*>(rows_.data()) + i * pairs_;
  }

 private:
  Tensor<float> rows_;
  index_t pairs_ = 0;
};

}  // namespace heed::detail

#undef HEED_BF16_GEMM_TARGET

#include "heed/detail/header_end.hpp"
