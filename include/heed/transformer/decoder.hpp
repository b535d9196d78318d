// heed/transformer/decoder.hpp — the Transformer decoder (d2l 10.7.5), with a key/value
// cache per block for decoding one token at a time.
//
//   heed::TransformerDecoder<float> decoder(vocab_size, 32, 32, 32, 32, {32}, 32, 64, 4, 2, 0.1);
//   auto state = decoder.init_state(enc_outputs, enc_valid_lens);
//   auto logits = decoder(tgt_tokens, state);   // (batch, num_steps) -> (batch, num_steps, vocab_size)
//
// The state is d2l's [enc_outputs, enc_valid_lens, key_values]:
//   - training mode: the whole target sequence goes in at once, and the
//     self-attention is causal (step i sees steps 0..i; d2l's dec_valid_lens =
//     1..num_steps). Nothing is cached.
//   - eval mode: each call appends its steps' projected keys and values to each
//     block's cache (key_values) and attends to all of them, causally, so greedy
//     decoding feeds one token per call and never recomputes the prefix; the
//     encoder outputs are projected once per block and kept too (cross_key_values).
//     Positions continue from the steps already decoded (num_steps).
// Feeding a sequence one token at a time in eval mode gives the outputs of one
// training-mode pass over it (with dropout 0): tested.
#pragma once

#include "heed/detail/header_begin.hpp"

#include <array>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "heed/transformer/encoder.hpp"

namespace heed {

template <typename T>
struct TransformerDecoderState {
  Tensor<T> enc_outputs;                     // (batch, num_enc_steps, num_hiddens)
  AttentionMask<T> enc_valid_lens;           // which encoder steps the decoder may attend to
  std::vector<KVCache<T>> key_values;        // per block: self-attention keys/values of the steps so far
  std::vector<KVCache<T>> cross_key_values;  // per block: the projected encoder outputs
  index_t num_steps = 0;                     // target steps decoded so far (eval mode)
  // Eval mode: the decoder's rows per row of enc_outputs, consecutive (beam search's
  // beams of a sentence share its encoder outputs and their projections).
  index_t rows_per_source = 1;
};

template <typename T>
class DecoderBlock : public Module<T> {
 public:
  /// i: this block's index in the decoder, where it finds its caches in the state.
  DecoderBlock(index_t key_size, index_t query_size, index_t value_size, index_t num_hiddens, const Shape& norm_shape,
               index_t ffn_num_input, index_t ffn_num_hiddens, index_t num_heads, double dropout, index_t i,
               const TransformerOptions& options = {})
      : Module<T>("DecoderBlock"),
        attention1((detail::check_block_sizes("DecoderBlock", key_size, query_size, value_size, num_hiddens, norm_shape,
                                              ffn_num_input),
                    key_size),
                   query_size, value_size, num_hiddens, num_heads, detail::attention_dropout(options, dropout),
                   options.attention_bias, options.num_kv_heads, options.init_generator()),
        addnorm1(norm_shape, dropout),
        attention2(key_size, query_size, value_size, num_hiddens, num_heads,
                   detail::attention_dropout(options, dropout), options.attention_bias, options.num_kv_heads,
                   options.init_generator()),
        addnorm2(norm_shape, dropout),
        ffn(ffn_num_input, ffn_num_hiddens, num_hiddens, options.activation, options.init_generator()),
        addnorm3(norm_shape, dropout),
        i_(i),
        norm_first_(options.norm_first) {
    HEED_CHECK(i >= 0, ValueError, "DecoderBlock: block index i must be >= 0, got ", i);
    this->register_module("attention1", attention1);
    this->register_module("addnorm1", addnorm1);
    this->register_module("attention2", attention2);
    this->register_module("addnorm2", addnorm2);
    this->register_module("ffn", ffn);
    this->register_module("addnorm3", addnorm3);
  }

