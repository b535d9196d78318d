// heed/attention/multi_head.hpp — multi-head attention (d2l 10.5), with grouped-query
// attention and a key/value cache for decoding one step at a time.
//
//   heed::MultiHeadAttention<float> attention(/*key_size=*/100, /*query_size=*/100,
//       /*value_size=*/100, /*num_hiddens=*/100, /*num_heads=*/5, /*dropout=*/0.5);
//   attention.eval();
//   auto out = attention(X, Y, Y, valid_lens);   // (2, 4, 100)
//
//   queries: (batch, num_queries, query_size)
//   keys:    (batch, num_keys, key_size)
//   values:  (batch, num_keys, value_size)
//   out:     (batch, num_queries, num_hiddens)
//   attention_weights(): (batch, num_heads, num_queries, num_keys)
//
// Each head attends with DotProductAttention over num_hiddens / num_heads features.
// d2l folds the heads into the batch, (batch·num_heads, steps, head_dim) — that is
// what transpose_qkv / transpose_output below compute, for code translated from d2l —
// while the module keeps them as a dimension of their own, (batch, num_heads, steps,
// head_dim): masks then broadcast over heads instead of being repeated per head.
//
// Masks are the AttentionMask forms of masked_softmax, given per batch element as for
// 3-D attention: valid_lens (batch) or (batch, num_queries), a boolean or additive
// mask (batch, num_queries, num_keys) or anything broadcasting to it, the causal rule;
// 4-D masks with a heads dim pass through as they are.
//
// With num_kv_heads < num_heads (grouped-query attention), W_k and W_v project to
// num_kv_heads heads, each shared by num_heads / num_kv_heads query heads.
//
// Projections are split from attending, so that a decoder can keep the projected keys
// and values of the steps already decoded (KVCache) and attend to them again without
// recomputing them: forward(q, k, v, mask) is attend(q, project_kv(k, v), mask).
#pragma once

#include "heed/detail/header_begin.hpp"

#include <cstdint>
#include <string>

#include "heed/attention/dot_product.hpp"
#include "heed/nn/linear.hpp"
#include "heed/ops/shape.hpp"

namespace heed {

/// (batch, steps, num_heads·head_dim) -> (batch, num_heads, steps, head_dim).
template <typename T>
Tensor<T> split_heads(const Tensor<T>& X, index_t num_heads) {
  HEED_CHECK(X.dim() == 3 && num_heads > 0 && X.shape()[2] % num_heads == 0, ShapeError,
             "split_heads: X must be (batch, steps, features) with features divisible by num_heads = ", num_heads,
             ", got ", to_string(X.shape()));
  const Shape& s = X.shape();
  return X.reshape({s[0], s[1], num_heads, s[2] / num_heads}).permute({0, 2, 1, 3});
}

/// (batch, num_heads, steps, head_dim) -> (batch, steps, num_heads·head_dim).
template <typename T>
Tensor<T> merge_heads(const Tensor<T>& X) {
  HEED_CHECK(X.dim() == 4, ShapeError, "merge_heads: X must be (batch, num_heads, steps, head_dim), got ",
             to_string(X.shape()));
  const Shape& s = X.shape();
  return X.permute({0, 2, 1, 3}).reshape({s[0], s[2], s[1] * s[3]});
}

/// d2l's transpose_qkv: (batch, steps, num_hiddens) -> (batch·num_heads, steps, num_hiddens / num_heads).
template <typename T>
Tensor<T> transpose_qkv(const Tensor<T>& X, index_t num_heads) {
  const Tensor<T> heads = split_heads(X, num_heads);
  const Shape& s = heads.shape();
  return heads.reshape({s[0] * s[1], s[2], s[3]});
}

/// d2l's transpose_output, the inverse of transpose_qkv:
/// (batch·num_heads, steps, head_dim) -> (batch, steps, num_heads·head_dim).
template <typename T>
Tensor<T> transpose_output(const Tensor<T>& X, index_t num_heads) {
  HEED_CHECK(X.dim() == 3 && num_heads > 0 && X.shape()[0] % num_heads == 0, ShapeError,
             "transpose_output: X must be (batch·num_heads, steps, head_dim) with num_heads = ", num_heads,
             " dividing its first dim, got ", to_string(X.shape()));
  const Shape& s = X.shape();
  return merge_heads(X.reshape({s[0] / num_heads, num_heads, s[1], s[2]}));
}

/// Projected keys and values of the steps attended to so far, per head.
template <typename T>
struct KVCache {
  Tensor<T> keys;    // (batch, num_kv_heads, steps, head_dim)
  Tensor<T> values;  // (batch, num_kv_heads, steps, head_dim)

