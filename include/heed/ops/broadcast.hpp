// heed/ops/broadcast.hpp — the two halves of broadcasting, for use inside ops.
//
// broadcast_to copies a tensor out to a larger broadcast-compatible shape;
// sum_to sums a gradient back down to the shape of the input it belongs to
// (summing the dims that were added or stretched from 1). Neither records a graph:
// ops call them in forward passes they differentiate themselves, and in backward.
#pragma once

#include "heed/detail/header_begin.hpp"

#include "heed/core/tensor.hpp"
#include "heed/detail/strided.hpp"
#include "heed/ops/kernels.hpp"

namespace heed::detail {

/// Whether `shape` broadcasts to `target` (right-aligned, each size equal or 1).
inline bool broadcasts_to(const Shape& shape, const Shape& target) {
  if (shape.rank() > target.rank()) return false;
  for (int d = 1; d <= shape.rank(); ++d)
    if (shape[-d] != 1 && shape[-d] != target[-d]) return false;
  return true;
}

/// `shape` with the strides that read an operand broadcast to it, for device kernels.
inline StridedShape strided_shape(const Shape& shape, const std::array<index_t, kMaxLoopDims>& strides) {
  StridedShape result;
  result.rank = shape.rank();
  for (int d = 0; d < shape.rank(); ++d) result.sizes[d] = shape[d], result.strides[d] = strides[d];
  return result;
}

/// An operand of shape `from` read as broadcast to `shape`, for device kernels.
inline StridedShape broadcast_view(const Shape& from, const Shape& shape) {
  return strided_shape(shape, broadcast_strides(from, shape));
}

template <typename T>
Tensor<T> broadcast_to(const Tensor<T>& x, const Shape& shape) {
  if (x.shape() == shape) return x;
  if (!x.is_cpu()) {  // a gather through the broadcast strides
    Tensor<T> out = make_tensor<T>(shape, x.device());
    kernels_for(x, "broadcast_to")
        .copy_strided(x.device().index(), device_data(out), device_data(x), broadcast_view(x.shape(), shape));
    return out;
  }
  Tensor<T> out = make_tensor<T>(shape);
  const auto src_strides = broadcast_strides(x.shape(), shape);
  const auto dst_strides = shape.strides();
  strided_copy(out.data(), dst_strides.data(), x.data(), src_strides.data(), shape.begin(), shape.rank());
  return out;
}

/// Sums g (of a broadcast result's shape) down to `shape`. Returns g itself if equal.
template <typename T>
Tensor<T> sum_to(const Tensor<T>& g, const Shape& shape) {
  if (g.shape() == shape) return g;
  if (!g.is_cpu()) {
    Tensor<T> out = make_tensor<T>(shape, g.device());
    kernels_for(g, "sum_to")
        .sum_to(g.device().index(), device_data(out), out.numel(), device_data(g), broadcast_view(shape, g.shape()));
    return out;
  }
  Tensor<T> out = make_tensor<T>(shape);
  out.array().setZero();
  const auto dst_strides = broadcast_strides(shape, g.shape());
  const auto src_strides = g.shape().strides();
  strided_accumulate(out.data(), dst_strides.data(), g.data(), src_strides.data(), g.shape().begin(), g.shape().rank());
  return out;
}

}  // namespace heed::detail

#include "heed/detail/header_end.hpp"
