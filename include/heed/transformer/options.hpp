// heed/transformer/options.hpp — what current Transformers add to d2l's blocks.
//
//   heed::TransformerOptions options;
//   options.norm_first = true;                      // pre-LayerNorm blocks
//   options.activation = heed::Activation::gelu;
//   options.num_kv_heads = 2;                       // grouped-query attention
//
// MarianMT (OPUS-MT) is post-LayerNorm with SiLU, attention biases, the concatenated
// sinusoid layout, 512 positions and one embedding table shared by the encoder, the
// decoder and its output layer (heed/seq2seq/marian.hpp sets these).
//   heed::EncoderBlock<float> blk(24, 24, 24, 24, {24}, 24, 48, 8, 0.5, false, options);
//
// The defaults are d2l's blocks exactly.
#pragma once

#include "heed/detail/header_begin.hpp"

#include <cmath>

#include "heed/attention/positional_encoding.hpp"
#include "heed/core/generator.hpp"
#include "heed/core/tensor.hpp"
#include "heed/nn/activation.hpp"

namespace heed {

struct TransformerOptions {
  /// Pre-LayerNorm: each sublayer computes X + dropout(f(LayerNorm(X))), and the
  /// encoder and decoder normalise the output of their last block ("ln"). The default
  /// is d2l's (and the original paper's) post-LayerNorm, LayerNorm(X + dropout(f(X))).
  bool norm_first = false;
  /// The nonlinearity between the two layers of the position-wise FFN.
  Activation activation = Activation::relu;
  /// Key/value heads of every attention; 0 means num_heads (no grouping).
  index_t num_kv_heads = 0;
  /// Where the initial weights come from; nullptr means default_generator().
  Generator* generator = nullptr;
  /// What the encoder and decoder multiply the embeddings by before adding the positional
  /// encoding; 0 means d2l's √num_hiddens, and 1 turns the scaling off.
  double embedding_scale = 0.0;
  /// Biases on every attention's query, key, value and output projections (MarianMT's,
  /// BART's); d2l's have none (the encoder block's use_bias argument adds them too).
  bool attention_bias = false;
  /// Dropout on the attention weights; negative means the blocks' dropout (d2l's one
  /// rate). MarianMT: dropout 0.1 after each sublayer, attention_dropout 0.
  double attention_dropout = -1.0;
  /// Where the positional table puts its sines and cosines.
  PositionalLayout positional_layout = PositionalLayout::interleaved;
  /// Positions of the positional tables: the longest sequence the encoder or decoder reads.
  index_t max_len = 1000;
  /// The decoder's output layer multiplies by its embedding table (one tensor, learnt
  /// once, its gradient the sum of both uses), as MarianMT's lm_head; the output layer
  /// keeps its own bias (MarianMT's final_logits_bias).
  bool tie_output_embedding = false;

  // d2l's exact numbers where heed deliberately differs (off by default; docs/d2l.md):
  /// The positional table computed in float32, as d2l's code does even in its float64
  /// runs; heed computes it in double and rounds it to the model's type.
  bool float32_positional_table = false;
  /// Every token decoded one step at a time gets position 0's encoding, as d2l's
  /// TransformerDecoder gives it; heed gives each step its own position, so that
  /// decoding step by step matches the full-sequence pass.
  bool decode_at_position_zero = false;

  Generator& init_generator() const { return generator ? *generator : default_generator(); }
};

namespace detail {

/// The factor of TransformerOptions::embedding_scale for a model of num_hiddens.
inline double embedding_scale(const TransformerOptions& options, index_t num_hiddens, const char* model) {
  HEED_CHECK(options.embedding_scale >= 0.0 && std::isfinite(options.embedding_scale), ValueError, model,
             ": embedding_scale must be finite and >= 0 (0: sqrt(num_hiddens)), got ", options.embedding_scale);
  return options.embedding_scale > 0.0 ? options.embedding_scale : std::sqrt(static_cast<double>(num_hiddens));
}

/// The attention-weight dropout of TransformerOptions for blocks of `dropout`.
inline double attention_dropout(const TransformerOptions& options, double dropout) {
  return options.attention_dropout < 0.0 ? dropout : options.attention_dropout;
}

/// The positional encoding the options describe, for an encoder or decoder of num_hiddens.
template <typename T>
PositionalEncoding<T> positional_encoding(const TransformerOptions& options, index_t num_hiddens, double dropout) {
  return PositionalEncoding<T>(
      num_hiddens, dropout, options.max_len,
      options.float32_positional_table ? PositionalTable::float32 : PositionalTable::double_precision,
      options.positional_layout);
}

/// A block maps (batch, steps, num_hiddens) to the same shape, so every size that its
/// sublayers read from the block's input must be num_hiddens.
inline void check_block_sizes(const char* block, index_t key_size, index_t query_size, index_t value_size,
                              index_t num_hiddens, const Shape& norm_shape, index_t ffn_num_input) {
  HEED_CHECK(key_size == num_hiddens && query_size == num_hiddens && value_size == num_hiddens &&
                 ffn_num_input == num_hiddens && norm_shape.rank() >= 1 && norm_shape[-1] == num_hiddens,
             ValueError, block, ": key_size, query_size, value_size, ffn_num_input and the last dim of norm_shape ",
             "must all equal num_hiddens = ", num_hiddens, " (the width of the block's input and output), got ",
             key_size, ", ", query_size, ", ", value_size, ", ", ffn_num_input, " and ", to_string(norm_shape));
}

/// X must be (batch, steps, num_hiddens) to enter a block.
template <typename T>
void check_block_input(const char* block, const Tensor<T>& X, index_t num_hiddens) {
  HEED_CHECK(X.dim() == 3 && X.shape()[2] == num_hiddens, ShapeError, block, ": X must be (batch, num_steps, ",
             num_hiddens, "), got ", to_string(X.shape()));
}

}  // namespace detail

}  // namespace heed

#include "heed/detail/header_end.hpp"
