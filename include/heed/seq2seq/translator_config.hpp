// heed/seq2seq/translator_config.hpp — a translator's hyper-parameters (d2l's 10.4 and
// 10.7 defaults) and their form in a checkpoint's metadata, as train_translator and
// translate --save write them: "heed.model" for the kind, one key per size.
//
//   heed::TranslatorConfig config;          // d2l's Transformer
//   config.num_hiddens = 128;
//   auto metadata = config.to_metadata();   // {"heed.model": "transformer", "num_hiddens": "128", ...}
//   auto back = heed::TranslatorConfig::from_metadata(metadata, "model.safetensors");
#pragma once

#include "heed/detail/header_begin.hpp"

#include <cmath>
#include <cstdlib>
#include <map>
#include <sstream>
#include <string>
#include <type_traits>

#include "heed/core/error.hpp"
#include "heed/core/shape.hpp"

namespace heed {

/// A model's hyper-parameters; the defaults are d2l's (10.4 and 10.7).
struct TranslatorConfig {
  /// A Transformer encodes each sentence padded to num_steps tokens, and its positional
  /// encoding has 1000 positions (d2l's max_len): a longer num_steps cannot translate.
  static constexpr index_t kMaxTransformerSteps = 1000;

  std::string model = "transformer";  // or "bahdanau"
  index_t num_hiddens = 32, embed_size = 32, ffn_num_hiddens = 64, num_heads = 4, num_kv_heads = 0, num_layers = 2;
  index_t num_steps = 10;
  double dropout = 0.1;
  bool norm_first = false;
  double embedding_scale = 0.0;  // Transformer: TransformerOptions::embedding_scale (0: √num_hiddens)

  /// As a checkpoint's metadata (with "heed.model" for the kind; embedding_scale only when
  /// set, so that earlier checkpoints still match).
  std::map<std::string, std::string> to_metadata() const {
    const auto text = [](double value) {
      std::ostringstream out;
      out.precision(17);
      out << value;
      return out.str();
    };
    std::map<std::string, std::string> metadata = {{"heed.model", model},
                                                   {"num_hiddens", std::to_string(num_hiddens)},
                                                   {"embed_size", std::to_string(embed_size)},
                                                   {"ffn_num_hiddens", std::to_string(ffn_num_hiddens)},
                                                   {"num_heads", std::to_string(num_heads)},
                                                   {"num_kv_heads", std::to_string(num_kv_heads)},
                                                   {"num_layers", std::to_string(num_layers)},
                                                   {"num_steps", std::to_string(num_steps)},
                                                   {"dropout", text(dropout)},
                                                   {"norm_first", norm_first ? "1" : "0"}};
    if (embedding_scale != 0.0) metadata["embedding_scale"] = text(embedding_scale);
    return metadata;
  }

  /// From a checkpoint's metadata: a key that is absent keeps d2l's value (translate's
  /// first checkpoints held the kind alone); one that is not a number is a FileError.
  static TranslatorConfig from_metadata(const std::map<std::string, std::string>& metadata, const std::string& path) {
    TranslatorConfig config;
    // The ranges are train_translator's flags': a hostile file cannot make a net that
    // would not fit before its tensors are even compared with the net's (load_translator
    // compares the sizes with the file's tensors before it builds the net).
    const auto number = [&](const char* key, auto& field, double min, double max) {
      const auto it = metadata.find(key);
      if (it == metadata.end()) return;
      char* end = nullptr;
      const double value = std::strtod(it->second.c_str(), &end);
      using Field = std::remove_reference_t<decltype(field)>;
      const bool whole = !std::is_integral_v<Field> || value == std::floor(value);  // "32.5 hidden" is no size
      if (it->second.empty() || *end != '\0' || !(value >= min && value <= max) || !whole) {
        std::ostringstream message;
        message << path << ": metadata '" << key << "' is not "
                << (std::is_integral_v<Field> ? "an integer" : "a number") << " from " << min << " to " << max << ": '"
                << it->second.substr(0, 40) << "'";
        throw FileError(message.str());
      }
      field = static_cast<Field>(value);
    };
    if (const auto it = metadata.find("heed.model"); it != metadata.end()) config.model = it->second;
    if (config.model != "transformer" && config.model != "bahdanau")
      throw FileError(path + ": holds a model of kind '" + config.model.substr(0, 40) +
                      "', not transformer or bahdanau");
    number("num_hiddens", config.num_hiddens, 1, 1 << 16);
    number("embed_size", config.embed_size, 1, 1 << 16);
    number("ffn_num_hiddens", config.ffn_num_hiddens, 1, 1 << 18);
    number("num_heads", config.num_heads, 1, 1 << 10);
    number("num_kv_heads", config.num_kv_heads, 0, 1 << 10);
    number("num_layers", config.num_layers, 1, 256);
    number("num_steps", config.num_steps, 2, 4096);
    if (config.model == "transformer" && config.num_steps > kMaxTransformerSteps)
      throw FileError(path + ": num_steps " + std::to_string(config.num_steps) + " is more than the " +
                      std::to_string(kMaxTransformerSteps) +
                      " positions of a Transformer's positional encoding: it could not translate");
    number("dropout", config.dropout, 0, 0.99);
    number("embedding_scale", config.embedding_scale, 0, 1e6);
    index_t norm_first = 0;
    number("norm_first", norm_first, 0, 1);
    config.norm_first = norm_first != 0;
    return config;
  }
};

}  // namespace heed

#include "heed/detail/header_end.hpp"
