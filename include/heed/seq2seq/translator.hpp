// heed/seq2seq/translator.hpp — a translator as one object: its net (d2l's Bahdanau model
// or Transformer, heed/seq2seq/translator_nets.hpp), its vocabularies and tokens (d2l's
// words, or SentencePiece's pieces: heed/seq2seq/tokenizers.hpp) and its configuration,
// saved and loaded as one safetensors checkpoint (what translate --save and
// train_translator write), translating raw sentences and scoring a file of pairs.
//
//   auto translator = heed::Translator::load("best.safetensors");
//   heed::PredictOptions options;
//   options.beam_size = 4;
//   for (const auto& t : translator.translate({"i'm calm .", "go ."}, options)) std::cout << t.text << "\n";
//   auto refs = heed::group_references(heed::tokenize_nmt(heed::preprocess_nmt(heed::read_data_nmt("valid.txt"))));
//   std::cout << translator.evaluate(refs, options).bleu.to_string() << "\n";   // corpus BLEU-4
//
// Loading checks everything the metadata says before the net is built: the kind, the
// sizes, the vocabularies, the SentencePiece models against them, and the file's tensors'
// shapes and count against the net the sizes describe (a file claiming a net of 17 GB is
// refused before anything is allocated). Every refusal is a FileError naming the file.
//
// Like tokenizers.hpp (on which it rests), this header is left out of heed.hpp.
#pragma once

#include "heed/detail/header_begin.hpp"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <utility>
#include <variant>
#include <vector>

// All of heed first: under HEED_COMPILED (heed::compiled) heed.hpp ends with the extern
// template declarations, which a program including this header alone would otherwise
// miss, compiling every op and loop the translator touches anew (90 s for translate.cpp).
#include "heed/heed.hpp"
#include "heed/io/checkpoint.hpp"
#include "heed/io/training_checkpoint.hpp"
#include "heed/ops/packed_gemm.hpp"
#include "heed/seq2seq/alignment.hpp"
#include "heed/seq2seq/bleu.hpp"
#include "heed/seq2seq/predict.hpp"
#include "heed/seq2seq/tokenizers.hpp"
#include "heed/seq2seq/train.hpp"
#include "heed/seq2seq/translator_nets.hpp"
#include "heed/viz/heatmap.hpp"

