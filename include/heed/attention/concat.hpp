// heed/attention/concat.hpp — concatenation attention, the rule of PyTorch's seq2seq
// tutorial (class Attn):
//
//   weights = softmax(attn([Q₀; K₀]))            (n, value_size1)
//   applied = bmm(weights, V)                     (1, n, value_size2)
//   output  = attn_combine([Q₀; applied₀])        (1, n, output_size)
//
//   heed::ConcatAttention<float> attention(32, 32, 32, 64, 64);
//   auto [output, weights] = attention(Q, K, V);
//
//   Q: (1, n, query_size)   K: (1, n, key_size)   V: (1, value_size1, value_size2)
//
// The tutorial uses n = 1 (one decoder step); the scores come from the query and one
// key alone, so value_size1 is the (fixed) number of positions attended over.
#pragma once

#include "heed/detail/header_begin.hpp"

#include <string>
#include <utility>

#include "heed/nn/linear.hpp"
#include "heed/ops/masked_softmax.hpp"

namespace heed {

template <typename T>
class ConcatAttention : public Module<T> {
 public:
  ConcatAttention(index_t query_size, index_t key_size, index_t value_size1, index_t value_size2, index_t output_size,
                  Generator& gen = default_generator())
      : Module<T>("ConcatAttention"),
        attn(query_size + key_size, value_size1, true, gen),
        attn_combine(query_size + value_size2, output_size, true, gen),
        sizes_{query_size, key_size, value_size1, value_size2} {
    this->register_module("attn", attn);
    this->register_module("attn_combine", attn_combine);
  }

  /// Returns (output (1, n, output_size), weights (n, value_size1)).
  std::pair<Tensor<T>, Tensor<T>> forward(const Tensor<T>& Q, const Tensor<T>& K, const Tensor<T>& V) {
    const Shape &q = Q.shape(), &k = K.shape(), &v = V.shape();
    const bool fits = q.rank() == 3 && k.rank() == 3 && v.rank() == 3 && q[0] == 1 && k[0] == 1 && v[0] == 1 &&
                      q[1] == k[1] && q[2] == sizes_[0] && k[2] == sizes_[1] && v[1] == sizes_[2] && v[2] == sizes_[3];
    HEED_CHECK(fits, ShapeError, "ConcatAttention: expected Q (1, n, ", sizes_[0], "), K (1, n, ", sizes_[1],
               ") and V (1, ", sizes_[2], ", ", sizes_[3], "), got ", to_string(q), ", ", to_string(k), " and ",
               to_string(v));
    const Tensor<T> q0 = Q.select(0, 0);
    Tensor<T> weights = softmax(attn(cat({q0, K.select(0, 0)}, 1)), 1);  // (n, value_size1)
    const Tensor<T> applied = bmm(weights.unsqueeze(0), V);              // (1, n, value_size2)
    Tensor<T> output = attn_combine(cat({q0, applied.select(0, 0)}, 1)).unsqueeze(0);
    if (detail::keeps_forward_records()) attention_weights_ = weights.detach();
    return {output, weights};
  }
  std::pair<Tensor<T>, Tensor<T>> operator()(const Tensor<T>& Q, const Tensor<T>& K, const Tensor<T>& V) {
    return forward(Q, K, V);
  }

  /// The weights of the last forward, cut from the graph: (n, value_size1).
  const Tensor<T>& attention_weights() const { return attention_weights_; }

  Linear<T> attn, attn_combine;

 private:
  index_t sizes_[4];
  Tensor<T> attention_weights_;
};

}  // namespace heed

#include "heed/detail/header_end.hpp"