  bool empty() const { return !keys.defined(); }
  index_t num_steps() const { return empty() ? 0 : keys.shape()[2]; }
  /// Appends the steps of `more` after those already cached.
  void append(const KVCache& more) {
    if (empty()) {
      *this = more;
      return;
    }
    keys = cat({keys, more.keys}, 2);
    values = cat({values, more.values}, 2);
  }
  void clear() { keys = values = Tensor<T>(); }
};

template <typename T>
class MultiHeadAttention : public Module<T> {
 public:
  /// num_kv_heads = 0 means num_heads (plain multi-head attention).
  MultiHeadAttention(index_t key_size, index_t query_size, index_t value_size, index_t num_hiddens, index_t num_heads,
                     double dropout, bool bias = false, index_t num_kv_heads = 0, Generator& gen = default_generator())
      : Module<T>("MultiHeadAttention"),
        num_heads_(checked_heads(num_hiddens, num_heads)),
        num_kv_heads_(checked_kv_heads(num_heads, num_kv_heads)),
        head_dim_(num_hiddens / num_heads),
        attention(dropout),
        W_q(query_size, num_hiddens, bias, gen),
        W_k(key_size, num_kv_heads_ * head_dim_, bias, gen),
        W_v(value_size, num_kv_heads_ * head_dim_, bias, gen),
        W_o(num_hiddens, num_hiddens, bias, gen) {
    this->register_module("attention", attention);
    this->register_module("W_q", W_q);
    this->register_module("W_k", W_k);
    this->register_module("W_v", W_v);
    this->register_module("W_o", W_o);
  }

  Tensor<T> forward(const Tensor<T>& queries, const Tensor<T>& keys, const Tensor<T>& values,
                    const AttentionMask<T>& mask = {}) {
    check_input(keys, W_k, "keys");
    check_input(values, W_v, "values");
    HEED_CHECK(keys.shape()[0] == values.shape()[0] && keys.shape()[1] == values.shape()[1], ShapeError,
               "MultiHeadAttention: keys ", to_string(keys.shape()), " and values ", to_string(values.shape()),
               " differ in batch or steps");
    return attend(queries, project_kv(keys, values), mask);
  }
  Tensor<T> operator()(const Tensor<T>& queries, const Tensor<T>& keys, const Tensor<T>& values,
                       const AttentionMask<T>& mask = {}) {
    return forward(queries, keys, values, mask);
  }

  /// Keys and values projected and split into heads, ready for attend() or a cache.
  // keys: (batch, num_keys, key_size), values: (batch, num_keys, value_size)
  KVCache<T> project_kv(const Tensor<T>& keys, const Tensor<T>& values) const {
    check_input(keys, W_k, "keys");
    check_input(values, W_v, "values");
    return {split_heads(W_k(keys), num_kv_heads_), split_heads(W_v(values), num_kv_heads_)};
  }

