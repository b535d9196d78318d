// heed/seq2seq/bahdanau_decoder.hpp — d2l's Seq2SeqAttentionDecoder (10.4): a GRU
// decoder that attends, at every step, to the encoder outputs with additive
// (Bahdanau) attention, its query being the last layer's hidden state.
//
//   heed::Seq2SeqAttentionDecoder<float> decoder(/*vocab_size=*/10, /*embed_size=*/8,
//                                                /*num_hiddens=*/16, /*num_layers=*/2);
//   auto state = decoder.init_state(encoder(X), valid_lens);
//   auto logits = decoder(Y, state);   // Y: (4, 7) tokens -> (4, 7, 10)
//
// At each step t: context = attention(query = h_{t−1} of the last layer, keys = values
// = encoder outputs); the GRU's input is context ⊕ embedding(y_t). The state carries
// the hidden state forward, so decoding one step per call (greedy prediction) gives
// what one call over the whole sequence gives.
#pragma once

#include "heed/detail/header_begin.hpp"

#include <string>
#include <vector>

#include "heed/attention/additive.hpp"
#include "heed/nn/embedding.hpp"
#include "heed/nn/gru.hpp"
#include "heed/ops/attention_gru.hpp"

namespace heed {

template <typename T>
struct Seq2SeqAttentionState {
  Tensor<T> enc_outputs;       // (batch, num_enc_steps, num_hiddens)
  Tensor<T> hidden_state;      // (num_layers, batch, num_hiddens)
  IndexTensor enc_valid_lens;  // (batch), or undefined: every encoder step visible
  Tensor<T> projected_keys;    // attention.W_k(enc_outputs), computed once per sequence
};

template <typename T>
class Seq2SeqAttentionDecoder : public Module<T> {
 public:
  Seq2SeqAttentionDecoder(index_t vocab_size, index_t embed_size, index_t num_hiddens, index_t num_layers,
                          double dropout = 0.0, Generator& gen = default_generator())
      : Module<T>("Seq2SeqAttentionDecoder"),
        attention(num_hiddens, num_hiddens, num_hiddens, dropout, gen),
        embedding(vocab_size, embed_size, gen),
        rnn(embed_size + num_hiddens, num_hiddens, num_layers, dropout, gen),
        dense(num_hiddens, vocab_size, true, gen) {
    this->register_module("attention", attention);
    this->register_module("embedding", embedding);
    this->register_module("rnn", rnn);
    this->register_module("dense", dense);
  }

  /// d2l's init_state: the encoder outputs batch first, its final state, the valid lengths.
  // enc_outputs: outputs (num_enc_steps, batch, num_hiddens), state (num_layers, batch, num_hiddens)
  Seq2SeqAttentionState<T> init_state(const GRUOutput<T>& enc_outputs,
                                      const IndexTensor& enc_valid_lens = IndexTensor()) const {
    const index_t H = rnn.num_hiddens();
    HEED_CHECK(enc_outputs.outputs.dim() == 3 && enc_outputs.outputs.shape()[2] == H &&
                   enc_outputs.state.shape() == (Shape{rnn.num_layers(), enc_outputs.outputs.shape()[1], H}),
               ShapeError, "Seq2SeqAttentionDecoder.init_state: expected encoder outputs (num_steps, batch, ", H,
               ") and state (", rnn.num_layers(), ", batch, ", H, "), got ", to_string(enc_outputs.outputs.shape()),
               " and ", to_string(enc_outputs.state.shape()));
    const index_t batch = enc_outputs.outputs.shape()[1];
    HEED_CHECK(!enc_valid_lens.defined() || enc_valid_lens.shape() == Shape{batch}, ShapeError,
               "Seq2SeqAttentionDecoder.init_state: enc_valid_lens must be (batch) = (", batch, "), got ",
               to_string(enc_valid_lens.shape()));
    Seq2SeqAttentionState<T> state;
    state.enc_outputs = transpose(enc_outputs.outputs, 0, 1);
    state.hidden_state = enc_outputs.state;
    state.enc_valid_lens = enc_valid_lens;
    state.projected_keys = attention.W_k(state.enc_outputs);
    return state;
  }

  // X: (batch, num_steps) tokens -> logits (batch, num_steps, vocab_size); state advances
  Tensor<T> forward(const IndexTensor& X, Seq2SeqAttentionState<T>& state) { return dense(features(X, state)); }
  Tensor<T> operator()(const IndexTensor& X, Seq2SeqAttentionState<T>& state) { return forward(X, state); }

