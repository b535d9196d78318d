// heed/seq2seq/marian.hpp — MarianMT (Hugging Face's port of the OPUS-MT models) as
// heed's own Transformer: its config.json read and checked against what heed supports,
// the net it describes, and its weights read from and written to transformers' names.
// The directory (tokenizers and vocabulary included) is Translator::from_marian's and
// save_marian's, in heed/seq2seq/translator.hpp.
//
//   heed::MarianConfig config = heed::MarianConfig::from_json(text, "opus-mt-en-fr/config.json");
//   auto net = heed::marian_from_pretrained<float>(config, "opus-mt-en-fr/model.safetensors");
//   // or into a net you hold, which changes only if the whole file loads:
//   heed::load_marian_weights(*net, config, "opus-mt-en-fr/model.safetensors");
//
// The model (transformers' modeling_marian.py): post-LayerNorm blocks with SiLU ("swish"),
// biases on every attention projection, embeddings × √d_model plus fixed sinusoids laid
// out sin | cos (PositionalLayout::concatenated), no embedding or final LayerNorm, one
// table `model.shared.weight` for both embeddings and the output layer, whose bias is
// `final_logits_bias`. Decoding starts from <pad> and never emits it (bad_words_ids).
#pragma once

#include "heed/detail/header_begin.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "heed/io/checkpoint.hpp"
#include "heed/io/safetensors.hpp"
#include "heed/seq2seq/encoder_decoder.hpp"
#include "heed/transformer/decoder.hpp"
#include "heed/transformer/encoder.hpp"

namespace heed {

/// What heed reads of a MarianMT config.json (and generation_config.json): the sizes, the
/// special tokens and the generation defaults. `json` keeps the whole file, so that
/// save_marian writes back what heed does not read.
struct MarianConfig {
  index_t d_model = 512, encoder_layers = 6, decoder_layers = 6, encoder_attention_heads = 8,
          decoder_attention_heads = 8, encoder_ffn_dim = 2048, decoder_ffn_dim = 2048, vocab_size = 0,
          max_position_embeddings = 512;
  Activation activation = Activation::silu;
  double dropout = 0.1, attention_dropout = 0.0;
  bool scale_embedding = true;
  index_t pad_token_id = 0, eos_token_id = 0, decoder_start_token_id = 0;
  index_t forced_eos_token_id = -1;    // <eos> forced at the maximum length; -1: none
  std::vector<index_t> bad_words_ids;  // tokens never generated
  // generate()'s defaults: beam size, the most tokens counting the start token, α of
  // log P / L^α, whether beam search stops at the first num_beams finished hypotheses.
  index_t num_beams = 1, max_length = 512;
  double length_penalty = 1.0;
  bool early_stopping = false;
  nlohmann::json json = nlohmann::json::object();

  /// Parses and checks config.json's text (`path` names it in errors): anything heed's
  /// Transformer cannot be is refused by name ("normalize_before: true is not supported").
  /// Throws FileError.
  static MarianConfig from_json(const std::string& text, const std::string& path);
  /// Takes the generation defaults of generation_config.json's text over config.json's.
  void read_generation_config(const std::string& text, const std::string& path);

  /// The options of heed's Transformer that make it MarianMT.
  TransformerOptions options() const {
    TransformerOptions o;
    o.activation = activation;
    o.attention_bias = true;
    o.attention_dropout = attention_dropout;
    o.positional_layout = PositionalLayout::concatenated;
    o.max_len = max_position_embeddings;
    o.tie_output_embedding = true;
    o.embedding_scale = scale_embedding ? 0.0 : 1.0;
    return o;
  }
  /// config.json as save_marian writes it: `json` with heed's sizes.
  nlohmann::json to_json() const;
};

namespace detail {

/// json.at(key), or nullptr when absent.
inline const nlohmann::json* json_field(const nlohmann::json& json, const char* key) {
  const auto it = json.find(key);
  return it == json.end() ? nullptr : &*it;
}

/// Parses a JSON file's text: FileError naming it (a syntax error, bytes that are not
/// UTF-8, a top level that is not an object).
inline nlohmann::json parse_json_object(const std::string& text, const std::string& path) {
  nlohmann::json json;
  try {
    json = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw FileError(path + ": not valid JSON: " + e.what());
  }
  if (!json.is_object()) throw FileError(path + ": not a JSON object");
  return json;
}

/// Reads the fields of a MarianMT JSON file, each checked: FileError naming the file and key.
class MarianFields {
 public:
  MarianFields(const nlohmann::json& json, const std::string& path) : json_(json), path_(path) {}

