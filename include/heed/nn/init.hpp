// heed/nn/init.hpp — parameter initialisation, as torch.nn.init.
//
//   heed::init::xavier_uniform_(linear.weight);          // one tensor
//   heed::init::xavier_init_weights(net);                // d2l's train_seq2seq set-up
//
// xavier_uniform_ draws from U(−a, a), a = gain·√(6 / (fan_in + fan_out)), with
// fan_in = size(1) and fan_out = size(0) for a 2-D (out, in) weight, as PyTorch.
#pragma once

#include "heed/detail/header_begin.hpp"

#include <cmath>
#include <string>

#include "heed/autograd/node.hpp"
#include "heed/core/factory.hpp"
#include "heed/nn/module.hpp"

namespace heed {
namespace init {

template <typename T>
Tensor<T>& xavier_uniform_(Tensor<T>& weight, double gain = 1.0, Generator& gen = default_generator()) {
  HEED_CHECK(weight.defined() && weight.dim() == 2, ShapeError, "xavier_uniform_: expected a 2-D weight, got ",
             weight.defined() ? to_string(weight.shape()) : std::string("an undefined tensor"));
  HEED_CHECK(weight.is_leaf(), ValueError, "xavier_uniform_: the weight must be a leaf tensor");
  const double fan_out = static_cast<double>(weight.shape()[0]), fan_in = static_cast<double>(weight.shape()[1]);
  const T bound = static_cast<T>(gain * std::sqrt(6.0 / (fan_in + fan_out)));
  NoGradGuard no_grad;
  weight.copy_(uniform<T>(weight.shape(), -bound, bound, gen));
  return weight;
}

/// d2l's xavier_init_weights applied to every submodule (net.apply): the weights of
/// each Linear and each GRU (weight_ih_lk, weight_hh_lk) become Xavier-uniform;
/// biases, embeddings and layer norms keep their initialisation.
template <typename T>
void xavier_init_weights(Module<T>& module, Generator& gen = default_generator()) {
  if (module.type_name() == "Linear" || module.type_name() == "GRU") {
    for (auto& [name, p] : module.named_parameters())
      if (name.rfind("weight", 0) == 0) xavier_uniform_(p, 1.0, gen);
    return;
  }
  for (auto& [name, child] : module.named_children()) xavier_init_weights(*child, gen);
}

}  // namespace init
}  // namespace heed

#include "heed/detail/header_end.hpp"
