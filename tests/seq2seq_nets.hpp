// The two encoder-decoders at small sizes, shared by the sequence-to-sequence tests
// (seq2seq_common.hpp) and the data-parallel ones (test_distributed.cpp).
#pragma once

#include <heed/seq2seq/bahdanau_decoder.hpp>
#include <heed/seq2seq/data.hpp>
#include <heed/seq2seq/encoder_decoder.hpp>
#include <heed/seq2seq/gru_encoder.hpp>
#include <heed/transformer/decoder.hpp>
#include <heed/transformer/encoder.hpp>

#include <memory>
#include <type_traits>

template <typename T>
using BahdanauNet = heed::EncoderDecoder<T, heed::Seq2SeqEncoder<T>, heed::Seq2SeqAttentionDecoder<T>>;

template <typename T>
using TransformerNet = heed::EncoderDecoder<T, heed::TransformerEncoder<T>, heed::TransformerDecoder<T>>;

template <typename T>
std::unique_ptr<BahdanauNet<T>> bahdanau_net(heed::index_t src_vocab, heed::index_t tgt_vocab, heed::index_t embed_size,
                                             heed::index_t num_hiddens, heed::index_t num_layers, double dropout,
                                             heed::Generator& gen) {
  return std::make_unique<BahdanauNet<T>>(
      std::make_unique<heed::Seq2SeqEncoder<T>>(src_vocab, embed_size, num_hiddens, num_layers, dropout, gen),
      std::make_unique<heed::Seq2SeqAttentionDecoder<T>>(tgt_vocab, embed_size, num_hiddens, num_layers, dropout, gen));
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
    heed::TransformerOptions init;
    init.generator = &gen;
    return std::make_unique<Net>(
        std::make_unique<heed::TransformerEncoder<T>>(data.src_vocab.size(), 16, 16, 16, 16, heed::Shape{16}, 16, 32, 4,
                                                      2, p, false, init),
        std::make_unique<heed::TransformerDecoder<T>>(data.tgt_vocab.size(), 16, 16, 16, 16, heed::Shape{16}, 16, 32, 4,
                                                      2, p, init));
  }
}