namespace heed {

/// Translates sentences (raw text: preprocess_nmt'ed, split, and made the model's tokens)
/// with a net of either kind; each translation's text is in d2l's words.
template <typename Net>
std::vector<Translation<float>> translate_sentences(Net& net, const Tokenizers& tokenizers,
                                                    const std::vector<std::string>& sentences, const Vocab& src_vocab,
                                                    const Vocab& tgt_vocab, index_t num_steps,
                                                    const PredictOptions& options) {
  std::vector<std::vector<std::string>> tokens;
  for (const std::string& s : sentences)
    tokens.push_back(tokenizers.source_tokens(detail::split(preprocess_nmt(s), ' ')));
  std::vector<Translation<float>> out =
      predict_seq2seq_tokens<float>(net, tokens, src_vocab, tgt_vocab, num_steps, options);
  if (tokenizers.subwords())
    for (auto& t : out) {
      for (auto& h : t.n_best) h.text = tokenizers.target_text(tgt_vocab.to_tokens(h.tokens));
      t.text = t.n_best.front().text;
    }
  return out;
}

/// Each distinct English sentence of a list of pairs, with every French line it has: what
/// corpus BLEU scores a translation of it against.
struct References {
  std::vector<std::string> sources;
  std::vector<std::vector<std::string>> references;
};

inline References group_references(const NmtTokens& pairs) {
  References out;
  std::map<std::string, std::size_t> index_of;
  for (std::size_t i = 0; i < pairs.source.size(); ++i) {
    const auto [it, is_new] = index_of.emplace(detail::join_words(pairs.source[i]), out.sources.size());
    if (is_new) {
      out.sources.push_back(it->first);
      out.references.emplace_back();
    }
    out.references[it->second].push_back(detail::join_words(pairs.target[i]));
  }
  return out;
}

/// The translations of References' sources, their corpus BLEU-4 and the seconds decoding took.
struct Scored {
  std::vector<std::string> hypotheses;
  CorpusBleu bleu;
  double seconds = 0.0;
};

/// Translates every source in batches of 128 and scores the translations against their
/// references with corpus BLEU-4.
template <typename Net>
Scored translate_and_score(Net& net, const Tokenizers& tokenizers, const References& refs, const Vocab& src_vocab,
                           const Vocab& tgt_vocab, index_t num_steps, const PredictOptions& options) {
  HEED_CHECK(refs.sources.size() == refs.references.size(), ValueError, "translate_and_score: ", refs.sources.size(),
             " sources but ", refs.references.size(), " lists of references");
  constexpr std::size_t kDecodeBatch = 128;
  Scored out;
  const auto start = std::chrono::steady_clock::now();
  {
    const PackedWeightsGuard packed_weights;  // packed once for every batch
    for (std::size_t b = 0; b < refs.sources.size(); b += kDecodeBatch) {
      const std::vector<std::string> batch(
          refs.sources.begin() + static_cast<long>(b),
          refs.sources.begin() + static_cast<long>(std::min(refs.sources.size(), b + kDecodeBatch)));
      for (const auto& t : translate_sentences(net, tokenizers, batch, src_vocab, tgt_vocab, num_steps, options))
        out.hypotheses.push_back(t.text);
    }
  }
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  out.bleu = corpus_bleu(out.hypotheses, refs.references);
  return out;
}

/// A translation among the worst of a Scored: d2l's BLEU (k = 2) against its best-matching
/// reference, which one that is, and the sentence's index in References.
struct WorstTranslation {
  double bleu = 0.0;
  std::size_t sentence = 0, reference = 0;
};

/// The `count` translations of `scored` with the lowest d2l BLEU (k = 2) against their
/// best-matching reference, lowest first.
inline std::vector<WorstTranslation> worst_translations(const Scored& scored, const References& refs,
                                                        std::size_t count) {
  HEED_CHECK(scored.hypotheses.size() == refs.sources.size() && refs.references.size() == refs.sources.size(),
             ValueError, "worst_translations: ", scored.hypotheses.size(), " translations of ", refs.sources.size(),
             " sources with ", refs.references.size(), " lists of references");
  std::vector<std::pair<double, std::size_t>> scores;
  std::vector<std::size_t> best_reference(refs.sources.size(), 0);
  for (std::size_t i = 0; i < refs.sources.size(); ++i) {
    double best = -1.0;
    for (std::size_t r = 0; r < refs.references[i].size(); ++r) {
      const double score = bleu(scored.hypotheses[i], refs.references[i][r], 2);
      if (score > best) best = score, best_reference[i] = r;
    }
    scores.emplace_back(best, i);
  }
  const auto shown = std::min(scores.size(), count);
  std::partial_sort(scores.begin(), scores.begin() + static_cast<long>(shown), scores.end());
  std::vector<WorstTranslation> out;
  for (std::size_t k = 0; k < shown; ++k)
    out.push_back({scores[k].first, scores[k].second, best_reference[scores[k].second]});
  return out;
}

namespace detail {

/// A sentence as a piece of a file name: its tokens (a final <eos> left out) lowercased,
/// ASCII letters and digits kept, every run of anything else one '-', no '-' at either
/// end, at most max_chars characters; "sentence" when nothing is left ("he's calm ." →
/// "he-s-calm").
inline std::string sentence_slug(const std::vector<std::string>& tokens, std::size_t max_chars = 40) {
  std::string out;
  const std::size_t words = !tokens.empty() && tokens.back() == "<eos>" ? tokens.size() - 1 : tokens.size();
  for (std::size_t i = 0; i < words; ++i)
    for (const char c : tokens[i] + " ") {
      const auto u = static_cast<unsigned char>(c);
      if (u < 0x80 && std::isalnum(u))
        out += static_cast<char>(std::tolower(u));
      else if (!out.empty() && out.back() != '-')
        out += '-';
    }
  if (out.size() > max_chars) out.resize(max_chars);
  while (!out.empty() && out.back() == '-') out.pop_back();
  return out.empty() ? "sentence" : out;
}

/// save_attention_heatmaps with the output tokens' strings (without <eos>) given.
template <typename T>
std::vector<std::string> save_attention_heatmaps(const Translation<T>& t, const std::vector<std::string>& output,
                                                 const std::string& dir, std::size_t index) {
  HEED_CHECK(!dir.empty(), ValueError, "save_attention_heatmaps: the directory is empty");
  const auto check_shape = [](const Tensor<T>& w, const char* what) {
    HEED_CHECK(w.shape().rank() == 4, ShapeError, "save_attention_heatmaps: the ", what,
               " must be (num_layers, num_heads, num_queries, num_keys), got shape ", to_string(w.shape()));
  };
  // Keys or queries over the source: its first n tokens, <eos> included when within them.
  const auto source = [&](index_t n, const char* what) {
    HEED_CHECK(n <= static_cast<index_t>(t.source_tokens.size()), ValueError, "save_attention_heatmaps: the ", what,
               " covers ", n, " source steps, but the translation has ", t.source_tokens.size(),
               " source tokens (<eos> included)");
    return std::vector<std::string>(t.source_tokens.begin(), t.source_tokens.begin() + static_cast<long>(n));
  };
  // Queries of the decoder: the token each step emitted, "<eos>" for the step that ended it.
  const auto emitted = [&](index_t n, const char* what) {
    const auto m = static_cast<index_t>(output.size());
    HEED_CHECK(n == m || n == m + 1, ValueError, "save_attention_heatmaps: the ", what, " has ", n,
               " output steps for a translation of ", m, " tokens (", m, ", or ", m + 1, " with <eos>, expected)");
    std::vector<std::string> labels(output.begin(), output.begin() + static_cast<long>(std::min(n, m)));
    if (n > m) labels.push_back("<eos>");
    return labels;
  };

  // Every picture's labels are checked before the first file is written.
  std::vector<std::pair<const Tensor<T>*, std::string>> plots;
  std::vector<HeatmapOptions> plot_options;
  const auto add = [&](const Tensor<T>& w, const std::string& name, HeatmapOptions options) {
    const bool one = w.shape()[0] == 1 && w.shape()[1] == 1;
    for (index_t l = 1; !one && l <= w.shape()[0]; ++l) options.row_titles.push_back("layer " + std::to_string(l));
    for (index_t h = 1; !one && h <= w.shape()[1]; ++h) options.titles.push_back("head " + std::to_string(h));
    options.figsize = one ? std::pair<double, double>{3.5, 3.5} : std::pair<double, double>{7.0, 3.5};
    plots.emplace_back(&w, name);
    plot_options.push_back(std::move(options));
  };
  const auto defined = [](const Tensor<T>& w) { return w.defined() && w.numel() > 0; };
  if (defined(t.encoder_attention)) {
    const Tensor<T>& w = t.encoder_attention;
    check_shape(w, "encoder self-attention");
    HeatmapOptions options;
    options.xlabel = "Keys (source)", options.ylabel = "Queries (source)";
    options.xticklabels = source(w.shape()[3], "encoder self-attention");
    options.yticklabels = source(w.shape()[2], "encoder self-attention");
    add(w, "encoder_self_attention", options);
  }
  if (defined(t.self_attention)) {
    const Tensor<T>& w = t.self_attention;
    check_shape(w, "decoder self-attention");
    HEED_CHECK(w.shape()[3] == w.shape()[2], ValueError,
               "save_attention_heatmaps: the decoder self-attention must be square, got shape ", to_string(w.shape()));
    HeatmapOptions options;
    options.xlabel = "Keys (inputs)", options.ylabel = "Queries (output)";
    options.yticklabels = emitted(w.shape()[2], "decoder self-attention");
    // Step s reads <bos> then the tokens emitted before it: the keys are those inputs.
    options.xticklabels = {"<bos>"};
    for (index_t k = 1; k < w.shape()[3]; ++k)
      options.xticklabels.push_back(options.yticklabels[static_cast<std::size_t>(k - 1)]);
    add(w, "decoder_self_attention", options);
  }
  if (defined(t.cross_attention)) {
    const Tensor<T>& w = t.cross_attention;
    check_shape(w, "encoder-decoder attention");
    HeatmapOptions options;
    options.xlabel = "Keys (source)", options.ylabel = "Queries (output)";
    options.xticklabels = source(w.shape()[3], "encoder-decoder attention");
    options.yticklabels = emitted(w.shape()[2], "encoder-decoder attention");
    add(w, t.self_attention.defined() ? "encoder_decoder_attention" : "bahdanau_alignment", options);
  }

  try {
    std::filesystem::create_directories(dir);
  } catch (const std::filesystem::filesystem_error& e) {
    throw FileError("save_attention_heatmaps: cannot create the directory '" + dir + "': " + e.code().message());
  }
  const std::string stem = dir + "/" + std::to_string(index + 1) + "_" + sentence_slug(t.source_tokens) + "_";
  std::vector<std::string> written;
  for (std::size_t i = 0; i < plots.size(); ++i) {
    written.push_back(stem + plots[i].second + ".svg");
    show_heatmaps(*plots[i].first, plot_options[i]).save(written.back());
  }
  return written;
}

}  // namespace detail

/// Writes the attention heatmaps of translation `index` (0-based) of a batch as SVG files
/// DIR/<index + 1>_<sentence>_<which>.svg (creating DIR), <sentence> being the source
/// sentence as detail::sentence_slug writes it ("2_i-lost_encoder_decoder_attention.svg"):
/// the encoder's and the decoder's self-attention where the net has them, and the
/// encoder-decoder attention (the Bahdanau model's alignment, "bahdanau_alignment").
/// Axes carry the tokens: source tokens (with <eos> where the weights cover it) for the
/// encoder's queries and every source key, the emitted tokens (then "<eos>" when one
/// ended the translation) for the decoder's queries, and the decoder's inputs ("<bos>"
/// and the tokens before) for its self-attention's keys; grids of several layers or heads
/// name their rows "layer 1", ... and columns "head 1", .... Returns the paths written.
/// Throws ValueError when the tokens do not match the weights' shapes, FileError when DIR
/// cannot be made.
template <typename T>
std::vector<std::string> save_attention_heatmaps(const Translation<T>& t, const Vocab& tgt_vocab,
                                                 const std::string& dir, std::size_t index) {
  std::vector<std::string> output;
  for (const index_t id : t.tokens) {
    HEED_CHECK(id >= 0 && id < tgt_vocab.size(), ValueError, "save_attention_heatmaps: token id ", id,
               " is not in the target vocabulary of ", tgt_vocab.size(), " tokens");
    output.push_back(tgt_vocab.to_tokens(id));
  }
  return detail::save_attention_heatmaps(t, output, dir, index);
}

/// The same for a word model (d2l's tokens), whose text is its tokens joined by spaces: the
/// output tokens are the text's words. A subword model's text is detokenised, so this
/// throws ValueError when the words do not number the tokens: pass the target
/// vocabulary then.
template <typename T>
std::vector<std::string> save_attention_heatmaps(const Translation<T>& t, const std::string& dir, std::size_t index) {
  const std::vector<std::string> words = t.text.empty() ? std::vector<std::string>{} : detail::split(t.text, ' ');
  HEED_CHECK(words.size() == t.tokens.size(), ValueError, "save_attention_heatmaps: the text '", t.text.substr(0, 60),
             "' has ", words.size(), " words for ", t.tokens.size(),
             " tokens (a subword model's?); pass the target vocabulary: save_attention_heatmaps(t, tgt_vocab, dir, "
             "index)");
  return detail::save_attention_heatmaps(t, words, dir, index);
}

/// The word alignment of a translation in Pharaoh's "i-j" links (heed/seq2seq/alignment.hpp),
/// from its encoder-decoder attention over the words of both sides (the <eos> steps cut
/// off); "" for a translation without weights or tokens.
template <typename T>
std::string word_alignment(const Translation<T>& t) {
  if (!t.cross_attention.defined() || t.tokens.empty()) return "";
  const index_t source_words = static_cast<index_t>(t.source_tokens.size()) - 1;
  const Tensor<T> words = narrow(narrow(t.cross_attention, 2, 0, static_cast<index_t>(t.tokens.size())), 3, 0,
                                 std::min(source_words, t.cross_attention.shape()[3]));
  return pharaoh(align(words));
}

/// What data-parallel ranks compare of the data they train on (dist::check_same_settings):
/// the pairs read, as the loader's index tensors in their first order, and the
/// vocabularies' tokens, as "600 pairs, vocabularies 184 / 201, FNV-1a <hash>".
inline std::string describe_nmt_data(const NmtData& data) {
  std::uint64_t hash = dist::kFnv1aOffset;
  for (index_t i = 0; i < data.data_iter.num_batches(); ++i)
    hash = detail::batch_fingerprint(data.data_iter.batch(i), hash);
  for (const Vocab* vocab : {&data.src_vocab, &data.tgt_vocab})
    for (const std::string& token : vocab->idx_to_token()) hash = dist::fnv1a(token.c_str(), token.size() + 1, hash);
  std::ostringstream out;
  out << data.data_iter.num_examples() << " pairs, vocabularies " << data.src_vocab.size() << " / "
      << data.tgt_vocab.size() << ", FNV-1a " << std::hex << hash;
  return out.str();
}

/// A net of either kind, its vocabularies, tokens and configuration: see the top of this file.
class Translator {
 public:
  using Net = std::variant<std::unique_ptr<BahdanauNet<float>>, std::unique_ptr<TransformerNet<float>>>;

