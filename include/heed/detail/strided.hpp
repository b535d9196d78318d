// heed/detail/strided.hpp — one loop nest for every strided walk over tensors.
//
// Broadcasting, permute, slicing, repeat and the sums that undo broadcasting are all
// "visit K strided operands over the same index space". StridedLoop describes that
// space (up to 16 dims, since repeat views a rank-6 tensor as 12 dims), merges dims
// that are contiguous in every operand, and hands the innermost run to a kernel that
// Eigen can vectorise.
#pragma once

#include <algorithm>
#include <array>
#include <cstring>
#include <type_traits>

#include <Eigen/Core>

#include "heed/core/shape.hpp"
#include "heed/detail/rules.hpp"

namespace heed::detail {

constexpr int kMaxLoopDims = 16;

template <int K>
struct StridedLoop {
  int rank = 0;
  std::array<index_t, kMaxLoopDims> sizes{};
  std::array<std::array<index_t, kMaxLoopDims>, K> strides{};

  void add_dim(index_t size, const std::array<index_t, K>& dim_strides) {
    for (int k = 0; k < K; ++k) strides[k][rank] = dim_strides[k];
    sizes[rank++] = size;
  }

  /// Drops size-1 dims and merges neighbours that are contiguous in every operand.
  void coalesce() {
    int out = 0;
    for (int d = 0; d < rank; ++d) {
      if (sizes[d] == 1) continue;
      if (out > 0) {
        bool mergeable = true;
        for (int k = 0; k < K; ++k) mergeable = mergeable && strides[k][out - 1] == strides[k][d] * sizes[d];
        if (mergeable) {
          sizes[out - 1] *= sizes[d];
          for (int k = 0; k < K; ++k) strides[k][out - 1] = strides[k][d];
          continue;
        }
      }
      sizes[out] = sizes[d];
      for (int k = 0; k < K; ++k) strides[k][out] = strides[k][d];
      ++out;
    }
    rank = out;
  }

  /// Calls run(offsets, n, inner_strides) for each innermost run of n elements, where
  /// offsets[k] is operand k's element offset at the run's start.
  template <typename Run>
  void for_each_run(Run&& run) const {
    std::array<index_t, K> offsets{};
    std::array<index_t, K> inner_strides{};
    if (rank == 0) {
      run(offsets, index_t(1), inner_strides);
      return;
    }
    for (int d = 0; d < rank; ++d)
      if (sizes[d] == 0) return;  // no elements at all
    const int inner = rank - 1;
    for (int k = 0; k < K; ++k) inner_strides[k] = strides[k][inner];
    std::array<index_t, kMaxLoopDims> counter{};
    while (true) {
      run(offsets, sizes[inner], inner_strides);
      int d = inner - 1;  // advance the outer dims like an odometer
      for (; d >= 0; --d) {
        for (int k = 0; k < K; ++k) offsets[k] += strides[k][d];
        if (++counter[d] < sizes[d]) break;
        for (int k = 0; k < K; ++k) offsets[k] -= strides[k][d] * sizes[d];
        counter[d] = 0;
      }
      if (d < 0) return;
    }
  }
};

/// Row-major strides of `shape`, right-aligned to `rank` dims, with 0 where `shape`
/// is broadcast (missing or 1 against a larger size in `out`).
inline std::array<index_t, kMaxLoopDims> broadcast_strides(const Shape& shape, const Shape& out) {
  std::array<index_t, kMaxLoopDims> result{};
  const auto own = shape.strides();
  const int lead = out.rank() - shape.rank();
  for (int d = 0; d < out.rank(); ++d) {
    const int sd = d - lead;
    result[d] = (sd < 0 || shape[sd] == 1) ? 0 : own[sd];
  }
  return result;
}

/// Splits shape around dim into (outer, size, inner) for loops over one dim.
struct DimSplit {
  index_t outer = 1, size = 1, inner = 1;
  DimSplit(const Shape& shape, int dim) {
    for (int d = 0; d < dim; ++d) outer *= shape[d];
    size = shape.rank() ? shape[dim] : 1;
    for (int d = dim + 1; d < shape.rank(); ++d) inner *= shape[d];
  }
};

// ---- Eigen views of runs --------------------------------------------------------------

template <typename T>
using VecMap = Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>>;
template <typename T>
using ConstVecMap = Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>>;
template <typename T>
using StridedVecMap = Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>, 0, Eigen::InnerStride<>>;
template <typename T>
using ConstStridedVecMap = Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>, 0, Eigen::InnerStride<>>;

/// dst[i * dst_strides] = src[i * src_strides] over `sizes` (rank dims).
template <typename T>
void strided_copy(T* dst, const index_t* dst_strides, const T* src, const index_t* src_strides, const index_t* sizes,
                  int rank) {
  StridedLoop<2> loop;
  for (int d = 0; d < rank; ++d) loop.add_dim(sizes[d], {dst_strides[d], src_strides[d]});
  loop.coalesce();
  loop.for_each_run([&](const std::array<index_t, 2>& off, index_t n, const std::array<index_t, 2>& st) {
    if (st[0] == 1 && st[1] == 1)
      std::copy(src + off[1], src + off[1] + n, dst + off[0]);
    else if (st[1] == 0)
      std::fill_n(dst + off[0], n, src[off[1]]);
    else
      StridedVecMap<T>(dst + off[0], n, Eigen::InnerStride<>(st[0])) =
          ConstStridedVecMap<T>(src + off[1], n, Eigen::InnerStride<>(st[1]));
  });
}

/// dst[i * dst_strides] += src[i * src_strides]; a dst stride of 0 sums over that dim.
template <typename T>
void strided_accumulate(T* dst, const index_t* dst_strides, const T* src, const index_t* src_strides,
                        const index_t* sizes, int rank) {
  StridedLoop<2> loop;
  for (int d = 0; d < rank; ++d) loop.add_dim(sizes[d], {dst_strides[d], src_strides[d]});
  loop.coalesce();
  if constexpr (std::is_integral_v<T>) {  // wrapping around on overflow, as PyTorch's (rules.hpp)
    loop.for_each_run([&](const std::array<index_t, 2>& off, index_t n, const std::array<index_t, 2>& st) {
      for (index_t i = 0; i < n; ++i)
        dst[off[0] + i * st[0]] = wrapping_add(dst[off[0] + i * st[0]], src[off[1] + i * st[1]]);
    });
    return;
  }
  loop.for_each_run([&](const std::array<index_t, 2>& off, index_t n, const std::array<index_t, 2>& st) {
    if (st[0] == 0 && st[1] == 1)
      dst[off[0]] += ConstVecMap<T>(src + off[1], n).sum();
    else if (st[0] == 0)
      dst[off[0]] += ConstStridedVecMap<T>(src + off[1], n, Eigen::InnerStride<>(st[1])).sum();
    else if (st[0] == 1 && st[1] == 1)
      VecMap<T>(dst + off[0], n) += ConstVecMap<T>(src + off[1], n);
    else
      StridedVecMap<T>(dst + off[0], n, Eigen::InnerStride<>(st[0])) +=
          ConstStridedVecMap<T>(src + off[1], n, Eigen::InnerStride<>(st[1]));
  });
}

}  // namespace heed::detail
