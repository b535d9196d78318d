// heed/attention/additive.hpp — additive attention (d2l 10.3.2, Bahdanau's scoring).
//
//   heed::AdditiveAttention<float> attention(/*key_size=*/2, /*query_size=*/20,
//                                            /*num_hiddens=*/8, /*dropout=*/0.1);
//   auto out = attention(queries, keys, values, valid_lens);
//
//   queries: (batch, num_queries, query_size)
//   keys:    (batch, num_keys, key_size)
//   values:  (batch, num_keys, value_dim)
//   out:     (batch, num_queries, value_dim)
//   attention_weights(): (batch, num_queries, num_keys)
//
// score(q, k) = w_vᵀ tanh(W_q q + W_k k), every query against every key; the
// parameters are named W_k, W_q, w_v as in d2l, all without bias.
#pragma once

#include "heed/detail/header_begin.hpp"

#include <string>

#include "heed/attention/dot_product.hpp"
#include "heed/nn/linear.hpp"

namespace heed {

template <typename T>
class AdditiveAttention : public Module<T> {
 public:
  AdditiveAttention(index_t key_size, index_t query_size, index_t num_hiddens, double dropout = 0.0,
                    Generator& gen = default_generator())
      : Module<T>("AdditiveAttention"),
        W_k(key_size, num_hiddens, false, gen),
        W_q(query_size, num_hiddens, false, gen),
        w_v(num_hiddens, 1, false, gen),
        dropout_(dropout) {
    this->register_module("W_k", W_k);
    this->register_module("W_q", W_q);
    this->register_module("w_v", w_v);
    this->register_module("dropout", dropout_);
  }

  Tensor<T> forward(const Tensor<T>& queries, const Tensor<T>& keys, const Tensor<T>& values,
                    const AttentionMask<T>& mask = {}) {
    detail::check_attention_inputs(queries, keys, values, "AdditiveAttention", false);
    HEED_CHECK(queries.dim() == 3, ShapeError, "AdditiveAttention: expected 3-D inputs, got queries ",
               to_string(queries.shape()));
    return attend(queries, W_k(keys), values, mask);
  }
  Tensor<T> operator()(const Tensor<T>& queries, const Tensor<T>& keys, const Tensor<T>& values,
                       const AttentionMask<T>& mask = {}) {
    return forward(queries, keys, values, mask);
  }

  /// forward() with the keys already through W_k: a decoder that asks the same keys at
  /// every step (Bahdanau's) projects them once per sequence instead of once per step.
  // projected_keys: (batch, num_keys, num_hiddens), W_k(keys)
  Tensor<T> attend(const Tensor<T>& queries, const Tensor<T>& projected_keys, const Tensor<T>& values,
                   const AttentionMask<T>& mask = {}) {
    HEED_CHECK(queries.dim() == 3 && projected_keys.dim() == 3 && values.dim() == 3 &&
                   projected_keys.shape()[2] == W_k.out_features() && queries.shape()[0] == projected_keys.shape()[0] &&
                   values.shape()[0] == queries.shape()[0] && values.shape()[1] == projected_keys.shape()[1],
               ShapeError, "AdditiveAttention.attend: expected queries (batch, num_queries, query_size), ",
               "projected_keys (batch, num_keys, ", W_k.out_features(),
               ") and values (batch, num_keys, value_dim), got ", to_string(queries.shape()), ", ",
               to_string(projected_keys.shape()), " and ", to_string(values.shape()));
    // (batch, num_queries, 1, h) + (batch, 1, num_keys, h): every query with every key.
    const Tensor<T> features = tanh(W_q(queries).unsqueeze(2) + projected_keys.unsqueeze(1));
    const Tensor<T> scores = w_v(features).squeeze(-1);  // (batch, num_queries, num_keys)
    const Tensor<T> weights = masked_softmax(scores, mask);
    if (detail::keeps_forward_records()) attention_weights_ = keep_weights_ ? weights.detach() : Tensor<T>();
    return bmm(dropout_(weights), values);
  }

  /// The weights of the last forward (before dropout), cut from the graph.
  const Tensor<T>& attention_weights() const { return attention_weights_; }
  void keep_attention_weights(bool keep) { keep_weights_ = keep; }
  bool keeps_attention_weights() const { return keep_weights_; }
  /// The dropout on the attention weights (its probability, mode and generator).
  const Dropout<T>& dropout_module() const { return dropout_; }

  Linear<T> W_k, W_q, w_v;  // NOLINT(readability-identifier-naming): d2l's parameter names

 private:
  Dropout<T> dropout_;
  Tensor<T> attention_weights_;
  bool keep_weights_ = true;
};

}  // namespace heed

#include "heed/detail/header_end.hpp"