  /// A new translator: the net config.model names, of the vocabularies' sizes, its weights
  /// drawn from `gen` (default_generator() when null).
  Translator(TranslatorConfig config, Vocab src_vocab, Vocab tgt_vocab, Tokenizers tokenizers = {},
             Generator* gen = nullptr)
      : config_(std::move(config)),
        src_vocab_(std::move(src_vocab)),
        tgt_vocab_(std::move(tgt_vocab)),
        tokenizers_(std::move(tokenizers)),
        net_(make_net(config_, src_vocab_.size(), tgt_vocab_.size(), gen)) {}

  /// Calls f(net) with the net as its own type (BahdanauNet<float> or TransformerNet<float>).
  template <typename F>
  decltype(auto) visit(F&& f) {
    return std::visit([&](auto& net) -> decltype(auto) { return f(*net); }, net_);
  }
  template <typename F>
  decltype(auto) visit(F&& f) const {
    return std::visit([&](const auto& net) -> decltype(auto) { return f(std::as_const(*net)); }, net_);
  }

  /// The net config.model names ("transformer" or "bahdanau"; ValueError otherwise).
  static Net make_net(const TranslatorConfig& config, index_t src_vocab_size, index_t tgt_vocab_size,
                      Generator* gen = nullptr) {
    if (config.model == "transformer") return make_transformer_net<float>(config, src_vocab_size, tgt_vocab_size, gen);
    if (config.model == "bahdanau") return make_bahdanau_net<float>(config, src_vocab_size, tgt_vocab_size, gen);
    throw ValueError("Translator: the model must be transformer or bahdanau, got '" + config.model.substr(0, 40) + "'");
  }

