// heed/seq2seq/decoder_state.hpp — what differs between the decoders predict_seq2seq
// drives (the GRU's and the Transformer's): the positions each reads, the attention
// weights of a step, reordering the state when beams follow their parents, and a
// hypothesis being decoded with the weights of each of its steps.
#pragma once

#include "heed/detail/header_begin.hpp"

#include <type_traits>
#include <utility>
#include <vector>

#include "heed/seq2seq/bahdanau_decoder.hpp"
#include "heed/seq2seq/gru_encoder.hpp"
#include "heed/seq2seq/predict_options.hpp"
#include "heed/transformer/decoder.hpp"

namespace heed {

namespace detail {

/// Whether cutting the padding off a module's input changes nothing at the valid steps
/// (Part::ignores_padding; false when it does not say).
template <typename Part, typename = void>
struct ignores_padding : std::false_type {};
template <typename Part>
struct ignores_padding<Part, std::void_t<decltype(Part::ignores_padding)>> : std::bool_constant<Part::ignores_padding> {
};

/// The most positions a part (encoder or decoder) reads in one sequence: its positional
/// table's length, or PredictOptions::kMaxLength for one without positions.
template <typename Part, typename = void>
struct has_positions : std::false_type {};
template <typename Part>
struct has_positions<Part, std::void_t<decltype(std::declval<const Part&>().pos_encoding.max_len())>> : std::true_type {
};
template <typename Part>
index_t max_positions(const Part& part) {
  if constexpr (has_positions<Part>::value)
    return std::min(part.pos_encoding.max_len(), PredictOptions::kMaxLength);
  else
    return PredictOptions::kMaxLength;
}

template <typename T>
std::vector<Tensor<T>> step_cross_attention(const Seq2SeqAttentionDecoder<T>& decoder) {
  return {decoder.attention_weights().back().unsqueeze(1)};  // (batch, 1, 1, num_enc_steps)
}
template <typename T>
std::vector<Tensor<T>> step_cross_attention(const TransformerDecoder<T>& decoder) {
  return decoder.cross_attention_weights();  // per layer (batch, heads, 1, num_enc_steps)
}
template <typename T>
std::vector<Tensor<T>> step_self_attention(const Seq2SeqAttentionDecoder<T>&) {
  return {};
}
template <typename T>
std::vector<Tensor<T>> step_self_attention(const TransformerDecoder<T>& decoder) {
  return decoder.self_attention_weights();  // per layer (batch, heads, 1, steps so far)
}
template <typename T>
std::vector<Tensor<T>> encoder_attention(const Seq2SeqEncoder<T>&) {
  return {};
}
template <typename T>
std::vector<Tensor<T>> encoder_attention(const TransformerEncoder<T>& encoder) {
  return encoder.attention_weights();  // per layer (batch, heads, steps, steps)
}

/// 0, 0, …, 1, 1, …: each of `rows` rows K times.
inline IndexTensor repeat_rows(index_t rows, index_t K) {
  IndexTensor index = make_tensor<std::int64_t>(Shape{rows * K});
  for (index_t i = 0; i < rows * K; ++i) index.data()[i] = i / K;
  return index;
}

/// index_select of x's rows by an index on the CPU (the decoding loop's), x on any
/// device. Valid lengths (int64) have no device kernel: a device's few come to the CPU
/// and go back.
template <typename T>
Tensor<T> select_state_rows(const Tensor<T>& x, int dim, const IndexTensor& index) {
  if constexpr (std::is_floating_point_v<T>)
    return index_select(x, dim, index.to(x.device()));
  else
    return index_select(x.to(Device::cpu()), dim, index).to(x.device());
}

/// Keeps the rows `index` of the batch, in that order: beams follow their parents. With
/// `same_sources`, each row's parent decodes the same source sentence as the row (beams
/// within their sentence, no sentence leaving the batch): the rows of what the encoder
/// gave are equal among a sentence's beams, so they stay where they are.
template <typename T>
void reorder_state(Seq2SeqAttentionState<T>& state, const IndexTensor& index, bool same_sources = false) {
  state.hidden_state = select_state_rows(state.hidden_state, 1, index);
  if (same_sources) return;
  state.enc_outputs = select_state_rows(state.enc_outputs, 0, index);
  if (state.enc_valid_lens.defined()) state.enc_valid_lens = select_state_rows(state.enc_valid_lens, 0, index);
  state.projected_keys = select_state_rows(state.projected_keys, 0, index);
}
template <typename T>
void reorder_state(TransformerDecoderState<T>& state, const IndexTensor& index, bool same_sources = false) {
  // Rows sharing a source (rows_per_source > 1) move as groups: group j's source is
  // that of its rows' parents, which must all be of one group (checked first: a bad
  // index changes nothing).
  IndexTensor sources = index;
  const index_t group = state.rows_per_source;
  if (group > 1 && !same_sources) {
    const index_t rows = index.numel();
    HEED_CHECK(rows % group == 0, ShapeError, "reorder_state: ", rows,
               " rows are not groups of rows_per_source = ", group);
    sources = make_tensor<std::int64_t>(Shape{rows / group});
    for (index_t j = 0; j < rows / group; ++j) {
      sources.data()[j] = index.data()[j * group] / group;
      for (index_t k = 1; k < group; ++k)
        HEED_CHECK(index.data()[j * group + k] / group == sources.data()[j], ValueError, "reorder_state: row ",
                   j * group + k, " takes parent ", index.data()[j * group + k], ", not of its group's source ",
                   sources.data()[j]);
    }
  }
  for (KVCache<T>& cache : state.key_values) cache.reorder(index);
  if (same_sources) return;
  state.enc_outputs = select_state_rows(state.enc_outputs, 0, sources);
  if (state.enc_valid_lens.valid_lens().defined())
    state.enc_valid_lens.with_valid_lens(select_state_rows(state.enc_valid_lens.valid_lens(), 0, sources));
  for (KVCache<T>& cache : state.cross_key_values) cache.reorder(sources);
}

/// Beam search's K rows per sentence (row b·K + k is beam k of sentence b): each row
/// of the state repeated K times, or for the Transformer with `share_sources`, what comes
/// from the encoder kept once per sentence (rows_per_source = K; 3/4 of the
/// cross-attention's keys and values fewer at beam 4).
template <typename T>
void expand_beams(Seq2SeqAttentionState<T>& state, index_t K, bool) {
  reorder_state(state, repeat_rows(state.enc_outputs.shape()[0], K));
}
template <typename T>
void expand_beams(TransformerDecoderState<T>& state, index_t K, bool share_sources) {
  if (share_sources)
    state.rows_per_source = K;
  else
    reorder_state(state, repeat_rows(state.enc_outputs.shape()[0], K));
}

/// Room in the state's caches for `steps` decoded steps, so that they never grow again.
template <typename T>
void reserve_steps(Seq2SeqAttentionState<T>&, index_t) {}
template <typename T>
void reserve_steps(TransformerDecoderState<T>& state, index_t steps) {
  for (KVCache<T>& cache : state.key_values) cache.reserve(steps);
}

/// Row `row` of each layer's (batch, heads, 1, k) weights, as (layers, heads, k).
template <typename T>
Tensor<T> rows_of(const std::vector<Tensor<T>>& per_layer, index_t row) {
  std::vector<Tensor<T>> layers;
  for (const Tensor<T>& w : per_layer) layers.push_back(select(select(w, 0, row), 1, 0));
  return stack(layers, 0).to(Device::cpu());  // a hypothesis keeps its weights on the CPU
}

/// Per-step (layers, heads, k_t) weights → (layers, heads, steps, width), zero-padded.
template <typename T>
Tensor<T> stack_steps(const std::vector<Tensor<T>>& steps, index_t width) {
  if (steps.empty()) return Tensor<T>();
  const index_t layers = steps[0].shape()[0], heads = steps[0].shape()[1], n = static_cast<index_t>(steps.size());
  Tensor<T> out = zeros<T>({layers, heads, n, width});
  for (index_t t = 0; t < n; ++t) {
    const Tensor<T>& w = steps[static_cast<std::size_t>(t)];
    const index_t k = std::min(w.shape()[2], width);
    for (index_t l = 0; l < layers; ++l)
      for (index_t h = 0; h < heads; ++h)
        std::copy(w.data() + (l * heads + h) * w.shape()[2], w.data() + (l * heads + h) * w.shape()[2] + k,
                  out.data() + ((l * heads + h) * n + t) * width);
  }
  return out;
}

/// Turns off keeping attention weights in a part (an encoder or decoder that has the
/// switch) for its lifetime, when they are not wanted, and back on after if it was.
template <typename Part>
class NoAttentionWeightsScope {
 public:
  NoAttentionWeightsScope(Part& part, bool wanted) : part_(part) {
    if constexpr (has_switch<Part>(0)) {
      restore_ = !wanted && part.keeps_attention_weights();
      if (restore_) part.keep_attention_weights(false);
    }
  }
  ~NoAttentionWeightsScope() {
    if constexpr (has_switch<Part>(0))
      if (restore_) part_.keep_attention_weights(true);
  }
  NoAttentionWeightsScope(const NoAttentionWeightsScope&) = delete;
  NoAttentionWeightsScope& operator=(const NoAttentionWeightsScope&) = delete;

