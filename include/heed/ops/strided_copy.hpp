// heed/ops/strided_copy.hpp — what the shape ops (heed/ops/shape.hpp) are made of: a
// requested shape resolved (one -1 inferred), a view under another shape, and the
// strided copies between a tensor and a contiguous one, on the CPU or through the
// device's copy_strided / copy_into_strided kernels, differentiable.
#pragma once

#include "heed/detail/header_begin.hpp"

#include <algorithm>
#include <array>
#include <numeric>
#include <vector>

#include "heed/ops/elementwise.hpp"

namespace heed {
namespace detail {

/// Resolves a requested shape with at most one -1 against numel.
inline Shape infer_shape(const std::vector<index_t>& requested, index_t numel, const Shape& from, const char* op) {
  HEED_CHECK(static_cast<int>(requested.size()) <= Shape::kMaxRank, ShapeError, op, ": rank ", requested.size(),
             " above the maximum ", Shape::kMaxRank);
  int infer_at = -1;
  index_t known = 1;  // the product of the sizes given, but for zeros
  bool has_zero = false;
  Shape shape;
  for (std::size_t d = 0; d < requested.size(); ++d) {
    const index_t size = requested[d];
    if (size == -1) {
      HEED_CHECK(infer_at < 0, ShapeError, op, ": only one dim can be -1");
      infer_at = static_cast<int>(d);
      shape.push_back(1);
      continue;
    }
    HEED_CHECK(size >= 0, ShapeError, op, ": invalid size ", size, " at dim ", d);
    has_zero |= size == 0;
    if (size > 0) known = checked_mul(known, size, op, " (sizes asked of shape ", ShapeText{from}, ")");
    shape.push_back(size);
  }
  if (has_zero) known = 0;
  if (infer_at >= 0) {
    HEED_CHECK(known > 0 && numel % known == 0, ShapeError, op, ": cannot view shape ", to_string(from), " (", numel,
               " elements) with a -1 among the other sizes");
    shape[infer_at] = numel / known;
  }
  HEED_CHECK(shape.numel(op) == numel, ShapeError, op, ": shape ", to_string(shape), " is invalid for input of shape ",
             to_string(from), " (", numel, " elements)");
  return shape;
}

/// A view of x under `shape` (same numel) whose gradient is reshaped back.
template <typename T>
Tensor<T> view_as_shape(const Tensor<T>& x, const Shape& shape) {
  Tensor<T> out = alias(x, shape);
  if (autograd::needs_grad(x))
    autograd::record(out, "ViewBackward", {x},
                     [from = x.shape()](const auto& g) { return autograd::Grads<T>{alias(g, from)}; });
  return out;
}

/// Sizes and strides (rank ≤ 16) as device kernels take them.
inline StridedShape strided_view(const index_t* sizes, const index_t* strides, int rank) {
  StridedShape view;
  view.rank = rank;
  for (int d = 0; d < rank; ++d) view.sizes[d] = sizes[d], view.strides[d] = strides[d];
  return view;
}

/// Whether the strided positions are all different: taken by increasing stride, each
/// dim must step past everything the smaller ones reach.
inline bool writes_each_once(const index_t* sizes, const index_t* strides, int rank) {
  std::vector<std::pair<index_t, index_t>> dims;  // (stride, size) of the dims that step
  for (int d = 0; d < rank; ++d)
    if (sizes[d] > 1) dims.emplace_back(strides[d], sizes[d]);
  std::sort(dims.begin(), dims.end());
  index_t reach = 0;  // the largest offset the dims so far reach
  for (const auto& [stride, size] : dims) {
    if (stride <= reach) return false;
    reach += stride * (size - 1);
  }
  return true;
}

/// Copies x into a fresh tensor of `out_shape` through per-dim source strides given in
/// the output's index space (rank ≤ 16), starting at element `src_offset`.
template <typename T>
Tensor<T> gather_strided(const Tensor<T>& x, index_t src_offset, const index_t* sizes, const index_t* src_strides,
                         int rank, const Shape& out_shape) {
  if (!x.is_cpu()) {
    Tensor<T> out = make_tensor<T>(out_shape, x.device());
    using Bits = SameWidthFloat<T>;  // an index tensor's transpose copies its bits as doubles
    kernels_for<Bits>(x.device(), "strided copy")
        .copy_strided(x.device().index(), reinterpret_cast<Bits*>(device_data(out)),
                      reinterpret_cast<const Bits*>(device_data(x) + src_offset),
                      strided_view(sizes, src_strides, rank));
    return out;
  }
  Tensor<T> out = make_tensor<T>(out_shape);
  // Nothing to copy; and the sizes' products below may overflow when a size-0 dim
  // hides large ones (x.repeat({0, 1 << 40})).
  if (out.numel() == 0) return out;
  std::array<index_t, kMaxLoopDims> dst_strides{};
  for (index_t d = rank - 1, step = 1; d >= 0; --d) {
    dst_strides[d] = step;
    step *= sizes[d];
  }
  strided_copy(out.data(), dst_strides.data(), x.data() + src_offset, src_strides, sizes, rank);
  return out;
}

/// The adjoint of gather_strided: a tensor of `in_shape` holding the sum of every g
/// element at the positions gather_strided read from.
template <typename T>
Tensor<T> scatter_strided(const Tensor<T>& g, const Shape& in_shape, index_t dst_offset, const index_t* sizes,
                          const index_t* dst_strides, int rank) {
  if (!g.is_cpu() && g.numel() == 0) {  // nothing to scatter (a stride-0 dim is harmless)
    Tensor<T> dx = make_tensor<T>(in_shape, g.device());
    device_fill(g.device(), device_data(dx), dx.numel(), T(0));
    return dx;
  }
  if (!g.is_cpu()) {
    // Each thread stores one element: positions must not repeat, or sums would race.
    HEED_CHECK(writes_each_once(sizes, dst_strides, rank), DeviceError,
               "the backward of repeat, expand and repeat_interleave (gradients added into one element) has no "
               "implementation on ",
               to_string(g.device()), " yet; gradient of shape ", to_string(g.shape()), " for an input of shape ",
               to_string(in_shape));
    Tensor<T> dx = make_tensor<T>(in_shape, g.device());
    if (g.numel() != dx.numel()) device_fill(g.device(), device_data(dx), dx.numel(), T(0));  // a slice
    kernels_for(g, "strided copy backward")
        .copy_into_strided(g.device().index(), device_data(dx) + dst_offset, device_data(g),
                           strided_view(sizes, dst_strides, rank));
    return dx;
  }
  Tensor<T> dx = make_tensor<T>(in_shape);
  if (g.numel() == 0) {  // as in gather_strided
    dx.array().setZero();
    return dx;
  }
  std::array<index_t, kMaxLoopDims> src_strides{};
  for (index_t d = rank - 1, step = 1; d >= 0; --d) {
    src_strides[d] = step;
    step *= sizes[d];
  }
  // A permutation (permute, a transpose) puts each g element in its own place of dx and
  // fills it: a copy, without zeroing dx first and adding into it.
  if (g.numel() == dx.numel() && writes_each_once(sizes, dst_strides, rank)) {
    strided_copy(dx.data() + dst_offset, dst_strides, g.data(), src_strides.data(), sizes, rank);
    return dx;
  }
  dx.array().setZero();
  strided_accumulate(dx.data() + dst_offset, dst_strides, g.data(), src_strides.data(), sizes, rank);
  return dx;
}

/// A differentiable strided gather: the op behind permute, slice, repeat, expand and
/// repeat_interleave, whose backward is the matching scatter.
template <typename T>
Tensor<T> strided_op(const Tensor<T>& x, const char* name, index_t offset, const std::vector<index_t>& sizes,
                     const std::vector<index_t>& strides, const Shape& out_shape) {
  const int rank = static_cast<int>(sizes.size());
  Tensor<T> out = gather_strided(x, offset, sizes.data(), strides.data(), rank, out_shape);
  if (autograd::needs_grad(x))
    autograd::record(out, name, {x}, [in_shape = x.shape(), offset, sizes, strides](const auto& g) {
      return autograd::Grads<T>{
          scatter_strided(g, in_shape, offset, sizes.data(), strides.data(), static_cast<int>(sizes.size()))};
    });
  return out;
}

}  // namespace detail

}  // namespace heed

#include "heed/detail/header_end.hpp"
