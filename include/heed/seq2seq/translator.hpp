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
#include <fstream>
#include <map>
#include <memory>
#include <optional>
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
#include "heed/nn/convert_weights.hpp"
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
  for (const std::string& s : sentences) tokens.push_back(tokenizers.sentence_tokens(s));
  std::vector<Translation<float>> out =
      predict_seq2seq_tokens<float>(net, tokens, src_vocab, tgt_vocab, num_steps, options);
  if (tokenizers.subwords())
    for (auto& t : out) {
      for (auto& h : t.n_best) h.text = tokenizers.target_text(tgt_vocab.to_tokens(h.tokens));
      t.text = t.n_best.front().text;
    }
  return out;
}

namespace detail {

/// A sentence in d2l's words (preprocess_nmt: lowercased, punctuation split off), joined
/// by spaces: what BLEU compares.
inline std::string d2l_words(const std::string& sentence) { return join_words(split(preprocess_nmt(sentence), ' ')); }

}  // namespace detail

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
    const PackedWeightsGuard packed_weights(options.precision);  // converted once for every batch
    for (std::size_t b = 0; b < refs.sources.size(); b += kDecodeBatch) {
      const std::vector<std::string> batch(
          refs.sources.begin() + static_cast<long>(b),
          refs.sources.begin() + static_cast<long>(std::min(refs.sources.size(), b + kDecodeBatch)));
      // A pretrained model writes cased text: scored in d2l's words, as the references are.
      for (const auto& t : translate_sentences(net, tokenizers, batch, src_vocab, tgt_vocab, num_steps, options))
        out.hypotheses.push_back(tokenizers.is_pretrained() ? detail::d2l_words(t.text) : t.text);
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

namespace detail {

/// The bytes of a file of a model directory: FileError naming it when it cannot be read.
inline std::string read_model_file(const std::string& path) {
  std::error_code error;
  if (!std::filesystem::is_regular_file(path, error))
    throw FileError(path + ": " + (std::filesystem::exists(path, error) ? "not a regular file" : "no such file"));
  std::ifstream in(path, std::ios::binary);
  if (!in) throw FileError(path + ": cannot open: " + errno_message(errno));
  std::ostringstream bytes;
  bytes << in.rdbuf();
  if (in.bad()) throw FileError(path + ": cannot read: " + errno_message(errno));
  return bytes.str();
}

/// Writes a file of a model directory atomically.
inline void write_model_file(const char* op, const std::string& path, const std::string& bytes) {
  save_atomically(op, path, [&](const SaveSink& sink) { sink.write(bytes.data(), bytes.size()); });
}

/// vocab.json's tokens in id order, every id from 0 to vocab_size − 1 once: FileError
/// naming the file otherwise.
inline std::vector<std::string> marian_vocab_tokens(const std::string& text, index_t vocab_size,
                                                    const std::string& path) {
  const nlohmann::json json = parse_json_object(text, path);
  if (static_cast<index_t>(json.size()) != vocab_size)
    throw FileError(path + ": has " + std::to_string(json.size()) + " tokens, but config.json's vocab_size is " +
                    std::to_string(vocab_size) + " (the rows of the embedding)");
  std::vector<std::string> tokens(static_cast<std::size_t>(vocab_size));
  std::vector<bool> seen(static_cast<std::size_t>(vocab_size), false);
  for (const auto& [token, id] : json.items()) {
    if (!id.is_number_integer() || id.get<std::int64_t>() < 0 || id.get<std::int64_t>() >= vocab_size)
      throw FileError(path + ": token " + quoted(token) + " has id " + id.dump().substr(0, 20) + ", not one of 0 to " +
                      std::to_string(vocab_size - 1));
    const auto at = static_cast<std::size_t>(id.get<std::int64_t>());
    if (seen[at]) throw FileError(path + ": id " + std::to_string(at) + " is given to two tokens");
    seen[at] = true;
    tokens[at] = token;
  }
  return tokens;
}

}  // namespace detail

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

  /// A MarianMT model directory as transformers writes it (Hugging Face's
  /// Helsinki-NLP/opus-mt-*): config.json (and generation_config.json when present),
  /// model.safetensors (F32, F16 or BF16), source.spm, target.spm, vocab.json and
  /// tokenizer_config.json. config.json is checked against what heed supports
  /// (MarianConfig::from_json), the vocabulary against the embedding, every tensor's
  /// shape against the config, before the net is built. Translating applies the
  /// model's bad_words_ids (decoding_options()). Throws FileError naming the file and the
  /// problem.
  static Translator from_marian(const std::string& dir) {
    const auto file = [&](const char* name) { return (std::filesystem::path(dir) / name).string(); };
    std::error_code error;
    if (!std::filesystem::is_directory(dir, error)) throw FileError(dir + ": not a model directory");
    MarianConfig marian = MarianConfig::from_json(detail::read_model_file(file("config.json")), file("config.json"));
    if (std::filesystem::exists(file("generation_config.json"), error))
      marian.read_generation_config(detail::read_model_file(file("generation_config.json")),
                                    file("generation_config.json"));
    std::string tokenizer_config = "{}";
    if (std::filesystem::exists(file("tokenizer_config.json"), error)) {
      tokenizer_config = detail::read_model_file(file("tokenizer_config.json"));
      const nlohmann::json json = detail::parse_json_object(tokenizer_config, file("tokenizer_config.json"));
      detail::MarianFields(json, file("tokenizer_config.json")).require("separate_vocabs", false);
    }
    std::vector<std::string> tokens =
        detail::marian_vocab_tokens(detail::read_model_file(file("vocab.json")), marian.vocab_size, file("vocab.json"));
    SpecialTokens specials;
    specials.pad = tokens[static_cast<std::size_t>(marian.pad_token_id)];
    specials.bos = tokens[static_cast<std::size_t>(marian.decoder_start_token_id)];
    specials.eos = tokens[static_cast<std::size_t>(marian.eos_token_id)];
    Vocab vocab;
    try {
      vocab = Vocab::from_idx_to_token(std::move(tokens), specials);
    } catch (const ValueError& e) {
      throw FileError(file("vocab.json") + ": " + e.what());
    }
    Tokenizers tokenizers =
        Tokenizers::pretrained(detail::read_model_file(file("source.spm")), detail::read_model_file(file("target.spm")),
                               file("source.spm"), file("target.spm"));
    const std::string weights = file("model.safetensors");
    if (!std::filesystem::exists(weights, error) && std::filesystem::exists(file("pytorch_model.bin"), error))
      throw FileError(dir +
                      ": has pytorch_model.bin but no model.safetensors: heed reads safetensors only (convert "
                      "it with transformers: MarianMTModel.from_pretrained(dir).save_pretrained(dir, "
                      "safe_serialization=True))");
    check_marian_fits(read_safetensors_header(weights), marian, weights);
    auto net = marian_from_pretrained<float>(marian, weights);  // the net discarded if it throws
    TranslatorConfig config;
    config.model = "marian";
    config.num_hiddens = config.embed_size = marian.d_model;
    config.ffn_num_hiddens = marian.encoder_ffn_dim;
    config.num_heads = marian.encoder_attention_heads;
    config.num_layers = marian.encoder_layers;
    config.num_steps = marian.max_position_embeddings;
    config.dropout = marian.dropout;
    Translator out(std::move(config), vocab, vocab, std::move(tokenizers), Net(std::move(net)));
    out.marian_ = std::move(marian);
    out.tokenizer_config_ = std::move(tokenizer_config);
    return out;
  }

  /// Writes the translator, loaded by from_marian (and perhaps fine-tuned since), as a
  /// MarianMT directory that transformers' MarianMTModel.from_pretrained and from_marian
  /// load: config.json, generation_config.json, model.safetensors (in `dtype`: "F32",
  /// "F16" or "BF16"), the tokenizer files. Each file is written atomically; `dir` is
  /// created. Throws ValueError for a translator of heed's own kinds (save() writes
  /// those), FileError when a file cannot be written.
  void save_marian(const std::string& dir, const std::string& dtype = "F32") const {
    HEED_CHECK(marian_.has_value(), ValueError, "Translator::save_marian: a ", config_.model,
               " translator is saved with save(); save_marian writes MarianMT models loaded with from_marian");
    HEED_CHECK(dtype == "F32" || dtype == "F16" || dtype == "BF16", ValueError,
               "Translator::save_marian: dtype must be F32, F16 or BF16, got '", dtype, "'");
    check_fp32_weights("Translator::save_marian");
    try {
      std::filesystem::create_directories(dir);
    } catch (const std::filesystem::filesystem_error& e) {
      throw FileError("Translator::save_marian: cannot create the directory '" + dir + "': " + e.code().message());
    }
    const auto file = [&](const char* name) { return (std::filesystem::path(dir) / name).string(); };
    const MarianConfig& c = *marian_;
    nlohmann::json config = c.to_json();
    config["torch_dtype"] = dtype == "F32" ? "float32" : dtype == "F16" ? "float16" : "bfloat16";
    detail::write_model_file("save_marian", file("config.json"), config.dump(2) + "\n");
    nlohmann::json generation = {{"bad_words_ids", nlohmann::json::array()},
                                 {"decoder_start_token_id", c.decoder_start_token_id},
                                 {"eos_token_id", c.eos_token_id},
                                 {"max_length", c.max_length},
                                 {"num_beams", c.num_beams},
                                 {"pad_token_id", c.pad_token_id}};
    for (const index_t id : c.bad_words_ids) generation["bad_words_ids"].push_back({id});
    if (c.forced_eos_token_id >= 0) generation["forced_eos_token_id"] = c.forced_eos_token_id;
    detail::write_model_file("save_marian", file("generation_config.json"), generation.dump(2) + "\n");
    nlohmann::json vocab = nlohmann::json::object();
    for (index_t id = 0; id < src_vocab_.size(); ++id) vocab[src_vocab_.to_tokens(id)] = id;
    detail::write_model_file("save_marian", file("vocab.json"), vocab.dump(2) + "\n");
    detail::write_model_file("save_marian", file("tokenizer_config.json"), tokenizer_config_);
#ifdef HEED_WITH_SENTENCEPIECE
    detail::write_model_file("save_marian", file("source.spm"), tokenizers_.source_model()->serialized());
    detail::write_model_file("save_marian", file("target.spm"), tokenizers_.target_model()->serialized());
#endif
    save_marian_weights(*std::get<std::unique_ptr<MarianNet<float>>>(net_), c, file("model.safetensors"), dtype);
  }

  /// The MarianMT configuration of a translator from from_marian (empty otherwise).
  const std::optional<MarianConfig>& marian_config() const { return marian_; }

  /// `options` with what the model requires of decoding: a MarianMT model's bad_words_ids
  /// among the forbidden tokens, its max_length (when options give none), forced <eos>,
  /// and transformers' beam search rule with the model's early_stopping.
  PredictOptions decoding_options(PredictOptions options) const {
    if (!marian_) return options;
    for (const index_t id : marian_->bad_words_ids) options.forbidden_tokens.push_back(id);
    // generate()'s max_length counts the start token: one fewer decoded, the last of
    // them <eos> when the model forces it.
    if (options.max_length == 0) options.max_length = std::max<index_t>(1, marian_->max_length - 1);
    options.force_eos_at_max_length = marian_->forced_eos_token_id == marian_->eos_token_id;
    options.beam_search_rule = BeamSearchRule::transformers;
    options.early_stopping = marian_->early_stopping;
    return options;
  }

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
    // A quantised checkpoint (saved after convert_weights_): the net's fp32 weights are
    // made but never written, so that their pages are never touched, and freed as the
    // converted ones load.
    const std::map<std::string, Precision> converted = detail::converted_weights_of(metadata, path);
    if (!converted.empty() && config.model == "bahdanau")
      throw FileError(path + ": holds weights converted to " + to_string(converted.begin()->second) + " ('" +
                      converted.begin()->first +
                      "'), but a bahdanau translator's decoder reads its fp32 weights itself");
    Precision precision = converted.empty() ? Precision::fp32 : converted.begin()->second;
    for (const auto& [name, p] : converted)
      if (p != precision)
        throw FileError(path + ": its weights are in both " + to_string(precision) + " and " + to_string(p) + " ('" +
                        name + "'): a translator's converted weights are of one precision");
    std::optional<detail::SkipInitGuard> skip_init;
    if (!converted.empty()) skip_init.emplace();
    Translator translator(std::move(config), std::move(src), std::move(tgt), std::move(tokenizers));
    skip_init.reset();
    translator.weights_precision_ = precision;
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
    // A MarianMT model's tokens and configuration are its directory's (save_marian).
    if (marian_) return out;
    out.merge(detail::vocab_metadata(src_vocab_, tgt_vocab_));
    out.merge(tokenizers_.metadata());
    return out;
  }

  /// Converts the net's weights to bf16 or int8 for inference, in place
  /// (heed/nn/convert_weights.hpp): half or a quarter of their memory, and translate()
  /// and evaluate() then multiply in that precision. A Transformer or MarianMT
  /// translator (Bahdanau's decoder reads its weights itself: decode it in bf16 or int8
  /// with PredictOptions::precision instead). The fp32 weights are gone: save() writes
  /// them as they are now, save_marian() is refused. Converting again to the same precision does
  /// nothing; to another, a ValueError.
  ConvertedWeights convert_weights_(Precision precision) {
    HEED_CHECK(config_.model != "bahdanau", ValueError,
               "Translator::convert_weights_: a bahdanau translator's "
               "decoder reads its weights itself; decode it in ",
               to_string(precision), " with PredictOptions::precision (translate --precision) instead");
    HEED_CHECK(weights_precision_ == Precision::fp32 || weights_precision_ == precision, ValueError,
               "Translator::convert_weights_: the weights are already ", to_string(weights_precision_), ", not ",
               to_string(precision));
    const ConvertedWeights report = visit([&](auto& net) { return heed::convert_weights_(net, precision); });
    weights_precision_ = precision;
    return report;
  }
  /// fp32, or what convert_weights_ converted the weights to.
  Precision weights_precision() const { return weights_precision_; }

  /// Moves the net to `device`, in place: translate() and evaluate() then encode and
  /// decode there, and training trains there. Converted (bf16, int8) weights stay on
  /// the CPU: a ValueError.
  Translator& to(Device device) {
    HEED_CHECK(device.is_cpu() || weights_precision_ == Precision::fp32, ValueError,
               "Translator::to: the weights were converted to ", to_string(weights_precision_),
               ", which runs on the CPU only, not on ", to_string(device));
    visit([&](auto& net) { net.to(device); });
    return *this;
  }
  /// Where the net is.
  Device device() const {
    return visit([](const auto& net) { return net.device(); });
  }

  /// Saves the parameters and metadata() to `path` (atomically), for load(), with
  /// `extra` metadata besides (what it was trained on: heed/seq2seq/held_out.hpp). After
  /// convert_weights_, a quantised checkpoint (heed/io/checkpoint.hpp), which load()
  /// reads back in that precision without an fp32 copy of the weights.
  void save(const std::string& path, const std::map<std::string, std::string>& extra = {}) const {
    HEED_CHECK(!marian_.has_value(), ValueError,
               "Translator::save: a MarianMT translator is saved as a model directory: save_marian(dir)");
    auto metadata = this->metadata();
    for (const auto& [key, value] : extra) metadata.emplace(key, value);
    visit([&](const auto& net) { save_checkpoint(net, path, metadata); });
  }

  const TranslatorConfig& config() const { return config_; }
  const Vocab& src_vocab() const { return src_vocab_; }
  const Vocab& tgt_vocab() const { return tgt_vocab_; }
  const Tokenizers& tokenizers() const { return tokenizers_; }
  /// The net's parameters, converted weights (convert_weights_) included.
  index_t num_parameters() const {
    return visit([](const auto& net) {
      index_t n = net.num_parameters();
      for (const auto& [name, w] : net.named_converted_weights()) n += w->out_features() * w->in_features();
      return n;
    });
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
      return translate_sentences(net, tokenizers_, sentences, src_vocab_, tgt_vocab_, config_.num_steps,
                                 decoding_options(options));
    });
  }

  /// Translates each source of `refs` and scores them with corpus BLEU-4 (translate_and_score).
  Scored evaluate(const References& refs, const PredictOptions& options = {}) {
    return visit([&](auto& net) {
      return translate_and_score(net, tokenizers_, refs, src_vocab_, tgt_vocab_, config_.num_steps,
                                 decoding_options(options));
    });
  }

 private:
  Translator(TranslatorConfig config, Vocab src_vocab, Vocab tgt_vocab, Tokenizers tokenizers, Net net)
      : config_(std::move(config)),
        src_vocab_(std::move(src_vocab)),
        tgt_vocab_(std::move(tgt_vocab)),
        tokenizers_(std::move(tokenizers)),
        net_(std::move(net)) {}

  /// Refuses, from model.safetensors' header alone, a config.json whose net would not fit
  /// in memory or whose embedding is not the file's, before the net is allocated.
  static void check_marian_fits(const SafetensorsHeader& header, const MarianConfig& c, const std::string& path) {
    const std::uint64_t parameters = marian_parameter_count(c);
    const std::uint64_t memory = detail::physical_memory_bytes();
    if (parameters > kMaxParameters || (memory > 0 && parameters * sizeof(float) > memory))
      throw FileError(path + ": config.json describes a MarianMT model of " + std::to_string(parameters) +
                      " parameters, more than " +
                      (parameters > kMaxParameters ? std::string("the 2^31 a translator may have")
                                                   : "this machine's " + std::to_string(memory) + " bytes"));
    for (const std::string& name : detail::marian_embedding_names()) {
      const auto it = header.tensors.find(name);
      if (it != header.tensors.end() && it->second.shape != std::vector<index_t>{c.vocab_size, c.d_model})
        throw FileError(path + ": tensor '" + name + "' has shape " + detail::format_shape(it->second.shape) +
                        ", but config.json's vocab_size and d_model give " +
                        detail::format_shape({c.vocab_size, c.d_model}));
    }
  }

  void check_fp32_weights(const char* op) const {
    HEED_CHECK(weights_precision_ == Precision::fp32, ValueError, op, ": the weights were converted to ",
               to_string(weights_precision_), " for inference (convert_weights_): save before converting them");
  }

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
  std::optional<MarianConfig> marian_;  // a MarianMT model's (from_marian)
  std::string tokenizer_config_;        // its tokenizer_config.json, written back by save_marian
  Precision weights_precision_ = Precision::fp32;
};

}  // namespace heed

#include "heed/detail/header_end.hpp"