  /// Loads a checkpoint that translate --save, train_translator or save() wrote (a
  /// training checkpoint too: its optimizer state is read and dropped), checked as the top
  /// of this file says; with `model` given, one of another kind is refused. Throws
  /// FileError naming the file.
  static Translator load(const std::string& path, const std::string& model = "") {
    const SafetensorsHeader header = read_safetensors_header(path);
    const auto& metadata = header.metadata;
    TranslatorConfig config = TranslatorConfig::from_metadata(metadata, path);
    if (!model.empty() && config.model != model)
      throw FileError(path + ": holds a " + config.model + " model, not a " + model + " one");
    Vocab src = vocab_of(metadata, "src_vocab", path), tgt = vocab_of(metadata, "tgt_vocab", path);
    Tokenizers tokenizers = Tokenizers::from_metadata(metadata, path);
    tokenizers.check_vocabularies(src, tgt, path);
    check_tensors_fit(header, config, src, tgt, path);
    Translator translator(std::move(config), std::move(src), std::move(tgt), std::move(tokenizers));
    const bool training = metadata.count("heed.adam.steps") > 0;
    translator.visit([&](auto& net) {
      if (training) {
        Adam<float> dropped(net.parameters());
        load_training_checkpoint(net, dropped, path);
      } else {
        load_checkpoint(net, path);
      }
    });
    return translator;
  }

