// heed/seq2seq/shortlist.hpp — a vocabulary shortlist for decoding: the output layer
// scores only the target tokens that the source's words co-occurred with in training, the
// most frequent ones and the special tokens (Marian's --shortlist, CTranslate2's vmap):
//
//   heed::Shortlist list = heed::Shortlist::build(split.train);   // train_translator --shortlist FILE
//   list.save("run/shortlist.txt");
//   heed::PredictOptions options;
//   options.shortlist = std::make_shared<const heed::Shortlist>(heed::Shortlist::load("run/shortlist.txt"));
//   auto t = heed::predict_seq2seq(*net, sentences, src_vocab, tgt_vocab, num_steps, options);
//
// The file is CTranslate2's vocabulary map: one line per source n-gram (its tokens joined
// by spaces), a tab, and its target tokens joined by spaces; the line whose n-gram is empty
// lists the tokens always kept. A call of predict_seq2seq keeps the union of its
// sentences' candidates (CTranslate2 takes its batch's union too): a sentence's
// translation can depend on the sentences beside it in the call, never on micro_batches
// or the thread count. Log-probabilities are normalised over the kept tokens, as in
// Marian and CTranslate2. build() scores a (source word, target word) pair by the Dice
// coefficient of the training sentences they occur in, 2·c(s, t) / (c(s) + c(t)), which
// favours translations over words frequent everywhere (those the frequent list keeps).
#pragma once

#include "heed/detail/header_begin.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include "heed/core/error.hpp"
#include "heed/detail/files.hpp"
#include "heed/nn/linear.hpp"
#include "heed/ops/linear.hpp"
#include "heed/ops/packed_gemm.hpp"
#include "heed/ops/quantized_gemm.hpp"
#include "heed/ops/shape.hpp"
#include "heed/seq2seq/data.hpp"
#include "heed/seq2seq/text.hpp"
#include "heed/seq2seq/vocab.hpp"
namespace heed {

/// What Shortlist::build keeps: the `frequent` most frequent target tokens, and for each
/// source token the `per_source` target tokens of highest Dice coefficient with it.
struct ShortlistOptions {
  index_t frequent = 100;
  index_t per_source = 30;
};

class Shortlist {
 public:
  /// The longest source n-gram a file may map (CTranslate2 builds them of 1 to 3 tokens).
  static constexpr index_t kMaxNgram = 16;

