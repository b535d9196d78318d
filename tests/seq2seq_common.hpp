// Shared by the GRU and sequence-to-sequence tests (unity_seq2seq.cpp): golden values,
// parameter names, the two encoder-decoder networks and a small corpus to train on.
#pragma once

#include <heed/io/training_checkpoint.hpp>
#include <heed/nn/gru.hpp>
#include <heed/seq2seq/alignment.hpp>
#include <heed/seq2seq/bahdanau_decoder.hpp>
#include <heed/seq2seq/corpus.hpp>
#include <heed/seq2seq/encoder_decoder.hpp>
#include <heed/seq2seq/gru_encoder.hpp>
#include <heed/seq2seq/loss.hpp>
#include <heed/seq2seq/predict.hpp>
#include <heed/seq2seq/progress.hpp>
#include <heed/seq2seq/train.hpp>
#include <heed/transformer/decoder.hpp>
#include <heed/transformer/encoder.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "check.hpp"
#include "golden.hpp"
#include "seq2seq_nets.hpp"

using heed::index_t;
using heed::IndexTensor;
using heed::Shape;
using heed::Tensor;
using heed::Tensord;
using heed::Tensorf;
using heed_test::check_close;
using heed_test::leaf;
using heed_test::lens;
using heed_test::tolerance;

namespace {

const heed_test::Golden& golden() {
  static const heed_test::Golden g("seq2seq_golden.txt");
  return g;
}

using Names = std::vector<std::string>;

Names prefixed(const std::string& prefix, const Names& names) {
  Names result;
  for (const auto& name : names) result.push_back(prefix + name);
  return result;
}

Names concat(Names a, const Names& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// torch.nn.GRU's parameters of a 2-layer GRU, in state_dict() order.
const Names kGRUNames = {"weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0",
                         "weight_ih_l1", "weight_hh_l1", "bias_ih_l1", "bias_hh_l1"};
// d2l's Seq2SeqEncoder and Seq2SeqAttentionDecoder (2 layers), in state_dict() order.
const Names kEncoderNames = concat({"embedding.weight"}, prefixed("rnn.", kGRUNames));
const Names kDecoderNames =
    concat(concat({"attention.W_k.weight", "attention.W_q.weight", "attention.w_v.weight", "embedding.weight"},
                  prefixed("rnn.", kGRUNames)),
           {"dense.weight", "dense.bias"});

template <typename T>
Names parameter_names(const heed::Module<T>& module) {
  Names names;
  for (const auto& [name, p] : module.named_parameters()) names.push_back(name);
  return names;
}

/// Every parameter's gradient equals the golden `<grad_prefix>.<name>`.
template <typename T>
void check_grads(const heed::Module<T>& module, const std::string& grad_prefix) {
  for (const auto& [name, p] : module.named_parameters()) {
    INFO("gradient of " << name);
    check_close(p.grad(), golden().tensor<T>(grad_prefix + "." + name), tolerance<T>());
  }
}

/// The loss of the gru cases: sum(outputs * R1) + sum(final state * R2).
template <typename T>
Tensor<T> projected(const heed::GRUOutput<T>& out, const std::string& c) {
  return (out.outputs * golden().tensor<T>(c + ".R1")).sum() + (out.state * golden().tensor<T>(c + ".R2")).sum();
}
}  // namespace

// ---- training, prediction, alignments ------------------------------------------------------------

namespace {

/// The first pairs of the built-in corpus, as d2l's loader gives them.
heed::NmtData small_corpus(index_t num_examples) {
  return heed::load_data_nmt_text(heed::builtin_fra_eng(), /*batch_size=*/16, /*num_steps=*/10,
                                  static_cast<std::size_t>(num_examples), /*seed=*/3);
}

template <typename T>
std::unique_ptr<TransformerNet<T>> transformer_net(index_t src_vocab, index_t tgt_vocab) {
  return std::make_unique<TransformerNet<T>>(
      std::make_unique<heed::TransformerEncoder<T>>(src_vocab, 16, 16, 16, 16, Shape{16}, 16, 32, 4, 2, 0.0),
      std::make_unique<heed::TransformerDecoder<T>>(tgt_vocab, 16, 16, 16, 16, Shape{16}, 16, 32, 4, 2, 0.0));
}

/// A small net of either kind for `data`, no dropout: Bahdanau's with 16 units and 2
/// layers drawn from `gen`, or transformer_net's.
template <typename Net>
std::unique_ptr<Net> small_net(const heed::NmtData& data, heed::Generator& gen) {
  if constexpr (std::is_same_v<Net, BahdanauNet<float>>)
    return bahdanau_net<float>(data.src_vocab.size(), data.tgt_vocab.size(), 16, 16, 2, 0.0, gen);
  else
    return transformer_net<float>(data.src_vocab.size(), data.tgt_vocab.size());
}

/// Σ log P of `tokens` (then <eos> when `ended`), fed to the decoder one by one: what a
/// hypothesis's log_prob must be.
template <typename T, typename Net>
double teacher_forced_log_prob(Net& net, const std::string& sentence, const std::vector<index_t>& tokens, bool ended,
                               const heed::Vocab& src_vocab, const heed::Vocab& tgt_vocab) {
  heed::NoGradGuard no_grad;
  std::vector<std::string> words = heed::detail::split(sentence, ' ');
  words.push_back("<eos>");
  std::vector<index_t> ids = src_vocab[words];
  const index_t valid = static_cast<index_t>(ids.size());
  ids = heed::truncate_pad(ids, 10, src_vocab["<pad>"]);
  const IndexTensor enc_X = IndexTensor(ids, Shape{1, 10}), enc_valid_len = IndexTensor({valid}, Shape{1});
  auto state = net.decoder().init_state(net.encoder()(enc_X, enc_valid_len), enc_valid_len);
  std::vector<index_t> inputs = {tgt_vocab["<bos>"]};
  inputs.insert(inputs.end(), tokens.begin(), tokens.end());
  std::vector<index_t> targets = tokens;
  if (ended) targets.push_back(tgt_vocab["<eos>"]);
  double total = 0;
  for (std::size_t t = 0; t < targets.size(); ++t) {
    const Tensor<T> log_probs = heed::log_softmax(net.decoder()(IndexTensor({inputs[t]}, Shape{1, 1}), state), -1);
    total += static_cast<double>(log_probs.data()[targets[t]]);
  }
  return total;
}

}  // namespace
