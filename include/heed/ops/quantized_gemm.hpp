// heed/ops/quantized_gemm.hpp — x Wᵀ + b with W stored in bf16 or int8, for inference.
//
//   heed::detail::LowPrecisionWeight w(weight.data(), out_features, in_features, heed::Precision::int8);
//   w.apply(x, rows, bias, out);   // float in, float out
//
// Decoding's products are bound by the bytes of their weights: bf16 halves them, int8
// quarters them, and the CPU's dot-product instructions do 2 (vdpbf16ps) or 4
// (vpdpbusd) multiply-adds per fp32 lane. PackedWeightsGuard(Precision) makes linear()
// use these (ops/packed_gemm.hpp); a weight is converted once per guard.
//
// int8 (CTranslate2's and PyTorch's dynamic quantisation): each weight row n is scaled by
// 127 / max|W[n]| and rounded; each row of x likewise, when it comes (its scale found on
// the fly). vpdpbusd multiplies unsigned by signed bytes, so x's bytes are shifted by
// +128 and 128 · Σ_k Wq[n][k] (kept per row) taken off the int32 sum, which is exact.
// Then y = float(sum) · (sx · sw[n]) + b[n], one fused multiply-add: every path, the
// portable one included, gives the same bits. A row of x holding a NaN or an infinity
// gives NaN, as fp32's product would give NaN or an infinity; an all-zero row gives b.
// A weight must be finite.
//
// bf16: W and x rounded to bf16 (to nearest, even); the products and sums are fp32, in
// vdpbf16ps's order: lane n adds x[k+1]·W[n][k+1], then x[k]·W[n][k], for k = 0, 2, ...
// The portable path computes that order with std::fma (the products of two bf16 are
// exact in fp32); the instruction flushes denormals, the portable path does not.
//
// Layout: columns (output features) in blocks of 16 (one vector of fp32 or int32
// results), k in groups of G (4 int8 or 2 bf16: one 32-bit lane), a block's group a
// 64-byte vector; blocks padded to a multiple of 4 (a tile's 64 columns) with zeros.
// A tile is up to 6 rows × 4 vectors: 24 accumulators. Each output element is one sum
// over k in order from 0, so the bits depend on neither the tiling nor the threads
// (tiles of 64 columns are shared out).
#pragma once

#include "heed/detail/header_begin.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "heed/core/tensor.hpp"
#include "heed/detail/parallel.hpp"
#include "heed/ops/cpu_features.hpp"
#include "heed/ops/precision.hpp"

#if HEED_X86_64
#include <immintrin.h>
#define HEED_QUANT_INLINE __attribute__((always_inline)) inline
#define HEED_TARGET_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl")))
#define HEED_TARGET_AVX512_VNNI __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni")))
#define HEED_TARGET_AVX512_BF16 __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))
#define HEED_TARGET_AVX512_LOW_PRECISION __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx512bf16")))
#endif

// GCC keeps the tiles' arrays of accumulators in registers only where their loops are
// unrolled whole, which it does not do unasked here (it spilled all 24 each k group).
#if defined(__clang__) || !defined(__GNUC__)
#define HEED_QUANT_UNROLL
#else
#define HEED_QUANT_PRAGMA(x) _Pragma(#x)
#define HEED_QUANT_UNROLL HEED_QUANT_PRAGMA(GCC unroll 8)
#endif

