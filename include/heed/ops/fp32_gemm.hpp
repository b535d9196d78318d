// heed/ops/fp32_gemm.hpp — heed's own fp32 GEMM on AVX-512: c = op(a) · op(b) (+ bias).
//
//   heed::detail::fp32_gemm(a, lda, trans_a, b, ldb, trans_b, c, ldc, m, n, k);  // row-major
//
// ops/gemm.hpp sends float products here when the CPU has AVX-512 (cpu_features(); forced
// off, Eigen's GEMM, or OpenBLAS's, takes them: the portable path and the reference).
// A GEMM library blocks a product by the thread count, and its bits change with it.
// Here every element of c is one fused multiply-add chain over k in order from 0 (from
// c's value with `accumulate`), then + bias: the bits of a scalar std::fma loop,
// whatever the threads, the blocking or the tile an element falls in, and the bits of
// x Wᵀ's inference kernels (ops/packed_gemm.hpp).
//
// Blocking (BLIS's, without packing op(a)): op(b) in blocks of kFp32Depth rows (k) ×
// kFp32Width columns, packed into panels of 64 columns (each k's 64 values side by side,
// zeros past n) that stay in L2 while tiles of 6 rows × 64 columns sweep them: a tile's
// 24 accumulators live in registers, each k loads the panel's 4 vectors and broadcasts
// op(a)'s 6 values straight from a's rows (the 6 × kFp32Depth values stay in L1 across
// the panels; a transposed is copied first, 6 values per k side by side). A block of k after the first
// reloads the tile from c and goes on (fp32 stored exactly: the chain is unbroken).
// The threads take blocks of columns and groups of rows (fp32_gemm).
#pragma once

#include "heed/detail/header_begin.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "heed/core/tensor.hpp"
#include "heed/detail/parallel.hpp"
#include "heed/ops/cpu_features.hpp"
#include "heed/ops/quantized_gemm.hpp"  // first_lanes, kAllLanes

#if HEED_X86_64
#include <immintrin.h>
#define HEED_FP32_TARGET __attribute__((target("avx512f,avx512bw,avx512vl")))
#endif

// GCC keeps a tile's accumulators in registers only where its loops are unrolled whole.
#if defined(__clang__) || !defined(__GNUC__)
#define HEED_FP32_UNROLL
#else
#define HEED_FP32_PRAGMA(x) _Pragma(#x)
#define HEED_FP32_UNROLL HEED_FP32_PRAGMA(GCC unroll 8)
#endif

