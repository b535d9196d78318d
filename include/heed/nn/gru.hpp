// heed/nn/gru.hpp — a multi-layer GRU, as torch.nn.GRU (sequence first, one direction).
//
//   heed::GRU<float> rnn(/*input_size=*/8, /*num_hiddens=*/16, /*num_layers=*/2, /*dropout=*/0.1);
//   auto [outputs, state] = rnn(X);   // X: (num_steps, batch, 8)
//   // outputs: (num_steps, batch, 16), the last layer's state after each step
//   // state:   (num_layers, batch, 16), each layer's state after the last step
//
// Parameters per layer k, PyTorch's names and layout (gates r, z, n stacked in rows):
// weight_ih_lk (3H, input of layer k), weight_hh_lk (3H, H), bias_ih_lk (3H),
// bias_hh_lk (3H), all uniform in ±1/√H as PyTorch draws them. Dropout, in training
// mode, applies to the outputs of every layer but the last, as PyTorch's.
#pragma once

#include "heed/detail/header_begin.hpp"

#include <cmath>
#include <string>
#include <vector>

#include "heed/core/factory.hpp"
#include "heed/nn/module.hpp"
#include "heed/ops/dropout.hpp"
#include "heed/ops/gru.hpp"
#include "heed/ops/linear.hpp"
#include "heed/ops/shape.hpp"

namespace heed {

template <typename T>
struct GRUOutput {
  Tensor<T> outputs;  // (num_steps, batch, num_hiddens)
  Tensor<T> state;    // (num_layers, batch, num_hiddens)
};

template <typename T>
class GRU : public Module<T> {
 public:
  GRU(index_t input_size, index_t num_hiddens, index_t num_layers = 1, double dropout = 0.0,
      Generator& gen = default_generator())
      : Module<T>("GRU"),
        input_size_(input_size),
        num_hiddens_(num_hiddens),
        num_layers_(num_layers),
        dropout_(dropout) {
    HEED_CHECK(input_size > 0 && num_hiddens > 0 && num_layers > 0, ValueError,
               "GRU: input_size, num_hiddens and num_layers must be positive, got ", input_size, ", ", num_hiddens,
               " and ", num_layers);
    HEED_CHECK(dropout >= 0.0 && dropout <= 1.0, ValueError, "GRU: dropout must be in [0, 1], got ", dropout);
    // Registration keeps pointers into these vectors: size them once, never grow them.
    const auto layers = static_cast<std::size_t>(num_layers);
    weight_ih.resize(layers), weight_hh.resize(layers), bias_ih.resize(layers), bias_hh.resize(layers);
    const T bound = T(1) / static_cast<T>(std::sqrt(static_cast<double>(num_hiddens)));
    for (std::size_t k = 0; k < layers; ++k) {
      const index_t in = k == 0 ? input_size : num_hiddens;
      const std::string suffix = "_l" + std::to_string(k);
      weight_ih[k] = uniform<T>({3 * num_hiddens, in}, -bound, bound, gen);
      weight_hh[k] = uniform<T>({3 * num_hiddens, num_hiddens}, -bound, bound, gen);
      bias_ih[k] = uniform<T>({3 * num_hiddens}, -bound, bound, gen);
      bias_hh[k] = uniform<T>({3 * num_hiddens}, -bound, bound, gen);
      this->register_parameter("weight_ih" + suffix, weight_ih[k]);
      this->register_parameter("weight_hh" + suffix, weight_hh[k]);
      this->register_parameter("bias_ih" + suffix, bias_ih[k]);
      this->register_parameter("bias_hh" + suffix, bias_hh[k]);
    }
  }

  // inputs: (num_steps, batch, input_size)
  // state:  (num_layers, batch, num_hiddens); undefined = zeros
  GRUOutput<T> forward(const Tensor<T>& inputs, const Tensor<T>& state = Tensor<T>()) const {
    HEED_CHECK(inputs.dim() == 3 && inputs.shape()[0] > 0 && inputs.shape()[2] == input_size_, ShapeError,
               "GRU: inputs must be (num_steps >= 1, batch, input_size = ", input_size_, "), got ",
               to_string(inputs.shape()));
    const index_t batch = inputs.shape()[1], num_steps = inputs.shape()[0];
    HEED_CHECK(!state.defined() || state.shape() == (Shape{num_layers_, batch, num_hiddens_}), ShapeError,
               "GRU: state must be (num_layers, batch, num_hiddens) = (", num_layers_, ", ", batch, ", ", num_hiddens_,
               "), got ", to_string(state.shape()));
    Tensor<T> X = inputs;
    std::vector<Tensor<T>> final_states;
    for (std::size_t k = 0; k < weight_ih.size(); ++k) {
      const Tensor<T> h0 = state.defined() ? select(state, 0, static_cast<index_t>(k))
                                           : zeros<T>({batch, num_hiddens_}, inputs.device());
      // The input projections of all steps in one GEMM; only W_hh h stays in the loop.
      X = gru_layer(linear(X, weight_ih[k], bias_ih[k]), h0, weight_hh[k], bias_hh[k]);
      final_states.push_back(select(X, 0, num_steps - 1));
      // Dropout draws from default_generator(), as the Dropout module does: `gen` is for
      // the initialisation only and need not outlive the module.
      if (k + 1 < weight_ih.size()) X = dropout(X, dropout_, this->is_training());
    }
    return {X, stack(final_states, 0)};
  }
  GRUOutput<T> operator()(const Tensor<T>& inputs, const Tensor<T>& state = Tensor<T>()) const {
    return forward(inputs, state);
  }

  index_t input_size() const { return input_size_; }
  index_t num_hiddens() const { return num_hiddens_; }
  index_t num_layers() const { return num_layers_; }
  /// The dropout on each layer's outputs but the last's, in training mode.
  double dropout_probability() const { return dropout_; }
  std::string extra_repr() const override {
    std::string text = detail::concat(input_size_, ", ", num_hiddens_);
    if (num_layers_ != 1) text += detail::concat(", num_layers=", num_layers_);
    if (dropout_ != 0.0) text += detail::concat(", dropout=", dropout_);
    return text;
  }

  std::vector<Tensor<T>> weight_ih, weight_hh, bias_ih, bias_hh;  // one per layer

 private:
  index_t input_size_, num_hiddens_, num_layers_;
  double dropout_;
};

}  // namespace heed

#include "heed/detail/header_end.hpp"
