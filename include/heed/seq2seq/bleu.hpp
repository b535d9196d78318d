// heed/seq2seq/bleu.hpp — d2l's BLEU score of a predicted sequence against one label
// sequence (d2l 9.7.6), computed exactly as d2l's bleu(), and corpus BLEU-4 as sacreBLEU
// computes it (below).
//
//   heed::bleu("va !", "va !", 2);               // 1
//   heed::bleu("il est bon .", "il est calme .", 2)
//
//   score = exp(min(0, 1 − len_label / len_pred)) · Π_{n=1..k} p_n^(1/2^n)
//
// p_n is the clipped n-gram precision: the number of the prediction's n-grams matched
// by an unused n-gram of the label (each label n-gram matches at most as often as it
// occurs there), over the len_pred − n + 1 n-grams of the prediction. The string form
// splits on every single ' ' as Python's str.split(' ') does, so "a  b" has an empty
// token in the middle and "" is one empty token.
//
// Where d2l's raises ZeroDivisionError — a prediction of fewer than k tokens, whose
// len_pred − n + 1 reaches 0 — p_n is taken as 0 (no n-gram of the prediction
// matches), so the score is 0; an empty token list scores 0 too. k must be at least 1.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "heed/core/error.hpp"
#include "heed/detail/inline.hpp"
#include "heed/seq2seq/text.hpp"

namespace heed {

/// BLEU of predicted tokens against label tokens, with n-grams up to k.
double bleu(const std::vector<std::string>& pred_tokens, const std::vector<std::string>& label_tokens, int k);

/// BLEU of two space-separated sequences, as d2l's bleu(pred_seq, label_seq, k).
double bleu(const std::string& pred_seq, const std::string& label_seq, int k);

// ---- corpus BLEU -----------------------------------------------------------------------
//
// sacreBLEU's corpus_score with its defaults (Post, 2018): the clipped n-gram matches and
// the n-gram counts of every sentence are summed over the corpus before the precisions
// are formed; each hypothesis n-gram is clipped by the most times it occurs in any one of
// its references; the brevity penalty compares the summed hypothesis length with the sum
// of each sentence's closest reference length (ties: the shorter); a precision with no
// match is smoothed as mteval-v13a's "exp" (the k-th such precision is 1 / (2^k · total)),
// and a corpus with no match at all scores 0. Tokens are whitespace-separated (sacreBLEU's
// tokenize="none"): give it text tokenised as the model's, d2l's preprocess_nmt for
// heed's models. A sentence may have any number of references; one with none counts its
// hypothesis n-grams as unmatched and adds 0 to the reference length.
//
//   auto s = heed::corpus_bleu({"the cat sat ."}, {{"the cat sat .", "a cat sat ."}});
//   s.score;        // 0..100, as sacreBLEU prints it
//   s.to_string();  // "BLEU = 100.00 100.0/100.0/100.0/100.0 (BP = 1.000 ratio = 1.000 hyp_len = 4 ref_len = 4)"

struct CorpusBleu {
  double score = 0.0;              // 0..100
  std::vector<long> counts;        // matched n-grams, n = 1..max_order
  std::vector<long> totals;        // hypothesis n-grams, n = 1..max_order
  std::vector<double> precisions;  // percent, smoothed
  double bp = 0.0;                 // brevity penalty
  long sys_len = 0, ref_len = 0;   // summed hypothesis and closest-reference lengths

