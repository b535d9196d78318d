// heed/ops/packed_gemm.hpp — x Wᵀ + b for inference, reading the weight in place.
//
//   heed::NoGradGuard no_grad;
//   heed::PackedWeightsGuard packed;  // predict_seq2seq holds one of its own
//   for (...) y = net(x);             // linear() and the GRU take these kernels
//
// A GEMM library (OpenBLAS, Eigen) copies the weight into its panel layout on every
// call, and decoding calls the same weights a dozen times per batch with few rows (the
// copy of the 9807 × 128 vocabulary projection took 23 % of greedy decoding's time).
// Within a PackedWeightsGuard, linear() and the GRU's recurrent product, on the CPU, in
// float or double, with no gradient to record, multiply by the weight where it lies,
// (out_features, in_features) row-major, without a copy of it: an earlier version kept
// a packed copy of every weight for the guard's lifetime, which doubled the weights'
// memory while decoding (285 MiB more for MarianMT's 74.7 M parameters).
//   Many rows (kPackedFewRows and more): outᵀ = W xᵀ. x alone is packed, per call,
// into blocks of kPackedPanel rows (2 vectors), each k's values side by side; a tile
// holds PackedSimd::rows weight rows × 2 vectors of x rows, broadcasts W[n][k] from
// each weight row's own stream and loads the block's two vectors per k. In
// bench_marian's decoding (128 rows, 1 thread, Zen 5) the products ran at 145–195
// GFLOP/s against 160–170 for the packed copy (in = 2048: 135–155 against 170).
//   Few rows: the weight read a square of kLanes rows × kLanes k at a time and
// transposed in registers, so that lane j holds W[n + j][k]; x broadcast. The
// transposes cost: 1 row ran at about half the packed copy's speed (21 against 50
// GFLOP/s at 512 × 512), 4 rows at 0.9–1.4 times it (0.6–0.9 with in = 2048).
//
// Every output element is one FMA chain over k in order from 0, then + bias (+ 0
// without one), in either kernel and however the work is split: the bits are those of
// the packed copy's kernel and of a scalar std::fma loop, and do not depend on the
// thread count (blocks of output features are shared out, at edges fixed by the
// shapes). Nothing is kept between calls, so a weight changed in place is simply read
// anew. The guard belongs to the thread that made it (a worker thread joins it with
// detail::PackedWeightsScope).
#pragma once

#include "heed/detail/header_begin.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include "heed/core/tensor.hpp"
#include "heed/detail/parallel.hpp"
#include "heed/detail/simd.hpp"
#include "heed/ops/quantized_gemm.hpp"

// GCC keeps the kernels' small arrays of vectors in registers only where their loops
// are unrolled whole, which it does not always do unasked; clang does, and warns where a
// requested unroll fails (as under the sanitizers).
#if defined(__clang__) || !defined(__GNUC__)
#define HEED_PACKED_UNROLL(n)
#else
#define HEED_PACKED_PRAGMA(x) _Pragma(#x)
#define HEED_PACKED_UNROLL(n) HEED_PACKED_PRAGMA(GCC unroll n)
#endif

