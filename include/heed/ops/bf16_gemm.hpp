// heed/ops/bf16_gemm.hpp — c = op(a) · op(b) with bf16 operands and fp32 sums: the
// products of mixed-precision training (AutocastGuard, heed/ops/autocast.hpp).
//
//   heed::detail::bf16_gemm(a, trans_a, b, trans_b, c, m, n, k);  // row-major floats, as gemm
//
// Both operands are rounded to bf16 (to nearest, even) and packed for
// quantized_gemm.hpp's bf16 tiles: op(a)'s rows as x's rows (k in pairs), op(b)'s
// columns as a weight's rows (blocks of 16 columns, a 64-byte vector per pair of k).
// Packing reads either layout of either operand (the backward's dY·W and dYᵀ·X take
// them transposed) and writes the packed form directly: no transposed copy in fp32.
// Each element of c is one sum over k from 0 in vdpbf16ps's order: the bits depend on
// neither the threads nor the tiling, and the portable path (no AVX512_BF16, or forced)
// gives the same bits, but where the instruction flushes denormals to zero.
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

/// Pairs of k for up to 16 rows (or columns) at once, from two runs of floats: pair i
/// (i < count) = bf16(lo[i]) | bf16(hi[i]) << 16 (hi null: 0), stored at out + i · stride.
inline void store_bf16_pairs_portable(const float* lo, const float* hi, index_t count, unsigned char* out,
                                      index_t stride) {
  for (index_t i = 0; i < count; ++i) {
    const std::uint32_t pair =
        std::uint32_t(float_to_bf16_bits(lo[i])) | (hi ? std::uint32_t(float_to_bf16_bits(hi[i])) << 16 : 0u);
    std::memcpy(out + i * stride, &pair, 4);
  }
}

/// Pairs of k along one row: values [0, count) (count ≤ 16) as bf16, pair p (values 2p
/// and 2p + 1; past count 0) stored at out + p · stride.
inline void store_bf16_row_pairs_portable(const float* values, index_t count, unsigned char* out, index_t stride) {
  unsigned char bytes[32] = {};
  bf16_row_portable(values, count, bytes);
  for (index_t p = 0; p < (count + 1) / 2; ++p) std::memcpy(out + p * stride, bytes + 4 * p, 4);
}

#if HEED_X86_64
// The same bytes.
HEED_BF16_GEMM_TARGET inline void store_bf16_pairs_avx512(const float* lo, const float* hi, index_t count,
                                                          unsigned char* out, index_t stride) {
  const __mmask16 mask = first_lanes(count);
  const __m512i low = bf16_bits_avx512(_mm512_maskz_loadu_epi32(mask, lo));
  const __m512i high = hi ? bf16_bits_avx512(_mm512_maskz_loadu_epi32(mask, hi)) : _mm512_setzero_si512();
  const __m512i pairs = _mm512_or_si512(low, _mm512_maskz_slli_epi32(kAllLanes, high, 16));
  if (stride == 4) return _mm512_mask_storeu_epi32(out, mask, pairs);
  // Rows apart: 16 stores (a scatter, vpscatterdd, took 1.2x as long here).
  alignas(64) std::uint32_t lanes[16];
  _mm512_store_si512(lanes, pairs);
  for (index_t i = 0; i < count; ++i) std::memcpy(out + i * stride, &lanes[i], 4);
}

HEED_BF16_GEMM_TARGET inline void store_bf16_row_pairs_avx512(const float* values, index_t count, unsigned char* out,
                                                              index_t stride) {
  const __m512i bits = bf16_bits_avx512(_mm512_maskz_loadu_epi32(first_lanes(count), values));
  const __m256i pairs = _mm512_maskz_cvtepi32_epi16(kAllLanes, bits);  // 16 bf16: 8 pairs
  const __m256i offsets =
      _mm256_mullo_epi32(_mm256_set_epi32(7, 6, 5, 4, 3, 2, 1, 0), _mm256_set1_epi32(static_cast<int>(stride)));
  _mm256_mask_i32scatter_epi32(out, static_cast<__mmask8>((1u << ((count + 1) / 2)) - 1u), offsets, pairs, 1);
}
#endif

inline void store_bf16_pairs(bool avx512, const float* lo, const float* hi, index_t count, unsigned char* out,
                             index_t stride) {
#if HEED_X86_64
  if (avx512) return store_bf16_pairs_avx512(lo, hi, count, out, stride);
#endif
  (void)avx512;
  store_bf16_pairs_portable(lo, hi, count, out, stride);
}

