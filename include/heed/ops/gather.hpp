// heed/ops/gather.hpp — reading and adding along a dim at positions an index tensor
// holds, and selecting by a mask, as PyTorch's gather, scatter_add and masked_select.
//
//   x: (2, 3), index: (2, 2) int64 in [0, 3)
//   heed::gather(x, 1, index)             -> (2, 2): out[i][j] = x[i][index[i][j]]
//   heed::scatter_add(x, 1, index, src)   -> (2, 3): out[i][index[i][j]] += src[i][j]
//   heed::masked_select(x, x > 0.f)       -> (n), the elements where the mask is true
//
// The index has x's rank and, but along dim, sizes no larger than x's (and src's for
// scatter_add). Each op is differentiable in its floating-point inputs; the gradient of
// gather adds into every position read, as scatter_add does.
#pragma once

#include "heed/detail/header_begin.hpp"

#include <vector>

#include "heed/ops/elementwise.hpp"

namespace heed {
namespace detail {

/// Where each element of index (row-major) points: its offset in a tensor of shape
/// `into` with its coordinate along dim replaced by the index's value, and its offset in
/// a tensor of shape `alongside` at its own coordinates.
struct IndexOffsets {
  std::vector<index_t> into, alongside;
};

inline IndexOffsets index_offsets(const IndexTensor& index, int dim, const Shape& into, const Shape& alongside,
                                  const char* op) {
  HEED_CHECK(index.dim() == into.rank(), ShapeError, op, ": index of shape ", to_string(index.shape()),
             " must have the rank of the input, of shape ", to_string(into));
  for (int d = 0; d < index.dim(); ++d) {
    HEED_CHECK(d == dim || index.shape()[d] <= into[d], ShapeError, op, ": index of shape ", to_string(index.shape()),
               " is larger than the input, of shape ", to_string(into), ", at dim ", d);
    HEED_CHECK(index.shape()[d] <= alongside[d], ShapeError, op, ": index of shape ", to_string(index.shape()),
               " is larger than src, of shape ", to_string(alongside), ", at dim ", d);
  }
  const index_t size = into.rank() ? into[dim] : 1;
  const auto into_strides = into.strides(), alongside_strides = alongside.strides();
  IndexOffsets offsets;
  offsets.into.resize(static_cast<std::size_t>(index.numel()));
  offsets.alongside.resize(static_cast<std::size_t>(index.numel()));
  const std::int64_t* values = index.data();
  for (index_t p = 0; p < index.numel(); ++p) {
    const std::int64_t value = values[p];
    HEED_CHECK(value >= 0 && value < size, IndexError, op, ": index ", value, " out of range for dim ", dim,
               " of size ", size, " (input of shape ", to_string(into), ")");
    index_t rest = p, into_offset = 0, alongside_offset = 0;
    for (int d = index.dim() - 1; d >= 0; --d) {
      const index_t coordinate = rest % index.shape()[d];
      rest /= index.shape()[d];
      into_offset += (d == dim ? value : coordinate) * into_strides[d];
      alongside_offset += coordinate * alongside_strides[d];
    }
    offsets.into[static_cast<std::size_t>(p)] = into_offset;
    offsets.alongside[static_cast<std::size_t>(p)] = alongside_offset;
  }
  return offsets;
}

/// The ops of this file run on the CPU only.
inline void check_on_cpu(const char* op, Device x, Device other) {
  HEED_CHECK(x.is_cpu() && other.is_cpu(), DeviceError, op, ": no implementation on ",
             to_string(x.is_cpu() ? other : x), " yet (move the tensors with .to(heed::Device::cpu()))");
}

/// A tensor of `shape`, zero but for values[k] added at offsets[k] (repeats add up).
template <typename T>
Tensor<T> add_at(const Shape& shape, const std::vector<index_t>& offsets, const T* values) {
  Tensor<T> out = make_tensor<T>(shape);
  out.array().setZero();
  for (std::size_t k = 0; k < offsets.size(); ++k) out.data()[offsets[k]] += values[k];
  return out;
}

}  // namespace detail

/// out[i][j][k] = x[i][index[i][j][k]][k] for dim 1 (any rank): out has index's shape.
template <typename T>
Tensor<T> gather(const Tensor<T>& x, int dim, const IndexTensor& index) {
  detail::check_defined(x, "gather", "x");
  detail::check_defined(index, "gather", "index");
  dim = detail::normalize_dim(dim, x.dim(), "gather");
  detail::check_on_cpu("gather", x.device(), index.device());
  const detail::IndexOffsets offsets = detail::index_offsets(index, dim, x.shape(), index.shape(), "gather");
  Tensor<T> out = detail::make_tensor<T>(index.shape());
  for (std::size_t k = 0; k < offsets.into.size(); ++k) out.data()[k] = x.data()[offsets.into[k]];
  if (autograd::needs_grad(x))
    autograd::record(out, "GatherBackward", {x}, [shape = x.shape(), into = offsets.into](const Tensor<T>& g) {
      return autograd::Grads<T>{detail::add_at(shape, into, g.data())};
    });
  return out;
}

/// x with src[i][j][k] added into position [i][index[i][j][k]][k] for dim 1 (any rank;
/// repeats add up). src is at least as large as index in every dim.
template <typename T>
Tensor<T> scatter_add(const Tensor<T>& x, int dim, const IndexTensor& index, const Tensor<T>& src) {
  detail::check_defined(x, "scatter_add", "x");
  detail::check_defined(index, "scatter_add", "index");
  detail::check_defined(src, "scatter_add", "src");
  dim = detail::normalize_dim(dim, x.dim(), "scatter_add");
  detail::check_on_cpu("scatter_add", x.device(), src.device());
  detail::check_on_cpu("scatter_add", x.device(), index.device());
  HEED_CHECK(src.dim() == x.dim(), ShapeError, "scatter_add: src of shape ", to_string(src.shape()),
             " must have the rank of the input, of shape ", to_string(x.shape()));
  const detail::IndexOffsets offsets = detail::index_offsets(index, dim, x.shape(), src.shape(), "scatter_add");
  Tensor<T> out = detail::copy_of(x);
  for (std::size_t k = 0; k < offsets.into.size(); ++k) out.data()[offsets.into[k]] += src.data()[offsets.alongside[k]];
  if (autograd::needs_grad(x, src))
    autograd::record(out, "ScatterAddBackward", {x, src}, [src_shape = src.shape(), offsets](const Tensor<T>& g) {
      Tensor<T> dsrc = detail::make_tensor<T>(src_shape);
      dsrc.array().setZero();
      for (std::size_t k = 0; k < offsets.into.size(); ++k)
        dsrc.data()[offsets.alongside[k]] = g.data()[offsets.into[k]];
      return autograd::Grads<T>{g, dsrc};
    });
  return out;
}

/// The elements of x where mask is true, in row-major order, as a 1-D tensor. x and
/// mask broadcast together, as in torch.masked_select.
template <typename T>
Tensor<T> masked_select(const Tensor<T>& x, const Tensor<bool>& mask) {
  detail::check_defined(x, "masked_select", "x");
  detail::check_defined(mask, "masked_select", "mask");
  detail::check_on_cpu("masked_select", x.device(), mask.device());
  const Shape shape = detail::broadcast_shapes(x.shape(), mask.shape(), "masked_select");
  const Tensor<T> values = detail::broadcast_to(x, shape);
  const Tensor<bool> chosen = detail::broadcast_to(mask, shape);
  std::vector<index_t> offsets;
  for (index_t i = 0; i < chosen.numel(); ++i)
    if (chosen.data()[i]) offsets.push_back(i);
  Tensor<T> out = detail::make_tensor<T>(Shape{static_cast<index_t>(offsets.size())});
  for (std::size_t k = 0; k < offsets.size(); ++k) out.data()[k] = values.data()[offsets[k]];
  if (autograd::needs_grad(x))
    autograd::record(out, "MaskedSelectBackward", {x}, [shape, from = x.shape(), offsets](const Tensor<T>& g) {
      return autograd::Grads<T>{detail::sum_to(detail::add_at(shape, offsets, g.data()), from)};
    });
  return out;
}

// clang-format off
template <typename T> Tensor<T> Tensor<T>::gather(int dim, const IndexTensor& index) const { return heed::gather(*this, dim, index); }
template <typename T> Tensor<T> Tensor<T>::scatter_add(int dim, const IndexTensor& index, const Tensor& src) const { return heed::scatter_add(*this, dim, index, src); }
template <typename T> Tensor<T> Tensor<T>::masked_select(const Tensor<bool>& mask) const { return heed::masked_select(*this, mask); }
// clang-format on

}  // namespace heed

#include "heed/detail/header_end.hpp"