namespace heed {
namespace detail {

/// The SIMD vector the kernels work in (the widest the build has) and its fused
/// multiply-add; rows is how many weight rows a tile of the many-rows kernel holds:
/// 2 · rows accumulators stay in registers (32 of them with AVX-512, 16 below). 6, 8, 10
/// and 12 ran within the noise of each other in bench_marian's decoding; 8 leaves ways
/// of the 12-way L1 cache free where a weight's rows share a set (rows a multiple of
/// 4 KiB apart: in_features 1024, 2048).
template <typename T>
struct PackedSimd : Simd<T, kWidestSimdBytes> {
  static constexpr index_t rows = kWidestSimdBytes == 64 ? 8 : 6;
};

template <typename T>
constexpr index_t kPackedLanes = static_cast<index_t>(sizeof(typename PackedSimd<T>::V) / sizeof(T));
/// Rows of x per block of the many-rows kernel: two vectors.
template <typename T>
constexpr index_t kPackedPanel = 2 * kPackedLanes<T>;
/// Rows below which x Wᵀ takes the few-rows kernel (see the top of this file).
constexpr index_t kPackedFewRows = 8;

/// A weight (out_features, in_features), row-major as Linear keeps it, read in place by
/// x Wᵀ's kernels (the tensor, when given, keeps its storage alive; nothing is copied).
template <typename T>
class PackedWeight {
 public:
  PackedWeight(const T* weight, index_t out_features, index_t in_features)
      : weight_(weight), out_features_(out_features), in_features_(in_features) {}
  explicit PackedWeight(const Tensor<T>& weight) : PackedWeight(weight.data(), weight.shape()[0], weight.shape()[1]) {
    tensor_ = weight;
  }

  index_t out_features() const { return out_features_; }
  index_t in_features() const { return in_features_; }

  /// out (rows, out_features) = x (rows, in_features) · Wᵀ (+ bias (out_features) when
  /// not null), row-major; blocks of output features are shared out among the threads.
  void apply(const T* x, index_t rows, const T* bias, T* out) const {
    if (rows == 0 || out_features_ == 0) return;
    const index_t work = rows * out_features_ * in_features_;
    if (rows < kPackedFewRows) {
      constexpr index_t kFeaturesPerTask = 16 * kLanes;
      const index_t tasks = (out_features_ + kFeaturesPerTask - 1) / kFeaturesPerTask;
      parallel_tasks(tasks, work, [&](index_t task) {
        const index_t last = std::min(out_features_, (task + 1) * kFeaturesPerTask);
        few_rows<kPackedFewRows - 1>(rows, x, bias, out, task * kFeaturesPerTask, last);
      });
      return;
    }
    // xᵀ in blocks of kPanel rows (kLanes for a last block of at most kLanes): for each
    // k, the block's x[r][k] side by side, zeros past the last row.
    const index_t blocks = (rows + kPanel - 1) / kPanel;
    // A tensor's buffer: an idle one of the buffer cache, not more memory.
    Tensor<T> xt_buffer = make_tensor<T>(Shape{blocks * kPanel * in_features_}, Device::cpu(), "PackedWeight x");
    T* const xt = xt_buffer.data();
    for (index_t b = 0; b < blocks; ++b) {
      const index_t first = b * kPanel, count = std::min(kPanel, rows - first), width = block_width(count);
      T* block = xt + first * in_features_;
      for (index_t k = 0; k < in_features_; ++k) {
        T* dst = block + k * width;
        for (index_t r = 0; r < count; ++r) dst[r] = x[(first + r) * in_features_ + k];
        for (index_t r = count; r < width; ++r) dst[r] = T(0);
      }
    }
    constexpr index_t kFeaturesPerTask = 16 * kRows;
    const index_t tasks = (out_features_ + kFeaturesPerTask - 1) / kFeaturesPerTask;
    parallel_tasks(tasks, work, [&](index_t task) {
      const index_t last = std::min(out_features_, (task + 1) * kFeaturesPerTask);
      for (index_t n = task * kFeaturesPerTask; n < last; n += kRows) {
        const index_t features = std::min(kRows, out_features_ - n);
        // The first block fetches the next features' weights into the cache as it goes:
        // the vocabulary projection's 122 MB are not in the cache between calls.
        const T* next = n + kRows < out_features_ ? weight_ + (n + kRows) * in_features_ : nullptr;
        for (index_t b = 0; b < blocks; ++b, next = nullptr) {
          const index_t first = b * kPanel, count = std::min(kPanel, rows - first);
          many_rows<kRows>(features, xt + first * in_features_, count, bias, out + first * out_features_, n, next);
        }
      }
    });
  }