  /// Attends with queries to keys and values already projected (by project_kv).
  // queries: (batch, num_queries, query_size) -> (batch, num_queries, num_hiddens)
  Tensor<T> attend(const Tensor<T>& queries, const KVCache<T>& kv, const AttentionMask<T>& mask = {}) {
    check_input(queries, W_q, "queries");
    const index_t batch = queries.shape()[0];
    HEED_CHECK(!kv.empty() && kv.keys.dim() == 4 && kv.keys.shape()[0] == batch &&
                   kv.keys.shape()[1] == num_kv_heads_ && kv.keys.shape()[3] == head_dim_ &&
                   kv.values.shape() == kv.keys.shape(),
               ShapeError, "MultiHeadAttention: projected keys ",
               kv.empty() ? std::string("(none)") : to_string(kv.keys.shape()), " and values ",
               kv.empty() ? std::string("(none)") : to_string(kv.values.shape()), " do not fit queries ",
               to_string(queries.shape()), " with ", num_kv_heads_, " key/value heads of ", head_dim_, " features");
    const Tensor<T> out = attention(split_heads(W_q(queries), num_heads_), kv.keys, kv.values, per_head(mask, batch));
    return W_o(merge_heads(out));
  }

  /// The weights of the last forward, (batch, num_heads, num_queries, num_keys), cut
  /// from the graph; undefined when keeping them is off.
  const Tensor<T>& attention_weights() const { return attention.attention_weights(); }
  /// Whether forward keeps its weights (on by default); outputs are the same either way.
  void keep_attention_weights(bool keep) { attention.keep_attention_weights(keep); }
  bool keeps_attention_weights() const { return attention.keeps_attention_weights(); }

  index_t num_heads() const { return num_heads_; }
  index_t num_kv_heads() const { return num_kv_heads_; }
  index_t num_hiddens() const { return W_o.out_features(); }
  index_t head_dim() const { return head_dim_; }

 private:
  static index_t checked_heads(index_t num_hiddens, index_t num_heads) {
    HEED_CHECK(num_heads > 0 && num_hiddens > 0 && num_hiddens % num_heads == 0, ValueError,
               "MultiHeadAttention: num_hiddens = ", num_hiddens, " is not divisible by num_heads = ", num_heads);
    return num_heads;
  }
  static index_t checked_kv_heads(index_t num_heads, index_t num_kv_heads) {
    if (num_kv_heads == 0) return num_heads;
    HEED_CHECK(num_kv_heads > 0 && num_heads % num_kv_heads == 0, ValueError,
               "MultiHeadAttention: num_kv_heads = ", num_kv_heads, " does not divide num_heads = ", num_heads);
    return num_kv_heads;
  }
  void check_input(const Tensor<T>& x, const Linear<T>& projection, const char* what) const {
    HEED_CHECK(x.dim() == 3 && x.shape()[2] == projection.in_features(), ShapeError, "MultiHeadAttention: ", what,
               " must be (batch, steps, ", projection.in_features(), "), got ", to_string(x.shape()));
  }
  /// The mask as seen by (batch, heads, queries, keys) scores: per-batch masks gain a
  /// heads dim, so that they broadcast over heads rather than against them.
  static AttentionMask<T> per_head(const AttentionMask<T>& mask, index_t batch) {
    AttentionMask<T> out = mask;
    if (mask.valid_lens().defined()) {
      const Shape& s = mask.valid_lens().shape();
      HEED_CHECK(s.rank() >= 1 && s.rank() <= 2 && s[0] == batch, ShapeError,
                 "MultiHeadAttention: valid_lens must be (batch) or (batch, num_queries) with batch = ", batch,
                 ", got ", to_string(s));
    }
    if (mask.allowed().defined() && mask.allowed().dim() == 3) out.with_allowed(mask.allowed().unsqueeze(1));
    if (mask.additive_mask().defined() && mask.additive_mask().dim() == 3)
      out.with_additive(mask.additive_mask().unsqueeze(1));
    return out;
  }

  index_t num_heads_, num_kv_heads_, head_dim_;

 public:
  DotProductAttention<T> attention;
  Linear<T> W_q, W_k, W_v, W_o;
};

}  // namespace heed

#include "heed/detail/header_end.hpp"
