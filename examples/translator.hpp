// examples/translator.hpp — what translate and train_translator share: a model's
// hyper-parameters as a checkpoint's metadata, the net built from them, its tokens (d2l's
// words, or SentencePiece's pieces kept in the checkpoint), a checkpoint loaded as a
// translator, and the scoring of a file of pairs (corpus BLEU).
#pragma once

#include <heed/heed.hpp>
#include <heed/io/base64.hpp>
#include <heed/io/checkpoint.hpp>
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
#include <cstdlib>
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
    // would not fit before its tensors are even compared with the net's.
    const auto number = [&](const char* key, auto& field, double max) {
      const auto it = metadata.find(key);
      if (it == metadata.end()) return;
      char* end = nullptr;
      const double value = std::strtod(it->second.c_str(), &end);
      if (it->second.empty() || *end != '\0' || !(value >= 0.0 && value <= max)) {
        std::ostringstream message;
        message << path << ": metadata '" << key << "' is not a number from 0 to " << max << ": '"
                << it->second.substr(0, 40) << "'";
        throw heed::FileError(message.str());
      }
      field = static_cast<std::remove_reference_t<decltype(field)>>(value);
    };
    if (const auto it = metadata.find("heed.model"); it != metadata.end()) config.model = it->second;
    if (config.model != "transformer" && config.model != "bahdanau")
      throw heed::FileError(path + ": holds a model of kind '" + config.model + "', not transformer or bahdanau");
    number("num_hiddens", config.num_hiddens, 1 << 16);
    number("embed_size", config.embed_size, 1 << 16);
    number("ffn_num_hiddens", config.ffn_num_hiddens, 1 << 18);
    number("num_heads", config.num_heads, 1 << 10);
    number("num_kv_heads", config.num_kv_heads, 1 << 10);
    number("num_layers", config.num_layers, 256);
    number("num_steps", config.num_steps, 4096);
    number("dropout", config.dropout, 0.99);
    number("embedding_scale", config.embedding_scale, 1e6);
    index_t norm_first = 0;
    number("norm_first", norm_first, 1);
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

/// How a model's sentences become its tokens and back: d2l's words, or the pieces of the
/// SentencePiece models a checkpoint holds (train_translator --sentencepiece N, in a build
/// with HEED_WITH_SENTENCEPIECE), base64 in its metadata under heed.src_spm / heed.tgt_spm.
class Tokenizers {
 public:
  static constexpr const char* kSourceKey = "heed.src_spm";
  static constexpr const char* kTargetKey = "heed.tgt_spm";

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

  /// The models a checkpoint's metadata holds, if any.
  static Tokenizers from_metadata(const std::map<std::string, std::string>& metadata, const std::string& path) {
    const auto src = metadata.find(kSourceKey), tgt = metadata.find(kTargetKey);
    if (src == metadata.end() && tgt == metadata.end()) return {};
    if (src == metadata.end() || tgt == metadata.end())
      throw heed::FileError(path + ": holds one SentencePiece model of two (" + kSourceKey + ", " + kTargetKey + ")");
#ifdef HEED_WITH_SENTENCEPIECE
    Tokenizers t;
    const auto model = [&](const std::string& key, const std::string& text) {
      const std::string what = path + ": " + key;
      return std::make_shared<const heed::SentencePiece>(
          heed::SentencePiece::from_serialized(heed::base64_decode(text, what), what));
    };
    t.src_ = model(kSourceKey, src->second);
    t.tgt_ = model(kTargetKey, tgt->second);
    return t;
#else
    throw heed::FileError(path + ": a model of SentencePiece tokens, which this build cannot read (configure with " +
                          "-DHEED_WITH_SENTENCEPIECE=ON)");
#endif
  }

  /// The models as metadata (nothing for words).
  std::map<std::string, std::string> metadata() const {
#ifdef HEED_WITH_SENTENCEPIECE
    if (subwords())
      return {{kSourceKey, heed::base64_encode(src_->serialized())},
              {kTargetKey, heed::base64_encode(tgt_->serialized())}};
#endif
    return {};
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

/// Loads a checkpoint that translate --save or train_translator wrote (a training
/// checkpoint too: its optimizer state is read and dropped).
template <typename Net>
Loaded<Net> load_translator(const std::string& path) {
  const auto metadata = heed::read_safetensors_metadata(path);
  const auto field = [&](const std::string& key) {
    const auto it = metadata.find(key);
    if (it == metadata.end())
      throw heed::FileError(path + ": not a translator checkpoint (no '" + key + "' in its metadata)");
    return it->second;
  };
  Loaded<Net> loaded;
  loaded.config = ModelConfig::from_metadata(metadata, path);
  loaded.tokenizers = Tokenizers::from_metadata(metadata, path);
  loaded.src_vocab = std::make_unique<heed::Vocab>(heed::Vocab::from_idx_to_token(split_lines(field("src_vocab"))));
  loaded.tgt_vocab = std::make_unique<heed::Vocab>(heed::Vocab::from_idx_to_token(split_lines(field("tgt_vocab"))));
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

}  // namespace translator
