// heed/ops/loss.hpp — the regression losses, as PyTorch's F.mse_loss and F.l1_loss
// (the classification loss is heed/ops/cross_entropy.hpp).
//
//   input, target: the same shape
//   heed::mse_loss(input, target)                      -> (), mean of (input − target)²
//   heed::l1_loss(input, target, heed::Reduction::none) -> input's shape, |input − target|
//
// Both are differentiable in input and target. Unlike PyTorch, which broadcasts with a
// warning that the result is likely wrong, differing shapes are an error. The mean of
// no element is NaN, as in PyTorch.
#pragma once

#include "heed/detail/header_begin.hpp"

#include <limits>

#include "heed/ops/elementwise.hpp"
#include "heed/ops/reduce.hpp"

namespace heed {
namespace detail {

/// Reduces elementwise losses as `reduction` asks.
template <typename T>
Tensor<T> reduce_loss(const Tensor<T>& losses, Reduction reduction) {
  switch (reduction) {
    case Reduction::none:
      return losses;
    case Reduction::sum:
      return sum(losses);
    case Reduction::mean:
      break;
  }
  const T scale = losses.numel() ? T(1) / static_cast<T>(losses.numel()) : std::numeric_limits<T>::quiet_NaN();
  return mul(sum(losses), scale);
}

template <typename T>
void check_loss_shapes(const Tensor<T>& input, const Tensor<T>& target, const char* op) {
  HEED_CHECK(input.shape() == target.shape(), ShapeError, op, ": input of shape ", to_string(input.shape()),
             " and target of shape ", to_string(target.shape()), " differ (reshape one; PyTorch would broadcast them)");
}

}  // namespace detail

/// The squared error (input − target)², reduced.
template <typename T>
Tensor<T> mse_loss(const Tensor<T>& input, const Tensor<T>& target, Reduction reduction = Reduction::mean) {
  detail::check_defined(input, "mse_loss", "input");
  detail::check_defined(target, "mse_loss", "target");
  detail::check_loss_shapes(input, target, "mse_loss");
  const Tensor<T> difference = sub(input, target);
  return detail::reduce_loss(mul(difference, difference), reduction);
}

/// The absolute error |input − target|, reduced. Its gradient at a zero difference is 0.
template <typename T>
Tensor<T> l1_loss(const Tensor<T>& input, const Tensor<T>& target, Reduction reduction = Reduction::mean) {
  detail::check_defined(input, "l1_loss", "input");
  detail::check_defined(target, "l1_loss", "target");
  detail::check_loss_shapes(input, target, "l1_loss");
  return detail::reduce_loss(abs(sub(input, target)), reduction);
}

}  // namespace heed

#include "heed/detail/header_end.hpp"
