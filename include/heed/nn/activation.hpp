// heed/nn/activation.hpp — the activations a Transformer block may use, as a module.
//
//   heed::ActivationLayer<float> act(heed::Activation::gelu);
//   auto y = act(x);   // elementwise; prints as PyTorch's GELU(approximate='none')
//
// ReLU (d2l's), GELU, or SiLU (x · sigmoid(x): MarianMT's "swish").
#pragma once

#include "heed/detail/header_begin.hpp"

#include <string>

#include "heed/nn/module.hpp"
#include "heed/ops/elementwise.hpp"

namespace heed {

enum class Activation { relu, gelu, silu };

inline const char* to_string(Activation activation) {
  switch (activation) {
    case Activation::relu:
      return "relu";
    case Activation::gelu:
      return "gelu";
    case Activation::silu:
      return "silu";
  }
  throw ValueError("to_string: not an Activation");
}

template <typename T>
Tensor<T> activate(const Tensor<T>& x, Activation activation) {
  switch (activation) {
    case Activation::relu:
      return relu(x);
    case Activation::gelu:
      return gelu(x);
    case Activation::silu:
      return silu(x);
  }
  throw ValueError("activate: not an Activation");
}

template <typename T>
class ActivationLayer : public Module<T> {
 public:
  explicit ActivationLayer(Activation activation = Activation::relu)
      : Module<T>(class_name(activation)), activation_(activation) {}

  // x: any shape -> same shape
  Tensor<T> forward(const Tensor<T>& x) const { return activate(x, activation_); }
  Tensor<T> operator()(const Tensor<T>& x) const { return forward(x); }

  Activation activation() const { return activation_; }
  std::string extra_repr() const override { return activation_ == Activation::gelu ? "approximate='none'" : ""; }

 private:
  static const char* class_name(Activation activation) {  // PyTorch's class names
    return activation == Activation::relu ? "ReLU" : activation == Activation::gelu ? "GELU" : "SiLU";
  }
  Activation activation_;
};

}  // namespace heed

#include "heed/detail/header_end.hpp"
