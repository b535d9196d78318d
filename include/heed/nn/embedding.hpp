// heed/nn/embedding.hpp — Embedding as torch.nn.Embedding.
//
//   heed::Embedding<float> embedding(/*num_embeddings=*/200, /*embedding_dim=*/24);
//   auto X = embedding(tokens);   // tokens: (batch, steps) int64 -> (batch, steps, 24)
//
// weight is (num_embeddings, embedding_dim), drawn from N(0, 1) as PyTorch does.
#pragma once

#include "heed/detail/header_begin.hpp"

#include <memory>
#include <string>
#include <type_traits>

#include "heed/core/factory.hpp"
#include "heed/nn/module.hpp"
#include "heed/ops/embedding.hpp"

namespace heed {

template <typename T>
class Embedding : public Module<T> {
 public:
  Embedding(index_t num_embeddings, index_t embedding_dim, Generator& gen = default_generator())
      : Module<T>("Embedding"), num_embeddings_(num_embeddings), embedding_dim_(embedding_dim) {
    HEED_CHECK(num_embeddings > 0 && embedding_dim > 0, ValueError,
               "Embedding: num_embeddings and embedding_dim must be positive, got ", num_embeddings, " and ",
               embedding_dim);
    (void)detail::buffer_size<T>(Shape{num_embeddings, embedding_dim}, "Embedding");  // named Embedding, not normal
    weight = detail::skips_init()  // not for a net about to be loaded
                 ? detail::make_tensor<T>({num_embeddings, embedding_dim}, Device::cpu(), "Embedding")
                 : normal<T>(T(0), T(1), {num_embeddings, embedding_dim}, gen);
    this->register_parameter("weight", weight);
    this->register_convertible("weight", converted_weight);
  }

  // indices: any shape -> (*indices.shape, embedding_dim)
  Tensor<T> forward(const IndexTensor& indices) const {
    if constexpr (std::is_same_v<T, float>)
      if (converted_weight) return embedding(*converted_weight, indices);
    return embedding(weight, indices);
  }
  Tensor<T> operator()(const IndexTensor& indices) const { return forward(indices); }

  index_t num_embeddings() const { return num_embeddings_; }
  index_t embedding_dim() const { return embedding_dim_; }
  std::string extra_repr() const override {
    return detail::concat(num_embeddings(), ", ", embedding_dim(),
                          converted_weight ? std::string(", weight=") + to_string(converted_weight->precision()) : "");
  }

  Tensor<T> weight;  // (num_embeddings, embedding_dim); undefined once converted
  // The table in bf16 or int8 for inference (heed/nn/convert_weights.hpp); null in fp32.
  std::shared_ptr<const detail::LowPrecisionWeight> converted_weight;

 private:
  index_t num_embeddings_, embedding_dim_;
};

}  // namespace heed

#include "heed/detail/header_end.hpp"