  void integer(const char* key, index_t& field, index_t min, index_t max) const {
    const nlohmann::json* v = json_field(json_, key);
    if (!v || v->is_null()) return;
    if (!v->is_number_integer() || v->get<std::int64_t>() < min || v->get<std::int64_t>() > max)
      fail(key, "is " + excerpt(*v) + ", not an integer from " + std::to_string(min) + " to " + std::to_string(max));
    field = v->get<std::int64_t>();
  }
  void number(const char* key, double& field, double min, double max) const {
    const nlohmann::json* v = json_field(json_, key);
    if (!v || v->is_null()) return;
    if (!v->is_number() || !(v->get<double>() >= min && v->get<double>() <= max))
      fail(key, "is " + excerpt(*v) + ", not a number from " + format(min) + " to " + format(max));
    field = v->get<double>();
  }
  void boolean(const char* key, bool& field) const {
    const nlohmann::json* v = json_field(json_, key);
    if (!v || v->is_null()) return;
    if (!v->is_boolean()) fail(key, "is " + excerpt(*v) + ", not true or false");
    field = v->get<bool>();
  }
  /// A key heed supports with one value only (its default when absent).
  void require(const char* key, bool supported) const {
    const nlohmann::json* v = json_field(json_, key);
    if (!v || v->is_null()) return;
    if (!v->is_boolean()) fail(key, "is " + excerpt(*v) + ", not true or false");
    if (v->get<bool>() != supported)
      throw FileError(path_ + ": " + key + ": " + (supported ? "false" : "true") + " is not supported");
  }
  std::string string(const char* key) const {
    const nlohmann::json* v = json_field(json_, key);
    if (!v || v->is_null()) return "";
    if (!v->is_string()) fail(key, "is " + excerpt(*v) + ", not a string");
    return v->get<std::string>();
  }
  /// bad_words_ids: lists of one token each (heed forbids tokens, not sequences).
  void token_lists(const char* key, std::vector<index_t>& field, index_t vocab_size) const {
    const nlohmann::json* v = json_field(json_, key);
    if (!v || v->is_null()) return;
    if (!v->is_array()) fail(key, "is " + excerpt(*v) + ", not a list of token lists");
    field.clear();
    for (const auto& list : *v) {
      if (!list.is_array() || list.size() != 1)
        fail(key, "holds " + excerpt(list) + ": only single tokens are supported, not sequences");
      if (!list[0].is_number_integer() || list[0].get<std::int64_t>() < 0 || list[0].get<std::int64_t>() >= vocab_size)
        fail(key, "holds " + excerpt(list) + ", not a token of the vocabulary of " + std::to_string(vocab_size));
      field.push_back(list[0].get<std::int64_t>());
    }
  }
  [[noreturn]] void fail(const char* key, const std::string& what) const {
    throw FileError(path_ + ": " + key + " " + what);
  }

