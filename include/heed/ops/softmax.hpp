// heed/ops/softmax.hpp — softmax and log-softmax over any dim, fused.
//
//   x: (B, T, C)    softmax(x, -1): each (b, t) row sums to 1
//
// Each is one primitive with a closed-form backward, rather than a composition of
// exp, sum and div, so that a row is read once per pass and stays in cache:
//   y = softmax(x):      dx = y · (g − Σ g·y)
//   y = log_softmax(x):  dx = g − exp(y) · Σ g
// Rows split across OpenMP threads when the user's build enables OpenMP.
#pragma once

#include "heed/detail/header_begin.hpp"

#include "heed/ops/elementwise.hpp"
#include "heed/ops/reduce.hpp"
#include "heed/ops/shape.hpp"

namespace heed {
namespace detail {

template <typename T>
using Slab = Eigen::Map<Eigen::Array<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>;
template <typename T>
using ConstSlab = Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>;

/// Calls row(out, in...) on each contiguous row when dim is the last one, else
/// slab(out, in...) on each (size × inner) slab, reducing down its columns.
template <typename T, typename Row, typename SlabFn, typename... In>
Tensor<T> over_dim(const Shape& shape, int dim, Row&& row, SlabFn&& slab, const In&... in) {
  const DimSplit s(shape, dim);
  Tensor<T> out = make_tensor<T>(shape);
  if (out.numel() == 0) return out;  // no rows: Eigen's maxCoeff must not see an empty one
  T* o = out.data();
  const index_t block = s.size * s.inner;
  parallel_for(s.outer, kParallelGrain / std::max<index_t>(block, 1) + 1, [&](index_t begin, index_t end) {
    for (index_t i = begin; i < end; ++i) {
      if (s.inner == 1)
        row(VecMap<T>(o + i * block, s.size), ConstVecMap<T>(in.data() + i * block, s.size)...);
      else
        slab(Slab<T>(o + i * block, s.size, s.inner), ConstSlab<T>(in.data() + i * block, s.size, s.inner)...);
    }
  });
  return out;
}

/// d loss / d x for y = softmax(x, dim) and g = d loss / d y: y · (g − Σ g·y).
template <typename T>
Tensor<T> softmax_backward(const Tensor<T>& g, const Tensor<T>& y, int dim) {
  if (on_device("softmax backward", g, y)) {
    HEED_CHECK(g.dim() == 0 || dim == g.dim() - 1, DeviceError, "softmax backward: on ", to_string(g.device()),
               " only over the last dim, not dim ", dim, " of ", to_string(g.shape()));
    Tensor<T> grad = make_tensor<T>(g.shape(), g.device());
    const index_t cols = g.dim() == 0 ? 1 : g.shape()[-1];
    kernels_for(g, "softmax backward")
        .softmax_backward(g.device().index(), device_data(grad), device_data(g), device_data(y),
                          g.numel() / std::max<index_t>(cols, 1), cols);
    return grad;
  }
  return over_dim<T>(
      g.shape(), dim, [](auto dx, const auto& gg, const auto& yy) { dx = yy * (gg - (gg * yy).sum()); },
      [](auto dx, const auto& gg, const auto& yy) { dx = yy * (gg.rowwise() - (gg * yy).colwise().sum()); }, g, y);
}

/// Softmax over the last dim on a device: the masked softmax kernel, without a mask.
template <typename T>
Tensor<T> softmax_last_on_device(const Tensor<T>& x) {
  const index_t cols = x.dim() == 0 ? 1 : x.shape()[-1];
  Tensor<T> out = make_tensor<T>(x.shape(), x.device());
  if (x.numel() > 0)
    kernels_for(x, "softmax")
        .masked_softmax_forward(x.device().index(), device_data(out), device_data(x), 1, 1, x.numel() / cols, cols,
                                SoftmaxMask<T>{});
  return out;
}

}  // namespace detail

template <typename T>
Tensor<T> softmax(const Tensor<T>& x, int dim) {
  detail::check_defined(x, "softmax", "x");
  detail::check_floating<T>("softmax");
  dim = detail::normalize_dim(dim, x.dim(), "softmax");
  // A device's kernel takes rows of the last dim: another dim goes there and back.
  if (!x.is_cpu() && x.dim() > 1 && dim != x.dim() - 1) return transpose(softmax(transpose(x, dim, -1), -1), dim, -1);
  Tensor<T> out = !x.is_cpu() ? detail::softmax_last_on_device(x)
                              : detail::over_dim<T>(
                                    x.shape(), dim,
                                    [](auto y, const auto& in) {
                                      y = (in - in.maxCoeff()).exp();  // subtracting the max keeps exp from overflowing
                                      detail::flush_exp_underflow(y.data(), y.size());
                                      y *= T(1) / y.sum();
                                    },
                                    [](auto y, const auto& in) {
                                      y = (in.rowwise() - in.colwise().maxCoeff()).exp();
                                      detail::flush_exp_underflow(y.data(), y.size());
                                      y.rowwise() /= y.colwise().sum();
                                    },
                                    x);
  if (autograd::needs_grad(x))
    autograd::record(out, "SoftmaxBackward", {x}, [dim, saved = autograd::save(out)](const Tensor<T>& g) {
      return autograd::Grads<T>{detail::softmax_backward(g, saved.get(), dim)};
    });
  return out;
}

template <typename T>
Tensor<T> log_softmax(const Tensor<T>& x, int dim) {
  detail::check_defined(x, "log_softmax", "x");
  detail::check_floating<T>("log_softmax");
  dim = detail::normalize_dim(dim, x.dim(), "log_softmax");
  if (!x.is_cpu()) {
    if (x.dim() > 0 && x.shape()[dim] == 0) return clone(x);  // nothing to reduce over, nothing out
    // x − (max + log Σ exp(x − max)), the CPU's formula, from ops with device kernels; the
    // max only keeps exp in range, so the graph holds it as a constant.
    const Tensor<T> max = heed::max(x.detach(), dim, true);
    return x - (max + log(sum(exp(x - max), dim, true)));
  }
  Tensor<T> out = detail::over_dim<T>(
      x.shape(), dim,
      [](auto y, const auto& in) {
        const T max = in.maxCoeff();
        y = in - (max + std::log((in - max).exp().sum()));
      },
      [](auto y, const auto& in) {
        const auto max = in.colwise().maxCoeff().eval();
        const auto log_sum = ((in.rowwise() - max).exp().colwise().sum().log() + max).eval();
        y = in.rowwise() - log_sum;
      },
      x);
  if (autograd::needs_grad(x))
    autograd::record(out, "LogSoftmaxBackward", {x}, [dim, saved = autograd::save(out)](const Tensor<T>& g) {
      return autograd::Grads<T>{detail::over_dim<T>(
          g.shape(), dim, [](auto dx, const auto& gg, const auto& y) { dx = gg - y.exp() * gg.sum(); },
          [](auto dx, const auto& gg, const auto& y) { dx = gg - y.exp().rowwise() * gg.colwise().sum(); }, g,
          saved.get())};
    });
  return out;
}

template <typename T>
Tensor<T> Tensor<T>::softmax(int dim) const {
  return heed::softmax(*this, dim);
}
template <typename T>
Tensor<T> Tensor<T>::log_softmax(int dim) const {
  return heed::log_softmax(*this, dim);
}

}  // namespace heed

#include "heed/detail/header_end.hpp"
