// heed/ops/bf16_gemm.hpp — c = op(a) · op(b) with bf16 operands and fp32 sums: the
// products of mixed-precision training (AutocastGuard, heed/ops/autocast.hpp).
//
//   heed::detail::bf16_gemm(a, trans_a, b, trans_b, c, m, n, k);  // row-major floats, as gemm
//
// Both operands are rounded to bf16 (to nearest, even) and packed for
// quantized_gemm.hpp's bf16 tiles: op(a)'s rows as x's rows (k in pairs), op(b)'s
// columns as a weight's rows (blocks of 16 columns, a 64-byte vector per pair of k).
// Packing reads either layout of either operand 16 rows or columns at a time, so the
// backward's dY·W and dYᵀ·X cost no transposed copy in fp32. Each element of c is one
// sum over k from 0 in vdpbf16ps's order: the bits depend on neither the threads nor
// the tiling, and the portable path (no AVX512_BF16, or forced) gives the same bits,
// but where the instruction flushes denormals to zero.
#pragma once

#include "heed/detail/header_begin.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "heed/core/tensor.hpp"
#include "heed/detail/parallel.hpp"
#include "heed/ops/cpu_features.hpp"
#include "heed/ops/quantized_gemm.hpp"

#if HEED_X86_64
#define HEED_BF16_GEMM_TARGET __attribute__((target("avx512f,avx512bw,avx512vl")))
#endif