namespace heed::detail {

constexpr index_t kFp32Lanes = 16;                             // floats per vector
constexpr index_t kFp32TileVectors = 4;                        // vectors of columns per tile
constexpr index_t kFp32Panel = kFp32TileVectors * kFp32Lanes;  // columns per packed panel
constexpr index_t kFp32TileRows = 6;
/// Rows of op(b) per packed block: a panel (256 × 64 floats, 64 KiB) streams from L2.
constexpr index_t kFp32Depth = 256;
/// Columns per packed block: 256 × 512 floats, 512 KiB of Zen 5's 1 MiB L2.
constexpr index_t kFp32Width = 512;
/// Rows whose tiles sweep a packed block together (op(a) copied for them when
/// transposed).
constexpr index_t kFp32TaskRows = 32 * kFp32TileRows;
/// Rows of c up to which op(b), when not transposed, is read where it lies.
constexpr index_t kFp32InPlaceRows = 64;
/// Products below this many multiply-adds run on the calling thread.
constexpr index_t kFp32ParallelWork = index_t(1) << 22;

#if HEED_X86_64
/// One tile's operands: op(a)'s rows (element (r, k) at a[r · lda + k], or a[k · lda + r]
/// when transposed), op(b)'s columns (element (k, j) at b[k · ldb + j]: a packed panel,
/// ldb 64, or b's rows in place), kc elements along k, c at ldc, the last vector's
/// columns (`last`), whether the chain starts from c (else from 0), and the bias to add
/// after. An element is a float, or for bf16 (ops/bf16_gemm.hpp) a pair of k.
template <typename Element>
struct GemmTile {
  const Element* a;
  index_t lda;
  const Element* b;
  index_t ldb, kc;
  float* c;
  index_t ldc;
  __mmask16 last;
  bool load_c;
  const float* bias;
};
using Fp32Tile = GemmTile<float>;

// What a tile does with an element of op(a) and a vector of op(b)'s: fp32 values, one
// FMA; bf16 pairs (k and k + 1 in one 32-bit lane), one vdpbf16ps (which adds the
// product of the high halves, then of the low ones).
#define HEED_GEMM_DOT __attribute__((always_inline, target("avx512f,avx512bw,avx512vl,avx512bf16"))) static inline
struct Fp32Dot {
  using Element = float;
  using Vector = __m512;
  HEED_GEMM_DOT Vector load(__mmask16 mask, const float* at) { return _mm512_maskz_loadu_ps(mask, at); }
  HEED_GEMM_DOT Vector broadcast(float x) { return _mm512_set1_ps(x); }
  HEED_GEMM_DOT __m512 add(__m512 acc, Vector a, Vector b) { return _mm512_fmadd_ps(a, b, acc); }
};
struct Bf16Dot {
  using Element = std::uint32_t;
  using Vector = __m512i;
  HEED_GEMM_DOT Vector load(__mmask16 mask, const std::uint32_t* at) { return _mm512_maskz_loadu_epi32(mask, at); }
  HEED_GEMM_DOT Vector broadcast(std::uint32_t x) { return _mm512_set1_epi32(static_cast<int>(x)); }
  HEED_GEMM_DOT __m512 add(__m512 acc, Vector a, Vector b) { return _mm512_dpbf16_ps(acc, (__m512bh)a, (__m512bh)b); }
};
#undef HEED_GEMM_DOT

/// c (R rows × NV vectors) of a tile (GemmTile), each element one chain over k.
template <typename Dot, index_t R, index_t NV, bool TransA>
__attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16"))) void gemm_tile(
    const GemmTile<typename Dot::Element>& t) {
  const typename Dot::Element* const a = t.a;
  const index_t lda = t.lda;
  __m512 acc[R][NV];
  HEED_FP32_UNROLL
  for (index_t r = 0; r < R; ++r) {
    HEED_FP32_UNROLL
    for (index_t v = 0; v < NV; ++v)
      acc[r][v] = t.load_c ? _mm512_maskz_loadu_ps(v + 1 < NV ? kAllLanes : t.last, t.c + r * t.ldc + v * kFp32Lanes)
                           : _mm512_setzero_ps();
  }
  for (index_t k = 0; k < t.kc; ++k) {
    const typename Dot::Element* b = t.b + k * t.ldb;
    typename Dot::Vector bv[NV];
    HEED_FP32_UNROLL
    for (index_t v = 0; v < NV; ++v) bv[v] = Dot::load(v + 1 < NV ? kAllLanes : t.last, b + v * kFp32Lanes);
    HEED_FP32_UNROLL
    for (index_t r = 0; r < R; ++r) {
      const typename Dot::Vector av = Dot::broadcast(TransA ? a[k * lda + r] : a[r * lda + k]);
      HEED_FP32_UNROLL
      for (index_t v = 0; v < NV; ++v) acc[r][v] = Dot::add(acc[r][v], av, bv[v]);
    }
  }
  HEED_FP32_UNROLL
  for (index_t v = 0; v < NV; ++v) {
    const __mmask16 mask = v + 1 < NV ? kAllLanes : t.last;
    const __m512 add = t.bias ? _mm512_maskz_loadu_ps(mask, t.bias + v * kFp32Lanes) : _mm512_setzero_ps();
    HEED_FP32_UNROLL
    for (index_t r = 0; r < R; ++r) {
      if (t.bias) acc[r][v] = _mm512_add_ps(acc[r][v], add);
      _mm512_mask_storeu_ps(t.c + r * t.ldc + v * kFp32Lanes, mask, acc[r][v]);
    }
  }
}

/// gemm_tile for `rows` ≤ R and `vectors` ≤ NV.
template <typename Dot, bool TransA, index_t R, index_t NV = kFp32TileVectors>
void gemm_tile_of(index_t rows, index_t vectors, const GemmTile<typename Dot::Element>& t) {
  if constexpr (R > 0 && NV > 0) {
    if (rows < R) return gemm_tile_of<Dot, TransA, R - 1, NV>(rows, vectors, t);
    if (vectors < NV) return gemm_tile_of<Dot, TransA, R, NV - 1>(rows, vectors, t);
    gemm_tile<Dot, R, NV, TransA>(t);
  }
}

