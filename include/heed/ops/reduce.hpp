// heed/ops/reduce.hpp — sum, mean, var, std, prod, max, min, argmax and argmin, over
// everything, one dim or (sum, mean, var, std) a list of dims.
//
//   x: (2, 3)
//   x.sum()            -> ()        x.sum(1)          -> (2)        x.sum({0, 1}) -> ()
//   x.mean(0, true)    -> (1, 3)    x.argmax(1)       -> (2), Tensor<int64_t>
//   x.var(1)           -> (2), with Bessel's correction as torch.var
//   auto [values, indices] = heed::max_with_indices(x, 1);   // torch.max(x, 1)
//
// As in PyTorch: max and min along a dim report the first extreme and send the
// gradient there; over everything they share it evenly among tied extremes; NaN counts
// as larger than any number, so it is what max and min return where a row holds one.
#pragma once

#include "heed/detail/header_begin.hpp"

#include <algorithm>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "heed/core/factory.hpp"
#include "heed/detail/rules.hpp"
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

/// "[0, -1]": a list of dims, for messages.
inline std::string dims_text(const std::vector<int>& dims) {
  std::string text = "[";
  for (std::size_t i = 0; i < dims.size(); ++i) text += (i ? ", " : "") + std::to_string(dims[i]);
  return text + "]";
}

/// A reduction over a list of dims (every dim when the list is empty): the shape with
/// them kept as size 1, the shape without them, and how many elements each result sums.
struct Reduced {
  Shape kept, dropped;
  index_t count = 1;
  Reduced(const Shape& shape, const std::vector<int>& dims, const char* op) {
    std::vector<bool> reduced(static_cast<std::size_t>(shape.rank()), dims.empty());
    // A scalar accepts dim 0 and -1 (both its one "dim"), but only once, as PyTorch.
    std::vector<bool> seen(static_cast<std::size_t>(std::max(shape.rank(), 1)), false);
    for (int d : dims) {
      const int nd = normalize_dim(d, shape.rank(), op);
      HEED_CHECK(!seen[static_cast<std::size_t>(nd)], ValueError, op, ": dim ", d, " appears twice in ",
                 dims_text(dims), " (shape ", to_string(shape), ")");
      seen[static_cast<std::size_t>(nd)] = true;
      if (shape.rank()) reduced[static_cast<std::size_t>(nd)] = true;
    }
    for (int d = 0; d < shape.rank(); ++d) {
      const bool r = reduced[static_cast<std::size_t>(d)];
      kept.push_back(r ? 1 : shape[d]);
      if (!r) dropped.push_back(shape[d]);
      if (r) count *= shape[d];
    }
  }
};

/// Max (min with !largest) over dim (keepdim shape) and the index of the first one.
template <typename T>
std::pair<Tensor<T>, Tensor<std::int64_t>> max_along(const Tensor<T>& x, int dim, const char* op, bool largest = true) {
  const DimSplit s(x.shape(), dim);
  HEED_CHECK(s.size > 0, ValueError, op, ": cannot reduce over dim ", dim, " of size 0 (shape ", to_string(x.shape()),
             ")");
  const Shape kept = x.dim() ? kept_shape(x.shape(), dim) : Shape{};
  Tensor<T> values = make_tensor<T>(kept, x.device());
  Tensor<std::int64_t> indices = make_tensor<std::int64_t>(kept, x.device());
  if (!x.is_cpu()) {
    kernels_for(x, op).extreme_along(x.device().index(), device_data(values), device_data(indices), device_data(x),
                                     s.outer, s.size, s.inner, largest);
    return {values, indices};
  }
  const T* in = x.data();
  for (index_t o = 0; o < s.outer; ++o) {
    for (index_t i = 0; i < s.inner; ++i) {
      const T* p = in + o * s.size * s.inner + i;
      index_t best = 0;
      for (index_t k = 1; k < s.size; ++k)
        if (beats(p[k * s.inner], p[best * s.inner], largest)) best = k;
      values.data()[o * s.inner + i] = p[best * s.inner];
      indices.data()[o * s.inner + i] = best;
    }
  }
  return {values, indices};
}

}  // namespace detail

/// How a loss over many elements or rows is reduced, as PyTorch's `reduction=` argument
/// (heed/ops/cross_entropy.hpp, heed/ops/loss.hpp).
enum class Reduction { none, mean, sum };