  // X: (batch, num_steps, num_hiddens) -> same shape; state.enc_outputs:
  // (batch, num_enc_steps, num_hiddens)
  Tensor<T> forward(const Tensor<T>& X, TransformerDecoderState<T>& state) {
    detail::check_block_input("DecoderBlock", X, attention1.num_hiddens());
    const index_t per_source = state.rows_per_source;
    HEED_CHECK(per_source == 1 || (per_source > 1 && !this->is_training()), ValueError,
               "DecoderBlock: rows_per_source = ", per_source, " (must be 1 in training, >= 1 in eval mode)");
    HEED_CHECK(state.enc_outputs.defined() && state.enc_outputs.dim() == 3 &&
                   state.enc_outputs.shape()[0] * per_source == X.shape()[0] &&
                   state.enc_outputs.shape()[2] == attention2.num_hiddens(),
               ShapeError, "DecoderBlock: enc_outputs ",
               state.enc_outputs.defined() ? to_string(state.enc_outputs.shape()) : std::string("(undefined)"),
               " must be (batch, num_enc_steps, num_hiddens) for X ", to_string(X.shape()),
               per_source > 1 ? " over rows_per_source = " + std::to_string(per_source) : std::string());
    const auto slot = static_cast<std::size_t>(i_);
    if (state.key_values.size() <= slot) state.key_values.resize(slot + 1);
    if (state.cross_key_values.size() <= slot) state.cross_key_values.resize(slot + 1);

    // Self-attention, causal: step i sees the cached steps and steps 0..i of X.
    const Tensor<T> self_in = norm_first_ ? addnorm1.norm(X) : X;
    Tensor<T> self_out;
    if (this->is_training()) {
      self_out = attention1(self_in, self_in, self_in, AttentionMask<T>::causal());
    } else {
      KVCache<T>& cache = state.key_values[slot];
      cache.append(attention1.project_kv(self_in, self_in));
      self_out = attention1.attend(self_in, cache, AttentionMask<T>::causal());
    }
    const Tensor<T> Y = norm_first_ ? addnorm1.residual(X, self_out) : addnorm1(X, self_out);

    // Encoder-decoder attention: the encoder's projections never change during decoding.
    const Tensor<T> cross_in = norm_first_ ? addnorm2.norm(Y) : Y;
    Tensor<T> cross_out;
    if (this->is_training()) {
      cross_out = attention2(cross_in, state.enc_outputs, state.enc_outputs, state.enc_valid_lens);
    } else {
      KVCache<T>& cross = state.cross_key_values[slot];
      if (cross.empty()) cross = attention2.project_kv(state.enc_outputs, state.enc_outputs);
      cross_out = attention2.attend(cross_in, cross, state.enc_valid_lens);
    }
    const Tensor<T> Z = norm_first_ ? addnorm2.residual(Y, cross_out) : addnorm2(Y, cross_out);
    return norm_first_ ? addnorm3.residual(Z, ffn(addnorm3.norm(Z))) : addnorm3(Z, ffn(Z));
  }
  Tensor<T> operator()(const Tensor<T>& X, TransformerDecoderState<T>& state) { return forward(X, state); }

  index_t index() const { return i_; }
  bool norm_first() const { return norm_first_; }

  MultiHeadAttention<T> attention1;  // masked self-attention
  AddNorm<T> addnorm1;
  MultiHeadAttention<T> attention2;  // encoder-decoder attention
  AddNorm<T> addnorm2;
  PositionWiseFFN<T> ffn;
  AddNorm<T> addnorm3;

 private:
  index_t i_;
  bool norm_first_;
};

template <typename T>
class TransformerDecoder : public Module<T> {
 public:
  TransformerDecoder(index_t vocab_size, index_t key_size, index_t query_size, index_t value_size, index_t num_hiddens,
                     const Shape& norm_shape, index_t ffn_num_input, index_t ffn_num_hiddens, index_t num_heads,
                     index_t num_layers, double dropout, const TransformerOptions& options = {})
      : Module<T>("TransformerDecoder"),
        num_hiddens_(num_hiddens),
        num_layers_(num_layers),
        embedding_scale_(detail::embedding_scale(options, num_hiddens, "TransformerDecoder")),
        norm_first_(options.norm_first),
        decode_at_position_zero_(options.decode_at_position_zero),
        embedding(vocab_size, num_hiddens, options.init_generator()),
        pos_encoding(detail::positional_encoding<T>(options, num_hiddens, dropout)),
        blks("Sequential"),
        ln(norm_shape),
        dense(num_hiddens, vocab_size, true, options.init_generator()) {
    if (options.tie_output_embedding) tie_parameter(dense.weight, embedding.weight, "TransformerDecoder");
    HEED_CHECK(num_layers > 0, ValueError, "TransformerDecoder: num_layers must be positive, got ", num_layers);
    this->register_module("embedding", embedding);
    this->register_module("pos_encoding", pos_encoding);
    for (index_t i = 0; i < num_layers; ++i)
      blks.push_back(detail::concat("block", i),
                     std::make_unique<DecoderBlock<T>>(key_size, query_size, value_size, num_hiddens, norm_shape,
                                                       ffn_num_input, ffn_num_hiddens, num_heads, dropout, i, options));
    this->register_module("blks", blks);
    if (norm_first_) this->register_module("ln", ln);
    this->register_module("dense", dense);
  }

