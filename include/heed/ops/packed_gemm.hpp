// heed/ops/packed_gemm.hpp — x Wᵀ + b against weights packed once, for inference.
//
//   heed::NoGradGuard no_grad;
//   heed::PackedWeightsGuard packed;  // predict_seq2seq holds one of its own
//   for (...) y = net(x);             // each weight packed when first met, then reused
//
// A GEMM library (OpenBLAS, Eigen) copies the weight into its panel layout on every
// call. Decoding calls the same weights a dozen times per batch with few rows, and the
// copy of the 9807 × 128 vocabulary projection took 23 % of greedy decoding's time.
// Within a PackedWeightsGuard, linear() and the GRU's recurrent product, on the CPU,
// in float or double, with no gradient to record, pack each weight into panels of
// kPackedPanel output features once (the first time they meet it) and multiply by the
// packed copy: rows × 9807 × 128 products ran at 190–200 GFLOP/s against OpenBLAS's
// 140 (bias added in the same pass), and 4 rows at 75 against 32.
//
// A weight changed in place by heed's ops (an optimiser step, fill_, copy_) bumps its
// version and is packed again; one written through its raw data() pointer is not
// noticed: don't, within a guard. The guard belongs to the thread that made it (a
// worker thread joins it with detail::PackedWeightsScope); the packed copies are freed
// when the outermost guard ends. Every output element is one FMA chain over k in order,
// then + bias, however the rows and panels are split: the bits do not depend on the
// thread count.
#pragma once

#include "heed/detail/header_begin.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include "heed/core/tensor.hpp"
#include "heed/detail/parallel.hpp"
#include "heed/detail/simd.hpp"

namespace heed {
namespace detail {

/// The SIMD vector the packed kernel works in (the widest the build has) and its fused
/// multiply-add; rows is how many rows a tile holds: 2 · rows accumulators stay in
/// registers (32 of them with AVX-512, 16 below).
template <typename T>
struct PackedSimd : Simd<T, kWidestSimdBytes> {
  static constexpr index_t rows = kWidestSimdBytes == 64 ? 8 : 6;
};

template <typename T>
constexpr index_t kPackedLanes = static_cast<index_t>(sizeof(typename PackedSimd<T>::V) / sizeof(T));
/// Output features per panel: two vectors.
template <typename T>
constexpr index_t kPackedPanel = 2 * kPackedLanes<T>;

/// A weight (out_features, in_features), row-major as Linear keeps it, laid out as
/// panels of kPackedPanel output features: panel p holds, for each k, the weights of
/// features p·kPackedPanel .. +kPackedPanel at input k, side by side (zeros past the
/// last feature).
template <typename T>
class PackedWeight {
 public:
  PackedWeight(const T* weight, index_t out_features, index_t in_features)
      : out_features_(out_features),
        in_features_(in_features),
        panels_((out_features + kPackedPanel<T> - 1) / kPackedPanel<T>),
        // A tensor's buffer: after training, an idle one of the buffer cache, not more memory.
        packed_(make_tensor<T>(Shape{panels_ * in_features * kPackedPanel<T>}, Device::cpu(), "PackedWeight")) {
    packed_.array().setZero();
    for (index_t p = 0; p < panels_; ++p) {
      T* panel = packed_.data() + p * in_features * kPackedPanel<T>;
      const index_t cols = std::min(kPackedPanel<T>, out_features - p * kPackedPanel<T>);
      for (index_t j = 0; j < cols; ++j) {
        const T* row = weight + (p * kPackedPanel<T> + j) * in_features;
        for (index_t k = 0; k < in_features; ++k) panel[k * kPackedPanel<T> + j] = row[k];
      }
    }
  }

  index_t out_features() const { return out_features_; }
  index_t in_features() const { return in_features_; }

  /// out (rows, out_features) = x (rows, in_features) · Wᵀ (+ bias (out_features) when
  /// not null), row-major; the panels are shared out among the threads.
  void apply(const T* x, index_t rows, const T* bias, T* out) const {
    if (rows == 0) return;
    constexpr index_t kPanelsPerTask = 8;
    const index_t tasks = (panels_ + kPanelsPerTask - 1) / kPanelsPerTask;
    parallel_tasks(tasks, rows * out_features_ * in_features_, [&](index_t task) {
      const index_t last = std::min(panels_, (task + 1) * kPanelsPerTask);
      for (index_t p = task * kPanelsPerTask; p < last; ++p) apply_panel(x, rows, bias, out, p);
    });
  }

 private:
  using Simd = PackedSimd<T>;
  using V = typename Simd::V;
  static constexpr index_t kLanes = kPackedLanes<T>, kPanel = kPackedPanel<T>;

  static V load(const T* p) {
    V v;
    std::memcpy(&v, p, sizeof(V));
    return v;
  }
  static void store(T* p, const V& v) { std::memcpy(p, &v, sizeof(V)); }
  /// Asks for the cache lines of one k of a panel (kPanel elements: 2 vectors).
  static void prefetch([[maybe_unused]] const T* p) {
#if defined(__GNUC__)
    for (std::size_t byte = 0; byte < sizeof(T) * kPanel; byte += 64)
      __builtin_prefetch(reinterpret_cast<const char*>(p) + byte);
#endif
  }

