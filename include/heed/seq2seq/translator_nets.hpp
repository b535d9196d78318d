// heed/seq2seq/translator_nets.hpp — the two translators heed trains (d2l's Bahdanau GRU
// seq2seq, 10.4, and its Transformer, 10.7), built from a TranslatorConfig, and the
// parameters each has counted without building it, so that a checkpoint's metadata is
// checked against its tensors before a net of that size is allocated.
//
//   heed::TranslatorConfig config;                                   // d2l's Transformer
//   auto net = heed::make_transformer_net(config, src_vocab.size(), tgt_vocab.size());
//   auto gru = heed::make_bahdanau_net<double>(config, 10, 12);     // the weights from default_generator()
#pragma once

#include "heed/detail/header_begin.hpp"

#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "heed/io/checkpoint.hpp"
#include "heed/io/safetensors.hpp"
#include "heed/seq2seq/bahdanau_decoder.hpp"
#include "heed/seq2seq/encoder_decoder.hpp"
#include "heed/seq2seq/gru_encoder.hpp"
#include "heed/seq2seq/translator_config.hpp"
#include "heed/seq2seq/vocab.hpp"
#include "heed/transformer/decoder.hpp"
#include "heed/transformer/encoder.hpp"

namespace heed {

template <typename T = float>
using BahdanauNet = EncoderDecoder<T, Seq2SeqEncoder<T>, Seq2SeqAttentionDecoder<T>>;
template <typename T = float>
using TransformerNet = EncoderDecoder<T, TransformerEncoder<T>, TransformerDecoder<T>>;

/// d2l's Bahdanau model (10.4) of config's embed_size, num_hiddens, num_layers and
/// dropout, its weights drawn from `gen` (default_generator() when null).
template <typename T = float>
std::unique_ptr<BahdanauNet<T>> make_bahdanau_net(const TranslatorConfig& c, index_t src_vocab_size,
                                                  index_t tgt_vocab_size, Generator* gen = nullptr) {
  Generator& g = gen ? *gen : default_generator();
  return make_encoder_decoder<T>(
      std::make_unique<Seq2SeqEncoder<T>>(src_vocab_size, c.embed_size, c.num_hiddens, c.num_layers, c.dropout, g),
      std::make_unique<Seq2SeqAttentionDecoder<T>>(tgt_vocab_size, c.embed_size, c.num_hiddens, c.num_layers, c.dropout,
                                                   g));
}

/// d2l's Transformer (10.7): every width config's num_hiddens, with its
/// ffn_num_hiddens, num_heads, num_kv_heads, num_layers, dropout, norm_first and
/// embedding_scale; the weights from `gen` (default_generator() when null).
template <typename T = float>
std::unique_ptr<TransformerNet<T>> make_transformer_net(const TranslatorConfig& c, index_t src_vocab_size,
                                                        index_t tgt_vocab_size, Generator* gen = nullptr) {
  const index_t h = c.num_hiddens;
  TransformerOptions options;
  options.norm_first = c.norm_first;
  options.num_kv_heads = c.num_kv_heads;
  options.embedding_scale = c.embedding_scale;
  options.generator = gen;
  return make_encoder_decoder<T>(
      std::make_unique<TransformerEncoder<T>>(src_vocab_size, h, h, h, h, Shape{h}, h, c.ffn_num_hiddens, c.num_heads,
                                              c.num_layers, c.dropout, false, options),
      std::make_unique<TransformerDecoder<T>>(tgt_vocab_size, h, h, h, h, Shape{h}, h, c.ffn_num_hiddens, c.num_heads,
                                              c.num_layers, c.dropout, options));
}

/// The parameters make_net makes for this config and these vocabulary sizes, counted
/// without making them, with a few of them by name and shape: those the config's sizes
/// determine, to name in an error.
struct NetLayout {
  std::uint64_t parameters = 0;
  std::vector<std::pair<std::string, std::vector<index_t>>> named;
};

/// net_layout's arguments: sizes as make_net takes them, which from_metadata bounds so
/// that no count overflows.
inline void check_layout_sizes(const TranslatorConfig& c, index_t src, index_t tgt) {
  if (c.num_hiddens < 1 || c.embed_size < 1 || c.ffn_num_hiddens < 1 || c.num_heads < 1 || c.num_kv_heads < 0 ||
      c.num_layers < 1 || src < 0 || tgt < 0)
    throw ValueError(
        "net_layout: the sizes must be positive (num_kv_heads and the vocabularies' >= 0), got "
        "num_hiddens " +
        std::to_string(c.num_hiddens) + ", embed_size " + std::to_string(c.embed_size) + ", ffn_num_hiddens " +
        std::to_string(c.ffn_num_hiddens) + ", num_heads " + std::to_string(c.num_heads) + ", num_kv_heads " +
        std::to_string(c.num_kv_heads) + ", num_layers " + std::to_string(c.num_layers) + ", vocabularies " +
        std::to_string(src) + " / " + std::to_string(tgt));
}

inline NetLayout transformer_layout(const TranslatorConfig& c, index_t src, index_t tgt) {
  check_layout_sizes(c, src, tgt);
  using U = std::uint64_t;  // the sizes are bounded (from_metadata): no product overflows
  const U h = static_cast<U>(c.num_hiddens), f = static_cast<U>(c.ffn_num_hiddens), L = static_cast<U>(c.num_layers);
  const U kv_heads = static_cast<U>(c.num_kv_heads > 0 ? c.num_kv_heads : c.num_heads);
  const U kv = kv_heads * (h / static_cast<U>(c.num_heads));  // the keys' and values' width
  const U attention = 2 * h * h + 2 * h * kv;                 // W_q, W_k, W_v, W_o, no biases
  const U norm = 2 * h, ffn = 2 * h * f + f + h;
  const U final_norm = c.norm_first ? norm : 0;
  NetLayout out;
  out.parameters = static_cast<U>(src) * h + L * (attention + 2 * norm + ffn) + final_norm +      // the encoder
                   static_cast<U>(tgt) * h + L * (2 * attention + 3 * norm + ffn) + final_norm +  // the decoder
                   h * static_cast<U>(tgt) + static_cast<U>(tgt);                                 // its output layer
  const index_t last = c.num_layers - 1, kv_width = static_cast<index_t>(kv);
  const std::string block = "blks.block" + std::to_string(last);
  out.named = {{"encoder.embedding.weight", {src, c.num_hiddens}},
               {"decoder.embedding.weight", {tgt, c.num_hiddens}},
               {"decoder.dense.weight", {tgt, c.num_hiddens}},
               {"encoder." + block + ".attention.W_k.weight", {kv_width, c.num_hiddens}},
               {"encoder." + block + ".ffn.dense1.weight", {c.ffn_num_hiddens, c.num_hiddens}},
               {"decoder." + block + ".attention2.W_v.weight", {kv_width, c.num_hiddens}},
               {"decoder." + block + ".ffn.dense2.weight", {c.num_hiddens, c.ffn_num_hiddens}}};
  return out;
}

inline NetLayout bahdanau_layout(const TranslatorConfig& c, index_t src, index_t tgt) {
  check_layout_sizes(c, src, tgt);
  using U = std::uint64_t;
  const U h = static_cast<U>(c.num_hiddens), e = static_cast<U>(c.embed_size), L = static_cast<U>(c.num_layers);
  const auto gru = [&](U input) { return 3 * h * input + 3 * h * h + 6 * h + (L - 1) * (6 * h * h + 6 * h); };
  NetLayout out;
  out.parameters = static_cast<U>(src) * e + gru(e) +                                                // the encoder
                   2 * h * h + h + static_cast<U>(tgt) * e + gru(e + h) + h * static_cast<U>(tgt) +  // the decoder
                   static_cast<U>(tgt);
  const std::string last = "_l" + std::to_string(c.num_layers - 1);
  out.named = {{"encoder.embedding.weight", {src, c.embed_size}},
               {"decoder.embedding.weight", {tgt, c.embed_size}},
               {"decoder.dense.weight", {tgt, c.num_hiddens}},
               {"encoder.rnn.weight_hh" + last, {3 * c.num_hiddens, c.num_hiddens}},
               {"decoder.rnn.weight_ih_l0", {3 * c.num_hiddens, c.embed_size + c.num_hiddens}}};
  return out;
}

/// The layout of the net config.model names (net_layout's sizes checked as above).
inline NetLayout net_layout(const TranslatorConfig& c, index_t src, index_t tgt) {
  if (c.model == "transformer") return transformer_layout(c, src, tgt);
  if (c.model == "bahdanau") return bahdanau_layout(c, src, tgt);
  throw ValueError("net_layout: the model must be transformer or bahdanau, got '" + c.model.substr(0, 40) + "'");
}

/// The most parameters Translator::load builds a net of: 2^31 floats are 8 GB, and a
/// training checkpoint's Adam state as much again twice.
inline constexpr std::uint64_t kMaxParameters = std::uint64_t(1) << 31;

/// Compares the file's tensors (from its header: nothing of them is read) with the net
/// its metadata describes, before that net is built: a metadata that claims a net of
/// 17 GB is refused here, not after the allocation. Throws FileError naming the file and
/// the tensor, or the counts.
inline void check_tensors_fit(const SafetensorsHeader& header, const TranslatorConfig& config, const Vocab& src,
                              const Vocab& tgt, const std::string& path) {
  check_layout_sizes(config, src.size(), tgt.size());
  // What make_net would refuse with a ValueError that does not name the file.
  if (config.model == "transformer") {
    if (config.num_hiddens % config.num_heads != 0)
      throw FileError(path + ": num_heads " + std::to_string(config.num_heads) + " does not divide num_hiddens " +
                      std::to_string(config.num_hiddens));
    if (config.num_kv_heads > 0 && config.num_heads % config.num_kv_heads != 0)
      throw FileError(path + ": num_kv_heads " + std::to_string(config.num_kv_heads) + " does not divide num_heads " +
                      std::to_string(config.num_heads));
  }
  const NetLayout layout = net_layout(config, src.size(), tgt.size());
  const std::uint64_t memory = detail::physical_memory_bytes();
  const std::uint64_t bytes = layout.parameters * sizeof(float);
  if (layout.parameters > kMaxParameters || (memory > 0 && bytes > memory))
    throw FileError(path + ": its metadata describes a " + config.model + " of " + std::to_string(layout.parameters) +
                    " parameters (vocabularies " + std::to_string(src.size()) + " / " + std::to_string(tgt.size()) +
                    ", num_hiddens " + std::to_string(config.num_hiddens) + "), more than " +
                    (layout.parameters > kMaxParameters ? "the 2^31 a translator may have"
                                                        : "this machine's " + std::to_string(memory) + " bytes"));
  for (const auto& [name, shape] : layout.named) {
    const auto it = header.tensors.find(name);
    if (it == header.tensors.end())
      throw FileError(path + ": has no tensor '" + name + "', which the " + config.model +
                      " its metadata describes has");
    if (it->second.shape != shape)
      throw FileError(path + ": tensor '" + name + "' has shape " + detail::format_shape(it->second.shape) +
                      ", but the model its metadata describes (vocabularies " + std::to_string(src.size()) + " / " +
                      std::to_string(tgt.size()) + " tokens, num_hiddens " + std::to_string(config.num_hiddens) +
                      ") has " + detail::format_shape(shape));
  }
  // The parameters' tensors, not Adam's moments nor the moving average of a training
  // checkpoint, nor the row scales of a quantised one's int8 weights.
  std::set<std::string> scales;
  for (const auto& [name, precision] : detail::converted_weights_of(header.metadata, path))
    if (precision == Precision::int8) scales.insert(name + "_scale");
  std::uint64_t in_file = 0;
  for (const auto& [name, info] : header.tensors) {
    if (name.rfind("optimizer.", 0) == 0 || name.rfind("ema.", 0) == 0 || scales.count(name)) continue;
    std::uint64_t n = 1;
    for (const index_t d : info.shape) n *= static_cast<std::uint64_t>(d);  // the reader checked the product fits
    in_file += n;
  }
  if (in_file != layout.parameters)
    throw FileError(path + ": its tensors hold " + std::to_string(in_file) + " parameters, but the " + config.model +
                    " its metadata describes has " + std::to_string(layout.parameters));
}

}  // namespace heed

#include "heed/detail/header_end.hpp"