  /// From training pairs (the model's tokens: words or SentencePiece pieces). Empty
  /// tokens and tokens with white space (which the file cannot hold) are left out. Ties
  /// go to the token first in byte order, so the list is a function of the pairs alone.
  static Shortlist build(const NmtTokens& pairs, const ShortlistOptions& options = {}) {
    HEED_CHECK(pairs.source.size() == pairs.target.size(), ValueError, "Shortlist::build: ", pairs.source.size(),
               " sources but ", pairs.target.size(), " targets");
    HEED_CHECK(options.frequent >= 0 && options.per_source >= 0, ValueError,
               "Shortlist::build: frequent and per_source must be >= 0, got ", options.frequent, " and ",
               options.per_source);
    // Tokens as ids of their own (in order of first sight), pair counts keyed by both ids.
    std::unordered_map<std::string, std::uint32_t> source_ids, target_ids;
    std::vector<std::string> source_words, target_words;
    std::vector<std::int64_t> source_count, target_count, target_occurrences;
    std::unordered_map<std::uint64_t, std::int64_t> together;
    const auto ids_of = [](const std::vector<std::string>& sentence,
                           std::unordered_map<std::string, std::uint32_t>& ids, std::vector<std::string>& words,
                           std::vector<std::int64_t>& count, std::vector<std::int64_t>* occurrences) {
      std::vector<std::uint32_t> out;
      for (const std::string& token : sentence) {
        if (!storable(token)) continue;
        const auto [it, added] = ids.emplace(token, static_cast<std::uint32_t>(words.size()));
        if (added) {
          words.push_back(token);
          count.push_back(0);
          if (occurrences) occurrences->push_back(0);
        }
        if (occurrences) ++(*occurrences)[it->second];
        out.push_back(it->second);
      }
      std::sort(out.begin(), out.end());
      out.erase(std::unique(out.begin(), out.end()), out.end());
      for (const std::uint32_t id : out) ++count[id];
      return out;
    };
    for (std::size_t i = 0; i < pairs.source.size(); ++i) {
      const auto s = ids_of(pairs.source[i], source_ids, source_words, source_count, nullptr);
      const auto t = ids_of(pairs.target[i], target_ids, target_words, target_count, &target_occurrences);
      for (const std::uint32_t a : s)
        for (const std::uint32_t b : t) ++together[(std::uint64_t(a) << 32) | b];
    }
    Shortlist out;
    // The most frequent target tokens, by occurrences.
    std::vector<std::uint32_t> order(target_words.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = static_cast<std::uint32_t>(i);
    std::sort(order.begin(), order.end(), [&](std::uint32_t a, std::uint32_t b) {
      return target_occurrences[a] != target_occurrences[b] ? target_occurrences[a] > target_occurrences[b]
                                                            : target_words[a] < target_words[b];
    });
    for (std::size_t i = 0; i < order.size() && static_cast<index_t>(i) < options.frequent; ++i)
      out.always_.push_back(target_words[order[i]]);
    // Each source token's best target tokens by Dice coefficient.
    std::vector<std::vector<std::pair<double, std::uint32_t>>> scored(source_words.size());
    for (const auto& [key, c] : together) {
      const auto a = static_cast<std::uint32_t>(key >> 32), b = static_cast<std::uint32_t>(key & 0xFFFFFFFFu);
      scored[a].emplace_back(2.0 * static_cast<double>(c) / static_cast<double>(source_count[a] + target_count[b]), b);
    }
    for (std::size_t a = 0; a < scored.size(); ++a) {
      auto& list = scored[a];
      const auto keep = std::min<std::size_t>(list.size(), static_cast<std::size_t>(options.per_source));
      std::partial_sort(
          list.begin(), list.begin() + static_cast<long>(keep), list.end(), [&](const auto& x, const auto& y) {
            return x.first != y.first ? x.first > y.first : target_words[x.second] < target_words[y.second];
          });
      std::vector<std::string> targets;
      for (std::size_t j = 0; j < keep; ++j) targets.push_back(target_words[list[j].second]);
      if (!targets.empty()) out.rules_[source_words[a]] = std::move(targets);
    }
    return out;
  }

  /// Reads a vocabulary map (the top of this file). FileError naming the file and line:
  /// no tab, a repeated n-gram, an n-gram of more than kMaxNgram tokens or with an empty
  /// token; nothing is kept of a file refused.
  static Shortlist load(const std::string& path) {
    detail::check_regular_file("Shortlist::load", path);
    std::ifstream in(path, std::ios::binary);
    if (!in) throw FileError("Shortlist::load: " + path + ": cannot open: " + detail::errno_message(errno));
    Shortlist out;
    bool have_always = false;
    std::string line;
    for (std::size_t number = 1; std::getline(in, line); ++number) {
      if (!line.empty() && line.back() == '\r') line.pop_back();
      const auto where = [&] { return "Shortlist::load: " + path + ": line " + std::to_string(number) + ": "; };
      const auto tab = line.find('\t');
      if (tab == std::string::npos) {
        if (line.empty()) continue;
        throw FileError(where() + "no tab between the source n-gram and its target tokens");
      }
      const std::string key = line.substr(0, tab);
      std::vector<std::string> targets = detail::split_on_whitespace(line.substr(tab + 1));
      if (key.empty()) {
        if (have_always) throw FileError(where() + "a second line of the tokens always kept (empty n-gram)");
        have_always = true;
        out.always_ = std::move(targets);
        continue;
      }
      index_t n = 1;
      for (const char c : key) n += c == ' ' ? 1 : 0;
      if (n > kMaxNgram)
        throw FileError(where() + "an n-gram of " + std::to_string(n) + " tokens (at most " +
                        std::to_string(kMaxNgram) + ")");
      if (key.front() == ' ' || key.back() == ' ' || key.find("  ") != std::string::npos)
        throw FileError(where() + "an empty token in the n-gram '" + key.substr(0, 80) + "'");
      if (!out.rules_.emplace(key, std::move(targets)).second)
        throw FileError(where() + "the n-gram '" + key.substr(0, 80) + "' again");
      out.longest_ = std::max(out.longest_, n);
    }
    if (in.bad()) throw FileError("Shortlist::load: " + path + ": cannot read: " + detail::errno_message(errno));
    return out;
  }

  /// Writes the map atomically, the always-kept line first, then the n-grams in byte order.
  void save(const std::string& path) const {
    std::string text = "\t" + detail::join_words(always_) + "\n";
    for (const auto& [key, targets] : rules_) text += key + "\t" + detail::join_words(targets) + "\n";
    detail::save_atomically("Shortlist::save", path,
                            [&text](const detail::SaveSink& file) { file.write(text.data(), text.size()); });
  }

  /// The target ids to score for these source sentences (their tokens, without <eos>),
  /// ascending: the always-kept tokens, every source n-gram's, the special tokens <eos>
  /// and <unk>, and `extra` (a target prefix's tokens). A token not in tgt_vocab counts
  /// as <unk>.
  std::vector<index_t> candidates(const std::vector<std::vector<std::string>>& sources, const Vocab& tgt_vocab,
                                  const std::vector<index_t>& extra = {}) const {
    std::vector<bool> kept(static_cast<std::size_t>(tgt_vocab.size()), false);
    const auto keep = [&](const std::vector<std::string>& tokens) {
      for (const std::string& token : tokens) kept[static_cast<std::size_t>(tgt_vocab[token])] = true;
    };
    keep(always_);
    kept[static_cast<std::size_t>(tgt_vocab.eos_index())] = true;
    kept[static_cast<std::size_t>(tgt_vocab.unk_index())] = true;
    for (const index_t id : extra) {
      HEED_CHECK(id >= 0 && id < tgt_vocab.size(), IndexError, "Shortlist::candidates: target id ", id,
                 " is not in the vocabulary of ", tgt_vocab.size());
      kept[static_cast<std::size_t>(id)] = true;
    }
    std::string ngram;
    for (const auto& sentence : sources)
      for (std::size_t first = 0; first < sentence.size(); ++first) {
        ngram.clear();
        for (std::size_t n = 1; n <= static_cast<std::size_t>(longest_) && first + n <= sentence.size(); ++n) {
          if (n > 1) ngram += ' ';
          ngram += sentence[first + n - 1];
          const auto it = rules_.find(ngram);
          if (it != rules_.end()) keep(it->second);
        }
      }
    std::vector<index_t> ids;
    for (std::size_t i = 0; i < kept.size(); ++i)
      if (kept[i]) ids.push_back(static_cast<index_t>(i));
    return ids;
  }

  /// The tokens always kept, and the target tokens of one source n-gram (empty if none).
  const std::vector<std::string>& always() const { return always_; }
  const std::vector<std::string>& targets_of(const std::string& ngram) const {
    static const std::vector<std::string> none;
    const auto it = rules_.find(ngram);
    return it == rules_.end() ? none : it->second;
  }
  /// How many source n-grams have target tokens.
  std::size_t size() const { return rules_.size(); }

 private:
  static bool storable(const std::string& token) {
    return !token.empty() && token.find_first_of(" \t\n\v\f\r") == std::string::npos;
  }

  std::vector<std::string> always_;
  std::map<std::string, std::vector<std::string>> rules_;  // source n-gram -> target tokens
  index_t longest_ = 1;                                    // tokens in the longest n-gram
};

namespace detail {

/// A decoder's output layer cut to a shortlist's target ids: its weight's and bias's rows
/// of those ids, gathered once per predict call (from the bf16 or int8 values of a
/// converted weight, no requantising), or, for a decoder that exposes no output layer,
/// the columns of its logits.
template <typename T>
class ShortlistedOutput {
 public:
  ShortlistedOutput(const std::vector<index_t>& ids, index_t vocab_size)
      : position_(static_cast<std::size_t>(vocab_size), -1), index_(ids, Shape{static_cast<index_t>(ids.size())}) {
    for (std::size_t i = 0; i < ids.size(); ++i) position_[static_cast<std::size_t>(ids[i])] = static_cast<index_t>(i);
  }

