// heed/seq2seq/bleu.hpp — d2l's BLEU score of a predicted sequence against one label
// sequence (d2l 9.7.6), computed exactly as d2l's bleu().
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
#include <map>
#include <string>
#include <vector>

#include "heed/core/error.hpp"
#include "heed/detail/inline.hpp"

namespace heed {
namespace detail {

/// Python's s.split(' '): every single space separates two tokens, which may be empty.
inline std::vector<std::string> split_on_spaces(const std::string& s) {
  std::vector<std::string> tokens;
  std::string::size_type begin = 0;
  for (;;) {
    const std::string::size_type end = s.find(' ', begin);
    if (end == std::string::npos) break;
    tokens.push_back(s.substr(begin, end - begin));
    begin = end + 1;
  }
  tokens.push_back(s.substr(begin));
  return tokens;
}

}  // namespace detail

/// BLEU of predicted tokens against label tokens, with n-grams up to k.
double bleu(const std::vector<std::string>& pred_tokens, const std::vector<std::string>& label_tokens, int k);

/// BLEU of two space-separated sequences, as d2l's bleu(pred_seq, label_seq, k).
double bleu(const std::string& pred_seq, const std::string& label_seq, int k);

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
  return bleu(detail::split_on_spaces(pred_seq), detail::split_on_spaces(label_seq), k);
}

#endif  // HEED_NON_TEMPLATE_DEFINITIONS

}  // namespace heed