/// columns[j] = lane j of every t[i] (16 × 16 32-bit values transposed in registers).
HEED_FP32_TARGET inline void transpose_16x16(__m512 t[16], __m512 columns[16]) {
  __m512 u[16];
  for (index_t i = 0; i < 16; i += 2) {
    u[i] = _mm512_maskz_unpacklo_ps(kAllLanes, t[i], t[i + 1]);
    u[i + 1] = _mm512_maskz_unpackhi_ps(kAllLanes, t[i], t[i + 1]);
  }
  // t[4i + j]'s 128-bit block L: rows 4i .. 4i + 3 at column 4L + j.
  for (index_t i = 0; i < 16; i += 4) {
    t[i] = _mm512_maskz_shuffle_ps(kAllLanes, u[i], u[i + 2], 0x44);
    t[i + 1] = _mm512_maskz_shuffle_ps(kAllLanes, u[i], u[i + 2], 0xEE);
    t[i + 2] = _mm512_maskz_shuffle_ps(kAllLanes, u[i + 1], u[i + 3], 0x44);
    t[i + 3] = _mm512_maskz_shuffle_ps(kAllLanes, u[i + 1], u[i + 3], 0xEE);
  }
  for (index_t j = 0; j < 4; ++j) {
    const __m512 x0 = _mm512_maskz_shuffle_f32x4(kAllLanes, t[j], t[4 + j], 0x88),
                 x1 = _mm512_maskz_shuffle_f32x4(kAllLanes, t[j], t[4 + j], 0xDD);
    const __m512 y0 = _mm512_maskz_shuffle_f32x4(kAllLanes, t[8 + j], t[12 + j], 0x88),
                 y1 = _mm512_maskz_shuffle_f32x4(kAllLanes, t[8 + j], t[12 + j], 0xDD);
    columns[j] = _mm512_maskz_shuffle_f32x4(kAllLanes, x0, y0, 0x88);
    columns[4 + j] = _mm512_maskz_shuffle_f32x4(kAllLanes, x1, y1, 0x88);
    columns[8 + j] = _mm512_maskz_shuffle_f32x4(kAllLanes, x0, y0, 0xDD);
    columns[12 + j] = _mm512_maskz_shuffle_f32x4(kAllLanes, x1, y1, 0xDD);
  }
}

/// out[kk][0 .. 16) = w[j · ld + kk] for the j < rows (zeros past them) and kk < depth
/// (≤ 16): 16 rows of b (16 columns of op(b)) transposed in registers, stored at stride
/// kFp32Panel.
HEED_FP32_TARGET inline void fp32_store_transposed(const float* w, index_t ld, index_t rows, index_t depth,
                                                   float* out) {
  __m512 t[16];
  const __mmask16 mask = first_lanes(depth);
  for (index_t j = 0; j < 16; ++j) t[j] = j < rows ? _mm512_maskz_loadu_ps(mask, w + j * ld) : _mm512_setzero_ps();
  __m512 columns[16];
  transpose_16x16(t, columns);
  for (index_t kk = 0; kk < depth; ++kk) _mm512_store_ps(out + kk * kFp32Panel, columns[kk]);
}

constexpr index_t kFp32PrefetchRows = 8;

/// copy[t · 6 · kc + kk · 6 + r] = a[kk · lda + 6t + r] for kk < kc and 6t + r < rows:
/// columns of a (rows of op(a)) in tiles of 6, each k's 6 values side by side.
HEED_FP32_TARGET inline void fp32_copy_rows(const float* a, index_t lda, index_t rows, index_t kc, float* copy) {
  const index_t whole = rows / kFp32TileRows * kFp32TileRows;
  for (index_t kk = 0; kk < kc; ++kk) {
    const float* row = a + kk * lda;
    // Rows lda floats apart: the hardware's prefetchers do not follow such strides.
    if (kk + kFp32PrefetchRows < kc)
      for (index_t r = 0; r < rows; r += kFp32Lanes) __builtin_prefetch(row + kFp32PrefetchRows * lda + r);
    for (index_t first = 0; first < whole; first += kFp32TileRows) {
      float* out = copy + first * kc + kk * kFp32TileRows;
      for (index_t r = 0; r < kFp32TileRows; ++r) out[r] = row[first + r];  // moves, not a call
    }
    for (index_t r = whole; r < rows; ++r) copy[whole * kc + kk * kFp32TileRows + r - whole] = row[r];
  }
}