 private:
  using Simd = PackedSimd<T>;
  using V = typename Simd::V;
  static constexpr index_t kLanes = kPackedLanes<T>, kPanel = kPackedPanel<T>, kRows = Simd::rows;

  static index_t block_width(index_t count) { return count <= kLanes ? kLanes : kPanel; }
  static V load(const T* p) {
    V v;
    std::memcpy(&v, p, sizeof(V));
    return v;
  }
  static void store(T* p, const V& v) { std::memcpy(p, &v, sizeof(V)); }
  static void prefetch([[maybe_unused]] const void* p) {
#if defined(__GNUC__)
    __builtin_prefetch(p);
#endif
  }

  /// many_rows_tile<left>, for left <= R: `features` weight rows from n.
  template <index_t R>
  void many_rows(index_t features, const T* xt, index_t count, const T* bias, T* out, index_t n, const T* next) const {
    if constexpr (R > 0) {
      if (features == R) {
        if (count <= kLanes) return many_rows_tile<R, 1>(xt, count, bias, out, n, next);
        return many_rows_tile<R, 2>(xt, count, bias, out, n, next);
      }
      many_rows<R - 1>(features, xt, count, bias, out, n, next);
    }
  }

  /// out[0 .. count)[n .. n + R) from a block of xᵀ (NV vectors wide): each element one
  /// FMA chain over k, then + bias.
  template <index_t R, index_t NV>
  void many_rows_tile(const T* xt, index_t count, const T* bias, T* out, index_t n, const T* next) const {
    const index_t K = in_features_;
    const T* w = weight_ + n * K;
    V acc[R][NV];
    for (index_t i = 0; i < R; ++i)
      for (index_t v = 0; v < NV; ++v) acc[i][v] = V{};
    constexpr index_t kLine = 64 / sizeof(T);
    for (index_t k = 0; k < K; ++k) {
      if (next && k % kLine == 0)
        for (index_t i = 0; i < R; ++i) prefetch(next + i * K + k);
      V a[NV];
      for (index_t v = 0; v < NV; ++v) a[v] = load(xt + k * NV * kLanes + v * kLanes);
      for (index_t i = 0; i < R; ++i) {
        const V b = Simd::broadcast(w[i * K + k]);
        for (index_t v = 0; v < NV; ++v) acc[i][v] = Simd::fma(a[v], b, acc[i][v]);
      }
    }
    alignas(64) T tile[R][NV * kLanes];
    for (index_t i = 0; i < R; ++i)
      for (index_t v = 0; v < NV; ++v) store(tile[i] + v * kLanes, acc[i][v]);
    T c[R];
    for (index_t i = 0; i < R; ++i) c[i] = bias ? bias[n + i] : T(0);
    for (index_t r = 0; r < count; ++r) {
      T* row = out + r * out_features_ + n;
      for (index_t i = 0; i < R; ++i) row[i] = tile[i][r] + c[i];
    }
  }

  /// few_rows_tile<rows>, for rows <= R, over the features [first, last).
  template <index_t R>
  void few_rows(index_t rows, const T* x, const T* bias, T* out, index_t first, index_t last) const {
    if constexpr (R > 0) {
      if (rows == R) {
        constexpr index_t NV = R <= 3 ? 2 : 1;
        for (index_t n = first; n < last; n += NV * kLanes)
          few_rows_tile<R, NV>(x, bias, out, n, std::min(NV * kLanes, last - n));
        return;
      }
      few_rows<R - 1>(rows, x, bias, out, first, last);
    }
  }