namespace heed::detail {

constexpr index_t kQuantLanes = 16;       // output features per vector
constexpr index_t kQuantTileVectors = 4;  // vectors of columns per tile
constexpr index_t kQuantTileRows = 6;     // rows of x per tile
constexpr index_t kQuantGroupBytes = 64;  // one block's k group: 16 lanes × 4 bytes
/// int8: the longest row whose int32 sum cannot overflow (255 · 127 per product).
constexpr index_t kMaxInt8InFeatures = 65536;

/// fp32 → bf16, rounded to nearest, ties to even; a NaN stays a quiet NaN.
inline std::uint16_t float_to_bf16_bits(float x) {
  std::uint32_t bits;
  std::memcpy(&bits, &x, 4);
  if ((bits & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<std::uint16_t>((bits >> 16) | 0x40u);
  bits += 0x7FFFu + ((bits >> 16) & 1u);
  return static_cast<std::uint16_t>(bits >> 16);
}

inline float bf16_bits_to_float(std::uint16_t h) {
  const std::uint32_t bits = std::uint32_t(h) << 16;
  float x;
  std::memcpy(&x, &bits, 4);
  return x;
}

/// x's row scaled by 127 / max|row|, rounded, clamped to ±127 and shifted by +128 into
/// q; returns its scale max|row| / 127: NaN when the row is not finite (its outputs are
/// NaN), 0 when it is all zeros (its outputs are the bias). q holds 128s past n.
inline float int8_row_portable(const float* row, index_t n, unsigned char* q) {
  float max_abs = 0;
  bool finite = true;
  for (index_t k = 0; k < n; ++k) {
    max_abs = std::max(max_abs, std::fabs(row[k]));
    finite = finite && std::isfinite(row[k]);
  }
  if (!finite) return std::numeric_limits<float>::quiet_NaN();
  if (max_abs == 0) return 0.0f;
  const float inverse = 127.0f / max_abs;
  for (index_t k = 0; k < n; ++k)
    q[k] = static_cast<unsigned char>(std::clamp(std::nearbyint(row[k] * inverse), -127.0f, 127.0f) + 128.0f);
  return max_abs / 127.0f;
}

/// x's row as bf16 (float_to_bf16_bits) into out.
inline void bf16_row_portable(const float* row, index_t n, unsigned char* out) {
  for (index_t k = 0; k < n; ++k) {
    const std::uint16_t h = float_to_bf16_bits(row[k]);
    std::memcpy(out + 2 * k, &h, 2);
  }
}

#if HEED_X86_64
// The kernels use the zero-masked forms of AVX-512's unmasked intrinsics (with every
// lane on: the same instruction) where GCC 12's own unmasked ones, built on
// _mm512_undefined_*, trip -Wmaybe-uninitialized (its PR 105593, fixed in GCC 13).
constexpr __mmask16 kAllLanes = 0xFFFF;

inline __mmask16 first_lanes(index_t count) {
  return count >= 16 ? __mmask16(0xFFFF) : static_cast<__mmask16>((1u << count) - 1u);
}

/// int8_row_portable's values, 16 at a time (the same rounding: the current mode's).
HEED_TARGET_AVX512 inline float int8_row_avx512(const float* row, index_t n, unsigned char* q) {
  const __m512i exponent = _mm512_set1_epi32(0x7F800000), magnitude = _mm512_set1_epi32(0x7FFFFFFF);
  __m512i max_bits = _mm512_setzero_si512();  // of non-negative floats: ordered as integers
  __mmask16 not_finite = 0;
  for (index_t k = 0; k < n; k += 16) {
    const __m512i bits = _mm512_maskz_loadu_epi32(first_lanes(n - k), row + k);
    not_finite |= _mm512_cmpeq_epi32_mask(_mm512_and_si512(bits, exponent), exponent);
    max_bits = _mm512_maskz_max_epu32(kAllLanes, max_bits, _mm512_and_si512(bits, magnitude));
  }
  if (not_finite) return std::numeric_limits<float>::quiet_NaN();
  alignas(64) std::uint32_t lanes[16];
  _mm512_store_si512(lanes, max_bits);
  const std::uint32_t largest = *std::max_element(lanes, lanes + 16);
  float max_abs;
  std::memcpy(&max_abs, &largest, 4);
  if (max_abs == 0) return 0.0f;
  const __m512 inverse = _mm512_set1_ps(127.0f / max_abs);
  const __m512i low = _mm512_set1_epi32(-127), high = _mm512_set1_epi32(127), shift = _mm512_set1_epi32(128);
  for (index_t k = 0; k < n; k += 16) {
    const __mmask16 mask = first_lanes(n - k);
    const __m512i rounded =
        _mm512_maskz_cvtps_epi32(kAllLanes, _mm512_mul_ps(_mm512_maskz_loadu_ps(mask, row + k), inverse));
    const __m512i clamped = _mm512_maskz_min_epi32(kAllLanes, _mm512_maskz_max_epi32(kAllLanes, rounded, low), high);
    _mm512_mask_cvtepi32_storeu_epi8(q + k, mask, _mm512_add_epi32(clamped, shift));
  }
  return max_abs / 127.0f;
}

/// float_to_bf16_bits of 16 floats' bits, each into the low half of its 32-bit lane.
HEED_TARGET_AVX512 HEED_QUANT_INLINE __m512i bf16_bits_avx512(__m512i bits) {
  const __m512i magnitude = _mm512_set1_epi32(0x7FFFFFFF), infinity = _mm512_set1_epi32(0x7F800000),
                half = _mm512_set1_epi32(0x7FFF), one = _mm512_set1_epi32(1), quiet = _mm512_set1_epi32(0x40);
  const __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(bits, magnitude), infinity);
  const __m512i even = _mm512_and_si512(_mm512_maskz_srli_epi32(kAllLanes, bits, 16), one);
  const __m512i rounded = _mm512_maskz_srli_epi32(kAllLanes, _mm512_add_epi32(bits, _mm512_add_epi32(half, even)), 16);
  const __m512i kept = _mm512_or_si512(_mm512_maskz_srli_epi32(kAllLanes, bits, 16), quiet);
  return _mm512_mask_mov_epi32(rounded, nan, kept);
}

/// bf16_row_portable's bits, 16 at a time.
HEED_TARGET_AVX512 inline void bf16_row_avx512(const float* row, index_t n, unsigned char* out) {
  for (index_t k = 0; k < n; k += 16) {
    const __mmask16 mask = first_lanes(n - k);
    _mm512_mask_cvtepi32_storeu_epi16(out + 2 * k, mask, bf16_bits_avx512(_mm512_maskz_loadu_epi32(mask, row + k)));
  }
}
#endif

/// A row converted by the AVX-512 functions where `avx512`, else by the portable ones:
/// the same bytes either way.
inline float int8_row(bool avx512, const float* row, index_t n, unsigned char* q) {
#if HEED_X86_64
  if (avx512) return int8_row_avx512(row, n, q);
#endif
  (void)avx512;
  return int8_row_portable(row, n, q);
}

inline void bf16_row(bool avx512, const float* row, index_t n, unsigned char* out) {
#if HEED_X86_64
  if (avx512) return bf16_row_avx512(row, n, out);
#endif
  (void)avx512;
  bf16_row_portable(row, n, out);
}

/// The arguments of one product's tiles: x's packed rows, the weight's blocks and what
/// the epilogue needs.
struct QuantizedProduct {
  const unsigned char* x;  // rows × x_row bytes: int8 + 128 (uint8), or bf16
  index_t x_row;           // bytes per row of x: k_groups × 4
  const unsigned char* w;  // the weight's blocks, k_groups × 64 bytes each
  index_t k_groups;
  const float* x_scale;              // int8: per row of x
  const float* w_scale;              // int8: per output feature (padded)
  const std::int32_t* compensation;  // int8: 128 · Σ_k Wq[n][k] (padded)
  const float* bias;                 // null: none
  float* out;                        // rows × out_features
  index_t out_features;
};

#if HEED_X86_64
// What the tile below does with each precision's accumulators: start them, add a k
// group's products, and write a vector of results (mask: its valid columns).
struct Int8Vnni {
  using Acc = __m512i;
  HEED_TARGET_AVX512_VNNI HEED_QUANT_INLINE static Acc zero() { return _mm512_setzero_si512(); }
  HEED_TARGET_AVX512_VNNI HEED_QUANT_INLINE static Acc add(Acc acc, __m512i x, __m512i w) {
    return _mm512_dpbusd_epi32(acc, x, w);
  }
  // y = float(Σ − 128·Σ_k Wq) · (sx · sw) + b, one fused multiply-add.
  HEED_TARGET_AVX512_VNNI HEED_QUANT_INLINE static void store(const Acc& acc, const QuantizedProduct& p, index_t row,
                                                              index_t n, __mmask16 mask) {
    const __m512 sum =
        _mm512_maskz_cvtepi32_ps(kAllLanes, _mm512_sub_epi32(acc, _mm512_loadu_si512(p.compensation + n)));
    const __m512 scale = _mm512_mul_ps(_mm512_set1_ps(p.x_scale[row]), _mm512_loadu_ps(p.w_scale + n));
    const __m512 bias = p.bias ? _mm512_maskz_loadu_ps(mask, p.bias + n) : _mm512_setzero_ps();
    _mm512_mask_storeu_ps(p.out + row * p.out_features + n, mask, _mm512_fmadd_ps(sum, scale, bias));
  }
};

struct Bf16Avx512 {
  using Acc = __m512;
  HEED_TARGET_AVX512_BF16 HEED_QUANT_INLINE static Acc zero() { return _mm512_setzero_ps(); }
  HEED_TARGET_AVX512_BF16 HEED_QUANT_INLINE static Acc add(Acc acc, __m512i x, __m512i w) {
    return _mm512_dpbf16_ps(acc, (__m512bh)x, (__m512bh)w);
  }
  HEED_TARGET_AVX512_BF16 HEED_QUANT_INLINE static void store(const Acc& acc, const QuantizedProduct& p, index_t row,
                                                              index_t n, __mmask16 mask) {
    const __m512 y = p.bias ? _mm512_add_ps(acc, _mm512_maskz_loadu_ps(mask, p.bias + n)) : acc;
    _mm512_mask_storeu_ps(p.out + row * p.out_features + n, mask, y);
  }
};

/// Rows [row, row + R) × the 64 columns of blocks [block, block + 4). Compiled for both
/// instruction sets; each precision's tile runs only where the CPU has its own.
template <typename Dot, int R>
HEED_TARGET_AVX512_LOW_PRECISION void quantized_tile(const QuantizedProduct& p, index_t row, index_t block) {
  constexpr int C = static_cast<int>(kQuantTileVectors);
  typename Dot::Acc acc[R][C];
  HEED_QUANT_UNROLL
  for (int r = 0; r < R; ++r) {
    HEED_QUANT_UNROLL
    for (int c = 0; c < C; ++c) acc[r][c] = Dot::zero();
  }
  const index_t block_bytes = p.k_groups * kQuantGroupBytes;
  const unsigned char* w = p.w + block * block_bytes;
  const unsigned char* x = p.x + row * p.x_row;
  for (index_t g = 0; g < p.k_groups; ++g) {
    __m512i wv[C];
    HEED_QUANT_UNROLL
    for (int c = 0; c < C; ++c) wv[c] = _mm512_loadu_si512(w + c * block_bytes + g * kQuantGroupBytes);
    HEED_QUANT_UNROLL
    for (int r = 0; r < R; ++r) {
      std::int32_t lane;  // x's k group: 4 bytes or 2 bf16, broadcast
      std::memcpy(&lane, x + r * p.x_row + g * 4, 4);
      const __m512i xv = _mm512_set1_epi32(lane);
      HEED_QUANT_UNROLL
      for (int c = 0; c < C; ++c) acc[r][c] = Dot::add(acc[r][c], xv, wv[c]);
    }
  }
  HEED_QUANT_UNROLL
  for (int c = 0; c < C; ++c) {
    const index_t n = (block + c) * kQuantLanes;
    const __mmask16 mask = n < p.out_features ? first_lanes(p.out_features - n) : 0;
    if (!mask) break;
    HEED_QUANT_UNROLL
    for (int r = 0; r < R; ++r) Dot::store(acc[r][c], p, row + r, n, mask);
  }
}

/// A precision's tiles by their rows, 1 to kQuantTileRows.
using QuantizedTile = void (*)(const QuantizedProduct&, index_t row, index_t block);
template <typename Dot>
constexpr QuantizedTile kQuantizedTiles[kQuantTileRows + 1] = {nullptr,
                                                               &quantized_tile<Dot, 1>,
                                                               &quantized_tile<Dot, 2>,
                                                               &quantized_tile<Dot, 3>,
                                                               &quantized_tile<Dot, 4>,
                                                               &quantized_tile<Dot, 5>,
                                                               &quantized_tile<Dot, 6>};
static_assert(kQuantTileRows == 6, "kQuantizedTiles lists a tile for each row count up to kQuantTileRows");
#endif

/// One vector of columns (block `block`), every row, without special instructions: the
/// same sums in the same order as the vector kernels.
inline void int8_block_portable(const QuantizedProduct& p, index_t rows, index_t block) {
  const auto* w = reinterpret_cast<const std::int8_t*>(p.w + block * p.k_groups * kQuantGroupBytes);
  const index_t first = block * kQuantLanes, count = std::min(kQuantLanes, p.out_features - first);
  for (index_t r = 0; r < rows; ++r) {
    std::int32_t acc[kQuantLanes] = {};
    const unsigned char* x = p.x + r * p.x_row;
    for (index_t g = 0; g < p.k_groups; ++g)
      for (index_t lane = 0; lane < kQuantLanes; ++lane)
        for (index_t j = 0; j < 4; ++j)
          acc[lane] += std::int32_t(x[g * 4 + j]) * std::int32_t(w[(g * kQuantLanes + lane) * 4 + j]);
    for (index_t lane = 0; lane < count; ++lane) {
      const index_t n = first + lane;
      const float sum = static_cast<float>(acc[lane] - p.compensation[n]);
      p.out[r * p.out_features + n] = std::fma(sum, p.x_scale[r] * p.w_scale[n], p.bias ? p.bias[n] : 0.0f);
    }
  }
}

inline void bf16_block_portable(const QuantizedProduct& p, index_t rows, index_t block) {
  const unsigned char* w = p.w + block * p.k_groups * kQuantGroupBytes;
  const index_t first = block * kQuantLanes, count = std::min(kQuantLanes, p.out_features - first);
  auto value = [](const unsigned char* at) {
    std::uint16_t h;
    std::memcpy(&h, at, 2);
    return bf16_bits_to_float(h);
  };
  for (index_t r = 0; r < rows; ++r) {
    float acc[kQuantLanes] = {};
    const unsigned char* x = p.x + r * p.x_row;
    for (index_t g = 0; g < p.k_groups; ++g)
      for (index_t lane = 0; lane < kQuantLanes; ++lane) {
        const unsigned char* wl = w + (g * kQuantLanes + lane) * 4;
        acc[lane] = std::fma(value(x + g * 4 + 2), value(wl + 2), acc[lane]);
        acc[lane] = std::fma(value(x + g * 4), value(wl), acc[lane]);
      }
    for (index_t lane = 0; lane < count; ++lane) {
      const index_t n = first + lane;
      p.out[r * p.out_features + n] = p.bias ? acc[lane] + p.bias[n] : acc[lane];
    }
  }
}

/// Rows [first, first + rows) of the tile of kQuantTileVectors blocks from `block`, in
/// `precision`: the AVX-512 kernels' tiles of kQuantTileRows rows where `vector` (the
/// CPU has the instruction), else the portable blocks, the same sums in the same order.
/// The loop of LowPrecisionWeight::apply.
inline void quantized_tile_rows(const QuantizedProduct& p, Precision precision, bool vector, index_t first,
                                index_t rows, index_t block) {
#if HEED_X86_64
  if (vector) {
    const QuantizedTile* by_rows =
        precision == Precision::int8 ? kQuantizedTiles<Int8Vnni> : kQuantizedTiles<Bf16Avx512>;
    for (index_t row = first; row < first + rows; row += kQuantTileRows)
      by_rows[std::min(kQuantTileRows, first + rows - row)](p, row, block);
    return;
  }
#endif
  (void)vector;
  QuantizedProduct panel = p;  // the portable blocks count rows from the panel's first
  panel.x += first * p.x_row;
  panel.out += first * p.out_features;
  if (panel.x_scale) panel.x_scale += first;
  for (index_t b = block; b < block + kQuantTileVectors && b * kQuantLanes < p.out_features; ++b) {
    if (precision == Precision::int8)
      int8_block_portable(panel, rows, b);
    else
      bf16_block_portable(panel, rows, b);
  }
}

/// A weight (out_features, in_features), row-major as Linear keeps it, converted to bf16
/// or int8 in the layout above, and x Wᵀ + b by it. Holds its own copy: the original may
/// go.
class LowPrecisionWeight {
 public:
  LowPrecisionWeight(const float* weight, index_t out_features, index_t in_features, Precision precision)
      : LowPrecisionWeight(out_features, in_features, precision) {
    // Each row converted as x's rows are (int8_row, bf16_row), then packed.
    const bool avx512 = cpu_features().avx512;
    std::vector<unsigned char> bytes(static_cast<std::size_t>(k_groups_ * 4), 0);
    for (index_t n = 0; n < out_features; ++n) {
      const float* row = weight + n * in_features;
      float scale = 0.0f;
      if (precision == Precision::bf16) {
        bf16_row(avx512, row, in_features, bytes.data());
      } else {
        std::fill(bytes.begin(), bytes.end(), static_cast<unsigned char>(128));
        scale = int8_row(avx512, row, in_features, bytes.data());
        HEED_CHECK(!std::isnan(scale), ValueError, "LowPrecisionWeight: int8 weight row ", n, " of (", out_features,
                   ", ", in_features, ") holds a value that is not finite");
        for (unsigned char& b : bytes) b = static_cast<unsigned char>(static_cast<std::int8_t>(int(b) - 128));
      }
      pack_row(n, bytes.data(), scale);
    }
  }

  /// A weight stored already quantised (a quantised checkpoint): int8 values q
  /// (out_features, in_features), row-major, and each row's scale, w ≈ q · scale
  /// (PyTorch's per-channel scale; CTranslate2's weight_scale is its reciprocal). A scale
  /// that is negative or not finite throws ValueError naming its row.
  static LowPrecisionWeight from_int8(const std::int8_t* q, const float* scale, index_t out_features,
                                      index_t in_features) {
    LowPrecisionWeight w(out_features, in_features, Precision::int8);
    std::vector<unsigned char> bytes(static_cast<std::size_t>(w.k_groups_ * 4), 0);
    for (index_t n = 0; n < out_features; ++n) {
      HEED_CHECK(std::isfinite(scale[n]) && scale[n] >= 0.0f, ValueError, "LowPrecisionWeight::from_int8: row ", n,
                 " of (", out_features, ", ", in_features, ") has scale ", scale[n],
                 ", not a finite non-negative number");
      std::memcpy(bytes.data(), q + n * in_features, static_cast<std::size_t>(in_features));
      w.pack_row(n, bytes.data(), scale[n]);
    }
    return w;
  }
  /// A weight stored already in bf16: the values' bits (out_features, in_features), row-major.
  static LowPrecisionWeight from_bf16(const std::uint16_t* bits, index_t out_features, index_t in_features) {
    LowPrecisionWeight w(out_features, in_features, Precision::bf16);
    std::vector<unsigned char> bytes(static_cast<std::size_t>(w.k_groups_ * 4), 0);
    for (index_t n = 0; n < out_features; ++n) {
      std::memcpy(bytes.data(), bits + n * in_features, static_cast<std::size_t>(in_features) * 2);
      w.pack_row(n, bytes.data(), 0.0f);
    }
    return w;
  }

  /// The int8 values (out_features × in_features, row-major) and row scales that
  /// from_int8 takes back: what a quantised checkpoint stores. An int8 weight only.
  void unpack_int8(std::int8_t* q, float* scale) const {
    HEED_CHECK(precision_ == Precision::int8, ValueError, "LowPrecisionWeight::unpack_int8: the weight is ",
               to_string(precision_));
    for (index_t n = 0; n < out_features_; ++n) {
      for (index_t k = 0; k < in_features_; ++k) q[n * in_features_ + k] = static_cast<std::int8_t>(*at(n, k));
      scale[n] = scale_[static_cast<std::size_t>(n)];
    }
  }
  /// The bf16 bits (out_features × in_features, row-major) that from_bf16 takes back. A
  /// bf16 weight only.
  void unpack_bf16(std::uint16_t* bits) const {
    HEED_CHECK(precision_ == Precision::bf16, ValueError, "LowPrecisionWeight::unpack_bf16: the weight is ",
               to_string(precision_));
    for (index_t n = 0; n < out_features_; ++n)
      for (index_t k = 0; k < in_features_; ++k) std::memcpy(bits + n * in_features_ + k, at(n, k), 2);
  }

  /// The weight of these rows (indices into out_features, in their order), their stored
  /// values kept as they are (no requantising): a vocabulary shortlist's output layer.
  LowPrecisionWeight select_rows(const std::vector<index_t>& rows) const {
    LowPrecisionWeight w(static_cast<index_t>(rows.size()), in_features_, precision_);
    const std::size_t width = precision_ == Precision::int8 ? 1 : 2;
    std::vector<unsigned char> bytes(static_cast<std::size_t>(k_groups_ * 4), 0);
    for (std::size_t i = 0; i < rows.size(); ++i) {
      const index_t n = rows[i];
      HEED_CHECK(n >= 0 && n < out_features_, IndexError, "LowPrecisionWeight::select_rows: row ", n,
                 " of a weight of ", out_features_, " rows");
      for (index_t k = 0; k < in_features_; ++k)
        std::memcpy(bytes.data() + static_cast<std::size_t>(k) * width, at(n, k), width);
      w.pack_row(static_cast<index_t>(i), bytes.data(),
                 precision_ == Precision::int8 ? scale_[static_cast<std::size_t>(n)] : 0.0f);
    }
    return w;
  }

  Precision precision() const { return precision_; }
  index_t out_features() const { return out_features_; }
  index_t in_features() const { return in_features_; }
  /// The bytes this weight holds (its packed values and per-row constants).
  std::size_t bytes() const { return packed_.size() + scale_.size() * 4 + compensation_.size() * 4; }

  /// Row n of the weight as it is stored, in float (int8: Wq[n][k] · its scale):
  /// in_features values into out. An embedding's lookup.
  void row(index_t n, float* out) const {
    for (index_t k = 0; k < in_features_; ++k) {
      if (precision_ == Precision::int8) {
        out[k] = static_cast<float>(static_cast<std::int8_t>(*at(n, k))) * scale_[static_cast<std::size_t>(n)];
      } else {
        std::uint16_t h;
        std::memcpy(&h, at(n, k), 2);
        out[k] = bf16_bits_to_float(h);
      }
    }
  }

  /// out (rows, out_features) = x (rows, in_features) · Wᵀ (+ bias (out_features) when not
  /// null), float and row-major; tiles of 64 output features are shared out among the
  /// threads.
  void apply(const float* x, index_t rows, const float* bias, float* out) const {
    if (rows <= 0) return;
    QuantizedProduct p{nullptr,       k_groups_ * 4,        packed_.data(), k_groups_, nullptr,
                       scale_.data(), compensation_.data(), bias,           out,       out_features_};
    // x's rows as the kernels read them (128s, int8's zero, or zeros past in_features),
    // then int8's scales: an idle buffer of the buffer cache, not an allocation per call.
    Tensor<float> buffer = make_tensor<float>(Shape{rows * (p.x_row / 4 + 1)}, Device::cpu(), "LowPrecisionWeight x");
    auto* const xq = reinterpret_cast<unsigned char*>(buffer.data());
    float* const x_scale = buffer.data() + rows * p.x_row / 4;
    const CpuFeatures features = cpu_features();
    for (index_t r = 0; r < rows; ++r) {
      const float* row = x + r * in_features_;
      unsigned char* packed = xq + r * p.x_row;
      std::fill(packed, packed + p.x_row, precision_ == Precision::int8 ? static_cast<unsigned char>(128) : 0);
      if (precision_ == Precision::int8)
        x_scale[r] = int8_row(features.avx512, row, in_features_, packed);
      else
        bf16_row(features.avx512, row, in_features_, packed);
    }
    p.x = xq;
    p.x_scale = x_scale;
    const bool vector = precision_ == Precision::int8 ? features.avx512_vnni : features.avx512_bf16;
    const index_t tiles = blocks_ / kQuantTileVectors;
    parallel_tasks(tiles, rows * out_features_ * in_features_, [&](index_t tile) {
      quantized_tile_rows(p, precision_, vector, 0, rows, tile * kQuantTileVectors);
    });
  }

 private:
  // Allocates the packed values (zeros: the padding stays so) and int8's constants.
  LowPrecisionWeight(index_t out_features, index_t in_features, Precision precision)
      : precision_(precision), out_features_(out_features), in_features_(in_features) {
    HEED_CHECK(precision == Precision::int8 || precision == Precision::bf16, ValueError,
               "LowPrecisionWeight: precision must be bf16 or int8, got ", to_string(precision));
    HEED_CHECK(out_features > 0 && in_features > 0, ShapeError, "LowPrecisionWeight: weight of shape (", out_features,
               ", ", in_features, ") is empty");
    HEED_CHECK(precision != Precision::int8 || in_features <= kMaxInt8InFeatures, ShapeError,
               "LowPrecisionWeight: int8 takes at most ", kMaxInt8InFeatures, " in_features (the int32 sums), got ",
               in_features);
    const index_t group = precision == Precision::int8 ? 4 : 2;
    k_groups_ = (in_features + group - 1) / group;
    const index_t tile_columns = kQuantTileVectors * kQuantLanes;
    blocks_ = (out_features + tile_columns - 1) / tile_columns * kQuantTileVectors;
    const auto padded = static_cast<std::size_t>(blocks_ * kQuantLanes);
    packed_.assign(static_cast<std::size_t>(blocks_ * k_groups_ * kQuantGroupBytes), 0);
    if (precision == Precision::int8) {
      scale_.assign(padded, 0.0f);
      compensation_.assign(padded, 0);
    }
  }

  // Row n's values, stored (int8 values, or bf16 bits in host order; zeros past
  // in_features: k_groups_ * 4 bytes), dealt to its lane of its block; int8's scale and
  // the compensation of the +128 shift, 128 · Σ q.
  void pack_row(index_t n, const unsigned char* bytes, float scale) {
    unsigned char* lane = packed_.data() + ((n / kQuantLanes) * k_groups_ * kQuantLanes + n % kQuantLanes) * 4;
    for (index_t g = 0; g < k_groups_; ++g) std::memcpy(lane + g * kQuantGroupBytes, bytes + g * 4, 4);
    if (precision_ != Precision::int8) return;
    std::int32_t sum = 0;
    for (index_t k = 0; k < in_features_; ++k) sum += static_cast<std::int8_t>(bytes[k]);
    scale_[static_cast<std::size_t>(n)] = scale;
    compensation_[static_cast<std::size_t>(n)] = 128 * sum;
  }

  // Where element (n, k) is stored: one int8 byte, or a bf16's two.
  const unsigned char* at(index_t n, index_t k) const {
    const index_t group = precision_ == Precision::int8 ? 4 : 2;
    const unsigned char* lane = packed_.data() + ((n / kQuantLanes) * k_groups_ * kQuantLanes + n % kQuantLanes) * 4;
    return lane + (k / group) * kQuantGroupBytes + (k % group) * (4 / group);
  }

  Precision precision_;
  index_t out_features_, in_features_, k_groups_ = 0, blocks_ = 0;
  std::vector<unsigned char> packed_;
  std::vector<float> scale_;
  std::vector<std::int32_t> compensation_;
};

}  // namespace heed::detail

#undef HEED_QUANT_UNROLL
#undef HEED_TARGET_AVX512
#undef HEED_QUANT_INLINE
#undef HEED_TARGET_AVX512_VNNI
#undef HEED_TARGET_AVX512_BF16
#undef HEED_TARGET_AVX512_LOW_PRECISION
#undef HEED_QUANT_PRAGMA

#include "heed/detail/header_end.hpp"