 private:
  static std::string excerpt(const nlohmann::json& v) {
    std::string text = v.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    return text.size() > 40 ? text.substr(0, 40) + "..." : text;
  }
  static std::string format(double x) {
    std::ostringstream out;
    out << x;
    return out.str();
  }
  const nlohmann::json& json_;
  const std::string& path_;
};

}  // namespace detail

inline MarianConfig MarianConfig::from_json(const std::string& text, const std::string& path) {
  MarianConfig c;
  c.json = detail::parse_json_object(text, path);
  const detail::MarianFields f(c.json, path);
  const std::string model_type = f.string("model_type");
  if (model_type != "marian")
    throw FileError(path + ": model_type is '" + model_type.substr(0, 40) +
                    "', not 'marian': heed loads MarianMT models (OPUS-MT)");
  // What MarianMT fixes and heed's blocks are: a config that says otherwise describes
  // another model, which heed would run wrongly.
  f.require("normalize_before", false);
  f.require("normalize_embedding", false);
  f.require("add_final_layer_norm", false);
  f.require("static_position_embeddings", true);
  f.require("share_encoder_decoder_embeddings", true);
  f.require("tie_word_embeddings", true);
  // add_bias_logits is false in transformers' MarianConfig, yet MarianMTModel always adds
  // final_logits_bias: not read.
  f.integer("d_model", c.d_model, 1, 1 << 16);
  f.integer("encoder_layers", c.encoder_layers, 1, 256);
  f.integer("decoder_layers", c.decoder_layers, 1, 256);
  f.integer("encoder_attention_heads", c.encoder_attention_heads, 1, 1 << 10);
  f.integer("decoder_attention_heads", c.decoder_attention_heads, 1, 1 << 10);
  f.integer("encoder_ffn_dim", c.encoder_ffn_dim, 1, 1 << 18);
  f.integer("decoder_ffn_dim", c.decoder_ffn_dim, 1, 1 << 18);
  c.vocab_size = -1;
  f.integer("vocab_size", c.vocab_size, 3, 1 << 24);
  if (c.vocab_size < 0) f.fail("vocab_size", "is missing");
  index_t decoder_vocab_size = c.vocab_size;
  f.integer("decoder_vocab_size", decoder_vocab_size, 3, 1 << 24);
  if (decoder_vocab_size != c.vocab_size)
    throw FileError(path + ": decoder_vocab_size " + std::to_string(decoder_vocab_size) + " differs from vocab_size " +
                    std::to_string(c.vocab_size) + ": separate vocabularies are not supported");
  f.integer("max_position_embeddings", c.max_position_embeddings, 2, 1 << 16);
  for (const auto& [key, heads] : {std::pair{"encoder_attention_heads", c.encoder_attention_heads},
                                   std::pair{"decoder_attention_heads", c.decoder_attention_heads}})
    if (c.d_model % heads != 0)
      f.fail(key, std::to_string(heads) + " does not divide d_model " + std::to_string(c.d_model));
  const std::string activation = f.string("activation_function");
  if (activation == "swish" || activation == "silu" || activation.empty())
    c.activation = Activation::silu;
  else if (activation == "gelu")
    c.activation = Activation::gelu;
  else if (activation == "relu")
    c.activation = Activation::relu;
  else
    f.fail("activation_function", "'" + activation.substr(0, 40) + "' is not supported (swish, silu, gelu, relu)");
  f.number("dropout", c.dropout, 0.0, 0.99);
  f.number("attention_dropout", c.attention_dropout, 0.0, 0.99);
  double activation_dropout = 0.0;
  f.number("activation_dropout", activation_dropout, 0.0, 0.99);
  if (activation_dropout != 0.0)
    f.fail("activation_dropout", "is not supported unless 0 (heed's FFN has no dropout after its activation)");
  f.boolean("scale_embedding", c.scale_embedding);
  c.pad_token_id = c.vocab_size - 1;
  f.integer("pad_token_id", c.pad_token_id, 0, c.vocab_size - 1);
  f.integer("eos_token_id", c.eos_token_id, 0, c.vocab_size - 1);
  c.decoder_start_token_id = c.pad_token_id;
  f.integer("decoder_start_token_id", c.decoder_start_token_id, 0, c.vocab_size - 1);
  f.integer("forced_eos_token_id", c.forced_eos_token_id, 0, c.vocab_size - 1);
  c.read_generation_config(text, path);
  return c;
}

inline void MarianConfig::read_generation_config(const std::string& text, const std::string& path) {
  const nlohmann::json parsed = detail::parse_json_object(text, path);
  const detail::MarianFields f(parsed, path);
  f.token_lists("bad_words_ids", bad_words_ids, vocab_size);
  f.integer("num_beams", num_beams, 1, 1 << 10);
  f.integer("max_length", max_length, 1, 1 << 16);
  f.number("length_penalty", length_penalty, 0.0, 10.0);  // heed's range (predict_seq2seq)
  if (const nlohmann::json* v = detail::json_field(parsed, "early_stopping"); v && v->is_string())
    f.fail("early_stopping", "'" + v->get<std::string>().substr(0, 20) + "' is not supported (true or false)");
  f.boolean("early_stopping", early_stopping);
  f.integer("forced_eos_token_id", forced_eos_token_id, 0, vocab_size - 1);
  f.integer("decoder_start_token_id", decoder_start_token_id, 0, vocab_size - 1);
  f.integer("eos_token_id", eos_token_id, 0, vocab_size - 1);
}

inline nlohmann::json MarianConfig::to_json() const {
  nlohmann::json out = json;
  out["model_type"] = "marian";
  out["d_model"] = d_model;
  out["encoder_layers"] = encoder_layers;
  out["decoder_layers"] = decoder_layers;
  out["encoder_attention_heads"] = encoder_attention_heads;
  out["decoder_attention_heads"] = decoder_attention_heads;
  out["encoder_ffn_dim"] = encoder_ffn_dim;
  out["decoder_ffn_dim"] = decoder_ffn_dim;
  out["vocab_size"] = vocab_size;
  out["decoder_vocab_size"] = vocab_size;
  out["max_position_embeddings"] = max_position_embeddings;
  out["pad_token_id"] = pad_token_id;
  out["eos_token_id"] = eos_token_id;
  out["decoder_start_token_id"] = decoder_start_token_id;
  out["scale_embedding"] = scale_embedding;
  out["activation_function"] = to_string(activation) == std::string("silu") ? "swish" : to_string(activation);
  return out;
}

/// The parameters of the net a MarianConfig describes (the embedding counted once,
/// final_logits_bias included: 74,669,178 for opus-mt-en-fr), counted without building it.
inline std::uint64_t marian_parameter_count(const MarianConfig& c) {
  using U = std::uint64_t;  // from_json bounds every size: no product overflows
  const U d = static_cast<U>(c.d_model), V = static_cast<U>(c.vocab_size);
  const U attention = 4 * (d * d + d), norm = 2 * d;
  const auto ffn = [&](index_t f) { return 2 * d * static_cast<U>(f) + static_cast<U>(f) + d; };
  return V * d + V + static_cast<U>(c.encoder_layers) * (attention + 2 * norm + ffn(c.encoder_ffn_dim)) +
         static_cast<U>(c.decoder_layers) * (2 * attention + 3 * norm + ffn(c.decoder_ffn_dim));
}

template <typename T = float>
using MarianNet = EncoderDecoder<T, TransformerEncoder<T>, TransformerDecoder<T>>;

/// The net a MarianConfig describes: heed's Transformer with MarianConfig::options(), the
/// encoder's embedding tied to the decoder's (and so to its output layer). Its weights are
/// random (drawn from `gen`, default_generator() when null) until loaded.
template <typename T = float>
std::unique_ptr<MarianNet<T>> make_marian_net(const MarianConfig& c, Generator* gen = nullptr) {
  TransformerOptions options = c.options();
  options.generator = gen;
  const index_t d = c.d_model;
  auto net = make_encoder_decoder<T>(
      std::make_unique<TransformerEncoder<T>>(c.vocab_size, d, d, d, d, Shape{d}, d, c.encoder_ffn_dim,
                                              c.encoder_attention_heads, c.encoder_layers, c.dropout, false, options),
      std::make_unique<TransformerDecoder<T>>(c.vocab_size, d, d, d, d, Shape{d}, d, c.decoder_ffn_dim,
                                              c.decoder_attention_heads, c.decoder_layers, c.dropout, options));
  tie_parameter(net->encoder().embedding.weight, net->decoder().embedding.weight, "make_marian_net");
  return net;
}

namespace detail {

/// transformers' name of a parameter or positional table of heed's MarianNet
/// ("encoder.blks.block0.attention.W_q.weight" → "model.encoder.layers.0.self_attn.q_proj.weight").
inline std::string marian_name(const std::string& name) {
  if (name == "encoder.embedding.weight") return "model.shared.weight";
  if (name == "decoder.dense.bias") return "final_logits_bias";
  if (name == "encoder.pos_encoding.P") return "model.encoder.embed_positions.weight";
  if (name == "decoder.pos_encoding.P") return "model.decoder.embed_positions.weight";
  for (const char* part : {"encoder", "decoder"}) {
    const std::string prefix = std::string(part) + ".blks.block";
    if (name.rfind(prefix, 0) != 0) continue;
    const std::size_t dot = name.find('.', prefix.size());
    if (dot == std::string::npos) break;
    const std::string layer = name.substr(prefix.size(), dot - prefix.size()), rest = name.substr(dot + 1);
    static const std::pair<const char*, const char*> kEncoder[] = {{"attention.", "self_attn."},
                                                                   {"addnorm1.ln.", "self_attn_layer_norm."},
                                                                   {"ffn.dense1.", "fc1."},
                                                                   {"ffn.dense2.", "fc2."},
                                                                   {"addnorm2.ln.", "final_layer_norm."}};
    static const std::pair<const char*, const char*> kDecoder[] = {{"attention1.", "self_attn."},
                                                                   {"addnorm1.ln.", "self_attn_layer_norm."},
                                                                   {"attention2.", "encoder_attn."},
                                                                   {"addnorm2.ln.", "encoder_attn_layer_norm."},
                                                                   {"ffn.dense1.", "fc1."},
                                                                   {"ffn.dense2.", "fc2."},
                                                                   {"addnorm3.ln.", "final_layer_norm."}};
    static const std::pair<const char*, const char*> kProjections[] = {
        {"W_q.", "q_proj."}, {"W_k.", "k_proj."}, {"W_v.", "v_proj."}, {"W_o.", "out_proj."}};
    std::string mapped;
    for (const auto& [from, to] : std::string(part) == "encoder"
                                      ? std::vector(std::begin(kEncoder), std::end(kEncoder))
                                      : std::vector(std::begin(kDecoder), std::end(kDecoder)))
      if (rest.rfind(from, 0) == 0) {
        mapped = to + rest.substr(std::string(from).size());
        break;
      }
    if (mapped.empty()) break;
    for (const auto& [from, to] : kProjections) {
      const std::size_t at = mapped.find(from);
      if (at != std::string::npos) mapped.replace(at, std::string(from).size(), to);
    }
    return "model." + std::string(part) + ".layers." + layer + "." + mapped;
  }
  throw ValueError("marian_name: '" + name + "' is not a parameter of a MarianMT net");
}

/// The names under which transformers may store the one embedding table (its
/// save_pretrained keeps one of them; older files hold several copies).
inline const std::vector<std::string>& marian_embedding_names() {
  static const std::vector<std::string> names = {"model.shared.weight", "model.encoder.embed_tokens.weight",
                                                 "model.decoder.embed_tokens.weight", "lm_head.weight"};
  return names;
}

/// Where a tensor of a MarianMT file goes.
template <typename T>
struct MarianSlot {
  std::string name;   // heed's ("encoder.embedding.weight")
  Tensor<T> target;   // the net's parameter or positional table
  std::string first;  // a tied copy of the embedding: the name it must equal; empty otherwise
};

/// Checks a file's tensors (`entries`, in the order of their data) against the net of
/// `config` as load_marian_weights documents, from the header alone: FileError naming
/// the file and the tensor. Returns where each tensor goes; of the embedding's names the
/// first in the file is loaded, the others compared with it.
template <typename T>
std::map<std::string, MarianSlot<T>> marian_slots(MarianNet<T>& net, const MarianConfig& config,
                                                  const std::vector<SafetensorsReader::Entry>& entries,
                                                  const std::string& path) {
  std::map<std::string, const SafetensorsReader::Entry*> file;
  for (const auto& e : entries) file.emplace(e.name, &e);
  std::map<std::string, MarianSlot<T>> slots;
  const auto check = [&](const SafetensorsReader::Entry& e, const std::vector<index_t>& shape) {
    if (e.shape != shape)
      throw FileError(path + ": tensor '" + e.name + "' has shape " + format_shape(e.shape) +
                      ", but config.json's sizes give " + format_shape(shape));
    if (!reads_as<T>(e.dtype))
      throw FileError(path + ": tensor '" + e.name + "': dtype " + e.dtype + ", wanted " + safetensors_dtype<T>() +
                      (std::is_floating_point_v<T> ? " (or F16, BF16)" : "") + " for a " + Tensor<T>::dtype() + " net");
  };
  Tensor<T>& embedding = net.encoder().embedding.weight;
  for (const std::string& name : marian_embedding_names()) {
    const auto it = file.find(name);
    if (it == file.end()) continue;
    check(*it->second, {config.vocab_size, config.d_model});
    slots.emplace(name, MarianSlot<T>{"encoder.embedding.weight", embedding, ""});
  }
  if (slots.empty())
    throw FileError(path + ": has no embedding table (model.shared.weight, or one of its tied copies)");
  std::string first;  // in the order of the data, so that each copy is compared with bytes already read
  for (const auto& e : entries)
    if (slots.count(e.name)) {
      if (first.empty())
        first = e.name;
      else
        slots.at(e.name).first = first;
    }
  for (const auto& [name, parameter] : net.named_parameters()) {
    if (name == "encoder.embedding.weight") continue;
    const std::string hf = marian_name(name);
    const auto it = file.find(hf);
    if (it == file.end())
      throw FileError(path + ": has no tensor '" + hf + "', which a MarianMT model of its config.json has");
    check(*it->second,
          name == "decoder.dense.bias" ? std::vector<index_t>{1, config.vocab_size} : parameter.shape().to_vector());
    slots.emplace(hf, MarianSlot<T>{name, parameter, ""});
  }
  for (const auto& [name, buffer] : net.named_buffers()) {
    const std::string hf = marian_name(name);
    const auto it = file.find(hf);
    if (it == file.end()) continue;  // computed
    check(*it->second, {config.max_position_embeddings, config.d_model});
    HEED_CHECK(buffer.numel() == config.max_position_embeddings * config.d_model, ValueError, "load_marian_weights: '",
               name, "' has shape ", to_string(buffer.shape()), ", not that of config.json's net");
    slots.emplace(hf, MarianSlot<T>{name, buffer, ""});
  }
  std::vector<std::string> unexpected;
  for (const auto& e : entries)
    if (!slots.count(e.name)) unexpected.push_back(e.name);
  if (!unexpected.empty())
    throw FileError(path + ": holds tensors a MarianMT model of its config.json does not have (" +
                    format_names(unexpected) + ")");
  return slots;
}

/// Reads a MarianMT file's tensors into the net, checked as load_marian_weights documents:
/// everything the header shows before any byte is read. `in_place` writes each tensor
/// into its parameter as it is read (memory: one chunk), so that a failure past the
/// header (a checksum, a tied copy that differs, the file changed) leaves the net half
/// loaded; otherwise into fresh tensors loaded into the net once all is read (memory: a
/// second copy of the weights), so that the net changes only if everything succeeded.
template <typename T>
void read_marian_weights(MarianNet<T>& net, const MarianConfig& config, SafetensorsReader& reader,
                         const std::string& path, bool in_place) {
  std::map<std::string, MarianSlot<T>> slots = marian_slots(net, config, reader.entries(), path);
  std::map<std::string, Tensor<T>> state;
  for (auto& [hf, slot] : slots) {
    HEED_CHECK(slot.target.is_cpu() || !in_place, ValueError, "load_marian_weights: '", slot.name, "' is on ",
               to_string(slot.target.device()), "; a net loaded in place must be on the CPU");
    if (in_place || !slot.first.empty()) continue;
    slot.target = make_tensor<T>(slot.target.shape(), Device::cpu(), "load_marian_weights");
    state.emplace(slot.name, slot.target);
  }
  for (auto& [hf, slot] : slots)
    if (!slot.first.empty()) slot.target = slots.at(slot.first).target;
  std::vector<T> copy;  // a chunk of a tied copy of the embedding, converted
  reader.read_chunks(
      [&](const SafetensorsReader::Entry& e, const unsigned char* bytes, std::size_t offset, std::size_t size) {
        MarianSlot<T>& slot = slots.at(e.name);
        const std::size_t element = safetensors_dtype_size(e.dtype), count = size / element;
        T* target = slot.target.data() + offset / element;
        if (slot.first.empty()) return convert_bytes(bytes, count, e.dtype, target);
        copy.resize(count);
        convert_bytes(bytes, count, e.dtype, copy.data());
        if (!std::equal(copy.begin(), copy.end(), target))
          throw FileError(path + ": tensor '" + e.name + "' differs from '" + slot.first + "': MarianMT ties them");
      });
  if (!in_place) {
    net.load_state_dict(state, false);
    return;
  }
  for (const auto& [hf, slot] : slots) heed::detail::impl(slot.target).storage->bump_version();  // written in place
}

/// Loads a MarianMT file into `net` in place (read_marian_weights): for a net that is
/// discarded when this throws, as marian_from_pretrained's.
template <typename T>
void load_marian_weights_in_place(MarianNet<T>& net, const MarianConfig& config, const std::string& path) {
  SafetensorsReader reader("marian_from_pretrained", path);
  read_marian_weights(net, config, reader, path, true);
}

}  // namespace detail

/// Loads transformers' MarianMTModel weights (model.safetensors at `path`) into a net
/// make_marian_net made of `config`. Every tensor the net needs must be in the file with
/// the shape the config gives (the embedding under any of its tied names, equal where
/// several; the positional tables may be left out: the net's are computed, and a file's
/// are used as transformers uses them), and nothing else may be. F32, F16 and BF16
/// tensors are read; a file heed wrote has its checksums checked. Throws FileError naming
/// the file and the tensor before anything of the net changes: the weights are read into
/// a second copy first (marian_from_pretrained needs none).
template <typename T>
void load_marian_weights(MarianNet<T>& net, const MarianConfig& config, const std::string& path) {
  detail::SafetensorsReader reader("load_marian_weights", path);
  detail::read_marian_weights(net, config, reader, path, false);
}

/// make_marian_net and load_marian_weights in one, as transformers'
/// MarianMTModel.from_pretrained(low_cpu_mem_usage=True): the net is built without
/// drawing its weights and each tensor is read straight into its parameter, so that the
/// load holds about the weights' own size (plus a 4 MiB chunk), then heed's idle buffers are
/// freed (empty_buffer_cache). The file is checked as load_marian_weights checks it, its
/// format before the net is built, its tensors' names, dtypes and shapes before any is
/// read; a failure past the header (a checksum, a tied copy that differs, the file
/// changed) throws FileError naming the file too, and the half-loaded net is freed.
template <typename T = float>
std::unique_ptr<MarianNet<T>> marian_from_pretrained(const MarianConfig& config, const std::string& path) {
  detail::SafetensorsReader reader("marian_from_pretrained", path);
  std::unique_ptr<MarianNet<T>> net;
  {
    const detail::SkipInitGuard skip_init;  // every parameter is read below
    net = make_marian_net<T>(config);
  }
  detail::read_marian_weights(*net, config, reader, path, true);
  empty_buffer_cache();
  return net;
}

/// Writes a net's weights as transformers' MarianMTModel names (model.shared.weight once,
/// final_logits_bias (1, V), the positional tables in F32) to a safetensors file at `path`
/// (atomically), in F32, or in F16 / BF16 when `dtype` says so.
template <typename T>
void save_marian_weights(const MarianNet<T>& net, const MarianConfig& config, const std::string& path,
                         const std::string& dtype = "F32") {
  std::vector<std::pair<std::string, TensorRecord>> records;
  const auto add = [&](const std::string& name, const Tensor<T>& t, const Shape& shape) {
    records.emplace_back(detail::marian_name(name), TensorRecord::from_tensor(t.reshape(shape), dtype));
  };
  for (const auto& [name, parameter] : net.named_parameters())
    add(name, parameter.detach(), name == "decoder.dense.bias" ? Shape{1, config.vocab_size} : parameter.shape());
  // The positional tables only in F32: rounded to 2-byte floats they would no longer be
  // the sinusoids, and a file without them gets the exact ones computed (heed and
  // transformers alike).
  if (dtype == "F32")
    for (const auto& [name, buffer] : net.named_buffers())
      add(name, buffer, Shape{config.max_position_embeddings, config.d_model});
  save_safetensors(path, records, {{"format", "pt"}});
}

}  // namespace heed

#include "heed/detail/header_end.hpp"
