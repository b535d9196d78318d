// heed/ops/reduce.hpp — sum, mean, max and argmax, over everything or one dim.
//
//   x: (2, 3)
//   x.sum()            -> ()        x.sum(1)          -> (2)
//   x.mean(0, true)    -> (1, 3)    x.argmax(1)       -> (2), Tensor<int64_t>
//
// The gradient of max flows to the position argmax reports (the first maximum).
#pragma once

#include "heed/detail/header_begin.hpp"

#include <limits>

#include "heed/core/factory.hpp"
#include "heed/ops/elementwise.hpp"

namespace heed {
namespace detail {

inline Shape kept_shape(const Shape& shape, int dim) {
  Shape kept = shape;
  kept[dim] = 1;
  return kept;
}

inline Shape dropped_shape(const Shape& shape, int dim) {
  Shape out = shape;
  out.erase(dim);
  return out;
}

/// Max over dim (keepdim shape) and the index of the first maximum.
template <typename T>
std::pair<Tensor<T>, Tensor<std::int64_t>> max_along(const Tensor<T>& x, int dim, const char* op) {
  const DimSplit s(x.shape(), dim);
  HEED_CHECK(s.size > 0, ValueError, op, ": cannot reduce over dim ", dim, " of size 0 (shape ", to_string(x.shape()),
             ")");
  const Shape kept = x.dim() ? kept_shape(x.shape(), dim) : Shape{};
  Tensor<T> values = make_tensor<T>(kept);
  Tensor<std::int64_t> indices = make_tensor<std::int64_t>(kept);
  const T* in = x.data();
  for (index_t o = 0; o < s.outer; ++o) {
    for (index_t i = 0; i < s.inner; ++i) {
      const T* p = in + o * s.size * s.inner + i;
      index_t best = 0;
      for (index_t k = 1; k < s.size; ++k)
        if (p[k * s.inner] > p[best * s.inner]) best = k;
      values.data()[o * s.inner + i] = p[best * s.inner];
      indices.data()[o * s.inner + i] = best;
    }
  }
  return {values, indices};
}

}  // namespace detail

namespace detail {

/// Σ over dim with the dim kept as size 1, not recorded.
template <typename T>
Tensor<T> sum_along(const Tensor<T>& x, int dim) {
  const Shape kept = kept_shape(x.shape(), dim);
  return x.shape() == kept ? copy_of(x) : sum_to(x, kept);
}

/// Records the node of sum (scale 1) or mean (scale 1/n): the gradient, of the
/// result's shape, is viewed with the reduced dims kept and spread back over them.
template <typename T>
void record_reduction(Tensor<T>& out, const Tensor<T>& x, const char* name, const Shape& kept, T scale) {
  if (autograd::needs_grad(x))
    autograd::record(out, name, {x}, [shape = x.shape(), kept, scale](const Tensor<T>& g) {
      const Tensor<T> spread = broadcast_to(alias(g, kept), shape);
      return autograd::Grads<T>{scale == T(1) ? spread : mul(spread, scale)};
    });
}

}  // namespace detail

/// Sum of all elements, as a rank-0 tensor.
namespace detail {
/// Σ x as a 0-d tensor on x's device.
template <typename T>
Tensor<T> total(const Tensor<T>& x) {
  if (!x.is_cpu()) return x.dim() == 0 ? copy_of(x) : sum_to(x, Shape{});
  return scalar_tensor<T>(x.array().sum());
}
}  // namespace detail

template <typename T>
Tensor<T> sum(const Tensor<T>& x) {
  Tensor<T> out = detail::total(x);
  detail::record_reduction(out, x, "SumBackward", Shape{}, T(1));
  return out;
}

/// Sum over dim; keepdim leaves it as size 1.
template <typename T>
Tensor<T> sum(const Tensor<T>& x, int dim, bool keepdim = false) {
  dim = detail::normalize_dim(dim, x.dim(), "sum");
  if (x.dim() == 0) return sum(x);
  const Tensor<T> summed = detail::sum_along(x, dim);
  Tensor<T> out = keepdim ? summed : detail::alias(summed, detail::dropped_shape(x.shape(), dim));
  detail::record_reduction(out, x, "SumBackward", summed.shape(), T(1));
  return out;
}

/// Mean of all elements, as a rank-0 tensor.
template <typename T>
Tensor<T> mean(const Tensor<T>& x) {
  HEED_CHECK(x.numel() > 0, ValueError, "mean: empty tensor of shape ", to_string(x.shape()));
  Tensor<T> out =
      !x.is_cpu() ? mul(detail::total(x), T(1) / static_cast<T>(x.numel())) : scalar_tensor<T>(x.array().mean());
  detail::record_reduction(out, x, "MeanBackward", Shape{}, T(1) / static_cast<T>(x.numel()));
  return out;
}

/// Mean over dim; keepdim leaves it as size 1.
template <typename T>
Tensor<T> mean(const Tensor<T>& x, int dim, bool keepdim = false) {
  dim = detail::normalize_dim(dim, x.dim(), "mean");
  if (x.dim() == 0) return mean(x);
  const index_t n = x.shape()[dim];
  HEED_CHECK(n > 0, ValueError, "mean: dim ", dim, " of shape ", to_string(x.shape()), " is empty");
  Tensor<T> summed = detail::sum_along(x, dim);
  if (!summed.is_cpu())
    summed = mul(summed, T(1) / static_cast<T>(n));
  else
    summed.array() /= static_cast<T>(n);
  Tensor<T> out = keepdim ? summed : detail::alias(summed, detail::dropped_shape(x.shape(), dim));
  detail::record_reduction(out, x, "MeanBackward", summed.shape(), T(1) / static_cast<T>(n));
  return out;
}

/// Largest element, as a rank-0 tensor.
template <typename T>
Tensor<T> max(const Tensor<T>& x) {
  HEED_CHECK(x.numel() > 0, ValueError, "max: empty tensor of shape ", to_string(x.shape()));
  auto [values, indices] = detail::max_along(detail::alias(x, Shape{x.numel()}), 0, "max");
  Tensor<T> out = detail::alias(values, Shape{});
  if (autograd::needs_grad(x))
    autograd::record(out, "MaxBackward", {x}, [shape = x.shape(), at = indices.item()](const Tensor<T>& g) {
      Tensor<T> dx = detail::make_tensor<T>(shape);
      dx.array().setZero();
      dx.data()[at] = g.item();
      return autograd::Grads<T>{dx};
    });
  return out;
}

/// Largest element along dim.
template <typename T>
Tensor<T> max(const Tensor<T>& x, int dim, bool keepdim = false) {
  dim = detail::normalize_dim(dim, x.dim(), "max");
  auto values_and_indices = detail::max_along(x, dim, "max");
  const Tensor<T>& values = values_and_indices.first;
  const Tensor<std::int64_t>& indices = values_and_indices.second;
  Tensor<T> out = keepdim || x.dim() == 0 ? values : detail::alias(values, detail::dropped_shape(x.shape(), dim));
  if (autograd::needs_grad(x))
    autograd::record(out, "MaxBackward", {x}, [shape = x.shape(), dim, indices](const Tensor<T>& g) {
      // d max = dx at the argmax, 0 elsewhere
      Tensor<T> dx = detail::make_tensor<T>(shape);
      dx.array().setZero();
      const detail::DimSplit s(shape, dim);
      for (index_t o = 0; o < s.outer; ++o)
        for (index_t i = 0; i < s.inner; ++i)
          dx.data()[(o * s.size + indices.data()[o * s.inner + i]) * s.inner + i] = g.data()[o * s.inner + i];
      return autograd::Grads<T>{dx};
    });
  return out;
}

/// Index of the first largest element along dim.
template <typename T>
Tensor<std::int64_t> argmax(const Tensor<T>& x, int dim, bool keepdim = false) {
  dim = detail::normalize_dim(dim, x.dim(), "argmax");
  Tensor<std::int64_t> indices = detail::max_along(x, dim, "argmax").second;
  return keepdim || x.dim() == 0 ? indices : detail::alias(indices, detail::dropped_shape(x.shape(), dim));
}

// clang-format off
template <typename T> Tensor<T> Tensor<T>::sum() const { return heed::sum(*this); }
template <typename T> Tensor<T> Tensor<T>::sum(int dim, bool keepdim) const { return heed::sum(*this, dim, keepdim); }
template <typename T> Tensor<T> Tensor<T>::mean() const { return heed::mean(*this); }
template <typename T> Tensor<T> Tensor<T>::mean(int dim, bool keepdim) const { return heed::mean(*this, dim, keepdim); }
template <typename T> Tensor<T> Tensor<T>::max() const { return heed::max(*this); }
template <typename T> Tensor<T> Tensor<T>::max(int dim, bool keepdim) const { return heed::max(*this, dim, keepdim); }
// clang-format on
template <typename T>
Tensor<std::int64_t> Tensor<T>::argmax(int dim, bool keepdim) const {
  return heed::argmax(*this, dim, keepdim);
}

}  // namespace heed

#include "heed/detail/header_end.hpp"
