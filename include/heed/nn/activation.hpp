// heed/nn/activation.hpp — the activations a Transformer block may use, as a module.
//
//   heed::ActivationLayer<float> act(heed::Activation::gelu);
//   auto y = act(x);   // elementwise; prints as PyTorch's GELU(approximate='none')
#pragma once

#include "heed/detail/header_begin.hpp"

#include <string>

#include "heed/nn/module.hpp"
#include "heed/ops/elementwise.hpp"

namespace heed {

enum class Activation { relu, gelu };

inline const char* to_string(Activation activation) { return activation == Activation::relu ? "relu" : "gelu"; }

template <typename T>
Tensor<T> activate(const Tensor<T>& x, Activation activation) {
  return activation == Activation::relu ? relu(x) : gelu(x);
}

template <typename T>
class ActivationLayer : public Module<T> {
 public:
  explicit ActivationLayer(Activation activation = Activation::relu)
      : Module<T>(activation == Activation::relu ? "ReLU" : "GELU"), activation_(activation) {}

  // x: any shape -> same shape
  Tensor<T> forward(const Tensor<T>& x) const { return activate(x, activation_); }
  Tensor<T> operator()(const Tensor<T>& x) const { return forward(x); }

  Activation activation() const { return activation_; }
  std::string extra_repr() const override { return activation_ == Activation::gelu ? "approximate='none'" : ""; }

 private:
  Activation activation_;
};

}  // namespace heed

#include "heed/detail/header_end.hpp"