inline void store_bf16_row_pairs(bool avx512, const float* values, index_t count, unsigned char* out, index_t stride) {
#if HEED_X86_64
  if (avx512) return store_bf16_row_pairs_avx512(values, count, out, stride);
#endif
  (void)avx512;
  store_bf16_row_pairs_portable(values, count, out, stride);
}

/// Asks for the 16 floats kBf16PrefetchRows rows of `ld` floats past `at` (of `left`
/// rows from at on) to be brought into the cache: an operand read across its rows misses
/// the cache on every row, and the hardware's prefetchers do not follow such strides.
constexpr index_t kBf16PrefetchRows = 8;
inline void prefetch_rows_ahead(const float* at, index_t ld, index_t left) {
  if (left <= kBf16PrefetchRows + 1) return;
  __builtin_prefetch(at + kBf16PrefetchRows * ld);
  __builtin_prefetch(at + (kBf16PrefetchRows + 1) * ld);
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
  // Tasks of 64 rows of op(a) or a tile's 64 columns of op(b), so that an operand read
  // across its rows (a transposed, b not) is read 256 bytes of a row at a time.
  const index_t row_tasks = (m + tile_columns - 1) / tile_columns;
  const bool avx512 = features.avx512;
  parallel_tasks(row_tasks + tiles, work, [&](index_t task) {
    if (task < row_tasks) {
      const index_t first = task * tile_columns, count = std::min(tile_columns, m - first);
      if (!trans_a) {
        for (index_t i = first; i < first + count; ++i) {  // a's rows, as they lie
          unsigned char* row = xa + i * x_row;
          bf16_row(avx512, a + i * k, k, row);
          if (k % 2) std::memset(row + 2 * k, 0, 2);
        }
        return;
      }
      // a's rows 2g and 2g + 1 hold pair g of op(a)'s rows: 16 of those rows at a time,
      // whose packed rows stay in L1 while they fill (64 took 1.2-2x as long).
      for (index_t i = 0; i < count; i += kQuantLanes)
        for (index_t g = 0; g < k_groups; ++g) {
          const float* lo = a + 2 * g * m + first + i;
          prefetch_rows_ahead(lo, m, k - 2 * g);
          store_bf16_pairs(avx512, lo, 2 * g + 1 < k ? lo + m : nullptr, std::min(kQuantLanes, count - i),
                           xa + (first + i) * x_row + g * 4, x_row);
        }
      return;
    }
    const index_t tile = task - row_tasks, first = tile * tile_columns, count = std::min(tile_columns, n - first);
    unsigned char* const w = wb + tile * kQuantTileVectors * block_bytes;
    if (count < tile_columns)  // the padding stays zero
      std::memset(w, 0, static_cast<std::size_t>(kQuantTileVectors * block_bytes));
    if (trans_b) {  // b's rows are op(b)'s columns: each row's pairs go to its lane of every group
      for (index_t j = 0; j < count; ++j) {
        unsigned char* lane = w + (j / kQuantLanes) * block_bytes + (j % kQuantLanes) * 4;
        for (index_t g = 0; g < k_groups; g += 8)
          store_bf16_row_pairs(avx512, b + (first + j) * k + 2 * g, std::min<index_t>(16, k - 2 * g),
                               lane + g * kQuantGroupBytes, kQuantGroupBytes);
      }
      return;
    }
    for (index_t g = 0; g < k_groups; ++g)  // b's rows 2g and 2g + 1: a group's vector per 16 columns
      for (index_t j = 0; j < count; j += kQuantLanes) {
        const float* lo = b + 2 * g * n + first + j;
        prefetch_rows_ahead(lo, n, k - 2 * g);
        store_bf16_pairs(avx512, lo, 2 * g + 1 < k ? lo + n : nullptr, std::min(kQuantLanes, count - j),
                         w + (j / kQuantLanes) * block_bytes + g * kQuantGroupBytes, 4);
      }
  });

  QuantizedProduct p{xa, x_row, wb, k_groups, nullptr, nullptr, nullptr, bias, c, n, accumulate};
  const index_t panels = (m + kBf16PanelRows - 1) / kBf16PanelRows;
  const bool vector = features.avx512_bf16;
  parallel_tasks(panels * tiles, work, [&](index_t task) {
    const index_t first = (task % panels) * kBf16PanelRows;
    quantized_tile_rows(p, Precision::bf16, vector, first, std::min(kBf16PanelRows, m - first),
                        (task / panels) * kQuantTileVectors);
  });
}

}  // namespace heed::detail

#undef HEED_BF16_GEMM_TARGET

#include "heed/detail/header_end.hpp"
