// heed/ops/linear.hpp — the affine map of a Linear layer, as PyTorch's F.linear.
//
//   x: (..., in_features)  weight: (out_features, in_features)  bias: (out_features)
//   linear(x, weight, bias) = x Wᵀ + b: (..., out_features)
//
// The weight is kept as (out, in), PyTorch's layout, so that checkpoints carry the
// same tensors; the product reads it transposed in place, and all leading dims of x
// fold into the rows of one GEMM, forward and backward.
#pragma once

#include "heed/ops/matmul.hpp"

namespace heed {

template <typename T>
Tensor<T> linear(const Tensor<T>& x, const Tensor<T>& weight, const Tensor<T>& bias = Tensor<T>()) {
  detail::check_floating<T>("linear");
  HEED_CHECK(weight.dim() == 2, ShapeError, "linear: weight must be (out_features, in_features), got ",
             to_string(weight.shape()));
  HEED_CHECK(x.dim() >= 1 && x.shape()[-1] == weight.shape()[1], ShapeError, "linear: input of shape ",
             to_string(x.shape()), " does not end in in_features = ", weight.shape()[1], " (weight ",
             to_string(weight.shape()), ")");
  const index_t rows = detail::leading_rows(x.shape()), in = weight.shape()[1], out_features = weight.shape()[0];
  if (bias.defined())
    HEED_CHECK(bias.shape() == Shape{out_features}, ShapeError, "linear: bias of shape ", to_string(bias.shape()),
               " does not match out_features = ", out_features);
  Shape shape = x.shape();
  shape[-1] = out_features;
  Tensor<T> out = detail::make_tensor<T>(shape);
  detail::gemm(x.data(), false, weight.data(), true, out.data(), rows, out_features, in);
  if (bias.defined()) out.matrix(rows, out_features).rowwise() += bias.matrix(1, out_features).row(0);

  if (autograd::needs_grad(x, weight, bias)) {
    autograd::record(
        out, "AddmmBackward", {x, weight, bias},
        [=, saved = detail::SavedProduct<T>(x, weight), x_shape = x.shape(), w_shape = weight.shape(),
         need_b = bias.defined() && bias.requires_grad()](const Tensor<T>& g) {
          // dx = g W,  dW = gᵀ x,  db = Σ_rows g
          autograd::Grads<T> grads(3);
          if (saved.need_a) {
            grads[0] = detail::make_tensor<T>(x_shape);
            detail::gemm(g.data(), false, saved.b.get().data(), false, grads[0].data(), rows, in, out_features);
          }
          if (saved.need_b) {
            grads[1] = detail::make_tensor<T>(w_shape);
            detail::gemm(g.data(), true, saved.a.get().data(), false, grads[1].data(), out_features, in, rows);
          }
          if (need_b) {
            grads[2] = detail::make_tensor<T>(Shape{out_features});
            grads[2].matrix(1, out_features) = g.matrix(rows, out_features).colwise().sum();
          }
          return grads;
        });
  }
  return out;
}

}  // namespace heed
