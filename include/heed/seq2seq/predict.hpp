// heed/seq2seq/predict.hpp — d2l's predict_seq2seq (9.7.5) for a batch of sentences,
// greedy or with beam search (9.8), through the decoder's incremental state.
//
//   auto t = heed::predict_seq2seq(*net, "he's calm .", src_vocab, tgt_vocab, /*num_steps=*/10);
//   // t.text == "il est calme .", t.cross_attention: (layers, heads, output steps, source steps)
//
//   heed::PredictOptions options;
//   options.beam_size = 4;                 // beam search; options.n_best hypotheses kept
//   auto all = heed::predict_seq2seq(*net, {"go .", "i lost ."}, src_vocab, tgt_vocab, 10, options);
//
// Sentences go through preprocess_nmt (d2l only lowercases; the rest is a no-op on
// already tokenised text and lets users type "He's calm."), are split on spaces, get
// <eos>, and are padded or cut to num_steps with their untruncated length as valid
// length, as d2l does. Decoding feeds one token per step; the decoder keeps its own
// state (the GRU hidden state, the Transformer's key/value caches), so a step costs
// one position, not the whole prefix. A hypothesis ends at <eos> or after num_steps
// tokens. Greedy decoding equals beam search with beam_size 1. A sentence that is done
// leaves the batch, so later steps cost only the sentences still decoding; each step
// takes its best tokens from the logits in one pass (no log-softmax tensor, no sort);
// with save_attention_weights off, no attention weights are computed at all. Each call
// multiplies by its weights packed once (a PackedWeightsGuard, heed/ops/packed_gemm.hpp;
// hold one around a loop of calls to pack them once for all). With
// options.micro_batches = k and no attention weights kept, the sentences are decoded as
// k groups on parallel threads, each sentence's translation that of one batch.
//
// Beam search keeps, per sentence, the beam_size best partial hypotheses by summed
// log-probability; a hypothesis that emits <eos> is finished and scored
// log P / L^length_penalty (L its length counting <eos>, d2l's 9.8 rule); search stops
// when every sentence has n_best finished hypotheses that no live one can still beat,
// or after max_length steps (num_steps unless set).
//
// Sampling (options.sample) draws each token from the softmax of logits / temperature,
// cut to the top_k most probable tokens and then to the fewest whose probabilities sum
// to top_p (nucleus sampling), renormalised; beam_size K then draws K independent
// samples per sentence, ranked as beam search ranks its hypotheses. The draws come from
// one stream per sample, seeded from options.generator (default_generator() when null)
// and the sentence's index, so that they depend neither on the thread count nor on
// micro_batches. Greedy, beam search and sampling alike can forbid <eos> before
// min_length tokens, and any token that would repeat an n-gram of no_repeat_ngram_size
// tokens already in the hypothesis (as fairseq's and Hugging Face's options of those
// names). log_prob is always the model's own: Σ log softmax(logits) of the chosen tokens,
// whatever the temperature, cut-offs and forbidden tokens. A hypothesis left with no
// allowed token ends there.
#pragma once

#include "heed/detail/header_begin.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <exception>
#include <functional>
#include <initializer_list>
#include <limits>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "heed/core/generator.hpp"
#include "heed/detail/parallel.hpp"
#include "heed/ops/softmax.hpp"
#include "heed/seq2seq/bahdanau_decoder.hpp"
#include "heed/seq2seq/data.hpp"
#include "heed/seq2seq/gru_encoder.hpp"
#include "heed/transformer/decoder.hpp"

namespace heed {

struct PredictOptions {
  /// The most steps decoded (max_length, or num_steps when it is 0) for a decoder with no
  /// limit of its own (the GRU); the Transformer's is its positional table's max_len.
  static constexpr index_t kMaxLength = index_t(1) << 16;
  /// The largest length_penalty: L^α stays finite for every length up to kMaxLength.
  static constexpr double kMaxLengthPenalty = 10.0;