  /// d2l's init_state: the encoder's outputs and valid lengths, empty caches.
  // enc_outputs: (batch, num_enc_steps, num_hiddens)
  TransformerDecoderState<T> init_state(const Tensor<T>& enc_outputs,
                                        const AttentionMask<T>& enc_valid_lens = {}) const {
    TransformerDecoderState<T> state;
    state.enc_outputs = enc_outputs;
    state.enc_valid_lens = enc_valid_lens;
    state.key_values.resize(static_cast<std::size_t>(num_layers_));
    state.cross_key_values.resize(static_cast<std::size_t>(num_layers_));
    return state;
  }

  // tokens: (batch, num_steps) int64 -> logits (batch, num_steps, vocab_size)
  Tensor<T> forward(const IndexTensor& tokens, TransformerDecoderState<T>& state) {
    return dense(features(tokens, state));
  }
  /// forward without the output layer: what `dense` maps onto the vocabulary, so that
  /// train_seq2seq can fuse that layer with the loss (masked_linear_ce_loss).
  // tokens: (batch, num_steps) int64 -> (batch, num_steps, num_hiddens)
  Tensor<T> features(const IndexTensor& tokens, TransformerDecoderState<T>& state) {
    HEED_CHECK(tokens.defined() && tokens.dim() == 2, ShapeError,
               "TransformerDecoder: tokens must be (batch, num_steps), got ",
               tokens.defined() ? to_string(tokens.shape()) : std::string("undefined"));
    const index_t offset = this->is_training() || decode_at_position_zero_ ? 0 : state.num_steps;
    Tensor<T> X = pos_encoding(embedding(tokens) * embedding_scale_, offset);
    for (auto& blk : blks) X = (*blk)(X, state);
    if (!this->is_training()) state.num_steps += tokens.shape()[1];
    return norm_first_ ? ln(X) : X;
  }
  Tensor<T> operator()(const IndexTensor& tokens, TransformerDecoderState<T>& state) { return forward(tokens, state); }

  /// Each layer's masked self-attention weights from the last forward, (batch,
  /// num_heads, num_steps, steps attended to).
  std::vector<Tensor<T>> self_attention_weights() const {
    std::vector<Tensor<T>> weights;
    for (const auto& blk : blks) weights.push_back(blk->attention1.attention_weights());
    return weights;
  }
  /// Each layer's encoder-decoder attention weights, (batch, num_heads, num_steps, num_enc_steps).
  std::vector<Tensor<T>> cross_attention_weights() const {
    std::vector<Tensor<T>> weights;
    for (const auto& blk : blks) weights.push_back(blk->attention2.attention_weights());
    return weights;
  }
  /// d2l's attention_weights: [self-attention per layer, encoder-decoder per layer].
  std::array<std::vector<Tensor<T>>, 2> attention_weights() const {
    return {self_attention_weights(), cross_attention_weights()};
  }
  /// Whether every attention keeps its weights (on by default).
  void keep_attention_weights(bool keep) {
    for (auto& blk : blks) {
      blk->attention1.keep_attention_weights(keep);
      blk->attention2.keep_attention_weights(keep);
    }
  }
  /// Whether any attention keeps its weights.
  bool keeps_attention_weights() const {
    for (const auto& blk : blks)
      if (blk->attention1.keeps_attention_weights() || blk->attention2.keeps_attention_weights()) return true;
    return false;
  }
  index_t num_hiddens() const { return num_hiddens_; }
  index_t num_layers() const { return num_layers_; }

  /// In training, the outputs at the first steps are the same whatever steps follow
  /// them (the self-attention is causal, dropout masks depend on coordinates), so
  /// train_seq2seq may cut the target after its longest sequence.
  static constexpr bool ignores_padding = true;

 private:
  index_t num_hiddens_, num_layers_;
  double embedding_scale_;
  bool norm_first_;
  bool decode_at_position_zero_;

 public:
  Embedding<T> embedding;
  PositionalEncoding<T> pos_encoding;
  ModuleList<T, DecoderBlock<T>> blks;
  LayerNorm<T> ln;  // only registered (and used) with norm_first
  Linear<T> dense;
};

}  // namespace heed

#include "heed/detail/header_end.hpp"
