// examples/translator.hpp — what translate and train_translator share: a model's
// hyper-parameters as a checkpoint's metadata, the net built from them, its tokens (d2l's
// words, or SentencePiece's pieces kept in the checkpoint), a checkpoint loaded as a
// translator (everything its metadata claims checked against its tensors before the net
// is built), the scoring of a file of pairs (corpus BLEU), and train_translator's
// --resume metadata read and checked (tests/fuzz fuzzes both).
#pragma once

#include <heed/heed.hpp>
#include <heed/io/base64.hpp>
#include <heed/io/checkpoint.hpp>
#include <heed/io/crc32c.hpp>
#include <heed/io/safetensors.hpp>
#include <heed/io/training_checkpoint.hpp>
#include <heed/seq2seq/bleu.hpp>
#include <heed/seq2seq/encoder_decoder.hpp>
#include <heed/seq2seq/predict.hpp>
#ifdef HEED_WITH_SENTENCEPIECE
#include <heed/seq2seq/sentencepiece.hpp>
#endif

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace translator {

using heed::index_t;
using Float = float;
using BahdanauNet = heed::EncoderDecoder<Float, heed::Seq2SeqEncoder<Float>, heed::Seq2SeqAttentionDecoder<Float>>;
using TransformerNet = heed::EncoderDecoder<Float, heed::TransformerEncoder<Float>, heed::TransformerDecoder<Float>>;

/// A Transformer encodes each sentence padded to num_steps tokens, and its positional
/// encoding has 1000 positions (d2l's max_len): a longer num_steps cannot translate.
inline constexpr index_t kMaxTransformerSteps = 1000;

/// A model's hyper-parameters; the defaults are d2l's (10.4 and 10.7).
struct ModelConfig {
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
  static ModelConfig from_metadata(const std::map<std::string, std::string>& metadata, const std::string& path) {
    ModelConfig config;
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
        throw heed::FileError(message.str());
      }
      field = static_cast<Field>(value);
    };
    if (const auto it = metadata.find("heed.model"); it != metadata.end()) config.model = it->second;
    if (config.model != "transformer" && config.model != "bahdanau")
      throw heed::FileError(path + ": holds a model of kind '" + config.model.substr(0, 40) +
                            "', not transformer or bahdanau");
    number("num_hiddens", config.num_hiddens, 1, 1 << 16);
    number("embed_size", config.embed_size, 1, 1 << 16);
    number("ffn_num_hiddens", config.ffn_num_hiddens, 1, 1 << 18);
    number("num_heads", config.num_heads, 1, 1 << 10);
    number("num_kv_heads", config.num_kv_heads, 0, 1 << 10);
    number("num_layers", config.num_layers, 1, 256);
    number("num_steps", config.num_steps, 2, 4096);
    if (config.model == "transformer" && config.num_steps > kMaxTransformerSteps)
      throw heed::FileError(path + ": num_steps " + std::to_string(config.num_steps) + " is more than the " +
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

inline std::unique_ptr<BahdanauNet> make_net(const ModelConfig& c, const heed::Vocab& src, const heed::Vocab& tgt,
                                             BahdanauNet*) {
  return heed::make_encoder_decoder<Float>(
      std::make_unique<heed::Seq2SeqEncoder<Float>>(src.size(), c.embed_size, c.num_hiddens, c.num_layers, c.dropout),
      std::make_unique<heed::Seq2SeqAttentionDecoder<Float>>(tgt.size(), c.embed_size, c.num_hiddens, c.num_layers,
                                                             c.dropout));
}

inline std::unique_ptr<TransformerNet> make_net(const ModelConfig& c, const heed::Vocab& src, const heed::Vocab& tgt,
                                                TransformerNet*) {
  const index_t h = c.num_hiddens;
  heed::TransformerOptions options;
  options.norm_first = c.norm_first;
  options.num_kv_heads = c.num_kv_heads;
  options.embedding_scale = c.embedding_scale;
  return heed::make_encoder_decoder<Float>(
      std::make_unique<heed::TransformerEncoder<Float>>(src.size(), h, h, h, h, heed::Shape{h}, h, c.ffn_num_hiddens,
                                                        c.num_heads, c.num_layers, c.dropout, false, options),
      std::make_unique<heed::TransformerDecoder<Float>>(tgt.size(), h, h, h, h, heed::Shape{h}, h, c.ffn_num_hiddens,
                                                        c.num_heads, c.num_layers, c.dropout, options));
}

inline std::string join_lines(const std::vector<std::string>& tokens) {
  std::string out;
  for (const auto& t : tokens) out += t + "\n";
  return out;
}

inline std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

inline std::string join_words(const std::vector<std::string>& words) {
  std::string out;
  for (const auto& w : words) out += (out.empty() ? "" : " ") + w;
  return out;
}

/// The vocabularies as metadata, d2l's idx_to_token one per line.
inline std::map<std::string, std::string> vocab_metadata(const heed::Vocab& src, const heed::Vocab& tgt) {
  return {{"src_vocab", join_lines(src.idx_to_token())}, {"tgt_vocab", join_lines(tgt.idx_to_token())}};
}

/// A token or piece for a message: quoted, cut short (a hostile one may be long).
inline std::string quoted(const std::string& text) {
  return "'" + (text.size() > 40 ? text.substr(0, 40) + "..." : text) + "'";
}

/// How a model's sentences become its tokens and back: d2l's words, or the pieces of the
/// SentencePiece models a checkpoint holds (train_translator --sentencepiece N, in a build
/// with HEED_WITH_SENTENCEPIECE), base64 in its metadata under heed.src_spm / heed.tgt_spm,
/// each with the CRC-32C of its bytes under heed.src_spm_crc32c / heed.tgt_spm_crc32c.
class Tokenizers {
 public:
  static constexpr const char* kSourceKey = "heed.src_spm";
  static constexpr const char* kTargetKey = "heed.tgt_spm";
  static constexpr const char* kSourceCrcKey = "heed.src_spm_crc32c";
  static constexpr const char* kTargetCrcKey = "heed.tgt_spm_crc32c";

  bool subwords() const {
#ifdef HEED_WITH_SENTENCEPIECE
    return src_ != nullptr;
#else
    return false;
#endif
  }

  /// SentencePiece models of vocab_size pieces each, trained on the two sides of `words`.
  static Tokenizers train([[maybe_unused]] const heed::NmtTokens& words, [[maybe_unused]] index_t vocab_size) {
#ifdef HEED_WITH_SENTENCEPIECE
    const auto sentences = [](const std::vector<std::vector<std::string>>& side) {
      std::vector<std::string> out;
      for (const auto& w : side) out.push_back(join_words(w));
      return out;
    };
    Tokenizers t;
    t.src_ =
        std::make_shared<const heed::SentencePiece>(heed::SentencePiece::train(sentences(words.source), vocab_size));
    t.tgt_ =
        std::make_shared<const heed::SentencePiece>(heed::SentencePiece::train(sentences(words.target), vocab_size));
    return t;
#else
    throw heed::ValueError(
        "--sentencepiece: this build has no SentencePiece (configure with -DHEED_WITH_SENTENCEPIECE=ON)");
#endif
  }

  /// The models a checkpoint's metadata holds, if any, checked against their checksums
  /// where the metadata has them (checkpoints written before the checksums have none).
  /// check_vocabularies() then checks them against the vocabularies beside them.
  static Tokenizers from_metadata(const std::map<std::string, std::string>& metadata, const std::string& path) {
    const auto src = metadata.find(kSourceKey), tgt = metadata.find(kTargetKey);
    // A checksum without its model: the model was taken out, and the vocabulary left is
    // its pieces, which d2l's words would read as <unk>.
    for (const auto& [key, crc_key] : {std::pair{kSourceKey, kSourceCrcKey}, std::pair{kTargetKey, kTargetCrcKey}})
      if (metadata.count(crc_key) && !metadata.count(key))
        throw heed::FileError(path + ": has " + crc_key + " but no " + key +
                              ": the SentencePiece model it is the checksum of was removed from the checkpoint");
    if (src == metadata.end() && tgt == metadata.end()) return {};
    if (src == metadata.end() || tgt == metadata.end())
      throw heed::FileError(path + ": holds one SentencePiece model of two (" + kSourceKey + ", " + kTargetKey + ")");
#ifdef HEED_WITH_SENTENCEPIECE
    Tokenizers t;
    const auto model = [&](const char* key, const char* crc_key, const std::string& text) {
      const std::string what = path + ": " + key;
      std::string bytes = heed::base64_decode(text, what);
      if (const auto crc = metadata.find(crc_key); crc != metadata.end()) {
        std::uint32_t expected = 0;
        if (!heed::detail::parse_crc(crc->second, expected))
          throw heed::FileError(path + ": " + crc_key + " is " + quoted(crc->second) +
                                ", not a CRC-32C (8 hex digits)");
        const std::uint32_t actual = heed::crc32c(bytes.data(), bytes.size());
        if (actual != expected)
          throw heed::FileError(what + " does not match its checksum " + crc_key + " (CRC-32C " +
                                heed::detail::format_crc(actual) + " of its " + std::to_string(bytes.size()) +
                                " bytes, the metadata says " + heed::detail::format_crc(expected) +
                                "): the model was changed or replaced");
      }
      return std::make_shared<const heed::SentencePiece>(heed::SentencePiece::from_serialized(std::move(bytes), what));
    };
    t.src_ = model(kSourceKey, kSourceCrcKey, src->second);
    t.tgt_ = model(kTargetKey, kTargetCrcKey, tgt->second);
    return t;
#else
    throw heed::FileError(path + ": a model of SentencePiece tokens, which this build cannot read (configure with " +
                          "-DHEED_WITH_SENTENCEPIECE=ON)");
#endif
  }

  /// The models as metadata, each with its checksum (nothing for words).
  std::map<std::string, std::string> metadata() const {
#ifdef HEED_WITH_SENTENCEPIECE
    if (subwords()) {
      const auto crc = [](const std::string& bytes) {
        return heed::detail::format_crc(heed::crc32c(bytes.data(), bytes.size()));
      };
      return {{kSourceKey, heed::base64_encode(src_->serialized())},
              {kTargetKey, heed::base64_encode(tgt_->serialized())},
              {kSourceCrcKey, crc(src_->serialized())},
              {kTargetCrcKey, crc(tgt_->serialized())}};
    }
#endif
    return {};
  }

  /// Whether a vocabulary is a model's and these tokens' (src_vocab, tgt_vocab of a
  /// checkpoint): for SentencePiece, every piece at its id, so that a model swapped with
  /// the other language's, taken from another run, or added to a checkpoint of words is
  /// refused; for words, the reserved tokens, and no vocabulary of pieces whose models
  /// were removed. Throws FileError naming `path`, the keys and what differs.
  void check_vocabularies(const heed::Vocab& src, const heed::Vocab& tgt, const std::string& path) const {
#ifdef HEED_WITH_SENTENCEPIECE
    if (subwords()) {
      check_pieces(*src_, src, kSourceKey, "src_vocab", path);
      check_pieces(*tgt_, tgt, kTargetKey, "tgt_vocab", path);
      return;
    }
#endif
    check_words(src, "src_vocab", kSourceKey, path);
    check_words(tgt, "tgt_vocab", kTargetKey, path);
  }

  /// The vocabulary of one side of the model's tokens: its SentencePiece model's pieces,
  /// or d2l's of the words.
  heed::Vocab vocab(const std::vector<std::vector<std::string>>& side, [[maybe_unused]] bool target,
                    index_t min_freq) const {
#ifdef HEED_WITH_SENTENCEPIECE
    if (subwords()) return (target ? tgt_ : src_)->vocab();
#endif
    return heed::Vocab(side, min_freq, {"<pad>", "<bos>", "<eos>"});
  }

  /// A sentence's words (preprocess_nmt'ed and split) as the model's source tokens.
  std::vector<std::string> source_tokens(const std::vector<std::string>& words) const {
#ifdef HEED_WITH_SENTENCEPIECE
    if (subwords()) return src_->encode(join_words(words));
#endif
    return words;
  }

  /// Pairs of words as the model's tokens.
  heed::NmtTokens to_model(const heed::NmtTokens& words) const {
    if (!subwords()) return words;
    heed::NmtTokens out;
#ifdef HEED_WITH_SENTENCEPIECE
    for (const auto& w : words.source) out.source.push_back(src_->encode(join_words(w)));
    for (const auto& w : words.target) out.target.push_back(tgt_->encode(join_words(w)));
#endif
    return out;
  }

  /// The model's target tokens as text in d2l's words, joined by spaces.
  std::string target_text(const std::vector<std::string>& tokens) const {
#ifdef HEED_WITH_SENTENCEPIECE
    if (subwords()) return tgt_->decode(tokens);
#endif
    return join_words(tokens);
  }

 private:
  static constexpr const char* kReserved[] = {"<unk>", "<pad>", "<bos>", "<eos>"};

  /// d2l's words need the reserved tokens (decoding starts with <bos>, stops at <eos>,
  /// pads with <pad>), and are never SentencePiece's pieces: those start words with "▁",
  /// which d2l's preprocessing never writes. A vocabulary of pieces without its model is
  /// refused, since every word would be <unk>.
  static void check_words(const heed::Vocab& vocab, const char* vocab_key, const char* model_key,
                          const std::string& path) {
    for (const char* token : kReserved)
      if (!vocab.contains(token)) throw heed::FileError(path + ": " + vocab_key + " has no " + token + " token");
    index_t marked = 0;  // tokens that begin with "▁" (U+2581), SentencePiece's mark of a word's start
    for (const std::string& token : vocab.idx_to_token()) marked += token.rfind("\xe2\x96\x81", 0) == 0 ? 1 : 0;
    // A fifth or more of a model's pieces begin words (on the built-in corpus, 22 % of
    // 50 pieces, 40 % of 90); a tenth is far from a stray "▁" in a corpus of words.
    if (marked > 0 && 10 * marked >= vocab.size() - 4)
      throw heed::FileError(path + ": " + vocab_key + " holds SentencePiece pieces (" + std::to_string(marked) +
                            " of its " + std::to_string(vocab.size()) + " tokens begin with \xe2\x96\x81) but " +
                            "the checkpoint has no " + model_key +
                            ": its SentencePiece models were removed, and words would be read as <unk>");
  }

#ifdef HEED_WITH_SENTENCEPIECE
  /// The vocabulary must be the model's pieces in id order: its size, the reserved ids,
  /// then every piece.
  static void check_pieces(const heed::SentencePiece& model, const heed::Vocab& vocab, const char* model_key,
                           const char* vocab_key, const std::string& path) {
    const std::string what = path + ": " + model_key + " does not match " + vocab_key + ": ";
    if (model.size() != vocab.size())
      throw heed::FileError(what + std::to_string(model.size()) + " pieces, vocabulary of " +
                            std::to_string(vocab.size()) + " tokens");
    for (index_t id = 0; id < 4; ++id) {
      const char* token = kReserved[id];
      if (!vocab.contains(token) || vocab[token] != id)
        throw heed::FileError(what + token + " is piece " + std::to_string(id) + " of the model, " +
                              (vocab.contains(token) ? "token " + std::to_string(vocab[token]) : "no token") +
                              " of the vocabulary");
    }
    const heed::Vocab pieces = model.vocab();
    for (index_t id = 4; id < vocab.size(); ++id)
      if (pieces.to_tokens(id) != vocab.to_tokens(id))
        throw heed::FileError(what + "piece " + std::to_string(id) + " is " + quoted(pieces.to_tokens(id)) +
                              ", token " + std::to_string(id) + " is " + quoted(vocab.to_tokens(id)) +
                              " (a model of another language or run)");
  }
#endif

#ifdef HEED_WITH_SENTENCEPIECE
  std::shared_ptr<const heed::SentencePiece> src_, tgt_;
#endif
};

/// A translator read back: the net (its parameters loaded), both vocabularies and the
/// tokens.
template <typename Net>
struct Loaded {
  std::unique_ptr<Net> net;
  std::unique_ptr<heed::Vocab> src_vocab, tgt_vocab;
  ModelConfig config;
  Tokenizers tokenizers;
};

/// Translates sentences (raw text: preprocess_nmt'ed, split, and made the model's tokens);
/// each translation's text is in d2l's words.
template <typename Net>
std::vector<heed::Translation<Float>> translate(Net& net, const Tokenizers& tokenizers,
                                                const std::vector<std::string>& sentences, const heed::Vocab& src_vocab,
                                                const heed::Vocab& tgt_vocab, index_t num_steps,
                                                const heed::PredictOptions& options) {
  std::vector<std::vector<std::string>> tokens;
  for (const std::string& s : sentences)
    tokens.push_back(tokenizers.source_tokens(heed::detail::split(heed::preprocess_nmt(s), ' ')));
  std::vector<heed::Translation<Float>> out =
      heed::predict_seq2seq_tokens<Float>(net, tokens, src_vocab, tgt_vocab, num_steps, options);
  if (tokenizers.subwords())
    for (auto& t : out) {
      for (auto& h : t.n_best) h.text = tokenizers.target_text(tgt_vocab.to_tokens(h.tokens));
      t.text = t.n_best.front().text;
    }
  return out;
}

// ---- a checkpoint's tensors against its metadata, before the net is built ----------------

inline const char* kind_of(const BahdanauNet*) { return "bahdanau"; }
inline const char* kind_of(const TransformerNet*) { return "transformer"; }

/// The parameters make_net makes for this config and these vocabulary sizes, counted
/// without making them, with a few of them by name and shape: those the config's sizes
/// determine, to name in an error.
struct NetLayout {
  std::uint64_t parameters = 0;
  std::vector<std::pair<std::string, std::vector<index_t>>> named;
};

/// net_layout's arguments: sizes as make_net takes them, which from_metadata bounds so
/// that no count overflows.
inline void check_layout_sizes(const ModelConfig& c, index_t src, index_t tgt) {
  if (c.num_hiddens < 1 || c.embed_size < 1 || c.ffn_num_hiddens < 1 || c.num_heads < 1 || c.num_kv_heads < 0 ||
      c.num_layers < 1 || src < 0 || tgt < 0)
    throw heed::ValueError(
        "net_layout: the sizes must be positive (num_kv_heads and the vocabularies' >= 0), got "
        "num_hiddens " +
        std::to_string(c.num_hiddens) + ", embed_size " + std::to_string(c.embed_size) + ", ffn_num_hiddens " +
        std::to_string(c.ffn_num_hiddens) + ", num_heads " + std::to_string(c.num_heads) + ", num_kv_heads " +
        std::to_string(c.num_kv_heads) + ", num_layers " + std::to_string(c.num_layers) + ", vocabularies " +
        std::to_string(src) + " / " + std::to_string(tgt));
}

inline NetLayout net_layout(const ModelConfig& c, index_t src, index_t tgt, const TransformerNet*) {
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

inline NetLayout net_layout(const ModelConfig& c, index_t src, index_t tgt, const BahdanauNet*) {
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

/// The most parameters load_translator builds a net of: 2^31 floats are 8 GB, and a
/// training checkpoint's Adam state as much again twice.
inline constexpr std::uint64_t kMaxParameters = std::uint64_t(1) << 31;

/// Compares the file's tensors (from its header: nothing of them is read) with the net
/// its metadata describes, before that net is built: a metadata that claims a net of
/// 17 GB is refused here, not after the allocation. Throws FileError naming the file and
/// the tensor, or the counts.
template <typename Net>
void check_tensors_fit(const heed::SafetensorsHeader& header, const ModelConfig& config, const heed::Vocab& src,
                       const heed::Vocab& tgt, const std::string& path) {
  check_layout_sizes(config, src.size(), tgt.size());
  // What make_net would refuse with a ValueError that does not name the file.
  if (std::is_same_v<Net, TransformerNet>) {
    if (config.num_hiddens % config.num_heads != 0)
      throw heed::FileError(path + ": num_heads " + std::to_string(config.num_heads) + " does not divide num_hiddens " +
                            std::to_string(config.num_hiddens));
    if (config.num_kv_heads > 0 && config.num_heads % config.num_kv_heads != 0)
      throw heed::FileError(path + ": num_kv_heads " + std::to_string(config.num_kv_heads) +
                            " does not divide num_heads " + std::to_string(config.num_heads));
  }
  const NetLayout layout = net_layout(config, src.size(), tgt.size(), static_cast<const Net*>(nullptr));
  const std::uint64_t memory = heed::detail::physical_memory_bytes();
  const std::uint64_t bytes = layout.parameters * sizeof(Float);
  if (layout.parameters > kMaxParameters || (memory > 0 && bytes > memory))
    throw heed::FileError(path + ": its metadata describes a " + kind_of(static_cast<const Net*>(nullptr)) + " of " +
                          std::to_string(layout.parameters) + " parameters (vocabularies " +
                          std::to_string(src.size()) + " / " + std::to_string(tgt.size()) + ", num_hiddens " +
                          std::to_string(config.num_hiddens) + "), more than " +
                          (layout.parameters > kMaxParameters ? "the 2^31 a translator may have"
                                                              : "this machine's " + std::to_string(memory) + " bytes"));
  for (const auto& [name, shape] : layout.named) {
    const auto it = header.tensors.find(name);
    if (it == header.tensors.end())
      throw heed::FileError(path + ": has no tensor '" + name + "', which the " +
                            kind_of(static_cast<const Net*>(nullptr)) + " its metadata describes has");
    if (it->second.shape != shape)
      throw heed::FileError(path + ": tensor '" + name + "' has shape " + heed::detail::format_shape(it->second.shape) +
                            ", but the model its metadata describes (vocabularies " + std::to_string(src.size()) +
                            " / " + std::to_string(tgt.size()) + " tokens, num_hiddens " +
                            std::to_string(config.num_hiddens) + ") has " + heed::detail::format_shape(shape));
  }
  // The parameters' tensors, not Adam's moments of a training checkpoint.
  std::uint64_t in_file = 0;
  for (const auto& [name, info] : header.tensors) {
    if (name.rfind("optimizer.", 0) == 0) continue;
    std::uint64_t n = 1;
    for (const index_t d : info.shape) n *= static_cast<std::uint64_t>(d);  // the reader checked the product fits
    in_file += n;
  }
  if (in_file != layout.parameters)
    throw heed::FileError(path + ": its tensors hold " + std::to_string(in_file) + " parameters, but the " +
                          kind_of(static_cast<const Net*>(nullptr)) + " its metadata describes has " +
                          std::to_string(layout.parameters));
}

/// A vocabulary of the metadata (one token per line), FileError naming the file and key.
inline std::unique_ptr<heed::Vocab> vocab_of(const std::map<std::string, std::string>& metadata, const char* key,
                                             const std::string& path) {
  const auto it = metadata.find(key);
  if (it == metadata.end())
    throw heed::FileError(path + ": not a translator checkpoint (no '" + key + "' in its metadata)");
  try {
    return std::make_unique<heed::Vocab>(heed::Vocab::from_idx_to_token(split_lines(it->second)));
  } catch (const heed::ValueError& e) {
    throw heed::FileError(path + ": " + key + ": " + e.what());
  }
}

/// Loads a checkpoint that translate --save or train_translator wrote (a training
/// checkpoint too: its optimizer state is read and dropped). Everything the metadata
/// says is checked before the net is built: the kind (Net's), the sizes, the
/// vocabularies, the SentencePiece models against them, and the file's tensors' shapes
/// and count against the net the sizes describe. Throws FileError naming the file.
template <typename Net>
Loaded<Net> load_translator(const std::string& path) {
  const heed::SafetensorsHeader header = heed::read_safetensors_header(path);
  const auto& metadata = header.metadata;
  Loaded<Net> loaded;
  loaded.config = ModelConfig::from_metadata(metadata, path);
  const char* kind = kind_of(static_cast<const Net*>(nullptr));
  if (loaded.config.model != kind)
    throw heed::FileError(path + ": holds a " + loaded.config.model + " model, not a " + kind + " one");
  loaded.src_vocab = vocab_of(metadata, "src_vocab", path);
  loaded.tgt_vocab = vocab_of(metadata, "tgt_vocab", path);
  loaded.tokenizers = Tokenizers::from_metadata(metadata, path);
  loaded.tokenizers.check_vocabularies(*loaded.src_vocab, *loaded.tgt_vocab, path);
  check_tensors_fit<Net>(header, loaded.config, *loaded.src_vocab, *loaded.tgt_vocab, path);
  loaded.net = make_net(loaded.config, *loaded.src_vocab, *loaded.tgt_vocab, static_cast<Net*>(nullptr));
  if (metadata.count("heed.adam.steps")) {
    heed::Adam<Float> dropped(loaded.net->parameters());
    heed::load_training_checkpoint(*loaded.net, dropped, path);
  } else {
    heed::load_checkpoint(*loaded.net, path);
  }
  return loaded;
}

/// Each distinct English sentence of a list of pairs, with every French line it has.
struct References {
  std::vector<std::string> sources;
  std::vector<std::vector<std::string>> references;
};

inline References group_references(const heed::NmtTokens& pairs) {
  References out;
  std::map<std::string, std::size_t> index_of;
  for (std::size_t i = 0; i < pairs.source.size(); ++i) {
    const auto [it, is_new] = index_of.emplace(join_words(pairs.source[i]), out.sources.size());
    if (is_new) {
      out.sources.push_back(it->first);
      out.references.emplace_back();
    }
    out.references[it->second].push_back(join_words(pairs.target[i]));
  }
  return out;
}

struct Scored {
  std::vector<std::string> hypotheses;
  heed::CorpusBleu bleu;
  double seconds = 0.0;
};

/// Translates every source in batches of 128 and scores the translations against their
/// references with corpus BLEU-4.
template <typename Net>
Scored translate_and_score(Net& net, const Tokenizers& tokenizers, const References& refs, const heed::Vocab& src_vocab,
                           const heed::Vocab& tgt_vocab, index_t num_steps, const heed::PredictOptions& options) {
  constexpr std::size_t kDecodeBatch = 128;
  Scored out;
  const auto start = std::chrono::steady_clock::now();
  {
    const heed::PackedWeightsGuard packed_weights;  // packed once for every batch
    for (std::size_t b = 0; b < refs.sources.size(); b += kDecodeBatch) {
      const std::vector<std::string> batch(
          refs.sources.begin() + static_cast<long>(b),
          refs.sources.begin() + static_cast<long>(std::min(refs.sources.size(), b + kDecodeBatch)));
      for (const auto& t : translate(net, tokenizers, batch, src_vocab, tgt_vocab, num_steps, options))
        out.hypotheses.push_back(t.text);
    }
  }
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  out.bleu = heed::corpus_bleu(out.hypotheses, refs.references);
  return out;
}

// ---- resuming train_translator ------------------------------------------------------------

/// Where a run resumed from train_translator's last.safetensors goes on: what its
/// metadata says the run before had done.
struct ResumePoint {
  index_t epochs_done = 0, steps_done = 0;
  index_t epoch_batches_done = 0;  // of epoch epochs_done + 1, where --max-steps stopped it; 0: none
  double best_bleu = -1.0;         // the best validation BLEU so far; -1: none yet
  std::string loader_generator, default_generator;
};

/// A count as train_translator writes it (std::to_string): decimal digits alone, no
/// sign, exponent, fraction or space, within index_t. strtod would read "0.5" or "1e15".
inline bool parse_count(const std::string& text, index_t& out) {
  if (text.empty()) return false;
  index_t value = 0;
  for (const char c : text) {
    if (c < '0' || c > '9') return false;
    const index_t digit = c - '0';
    if (value > (std::numeric_limits<index_t>::max() - digit) / 10) return false;
    value = value * 10 + digit;
  }
  out = value;
  return true;
}

/// Reads the resume point of a last.safetensors' metadata (read_safetensors_metadata's),
/// changing nothing: each key present, the counts exact (parse_count), best_bleu a
/// finite number in [-1, 100], the generators' states states. Throws FileError naming
/// `path`, the key and its text.
inline ResumePoint read_resume_point(const std::map<std::string, std::string>& metadata, const std::string& path) {
  const auto field = [&](const char* key) -> const std::string& {
    const auto it = metadata.find(key);
    if (it == metadata.end())
      throw heed::FileError(path + ": no '" + key +
                            "' in its metadata: not a train_translator last.safetensors (--resume takes the "
                            "training checkpoint, not best.safetensors)");
    return it->second;
  };
  const auto bad = [&](const char* key, const std::string& text, const std::string& what) {
    return heed::FileError(path + ": metadata '" + key + "' is " + quoted(text) + ", not " + what);
  };
  const auto count = [&](const char* key) {
    index_t value = 0;
    if (!parse_count(field(key), value))
      throw bad(key, field(key),
                "a count (decimal digits, at most " + std::to_string(std::numeric_limits<index_t>::max()) + ")");
    return value;
  };
  const auto state = [&](const char* key) {
    const std::string& text = field(key);
    try {
      heed::Generator probe;
      probe.set_state(text);
    } catch (const heed::ValueError& e) {
      throw bad(key, text, std::string("a generator's state: ") + e.what());
    }
    return text;
  };
  ResumePoint point;
  point.epochs_done = count("epochs_done");
  point.steps_done = count("steps_done");
  if (metadata.count("epoch_batches_done")) point.epoch_batches_done = count("epoch_batches_done");
  const std::string& bleu = field("best_bleu");
  char* end = nullptr;
  point.best_bleu = std::strtod(bleu.c_str(), &end);
  // strtod also reads " 5", "inf", "nan" and hexadecimal: only what operator<< writes.
  const bool plain = !bleu.empty() && bleu.find_first_not_of("0123456789+-.eE") == std::string::npos;
  if (!plain || *end != '\0' || !(point.best_bleu >= -1.0 && point.best_bleu <= 100.0))
    throw bad("best_bleu", bleu, "a BLEU score from -1 (none yet) to 100");
  point.loader_generator = state("loader_generator");
  point.default_generator = state("default_generator");
  return point;
}

/// What the resumed run allows.
struct ResumeLimits {
  index_t epochs = 0;           // --epochs: the last epoch of the run
  index_t epoch_batches = 0;    // the batches of the epoch it resumes in (epochs_done + 1)
  index_t max_epoch_steps = 0;  // the most optimiser steps an epoch can take: one per training pair
};

/// Checks a resume point against the run's limits: no more epochs done than --epochs
/// (refused, not taken as a finished run: the command line is likely not the one
/// meant), a batch of the epoch it resumes in, and as many steps as those epochs and
/// batches can have taken. Throws FileError naming `path`, the key and its value.
inline void check_resume_point(const ResumePoint& p, const ResumeLimits& limits, const std::string& path) {
  const auto refuse = [&](const char* key, index_t value, const std::string& why) {
    throw heed::FileError(path + ": metadata '" + key + "' is " + std::to_string(value) + ", " + why);
  };
  if (limits.epochs < 0 || limits.epoch_batches < 1 || limits.max_epoch_steps < 1)
    throw heed::ValueError(
        "check_resume_point: the limits must be epochs >= 0, epoch_batches >= 1 and "
        "max_epoch_steps >= 1, got " +
        std::to_string(limits.epochs) + ", " + std::to_string(limits.epoch_batches) + " and " +
        std::to_string(limits.max_epoch_steps));
  for (const auto& [key, value] : {std::pair{"epochs_done", p.epochs_done}, std::pair{"steps_done", p.steps_done},
                                   std::pair{"epoch_batches_done", p.epoch_batches_done}})
    if (value < 0) refuse(key, value, "not a count");
  if (p.epochs_done > limits.epochs)
    refuse("epochs_done", p.epochs_done,
           "more than this run's --epochs " + std::to_string(limits.epochs) +
               ": refused, not taken as done (give --epochs " + std::to_string(p.epochs_done) + " or more)");
  if (p.epoch_batches_done > 0 && p.epochs_done == limits.epochs)
    refuse("epoch_batches_done", p.epoch_batches_done,
           "batches of epoch " + std::to_string(p.epochs_done + 1) + ", past this run's --epochs " +
               std::to_string(limits.epochs) + " (give --epochs " + std::to_string(p.epochs_done + 1) + " or more)");
  if (p.epoch_batches_done >= limits.epoch_batches)
    refuse("epoch_batches_done", p.epoch_batches_done,
           "but epoch " + std::to_string(p.epochs_done + 1) + " of this run has " +
               std::to_string(limits.epoch_batches) + " batches: it would be skipped, not resumed");
  // Each epoch takes a step at least, and at most one a batch, as does the epoch stopped
  // in its middle (the product saturates: epochs_done <= --epochs keeps it small anyway).
  constexpr index_t kMax = std::numeric_limits<index_t>::max();
  const index_t per_epoch = limits.max_epoch_steps;
  const index_t epochs = p.epochs_done > 0 && per_epoch > kMax / p.epochs_done ? kMax : p.epochs_done * per_epoch;
  const index_t most = epochs > kMax - p.epoch_batches_done ? kMax : epochs + p.epoch_batches_done;
  if (p.steps_done < p.epochs_done || p.steps_done > most)
    refuse("steps_done", p.steps_done,
           "but " + std::to_string(p.epochs_done) + " epochs and " + std::to_string(p.epoch_batches_done) +
               " batches take from " + std::to_string(p.epochs_done) + " to " + std::to_string(most) + " steps (" +
               std::to_string(per_epoch) + " an epoch at most: one a training pair)");
}

}  // namespace translator