 private:
  template <typename P>
  static constexpr auto has_switch(int) -> decltype(std::declval<const P&>().keeps_attention_weights(), true) {
    return true;
  }
  template <typename P>
  static constexpr bool has_switch(long) {
    return false;
  }
  Part& part_;
  bool restore_ = false;
};

/// A hypothesis being decoded: its tokens and the weights of each of its steps.
template <typename T>
struct LiveHypothesis {
  std::vector<index_t> tokens;
  double log_prob = 0.0;
  bool ended = false;                  // emitted <eos>
  index_t sample = 0;                  // sampling: which of the sentence's samples (its generator)
  std::vector<Tensor<T>> cross, self;  // per step: (layers, heads, k)
  index_t length() const { return static_cast<index_t>(tokens.size()) + (ended ? 1 : 0); }
};

/// Whether a decoder gives the input of its output layer (features) and that layer
/// (dense), so that train_seq2seq can run them with the loss as masked_linear_ce_loss and
/// decoding can run the output layer on a few rows at a time.
template <typename Decoder, typename = void>
struct has_output_features : std::false_type {};
template <typename Decoder>
struct has_output_features<Decoder, std::void_t<decltype(&Decoder::features), decltype(&Decoder::dense)>>
    : std::true_type {};

}  // namespace detail

}  // namespace heed

#include "heed/detail/header_end.hpp"