  /// forward() up to the output layer: the last GRU layer's state after each step,
  /// (batch, num_steps, num_hiddens), which dense turns into logits. train_seq2seq runs
  /// dense with the loss, over the valid steps only (masked_linear_ce_loss).
  Tensor<T> features(const IndexTensor& X, Seq2SeqAttentionState<T>& state) {
    HEED_CHECK(X.defined() && X.dim() == 2 && X.shape()[1] > 0, ShapeError,
               "Seq2SeqAttentionDecoder: X must be (batch, num_steps >= 1), got ",
               X.defined() ? to_string(X.shape()) : std::string("undefined"));
    HEED_CHECK(state.enc_outputs.defined() && state.enc_outputs.shape()[0] == X.shape()[0], ShapeError,
               "Seq2SeqAttentionDecoder: X ", to_string(X.shape()), " and the state's encoder outputs ",
               state.enc_outputs.defined() ? to_string(state.enc_outputs.shape()) : std::string("(undefined)"),
               " must have the same batch; build the state with init_state");
    const Tensor<T> embedded = embedding(transpose(X, 0, 1));  // (num_steps, batch, embed_size)
    const bool keep_records = detail::keeps_forward_records();
    if (keep_records) attention_weights_.clear();
    if (embedded.is_cpu() && state.hidden_state.is_cpu()) {
      // All steps as one op (heed/ops/attention_gru.hpp): the same outputs and dropout
      // masks as the loop below, without twenty graph nodes per step.
      AttentionGruOptions options;
      options.attention_dropout = attention.dropout_module().p();
      options.attention_training = attention.dropout_module().is_training();
      options.attention_generator = &attention.dropout_module().generator();
      options.dropout = rnn.dropout_probability();
      options.training = rnn.is_training();
      options.keep_attention_weights = keep_records && attention.keeps_attention_weights();
      AttentionGruOutput<T> result =
          attention_gru(embedded, state.hidden_state, state.enc_outputs, state.projected_keys, state.enc_valid_lens,
                        AttentionGruWeights<T>{attention.W_q.weight, attention.w_v.weight, rnn.weight_ih, rnn.weight_hh,
                                               rnn.bias_ih, rnn.bias_hh},
                        options);
      state.hidden_state = result.state;
      if (keep_records)
        for (index_t t = 0; t < X.shape()[1]; ++t)
          attention_weights_.push_back(
              options.keep_attention_weights ? unsqueeze(select(result.attention_weights, 0, t), 1) : Tensor<T>());
      return transpose(result.outputs, 0, 1);
    }
    // Elsewhere (a device backend), step by step through the modules.
    const index_t num_steps = X.shape()[1], last_layer = rnn.num_layers() - 1;
    std::vector<Tensor<T>> outputs;
    for (index_t t = 0; t < num_steps; ++t) {
      const Tensor<T> query = unsqueeze(select(state.hidden_state, 0, last_layer), 1);  // (batch, 1, H)
      const Tensor<T> context = attention.attend(query, state.projected_keys, state.enc_outputs,
                                                 state.enc_valid_lens);  // (batch, 1, H)
      // The GRU's input: context ⊕ embedding, (1, batch, H + embed_size).
      const Tensor<T> x = cat({transpose(context, 0, 1), narrow(embedded, 0, t, 1)}, -1);
      GRUOutput<T> step = rnn(x, state.hidden_state);
      outputs.push_back(step.outputs);
      state.hidden_state = step.state;
      if (keep_records) attention_weights_.push_back(attention.attention_weights());
    }
    return transpose(cat(outputs, 0), 0, 1);
  }

  /// The attention weights of each step of the last forward, (batch, 1, num_enc_steps)
  /// each (undefined when keep_attention_weights(false)).
  const std::vector<Tensor<T>>& attention_weights() const { return attention_weights_; }
  void keep_attention_weights(bool keep) { attention.keep_attention_weights(keep); }
  bool keeps_attention_weights() const { return attention.keeps_attention_weights(); }

  index_t vocab_size() const { return dense.out_features(); }
  index_t num_hiddens() const { return rnn.num_hiddens(); }

  /// Its dropouts draw from the generator once per step: fewer steps would change the
  /// masks of the batches after, so train_seq2seq keeps the target as it is.
  static constexpr bool ignores_padding = false;

  AdditiveAttention<T> attention;
  Embedding<T> embedding;
  GRU<T> rnn;
  Linear<T> dense;

 private:
  std::vector<Tensor<T>> attention_weights_;
};

}  // namespace heed

#include "heed/detail/header_end.hpp"