/// The values a reduction or a sort picks and their indices along its dim, as PyTorch's
/// torch.return_types: auto [values, indices] = heed::sort(x).
template <typename T>
struct ValuesIndices {
  Tensor<T> values;
  Tensor<std::int64_t> indices;
};

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
  if constexpr (std::is_integral_v<T>) {  // wrapping around on overflow, as PyTorch's (rules.hpp)
    T s = T(0);
    for (index_t i = 0; i < x.numel(); ++i) s = wrapping_add(s, x.data()[i]);
    return scalar_tensor<T>(s);
  }
  return scalar_tensor<T>(x.array().sum());
}
}  // namespace detail

template <typename T>
Tensor<T> sum(const Tensor<T>& x) {
  detail::check_defined(x, "sum", "x");
  Tensor<T> out = detail::total(x);
  detail::record_reduction(out, x, "SumBackward", Shape{}, T(1));
  return out;
}

/// Sum over dim; keepdim leaves it as size 1.
template <typename T>
Tensor<T> sum(const Tensor<T>& x, int dim, bool keepdim = false) {
  detail::check_defined(x, "sum", "x");
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
  detail::check_defined(x, "mean", "x");
  HEED_CHECK(x.numel() > 0, ValueError, "mean: empty tensor of shape ", to_string(x.shape()));
  Tensor<T> out =
      !x.is_cpu() ? mul(detail::total(x), T(1) / static_cast<T>(x.numel())) : scalar_tensor<T>(x.array().mean());
  detail::record_reduction(out, x, "MeanBackward", Shape{}, T(1) / static_cast<T>(x.numel()));
  return out;
}

