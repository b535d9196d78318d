// heed/transformer/ffn.hpp — the position-wise feed-forward network (d2l 10.7.2).
//
//   heed::PositionWiseFFN<float> ffn(/*ffn_num_input=*/4, /*ffn_num_hiddens=*/4, /*ffn_num_outputs=*/8);
//   auto Y = ffn(X);   // X: (batch, steps, 4) -> (batch, steps, 8)
//
// dense2(activation(dense1(X))), the same MLP at every position; the activation is
// ReLU as in d2l, or GELU.
#pragma once

#include "heed/detail/header_begin.hpp"

#include "heed/nn/activation.hpp"
#include "heed/nn/linear.hpp"

namespace heed {

template <typename T>
class PositionWiseFFN : public Module<T> {
 public:
  PositionWiseFFN(index_t ffn_num_input, index_t ffn_num_hiddens, index_t ffn_num_outputs,
                  Activation activation = Activation::relu, Generator& gen = default_generator())
      : Module<T>("PositionWiseFFN"),
        dense1(ffn_num_input, ffn_num_hiddens, true, gen),
        activation_(activation),
        dense2(ffn_num_hiddens, ffn_num_outputs, true, gen) {
    this->register_module("dense1", dense1);
    this->register_module(to_string(activation), activation_);
    this->register_module("dense2", dense2);
  }

  // X: (..., ffn_num_input) -> (..., ffn_num_outputs)
  Tensor<T> forward(const Tensor<T>& X) const {
    HEED_CHECK(X.dim() >= 1 && X.shape()[-1] == dense1.in_features(), ShapeError, "PositionWiseFFN: X of shape ",
               to_string(X.shape()), " does not end in ffn_num_input = ", dense1.in_features());
    return dense2(activation_(dense1(X)));
  }
  Tensor<T> operator()(const Tensor<T>& X) const { return forward(X); }

  Linear<T> dense1;

 private:
  ActivationLayer<T> activation_;

 public:
  Linear<T> dense2;
};

}  // namespace heed

#include "heed/detail/header_end.hpp"
