// heed/seq2seq/encoder_decoder.hpp — d2l's EncoderDecoder (9.6): an encoder, and a
// decoder that starts from the encoder's outputs.
//
//   auto net = heed::make_encoder_decoder<float>(
//       std::make_unique<heed::Seq2SeqEncoder<float>>(src_vocab.size(), 32, 32, 2, 0.1),
//       std::make_unique<heed::Seq2SeqAttentionDecoder<float>>(tgt_vocab.size(), 32, 32, 2, 0.1));
//   auto logits = (*net)(enc_X, dec_X, enc_valid_lens);   // (batch, num_steps, vocab)
//
// Any pair fits whose encoder has forward(enc_X, enc_valid_lens) and whose decoder has
// init_state(enc_outputs, enc_valid_lens) and forward(dec_X, state): the GRU encoder
// with the Bahdanau decoder, and the Transformer's encoder and decoder. The children
// are called "encoder" and "decoder", so parameter names match d2l's state_dict().
#pragma once

#include "heed/detail/header_begin.hpp"

#include <memory>
#include <utility>

#include "heed/nn/module.hpp"

namespace heed {

template <typename T, typename Encoder, typename Decoder>
class EncoderDecoder : public Module<T> {
 public:
  using EncoderType = Encoder;
  using DecoderType = Decoder;

  EncoderDecoder(std::unique_ptr<Encoder> encoder, std::unique_ptr<Decoder> decoder)
      : Module<T>("EncoderDecoder"), encoder_(std::move(encoder)), decoder_(std::move(decoder)) {
    HEED_CHECK(encoder_ && decoder_, ValueError, "EncoderDecoder: the encoder and the decoder must not be null");
    this->register_module("encoder", *encoder_);
    this->register_module("decoder", *decoder_);
  }

  // enc_X: (batch, num_enc_steps) tokens; dec_X: (batch, num_dec_steps) tokens;
  // enc_valid_lens: (batch) -> logits (batch, num_dec_steps, vocab_size)
  Tensor<T> forward(const IndexTensor& enc_X, const IndexTensor& dec_X, const IndexTensor& enc_valid_lens) {
    auto state = decoder_->init_state(encoder_->forward(enc_X, enc_valid_lens), enc_valid_lens);
    return decoder_->forward(dec_X, state);
  }
  Tensor<T> operator()(const IndexTensor& enc_X, const IndexTensor& dec_X, const IndexTensor& enc_valid_lens) {
    return forward(enc_X, dec_X, enc_valid_lens);
  }
  /// d2l's forward, which returns the decoder's state after dec_X with the logits: the
  /// Bahdanau decoder's final hidden state, the Transformer decoder's caches.
  //   auto [logits, state] = net.forward_with_state(enc_X, dec_X, enc_valid_lens);
  auto forward_with_state(const IndexTensor& enc_X, const IndexTensor& dec_X, const IndexTensor& enc_valid_lens) {
    auto state = decoder_->init_state(encoder_->forward(enc_X, enc_valid_lens), enc_valid_lens);
    Tensor<T> logits = decoder_->forward(dec_X, state);
    return std::make_pair(std::move(logits), std::move(state));
  }
  /// forward up to the decoder's output layer, for decoders that have features() (the
  /// Transformer's and the Bahdanau decoder): (batch, num_dec_steps, num_hiddens), which
  /// decoder().dense maps to the logits.
  template <typename D = Decoder>
  Tensor<T> features(const IndexTensor& enc_X, const IndexTensor& dec_X, const IndexTensor& enc_valid_lens) {
    auto state = decoder_->init_state(encoder_->forward(enc_X, enc_valid_lens), enc_valid_lens);
    return static_cast<D&>(*decoder_).features(dec_X, state);
  }

  Encoder& encoder() { return *encoder_; }
  const Encoder& encoder() const { return *encoder_; }
  Decoder& decoder() { return *decoder_; }
  const Decoder& decoder() const { return *decoder_; }

 private:
  std::unique_ptr<Encoder> encoder_;
  std::unique_ptr<Decoder> decoder_;
};

/// Builds an EncoderDecoder on the heap (modules can be neither copied nor moved).
template <typename T, typename Encoder, typename Decoder>
std::unique_ptr<EncoderDecoder<T, Encoder, Decoder>> make_encoder_decoder(std::unique_ptr<Encoder> encoder,
                                                                          std::unique_ptr<Decoder> decoder) {
  return std::make_unique<EncoderDecoder<T, Encoder, Decoder>>(std::move(encoder), std::move(decoder));
}

}  // namespace heed

#include "heed/detail/header_end.hpp"