  /// sacreBLEU's line: "BLEU = 48.53 82.4/50.0/45.5/37.5 (BP = 0.943 ratio = 0.944 hyp_len = 17 ref_len = 18)".
  std::string to_string() const;
};

/// Corpus BLEU of hypotheses[i] against references[i] (one or more per sentence), n-grams
/// up to max_order (sacreBLEU's 4). The two lists must be equally long.
CorpusBleu corpus_bleu(const std::vector<std::string>& hypotheses,
                       const std::vector<std::vector<std::string>>& references, int max_order = 4);

#if HEED_NON_TEMPLATE_DEFINITIONS

HEED_INLINE double bleu(const std::vector<std::string>& pred_tokens, const std::vector<std::string>& label_tokens,
                        int k) {
  HEED_CHECK(k >= 1, ValueError, "bleu: k must be at least 1, got ", k);
  const auto len_pred = static_cast<long>(pred_tokens.size()), len_label = static_cast<long>(label_tokens.size());
  if (len_pred == 0) return 0.0;
  double score = std::exp(std::min(0.0, 1.0 - static_cast<double>(len_label) / static_cast<double>(len_pred)));
  using NGram = std::vector<std::string>;
  for (long n = 1; n <= k; ++n) {
    const long pred_ngrams = len_pred - n + 1;
    if (pred_ngrams <= 0) return 0.0;  // see the top of this file
    std::map<NGram, long> label_subs;  // how many of each n-gram of the label are still unmatched
    for (long i = 0; i + n <= len_label; ++i)
      ++label_subs[NGram(label_tokens.begin() + i, label_tokens.begin() + i + n)];
    long num_matches = 0;
    for (long i = 0; i < pred_ngrams; ++i) {
      const auto it = label_subs.find(NGram(pred_tokens.begin() + i, pred_tokens.begin() + i + n));
      if (it != label_subs.end() && it->second > 0) {
        ++num_matches;
        --it->second;
      }
    }
    score *= std::pow(static_cast<double>(num_matches) / static_cast<double>(pred_ngrams), std::pow(0.5, n));
  }
  return score;
}

HEED_INLINE double bleu(const std::string& pred_seq, const std::string& label_seq, int k) {
  return bleu(detail::split(pred_seq, ' '), detail::split(label_seq, ' '), k);
}

HEED_INLINE std::string CorpusBleu::to_string() const {
  std::string out;
  const auto append = [&out](const char* format, double value) {
    char buffer[64];
    std::snprintf(buffer, sizeof buffer, format, value);
    out += buffer;
  };
  append("BLEU = %.2f ", score);
  for (std::size_t n = 0; n < precisions.size(); ++n) append(n == 0 ? "%.1f" : "/%.1f", precisions[n]);
  append(" (BP = %.3f ", bp);
  append("ratio = %.3f ", ref_len > 0 ? static_cast<double>(sys_len) / static_cast<double>(ref_len) : 0.0);
  out += "hyp_len = " + std::to_string(sys_len) + " ref_len = " + std::to_string(ref_len) + ")";
  return out;
}

HEED_INLINE CorpusBleu corpus_bleu(const std::vector<std::string>& hypotheses,
                                   const std::vector<std::vector<std::string>>& references, int max_order) {
  HEED_CHECK(max_order >= 1, ValueError, "corpus_bleu: max_order must be at least 1, got ", max_order);
  HEED_CHECK(hypotheses.size() == references.size(), ValueError, "corpus_bleu: ", hypotheses.size(), " hypotheses but ",
             references.size(), " reference lists");
  const auto order = static_cast<std::size_t>(max_order);
  CorpusBleu result;
  result.counts.assign(order, 0);
  result.totals.assign(order, 0);
  result.precisions.assign(order, 0.0);
  using NGram = std::vector<std::string>;
  const auto ngram_counts = [order](const std::vector<std::string>& tokens) {
    std::map<NGram, long> counts;
    for (std::size_t n = 1; n <= order; ++n)
      for (std::size_t i = 0; i + n <= tokens.size(); ++i)
        ++counts[NGram(tokens.begin() + static_cast<long>(i), tokens.begin() + static_cast<long>(i + n))];
    return counts;
  };
  for (std::size_t s = 0; s < hypotheses.size(); ++s) {
    const std::vector<std::string> hyp = detail::split_on_whitespace(hypotheses[s]);
    const auto hyp_len = static_cast<long>(hyp.size());
    std::map<NGram, long> ref_max;  // each n-gram's largest count in one reference
    long closest = -1;
    for (const std::string& reference : references[s]) {
      const std::vector<std::string> ref = detail::split_on_whitespace(reference);
      const auto ref_len = static_cast<long>(ref.size());
      const long diff = std::labs(hyp_len - ref_len), best = std::labs(hyp_len - closest);
      if (closest < 0 || diff < best || (diff == best && ref_len < closest)) closest = ref_len;
      for (const auto& [ngram, count] : ngram_counts(ref)) ref_max[ngram] = std::max(ref_max[ngram], count);
    }
    result.sys_len += hyp_len;
    result.ref_len += std::max(closest, 0L);
    for (const auto& [ngram, count] : ngram_counts(hyp)) {
      const auto it = ref_max.find(ngram);
      if (it != ref_max.end()) result.counts[ngram.size() - 1] += std::min(count, it->second);
    }
    for (std::size_t n = 1; n <= order; ++n) result.totals[n - 1] += std::max(hyp_len - static_cast<long>(n) + 1, 0L);
  }
  const double sys_len = static_cast<double>(result.sys_len), ref_len = static_cast<double>(result.ref_len);
  result.bp = result.sys_len >= result.ref_len ? 1.0 : result.sys_len > 0 ? std::exp(1.0 - ref_len / sys_len) : 0.0;
  if (std::all_of(result.counts.begin(), result.counts.end(), [](long c) { return c == 0; })) return result;
  double smooth = 1.0, log_sum = 0.0;
  for (std::size_t n = 0; n < order; ++n) {
    // sacreBLEU stops at the first order with no n-gram at all: the precisions after it
    // stay 0, and its log of 0 is -9999999999, which makes the score 0.
    if (result.totals[n] == 0) break;
    const auto total = static_cast<double>(result.totals[n]);
    if (result.counts[n] == 0) {
      smooth *= 2.0;
      result.precisions[n] = 100.0 / (smooth * total);
    } else {
      result.precisions[n] = 100.0 * static_cast<double>(result.counts[n]) / total;
    }
  }
  for (const double p : result.precisions) log_sum += p > 0.0 ? std::log(p) : -9999999999.0;
  result.score = result.bp * std::exp(log_sum / static_cast<double>(order));
  return result;
}

#endif  // HEED_NON_TEMPLATE_DEFINITIONS

}  // namespace heed
