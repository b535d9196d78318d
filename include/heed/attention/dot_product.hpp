// heed/attention/dot_product.hpp — scaled dot-product attention (d2l 10.3.3).
//
//   heed::DotProductAttention<float> attention(/*dropout=*/0.5);
//   attention.eval();
//   auto out = attention(queries, keys, values, valid_lens);
//
//   queries: (batch, [heads,] num_queries, d)
//   keys:    (batch, [kv_heads,] num_keys, d)         kv_heads divides heads
//   values:  (batch, [kv_heads,] num_keys, value_dim)
//   out:     (batch, [heads,] num_queries, value_dim)
//   attention_weights(): (batch, [heads,] num_queries, num_keys)
//
// out = dropout(masked_softmax(Q Kᵀ / √d, mask)) V. The mask is any AttentionMask:
// valid_lens as in d2l, a boolean mask, an additive mask or the causal rule. With 4-D
// inputs, keys and values may have fewer heads than the queries (grouped-query
// attention): query head h reads key/value head h / (heads / kv_heads).
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
                            bool same_feature_size, bool grouped_heads = false) {
  const Shape &q = queries.shape(), &k = keys.shape(), &v = values.shape();
  HEED_CHECK((q.rank() == 3 || q.rank() == 4) && k.rank() == q.rank() && v.rank() == q.rank(), ShapeError, op,
             ": queries, keys and values must all be (batch, [heads,] steps, features), got ", to_string(q), ", ",
             to_string(k), " and ", to_string(v));
  HEED_CHECK(q[0] == k[0] && k[0] == v[0], ShapeError, op, ": batch sizes differ: queries ", to_string(q), ", keys ",
             to_string(k), ", values ", to_string(v));
  // 4-D: with grouped_heads, keys and values may have fewer heads than queries.
  HEED_CHECK(q.rank() == 3 || (k[1] == v[1] && (grouped_heads ? k[1] > 0 && q[1] % k[1] == 0 : q[1] == k[1])),
             ShapeError, op, ": keys and values need the same number of heads ", grouped_heads ? "dividing" : "as",
             " the queries': queries ", to_string(q), ", keys ", to_string(k), ", values ", to_string(v));
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
    detail::check_attention_inputs(queries, keys, values, "DotProductAttention", true, true);
    // Scaling the queries costs num_queries·d, scaling the scores num_queries·num_keys.
    const T scale = T(1) / static_cast<T>(std::sqrt(static_cast<double>(queries.shape()[-1])));
    if (queries.dim() == 3) {
      const Tensor<T> weights = masked_softmax(matmul(queries * scale, keys, false, true), mask);
      attention_weights_ = keep_weights_ ? weights.detach() : Tensor<T>();
      return matmul(dropout_(weights), values);
    }
    // Grouped heads: the `group` query heads that share a key/value head are stacked
    // along the steps, (batch, kv_heads, group·num_queries, d), so that one batched
    // GEMM per kv head serves them all and keys and values are never repeated.
    const Shape &q = queries.shape(), &k = keys.shape();
    const index_t batch = q[0], heads = q[1], kv_heads = k[1], group = heads / kv_heads;
    const index_t num_queries = q[2], num_keys = k[2];
    const Tensor<T> scores =
        matmul((queries * scale).reshape({batch, kv_heads, group * num_queries, q[3]}), keys, false, true);
    const Tensor<T> weights = masked_softmax(scores.reshape({batch, heads, num_queries, num_keys}), mask);
    attention_weights_ = keep_weights_ ? weights.detach() : Tensor<T>();
    const Tensor<T> out = matmul(dropout_(weights).reshape({batch, kv_heads, group * num_queries, num_keys}), values);
    return out.reshape({batch, heads, num_queries, values.shape()[3]});
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