/// Mean over dim; keepdim leaves it as size 1.
template <typename T>
Tensor<T> mean(const Tensor<T>& x, int dim, bool keepdim = false) {
  detail::check_defined(x, "mean", "x");
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

/// Sums over `dims` (PyTorch's dim=[...]; an empty list means every dim).
template <typename T>
Tensor<T> sum(const Tensor<T>& x, const std::vector<int>& dims, bool keepdim = false) {
  detail::check_defined(x, "sum", "x");
  const detail::Reduced r(x.shape(), dims, "sum");
  const Tensor<T> summed = x.shape() == r.kept ? detail::copy_of(x) : detail::sum_to(x, r.kept);
  Tensor<T> out = keepdim ? summed : detail::alias(summed, r.dropped);
  detail::record_reduction(out, x, "SumBackward", r.kept, T(1));
  return out;
}

/// Means over `dims` (an empty list means every dim).
template <typename T>
Tensor<T> mean(const Tensor<T>& x, const std::vector<int>& dims, bool keepdim = false) {
  detail::check_defined(x, "mean", "x");
  const detail::Reduced r(x.shape(), dims, "mean");
  HEED_CHECK(r.count > 0, ValueError, "mean: the dims ", detail::dims_text(dims), " of shape ", to_string(x.shape()),
             " hold no element");
  const T scale = T(1) / static_cast<T>(r.count);
  Tensor<T> summed = x.shape() == r.kept ? detail::copy_of(x) : detail::sum_to(x, r.kept);
  if (summed.is_cpu())
    summed.array() *= scale;
  else
    summed = mul(summed, scale);
  Tensor<T> out = keepdim ? summed : detail::alias(summed, r.dropped);
  detail::record_reduction(out, x, "MeanBackward", r.kept, scale);
  return out;
}

namespace detail {

/// Σ (x − mean)² / max(0, n − correction) over dims, for var and std (op).
template <typename T>
Tensor<T> variance(const Tensor<T>& x, const std::vector<int>& dims, bool keepdim, double correction, const char* op) {
  const Reduced r(x.shape(), dims, op);
  HEED_CHECK(r.count > 0, ValueError, op, ": the dims ", dims_text(dims), " of shape ", to_string(x.shape()),
             " hold no element");
  HEED_CHECK(correction >= 0.0, ValueError, op, ": correction must be non-negative, got ", correction);
  const Tensor<T> centred = sub(x, mean(x, dims, true));
  const double divisor = std::max(0.0, static_cast<double>(r.count) - correction);
  return div(sum(mul(centred, centred), dims, keepdim), scalar_tensor<T>(static_cast<T>(divisor)).to(x.device()));
}

}  // namespace detail

/// Variance over `dims` (an empty list means every dim): Σ (x − mean)² / (n − correction),
/// torch.var's default correction 1 (Bessel's). n ≤ correction gives inf or NaN, as there.
template <typename T>
Tensor<T> var(const Tensor<T>& x, const std::vector<int>& dims, bool keepdim = false, double correction = 1.0) {
  detail::check_defined(x, "var", "x");
  return detail::variance(x, dims, keepdim, correction, "var");
}
/// Variance over one dim.
template <typename T>
Tensor<T> var(const Tensor<T>& x, int dim, bool keepdim = false, double correction = 1.0) {
  detail::check_defined(x, "var", "x");
  return var(x, std::vector<int>{dim}, keepdim, correction);
}
/// Variance of all elements.
template <typename T>
Tensor<T> var(const Tensor<T>& x) {
  detail::check_defined(x, "var", "x");
  return var(x, std::vector<int>{});
}

/// Standard deviation: √var, with var's arguments.
template <typename T>
Tensor<T> std(const Tensor<T>& x, const std::vector<int>& dims, bool keepdim = false, double correction = 1.0) {
  detail::check_defined(x, "std", "x");
  return sqrt(detail::variance(x, dims, keepdim, correction, "std"));
}
template <typename T>
Tensor<T> std(const Tensor<T>& x, int dim, bool keepdim = false, double correction = 1.0) {
  detail::check_defined(x, "std", "x");
  return std(x, std::vector<int>{dim}, keepdim, correction);
}
template <typename T>
Tensor<T> std(const Tensor<T>& x) {
  detail::check_defined(x, "std", "x");
  return std(x, std::vector<int>{});
}

namespace detail {

/// Π over the middle dim of s, into a tensor of out_shape. Its gradient is the product
/// of the other elements (a prefix times a suffix product), computed without dividing,
/// so that zeros give PyTorch's values.
template <typename T>
Tensor<T> product(const Tensor<T>& x, const DimSplit& s, const Shape& out_shape) {
  Tensor<T> out = make_tensor<T>(out_shape);
  const T* in = x.data();
  for (index_t o = 0; o < s.outer; ++o)
    for (index_t i = 0; i < s.inner; ++i) {
      T p = T(1);
      for (index_t k = 0; k < s.size; ++k) p = wrapping_mul(p, in[(o * s.size + k) * s.inner + i]);
      out.data()[o * s.inner + i] = p;
    }
  if (autograd::needs_grad(x))
    autograd::record(out, "ProdBackward", {x}, [x = x.detach(), s](const Tensor<T>& g) {
      Tensor<T> dx = make_tensor<T>(x.shape());
      const T* v = x.data();
      std::vector<T> suffix(static_cast<std::size_t>(s.size) + 1);
      for (index_t o = 0; o < s.outer; ++o)
        for (index_t i = 0; i < s.inner; ++i) {
          const auto at = [&](index_t k) { return (o * s.size + k) * s.inner + i; };
          suffix[static_cast<std::size_t>(s.size)] = T(1);
          for (index_t k = s.size - 1; k >= 0; --k)
            suffix[static_cast<std::size_t>(k)] = suffix[static_cast<std::size_t>(k + 1)] * v[at(k)];
          T prefix = T(1);
          const T gi = g.data()[o * s.inner + i];
          for (index_t k = 0; k < s.size; ++k) {
            dx.data()[at(k)] = gi * prefix * suffix[static_cast<std::size_t>(k + 1)];
            prefix *= v[at(k)];
          }
        }
      return autograd::Grads<T>{dx};
    });
  return out;
}

}  // namespace detail

/// Product along dim.
template <typename T>
Tensor<T> prod(const Tensor<T>& x, int dim, bool keepdim = false) {
  detail::check_defined(x, "prod", "x");
  dim = detail::normalize_dim(dim, x.dim(), "prod");
  const Shape out_shape = x.dim() == 0 ? Shape{}
                          : keepdim    ? detail::kept_shape(x.shape(), dim)
                                       : detail::dropped_shape(x.shape(), dim);
  return detail::product(x, detail::DimSplit(x.shape(), dim), out_shape);
}

/// Product of all elements, as a rank-0 tensor (1 for an empty tensor).
template <typename T>
Tensor<T> prod(const Tensor<T>& x) {
  detail::check_defined(x, "prod", "x");
  return detail::product(x, detail::DimSplit(Shape{x.numel()}, 0), Shape{});
}

namespace detail {

/// The extreme of all elements, as a rank-0 tensor; the gradient is shared evenly
/// among the elements equal to it (PyTorch's evenly_distribute_backward).
template <typename T>
Tensor<T> extreme(const Tensor<T>& x, bool largest, const char* op, const char* backward_name) {
  HEED_CHECK(x.numel() > 0, ValueError, op, ": empty tensor of shape ", to_string(x.shape()));
  Tensor<T> out = alias(max_along(alias(x, Shape{x.numel()}), 0, op, largest).first, Shape{});
  if (autograd::needs_grad(x))
    autograd::record(out, backward_name, {x}, [x = x.detach(), value = out.item()](const Tensor<T>& g) {
      const bool nan = value != value;
      if (!x.is_cpu()) {  // the share of g at each tie, as below, from a mask of the ties
        const Tensor<bool> ties = nan ? ne(x, x) : eq(x, value);
        const Tensor<T> zero = scalar_on(x.device(), T(0));
        const T count = sum(where(ties, scalar_on(x.device(), T(1)), zero)).item();
        return autograd::Grads<T>{where(ties, scalar_on(x.device(), g.item() / count), zero)};
      }
      const auto ties = [&](T v) { return nan ? v != v : v == value; };
      index_t count = 0;
      for (index_t i = 0; i < x.numel(); ++i) count += ties(x.data()[i]);
      Tensor<T> dx = make_tensor<T>(x.shape());
      const T share = g.item() / static_cast<T>(count);
      for (index_t i = 0; i < x.numel(); ++i) dx.data()[i] = ties(x.data()[i]) ? share : T(0);
      return autograd::Grads<T>{dx};
    });
  return out;
}

/// The extremes along dim and their indices, the gradient sent to each index.
template <typename T>
ValuesIndices<T> extreme_along(const Tensor<T>& x, int dim, bool keepdim, bool largest, const char* op,
                               const char* backward_name) {
  dim = normalize_dim(dim, x.dim(), op);
  // Not a structured binding: the lambda below captures indices (C++17, Clang 14).
  std::pair<Tensor<T>, Tensor<std::int64_t>> extremes = max_along(x, dim, op, largest);
  Tensor<T>& values = extremes.first;
  Tensor<std::int64_t> indices = extremes.second;
  if (!keepdim && x.dim() > 0) {
    values = alias(values, dropped_shape(x.shape(), dim));
    indices = alias(indices, dropped_shape(x.shape(), dim));
  }
  if (autograd::needs_grad(x))
    autograd::record(values, backward_name, {x}, [shape = x.shape(), dim, indices](const Tensor<T>& g) {
      if (!g.is_cpu()) {
        Tensor<T> dx = make_tensor<T>(shape, g.device());
        device_fill(g.device(), device_data(dx), dx.numel(), T(0));
        const DimSplit s(shape, dim);
        kernels_for(g, "max backward")
            .scatter_along(g.device().index(), device_data(dx), device_data(g), device_data(indices), s.outer, s.size,
                           s.inner);
        return autograd::Grads<T>{dx};
      }
      Tensor<T> dx = make_tensor<T>(shape);
      dx.array().setZero();
      const DimSplit s(shape, dim);
      for (index_t o = 0; o < s.outer; ++o)
        for (index_t i = 0; i < s.inner; ++i)
          dx.data()[(o * s.size + indices.data()[o * s.inner + i]) * s.inner + i] = g.data()[o * s.inner + i];
      return autograd::Grads<T>{dx};
    });
  return {values, indices};
}

}  // namespace detail

/// Largest element, as a rank-0 tensor.
template <typename T>
Tensor<T> max(const Tensor<T>& x) {
  detail::check_defined(x, "max", "x");
  return detail::extreme(x, true, "max", "MaxBackward");
}

/// Smallest element, as a rank-0 tensor.
template <typename T>
Tensor<T> min(const Tensor<T>& x) {
  detail::check_defined(x, "min", "x");
  return detail::extreme(x, false, "min", "MinBackward");
}

/// Largest elements along dim and their indices: torch.max(x, dim).
template <typename T>
ValuesIndices<T> max_with_indices(const Tensor<T>& x, int dim, bool keepdim = false) {
  detail::check_defined(x, "max_with_indices", "x");
  return detail::extreme_along(x, dim, keepdim, true, "max", "MaxBackward");
}

/// Smallest elements along dim and their indices: torch.min(x, dim).
template <typename T>
ValuesIndices<T> min_with_indices(const Tensor<T>& x, int dim, bool keepdim = false) {
  detail::check_defined(x, "min_with_indices", "x");
  return detail::extreme_along(x, dim, keepdim, false, "min", "MinBackward");
}

/// Largest element along dim.
template <typename T>
Tensor<T> max(const Tensor<T>& x, int dim, bool keepdim = false) {
  detail::check_defined(x, "max", "x");
  return max_with_indices(x, dim, keepdim).values;
}

/// Smallest element along dim.
template <typename T>
Tensor<T> min(const Tensor<T>& x, int dim, bool keepdim = false) {
  detail::check_defined(x, "min", "x");
  return min_with_indices(x, dim, keepdim).values;
}

/// Index of the first largest element along dim.
template <typename T>
Tensor<std::int64_t> argmax(const Tensor<T>& x, int dim, bool keepdim = false) {
  detail::check_defined(x, "argmax", "x");
  return detail::extreme_along(x.detach(), dim, keepdim, true, "argmax", "").indices;
}

/// Index of the first smallest element along dim.
template <typename T>
Tensor<std::int64_t> argmin(const Tensor<T>& x, int dim, bool keepdim = false) {
  detail::check_defined(x, "argmin", "x");
  return detail::extreme_along(x.detach(), dim, keepdim, false, "argmin", "").indices;
}

/// Index of the first largest element of the flattened tensor, as a rank-0 tensor.
template <typename T>
Tensor<std::int64_t> argmax(const Tensor<T>& x) {
  detail::check_defined(x, "argmax", "x");
  HEED_CHECK(x.numel() > 0, ValueError, "argmax: empty tensor of shape ", to_string(x.shape()));
  return argmax(detail::alias(x.detach(), Shape{x.numel()}), 0);
}

/// Index of the first smallest element of the flattened tensor, as a rank-0 tensor.
template <typename T>
Tensor<std::int64_t> argmin(const Tensor<T>& x) {
  detail::check_defined(x, "argmin", "x");
  HEED_CHECK(x.numel() > 0, ValueError, "argmin: empty tensor of shape ", to_string(x.shape()));
  return argmin(detail::alias(x.detach(), Shape{x.numel()}), 0);
}

// clang-format off
template <typename T> Tensor<T> Tensor<T>::sum() const { return heed::sum(*this); }
template <typename T> Tensor<T> Tensor<T>::sum(int dim, bool keepdim) const { return heed::sum(*this, dim, keepdim); }
template <typename T> Tensor<T> Tensor<T>::sum(const std::vector<int>& dims, bool keepdim) const { return heed::sum(*this, dims, keepdim); }
template <typename T> Tensor<T> Tensor<T>::mean() const { return heed::mean(*this); }
template <typename T> Tensor<T> Tensor<T>::mean(int dim, bool keepdim) const { return heed::mean(*this, dim, keepdim); }
template <typename T> Tensor<T> Tensor<T>::mean(const std::vector<int>& dims, bool keepdim) const { return heed::mean(*this, dims, keepdim); }
template <typename T> Tensor<T> Tensor<T>::var() const { return heed::var(*this); }
template <typename T> Tensor<T> Tensor<T>::var(int dim, bool keepdim, double correction) const { return heed::var(*this, dim, keepdim, correction); }
template <typename T> Tensor<T> Tensor<T>::var(const std::vector<int>& dims, bool keepdim, double correction) const { return heed::var(*this, dims, keepdim, correction); }
template <typename T> Tensor<T> Tensor<T>::std() const { return heed::std(*this); }
template <typename T> Tensor<T> Tensor<T>::std(int dim, bool keepdim, double correction) const { return heed::std(*this, dim, keepdim, correction); }
template <typename T> Tensor<T> Tensor<T>::std(const std::vector<int>& dims, bool keepdim, double correction) const { return heed::std(*this, dims, keepdim, correction); }
template <typename T> Tensor<T> Tensor<T>::prod() const { return heed::prod(*this); }
template <typename T> Tensor<T> Tensor<T>::prod(int dim, bool keepdim) const { return heed::prod(*this, dim, keepdim); }
template <typename T> Tensor<T> Tensor<T>::max() const { return heed::max(*this); }
template <typename T> Tensor<T> Tensor<T>::max(int dim, bool keepdim) const { return heed::max(*this, dim, keepdim); }
template <typename T> Tensor<T> Tensor<T>::min() const { return heed::min(*this); }
template <typename T> Tensor<T> Tensor<T>::min(int dim, bool keepdim) const { return heed::min(*this, dim, keepdim); }
template <typename T> Tensor<std::int64_t> Tensor<T>::argmax() const { return heed::argmax(*this); }
template <typename T> Tensor<std::int64_t> Tensor<T>::argmax(int dim, bool keepdim) const { return heed::argmax(*this, dim, keepdim); }
template <typename T> Tensor<std::int64_t> Tensor<T>::argmin() const { return heed::argmin(*this); }
template <typename T> Tensor<std::int64_t> Tensor<T>::argmin(int dim, bool keepdim) const { return heed::argmin(*this, dim, keepdim); }
// clang-format on

}  // namespace heed

#include "heed/detail/header_end.hpp"