namespace heed::detail {

/// Rows of c per task (16 tiles of 6), with a tile's 64 columns.
constexpr index_t kBf16PanelRows = 16 * kQuantTileRows;
/// Products below this many multiply-adds run on the calling thread: a 128 × 128 × 64
/// one (attention's, per head) took 1.3× as long on 2 threads as on 1.
constexpr index_t kBf16ParallelWork = index_t(1) << 22;

/// Lane i (i < count) of out: the bf16 bits of lo[i] in its low half and of hi[i] (0
/// where hi is null) in its high half, i.e. one pair of k for 16 rows or columns; lanes
/// from count on are zero.
inline void bf16_pairs_portable(const float* lo, const float* hi, index_t count, std::uint32_t* out) {
  for (index_t i = 0; i < 16; ++i)
    out[i] = i >= count ? 0u
                        : std::uint32_t(float_to_bf16_bits(lo[i])) |
                              (hi ? std::uint32_t(float_to_bf16_bits(hi[i])) << 16 : 0u);
}

#if HEED_X86_64
HEED_BF16_GEMM_TARGET inline void bf16_pairs_avx512(const float* lo, const float* hi, index_t count,
                                                    std::uint32_t* out) {
  const __mmask16 mask = first_lanes(count);
  const __m512i low = bf16_bits_avx512(_mm512_maskz_loadu_epi32(mask, lo));
  const __m512i high = hi ? bf16_bits_avx512(_mm512_maskz_loadu_epi32(mask, hi)) : _mm512_setzero_si512();
  _mm512_storeu_si512(out, _mm512_maskz_mov_epi32(mask, _mm512_or_si512(low, _mm512_maskz_slli_epi32(kAllLanes, high, 16))));
}
#endif

inline void bf16_pairs(bool avx512, const float* lo, const float* hi, index_t count, std::uint32_t* out) {
#if HEED_X86_64
  if (avx512) return bf16_pairs_avx512(lo, hi, count, out);
#endif
  (void)avx512;
  bf16_pairs_portable(lo, hi, count, out);
}

/// The matrix M (rows × length) held in `src` row-major (M[i][j] = src[i · ld + j]) or,
/// `transposed`, column-major (src[j · ld + i]): its rows [first, first + count), count
/// ≤ 16, in bf16 pairs of j. `row_pair(i, g)` is where row first + i's pair g (4 bytes)
/// goes. Row-major rows convert whole; column-major ones a pair of j for all 16 rows at
/// once, from two contiguous runs of src.
template <typename Place>
void pack_bf16_rows(bool avx512, const float* src, bool transposed, index_t ld, index_t first, index_t count,
                    index_t length, Place&& row_pair) {
  const index_t pairs = (length + 1) / 2;
  if (transposed) {
    alignas(64) std::uint32_t lanes[16];
    for (index_t g = 0; g < pairs; ++g) {
      const float* lo = src + 2 * g * ld + first;
      bf16_pairs(avx512, lo, 2 * g + 1 < length ? lo + ld : nullptr, count, lanes);
      for (index_t i = 0; i < count; ++i) std::memcpy(row_pair(i, g), &lanes[i], 4);
    }
    return;
  }
  for (index_t i = 0; i < count; ++i) {
    const float* row = src + (first + i) * ld;
    for (index_t g = 0; g < pairs; g += 8) {  // 16 values of the row, 8 pairs, at a time
      const index_t here = std::min<index_t>(16, length - 2 * g);
      alignas(64) unsigned char bytes[32] = {};  // an odd length's last pair ends in a zero
      bf16_row(avx512, row + 2 * g, here, bytes);
      for (index_t p = 0; p < (here + 1) / 2; ++p) std::memcpy(row_pair(i, g + p), bytes + 4 * p, 4);
    }
  }
}

/// c = op(a) · op(b) (+ bias, n values, one per column), or with `accumulate` c += that;
/// c row-major (m × n), op(a) m × k (a stored (m, k), or (k, m) when trans_a), op(b)
/// k × n (b stored (k, n), or (n, k) when trans_b). Tasks of kBf16PanelRows rows × 64
/// columns are shared out among the threads.
inline void bf16_gemm(const float* a, bool trans_a, const float* b, bool trans_b, float* c, index_t m, index_t n,
                      index_t k, const float* bias = nullptr, bool accumulate = false) {
  if (m <= 0 || n <= 0) return;
  const index_t k_groups = (k + 1) / 2, x_row = k_groups * 4;
  const index_t tile_columns = kQuantTileVectors * kQuantLanes, tiles = (n + tile_columns - 1) / tile_columns;
  const index_t blocks = tiles * kQuantTileVectors, block_bytes = k_groups * kQuantGroupBytes;
  // op(a)'s rows, then op(b)'s blocks, in an idle buffer of the buffer cache.
  const index_t a_bytes = m * x_row, b_bytes = blocks * block_bytes;
  Tensor<float> buffer = make_tensor<float>(Shape{(a_bytes + b_bytes) / 4}, Device::cpu(), "bf16_gemm operands");
  auto* const xa = reinterpret_cast<unsigned char*>(buffer.data());
  unsigned char* const wb = xa + a_bytes;
  const CpuFeatures features = cpu_features();
  const index_t work = m * n * k < kBf16ParallelWork ? 0 : m * n * k;
  const index_t row_groups = (m + 15) / 16, column_groups = blocks;  // 16 rows or columns each
  parallel_tasks(row_groups + column_groups, work, [&](index_t task) {
    if (task < row_groups) {
      const index_t first = task * 16, count = std::min<index_t>(16, m - first);
      if (trans_a) {
        pack_bf16_rows(features.avx512, a, true, m, first, count, k,
                       [&](index_t i, index_t g) { return xa + (first + i) * x_row + g * 4; });
        return;
      }
      for (index_t i = first; i < first + count; ++i) {  // a's rows, as they lie
        unsigned char* row = xa + i * x_row;
        bf16_row(features.avx512, a + i * k, k, row);
        if (k % 2) std::memset(row + 2 * k, 0, 2);
      }
      return;
    }
    const index_t block = task - row_groups, first = block * kQuantLanes;
    unsigned char* const w = wb + block * block_bytes;
    if (first >= n) {  // a tile's padding
      std::memset(w, 0, static_cast<std::size_t>(block_bytes));
      return;
    }
    // op(b)'s columns are the rows of b when trans_b, else b's columns.
    const index_t count = std::min<index_t>(16, n - first);
    if (count < 16) std::memset(w, 0, static_cast<std::size_t>(block_bytes));
    pack_bf16_rows(features.avx512, b, !trans_b, trans_b ? k : n, first, count, k,
                   [&](index_t i, index_t g) { return w + g * kQuantGroupBytes + i * 4; });
  });

  QuantizedProduct p{xa, x_row, wb, k_groups, nullptr, nullptr, nullptr, bias, c, n, accumulate};
  const index_t panels = (m + kBf16PanelRows - 1) / kBf16PanelRows;
  const bool vector = features.avx512_bf16;
  parallel_tasks(panels * tiles, work, [&](index_t task) {
    const index_t first = (task % panels) * kBf16PanelRows, rows = std::min(kBf16PanelRows, m - first);
    const index_t block = (task / panels) * kQuantTileVectors;
#if HEED_X86_64
    if (vector) {
      for (index_t row = first; row < first + rows; row += kQuantTileRows)
        kQuantizedTiles<Bf16Avx512>[std::min(kQuantTileRows, first + rows - row)](p, row, block);
      return;
    }
#endif
    (void)vector;
    QuantizedProduct panel = p;
    panel.x += first * x_row;
    panel.out += first * n;
    for (index_t b = block; b < block + kQuantTileVectors && b * kQuantLanes < n; ++b)
      bf16_block_portable(panel, rows, b);
  });
}

}  // namespace heed::detail

#undef HEED_BF16_GEMM_TARGET

#include "heed/detail/header_end.hpp"
