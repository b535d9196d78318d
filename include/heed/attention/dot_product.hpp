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

#include "heed/detail/header_begin.hpp"

#include <cmath>
#include <string>

#include "heed/nn/dropout.hpp"
#include "heed/ops/scaled_dot_product_attention.hpp"

namespace heed {

template <typename T>
class DotProductAttention : public Module<T> {
 public:
  explicit DotProductAttention(double dropout = 0.0) : Module<T>("DotProductAttention"), dropout_(dropout) {
    this->register_module("dropout", dropout_);
  }

  Tensor<T> forward(const Tensor<T>& queries, const Tensor<T>& keys, const Tensor<T>& values,
                    const AttentionMask<T>& mask = {}) {
    detail::check_attention_inputs(queries, keys, values, "DotProductAttention", true, true);
    if (!keep_weights_ && supports(queries.device(), Capability::fused_attention)) {  // no weights to keep
      record(Tensor<T>());
      return scaled_dot_product_attention(queries, keys, values, mask, dropout_.is_training() ? dropout_.p() : 0.0,
                                          dropout_.generator());
    }
    // Scaling the queries costs num_queries·d, scaling the scores num_queries·num_keys.
    const T scale = T(1) / static_cast<T>(std::sqrt(static_cast<double>(queries.shape()[-1])));
    if (queries.dim() == 3) {
      const Tensor<T> weights = masked_softmax(matmul(queries * scale, keys, false, true), mask);
      record(weights);
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
    record(weights);
    const Tensor<T> out = matmul(dropout_(weights).reshape({batch, kv_heads, group * num_queries, num_keys}), values);
    return out.reshape({batch, heads, num_queries, values.shape()[3]});
  }
  Tensor<T> operator()(const Tensor<T>& queries, const Tensor<T>& keys, const Tensor<T>& values,
                       const AttentionMask<T>& mask = {}) {
    return forward(queries, keys, values, mask);
  }

  /// forward over the first num_keys steps of keys and values, (batch, heads, capacity,
  /// features) with capacity ≥ num_keys: a KVCache's, with room to grow. Without weights
  /// to keep, dropout or gradients, the fused kernel reads the prefix where it lies;
  /// otherwise the prefix is copied out first.
  Tensor<T> forward_prefix(const Tensor<T>& queries, const Tensor<T>& keys, const Tensor<T>& values, index_t num_keys,
                           const AttentionMask<T>& mask = {}) {
    detail::check_attention_inputs(queries, keys, values, "DotProductAttention", true, true);
    HEED_CHECK(num_keys >= 0 && num_keys <= keys.shape()[-2], ValueError, "DotProductAttention: num_keys = ", num_keys,
               " outside the keys' ", keys.shape()[-2], " steps");
    if (num_keys == keys.shape()[-2]) return forward(queries, keys, values, mask);
    if (!keep_weights_ && queries.dim() == 4 && num_keys > 0 && !mask.uniform_when_fully_masked() &&
        !(dropout_.is_training() && dropout_.p() > 0.0) && !autograd::needs_grad(queries, keys, values) &&
        queries.is_cpu() && keys.is_cpu() && values.is_cpu()) {
      record(Tensor<T>());
      return detail::attend_to_prefix(queries, keys, values, num_keys, mask);
    }
    return forward(queries, narrow(keys, -2, 0, num_keys), narrow(values, -2, 0, num_keys), mask);
  }

  /// The weights of the last forward (before dropout), cut from the graph; undefined
  /// when keeping them is off.
  const Tensor<T>& attention_weights() const { return attention_weights_; }
  /// Whether forward keeps its weights (on by default); outputs are the same either way.
  void keep_attention_weights(bool keep) { keep_weights_ = keep; }
  bool keeps_attention_weights() const { return keep_weights_; }

 private:
  /// Keeps `weights`, cut from the graph, as attention_weights() when keeping is on
  /// (none when off), unless this thread keeps no records (detail::keeps_forward_records).
  void record(const Tensor<T>& weights) {
    if (detail::keeps_forward_records())
      attention_weights_ = keep_weights_ && weights.defined() ? weights.detach() : Tensor<T>();
  }

  Dropout<T> dropout_;
  Tensor<T> attention_weights_;
  bool keep_weights_ = true;
};

}  // namespace heed

#include "heed/detail/header_end.hpp"
