// heed/heed.hpp — everything heed offers, in one include. Linked with heed::cuda (the
// CUDA backend, see heed/cuda/runtime.hpp) the same code also runs on a GPU.
//
//   #include <heed/heed.hpp>
//
//   heed::Generator gen(0);
//   auto w = heed::randn<float>({3, 1}, gen).requires_grad_();
//   auto x = heed::randn<float>({8, 3}, gen);
//   auto loss = heed::matmul(x, w).pow(2.f).mean();
//   loss.backward();
//   std::cout << w.grad() << "\n";
//
// Layers, each using only those before it: core (Tensor, Shape, Device, errors, Generator),
// autograd (graph, backward, NoGradGuard, gradcheck), ops (differentiable math), nn
// (Module, Linear, Dropout, LayerNorm, Embedding), attention (scoring, multi-head,
// positional encoding), transformer (blocks, encoder, decoder), models (Nadaraya-Watson),
// optim (SGD, Adam, clipping, learning-rate schedules), dist (communicators, data-parallel
// training, the ranks' settings compared; MPI in heed/dist/mpi.hpp, with heed::mpi), io
// (printing, safetensors files, module checkpoints), viz (SVG heatmaps and plots).
#pragma once

#include "heed/detail/header_begin.hpp"

#include "heed/version.hpp"

#include "heed/core/backend.hpp"
#include "heed/core/device.hpp"
#include "heed/core/error.hpp"
#include "heed/core/factory.hpp"
#include "heed/core/generator.hpp"
#include "heed/core/shape.hpp"
#include "heed/core/tensor.hpp"

#include "heed/autograd/engine.hpp"
#include "heed/autograd/gradcheck.hpp"
#include "heed/autograd/node.hpp"

#include "heed/ops/attention_gru.hpp"
#include "heed/ops/attention_mask.hpp"
#include "heed/ops/cpu_features.hpp"
#include "heed/ops/cross_entropy.hpp"
#include "heed/ops/device.hpp"
#include "heed/ops/dropout.hpp"
#include "heed/ops/elementwise.hpp"
#include "heed/ops/embedding.hpp"
#include "heed/ops/gather.hpp"
#include "heed/ops/gru.hpp"
#include "heed/ops/layer_norm.hpp"
#include "heed/ops/linear.hpp"
#include "heed/ops/linear_cross_entropy.hpp"
#include "heed/ops/loss.hpp"
#include "heed/ops/masked_cross_entropy.hpp"
#include "heed/ops/masked_softmax.hpp"
#include "heed/ops/matmul.hpp"
#include "heed/ops/packed_gemm.hpp"
#include "heed/ops/precision.hpp"
#include "heed/ops/quantized_gemm.hpp"
#include "heed/ops/reduce.hpp"
#include "heed/ops/scaled_dot_product_attention.hpp"
#include "heed/ops/sequence_mask.hpp"
#include "heed/ops/shape.hpp"
#include "heed/ops/softmax.hpp"
#include "heed/ops/sort.hpp"

#include "heed/nn/activation.hpp"
#include "heed/nn/convert_weights.hpp"
#include "heed/nn/dropout.hpp"
#include "heed/nn/embedding.hpp"
#include "heed/nn/gru.hpp"
#include "heed/nn/init.hpp"
#include "heed/nn/layer_norm.hpp"
#include "heed/nn/linear.hpp"
#include "heed/nn/module.hpp"
#include "heed/nn/module_list.hpp"
#include "heed/nn/sequential.hpp"

#include "heed/attention/additive.hpp"
#include "heed/attention/concat.hpp"
#include "heed/attention/dot_product.hpp"
#include "heed/attention/multi_head.hpp"
#include "heed/attention/positional_encoding.hpp"

#include "heed/transformer/add_norm.hpp"
#include "heed/transformer/decoder.hpp"
#include "heed/transformer/encoder.hpp"
#include "heed/transformer/ffn.hpp"
#include "heed/transformer/options.hpp"

#include "heed/models/nadaraya_watson.hpp"

#include "heed/data/data_loader.hpp"

#include "heed/optim/adam.hpp"
#include "heed/optim/clip.hpp"
#include "heed/optim/ema.hpp"
#include "heed/optim/lr_schedule.hpp"
#include "heed/optim/micro_batches.hpp"
#include "heed/optim/sgd.hpp"
#include "heed/optim/trainable.hpp"

#include "heed/dist/communicator.hpp"
#include "heed/dist/data_parallel.hpp"
#include "heed/dist/settings.hpp"
#include "heed/seq2seq/alignment.hpp"
#include "heed/seq2seq/bahdanau_decoder.hpp"
#include "heed/seq2seq/bleu.hpp"
#include "heed/seq2seq/corpus.hpp"
#include "heed/seq2seq/data.hpp"
#include "heed/seq2seq/decode.hpp"
#include "heed/seq2seq/decoder_state.hpp"
#include "heed/seq2seq/encoder_decoder.hpp"
#include "heed/seq2seq/gru_encoder.hpp"
#include "heed/seq2seq/held_out.hpp"
#include "heed/seq2seq/loss.hpp"
#include "heed/seq2seq/marian.hpp"
#include "heed/seq2seq/predict.hpp"
#include "heed/seq2seq/predict_flags.hpp"
#include "heed/seq2seq/predict_options.hpp"
#include "heed/seq2seq/progress.hpp"
#include "heed/seq2seq/shortlist.hpp"
#include "heed/seq2seq/text.hpp"
#include "heed/seq2seq/token_choice.hpp"
#include "heed/seq2seq/train.hpp"
#include "heed/seq2seq/translator_config.hpp"
#include "heed/seq2seq/translator_nets.hpp"
#include "heed/seq2seq/vocab.hpp"

#include "heed/io/print.hpp"
#if __has_include(<nlohmann/json.hpp>)
// safetensors files and checkpoints need nlohmann/json (Debian: nlohmann-json3-dev)
#include "heed/io/checkpoint.hpp"
#include "heed/io/safetensors.hpp"
#include "heed/io/training_checkpoint.hpp"
#endif

#include "heed/viz/colormap.hpp"
#include "heed/viz/heatmap.hpp"
#include "heed/viz/plot.hpp"
#include "heed/viz/svg.hpp"

// Linked with heed::compiled (which defines HEED_COMPILED), the instantiations the
// library holds are declared extern, so this translation unit does not compile them.
#ifdef HEED_COMPILED
#include "heed/compiled.hpp"
#endif

#include "heed/detail/header_end.hpp"
