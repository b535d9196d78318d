// heed/attention/dot_product.hpp — scaled dot-product attention (d2l 10.3.3).
//
//   heed::DotProductAttention<float> attention(/*dropout=*/0.5);
//   attention.eval();
//   auto out = attention(queries, keys, values, valid_lens);
//
//   queries: (batch, [heads,] num_queries, d)
//   keys:    (batch, [heads,] num_keys, d)
//   values:  (batch, [heads,] num_keys, value_dim)
//   out:     (batch, [heads,] num_queries, value_dim)
//   attention_weights(): (batch, [heads,] num_queries, num_keys)
//
// out = dropout(masked_softmax(Q Kᵀ / √d, mask)) V. The mask is any AttentionMask:
// valid_lens as in d2l, a boolean mask, an additive mask or the causal rule.
#pragma once

#include <cmath>
#include <string>

#include "heed/nn/dropout.hpp"
#include "heed/ops/masked_softmax.hpp"

namespace heed {
namespace detail {

/// Checks that queries, keys and values fit one attention call; `op` names the caller.
template <typename T>
void check_attention_inputs(const Tensor<T>& queries, const Tensor<T>& keys, const Tensor<T>& values, const char* op,
                            bool same_feature_size) {
  const Shape &q = queries.shape(), &k = keys.shape(), &v = values.shape();
  HEED_CHECK((q.rank() == 3 || q.rank() == 4) && k.rank() == q.rank() && v.rank() == q.rank(), ShapeError, op,
             ": queries, keys and values must all be (batch, [heads,] steps, features), got ", to_string(q), ", ",
             to_string(k), " and ", to_string(v));
  bool same_batch = true;
  for (int d = 0; d + 2 < q.rank(); ++d) same_batch = same_batch && q[d] == k[d] && k[d] == v[d];
  HEED_CHECK(same_batch, ShapeError, op, ": batch dims differ: queries ", to_string(q), ", keys ", to_string(k),
             ", values ", to_string(v));
  HEED_CHECK(k[-2] == v[-2], ShapeError, op, ": keys ", to_string(k), " and values ", to_string(v),
             " have different numbers of steps");
  HEED_CHECK(!same_feature_size || q[-1] == k[-1], ShapeError, op, ": queries ", to_string(q), " and keys ",
             to_string(k), " have different feature sizes");
}

}  // namespace detail

template <typename T>
class DotProductAttention : public Module<T> {
 public:
  explicit DotProductAttention(double dropout = 0.0) : Module<T>("DotProductAttention"), dropout_(dropout) {
    this->register_module("dropout", dropout_);
  }

  Tensor<T> forward(const Tensor<T>& queries, const Tensor<T>& keys, const Tensor<T>& values,
                    const AttentionMask<T>& mask = {}) {
    detail::check_attention_inputs(queries, keys, values, "DotProductAttention", true);
    // Scaling the queries costs num_queries·d, scaling the scores num_queries·num_keys.
    const T scale = T(1) / static_cast<T>(std::sqrt(static_cast<double>(queries.shape()[-1])));
    const Tensor<T> scores = matmul(queries * scale, keys, false, true);
    const Tensor<T> weights = masked_softmax(scores, mask);
    attention_weights_ = keep_weights_ ? weights.detach() : Tensor<T>();
    return matmul(dropout_(weights), values);
  }
  Tensor<T> operator()(const Tensor<T>& queries, const Tensor<T>& keys, const Tensor<T>& values,
                       const AttentionMask<T>& mask = {}) {
    return forward(queries, keys, values, mask);
  }

  /// The weights of the last forward (before dropout), cut from the graph; undefined
  /// when keeping them is off.
  const Tensor<T>& attention_weights() const { return attention_weights_; }
  /// Whether forward keeps its weights (on by default); outputs are the same either way.
  void keep_attention_weights(bool keep) { keep_weights_ = keep; }

 private:
  Dropout<T> dropout_;
  Tensor<T> attention_weights_;
  bool keep_weights_ = true;
};

}  // namespace heed