/// Packs op(b)[p0 : p0 + kc][j0 : j0 + cols] (cols ≤ kFp32Panel) into a panel: kc rows
/// of 64 floats, zeros past cols in its last vector; vectors wholly past cols are not
/// written (the tiles read ⌈cols / 16⌉: a 16-column product packs a quarter). b is
/// (k, n) at ldb, or (n, k) when trans_b.
HEED_FP32_TARGET inline void fp32_pack_panel(const float* b, index_t ldb, bool trans_b, index_t p0, index_t kc,
                                             index_t j0, index_t cols, float* panel) {
  if (!trans_b) {
    for (index_t kk = 0; kk < kc; ++kk) {
      const float* row = b + (p0 + kk) * ldb + j0;
      float* out = panel + kk * kFp32Panel;
      for (index_t v = 0; v * kFp32Lanes < cols; ++v)
        _mm512_store_ps(out + v * kFp32Lanes,
                        _mm512_maskz_loadu_ps(first_lanes(cols - v * kFp32Lanes), row + v * kFp32Lanes));
    }
    return;
  }
  for (index_t v = 0; v * kFp32Lanes < cols; ++v) {
    const index_t rows = std::min(kFp32Lanes, cols - v * kFp32Lanes);
    for (index_t kk = 0; kk < kc; kk += 16)
      fp32_store_transposed(b + (j0 + v * kFp32Lanes) * ldb + p0 + kk, ldb, rows, std::min<index_t>(16, kc - kk),
                            panel + kk * kFp32Panel + v * kFp32Lanes);
  }
}
#endif

/// How fp32_gemm and bf16_gemm share a product of m × n × k among the threads: tasks of
/// a block of kFp32Width columns × a group of rows, as many groups as it takes to give
/// each thread a task (one group when the product stays on the calling thread: below
/// kFp32ParallelWork multiply-adds). A task packs its own columns of op(b), block by
/// block of k: blocks of columns are packed once, and with few of them (n ≤ 512: the
/// Transformer's 128-wide products) each group of rows packs op(b) again, which costs
/// k · n against its rows · k · n multiply-adds. The split changes no bits (every element
/// is one chain), so it may follow the threads.
struct GemmTasks {
  /// A task's columns [j0, j0 + nc) and rows [i_begin, i_end) (empty past the last row).
  struct Range {
    index_t j0, nc, i_begin, i_end;
  };
  index_t m, n, work, column_blocks, group_rows, count;

  GemmTasks(index_t rows, index_t cols, index_t k)
      : m(rows), n(cols), work(rows * cols * k < kFp32ParallelWork ? 0 : rows * cols * k) {
    column_blocks = (n + kFp32Width - 1) / kFp32Width;
    const index_t tiles = (m + kFp32TileRows - 1) / kFp32TileRows, threads = work == 0 ? 1 : parallel_threads();
    const index_t row_groups = std::min(tiles, std::max<index_t>(1, (threads + column_blocks - 1) / column_blocks));
    group_rows = (tiles + row_groups - 1) / row_groups * kFp32TileRows;
    count = row_groups * column_blocks;
  }
  Range operator[](index_t task) const {
    const index_t j0 = (task % column_blocks) * kFp32Width, i_begin = (task / column_blocks) * group_rows;
    return {j0, std::min(kFp32Width, n - j0), i_begin, std::min(m, i_begin + group_rows)};
  }
};

