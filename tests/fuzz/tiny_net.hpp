// tests/fuzz/tiny_net.hpp — the model the checkpoint target loads into; make_seeds
// writes its checkpoints, so the two must agree.
#pragma once

#include <heed/core/generator.hpp>
#include <heed/nn/embedding.hpp>
#include <heed/nn/linear.hpp>
#include <heed/nn/module.hpp>

namespace heed_fuzz {

/// The checkpoint target's model: a Linear and an Embedding, parameters fc.weight (2, 3),
/// fc.bias (2) and emb.weight (4, 3), small enough that a valid checkpoint is 408 bytes.
struct TinyNet : heed::Module<float> {
  explicit TinyNet(heed::Generator& gen) : heed::Module<float>("TinyNet"), fc(3, 2, true, gen), emb(4, 3, gen) {
    register_module("fc", fc);
    register_module("emb", emb);
  }
  heed::Linear<float> fc;
  heed::Embedding<float> emb;
};

}  // namespace heed_fuzz
