// heed/seq2seq/gru_encoder.hpp — d2l's Seq2SeqEncoder (9.7): an embedding and a
// multi-layer GRU.
//
//   heed::Seq2SeqEncoder<float> encoder(/*vocab_size=*/10, /*embed_size=*/8, /*num_hiddens=*/16,
//                                       /*num_layers=*/2);
//   auto [outputs, state] = encoder(X);   // X: (4, 7) tokens
//   // outputs: (7, 4, 16), steps first as d2l's; state: (2, 4, 16)
#pragma once

#include "heed/detail/header_begin.hpp"

#include <string>

#include "heed/nn/embedding.hpp"
#include "heed/nn/gru.hpp"

namespace heed {

template <typename T>
class Seq2SeqEncoder : public Module<T> {
 public:
  Seq2SeqEncoder(index_t vocab_size, index_t embed_size, index_t num_hiddens, index_t num_layers, double dropout = 0.0,
                 Generator& gen = default_generator())
      : Module<T>("Seq2SeqEncoder"),
        embedding(vocab_size, embed_size, gen),
        rnn(embed_size, num_hiddens, num_layers, dropout, gen) {
    this->register_module("embedding", embedding);
    this->register_module("rnn", rnn);
  }

  // X: (batch, num_steps) tokens -> outputs (num_steps, batch, num_hiddens),
  //                                 state (num_layers, batch, num_hiddens)
  // valid_lens is d2l's unused *args: the GRU reads the padding too, as d2l's does.
  GRUOutput<T> forward(const IndexTensor& X, const IndexTensor& valid_lens = IndexTensor()) const {
    (void)valid_lens;
    HEED_CHECK(X.defined() && X.dim() == 2, ShapeError, "Seq2SeqEncoder: X must be (batch, num_steps), got ",
               X.defined() ? to_string(X.shape()) : std::string("undefined"));
    // d2l embeds, then permutes to steps first; permuting the tokens first is the same
    // and moves 8 bytes per token instead of embed_size values.
    return rnn(embedding(transpose(X, 0, 1)));
  }
  GRUOutput<T> operator()(const IndexTensor& X, const IndexTensor& valid_lens = IndexTensor()) const {
    return forward(X, valid_lens);
  }

  /// The final state has run through the padding: cutting it off changes the model.
  static constexpr bool ignores_padding = false;

  Embedding<T> embedding;
  GRU<T> rnn;
};

}  // namespace heed

#include "heed/detail/header_end.hpp"
