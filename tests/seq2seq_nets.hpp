// The two encoder-decoders at small sizes, shared by the sequence-to-sequence tests
// (seq2seq_common.hpp) and the data-parallel ones (test_distributed.cpp).
#pragma once

#include <heed/seq2seq/bahdanau_decoder.hpp>
#include <heed/seq2seq/data.hpp>
#include <heed/seq2seq/encoder_decoder.hpp>
#include <heed/seq2seq/gru_encoder.hpp>
#include <heed/seq2seq/translator_nets.hpp>
#include <heed/transformer/decoder.hpp>
#include <heed/transformer/encoder.hpp>

#include <memory>
#include <type_traits>

// The library's nets and factories (heed/seq2seq/translator_nets.hpp), the ones translate
// and train_translator build.
using heed::BahdanauNet;
using heed::TransformerNet;

template <typename T>
std::unique_ptr<BahdanauNet<T>> bahdanau_net(heed::index_t src_vocab, heed::index_t tgt_vocab, heed::index_t embed_size,
                                             heed::index_t num_hiddens, heed::index_t num_layers, double dropout,
                                             heed::Generator& gen) {
  heed::TranslatorConfig config;
  config.model = "bahdanau";
  config.embed_size = embed_size, config.num_hiddens = num_hiddens, config.num_layers = num_layers;
  config.dropout = dropout;
  return heed::make_bahdanau_net<T>(config, src_vocab, tgt_vocab, &gen);
}

template <typename Net>
struct scalar_of;
template <typename T, typename Encoder, typename Decoder>
struct scalar_of<heed::EncoderDecoder<T, Encoder, Decoder>> {
  using type = T;
};

/// A net of either kind for `data` with dropout `p`, its weights drawn from seed 21.
template <typename Net>
std::unique_ptr<Net> dropout_net(const heed::NmtData& data, double p) {
  using T = typename scalar_of<Net>::type;
  heed::Generator gen(21);
  if constexpr (std::is_same_v<Net, BahdanauNet<T>>) {
    return bahdanau_net<T>(data.src_vocab.size(), data.tgt_vocab.size(), 8, 16, 2, p, gen);
  } else {
    heed::TranslatorConfig config;
    config.num_hiddens = 16, config.ffn_num_hiddens = 32, config.num_heads = 4, config.num_layers = 2;
    config.dropout = p;
    return heed::make_transformer_net<T>(config, data.src_vocab.size(), data.tgt_vocab.size(), &gen);
  }
}
