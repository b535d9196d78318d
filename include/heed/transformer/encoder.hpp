// heed/transformer/encoder.hpp — the Transformer encoder (d2l 10.7.4).
//
//   heed::EncoderBlock<float> encoder_blk(24, 24, 24, 24, {100, 24}, 24, 48, 8, 0.5);
//   auto Y = encoder_blk(X, valid_lens);   // X: (2, 100, 24) -> (2, 100, 24)
//
//   heed::TransformerEncoder<float> encoder(200, 24, 24, 24, 24, {100, 24}, 24, 48, 8, 2, 0.5);
//   auto Z = encoder(tokens, valid_lens);  // tokens: (2, 100) int64 -> (2, 100, 24)
//   encoder.attention_weights()[i];       // layer i: (batch, num_heads, steps, steps)
//
// A block is self-attention then the position-wise FFN, each wrapped in AddNorm. The
// encoder scales the embeddings by √num_hiddens before adding the positional encoding
// (both are then of comparable size), then runs num_layers blocks.
#pragma once

#include "heed/detail/header_begin.hpp"

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "heed/attention/multi_head.hpp"
#include "heed/attention/positional_encoding.hpp"
#include "heed/nn/embedding.hpp"
#include "heed/nn/module_list.hpp"
#include "heed/transformer/add_norm.hpp"
#include "heed/transformer/ffn.hpp"
#include "heed/transformer/options.hpp"

namespace heed {

template <typename T>
class EncoderBlock : public Module<T> {
 public:
  EncoderBlock(index_t key_size, index_t query_size, index_t value_size, index_t num_hiddens, const Shape& norm_shape,
               index_t ffn_num_input, index_t ffn_num_hiddens, index_t num_heads, double dropout, bool use_bias = false,
               const TransformerOptions& options = {})
      : Module<T>("EncoderBlock"),
        attention((detail::check_block_sizes("EncoderBlock", key_size, query_size, value_size, num_hiddens, norm_shape,
                                             ffn_num_input),
                   key_size),
                  query_size, value_size, num_hiddens, num_heads, detail::attention_dropout(options, dropout),
                  use_bias || options.attention_bias, options.num_kv_heads, options.init_generator()),
        addnorm1(norm_shape, dropout),
        ffn(ffn_num_input, ffn_num_hiddens, num_hiddens, options.activation, options.init_generator()),
        addnorm2(norm_shape, dropout),
        norm_first_(options.norm_first) {
    this->register_module("attention", attention);
    this->register_module("addnorm1", addnorm1);
    this->register_module("ffn", ffn);
    this->register_module("addnorm2", addnorm2);
  }

  // X: (batch, num_steps, num_hiddens) -> same shape
  Tensor<T> forward(const Tensor<T>& X, const AttentionMask<T>& mask = {}) {
    detail::check_block_input("EncoderBlock", X, attention.num_hiddens());
    if (norm_first_) {
      const Tensor<T> normed = addnorm1.norm(X);
      const Tensor<T> Y = addnorm1.residual(X, attention(normed, normed, normed, mask));
      return addnorm2.residual(Y, ffn(addnorm2.norm(Y)));
    }
    const Tensor<T> Y = addnorm1(X, attention(X, X, X, mask));
    return addnorm2(Y, ffn(Y));
  }
  Tensor<T> operator()(const Tensor<T>& X, const AttentionMask<T>& mask = {}) { return forward(X, mask); }

  bool norm_first() const { return norm_first_; }

  MultiHeadAttention<T> attention;
  AddNorm<T> addnorm1;
  PositionWiseFFN<T> ffn;
  AddNorm<T> addnorm2;

 private:
  bool norm_first_;
};

template <typename T>
class TransformerEncoder : public Module<T> {
 public:
  TransformerEncoder(index_t vocab_size, index_t key_size, index_t query_size, index_t value_size, index_t num_hiddens,
                     const Shape& norm_shape, index_t ffn_num_input, index_t ffn_num_hiddens, index_t num_heads,
                     index_t num_layers, double dropout, bool use_bias = false, const TransformerOptions& options = {})
      : Module<T>("TransformerEncoder"),
        num_hiddens_(num_hiddens),
        embedding_scale_(detail::embedding_scale(options, num_hiddens, "TransformerEncoder")),
        embedding(vocab_size, num_hiddens, options.init_generator()),
        pos_encoding(detail::positional_encoding<T>(options, num_hiddens, dropout)),
        blks("Sequential"),
        ln(norm_shape) {
    HEED_CHECK(num_layers > 0, ValueError, "TransformerEncoder: num_layers must be positive, got ", num_layers);
    this->register_module("embedding", embedding);
    this->register_module("pos_encoding", pos_encoding);
    for (index_t i = 0; i < num_layers; ++i)
      blks.push_back(
          detail::concat("block", i),
          std::make_unique<EncoderBlock<T>>(key_size, query_size, value_size, num_hiddens, norm_shape, ffn_num_input,
                                            ffn_num_hiddens, num_heads, dropout, use_bias, options));
    this->register_module("blks", blks);
    if (options.norm_first) this->register_module("ln", ln);
    norm_first_ = options.norm_first;
  }

  // tokens: (batch, num_steps) int64 -> (batch, num_steps, num_hiddens)
  Tensor<T> forward(const IndexTensor& tokens, const AttentionMask<T>& mask = {}) {
    HEED_CHECK(tokens.defined() && tokens.dim() == 2, ShapeError,
               "TransformerEncoder: tokens must be (batch, num_steps), got ",
               tokens.defined() ? to_string(tokens.shape()) : std::string("undefined"));
    // The embeddings are N(0, 1) and P is in [-1, 1]: scaling by √num_hiddens keeps the
    // positions from drowning the tokens (d2l's reason; TransformerOptions::embedding_scale).
    Tensor<T> X = pos_encoding(embedding(tokens) * embedding_scale_);
    for (auto& blk : blks) X = (*blk)(X, mask);
    return norm_first_ ? ln(X) : X;
  }
  Tensor<T> operator()(const IndexTensor& tokens, const AttentionMask<T>& mask = {}) { return forward(tokens, mask); }

  /// Each layer's self-attention weights from the last forward, (batch, num_heads,
  /// num_steps, num_steps); undefined where keeping them is off.
  std::vector<Tensor<T>> attention_weights() const {
    std::vector<Tensor<T>> weights;
    for (const auto& blk : blks) weights.push_back(blk->attention.attention_weights());
    return weights;
  }
  /// Whether every layer keeps its attention weights (on by default).
  void keep_attention_weights(bool keep) {
    for (auto& blk : blks) blk->attention.keep_attention_weights(keep);
  }
  /// Whether any layer keeps its attention weights.
  bool keeps_attention_weights() const {
    for (const auto& blk : blks)
      if (blk->attention.keeps_attention_weights()) return true;
    return false;
  }
  index_t num_hiddens() const { return num_hiddens_; }

  /// The outputs at valid steps are the same whatever follows them: the padding is
  /// masked out of every attention (train_seq2seq cuts it off).
  static constexpr bool ignores_padding = true;

 private:
  index_t num_hiddens_;
  double embedding_scale_;
  bool norm_first_ = false;

 public:
  Embedding<T> embedding;
  PositionalEncoding<T> pos_encoding;
  ModuleList<T, EncoderBlock<T>> blks;
  LayerNorm<T> ln;  // only registered (and used) with norm_first
};

}  // namespace heed

#include "heed/detail/header_end.hpp"
