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
// or after max_length steps (num_steps unless set). BeamSearchRule::transformers
// instead keeps and stops as Hugging Face's generate() does (predict_options.hpp), for
// models tuned with it (a MarianMT translator sets it).
//
// A target prefix (options.target_prefix) forces each sentence's first tokens, and
// options.on_token streams greedy decoding token by token; the decoder starts from the
// target vocabulary's start token (SpecialTokens::bos: d2l's <bos>, MarianMT's <pad>) and
// never emits it, <pad> or options.forbidden_tokens.
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
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "heed/core/generator.hpp"
#include "heed/detail/parallel.hpp"
#include "heed/ops/softmax.hpp"
#include "heed/seq2seq/bahdanau_decoder.hpp"
#include "heed/seq2seq/data.hpp"
#include "heed/seq2seq/decode.hpp"
#include "heed/seq2seq/decoder_state.hpp"
#include "heed/seq2seq/gru_encoder.hpp"
#include "heed/seq2seq/predict_options.hpp"
#include "heed/seq2seq/shortlist.hpp"
#include "heed/seq2seq/token_choice.hpp"
#include "heed/transformer/decoder.hpp"

namespace heed {

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
  HEED_CHECK(options.precision == Precision::fp32 || (std::is_same_v<U, float> && net.device().is_cpu()), ValueError,
             "predict_seq2seq: precision ", to_string(options.precision), " needs a float net on the CPU, got a ",
             detail::dtype_name<U>(), " net on ", to_string(net.device()));
  HEED_CHECK(!options.shortlist || net.device().is_cpu(), ValueError,
             "predict_seq2seq: a shortlist needs a net on the CPU, got one on ", to_string(net.device()));
  for (const Vocab* vocab : {&src_vocab, &tgt_vocab}) {
    const SpecialTokens& special = vocab->special_tokens();
    for (const std::string* token : {&special.pad, &special.bos, &special.eos})
      HEED_CHECK(vocab->contains(*token), ValueError, "predict_seq2seq: the ",
                 vocab == &src_vocab ? "source" : "target", " vocabulary has no ", *token);
  }
  HEED_CHECK(!options.on_token || options.beam_size == 1, ValueError,
             "predict_seq2seq: on_token streams greedy decoding or one sample (beam_size 1), got beam_size ",
             options.beam_size, ": beam search changes its best hypothesis until it ends");
  HEED_CHECK(options.target_prefix.empty() || options.target_prefix.size() == src_tokens.size(), ValueError,
             "predict_seq2seq: ", options.target_prefix.size(), " target prefixes for ", src_tokens.size(),
             " sentences (one each, or none)");
  for (const auto& prefix : options.target_prefix)
    HEED_CHECK(static_cast<index_t>(prefix.size()) < max_steps, ValueError, "predict_seq2seq: a target prefix of ",
               prefix.size(), " tokens leaves no room in ", max_steps, " decoded tokens (max_length)");
  for (const index_t id : options.forbidden_tokens)
    HEED_CHECK(id >= 0 && id < tgt_vocab.size(), ValueError, "predict_seq2seq: forbidden token ", id,
               " is not in the target vocabulary of ", tgt_vocab.size(), " tokens");
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
  PackedWeightsGuard packed_weights(options.precision);  // every step multiplies by the same weights
  net.eval();
  // The shortlist's candidates for the whole call (the prefixes' tokens among them), its
  // rows of the output layer gathered once for every group.
  std::optional<detail::ShortlistedOutput<U>> shortlisted;
  if (options.shortlist) {
    std::vector<index_t> prefix_ids;
    for (const auto& prefix : options.target_prefix)
      for (const index_t id : tgt_vocab[prefix]) prefix_ids.push_back(id);
    shortlisted.emplace(options.shortlist->candidates(src_tokens, tgt_vocab, prefix_ids), tgt_vocab.size());
    if constexpr (detail::has_output_features<std::decay_t<decltype(net.decoder())>>::value)
      shortlisted->gather(net.decoder().dense);
  }
  const detail::ShortlistedOutput<U>* const shortlist = shortlisted ? &*shortlisted : nullptr;
  const detail::NoAttentionWeightsScope encoder_weights(net.encoder(), options.save_attention_weights);
  const detail::NoAttentionWeightsScope decoder_weights(net.decoder(), options.save_attention_weights);
  const std::size_t count = src_tokens.size();
  const auto parts = static_cast<std::size_t>(std::min<index_t>(options.micro_batches, static_cast<index_t>(count)));
  if (parts == 1) {
    detail::decode_sentences<U>(net, src_tokens, 0, count, src_vocab, tgt_vocab, num_steps, options, shortlist,
                                sample_seed, results);
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
                                  num_steps, options, shortlist, sample_seed, results);
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
