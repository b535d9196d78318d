// heed/seq2seq/predict_options.hpp — what predict_seq2seq is asked (PredictOptions:
// greedy, beam search or sampling, with their constraints) and what it gives back (a
// Translation per sentence, its n-best Hypotheses with their attention weights).
// heed/seq2seq/predict.hpp describes the decoding these options choose.
#pragma once

#include "heed/detail/header_begin.hpp"

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "heed/core/generator.hpp"
#include "heed/ops/precision.hpp"
#include "heed/seq2seq/data.hpp"

namespace heed {

class Shortlist;  // heed/seq2seq/shortlist.hpp

/// How beam search keeps its finished hypotheses and when it stops (predict.hpp):
/// heed's rule stops only when no live hypothesis can still beat the n_best finished ones
/// by max_length; transformers' is its generate()'s, for models trained and tuned with
/// it (MarianMT): <eos> taken only among the beam_size best candidates, the beam_size best
/// finished hypotheses kept, a forced <eos> counted log P 0, and the search stopped once
/// beam_size have finished and the worst of them beats the best candidate's log P over
/// the current length (early_stopping: once beam_size have finished).
enum class BeamSearchRule { heed, transformers };

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
  // Target tokens never emitted, besides <pad> and the start token (Hugging Face's
  // bad_words_ids of single tokens; a MarianMT translator's config adds its own).
  std::vector<index_t> forbidden_tokens;
  // The last step (the max_length-th token) may only be <eos>, so that every hypothesis
  // ends (Hugging Face's forced_eos_token_id; its max_length counts the start token, one
  // more than heed's). log P stays the model's own.
  bool force_eos_at_max_length = false;
  // Per sentence, the target tokens (the model's: words or pieces) each of its
  // hypotheses starts with (CTranslate2's target_prefix); empty, or one per sentence
  // (an empty one: no prefix). Their log P counts.
  std::vector<std::vector<std::string>> target_prefix;
  // Streaming: called as greedy decoding (beam_size 1) takes each token, with the
  // sentence's index, the token and whether it is the sentence's last (<eos>, or the
  // max_length-th token); from the decoding threads (several at once with micro_batches).
  std::function<void(std::size_t sentence, index_t token, bool last)> on_token;
  BeamSearchRule beam_search_rule = BeamSearchRule::heed;
  bool early_stopping = false;  // BeamSearchRule::transformers: stop once beam_size hypotheses end
  // The products' number format (heed/ops/precision.hpp): bf16 or int8 convert every
  // weight that linear() multiplies by once per call, or once per enclosing
  // PackedWeightsGuard of the same precision (translate_and_score holds one), and keep
  // embeddings, attention, softmax, layer norm and the GRU in fp32. A float net on the
  // CPU only.
  Precision precision = Precision::fp32;
  // A vocabulary shortlist (heed/seq2seq/shortlist.hpp): the output layer scores only
  // the union of this call's sentences' candidate tokens, and log P is normalised over
  // them. Null: the whole vocabulary. A net on the CPU only.
  std::shared_ptr<const Shortlist> shortlist;
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
}  // namespace heed

#include "heed/detail/header_end.hpp"