  void apply_panel(const T* x, index_t rows, const T* bias, T* out, index_t p) const {
    const T* panel = packed_.data() + p * in_features_ * kPanel;
    const index_t first = p * kPanel, cols = std::min(kPanel, out_features_ - first);
    alignas(64) T bias_panel[kPanel] = {};
    if (bias) std::copy(bias + first, bias + first + cols, bias_panel);
    // The first tile fetches the next panel into the cache as it goes: a large weight
    // (the vocabulary projection's 5 MB) is not in the cache between calls, and without
    // this each panel's first tile waited on memory (rows × 9807 × 128 at half speed).
    const T* next = p + 1 < panels_ ? panel + in_features_ * kPanel : nullptr;
    index_t r = 0;
    for (; r + Simd::rows <= rows; r += Simd::rows, next = nullptr)
      tile<Simd::rows>(x + r * in_features_, panel, bias_panel, out + r * out_features_ + first, cols, next);
    if (r < rows)  // the last rows in one tile too: a row alone is two FMA chains, latency-bound
      tail<Simd::rows - 1>(rows - r, x + r * in_features_, panel, bias_panel, out + r * out_features_ + first, cols,
                           next);
  }

  /// tile<left>, for left < R.
  template <index_t R>
  void tail(index_t left, const T* x, const T* panel, const T* bias_panel, T* out, index_t cols, const T* next) const {
    if constexpr (R > 0) {
      if (left == R) return tile<R>(x, panel, bias_panel, out, cols, next);
      tail<R - 1>(left, x, panel, bias_panel, out, cols, next);
    }
  }

  /// out[0 .. R)[0 .. cols) of one panel: each element one FMA chain over k, then + bias.
  template <index_t R>
  void tile(const T* x, const T* panel, const T* bias_panel, T* out, index_t cols, const T* next) const {
    V acc[R][2];
    for (index_t r = 0; r < R; ++r) acc[r][0] = acc[r][1] = V{};
    for (index_t k = 0; k < in_features_; ++k) {
      if (next) prefetch(next + k * kPanel);
      const V b0 = load(panel + k * kPanel), b1 = load(panel + k * kPanel + kLanes);
      for (index_t r = 0; r < R; ++r) {
        const V a = Simd::broadcast(x[r * in_features_ + k]);
        acc[r][0] = Simd::fma(a, b0, acc[r][0]);
        acc[r][1] = Simd::fma(a, b1, acc[r][1]);
      }
    }
    const V c0 = load(bias_panel), c1 = load(bias_panel + kLanes);
    for (index_t r = 0; r < R; ++r) {
      T* row = out + r * out_features_;
      if (cols == kPanel) {
        store(row, acc[r][0] + c0);
        store(row + kLanes, acc[r][1] + c1);
      } else {
        alignas(64) T full[kPanel];
        store(full, acc[r][0] + c0);
        store(full + kLanes, acc[r][1] + c1);
        std::copy(full, full + cols, row);
      }
    }
  }

  index_t out_features_, in_features_, panels_;
  Tensor<T> packed_;
};

/// The packed weights of one PackedWeightsGuard, by weight: shared by the threads that
/// joined it, so finding and packing take a lock.
template <typename T>
class PackedWeightCache {
 public:
  std::shared_ptr<const PackedWeight<T>> find_or_pack(const Tensor<T>& weight) {
    const std::uint64_t version = impl(weight).storage->version();
    const std::lock_guard<std::mutex> lock(mutex_);
    Entry& entry = entries_[weight.data()];
    if (!entry.packed || entry.version != version || entry.weight.shape() != weight.shape()) {
      entry.weight = weight;  // keeps the storage, so its address is not reused while the entry lives
      entry.version = version;
      entry.packed = std::make_shared<const PackedWeight<T>>(weight.data(), weight.shape()[0], weight.shape()[1]);
    }
    return entry.packed;
  }

 private:
  struct Entry {
    Tensor<T> weight;
    std::uint64_t version = 0;
    std::shared_ptr<const PackedWeight<T>> packed;
  };
  std::mutex mutex_;
  std::unordered_map<const T*, Entry> entries_;
};

struct PackedWeights {
  PackedWeightCache<float> floats;
  PackedWeightCache<double> doubles;
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

/// The packed copy of a 2-D `weight` (out_features, in_features) when x Wᵀ should use
/// one: inside a guard, on the CPU, in float or double, with nothing to record for
/// autograd (`records` false); null otherwise.
template <typename T>
std::shared_ptr<const PackedWeight<T>> packed_weight_for(const Tensor<T>& weight, bool records) {
  PackedWeights* weights = current_packed_weights();
  if (!weights || records || !weight.is_cpu() || weight.dim() != 2) return nullptr;
  if constexpr (std::is_same_v<T, float>)
    return weights->floats.find_or_pack(weight);
  else if constexpr (std::is_same_v<T, double>)
    return weights->doubles.find_or_pack(weight);
  else
    return nullptr;
}

}  // namespace detail

/// Packs the weights that linear() and the GRU meet on this thread, without autograd,
/// once each for its lifetime (see the top of this file). Nested guards share the
/// outermost one's copies.
class PackedWeightsGuard {
 public:
  PackedWeightsGuard() {
    if (!detail::current_packed_weights()) {
      owned_ = std::make_unique<detail::PackedWeights>();
      detail::current_packed_weights() = owned_.get();
    }
  }
  ~PackedWeightsGuard() {
    if (owned_) detail::current_packed_weights() = nullptr;
  }
  PackedWeightsGuard(const PackedWeightsGuard&) = delete;
  PackedWeightsGuard& operator=(const PackedWeightsGuard&) = delete;

 private:
  std::unique_ptr<detail::PackedWeights> owned_;
};

}  // namespace heed

#include "heed/detail/header_end.hpp"
