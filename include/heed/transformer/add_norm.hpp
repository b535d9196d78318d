// heed/transformer/add_norm.hpp — residual connection and layer normalisation (d2l 10.7.3).
//
//   heed::AddNorm<float> add_norm({3, 4}, /*dropout=*/0.5);
//   auto Z = add_norm(X, Y);   // LayerNorm(dropout(Y) + X), X and Y: (2, 3, 4)
//
// A pre-LayerNorm block uses the two halves on their own: residual(X, f(norm(X))).
#pragma once

#include "heed/detail/header_begin.hpp"

#include "heed/nn/dropout.hpp"
#include "heed/nn/layer_norm.hpp"

namespace heed {

template <typename T>
class AddNorm : public Module<T> {
 public:
  AddNorm(Shape normalized_shape, double dropout_p) : Module<T>("AddNorm"), dropout(dropout_p), ln(normalized_shape) {
    this->register_module("dropout", this->dropout);
    this->register_module("ln", ln);
  }

  // X, Y: (..., *normalized_shape) -> same shape
  Tensor<T> forward(const Tensor<T>& X, const Tensor<T>& Y) const { return norm(residual(X, Y)); }
  Tensor<T> operator()(const Tensor<T>& X, const Tensor<T>& Y) const { return forward(X, Y); }

  /// X + dropout(Y): the residual connection alone.
  Tensor<T> residual(const Tensor<T>& X, const Tensor<T>& Y) const {
    HEED_CHECK(X.shape() == Y.shape(), ShapeError, "AddNorm: X ", to_string(X.shape()), " and Y ", to_string(Y.shape()),
               " must have the same shape");
    return dropout(Y) + X;
  }
  /// LayerNorm(X): the normalisation alone.
  Tensor<T> norm(const Tensor<T>& X) const {
    detail::layer_norm_rows(X.shape(), ln.normalized_shape(), "AddNorm");
    return ln(X);
  }

  Dropout<T> dropout;
  LayerNorm<T> ln;
};

}  // namespace heed

#include "heed/detail/header_end.hpp"