  /// The configuration, the vocabularies and the SentencePiece models as a checkpoint's
  /// metadata.
  std::map<std::string, std::string> metadata() const {
    std::map<std::string, std::string> out = config_.to_metadata();
    out.merge(detail::vocab_metadata(src_vocab_, tgt_vocab_));
    out.merge(tokenizers_.metadata());
    return out;
  }

  /// Saves the parameters and metadata() to `path` (atomically), for load(), with
  /// `extra` metadata besides (what it was trained on: heed/seq2seq/held_out.hpp).
  void save(const std::string& path, const std::map<std::string, std::string>& extra = {}) const {
    auto metadata = this->metadata();
    for (const auto& [key, value] : extra) metadata.emplace(key, value);
    visit([&](const auto& net) { save_checkpoint(net, path, metadata); });
  }

  const TranslatorConfig& config() const { return config_; }
  const Vocab& src_vocab() const { return src_vocab_; }
  const Vocab& tgt_vocab() const { return tgt_vocab_; }
  const Tokenizers& tokenizers() const { return tokenizers_; }
  index_t num_parameters() const {
    return visit([](const auto& net) { return static_cast<index_t>(net.num_parameters()); });
  }
  /// The most tokens the net can decode: the Transformer's positional table's length,
  /// PredictOptions::kMaxLength for the GRU.
  index_t max_positions() const {
    return visit([](const auto& net) { return detail::max_positions(net.decoder()); });
  }