  /// Swaps the off-diagonal blocks of D × D lanes of t[i] and t[i + D] (i without D):
  /// one step of a transpose of kLanes vectors.
  template <index_t D, std::size_t... I>
  static void swap_blocks(V& a, V& b, std::index_sequence<I...>) {
    constexpr auto L = static_cast<std::size_t>(kLanes), d = static_cast<std::size_t>(D);
    const V lo = __builtin_shufflevector(a, b, ((I & d) ? L + I - d : I)...);
    const V hi = __builtin_shufflevector(a, b, ((I & d) ? L + I : I + d)...);
    a = lo;
    b = hi;
  }
  template <index_t D>
  static void transpose(V* t) {
    HEED_PACKED_UNROLL(16)
    for (index_t i = 0; i < kLanes; ++i)
      if (!(i & D)) swap_blocks<D>(t[i], t[i + D], std::make_index_sequence<static_cast<std::size_t>(kLanes)>());
    if constexpr (D > 1) transpose<D / 2>(t);
  }

  /// square[kk] lane j = w[j · K + kk] for j, kk < kLanes: a square of the weight,
  /// transposed, stored (to the stack: the FMAs read it from there).
  static void store_transposed(const T* w, index_t K, T (*square)[kLanes]) {
#if HEED_SIMD_512
    if constexpr (std::is_same_v<T, float> && sizeof(V) == 64) {
      // Quarter q of u[p][j] holds row 4q + j at k = 4p .. 4p + 4, put there by
      // broadcast loads and blends (fewer shuffles than a transpose of whole rows); then
      // 4 × 4 transposes within the quarters. The loads go row by row, so that a line
      // is read whole before the next rows' (rows K · 4 bytes apart, for K a multiple
      // of 1024, share one set of the L1 cache).
      __m512 u[4][4];
      HEED_PACKED_UNROLL(4)
      for (index_t j = 0; j < 4; ++j) {
        HEED_PACKED_UNROLL(4)
        for (index_t p = 0; p < 4; ++p) {
          const T* at = w + 4 * p;
          __m512 v = _mm512_broadcast_f32x4(_mm_loadu_ps(at + j * K));
          v = _mm512_mask_broadcast_f32x4(v, 0x00F0, _mm_loadu_ps(at + (4 + j) * K));
          v = _mm512_mask_broadcast_f32x4(v, 0x0F00, _mm_loadu_ps(at + (8 + j) * K));
          u[p][j] = _mm512_mask_broadcast_f32x4(v, 0xF000, _mm_loadu_ps(at + (12 + j) * K));
        }
      }
      HEED_PACKED_UNROLL(4)
      for (index_t p = 0; p < 4; ++p) {
        const __m512 t0 = _mm512_unpacklo_ps(u[p][0], u[p][1]), t1 = _mm512_unpackhi_ps(u[p][0], u[p][1]),
                     t2 = _mm512_unpacklo_ps(u[p][2], u[p][3]), t3 = _mm512_unpackhi_ps(u[p][2], u[p][3]);
        store(square[4 * p], _mm512_shuffle_ps(t0, t2, 0x44));
        store(square[4 * p + 1], _mm512_shuffle_ps(t0, t2, 0xEE));
        store(square[4 * p + 2], _mm512_shuffle_ps(t1, t3, 0x44));
        store(square[4 * p + 3], _mm512_shuffle_ps(t1, t3, 0xEE));
      }
      return;
    }
#endif
    V t[kLanes];
    HEED_PACKED_UNROLL(16)
    for (index_t j = 0; j < kLanes; ++j) t[j] = load(w + j * K);
    transpose<kLanes / 2>(t);
    HEED_PACKED_UNROLL(16)
    for (index_t kk = 0; kk < kLanes; ++kk) store(square[kk], t[kk]);
  }

