// heed/seq2seq/decode.hpp — predict_seq2seq's work on a batch of sentences
// (detail::decode_sentences): encode once, then one token a step for every live
// hypothesis (greedy, beam search or sampling, heed/seq2seq/predict.hpp), the finished
// ones ranked and their attention weights stacked.
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
#include "heed/seq2seq/data.hpp"
#include "heed/seq2seq/decoder_state.hpp"
#include "heed/seq2seq/predict_options.hpp"
#include "heed/seq2seq/shortlist.hpp"
#include "heed/seq2seq/token_choice.hpp"
namespace heed {

namespace detail {

/// Keeps the `count` best of the finished hypotheses by score (transformers' beam
/// hypotheses: the worst leaves when one more comes), the earlier one at a tie (a newcomer
/// no better than the worst is not kept).
template <typename Live, typename Score>
void keep_best(std::vector<Live>& ended, index_t count, const Score& score_of) {
  if (static_cast<index_t>(ended.size()) <= count) return;
  std::size_t worst = 0;
  for (std::size_t i = 1; i < ended.size(); ++i)
    if (score_of(ended[i], ended[i].length()) <= score_of(ended[worst], ended[worst].length())) worst = i;
  ended.erase(ended.begin() + static_cast<long>(worst));
}

/// predict_seq2seq's work for the sentences [first, last) of all_sources (tokens, without
/// <eos>), into the
/// same places of all_results, under the caller's settings (no grad, eval mode, packed
/// weights, attention weights kept or not). Sample j of sentence i draws from a
/// generator seeded with mix_seed(sample_seed, i · beam_size + j). With a `shortlist`,
/// the logits are those of its kept target ids only.
template <typename T, typename Net>
void decode_sentences(Net& net, const std::vector<std::vector<std::string>>& all_sources, std::size_t first,
                      std::size_t last, const Vocab& src_vocab, const Vocab& tgt_vocab, index_t num_steps,
                      const PredictOptions& options, const ShortlistedOutput<T>* shortlist, std::uint64_t sample_seed,
                      std::vector<Translation<T>>& all_results) {
  const std::vector<std::string>* sources = all_sources.data() + first;
  Translation<T>* results = all_results.data() + first;
  const index_t batch = static_cast<index_t>(last - first), K = options.beam_size;
  const index_t eos = tgt_vocab.eos_index();
  const index_t max_steps = options.max_length > 0 ? options.max_length : num_steps;
  const bool sampling = options.sample;
  std::vector<Generator> generators;                                      // sampling: per sentence and sample
  if (sampling) generators.reserve(static_cast<std::size_t>(batch * K));  // sized by predict_seq2seq_tokens
  if (sampling)
    for (index_t i = 0; i < batch * K; ++i)
      generators.emplace_back(mix_seed(sample_seed, static_cast<std::uint64_t>(first) * static_cast<std::uint64_t>(K) +
                                                        static_cast<std::uint64_t>(i)));

  // ---- encode the batch once ----
  // Sources are padded to num_steps, or only to the longest of the batch for an encoder
  // whose valid steps do not see the padding (the Transformer's: a model of 512 positions
  // need not encode 512 steps for a sentence of 20).
  index_t enc_steps = num_steps;
  if (ignores_padding<typename Net::EncoderType>::value) {
    enc_steps = 1;
    for (index_t b = 0; b < batch; ++b)
      enc_steps = std::max(enc_steps, static_cast<index_t>(sources[static_cast<std::size_t>(b)].size()) + 1);
    enc_steps = std::min(enc_steps, num_steps);
  }
  IndexTensor enc_X = detail::make_tensor<std::int64_t>(Shape{batch, enc_steps});
  IndexTensor enc_valid_len = detail::make_tensor<std::int64_t>(Shape{batch});
  for (index_t b = 0; b < batch; ++b) {
    Translation<T>& r = results[static_cast<std::size_t>(b)];
    r.source_tokens = sources[static_cast<std::size_t>(b)];
    r.source_tokens.push_back(src_vocab.special_tokens().eos);
    std::vector<index_t> ids = src_vocab[r.source_tokens];
    enc_valid_len.data()[b] = static_cast<index_t>(ids.size());
    ids = truncate_pad(ids, enc_steps, src_vocab.pad_index());
    std::copy(ids.begin(), ids.end(), enc_X.data() + b * enc_steps);
  }
  // On a device: the batch goes there, and each step's best tokens come back (below); the
  // lengths and the next step's tokens are kept here (enc_valid_len stays on the CPU).
  const Device device = net.device();
  const IndexTensor enc_valid_len_there = enc_valid_len.to(device);
  auto enc_outputs = net.encoder()(enc_X.to(device), enc_valid_len_there);
  const std::vector<Tensor<T>> enc_weights = detail::encoder_attention(net.encoder());
  for (index_t b = 0; b < batch && options.save_attention_weights; ++b) {
    if (enc_weights.empty() || !enc_weights[0].defined()) break;
    const index_t n = std::min(enc_valid_len.data()[b], enc_steps);
    std::vector<Tensor<T>> layers;
    for (const Tensor<T>& w : enc_weights) layers.push_back(narrow(narrow(select(w, 0, b), 1, 0, n), 2, 0, n));
    results[static_cast<std::size_t>(b)].encoder_attention = stack(layers, 0).to(Device::cpu());
  }

  // ---- decode active sentences × K beams: row i·K + k is beam k of sentence active[i] ----
  // A sentence that is done leaves the batch, so the steps after cost only the rows
  // still decoding.
  auto state = net.decoder().init_state(enc_outputs, enc_valid_len_there);
  // Kept attention weights are per row: then the rows from the encoder are too.
  if (K > 1) detail::expand_beams(state, K, !options.save_attention_weights);

  using Live = detail::LiveHypothesis<T>;
  std::vector<std::vector<Live>> live(static_cast<std::size_t>(batch));
  std::vector<std::vector<Live>> finished(static_cast<std::size_t>(batch));
  // Beam search starts from one hypothesis, <bos>, in row i·K; sampling from K.
  for (auto& beams : live) {
    beams.resize(sampling ? static_cast<std::size_t>(K) : 1);
    for (std::size_t k = 0; k < beams.size(); ++k) beams[k].sample = static_cast<index_t>(k);
  }
  std::vector<index_t> active(static_cast<std::size_t>(batch));
  std::vector<bool> search_done(static_cast<std::size_t>(batch), false);          // stopped before max_length
  std::vector<std::vector<index_t>> prefix_ids(static_cast<std::size_t>(batch));  // the forced first tokens
  for (std::size_t b = 0; b < prefix_ids.size() && !options.target_prefix.empty(); ++b)
    prefix_ids[b] = tgt_vocab[options.target_prefix[first + b]];
  for (index_t b = 0; b < batch; ++b) active[static_cast<std::size_t>(b)] = b;
  auto score_of = [&](const Live& h, index_t length) {
    return K == 1 ? h.log_prob : h.log_prob / std::pow(static_cast<double>(length), options.length_penalty);
  };
  IndexTensor dec_X = full<std::int64_t>({batch * K, 1}, tgt_vocab.bos_index());
  // The tokens scored: the vocabulary's, or the shortlist's, whose row positions are
  // mapped to and from target ids around the token choice below.
  const index_t V = shortlist ? shortlist->size() : tgt_vocab.size();
  using Decoder = std::decay_t<decltype(net.decoder())>;
  // The output layer's rows at a time, for features of `num_hiddens`: ≤ 16 MiB of logits,
  // in multiples of 32 rows (the in-place product's panel of rows), and 32 for every 128
  // features. Each chunk's product reads the output weight (V × num_hiddens) once, and
  // the token choice reads its logits three times: small features make the weight cheap
  // to read again, and logits of few rows stay in L2. 64 rows at opus-mt's 59,514 words
  // (16 MiB), 32 at the README recipe's 128 features and 9,687 words, where the 416 rows
  // of 16 MiB made beam search 1.1-1.4x slower.
  const auto logits_chunk_rows = [V](index_t num_hiddens) {
    const index_t in_16_mib = (index_t{16} << 20) / (std::max<index_t>(V, 1) * index_t{sizeof(T)}) / 32 * 32;
    return std::max<index_t>(32, std::min(in_16_mib, 32 * ((num_hiddens + 127) / 128)));
  };
  // Only the best min(K, V) tokens of a beam can be among the K best continuations; a
  // sample continues with one.
  // transformers' rule reads one more: the K best continuations other than <eos>.
  const bool transformers = options.beam_search_rule == BeamSearchRule::transformers && !sampling;
  const auto per_row = static_cast<std::size_t>(sampling ? 1 : std::min(K + (transformers ? 1 : 0), V));
  std::vector<index_t> never;  // <pad>, the start token and the forbidden tokens, once each
  const auto never_emit = [&never](index_t id) {
    if (std::find(never.begin(), never.end(), id) == never.end()) never.push_back(id);
  };
  never_emit(tgt_vocab.pad_index());
  never_emit(tgt_vocab.bos_index());
  for (const index_t id : options.forbidden_tokens) never_emit(id);
  std::vector<detail::TopToken<T>> top;
  std::vector<std::size_t> found;
  std::vector<std::vector<index_t>> forbidden;  // per row
  std::vector<std::int64_t> eos_banned;         // per row: <eos> forbidden (before min_length)
  const IndexTensor never_there =               // for the token choice on a device, uploaded once
      device.is_cpu() ? IndexTensor() : IndexTensor(never, Shape{static_cast<index_t>(never.size())}).to(device);
  for (index_t step = 0; step < max_steps && !active.empty(); ++step) {
    // Where the decoder exposes its output layer, that layer runs on a few rows at a
    // time below, so that the (rows, V) logits never exist at once: at opus-mt's
    // vocabulary and 128 rows they would be 29 MiB. The bits are those of one product
    // over all rows: predict's PackedWeightsGuard kernel computes each row alone.
    Tensor<T> features, logits;  // (rows, 1, num_hiddens) or (rows, 1, V)
    if constexpr (detail::has_output_features<Decoder>::value)
      features = net.decoder().features(dec_X.to(device), state);
    else
      logits = net.decoder()(dec_X.to(device), state);
    if (logits.defined() && shortlist) logits = shortlist->select(logits);
    if (step == 0) detail::reserve_steps(state, max_steps);
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
    // On a device the token choice runs there, and only the chosen tokens come back, when
    // each live row forbids `never` and, before min_length, <eos> (no forced or repeated
    // tokens), and a sample's top_k is at most kDeviceTopTokens with no top_p: the other
    // cases read the logits here.
    bool choose_on_device = !device.is_cpu() && !shortlist &&
                            (sampling ? options.top_k <= kDeviceTopTokens && options.top_p >= 1.0
                                      : per_row <= std::size_t(kDeviceTopTokens));
    eos_banned.assign(static_cast<std::size_t>(num_active * K), 0);
    for (index_t row = 0; row < num_active * K; ++row) {
      std::vector<index_t>& f = forbidden[static_cast<std::size_t>(row)];
      f.clear();
      const Live* h = hypothesis(row);
      if (h) detail::forbidden_tokens(h->tokens, options, eos, never, f);
      const bool before_min_length = h && static_cast<index_t>(h->tokens.size()) < options.min_length;
      eos_banned[static_cast<std::size_t>(row)] = before_min_length;
      choose_on_device = choose_on_device && (!h || f.size() == never.size() + (before_min_length ? 1 : 0));
      // A forced token (the prefix's next, or <eos> at the last step): every other one forbidden.
      const std::vector<index_t>& prefix =
          prefix_ids[static_cast<std::size_t>(active[static_cast<std::size_t>(row / K)])];
      const auto length = h ? h->tokens.size() : 0;
      const index_t forced = length < prefix.size()                                     ? prefix[length]
                             : options.force_eos_at_max_length && step == max_steps - 1 ? eos
                                                                                        : -1;
      if (shortlist) {  // the candidates are kept with the prefixes' tokens and <eos>: forced is one
        std::size_t kept = 0;
        for (const index_t id : f)
          if (shortlist->position(id) >= 0) f[kept++] = shortlist->position(id);
        f.resize(kept);
      }
      if (forced >= 0) {
        choose_on_device = choose_on_device && !h;
        const index_t at = shortlist ? shortlist->position(forced) : forced;
        f.clear();
        for (index_t v = 0; v < V; ++v)
          if (v != at) f.push_back(v);
      }
    }
    const index_t rows_per_thread = std::max<index_t>(1, detail::kParallelGrain / std::max<index_t>(V, 1));
    const index_t chunk_rows = logits.defined() ? num_active * K : logits_chunk_rows(features.shape()[-1]);
    for (index_t chunk = 0; chunk < num_active * K; chunk += chunk_rows) {
      const index_t n = std::min(chunk_rows, num_active * K - chunk);
      Tensor<T> part = logits;  // rows [chunk, chunk + n): (n, 1, V)
      if constexpr (detail::has_output_features<Decoder>::value)
        part = shortlist ? shortlist->logits(narrow(features, 0, chunk, n))
                         : net.decoder().dense(narrow(features, 0, chunk, n));
      if (choose_on_device) {
        const std::vector<std::int64_t> eos_flags(eos_banned.begin() + chunk, eos_banned.begin() + chunk + n);
        if (sampling) {  // each live row's draw, from its sample's generator as on the CPU
          std::vector<double> uniforms(static_cast<std::size_t>(n), 0.0);
          for (index_t row = chunk; row < chunk + n; ++row)
            if (const Live* h = hypothesis(row))
              uniforms[static_cast<std::size_t>(row - chunk)] =
                  generators[static_cast<std::size_t>(active[static_cast<std::size_t>(row / K)] * K + h->sample)]
                      .uniform();
          detail::sample_tokens_on_device(part, n, V, never_there, eos_flags, eos, options.temperature, options.top_k,
                                          uniforms, top.data() + chunk, found.data() + chunk);
        } else {
          detail::top_log_probs_on_device(part, n, V, per_row, never_there, eos_flags, eos,
                                          top.data() + chunk * static_cast<index_t>(per_row), found.data() + chunk);
        }
        for (index_t row = chunk; row < chunk + n; ++row)
          if (!hypothesis(row)) found[static_cast<std::size_t>(row)] = 0;  // a spare row's choice is not read
        continue;
      }
      if (!part.device().is_cpu()) part = part.to(Device::cpu());
      detail::parallel_for(n, rows_per_thread, [&](index_t first_row, index_t last_row) {
        detail::SampleScratch scratch;
        for (index_t row = chunk + first_row; row < chunk + last_row; ++row) {
          const auto r = static_cast<std::size_t>(row);
          const Live* h = hypothesis(row);
          if (!h) continue;
          T* row_logits = part.data() + (row - chunk) * V;
          if (sampling) {
            Generator& gen =
                generators[static_cast<std::size_t>(active[static_cast<std::size_t>(row / K)] * K + h->sample)];
            found[r] = detail::sample_token(row_logits, V, top.data() + r, forbidden[r], options, gen, scratch);
          } else {
            found[r] = detail::top_log_probs(row_logits, V, top.data() + r * per_row, per_row, forbidden[r]);
          }
          for (std::size_t j = 0; shortlist && j < found[r]; ++j) {
            detail::TopToken<T>& t = top[r * per_row + j];
            t.token = shortlist->id(t.token);
          }
        }
      });
    }
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
      // transformers counts a forced <eos> as log P 0 (its processed score).
      const bool forced_zero = transformers && options.force_eos_at_max_length && step == max_steps - 1;
      for (index_t k = 0; k < num_live; ++k) {
        const auto row = static_cast<std::size_t>(i * K + k);
        for (std::size_t j = 0; j < found[row]; ++j) {
          const detail::TopToken<T>& t = top[row * per_row + j];
          const double log_prob = forced_zero ? 0.0 : static_cast<double>(t.log_prob);
          candidates.push_back({beams[static_cast<std::size_t>(k)].log_prob + log_prob, k, t.token});
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
      auto& ended = finished[static_cast<std::size_t>(b)];
      for (std::size_t rank = 0; rank < candidates.size(); ++rank) {
        const Candidate& c = candidates[rank];
        if (static_cast<index_t>(next.size()) == K) break;
        // transformers keeps an <eos> only among the K best candidates.
        if (transformers && c.token == eos && static_cast<index_t>(rank) >= K) continue;
        Live h = beams[static_cast<std::size_t>(c.beam)];
        h.log_prob = c.log_prob;
        if (!cross.empty()) h.cross.push_back(detail::rows_of(cross, i * K + c.beam));
        if (!self.empty()) h.self.push_back(detail::rows_of(self, i * K + c.beam));
        if (c.token == eos) {
          h.ended = true;
          if (options.on_token) options.on_token(first + static_cast<std::size_t>(b), eos, true);
          ended.push_back(std::move(h));
          if (transformers) keep_best(ended, K, score_of);
          if (K == 1) break;  // greedy: the sentence is done
          continue;
        }
        h.tokens.push_back(c.token);
        if (options.on_token) options.on_token(first + static_cast<std::size_t>(b), c.token, step == max_steps - 1);
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
      // transformers: when K have ended and, unless early_stopping, the worst of them
      // beats the best candidate's log P over this step's length (its heuristic).
      bool done = next.empty();
      if (!done && transformers && K > 1) {
        if (static_cast<index_t>(ended.size()) >= K) {
          double worst = score_of(ended.front(), ended.front().length());
          for (const Live& h : ended) worst = std::min(worst, score_of(h, h.length()));
          done = options.early_stopping ||
                 worst >= candidates.front().log_prob / std::pow(static_cast<double>(step + 1), options.length_penalty);
        }
      } else if (!done && !sampling && static_cast<index_t>(ended.size()) >= options.n_best) {
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
      search_done[static_cast<std::size_t>(b)] = done;
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
    // Each beam's parent is of its own sentence; while no sentence leaves, the rows
    // from the encoder need no reorder.
    if (!active.empty() && !identity) detail::reorder_state(state, index, rows == num_active * K);
  }

  // ---- collect: finished hypotheses, else the live ones cut at num_steps ----
  for (index_t b = 0; b < batch; ++b) {
    auto& ended = finished[static_cast<std::size_t>(b)];
    // transformers' finalize adds every live beam of a sentence not done.
    if (static_cast<index_t>(ended.size()) < options.n_best ||
        (transformers && !search_done[static_cast<std::size_t>(b)]))
      for (Live& h : live[static_cast<std::size_t>(b)]) ended.push_back(std::move(h));
    std::vector<std::pair<double, std::size_t>> ranked;
    for (std::size_t i = 0; i < ended.size(); ++i)
      ranked.emplace_back(score_of(ended[i], std::max<index_t>(ended[i].length(), 1)), i);
    std::stable_sort(ranked.begin(), ranked.end(), [](const auto& a, const auto& c) { return a.first > c.first; });
    Translation<T>& r = results[static_cast<std::size_t>(b)];
    const index_t src_len = std::min(enc_valid_len.data()[b], enc_steps);
    for (std::size_t i = 0; i < ranked.size() && static_cast<index_t>(i) < options.n_best; ++i) {
      Live& h = ended[ranked[i].second];
      Hypothesis<T> out;
      out.tokens = h.tokens;
      std::vector<std::string> words;
      for (index_t t : h.tokens) words.push_back(tgt_vocab.to_tokens(t));
      for (std::size_t w = 0; w < words.size(); ++w) out.text += (w ? " " : "") + words[w];
      out.log_prob = h.log_prob;
      out.score = ranked[i].first;
      if (!h.cross.empty()) out.cross_attention = narrow(detail::stack_steps(h.cross, enc_steps), 3, 0, src_len);
      if (!h.self.empty()) out.self_attention = detail::stack_steps(h.self, static_cast<index_t>(h.self.size()));
      r.n_best.push_back(std::move(out));
    }
    static_cast<Hypothesis<T>&>(r) = r.n_best.front();
  }
}

}  // namespace detail

}  // namespace heed

#include "heed/detail/header_end.hpp"