  /// Translates raw sentences (translate_sentences) with the configuration's num_steps.
  std::vector<Translation<float>> translate(const std::vector<std::string>& sentences,
                                            const PredictOptions& options = {}) {
    return visit([&](auto& net) {
      return translate_sentences(net, tokenizers_, sentences, src_vocab_, tgt_vocab_, config_.num_steps, options);
    });
  }

  /// Translates each source of `refs` and scores them with corpus BLEU-4 (translate_and_score).
  Scored evaluate(const References& refs, const PredictOptions& options = {}) {
    return visit([&](auto& net) {
      return translate_and_score(net, tokenizers_, refs, src_vocab_, tgt_vocab_, config_.num_steps, options);
    });
  }

 private:
  /// A vocabulary of the metadata (one token per line), FileError naming the file and key.
  static Vocab vocab_of(const std::map<std::string, std::string>& metadata, const char* key, const std::string& path) {
    const auto it = metadata.find(key);
    if (it == metadata.end())
      throw FileError(path + ": not a translator checkpoint (no '" + key + "' in its metadata)");
    try {
      return Vocab::from_idx_to_token(detail::split_lines(it->second));
    } catch (const ValueError& e) {
      throw FileError(path + ": " + key + ": " + e.what());
    }
  }

  TranslatorConfig config_;
  Vocab src_vocab_, tgt_vocab_;
  Tokenizers tokenizers_;
  Net net_;
};

}  // namespace heed

#include "heed/detail/header_end.hpp"