  index_t beam_size = 1;         // 1: greedy
  index_t n_best = 1;            // hypotheses returned per sentence (<= beam_size)
  double length_penalty = 0.75;  // α in log P / L^α (beam search only), in [0, kMaxLengthPenalty]
  bool save_attention_weights = true;
  // The sentences are decoded as this many groups, in order, each on a thread of its
  // own when attention weights are not kept (one after another when they are, or on a
  // device). The groups, not the thread count, fix the results.
  index_t micro_batches = 1;
  index_t min_length = 0;            // tokens before <eos> is allowed
  index_t max_length = 0;            // tokens at most, <eos> not counted; 0: num_steps
  index_t no_repeat_ngram_size = 0;  // no n-gram of this size twice in a hypothesis; 0: off
  bool sample = false;               // draw tokens instead of taking the best (see above)
  double temperature = 1.0;          // sampling: logits / temperature
  index_t top_k = 0;                 // sampling: only the k most probable tokens; 0: all
  double top_p = 1.0;                // sampling: only the fewest tokens holding this much probability
  Generator* generator = nullptr;    // sampling: seeds the draws; default_generator() when null
};

template <typename T>
struct Hypothesis {
  std::string text;             // the tokens joined by spaces, without <eos>
  std::vector<index_t> tokens;  // without <eos>
  double log_prob = 0.0;        // Σ log P of the chosen tokens, <eos> included when emitted
  double score = 0.0;           // log_prob for greedy; log_prob / L^α for beam search
  // Encoder-decoder attention of each output step (the <eos> step included), one
  // (num_layers, num_heads, output steps, source steps) tensor; the Bahdanau decoder
  // has one layer and one head. Source steps are the sentence's valid length.
  Tensor<T> cross_attention;
  // The decoder's self-attention, (num_layers, num_heads, output steps, output steps),
  // zero above the diagonal; undefined for decoders without one (Bahdanau).
  Tensor<T> self_attention;
};

template <typename T>
struct Translation : Hypothesis<T> {
  std::vector<std::string> source_tokens;  // with <eos>, before padding
  // The encoder's self-attention, (num_layers, num_heads, source steps, source
  // steps); undefined for encoders without one (the GRU).
  Tensor<T> encoder_attention;
  std::vector<Hypothesis<T>> n_best;  // best first; n_best[0] is *this
};

namespace detail {

// ---- what differs between decoders: the weights to keep, reordering the state ----

/// The most positions a part (encoder or decoder) reads in one sequence: its positional
/// table's length, or PredictOptions::kMaxLength for one without positions.
template <typename Part, typename = void>
struct has_positions : std::false_type {};
template <typename Part>
struct has_positions<Part, std::void_t<decltype(std::declval<const Part&>().pos_encoding.max_len())>> : std::true_type {
};
template <typename Part>
index_t max_positions(const Part& part) {
  if constexpr (has_positions<Part>::value)
    return std::min(part.pos_encoding.max_len(), PredictOptions::kMaxLength);
  else
    return PredictOptions::kMaxLength;
}

template <typename T>
std::vector<Tensor<T>> step_cross_attention(const Seq2SeqAttentionDecoder<T>& decoder) {
  return {decoder.attention_weights().back().unsqueeze(1)};  // (batch, 1, 1, num_enc_steps)
}
template <typename T>
std::vector<Tensor<T>> step_cross_attention(const TransformerDecoder<T>& decoder) {
  return decoder.cross_attention_weights();  // per layer (batch, heads, 1, num_enc_steps)
}
template <typename T>
std::vector<Tensor<T>> step_self_attention(const Seq2SeqAttentionDecoder<T>&) {
  return {};
}
template <typename T>
std::vector<Tensor<T>> step_self_attention(const TransformerDecoder<T>& decoder) {
  return decoder.self_attention_weights();  // per layer (batch, heads, 1, steps so far)
}
template <typename T>
std::vector<Tensor<T>> encoder_attention(const Seq2SeqEncoder<T>&) {
  return {};
}
template <typename T>
std::vector<Tensor<T>> encoder_attention(const TransformerEncoder<T>& encoder) {
  return encoder.attention_weights();  // per layer (batch, heads, steps, steps)
}

/// Keeps the rows `index` of the batch, in that order: beams follow their parents.
template <typename T>
void reorder_state(Seq2SeqAttentionState<T>& state, const IndexTensor& index) {
  state.enc_outputs = index_select(state.enc_outputs, 0, index);
  state.hidden_state = index_select(state.hidden_state, 1, index);
  if (state.enc_valid_lens.defined()) state.enc_valid_lens = index_select(state.enc_valid_lens, 0, index);
  state.projected_keys = index_select(state.projected_keys, 0, index);
}
template <typename T>
void reorder_state(TransformerDecoderState<T>& state, const IndexTensor& index) {
  state.enc_outputs = index_select(state.enc_outputs, 0, index);
  if (state.enc_valid_lens.valid_lens().defined())
    state.enc_valid_lens.with_valid_lens(index_select(state.enc_valid_lens.valid_lens(), 0, index));
  for (auto* caches : {&state.key_values, &state.cross_key_values})
    for (KVCache<T>& cache : *caches)
      if (!cache.empty()) {
        cache.keys = index_select(cache.keys, 0, index);
        cache.values = index_select(cache.values, 0, index);
      }
}

/// Row `row` of each layer's (batch, heads, 1, k) weights, as (layers, heads, k).
template <typename T>
Tensor<T> rows_of(const std::vector<Tensor<T>>& per_layer, index_t row) {
  std::vector<Tensor<T>> layers;
  for (const Tensor<T>& w : per_layer) layers.push_back(select(select(w, 0, row), 1, 0));
  return stack(layers, 0);
}

/// Per-step (layers, heads, k_t) weights → (layers, heads, steps, width), zero-padded.
template <typename T>
Tensor<T> stack_steps(const std::vector<Tensor<T>>& steps, index_t width) {
  if (steps.empty()) return Tensor<T>();
  const index_t layers = steps[0].shape()[0], heads = steps[0].shape()[1], n = static_cast<index_t>(steps.size());
  Tensor<T> out = zeros<T>({layers, heads, n, width});
  for (index_t t = 0; t < n; ++t) {
    const Tensor<T>& w = steps[static_cast<std::size_t>(t)];
    const index_t k = std::min(w.shape()[2], width);
    for (index_t l = 0; l < layers; ++l)
      for (index_t h = 0; h < heads; ++h)
        std::copy(w.data() + (l * heads + h) * w.shape()[2], w.data() + (l * heads + h) * w.shape()[2] + k,
                  out.data() + ((l * heads + h) * n + t) * width);
  }
  return out;
}

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
  for (index_t v = 0; v < V; ++v) {
    if (any_forbidden && logits[v] == -std::numeric_limits<T>::infinity()) continue;
    const T log_prob = logits[v] - normaliser;
    if (n == count && !(log_prob > top[n - 1].log_prob)) continue;
    std::size_t at = n < count ? n++ : n - 1;  // the last slot is dropped when full
    for (; at > 0 && log_prob > top[at - 1].log_prob; --at) top[at] = top[at - 1];
    top[at] = {log_prob, v};
  }
  return n;
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

/// Turns off keeping attention weights in a part (an encoder or decoder that has the
/// switch) for its lifetime, when they are not wanted, and back on after if it was.
template <typename Part>
class NoAttentionWeightsScope {
 public:
  NoAttentionWeightsScope(Part& part, bool wanted) : part_(part) {
    if constexpr (has_switch<Part>(0)) {
      restore_ = !wanted && part.keeps_attention_weights();
      if (restore_) part.keep_attention_weights(false);
    }
  }
  ~NoAttentionWeightsScope() {
    if constexpr (has_switch<Part>(0))
      if (restore_) part_.keep_attention_weights(true);
  }
  NoAttentionWeightsScope(const NoAttentionWeightsScope&) = delete;
  NoAttentionWeightsScope& operator=(const NoAttentionWeightsScope&) = delete;