/// c (m × n at ldc) = op(a) · op(b), + bias (n values, one per column; may be null), or
/// with `accumulate` c + that; op(a) m × k (a (m, k) at lda, or (k, m) when trans_a),
/// op(b) k × n (b (k, n) at ldb, or (n, k) when trans_b). Needs cpu_features().avx512
/// (the caller checks).
inline void fp32_gemm(const float* a, index_t lda, bool trans_a, const float* b, index_t ldb, bool trans_b, float* c,
                      index_t ldc, index_t m, index_t n, index_t k, bool accumulate = false,
                      const float* bias = nullptr) {
#if HEED_X86_64
  if (m <= 0 || n <= 0) return;
  if (k == 0) {
    for (index_t i = 0; i < m; ++i)
      for (index_t j = 0; j < n; ++j) c[i * ldc + j] = (accumulate ? c[i * ldc + j] : 0.0f) + (bias ? bias[j] : 0.0f);
    return;
  }
  const GemmTasks tasks(m, n, k);
  // b's rows are op(b)'s: with few rows of c, read in place (packing them would cost
  // as much as the product), masked at the last column.
  const bool pack_b = trans_b || m > kFp32InPlaceRows;
  // a transposed: with many rows of c, its columns (op(a)'s rows) copied tile by tile
  // (fp32_copy_rows); read in place, every k of a tile is another page (a (1536, 9807):
  // 39 KiB apart), for each tile again. With few, they are read in place: the copy
  // costs more than it saves (32×32×640 a·b, a transposed: 129 GFLOP/s read in place,
  // 101 copied).
  const bool copy_a = trans_a && m > kFp32InPlaceRows;
  const index_t depth = std::min(k, kFp32Depth), width = std::min(n, kFp32Width);
  const index_t block_floats = (width + kFp32Panel - 1) / kFp32Panel * depth * kFp32Panel;
  parallel_tasks(tasks.count, tasks.work, [&](index_t task) {
    const auto [j0, nc, i_begin, i_end] = tasks[task];
    if (i_begin >= i_end) return;
    const index_t panels = (nc + kFp32Panel - 1) / kFp32Panel;
    // Idle buffers of the buffer cache (64-byte aligned storage).
    Tensor<float> packed_b;
    if (pack_b) packed_b = make_tensor<float>(Shape{block_floats}, Device::cpu(), "fp32_gemm op(b)");
    Tensor<float> packed_a;
    if (copy_a) packed_a = make_tensor<float>(Shape{kFp32TaskRows * depth}, Device::cpu(), "fp32_gemm op(a)");
    float* const packed = pack_b ? packed_b.data() : nullptr;
    for (index_t p0 = 0; p0 < k; p0 += kFp32Depth) {
      const index_t kc = std::min(kFp32Depth, k - p0);
      const bool load_c = accumulate || p0 > 0, last_block = p0 + kc == k;
      for (index_t p = 0; pack_b && p < panels; ++p) {
        const index_t first = j0 + p * kFp32Panel;
        fp32_pack_panel(b, ldb, trans_b, p0, kc, first, std::min(kFp32Panel, n - first), packed + p * kc * kFp32Panel);
      }
      for (index_t i_first = i_begin; i_first < i_end; i_first += kFp32TaskRows) {
        const index_t i_last = std::min(i_end, i_first + kFp32TaskRows);
        const float* a_rows = a + p0 * lda + i_first;
        index_t a_ld = lda;
        if (copy_a) {
          fp32_copy_rows(a + p0 * lda + i_first, lda, i_last - i_first, kc, packed_a.data());
          a_rows = packed_a.data();
          a_ld = kFp32TileRows;
        }
        for (index_t i = i_first; i < i_last; i += kFp32TileRows) {
          const index_t rows = std::min(kFp32TileRows, i_last - i);
          const float* a_tile = !trans_a ? a + i * lda + p0
                                : copy_a ? a_rows + (i - i_first) * kc
                                         : a_rows + i - i_first;
          for (index_t p = 0; p < panels; ++p) {
            const index_t j = j0 + p * kFp32Panel, cols = std::min(kFp32Panel, n - j);
            const index_t vectors = (cols + kFp32Lanes - 1) / kFp32Lanes;
            const Fp32Tile tile{a_tile,
                                trans_a ? a_ld : lda,
                                pack_b ? packed + p * kc * kFp32Panel : b + p0 * ldb + j,
                                pack_b ? kFp32Panel : ldb,
                                kc,
                                c + i * ldc + j,
                                ldc,
                                first_lanes(cols - (vectors - 1) * kFp32Lanes),
                                load_c,
                                last_block && bias ? bias + j : nullptr};
            if (trans_a)
              gemm_tile_of<Fp32Dot, true, kFp32TileRows>(rows, vectors, tile);
            else
              gemm_tile_of<Fp32Dot, false, kFp32TileRows>(rows, vectors, tile);
          }
        }
      }
    }
  });
#else
  (void)a, (void)lda, (void)trans_a, (void)b, (void)ldb, (void)trans_b, (void)c, (void)ldc, (void)m, (void)n, (void)k,
      (void)accumulate, (void)bias;
  throw ValueError("fp32_gemm: heed's AVX-512 GEMM is not built for this CPU");
#endif
}

}  // namespace heed::detail

#undef HEED_FP32_TARGET
#undef HEED_FP32_UNROLL
#undef HEED_FP32_PRAGMA

#include "heed/detail/header_end.hpp"
