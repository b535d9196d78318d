// heed/compiled/seq2seq.hpp — the instantiations heed::compiled holds for
// seq2seq (the Bahdanau and Transformer encoder-decoders with their training
// and prediction on NmtDataLoader), the optimisers, heatmaps and checkpoints,
// for float and double. See heed/compiled/core.hpp for the (EXT, T) list
// macros.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "heed/optim/adam.hpp"
#include "heed/optim/clip.hpp"
#include "heed/optim/sgd.hpp"
#include "heed/seq2seq/alignment.hpp"
#include "heed/seq2seq/bahdanau_decoder.hpp"
#include "heed/seq2seq/data.hpp"
#include "heed/seq2seq/encoder_decoder.hpp"
#include "heed/seq2seq/gru_encoder.hpp"
#include "heed/seq2seq/loss.hpp"
#include "heed/seq2seq/predict.hpp"
#include "heed/seq2seq/train.hpp"
#include "heed/transformer/decoder.hpp"
#include "heed/transformer/encoder.hpp"
#include "heed/viz/heatmap.hpp"

// One encoder-decoder, EncoderDecoder<T, ENC<T>, DEC<T>>, with its training on
// NmtDataLoader and its prediction.
#define HEED_COMPILED_SEQ2SEQ_NET(EXT, T, ENC, DEC)                                                                   \
  EXT template class EncoderDecoder<T, ENC<T>, DEC<T>>;                                                               \
  EXT template TrainResult train_seq2seq<T, EncoderDecoder<T, ENC<T>, DEC<T>>, NmtDataLoader>(                        \
      EncoderDecoder<T, ENC<T>, DEC<T>> &, NmtDataLoader &, double, index_t, const Vocab &, const TrainOptions &);    \
  EXT template TrainResult train_seq2seq<T, EncoderDecoder<T, ENC<T>, DEC<T>>, NmtDataLoader>(                        \
      EncoderDecoder<T, ENC<T>, DEC<T>> &, NmtDataLoader &, Adam<T> &, index_t, const Vocab &, const TrainOptions &); \
  EXT template TrainResult train_seq2seq<T, EncoderDecoder<T, ENC<T>, DEC<T>>, NmtDataLoader>(                        \
      EncoderDecoder<T, ENC<T>, DEC<T>> &, NmtDataLoader &, Adam<T> &, index_t, const Vocab &, const TrainOptions &,  \
      const TrainState &);                                                                                            \
  EXT template std::vector<Translation<T>> predict_seq2seq<T, EncoderDecoder<T, ENC<T>, DEC<T>>>(                     \
      EncoderDecoder<T, ENC<T>, DEC<T>> &, const std::vector<std::string> &, const Vocab &, const Vocab &, index_t,   \
      const PredictOptions &);                                                                                        \
  EXT template Translation<T> predict_seq2seq<T, EncoderDecoder<T, ENC<T>, DEC<T>>>(                                  \
      EncoderDecoder<T, ENC<T>, DEC<T>> &, const std::string &, const Vocab &, const Vocab &, index_t,                \
      const PredictOptions &);                                                                                        \
  EXT template std::vector<Translation<T>> predict_seq2seq_tokens<T, EncoderDecoder<T, ENC<T>, DEC<T>>>(              \
      EncoderDecoder<T, ENC<T>, DEC<T>> &, const std::vector<std::vector<std::string>> &, const Vocab &,              \
      const Vocab &, index_t, const PredictOptions &);

#define HEED_COMPILED_SEQ2SEQ(EXT, T)                                                                           \
  EXT template class Seq2SeqEncoder<T>;                                                                         \
  EXT template class Seq2SeqAttentionDecoder<T>;                                                                \
  HEED_COMPILED_SEQ2SEQ_NET(EXT, T, Seq2SeqEncoder, Seq2SeqAttentionDecoder)                                    \
  HEED_COMPILED_SEQ2SEQ_NET(EXT, T, TransformerEncoder, TransformerDecoder)                                     \
  EXT template Tensor<T> masked_softmax_ce_loss<T>(const Tensor<T> &, const IndexTensor &, const IndexTensor &, \
                                                   index_t, double);                                            \
  EXT template Tensor<T> masked_linear_ce_loss<T>(const Tensor<T> &, const Tensor<T> &, const Tensor<T> &,      \
                                                  const IndexTensor &, const IndexTensor &, index_t, double);   \
  EXT template Alignment align<T>(const Tensor<T> &, index_t, index_t, bool);

#define HEED_COMPILED_OPTIM(EXT, T)                                                                                    \
  EXT template class Adam<T>;                                                                                          \
  EXT template class SGD<T>;                                                                                           \
  EXT template T clip_grad_norm<T>(const std::vector<Tensor<T>> &, double);                                            \
  EXT template T grad_clipping<T>(const Module<T> &, double);                                                          \
  EXT template Svg show_heatmaps<T>(const Tensor<T> &, const std::string &, const std::string &,                       \
                                    const std::vector<std::string> &, std::pair<double, double>, const std::string &); \
  EXT template Svg show_heatmaps<T>(const Tensor<T> &, const HeatmapOptions &);

// Checkpoints: only where heed/io/safetensors.hpp is (it needs nlohmann/json).
#define HEED_COMPILED_IO(EXT, T)                                                                                       \
  EXT template void save_safetensors<T>(const std::string &, const std::vector<std::pair<std::string, Tensor<T>>> &,   \
                                        const std::map<std::string, std::string> &);                                   \
  EXT template void save_checkpoint<T>(const Module<T> &, const std::string &,                                         \
                                       const std::map<std::string, std::string> &);                                    \
  EXT template std::map<std::string, std::string> load_checkpoint<T>(Module<T> &, const std::string &);                \
  EXT template void save_training_checkpoint<T>(const Module<T> &, const Adam<T> &, const std::string &,               \
                                                std::map<std::string, std::string>, const ExponentialMovingAverage *); \
  EXT template std::map<std::string, std::string> load_training_checkpoint<T>(                                         \
      Module<T> &, Adam<T> &, const std::string &, ExponentialMovingAverage *);