  /// out[0 .. R)[n .. n + cols) for R rows of x: the weight rows read kLanes at a time
  /// along k and transposed in registers, so that lane j holds W[n + j][k]; each
  /// element one FMA chain over k, then + bias.
  template <index_t R, index_t NV>
  void few_rows_tile(const T* x, const T* bias, T* out, index_t n, index_t cols) const {
    constexpr index_t kFeatures = NV * kLanes;
    const index_t K = in_features_;
    // A last tile of fewer features computes the kFeatures before the end (writing only
    // its own); a weight of fewer features is copied, zeros after it.
    std::vector<T> padded;
    const T* w;
    index_t skip = 0;
    if (n + kFeatures <= out_features_) {
      w = weight_ + n * K;
    } else if (out_features_ >= kFeatures) {
      skip = n + kFeatures - out_features_;
      w = weight_ + (n - skip) * K;
    } else {
      padded.assign(static_cast<std::size_t>(kFeatures * K), T(0));
      std::copy(weight_, weight_ + out_features_ * K, padded.data());
      w = padded.data();
    }
    // The next tile's weights (contiguous) are fetched into the cache as this one goes,
    // a square's worth (kLanes² elements) per square: kFeatures rows read side by side
    // are more streams than the hardware follows, and a large weight is not in the cache.
    const char* next = n + 2 * kFeatures <= out_features_ ? reinterpret_cast<const char*>(w + kFeatures * K) : nullptr;
    constexpr index_t kSquareBytes = kLanes * kLanes * static_cast<index_t>(sizeof(T));
    V acc[R][NV];
    for (index_t r = 0; r < R; ++r)
      for (index_t v = 0; v < NV; ++v) acc[r][v] = V{};
    index_t k = 0;
    for (; k + kLanes <= K; k += kLanes) {
      if (next)
        for (index_t v = 0; v < NV; ++v) {
          const char* square = next + (k * NV + v * kLanes) * kLanes * static_cast<index_t>(sizeof(T));
          for (index_t byte = 0; byte < kSquareBytes; byte += 64) prefetch(square + byte);
        }
      // The NV squares first, then their R · NV chains interleaved (one chain alone waits
      // on each FMA's latency).
      alignas(64) T squares[NV][kLanes][kLanes];
      HEED_PACKED_UNROLL(4)
      for (index_t v = 0; v < NV; ++v) store_transposed(w + v * kLanes * K + k, K, squares[v]);
      HEED_PACKED_UNROLL(16)
      for (index_t kk = 0; kk < kLanes; ++kk) {
        HEED_PACKED_UNROLL(8)
        for (index_t r = 0; r < R; ++r) {
          const V a = Simd::broadcast(x[r * K + k + kk]);
          HEED_PACKED_UNROLL(4)
          for (index_t v = 0; v < NV; ++v) acc[r][v] = Simd::fma(a, load(squares[v][kk]), acc[r][v]);
        }
      }
    }
    for (; k < K; ++k)
      for (index_t v = 0; v < NV; ++v) {
        alignas(64) T column[kLanes];
        for (index_t j = 0; j < kLanes; ++j) column[j] = w[(v * kLanes + j) * K + k];
        const V t = load(column);
        for (index_t r = 0; r < R; ++r) acc[r][v] = Simd::fma(Simd::broadcast(x[r * K + k]), t, acc[r][v]);
      }
    alignas(64) T c[kFeatures] = {};
    if (bias) std::copy(bias + n, bias + n + cols, c + skip);
    for (index_t r = 0; r < R; ++r) {
      alignas(64) T row[kFeatures];
      for (index_t v = 0; v < NV; ++v) store(row + v * kLanes, acc[r][v] + load(c + v * kLanes));
      std::copy(row + skip, row + skip + cols, out + r * out_features_ + n);
    }
  }