  /// Gathers `dense`'s rows (its out_features must be the vocabulary's size).
  void gather(const Linear<T>& dense) {
    HEED_CHECK(dense.out_features() == static_cast<index_t>(position_.size()), ShapeError,
               "predict_seq2seq: the output layer has ", dense.out_features(), " outputs, the target vocabulary ",
               position_.size(), " tokens");
    if (dense.bias.defined()) bias_ = index_select(dense.bias, 0, index_);
    if constexpr (std::is_same_v<T, float>) {
      if (dense.converted_weight) {
        const std::vector<index_t> ids(index_.data(), index_.data() + index_.numel());
        converted_ = std::make_shared<const LowPrecisionWeight>(dense.converted_weight->select_rows(ids));
        return;
      }
      // Inside a bf16 or int8 PackedWeightsGuard, converted here rather than by the
      // guard, which would keep every call's gathered rows for as long as it lasts.
      const PackedWeights* guard = current_packed_weights();
      if (guard && guard->precision != Precision::fp32) {
        const Tensor<T> rows = index_select(dense.weight, 0, index_);
        converted_ =
            std::make_shared<const LowPrecisionWeight>(rows.data(), rows.shape()[0], rows.shape()[1], guard->precision);
        return;
      }
    }
    weight_ = index_select(dense.weight, 0, index_);
  }

  /// The kept logits of `features` through the gathered rows.
  // features: (rows, 1, num_hiddens) -> (rows, 1, kept tokens)
  Tensor<T> logits(const Tensor<T>& features) const {
    if constexpr (std::is_same_v<T, float>)
      if (converted_) return linear(features, *converted_, bias_);
    return linear(features, weight_, bias_);
  }
  /// The kept columns of the whole vocabulary's logits.
  // logits: (rows, 1, vocab) -> (rows, 1, kept tokens)
  Tensor<T> select(const Tensor<T>& logits) const { return index_select(logits, -1, index_); }

  index_t size() const { return index_.numel(); }
  index_t id(index_t kept) const { return index_.data()[kept]; }
  /// A target id's place among the kept ones, or −1.
  index_t position(index_t id) const { return position_[static_cast<std::size_t>(id)]; }

 private:
  std::vector<index_t> position_;
  IndexTensor index_;  // the kept ids, ascending
  Tensor<T> weight_, bias_;
  std::shared_ptr<const LowPrecisionWeight> converted_;
};

}  // namespace detail

}  // namespace heed

#include "heed/detail/header_end.hpp"