 private:
  template <typename P>
  static constexpr auto has_switch(int) -> decltype(std::declval<const P&>().keeps_attention_weights(), true) {
    return true;
  }
  template <typename P>
  static constexpr bool has_switch(long) {
    return false;
  }
  Part& part_;
  bool restore_ = false;
};

/// A hypothesis being decoded: its tokens and the weights of each of its steps.
template <typename T>
struct LiveHypothesis {
  std::vector<index_t> tokens;
  double log_prob = 0.0;
  bool ended = false;                  // emitted <eos>
  index_t sample = 0;                  // sampling: which of the sentence's samples (its generator)
  std::vector<Tensor<T>> cross, self;  // per step: (layers, heads, k)
  index_t length() const { return static_cast<index_t>(tokens.size()) + (ended ? 1 : 0); }
};

}  // namespace detail

namespace detail {

/// predict_seq2seq's work for the sentences [first, last) of all_sources (tokens, without
/// <eos>), into the
/// same places of all_results, under the caller's settings (no grad, eval mode, packed
/// weights, attention weights kept or not). Sample j of sentence i draws from a
/// generator seeded with mix_seed(sample_seed, i · beam_size + j).
template <typename T, typename Net>
void decode_sentences(Net& net, const std::vector<std::vector<std::string>>& all_sources, std::size_t first,
                      std::size_t last, const Vocab& src_vocab, const Vocab& tgt_vocab, index_t num_steps,
                      const PredictOptions& options, std::uint64_t sample_seed,
                      std::vector<Translation<T>>& all_results) {
  const std::vector<std::string>* sources = all_sources.data() + first;
  Translation<T>* results = all_results.data() + first;
  const index_t batch = static_cast<index_t>(last - first), K = options.beam_size;
  const index_t eos = tgt_vocab["<eos>"];
  const index_t max_steps = options.max_length > 0 ? options.max_length : num_steps;
  const bool sampling = options.sample;
  std::vector<Generator> generators;                                      // sampling: per sentence and sample
  if (sampling) generators.reserve(static_cast<std::size_t>(batch * K));  // sized by predict_seq2seq_tokens
  if (sampling)
    for (index_t i = 0; i < batch * K; ++i)
      generators.emplace_back(mix_seed(sample_seed, static_cast<std::uint64_t>(first) * static_cast<std::uint64_t>(K) +
                                                        static_cast<std::uint64_t>(i)));

  // ---- encode the batch once ----
  IndexTensor enc_X = detail::make_tensor<std::int64_t>(Shape{batch, num_steps});
  IndexTensor enc_valid_len = detail::make_tensor<std::int64_t>(Shape{batch});
  for (index_t b = 0; b < batch; ++b) {
    Translation<T>& r = results[static_cast<std::size_t>(b)];
    r.source_tokens = sources[static_cast<std::size_t>(b)];
    r.source_tokens.push_back("<eos>");
    std::vector<index_t> ids = src_vocab[r.source_tokens];
    enc_valid_len.data()[b] = static_cast<index_t>(ids.size());
    ids = truncate_pad(ids, num_steps, src_vocab["<pad>"]);
    std::copy(ids.begin(), ids.end(), enc_X.data() + b * num_steps);
  }
  auto enc_outputs = net.encoder()(enc_X, enc_valid_len);
  const std::vector<Tensor<T>> enc_weights = detail::encoder_attention(net.encoder());
  for (index_t b = 0; b < batch && options.save_attention_weights; ++b) {
    if (enc_weights.empty() || !enc_weights[0].defined()) break;
    const index_t n = std::min(enc_valid_len.data()[b], num_steps);
    std::vector<Tensor<T>> layers;
    for (const Tensor<T>& w : enc_weights) layers.push_back(narrow(narrow(select(w, 0, b), 1, 0, n), 2, 0, n));
    results[static_cast<std::size_t>(b)].encoder_attention = stack(layers, 0);
  }

  // ---- decode active sentences × K beams: row i·K + k is beam k of sentence active[i] ----
  // A sentence that is done leaves the batch, so the steps after cost only the rows
  // still decoding.
  auto state = net.decoder().init_state(enc_outputs, enc_valid_len);
  if (K > 1) {
    IndexTensor expand = detail::make_tensor<std::int64_t>(Shape{batch * K});
    for (index_t i = 0; i < batch * K; ++i) expand.data()[i] = i / K;
    detail::reorder_state(state, expand);
  }

  using Live = detail::LiveHypothesis<T>;
  std::vector<std::vector<Live>> live(static_cast<std::size_t>(batch));
  std::vector<std::vector<Live>> finished(static_cast<std::size_t>(batch));
  // Beam search starts from one hypothesis, <bos>, in row i·K; sampling from K.
  for (auto& beams : live) {
    beams.resize(sampling ? static_cast<std::size_t>(K) : 1);
    for (std::size_t k = 0; k < beams.size(); ++k) beams[k].sample = static_cast<index_t>(k);
  }
  std::vector<index_t> active(static_cast<std::size_t>(batch));
  for (index_t b = 0; b < batch; ++b) active[static_cast<std::size_t>(b)] = b;
  auto score_of = [&](const Live& h, index_t length) {
    return K == 1 ? h.log_prob : h.log_prob / std::pow(static_cast<double>(length), options.length_penalty);
  };
  IndexTensor dec_X = full<std::int64_t>({batch * K, 1}, tgt_vocab["<bos>"]);
  const index_t V = tgt_vocab.size();
  // Only the best min(K, V) tokens of a beam can be among the K best continuations; a
  // sample continues with one.
  const auto per_row = static_cast<std::size_t>(sampling ? 1 : std::min(K, V));
  const std::vector<index_t> never = {tgt_vocab["<pad>"], tgt_vocab["<bos>"]};
  std::vector<detail::TopToken<T>> top;
  std::vector<std::size_t> found;
  std::vector<std::vector<index_t>> forbidden;  // per row
  for (index_t step = 0; step < max_steps && !active.empty(); ++step) {
    Tensor<T> logits = net.decoder()(dec_X, state);  // (rows, 1, V)
    if (!logits.device().is_cpu()) logits = logits.to(Device::cpu());
    const std::vector<Tensor<T>> cross =
        options.save_attention_weights ? detail::step_cross_attention(net.decoder()) : std::vector<Tensor<T>>();
    const std::vector<Tensor<T>> self =
        options.save_attention_weights ? detail::step_self_attention(net.decoder()) : std::vector<Tensor<T>>();
    const auto num_active = static_cast<index_t>(active.size());
    // The best tokens of every live row first, the rows split across threads (each row
    // on one thread: the same bits for any thread count).
    top.resize(static_cast<std::size_t>(num_active * K) * per_row);
    found.assign(static_cast<std::size_t>(num_active * K), 0);
    forbidden.resize(static_cast<std::size_t>(num_active * K));
    const auto hypothesis = [&](index_t row) -> const Live* {  // the live hypothesis of a row, if any
      const auto& beams = live[static_cast<std::size_t>(active[static_cast<std::size_t>(row / K)])];
      return row % K < static_cast<index_t>(beams.size()) ? &beams[static_cast<std::size_t>(row % K)] : nullptr;
    };
    for (index_t row = 0; row < num_active * K; ++row) {
      std::vector<index_t>& f = forbidden[static_cast<std::size_t>(row)];
      f.clear();
      if (const Live* h = hypothesis(row)) detail::forbidden_tokens(h->tokens, options, eos, never, f);
    }
    const index_t rows_per_thread = std::max<index_t>(1, detail::kParallelGrain / std::max<index_t>(V, 1));
    detail::parallel_for(num_active * K, rows_per_thread, [&](index_t first_row, index_t last_row) {
      detail::SampleScratch scratch;
      for (index_t row = first_row; row < last_row; ++row) {
        const auto r = static_cast<std::size_t>(row);
        const Live* h = hypothesis(row);
        if (!h) continue;
        T* row_logits = logits.data() + row * V;
        if (sampling) {
          Generator& gen =
              generators[static_cast<std::size_t>(active[static_cast<std::size_t>(row / K)] * K + h->sample)];
          found[r] = detail::sample_token(row_logits, V, top.data() + r, forbidden[r], options, gen, scratch);
        } else {
          found[r] = detail::top_log_probs(row_logits, V, top.data() + r * per_row, per_row, forbidden[r]);
        }
      }
    });
    std::vector<index_t> parents(static_cast<std::size_t>(num_active * K)), tokens(parents.size());
    std::vector<index_t> still_active;
    for (index_t i = 0; i < num_active; ++i) {
      const index_t b = active[static_cast<std::size_t>(i)];
      auto& beams = live[static_cast<std::size_t>(b)];
      // Candidates (log P, beam, token), from the live hypotheses only: the spare rows
      // of a sentence with fewer than K of them decode filler.
      struct Candidate {
        double log_prob;
        index_t beam, token;
      };
      std::vector<Candidate> candidates;
      const auto num_live = static_cast<index_t>(beams.size());
      for (index_t k = 0; k < num_live; ++k) {
        const auto row = static_cast<std::size_t>(i * K + k);
        for (std::size_t j = 0; j < found[row]; ++j) {
          const detail::TopToken<T>& t = top[row * per_row + j];
          candidates.push_back(
              {beams[static_cast<std::size_t>(k)].log_prob + static_cast<double>(t.log_prob), k, t.token});
        }
      }
      // Samples each go on with their own draw, in order; beams compete.
      if (!sampling)
        std::stable_sort(candidates.begin(), candidates.end(),
                         [](const Candidate& a, const Candidate& c) { return a.log_prob > c.log_prob; });
      // A hypothesis with no allowed token ends as it is.
      for (index_t k = 0; k < num_live; ++k)
        if (found[static_cast<std::size_t>(i * K + k)] == 0)
          finished[static_cast<std::size_t>(b)].push_back(beams[static_cast<std::size_t>(k)]);
      std::vector<Live> next;
      for (const Candidate& c : candidates) {
        if (static_cast<index_t>(next.size()) == K) break;
        Live h = beams[static_cast<std::size_t>(c.beam)];
        h.log_prob = c.log_prob;
        if (!cross.empty()) h.cross.push_back(detail::rows_of(cross, i * K + c.beam));
        if (!self.empty()) h.self.push_back(detail::rows_of(self, i * K + c.beam));
        if (c.token == eos) {
          h.ended = true;
          finished[static_cast<std::size_t>(b)].push_back(std::move(h));
          if (K == 1) break;  // greedy: the sentence is done
          continue;
        }
        h.tokens.push_back(c.token);
        parents[static_cast<std::size_t>(i * K) + next.size()] = i * K + c.beam;
        tokens[static_cast<std::size_t>(i * K) + next.size()] = c.token;
        next.push_back(std::move(h));
      }
      // Spare beams keep decoding something harmless.
      for (index_t k = static_cast<index_t>(next.size()); k < K; ++k) {
        parents[static_cast<std::size_t>(i * K + k)] = i * K;
        tokens[static_cast<std::size_t>(i * K + k)] = eos;
      }
      // Done when n_best hypotheses have ended and no live one can beat the worst of
      // them (log P only falls; with α > 0 the length term can still help it, so
      // compare against the best score a live hypothesis could reach by num_steps).
      auto& ended = finished[static_cast<std::size_t>(b)];
      bool done = next.empty();
      if (!done && !sampling && static_cast<index_t>(ended.size()) >= options.n_best) {
        std::vector<double> scores;
        for (const Live& h : ended) scores.push_back(score_of(h, h.length()));
        std::sort(scores.rbegin(), scores.rend());
        const double worst_kept = scores[static_cast<std::size_t>(options.n_best - 1)];
        bool can_beat = false;
        for (const Live& h : next) {
          const double best_possible =
              K == 1 ? h.log_prob : h.log_prob / std::pow(static_cast<double>(max_steps + 1), options.length_penalty);
          can_beat = can_beat || best_possible > worst_kept;
        }
        done = !can_beat;
      }
      beams = std::move(next);
      if (!done) still_active.push_back(i);
    }
    // The next step's rows: the beams of the sentences still decoding, each row's state
    // taken from its parent.
    const auto rows = static_cast<index_t>(still_active.size()) * K;
    IndexTensor index = detail::make_tensor<std::int64_t>(Shape{rows});
    dec_X = detail::make_tensor<std::int64_t>(Shape{rows, 1});
    bool identity = rows == num_active * K;
    for (std::size_t j = 0; j < still_active.size(); ++j)
      for (index_t k = 0; k < K; ++k) {
        const auto from = static_cast<std::size_t>(still_active[j] * K + k);
        const index_t row = static_cast<index_t>(j) * K + k;
        index.data()[row] = parents[from];
        dec_X.data()[row] = tokens[from];
        identity = identity && parents[from] == row;
      }
    std::vector<index_t> next_active;
    for (const index_t i : still_active) next_active.push_back(active[static_cast<std::size_t>(i)]);
    active = std::move(next_active);
    if (!active.empty() && !identity) detail::reorder_state(state, index);
  }

  // ---- collect: finished hypotheses, else the live ones cut at num_steps ----
  for (index_t b = 0; b < batch; ++b) {
    auto& ended = finished[static_cast<std::size_t>(b)];
    if (static_cast<index_t>(ended.size()) < options.n_best)
      for (Live& h : live[static_cast<std::size_t>(b)]) ended.push_back(std::move(h));
    std::vector<std::pair<double, std::size_t>> ranked;
    for (std::size_t i = 0; i < ended.size(); ++i)
      ranked.emplace_back(score_of(ended[i], std::max<index_t>(ended[i].length(), 1)), i);
    std::stable_sort(ranked.begin(), ranked.end(), [](const auto& a, const auto& c) { return a.first > c.first; });
    Translation<T>& r = results[static_cast<std::size_t>(b)];
    const index_t src_len = std::min(enc_valid_len.data()[b], num_steps);
    for (std::size_t i = 0; i < ranked.size() && static_cast<index_t>(i) < options.n_best; ++i) {
      Live& h = ended[ranked[i].second];
      Hypothesis<T> out;
      out.tokens = h.tokens;
      std::vector<std::string> words;
      for (index_t t : h.tokens) words.push_back(tgt_vocab.to_tokens(t));
      for (std::size_t w = 0; w < words.size(); ++w) out.text += (w ? " " : "") + words[w];
      out.log_prob = h.log_prob;
      out.score = ranked[i].first;
      if (!h.cross.empty()) out.cross_attention = narrow(detail::stack_steps(h.cross, num_steps), 3, 0, src_len);
      if (!h.self.empty()) out.self_attention = detail::stack_steps(h.self, static_cast<index_t>(h.self.size()));
      r.n_best.push_back(std::move(out));
    }
    static_cast<Hypothesis<T>&>(r) = r.n_best.front();
  }
}

}  // namespace detail

/// Translates a batch of sentences given as tokens, as they are (no preprocess_nmt, no
/// splitting: subword pieces, heed/seq2seq/sentencepiece.hpp, or words split your own way);
/// <eos> is appended to each. Returns one Translation per sentence.
template <typename T = void, typename Net>
std::vector<Translation<detail::model_type_or<T, Net>>> predict_seq2seq_tokens(
    Net& net, const std::vector<std::vector<std::string>>& src_tokens, const Vocab& src_vocab, const Vocab& tgt_vocab,
    index_t num_steps, const PredictOptions& options = {}) {
  using U = detail::model_type_or<T, Net>;
  HEED_CHECK(num_steps > 0, ValueError, "predict_seq2seq: num_steps must be positive, got ", num_steps);
  HEED_CHECK(options.beam_size >= 1 && options.n_best >= 1 && options.n_best <= options.beam_size, ValueError,
             "predict_seq2seq: need 1 <= n_best <= beam_size, got n_best = ", options.n_best,
             ", beam_size = ", options.beam_size);
  HEED_CHECK(options.micro_batches >= 1, ValueError, "predict_seq2seq: micro_batches must be >= 1, got ",
             options.micro_batches);
  HEED_CHECK(options.length_penalty >= 0.0 && options.length_penalty <= PredictOptions::kMaxLengthPenalty, ValueError,
             "predict_seq2seq: length_penalty must be in [0, ", PredictOptions::kMaxLengthPenalty, "], got ",
             options.length_penalty);
  const index_t max_steps = options.max_length > 0 ? options.max_length : num_steps;
  HEED_CHECK(options.max_length >= 0, ValueError, "predict_seq2seq: max_length must be >= 0 (0: num_steps), got ",
             options.max_length);
  // Each step feeds the decoder the next position, and the source is num_steps long.
  const index_t decoder_limit = detail::max_positions(net.decoder()),
                encoder_limit = detail::max_positions(net.encoder());
  HEED_CHECK(max_steps <= decoder_limit, ValueError,
             "predict_seq2seq: ", options.max_length > 0 ? "max_length" : "num_steps (max_length 0)", " = ", max_steps,
             " steps is more than the decoder's ", decoder_limit, " positions");
  HEED_CHECK(num_steps <= encoder_limit, ValueError, "predict_seq2seq: num_steps = ", num_steps,
             " is more than the encoder's ", encoder_limit, " positions");
  HEED_CHECK(options.min_length >= 0 && options.min_length <= max_steps, ValueError,
             "predict_seq2seq: min_length must be in [0, ", max_steps, "] (the most steps decoded), got ",
             options.min_length);
  HEED_CHECK(options.no_repeat_ngram_size >= 0, ValueError,
             "predict_seq2seq: no_repeat_ngram_size must be >= 0 (0: off), got ", options.no_repeat_ngram_size);
  if (options.sample) {
    HEED_CHECK(options.temperature > 0.0 && std::isfinite(options.temperature), ValueError,
               "predict_seq2seq: temperature must be positive and finite, got ", options.temperature);
    HEED_CHECK(options.top_k >= 0, ValueError, "predict_seq2seq: top_k must be >= 0 (0: every token), got ",
               options.top_k);
    HEED_CHECK(options.top_p > 0.0 && options.top_p <= 1.0, ValueError,
               "predict_seq2seq: top_p must be in (0, 1], got ", options.top_p);
  }
  for (const char* token : {"<pad>", "<bos>", "<eos>"}) {
    HEED_CHECK(src_vocab.contains(token), ValueError, "predict_seq2seq: the source vocabulary has no ", token);
    HEED_CHECK(tgt_vocab.contains(token), ValueError, "predict_seq2seq: the target vocabulary has no ", token);
  }
  // Every row of a step (sentences × beam_size) holds a row of logits, its best tokens
  // and, when sampling, a generator: refused before anything is allocated when they
  // cannot fit.
  const index_t rows = detail::checked_mul(static_cast<index_t>(src_tokens.size()), options.beam_size,
                                           "predict_seq2seq", " (sentences × beam_size)");
  const index_t V = tgt_vocab.size();
  detail::check_fits_in_memory(detail::checked_mul(rows, V, "predict_seq2seq", " (rows × target vocabulary)"),
                               sizeof(U), "predict_seq2seq", " (a step's logits: sentences × beam_size × ", V,
                               " target tokens)");
  detail::check_fits_in_memory(
      detail::checked_mul(rows, std::min(options.beam_size, V), "predict_seq2seq", " (rows × best tokens)"),
      sizeof(detail::TopToken<U>), "predict_seq2seq", " (a step's best tokens of sentences × beam_size rows)");
  if (options.sample)
    detail::check_fits_in_memory(rows, sizeof(Generator), "predict_seq2seq",
                                 " (a generator for each of sentences × beam_size samples)");
  std::vector<Translation<U>> results(src_tokens.size());
  if (src_tokens.empty()) return results;
  // One draw from the caller's generator seeds every sample of this call (see the top).
  const std::uint64_t sample_seed =
      options.sample ? (options.generator ? *options.generator : default_generator()).next_u64() : 0;
  NoGradGuard no_grad;
  PackedWeightsGuard packed_weights;  // every step multiplies by the same weights
  net.eval();
  const detail::NoAttentionWeightsScope encoder_weights(net.encoder(), options.save_attention_weights);
  const detail::NoAttentionWeightsScope decoder_weights(net.decoder(), options.save_attention_weights);
  const std::size_t count = src_tokens.size();
  const auto parts = static_cast<std::size_t>(std::min<index_t>(options.micro_batches, static_cast<index_t>(count)));
  if (parts == 1) {
    detail::decode_sentences<U>(net, src_tokens, 0, count, src_vocab, tgt_vocab, num_steps, options, sample_seed,
                                results);
    return results;
  }
  // The groups run on parallel threads, with this thread's settings, unless they keep
  // attention weights: the modules keep those in members, so such groups take turns (as
  // on a device). Parallel groups keep no records at all (detail::keeps_forward_records),
  // not even the empty ones that would race. The first group's error, if any, is
  // rethrown once all have finished.
  const bool parallel = !options.save_attention_weights && net.device().is_cpu();
  detail::PackedWeights* const packed = detail::current_packed_weights();
  std::vector<std::exception_ptr> errors(parts);
  const auto run_part = [&](index_t part) {
    const auto at = static_cast<std::size_t>(part);
    try {
      const NoGradGuard no_grad_here;
      const detail::PackedWeightsScope packed_here(packed);
      const detail::ForwardRecordsScope records_here(!parallel && detail::keeps_forward_records());
      detail::decode_sentences<U>(net, src_tokens, count * at / parts, count * (at + 1) / parts, src_vocab, tgt_vocab,
                                  num_steps, options, sample_seed, results);
    } catch (...) {
      errors[at] = std::current_exception();
    }
  };
  if (parallel)
    detail::parallel_tasks(static_cast<index_t>(parts), detail::kParallelTaskWork, run_part);
  else
    for (std::size_t part = 0; part < parts; ++part) run_part(static_cast<index_t>(part));
  for (const std::exception_ptr& error : errors)
    if (error) std::rethrow_exception(error);
  return results;
}

/// Translates a batch of sentences, each preprocess_nmt'ed and split on spaces (see the
/// top of this file); returns one Translation per sentence.
template <typename T = void, typename Net>
std::vector<Translation<detail::model_type_or<T, Net>>> predict_seq2seq(Net& net,
                                                                        const std::vector<std::string>& src_sentences,
                                                                        const Vocab& src_vocab, const Vocab& tgt_vocab,
                                                                        index_t num_steps,
                                                                        const PredictOptions& options = {}) {
  std::vector<std::vector<std::string>> tokens;
  tokens.reserve(src_sentences.size());
  for (const std::string& sentence : src_sentences) tokens.push_back(detail::split(preprocess_nmt(sentence), ' '));
  return predict_seq2seq_tokens<T>(net, tokens, src_vocab, tgt_vocab, num_steps, options);
}

/// A braced list of sentences, predict_seq2seq(net, {"go .", "i lost ."}, ...): without
/// this overload the list would be ambiguous between a string and a vector of them.
template <typename T = void, typename Net>
std::vector<Translation<detail::model_type_or<T, Net>>> predict_seq2seq(
    Net& net, std::initializer_list<std::string> src_sentences, const Vocab& src_vocab, const Vocab& tgt_vocab,
    index_t num_steps, const PredictOptions& options = {}) {
  return predict_seq2seq<T>(net, std::vector<std::string>(src_sentences), src_vocab, tgt_vocab, num_steps, options);
}

/// One sentence: d2l's predict_seq2seq(net, src_sentence, src_vocab, tgt_vocab, num_steps).
template <typename T = void, typename Net>
Translation<detail::model_type_or<T, Net>> predict_seq2seq(Net& net, const std::string& src_sentence,
                                                           const Vocab& src_vocab, const Vocab& tgt_vocab,
                                                           index_t num_steps, const PredictOptions& options = {}) {
  return predict_seq2seq<T>(net, std::vector<std::string>{src_sentence}, src_vocab, tgt_vocab, num_steps, options)
      .front();
}

}  // namespace heed

#include "heed/detail/header_end.hpp"