  const T* weight_;
  index_t out_features_, in_features_;
  Tensor<T> tensor_;
};

/// What a PackedWeightsGuard holds: its precision, and in bf16 or int8 each weight
/// converted so far (fp32 kernels read each weight in place). Each entry keeps its
/// tensor, so that no other weight takes its address while the guard lasts, and the
/// version it was converted at: a weight written in place since is converted anew.
struct PackedWeights {
  struct Converted {
    Tensor<float> weight;
    std::uint64_t version = 0;
    std::shared_ptr<const LowPrecisionWeight> converted;
  };
  explicit PackedWeights(Precision p) : precision(p) {}
  const Precision precision;
  std::mutex mutex;  // the decoding threads of one guard convert on first use
  std::unordered_map<const float*, Converted> converted;
};

/// This thread's guard's packed weights; null outside any guard.
inline PackedWeights*& current_packed_weights() {
  thread_local PackedWeights* current = nullptr;
  return current;
}

/// Joins another thread's guard (`weights` may be null: none) for its lifetime.
class PackedWeightsScope {
 public:
  explicit PackedWeightsScope(PackedWeights* weights) : saved_(current_packed_weights()) {
    current_packed_weights() = weights;
  }
  ~PackedWeightsScope() { current_packed_weights() = saved_; }
  PackedWeightsScope(const PackedWeightsScope&) = delete;
  PackedWeightsScope& operator=(const PackedWeightsScope&) = delete;

 private:
  PackedWeights* saved_;
};

/// The weight for x Wᵀ's kernels, when x Wᵀ should use them: a 2-D `weight`
/// (out_features, in_features) inside a guard, on the CPU, in float or double, with
/// nothing to record for autograd (`records` false); null otherwise.
template <typename T>
std::shared_ptr<const PackedWeight<T>> packed_weight_for(const Tensor<T>& weight, bool records) {
  if (!current_packed_weights() || records || !weight.is_cpu() || weight.dim() != 2) return nullptr;
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>)
    return std::make_shared<const PackedWeight<T>>(weight);
  else
    return nullptr;
}

/// The weight converted to the guard's precision, when x Wᵀ should use it: inside a
/// bf16 or int8 guard, a 2-D float `weight` on the CPU with nothing to record for
/// autograd; null otherwise (fp32, double, a device, autograd). Converted on first use.
template <typename T>
std::shared_ptr<const LowPrecisionWeight> low_precision_weight_for(const Tensor<T>& weight, bool records) {
  PackedWeights* const guard = current_packed_weights();
  if (!guard || guard->precision == Precision::fp32 || records || !weight.is_cpu() || weight.dim() != 2) return nullptr;
  if constexpr (std::is_same_v<T, float>) {
    const std::uint64_t version = impl(weight).storage->version();
    const std::lock_guard<std::mutex> lock(guard->mutex);
    auto& entry = guard->converted[weight.data()];
    if (!entry.converted || entry.version != version || entry.weight.shape() != weight.shape()) {
      entry.converted = std::make_shared<const LowPrecisionWeight>(weight.data(), weight.shape()[0], weight.shape()[1],
                                                                   guard->precision);
      entry.weight = weight;
      entry.version = version;
    }
    return entry.converted;
  } else {
    return nullptr;
  }
}

}  // namespace detail

/// Switches linear() and the GRU, on this thread, without autograd, to the kernels of
/// this file for its lifetime (see the top of this file); in bf16 or int8, linear() in
/// float to ops/quantized_gemm.hpp's, each weight converted once per guard (the GRU
/// stays fp32). A nested guard of the same precision shares the outer one; of another,
/// holds its own for its lifetime.
class PackedWeightsGuard {
 public:
  explicit PackedWeightsGuard(Precision precision = Precision::fp32) : saved_(detail::current_packed_weights()) {
    if (!saved_ || saved_->precision != precision) {
      owned_ = std::make_unique<detail::PackedWeights>(precision);
      detail::current_packed_weights() = owned_.get();
    }
  }
  ~PackedWeightsGuard() {
    if (owned_) detail::current_packed_weights() = saved_;
  }
  PackedWeightsGuard(const PackedWeightsGuard&) = delete;
  PackedWeightsGuard& operator=(const PackedWeightsGuard&) = delete;

  Precision precision() const { return detail::current_packed_weights()->precision; }

 private:
  detail::PackedWeights* saved_;
  std::unique_ptr<detail::PackedWeights> owned_;
};

}  // namespace heed

#undef HEED_PACKED_UNROLL
#undef HEED_PACKED_PRAGMA

#include "heed/detail/header_end.hpp"
