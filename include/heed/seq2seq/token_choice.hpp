// heed/seq2seq/token_choice.hpp — how a decoding step chooses its next token from a
// row of logits: the best ones (greedy and beam search, top_log_probs), one drawn
// (sampling with temperature, top-k and top-p, sample_token), and the tokens a
// hypothesis may not take (min_length, no_repeat_ngram_size). log P is always the
// model's own, whatever the temperature, cut-offs and forbidden tokens.
#pragma once

#include "heed/detail/header_begin.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "heed/core/generator.hpp"
#include "heed/detail/strided.hpp"
#include "heed/ops/device.hpp"
#include "heed/ops/kernels.hpp"
#include "heed/seq2seq/predict_options.hpp"

namespace heed {

namespace detail {

/// A token and its log-probability.
template <typename T>
struct TopToken {
  T log_prob;
  index_t token;
};

/// log Σ exp(logits) of a row, computed as log_softmax computes it.
template <typename T>
T log_normaliser(const T* logits, index_t V) {
  const ConstVecMap<T> row(logits, V);
  const T max = row.maxCoeff();
  return max + std::log((row - max).exp().sum());
}

/// Sets the forbidden tokens of a row of logits to −inf, once its normaliser is known
/// (so that log P stays the model's); whether there were any.
template <typename T>
bool forbid(T* logits, const std::vector<index_t>& forbidden) {
  for (const index_t v : forbidden) logits[v] = -std::numeric_limits<T>::infinity();
  return !forbidden.empty();
}

/// The `count` most probable tokens of a row of V logits into top[0..), best first
/// (ties: the lower token first), with log P = logit − log Σ exp(logits), computed as
/// log_softmax computes it, over the row as the model gave it; the `forbidden` tokens
/// are never chosen. Returns how many were found (min(count, allowed tokens)). Reads the
/// row three times, writes only the forbidden logits (−inf) and allocates nothing: greedy
/// decoding needs neither a log-softmax tensor nor a sort, and the rows of a step run on
/// many threads.
template <typename T>
std::size_t top_log_probs(T* logits, index_t V, TopToken<T>* top, std::size_t count,
                          const std::vector<index_t>& forbidden = {}) {
  if (count == 0 || V == 0) return 0;
  const ConstVecMap<T> row(logits, V);
  const T max = row.maxCoeff();
  const T normaliser = max + std::log((row - max).exp().sum());
  const bool any_forbidden = forbid(logits, forbidden);
  // Greedy: the first maximum, found by value after the forbidden tokens became −inf (not
  // found when the max is NaN or forbidden; a max of −inf would find a forbidden token).
  if (count == 1 && (!any_forbidden || max > -std::numeric_limits<T>::infinity())) {
    const T* first = std::find(logits, logits + V, max);
    if (first != logits + V) {
      top[0] = {*first - normaliser, static_cast<index_t>(first - logits)};
      return 1;
    }
  }
  std::size_t n = 0;
  const auto consider = [&](index_t v) {
    if (any_forbidden && logits[v] == -std::numeric_limits<T>::infinity()) return;
    const T log_prob = logits[v] - normaliser;
    if (n == count && !(log_prob > top[n - 1].log_prob)) return;
    std::size_t at = n < count ? n++ : n - 1;  // the last slot is dropped when full
    for (; at > 0 && log_prob > top[at - 1].log_prob; --at) top[at] = top[at - 1];
    top[at] = {log_prob, v};
  };
  // Once `count` are found, few tokens beat the worst of them: blocks in which none does
  // are passed over by one vectorised test (the scan token by token was a tenth of
  // MarianMT's beam search over 59,514 tokens). The test is consider's own comparison,
  // or-ed as ints: GCC 12 vectorises that, not an or of bools (token by token, 12 % of
  // a small model's beam search).
  constexpr index_t kBlock = 32;
  index_t v = 0;
  for (; v < V && n < count; ++v) consider(v);
  for (; v + kBlock <= V; v += kBlock) {
    const T worst = top[n - 1].log_prob;
    int any = 0;
    for (index_t j = 0; j < kBlock; ++j) any |= static_cast<int>(logits[v + j] - normaliser > worst);
    if (any)
      for (index_t j = 0; j < kBlock; ++j) consider(v + j);
  }
  for (; v < V; ++v) consider(v);
  return n;
}

/// top_log_probs of every row of logits on a device (`rows` rows of V, contiguous), by
/// its kernel, into top[r · count ..) and found[r]: the CPU's choice, with log P within
/// rounding (the normaliser sums in another order), and only the best tokens copied
/// back (two copies: log P, then the tokens with their counts). No row takes a token of
/// `banned` (on the device: decoding uploads it once), nor eos where eos_banned[r]
/// (min_length). count <= kDeviceTopTokens.
template <typename T>
void top_log_probs_on_device(const Tensor<T>& logits, index_t rows, index_t V, std::size_t count,
                             const IndexTensor& banned, const std::vector<std::int64_t>& eos_banned, index_t eos,
                             TopToken<T>* top, std::size_t* found) {
  const Device device = logits.device();
  const auto n = static_cast<index_t>(count);
  HEED_CHECK(n <= kDeviceTopTokens, ValueError, "top_log_probs: ", count, " tokens a row on ", to_string(device),
             ", at most ", kDeviceTopTokens);
  HEED_CHECK(static_cast<index_t>(eos_banned.size()) == rows && logits.numel() == rows * V, ShapeError,
             "top_log_probs: ", rows, " rows of ", V, " logits, got ", to_string(logits.shape()), " and ",
             eos_banned.size(), " <eos> flags");
  (void)common_device("top_log_probs", logits, banned);
  if (rows == 0) return;
  Tensor<T> log_probs = make_tensor<T>(Shape{rows * n}, device);
  IndexTensor tokens_and_counts = make_tensor<std::int64_t>(Shape{rows * n + rows}, device);  // counts last
  const IndexTensor eos_banned_there = IndexTensor(eos_banned, Shape{rows}).to(device);
  std::int64_t* tokens = device_data(tokens_and_counts);
  kernels_for(logits, "top_log_probs")
      .top_log_probs(device.index(), device_data(log_probs), tokens, tokens + rows * n, device_data(logits), rows, V, n,
                     device_data(banned), banned.numel(), device_data(eos_banned_there), eos);
  const Tensor<T> values = log_probs.to(Device::cpu());
  const IndexTensor ids = tokens_and_counts.to(Device::cpu());
  const std::int64_t* counts = ids.data() + rows * n;
  for (index_t r = 0; r < rows; ++r) {
    found[r] = static_cast<std::size_t>(counts[r]);
    for (index_t k = 0; k < counts[r]; ++k) top[r * n + k] = {values.data()[r * n + k], ids.data()[r * n + k]};
  }
}

/// sample_token for `rows` rows of V logits on their device, row r drawn with
/// uniforms[r] (its sample's next uniform; the kernel's sum of p runs in another order
/// than the CPU's), banning `banned` (on the device) and <eos> where eos_banned; each
/// row's token and log P come back into top[r], found[r] = 0 where none may be chosen.
/// top_k at most kDeviceTopTokens; no top_p.
template <typename T>
void sample_tokens_on_device(const Tensor<T>& logits, index_t rows, index_t V, const IndexTensor& banned,
                             const std::vector<std::int64_t>& eos_banned, index_t eos, double temperature,
                             index_t top_k, const std::vector<double>& uniforms, TopToken<T>* top, std::size_t* found) {
  const Device device = logits.device();
  HEED_CHECK(top_k >= 0 && top_k <= kDeviceTopTokens && temperature > 0.0, ValueError, "sample_token: top_k ", top_k,
             " on ", to_string(device), " must be in [0, ", kDeviceTopTokens, "] and the temperature positive, got ",
             temperature);
  HEED_CHECK(static_cast<index_t>(eos_banned.size()) == rows && static_cast<index_t>(uniforms.size()) == rows &&
                 logits.numel() == rows * V,
             ShapeError, "sample_token: ", rows, " rows of ", V, " logits, got ", to_string(logits.shape()), ", ",
             eos_banned.size(), " <eos> flags and ", uniforms.size(), " draws");
  (void)common_device("sample_token", logits, banned);
  if (rows == 0) return;
  Tensor<T> log_probs = make_tensor<T>(Shape{rows}, device);
  IndexTensor tokens_and_found = make_tensor<std::int64_t>(Shape{2 * rows}, device);  // found last
  const IndexTensor eos_banned_there = IndexTensor(eos_banned, Shape{rows}).to(device);
  const Tensor<double> draws = Tensor<double>(uniforms, Shape{rows}).to(device);
  std::int64_t* tokens = device_data(tokens_and_found);
  kernels_for(logits, "sample_token")
      .sample_tokens(device.index(), device_data(log_probs), tokens, tokens + rows, device_data(logits), rows, V,
                     device_data(banned), banned.numel(), device_data(eos_banned_there), eos, temperature, top_k,
                     device_data(draws));
  const Tensor<T> values = log_probs.to(Device::cpu());
  const IndexTensor ids = tokens_and_found.to(Device::cpu());
  for (index_t r = 0; r < rows; ++r) {
    found[r] = static_cast<std::size_t>(ids.data()[rows + r]);
    if (found[r] > 0) top[r] = {values.data()[r], ids.data()[r]};
  }
}

/// What sample_token reuses from row to row (one per thread).
struct SampleScratch {
  std::vector<double> p, values;
  std::vector<index_t> order;
};

/// Draws one token from a row of V logits as PredictOptions asks (temperature, top_k,
/// top_p; the forbidden tokens never) with one uniform from `gen`, into top[0] with its
/// model log P (as top_log_probs). Returns 0 when no token is allowed, else 1.
template <typename T>
std::size_t sample_token(T* logits, index_t V, TopToken<T>* top, const std::vector<index_t>& forbidden,
                         const PredictOptions& options, Generator& gen, SampleScratch& scratch) {
  const T normaliser = log_normaliser(logits, V);
  forbid(logits, forbidden);
  const T max = ConstVecMap<T>(logits, V).maxCoeff();
  if (!(max > -std::numeric_limits<T>::infinity())) return 0;  // nothing allowed (or NaN)
  // p_v ∝ exp((x_v − max) / temperature), in double; 0 for the forbidden tokens.
  std::vector<double>& p = scratch.p;
  p.resize(static_cast<std::size_t>(V));
  index_t allowed = 0;
  for (index_t v = 0; v < V; ++v) {
    const bool ok = logits[v] != -std::numeric_limits<T>::infinity();
    p[static_cast<std::size_t>(v)] = ok ? std::exp(static_cast<double>(logits[v] - max) / options.temperature) : 0.0;
    allowed += ok ? 1 : 0;
  }
  if (options.top_k > 0 && options.top_k < allowed) {
    // The tokens at least as probable as the k-th are kept (ties with it included, as
    // Hugging Face's TopKLogitsWarper keeps them).
    std::vector<double>& values = scratch.values;
    values.assign(p.begin(), p.end());
    const auto kth = values.begin() + (options.top_k - 1);
    std::nth_element(values.begin(), kth, values.end(), std::greater<double>());
    const double threshold = *kth;
    for (double& q : p)
      if (q < threshold) q = 0.0;
  }
  if (options.top_p < 1.0) {
    // The most probable tokens, best first (ties: the lower token first), until they
    // hold top_p of what is left; at least one.
    std::vector<index_t>& order = scratch.order;
    order.clear();
    double total = 0.0;
    for (index_t v = 0; v < V; ++v)
      if (p[static_cast<std::size_t>(v)] > 0.0) order.push_back(v), total += p[static_cast<std::size_t>(v)];
    std::stable_sort(order.begin(), order.end(), [&](index_t a, index_t b) {
      return p[static_cast<std::size_t>(a)] > p[static_cast<std::size_t>(b)];
    });
    double kept = 0.0;
    std::size_t n = 0;
    while (n < order.size() && (n == 0 || kept < options.top_p * total))
      kept += p[static_cast<std::size_t>(order[n++])];
    for (std::size_t i = n; i < order.size(); ++i) p[static_cast<std::size_t>(order[i])] = 0.0;
  }
  double total = 0.0;
  for (const double q : p) total += q;
  // The token where the running sum passes u · total; the last one kept when rounding
  // leaves the sum short.
  const double u = gen.uniform() * total;
  double running = 0.0;
  index_t chosen = -1;
  for (index_t v = 0; v < V; ++v) {
    const double q = p[static_cast<std::size_t>(v)];
    if (q <= 0.0) continue;
    chosen = v;
    running += q;
    if (running > u) break;
  }
  top[0] = {logits[chosen] - normaliser, chosen};
  return 1;
}

/// The tokens a hypothesis may not take next: the reserved tokens that are not <eos>
/// (<pad>, <bos>: a translation never holds them), <eos> before min_length tokens, and
/// each token that would make an n-gram (n = no_repeat_ngram_size) the hypothesis
/// already has.
inline void forbidden_tokens(const std::vector<index_t>& tokens, const PredictOptions& options, index_t eos,
                             const std::vector<index_t>& never, std::vector<index_t>& out) {
  out.assign(never.begin(), never.end());
  const auto length = static_cast<index_t>(tokens.size());
  if (length < options.min_length) out.push_back(eos);
  const index_t n = options.no_repeat_ngram_size;
  if (n < 1 || length < n - 1) return;
  // Each earlier n-gram whose first n − 1 tokens are the hypothesis' last n − 1 forbids its last.
  for (index_t start = 0; start + n - 1 < length; ++start)
    if (std::equal(tokens.begin() + start, tokens.begin() + start + n - 1, tokens.end() - (n - 1)))
      out.push_back(tokens[static_cast<std::size_t>(start + n - 1)]);
}

/// 64 bits from a seed and a stream number (SplitMix64's finaliser), for a sample's own
/// generator.
inline std::uint64_t mix_seed(std::uint64_t seed, std::uint64_t stream) {
  std::uint64_t z = seed + 0x9e3779b97f4a7c15ULL * (stream + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

}  // namespace detail

}  // namespace heed

#include "heed/detail/header_end.hpp"
