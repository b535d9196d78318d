// heed/compiled/nn.hpp — the instantiations heed::compiled holds for the module
// layers: nn, attention, transformer and models, for float and double. A class
// instantiation covers every member; see heed/compiled/core.hpp for the (EXT,
// T) list macros.
#pragma once

#include <utility>

#include "heed/attention/additive.hpp"
#include "heed/attention/concat.hpp"
#include "heed/attention/dot_product.hpp"
#include "heed/attention/multi_head.hpp"
#include "heed/attention/positional_encoding.hpp"
#include "heed/models/nadaraya_watson.hpp"
#include "heed/nn/activation.hpp"
#include "heed/nn/dropout.hpp"
#include "heed/nn/embedding.hpp"
#include "heed/nn/gru.hpp"
#include "heed/nn/init.hpp"
#include "heed/nn/layer_norm.hpp"
#include "heed/nn/linear.hpp"
#include "heed/nn/module.hpp"
#include "heed/nn/module_list.hpp"
#include "heed/nn/sequential.hpp"
#include "heed/transformer/add_norm.hpp"
#include "heed/transformer/decoder.hpp"
#include "heed/transformer/encoder.hpp"
#include "heed/transformer/ffn.hpp"

#define HEED_COMPILED_NN(EXT, T)                                                      \
  EXT template class Module<T>;                                                       \
  EXT template class ActivationLayer<T>;                                              \
  EXT template Tensor<T> activate<T>(const Tensor<T> &, Activation);                  \
  EXT template class Dropout<T>;                                                      \
  EXT template class Embedding<T>;                                                    \
  EXT template class GRU<T>;                                                          \
  EXT template class LayerNorm<T>;                                                    \
  EXT template class Linear<T>;                                                       \
  EXT template class Sequential<T>;                                                   \
  EXT template Tensor<T> &init::xavier_uniform_<T>(Tensor<T> &, double, Generator &); \
  EXT template void init::xavier_init_weights<T>(Module<T> &, Generator &);

#define HEED_COMPILED_ATTENTION(EXT, T)                                                                 \
  EXT template class AdditiveAttention<T>;                                                              \
  EXT template class ConcatAttention<T>;                                                                \
  EXT template class DotProductAttention<T>;                                                            \
  EXT template class MultiHeadAttention<T>;                                                             \
  EXT template class PositionalEncoding<T>;                                                             \
  EXT template Tensor<T> split_heads<T>(const Tensor<T> &, index_t);                                    \
  EXT template Tensor<T> merge_heads<T>(const Tensor<T> &);                                             \
  EXT template Tensor<T> transpose_qkv<T>(const Tensor<T> &, index_t);                                  \
  EXT template Tensor<T> transpose_output<T>(const Tensor<T> &, index_t);                               \
  EXT template class NWKernelRegression<T>;                                                             \
  EXT template NadarayaWatsonData<T> nadaraya_watson_data<T>(Generator &, index_t);                     \
  EXT template std::pair<Tensor<T>, Tensor<T>> nadaraya_watson<T>(const Tensor<T> &, const Tensor<T> &, \
                                                                  const Tensor<T> &);

#define HEED_COMPILED_TRANSFORMER(EXT, T)   \
  EXT template class AddNorm<T>;            \
  EXT template class PositionWiseFFN<T>;    \
  EXT template class EncoderBlock<T>;       \
  EXT template class TransformerEncoder<T>; \
  EXT template class DecoderBlock<T>;       \
  EXT template class TransformerDecoder<T>;
