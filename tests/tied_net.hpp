// A small float net with every kind of convertible weight (heed/nn/convert_weights.hpp):
// an embedding, a hidden Linear, and an output Linear tied to the embedding. Shared by
// the conversion tests (unity_nn.cpp) and the quantised checkpoints' (unity_io.cpp).
#pragma once

#include <heed/nn/embedding.hpp>
#include <heed/nn/linear.hpp>
#include <heed/nn/module.hpp>

namespace heed_test {

struct TiedNet : heed::Module<float> {
  explicit TiedNet(heed::Generator& gen)
      : heed::Module<float>("TiedNet"), embedding(50, 24, gen), hidden(24, 24, true, gen), output(24, 50, true, gen) {
    register_module("embedding", embedding);
    register_module("hidden", hidden);
    register_module("output", output);
    heed::tie_parameter(output.weight, embedding.weight);
  }
  // tokens: (batch, steps) -> logits (batch, steps, 50)
  heed::Tensor<float> forward(const heed::IndexTensor& tokens) const {
    return output(hidden(embedding(tokens)).relu());
  }
  heed::Embedding<float> embedding;
  heed::Linear<float> hidden, output;
};

}  // namespace heed_test
