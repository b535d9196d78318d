// predict_seq2seq (heed/seq2seq/predict.hpp): greedy, batched and beam search; and the
// word alignments taken from its attention (heed/seq2seq/alignment.hpp).
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <utility>
#include <vector>

#include "seq2seq_common.hpp"

namespace {

/// What the tests translate: sentences of several lengths (the first four, or all).
const std::vector<std::string> kSentences = {"go .",     "i'm home .", "he's calm .", "we are not tired at all .",
                                             "i lost .", "he ran .",   "i'm fine .",  "wait ."};

/// small_net trained for 5 epochs on `data`, from a generator seeded with `seed`.
template <typename Net>
std::unique_ptr<Net> trained_small_net(heed::NmtData& data, std::uint64_t seed) {
  heed::Generator gen(seed);
  std::unique_ptr<Net> net = small_net<Net>(data, gen);
  heed::TrainOptions options;
  options.generator = &gen;
  heed::train_seq2seq<float>(*net, data.data_iter, 0.01, 5, data.tgt_vocab, options);
  return net;
}

/// Checks translations decoded in bf16 or int8 against the nets that score them: each
/// log P is `converted`'s teacher-forced one (run by `own_log_prob`, which gives the
/// precision) and near `reference`'s in fp32, and all but two sentences keep fp32's tokens.
template <typename Net, typename OwnLogProb>
void check_low_precision_translations(const std::vector<heed::Translation<float>>& got,
                                      const std::vector<heed::Translation<float>>& fp32, Net& reference,
                                      const heed::NmtData& data, OwnLogProb own_log_prob) {
  std::size_t same_as_fp32 = 0;
  for (std::size_t i = 0; i < kSentences.size(); ++i) {
    INFO(kSentences[i] << " => " << got[i].text << " (fp32: " << fp32[i].text << ")");
    const auto& t = got[i];
    const bool ended = static_cast<index_t>(t.tokens.size()) < 10;
    CHECK(t.log_prob == Approx(own_log_prob(kSentences[i], t.tokens, ended)).epsilon(1e-4));
    const heed::PackedWeightsGuard fp32_guard;
    const double fp32_log_prob =
        teacher_forced_log_prob<float>(reference, kSentences[i], t.tokens, ended, data.src_vocab, data.tgt_vocab);
    CHECK(std::fabs(t.log_prob - fp32_log_prob) <= 0.05 * (1.0 + std::fabs(fp32_log_prob)));
    same_as_fp32 += t.tokens == fp32[i].tokens;
  }
  CHECK(same_as_fp32 >= kSentences.size() - 2);
}

}  // namespace

TEMPLATE_TEST_CASE("predict_seq2seq decodes greedily, in batches, and with beam search", "[seq2seq][predict]",
                   BahdanauNet<float>, TransformerNet<float>) {
  using Net = TestType;
  heed::NmtData data = small_corpus(80);
  const std::unique_ptr<Net> net = trained_small_net<Net>(data, 11);
  const std::vector<std::string> sentences(kSentences.begin(), kSentences.begin() + 4);

  // Greedy: each step's token is the argmax, its log-probability what the decoder gives.
  const auto greedy = heed::predict_seq2seq<float>(*net, sentences, data.src_vocab, data.tgt_vocab, 10);
  REQUIRE(greedy.size() == sentences.size());
  {
    // The type comes from the model, and a braced list of sentences is a batch.
    const auto braced = heed::predict_seq2seq(*net, {sentences[0], sentences[1]}, data.src_vocab, data.tgt_vocab, 10);
    static_assert(std::is_same_v<decltype(braced), const std::vector<heed::Translation<float>>>);
    REQUIRE(braced.size() == 2);
    CHECK(braced[0].tokens == greedy[0].tokens);
    CHECK(braced[1].tokens == greedy[1].tokens);
  }
  for (std::size_t i = 0; i < sentences.size(); ++i) {
    INFO(sentences[i] << " => " << greedy[i].text);
    const auto& t = greedy[i];
    const bool ended = static_cast<index_t>(t.tokens.size()) < 10;
    CHECK(t.log_prob ==
          Approx(teacher_forced_log_prob<float>(*net, sentences[i], t.tokens, ended, data.src_vocab, data.tgt_vocab))
              .epsilon(1e-4));
    // The same sentence alone decodes the same way: batching sentences of different
    // lengths changes nothing.
    const auto alone = heed::predict_seq2seq<float>(*net, sentences[i], data.src_vocab, data.tgt_vocab, 10);
    CHECK(alone.tokens == t.tokens);
    CHECK(alone.text == t.text);
    CHECK(alone.log_prob == Approx(t.log_prob).epsilon(1e-4));
    // Attention of every output step over the sentence's valid source steps.
    const index_t out_steps = static_cast<index_t>(t.tokens.size()) + (ended ? 1 : 0);
    const index_t src_steps = std::min<index_t>(static_cast<index_t>(t.source_tokens.size()), 10);
    REQUIRE(t.cross_attention.defined());
    CHECK(t.cross_attention.shape()[2] == out_steps);
    CHECK(t.cross_attention.shape()[3] == src_steps);
    const Tensorf row_sums = t.cross_attention.sum(3);
    for (index_t j = 0; j < row_sums.numel(); ++j) CHECK(row_sums.data()[j] == Approx(1.0f).epsilon(1e-5));
    if constexpr (std::is_same_v<Net, TransformerNet<float>>) {
      CHECK(t.cross_attention.shape() == (Shape{2, 4, out_steps, src_steps}));
      CHECK(t.self_attention.shape() == (Shape{2, 4, out_steps, out_steps}));
      CHECK(t.encoder_attention.shape() == (Shape{2, 4, src_steps, src_steps}));
      CHECK(t.self_attention.at({0, 0, 0, out_steps - 1}) == 0.0f);  // causal: the first step sees itself only
    } else {
      CHECK(t.cross_attention.shape() == (Shape{1, 1, out_steps, src_steps}));
      CHECK_FALSE(t.self_attention.defined());
      CHECK_FALSE(t.encoder_attention.defined());
    }
  }

  // Beam search: n_best hypotheses, best first by log P / L^α, each log P being what the
  // decoder gives its tokens; a beam of 1 is greedy decoding.
  heed::PredictOptions beam;
  beam.beam_size = 4;
  beam.n_best = 3;
  const auto beams = heed::predict_seq2seq<float>(*net, sentences, data.src_vocab, data.tgt_vocab, 10, beam);
  for (std::size_t i = 0; i < sentences.size(); ++i) {
    INFO(sentences[i]);
    REQUIRE(beams[i].n_best.size() == 3);
    CHECK(beams[i].text == beams[i].n_best[0].text);
    for (std::size_t k = 0; k < 3; ++k) {
      const auto& h = beams[i].n_best[k];
      if (k > 0) CHECK(h.score <= beams[i].n_best[k - 1].score);
      const bool ended = static_cast<index_t>(h.tokens.size()) < 10;
      CHECK(h.log_prob ==
            Approx(teacher_forced_log_prob<float>(*net, sentences[i], h.tokens, ended, data.src_vocab, data.tgt_vocab))
                .epsilon(1e-4));
      const double length = static_cast<double>(h.tokens.size() + (ended ? 1 : 0));
      CHECK(h.score == Approx(h.log_prob / std::pow(length, 0.75)).epsilon(1e-6));
    }
  }
  // A wide beam, where hypotheses end while others live on: every n-best entry is
  // still a real hypothesis with its own log P.
  heed::PredictOptions wide;
  wide.beam_size = 8;
  wide.n_best = 8;
  const auto wide_beams = heed::predict_seq2seq<float>(*net, sentences, data.src_vocab, data.tgt_vocab, 10, wide);
  for (std::size_t i = 0; i < sentences.size(); ++i)
    for (const auto& h : wide_beams[i].n_best) {
      INFO(sentences[i] << " => " << h.text);
      const bool ended = static_cast<index_t>(h.tokens.size()) < 10;
      CHECK(h.log_prob ==
            Approx(teacher_forced_log_prob<float>(*net, sentences[i], h.tokens, ended, data.src_vocab, data.tgt_vocab))
                .epsilon(1e-4));
    }
  heed::PredictOptions one;
  one.beam_size = 1;
  const auto beam_one = heed::predict_seq2seq<float>(*net, sentences, data.src_vocab, data.tgt_vocab, 10, one);
  for (std::size_t i = 0; i < sentences.size(); ++i) CHECK(beam_one[i].tokens == greedy[i].tokens);

  // Without the attention weights (the Transformer's fused attention, equal to rounding):
  // the same translations, no weights, and the model
  // keeps its weights again afterwards. Beam search shrinks the batch as sentences end
  // too: its n-best lists are those of each sentence decoded alone.
  heed::PredictOptions no_weights;
  no_weights.save_attention_weights = false;
  const auto plain = heed::predict_seq2seq<float>(*net, sentences, data.src_vocab, data.tgt_vocab, 10, no_weights);
  for (std::size_t i = 0; i < sentences.size(); ++i) {
    CHECK(plain[i].tokens == greedy[i].tokens);
    CHECK(plain[i].log_prob == Approx(greedy[i].log_prob).epsilon(1e-5));
    CHECK_FALSE(plain[i].cross_attention.defined());
    CHECK_FALSE(plain[i].encoder_attention.defined());
    const auto alone = heed::predict_seq2seq<float>(*net, sentences[i], data.src_vocab, data.tgt_vocab, 10, beam);
    REQUIRE(alone.n_best.size() == beams[i].n_best.size());
    for (std::size_t k = 0; k < alone.n_best.size(); ++k) {
      CHECK(alone.n_best[k].tokens == beams[i].n_best[k].tokens);
      CHECK(alone.n_best[k].log_prob == Approx(beams[i].n_best[k].log_prob).epsilon(1e-5));
    }
  }
  // Beam search without weights keeps what comes from the encoder once per sentence
  // (the Transformer's rows_per_source): the same hypotheses, sentences ending apart.
  heed::PredictOptions beam_plain = beam;
  beam_plain.save_attention_weights = false;
  const auto plain_beams =
      heed::predict_seq2seq<float>(*net, sentences, data.src_vocab, data.tgt_vocab, 10, beam_plain);
  for (std::size_t i = 0; i < sentences.size(); ++i)
    for (std::size_t k = 0; k < beams[i].n_best.size(); ++k) {
      CHECK(plain_beams[i].n_best.at(k).tokens == beams[i].n_best[k].tokens);
      CHECK(plain_beams[i].n_best.at(k).log_prob == Approx(beams[i].n_best[k].log_prob).epsilon(1e-5));
    }
  CHECK(net->decoder().keeps_attention_weights());
  if constexpr (std::is_same_v<Net, TransformerNet<float>>) CHECK(net->encoder().keeps_attention_weights());

  heed::PredictOptions bad;
  bad.n_best = 2;
  CHECK_ERROR(heed::ValueError, "predict_seq2seq: need 1 <= n_best <= beam_size, got n_best = 2, beam_size = 1",
              heed::predict_seq2seq<float>(*net, sentences, data.src_vocab, data.tgt_vocab, 10, bad));
  CHECK_ERROR(heed::ValueError, "predict_seq2seq: num_steps must be positive, got 0",
              heed::predict_seq2seq<float>(*net, sentences, data.src_vocab, data.tgt_vocab, 0));
}

TEMPLATE_TEST_CASE("predict_seq2seq decodes groups of sentences on parallel threads as one batch", "[seq2seq][predict]",
                   BahdanauNet<float>, TransformerNet<float>) {
  using Net = TestType;
  heed::NmtData data = small_corpus(80);
  const std::unique_ptr<Net> net = trained_small_net<Net>(data, 12);
  const std::vector<std::string>& sentences = kSentences;
  heed::PredictOptions options;
  options.save_attention_weights = false;
  const auto whole = heed::predict_seq2seq<float>(*net, sentences, data.src_vocab, data.tgt_vocab, 10, options);
  const auto same_as_whole = [&](const std::vector<heed::Translation<float>>& got) {
    REQUIRE(got.size() == whole.size());
    for (std::size_t i = 0; i < whole.size(); ++i) {
      INFO(sentences[i] << " => " << whole[i].text);
      CHECK(got[i].tokens == whole[i].tokens);
      CHECK(got[i].text == whole[i].text);
      CHECK(got[i].log_prob == Approx(whole[i].log_prob).epsilon(1e-5));
    }
  };
  // Uneven groups (3, 2, 3), more groups than sentences, and groups that keep attention
  // weights (run one after another): each sentence decodes as in the whole batch.
  for (const index_t parts : {index_t(3), index_t(20)}) {
    INFO(parts << " groups");
    options.micro_batches = parts;
    same_as_whole(heed::predict_seq2seq<float>(*net, sentences, data.src_vocab, data.tgt_vocab, 10, options));
  }
  heed::PredictOptions with_weights;
  with_weights.micro_batches = 3;
  const auto weighted = heed::predict_seq2seq<float>(*net, sentences, data.src_vocab, data.tgt_vocab, 10, with_weights);
  same_as_whole(weighted);
  for (const auto& t : weighted) CHECK(t.cross_attention.defined());
  // Beam search in groups: the n-best lists of the whole batch.
  heed::PredictOptions beam;
  beam.beam_size = 3;
  beam.n_best = 2;
  beam.save_attention_weights = false;
  const auto beams = heed::predict_seq2seq<float>(*net, sentences, data.src_vocab, data.tgt_vocab, 10, beam);
  beam.micro_batches = 2;
  const auto grouped = heed::predict_seq2seq<float>(*net, sentences, data.src_vocab, data.tgt_vocab, 10, beam);
  for (std::size_t i = 0; i < sentences.size(); ++i)
    for (std::size_t k = 0; k < 2; ++k) CHECK(grouped[i].n_best[k].tokens == beams[i].n_best[k].tokens);
#ifdef _OPENMP
  // The groups fix the results, not the threads.
  const int threads = omp_get_max_threads();
  options.micro_batches = 3;
  omp_set_num_threads(1);
  const auto one = heed::predict_seq2seq<float>(*net, sentences, data.src_vocab, data.tgt_vocab, 10, options);
  omp_set_num_threads(3);
  const auto three = heed::predict_seq2seq<float>(*net, sentences, data.src_vocab, data.tgt_vocab, 10, options);
  omp_set_num_threads(threads);
  for (std::size_t i = 0; i < sentences.size(); ++i) {
    CHECK(one[i].tokens == three[i].tokens);
    CHECK(one[i].log_prob == three[i].log_prob);
  }
#endif
  heed::PredictOptions bad;
  bad.micro_batches = 0;
  CHECK_ERROR(heed::ValueError, "predict_seq2seq: micro_batches must be >= 1, got 0",
              heed::predict_seq2seq<float>(*net, sentences, data.src_vocab, data.tgt_vocab, 10, bad));
}

TEMPLATE_TEST_CASE("predict_seq2seq decodes in bf16 and int8 as the converted model scores, on any grouping",
                   "[seq2seq][predict]", BahdanauNet<float>, TransformerNet<float>) {
  using Net = TestType;
  heed::NmtData data = small_corpus(80);
  const std::unique_ptr<Net> net = trained_small_net<Net>(data, 15);
  heed::PredictOptions options;
  options.save_attention_weights = false;
  const auto fp32 = heed::predict_seq2seq<float>(*net, kSentences, data.src_vocab, data.tgt_vocab, 10, options);
  for (const heed::Precision precision : {heed::Precision::bf16, heed::Precision::int8}) {
    INFO(heed::to_string(precision));
    options.precision = precision;
    options.micro_batches = 1;
    const auto whole = heed::predict_seq2seq<float>(*net, kSentences, data.src_vocab, data.tgt_vocab, 10, options);
    // The converted model's log P: the decoder run token by token inside a guard of the
    // same precision (every row converted alone, as in a batch).
    check_low_precision_translations(whole, fp32, *net, data, [&](const std::string& s, const auto& tokens, bool end) {
      const heed::PackedWeightsGuard converted(precision);
      return teacher_forced_log_prob<float>(*net, s, tokens, end, data.src_vocab, data.tgt_vocab);
    });
    // Groups on parallel threads: the same bits (each row is converted alone).
    options.micro_batches = 3;
    const auto grouped = heed::predict_seq2seq<float>(*net, kSentences, data.src_vocab, data.tgt_vocab, 10, options);
    for (std::size_t i = 0; i < kSentences.size(); ++i) {
      CHECK(grouped[i].tokens == whole[i].tokens);
      CHECK(grouped[i].log_prob == whole[i].log_prob);
    }
  }
}

TEST_CASE("A Transformer whose weights are converted to bf16 or int8 decodes as it scores", "[seq2seq][predict]") {
  heed::NmtData data = small_corpus(80);
  const std::unique_ptr<TransformerNet<float>> reference = trained_small_net<TransformerNet<float>>(data, 15);
  heed::PredictOptions options;
  options.save_attention_weights = false;
  const auto fp32 = heed::predict_seq2seq<float>(*reference, kSentences, data.src_vocab, data.tgt_vocab, 10, options);
  for (const heed::Precision precision : {heed::Precision::bf16, heed::Precision::int8}) {
    INFO(heed::to_string(precision));
    heed::Generator gen(16);
    const std::unique_ptr<TransformerNet<float>> net = small_net<TransformerNet<float>>(data, gen);
    net->load_state_dict(reference->state_dict());  // a copy: the conversion frees the weights
    const heed::ConvertedWeights converted = heed::convert_weights_(*net, precision);
    // Each block's 4 + 4 (+ 4 cross) projections and 2 FFN layers, the two embeddings,
    // the output layer.
    CHECK(converted.tensors == 2 * (4 + 2) + 2 * (4 + 4 + 2) + 3);
    const auto got = heed::predict_seq2seq<float>(*net, kSentences, data.src_vocab, data.tgt_vocab, 10, options);
    check_low_precision_translations(
        got, fp32, *reference, data, [&](const std::string& s, const auto& tokens, bool end) {
          return teacher_forced_log_prob<float>(*net, s, tokens, end, data.src_vocab, data.tgt_vocab);
        });
  }
}

TEST_CASE("predict_seq2seq refuses bf16 and int8 for a double net", "[seq2seq][predict]") {
  heed::NmtData data = small_corpus(20);
  const auto net = transformer_net<double>(data.src_vocab.size(), data.tgt_vocab.size());
  heed::PredictOptions options;
  options.precision = heed::Precision::int8;
  CHECK_ERROR(heed::ValueError,
              "predict_seq2seq: precision int8 needs a float net on the CPU, got a float64 net on cpu",
              heed::predict_seq2seq<double>(*net, "go .", data.src_vocab, data.tgt_vocab, 10, options));
}

TEST_CASE("predict_seq2seq runs a large vocabulary's output layer on a few rows at a time", "[seq2seq][predict]") {
  // 140,000 target words: 16 MiB of logits hold 29 rows, so the output layer takes 32
  // rows at a time, and 12 sentences × 4 beams decode in passes of 32 and 16 rows. Each
  // hypothesis's log P must be what the whole decoder gives its tokens.
  heed::NmtData data = small_corpus(80);
  std::vector<std::string> words = {"<unk>", "<pad>", "<bos>", "<eos>"};
  for (int i = static_cast<int>(words.size()); i < 140000; ++i) words.push_back("w" + std::to_string(i));
  const heed::Vocab tgt_vocab = heed::Vocab::from_idx_to_token(words);
  const std::unique_ptr<TransformerNet<float>> net = transformer_net<float>(data.src_vocab.size(), tgt_vocab.size());
  net->eval();  // teacher_forced_log_prob feeds one step at a time through the caches
  std::vector<std::string> sentences = kSentences;
  sentences.insert(sentences.end(), {"go away .", "i won .", "we lost .", "he is tall ."});
  heed::PredictOptions beam;
  beam.beam_size = 4;
  beam.n_best = 2;
  beam.save_attention_weights = false;
  const auto beams = heed::predict_seq2seq<float>(*net, sentences, data.src_vocab, tgt_vocab, 10, beam);
  REQUIRE(beams.size() == 12);
  for (std::size_t i = 0; i < sentences.size(); ++i)
    for (const auto& h : beams[i].n_best) {
      INFO(sentences[i] << " => " << h.text);
      const bool ended = static_cast<index_t>(h.tokens.size()) < 10;
      CHECK(h.log_prob ==
            Approx(teacher_forced_log_prob<float>(*net, sentences[i], h.tokens, ended, data.src_vocab, tgt_vocab))
                .epsilon(1e-4));
    }
}

TEST_CASE("reorder_state moves rows that share a source as groups, and a bad index changes nothing",
          "[seq2seq][predict]") {
  heed::TransformerDecoderState<float> state;
  state.enc_outputs = heed::arange<float>(0, 24).reshape({3, 2, 4});
  state.enc_valid_lens = heed::AttentionMask<float>(lens({2, 1, 2}, {3}));
  state.rows_per_source = 2;
  state.cross_key_values = {heed::KVCache<float>(heed::arange<float>(0, 24).reshape({3, 1, 2, 4}),
                                                 heed::arange<float>(24, 48).reshape({3, 1, 2, 4}))};
  state.key_values = {heed::KVCache<float>(heed::arange<float>(0, 24).reshape({6, 1, 1, 4}),
                                           heed::arange<float>(24, 48).reshape({6, 1, 1, 4}))};
  const auto before = [&] {
    return std::make_pair(state.enc_outputs.to_vector(), state.key_values[0].keys.to_vector());
  };
  const auto kept = before();
  CHECK_ERROR(heed::ValueError, "reorder_state: row 1 takes parent 2, not of its group's source 0",
              heed::detail::reorder_state(state, lens({0, 2}, {2})));
  CHECK_ERROR(heed::ShapeError, "reorder_state: 3 rows are not groups of rows_per_source = 2",
              heed::detail::reorder_state(state, lens({0, 1, 2}, {3})));
  CHECK(before() == kept);
  // Sentence 1 ended: sentence 2's beams (rows 4, 5, swapped) and sentence 0's (row 0 twice).
  heed::detail::reorder_state(state, lens({5, 4, 0, 0}, {4}));
  const IndexTensor sources = lens({2, 0}, {2});
  CHECK(state.enc_outputs.to_vector() ==
        heed::index_select(heed::arange<float>(0, 24).reshape({3, 2, 4}), 0, sources).to_vector());
  CHECK(state.enc_valid_lens.valid_lens().to_vector() == std::vector<std::int64_t>{2, 2});
  CHECK(state.cross_key_values[0].keys.to_vector() ==
        heed::index_select(heed::arange<float>(0, 24).reshape({3, 1, 2, 4}), 0, sources).to_vector());
  CHECK(state.key_values[0].used().keys.to_vector() ==
        heed::index_select(heed::arange<float>(0, 24).reshape({6, 1, 1, 4}), 0, lens({5, 4, 0, 0}, {4})).to_vector());
}

TEST_CASE("top_log_probs gives the best tokens of a row with log_softmax's values", "[seq2seq][predict]") {
  // Ties go to the lower token, as a stable sort of the log-probabilities would order them.
  std::vector<float> logits = {0.5f, 2.0f, -1.0f, 2.0f, 1.5f, -3.0f};
  const heed::Tensor<float> expected =
      heed::log_softmax(heed::tensor<float>({0.5f, 2.0f, -1.0f, 2.0f, 1.5f, -3.0f}), 0);
  std::vector<heed::detail::TopToken<float>> top(3);
  REQUIRE(heed::detail::top_log_probs(logits.data(), 6, top.data(), top.size()) == 3);
  const std::vector<index_t> order = {1, 3, 4};
  for (std::size_t j = 0; j < 3; ++j) {
    CHECK(top[j].token == order[j]);
    CHECK(top[j].log_prob == expected.data()[order[j]]);
  }
  // More wanted than there are tokens: all of them, best first.
  std::vector<heed::detail::TopToken<float>> all(8);
  REQUIRE(heed::detail::top_log_probs(logits.data(), 6, all.data(), all.size()) == 6);
  const std::vector<index_t> full_order = {1, 3, 4, 0, 2, 5};
  for (std::size_t j = 0; j < 6; ++j) CHECK(all[j].token == full_order[j]);
  // Greedy (one wanted) takes its own path: the first of the tied best, the same value.
  std::vector<heed::detail::TopToken<float>> best(1);
  REQUIRE(heed::detail::top_log_probs(logits.data(), 6, best.data(), best.size()) == 1);
  CHECK(best[0].token == 1);
  CHECK(best[0].log_prob == expected.data()[1]);
  // A NaN logit: what the general path gives (its max is not found by value).
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> with_nan = {nan, 1.0f, 2.0f};
  REQUIRE(heed::detail::top_log_probs(with_nan.data(), 3, best.data(), best.size()) == 1);
  std::vector<heed::detail::TopToken<float>> general(2);
  REQUIRE(heed::detail::top_log_probs(with_nan.data(), 3, general.data(), general.size()) == 2);
  CHECK(best[0].token == general[0].token);
  CHECK(std::isnan(best[0].log_prob) == std::isnan(general[0].log_prob));
}

TEST_CASE("top_log_probs over long rows equals a stable sort of the log-probabilities", "[seq2seq][predict]") {
  // Rows longer than the scan's blocks, with ties, forbidden tokens, infinities and the
  // best tokens late in the row (each block then holds a new best).
  heed::Generator gen(3);
  for (const index_t V : {index_t(1), index_t(31), index_t(32), index_t(33), index_t(100), index_t(1000)})
    for (const std::size_t count : {std::size_t(1), std::size_t(2), std::size_t(5), std::size_t(40)})
      for (int pattern = 0; pattern < 3; ++pattern) {
        std::vector<float> logits(static_cast<std::size_t>(V));
        for (index_t v = 0; v < V; ++v)
          logits[static_cast<std::size_t>(v)] =
              pattern == 0   ? std::round(heed::randn<float>({1}, gen).item() * 4.0f)  // many ties
              : pattern == 1 ? static_cast<float>(v) * 0.01f                           // rising: every block wins
                             : heed::randn<float>({1}, gen).item();
        if (V > 40) logits[7] = -std::numeric_limits<float>::infinity();
        const std::vector<index_t> forbidden = V > 40 ? std::vector<index_t>{3, V - 1} : std::vector<index_t>{};
        const float normaliser = heed::detail::log_normaliser(logits.data(), V);
        std::vector<std::pair<float, index_t>> expected;
        for (index_t v = 0; v < V; ++v)
          if (std::find(forbidden.begin(), forbidden.end(), v) == forbidden.end() &&
              logits[static_cast<std::size_t>(v)] != -std::numeric_limits<float>::infinity())
            expected.emplace_back(logits[static_cast<std::size_t>(v)] - normaliser, v);
        std::stable_sort(expected.begin(), expected.end(),
                         [](const auto& a, const auto& b) { return a.first > b.first; });
        std::vector<heed::detail::TopToken<float>> top(count);
        std::vector<float> row = logits;
        const std::size_t found = heed::detail::top_log_probs(row.data(), V, top.data(), count, forbidden);
        INFO("V " << V << ", count " << count << ", pattern " << pattern);
        REQUIRE(found == std::min(count, expected.size()));
        for (std::size_t j = 0; j < found; ++j) {
          CHECK(top[j].token == expected[j].second);
          CHECK(top[j].log_prob == expected[j].first);
        }
      }
}

namespace {

/// Whether `tokens` holds the n-gram that `tokens` + `next` would end with (n >= 1).
bool repeats_ngram(const std::vector<index_t>& tokens, index_t next, index_t n) {
  std::vector<index_t> all = tokens;
  all.push_back(next);
  const auto length = static_cast<index_t>(all.size());
  if (length < n) return false;
  for (index_t start = 0; start + n < length; ++start)
    if (std::equal(all.begin() + start, all.begin() + start + n, all.end() - n)) return true;
  return false;
}

/// Greedy decoding of one sentence, written out step by step: the best token the
/// options allow (<eos> not before min_length tokens, no repeated n-gram), up to
/// max_tokens tokens.
template <typename Net>
std::vector<index_t> reference_greedy(Net& net, const std::string& sentence, const heed::Vocab& src_vocab,
                                      const heed::Vocab& tgt_vocab, const heed::PredictOptions& options,
                                      index_t max_tokens) {
  heed::NoGradGuard no_grad;
  net.eval();
  std::vector<std::string> words = heed::detail::split(sentence, ' ');
  words.push_back("<eos>");
  std::vector<index_t> ids = src_vocab[words];
  const index_t valid = static_cast<index_t>(ids.size());
  ids = heed::truncate_pad(ids, 10, src_vocab["<pad>"]);
  const IndexTensor enc_X(ids, Shape{1, 10}), enc_valid_len({valid}, Shape{1});
  auto state = net.decoder().init_state(net.encoder()(enc_X, enc_valid_len), enc_valid_len);
  const index_t eos = tgt_vocab["<eos>"];
  std::vector<index_t> tokens;
  index_t input = tgt_vocab["<bos>"];
  while (static_cast<index_t>(tokens.size()) < max_tokens) {
    const Tensorf logits = net.decoder()(IndexTensor({input}, Shape{1, 1}), state);
    index_t best = -1;
    for (index_t v = 0; v < tgt_vocab.size(); ++v) {
      if (v == eos && static_cast<index_t>(tokens.size()) < options.min_length) continue;
      if (options.no_repeat_ngram_size > 0 && repeats_ngram(tokens, v, options.no_repeat_ngram_size)) continue;
      if (best < 0 || logits.data()[v] > logits.data()[best]) best = v;
    }
    if (best < 0 || best == eos) break;
    tokens.push_back(best);
    input = best;
  }
  return tokens;
}

}  // namespace

TEMPLATE_TEST_CASE("predict_seq2seq keeps min_length, max_length and no_repeat_ngram_size", "[seq2seq][predict]",
                   BahdanauNet<float>, TransformerNet<float>) {
  using Net = TestType;
  heed::NmtData data = small_corpus(80);
  const std::unique_ptr<Net> net = trained_small_net<Net>(data, 13);
  const std::vector<std::string> sentences(kSentences.begin(), kSentences.begin() + 4);
  const index_t eos = data.tgt_vocab["<eos>"];
  struct Setting {
    index_t min_length, max_length, no_repeat;
  };
  // Forcing 12 of 14 tokens makes the small model repeat itself unless told not to.
  bool repeats_when_allowed = false;
  for (const Setting setting : {Setting{12, 14, 0}, Setting{12, 14, 1}, Setting{12, 14, 2}, Setting{3, 5, 0},
                                Setting{0, 3, 0}, Setting{0, 0, 2}}) {
    heed::PredictOptions options;
    options.min_length = setting.min_length;
    options.max_length = setting.max_length;
    options.no_repeat_ngram_size = setting.no_repeat;
    const index_t max_tokens = setting.max_length > 0 ? setting.max_length : 10;
    INFO("min_length " << setting.min_length << ", max_length " << setting.max_length << ", no_repeat_ngram_size "
                       << setting.no_repeat);
    const auto greedy = heed::predict_seq2seq<float>(*net, sentences, data.src_vocab, data.tgt_vocab, 10, options);
    options.beam_size = 3;
    options.n_best = 3;
    const auto beams = heed::predict_seq2seq<float>(*net, sentences, data.src_vocab, data.tgt_vocab, 10, options);
    for (std::size_t i = 0; i < sentences.size(); ++i) {
      INFO(sentences[i] << " => " << greedy[i].text);
      CHECK(greedy[i].tokens ==
            reference_greedy(*net, sentences[i], data.src_vocab, data.tgt_vocab, options, max_tokens));
      for (const auto& h : beams[i].n_best) {
        INFO("beam hypothesis " << h.text);
        const auto length = static_cast<index_t>(h.tokens.size());
        CHECK(length >= setting.min_length);
        CHECK(length <= max_tokens);
        CHECK(std::find(h.tokens.begin(), h.tokens.end(), eos) == h.tokens.end());
        const bool ended = length < max_tokens;
        // log P stays the model's: forbidding tokens does not renormalise.
        CHECK(h.log_prob == Approx(teacher_forced_log_prob<float>(*net, sentences[i], h.tokens, ended, data.src_vocab,
                                                                  data.tgt_vocab))
                                .epsilon(1e-4));
        for (std::size_t t = 0; t < h.tokens.size(); ++t) {
          const std::vector<index_t> prefix(h.tokens.begin(), h.tokens.begin() + static_cast<long>(t));
          if (setting.no_repeat > 0)
            CHECK_FALSE(repeats_ngram(prefix, h.tokens[t], setting.no_repeat));
          else if (setting.min_length == 12 && repeats_ngram(prefix, h.tokens[t], 1))
            repeats_when_allowed = true;
        }
      }
    }
  }
  CHECK(repeats_when_allowed);

  heed::PredictOptions bad;
  bad.min_length = 11;
  CHECK_ERROR(heed::ValueError, "predict_seq2seq: min_length must be in [0, 10] (the most steps decoded), got 11",
              heed::predict_seq2seq<float>(*net, sentences, data.src_vocab, data.tgt_vocab, 10, bad));
  bad = {};
  bad.max_length = -1;
  CHECK_ERROR(heed::ValueError, "predict_seq2seq: max_length must be >= 0 (0: num_steps), got -1",
              heed::predict_seq2seq<float>(*net, sentences, data.src_vocab, data.tgt_vocab, 10, bad));
  bad = {};
  bad.no_repeat_ngram_size = -2;
  CHECK_ERROR(heed::ValueError, "predict_seq2seq: no_repeat_ngram_size must be >= 0 (0: off), got -2",
              heed::predict_seq2seq<float>(*net, sentences, data.src_vocab, data.tgt_vocab, 10, bad));
}

TEMPLATE_TEST_CASE("predict_seq2seq samples reproducibly, and top_k = 1 samples the greedy translation",
                   "[seq2seq][predict]", BahdanauNet<float>, TransformerNet<float>) {
  using Net = TestType;
  heed::NmtData data = small_corpus(80);
  const std::unique_ptr<Net> net = trained_small_net<Net>(data, 14);
  const std::vector<std::string>& sentences = kSentences;
  heed::PredictOptions greedy_options;
  greedy_options.save_attention_weights = false;
  const auto greedy = heed::predict_seq2seq<float>(*net, sentences, data.src_vocab, data.tgt_vocab, 10, greedy_options);
  heed::Generator gen(3);
  heed::PredictOptions options = greedy_options;
  options.sample = true;
  options.generator = &gen;
  options.temperature = 1.5;  // flatter: samples differ from the greedy choice
  options.beam_size = 4;
  options.n_best = 4;
  const auto samples = heed::predict_seq2seq<float>(*net, sentences, data.src_vocab, data.tgt_vocab, 10, options);
  bool any_differs = false;
  for (std::size_t i = 0; i < sentences.size(); ++i) {
    REQUIRE(samples[i].n_best.size() == 4);
    for (std::size_t k = 0; k < 4; ++k) {
      const auto& h = samples[i].n_best[k];
      INFO(sentences[i] << " => " << h.text);
      if (k > 0) CHECK(h.score <= samples[i].n_best[k - 1].score);
      const bool ended = static_cast<index_t>(h.tokens.size()) < 10;
      CHECK(h.log_prob ==
            Approx(teacher_forced_log_prob<float>(*net, sentences[i], h.tokens, ended, data.src_vocab, data.tgt_vocab))
                .epsilon(1e-4));
      any_differs = any_differs || h.tokens != greedy[i].tokens;
    }
  }
  CHECK(any_differs);
  // The same seed draws the same samples, in any grouping and on any thread count; the
  // generator moves on, so the next call draws others.
  const auto same_as = [&](const std::vector<heed::Translation<float>>& got,
                           const std::vector<heed::Translation<float>>& expected) {
    bool same = true;
    for (std::size_t i = 0; i < expected.size(); ++i)
      for (std::size_t k = 0; k < expected[i].n_best.size(); ++k)
        same = same && got[i].n_best[k].tokens == expected[i].n_best[k].tokens &&
               got[i].n_best[k].log_prob == expected[i].n_best[k].log_prob;
    return same;
  };
  gen.manual_seed(3);
  options.micro_batches = 3;
  CHECK(same_as(heed::predict_seq2seq<float>(*net, sentences, data.src_vocab, data.tgt_vocab, 10, options), samples));
  CHECK_FALSE(
      same_as(heed::predict_seq2seq<float>(*net, sentences, data.src_vocab, data.tgt_vocab, 10, options), samples));
#ifdef _OPENMP
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  gen.manual_seed(3);
  const auto one = heed::predict_seq2seq<float>(*net, sentences, data.src_vocab, data.tgt_vocab, 10, options);
  omp_set_num_threads(threads);
  CHECK(same_as(one, samples));
#endif
  // top_k = 1 and a top_p below every probability both leave only the best token.
  for (const auto& [top_k, top_p] : {std::pair{index_t(1), 1.0}, std::pair{index_t(0), 1e-9}}) {
    INFO("top_k " << top_k << ", top_p " << top_p);
    heed::PredictOptions cut = options;
    cut.top_k = top_k;
    cut.top_p = top_p;
    cut.beam_size = 1;
    cut.n_best = 1;
    const auto got = heed::predict_seq2seq<float>(*net, sentences, data.src_vocab, data.tgt_vocab, 10, cut);
    for (std::size_t i = 0; i < sentences.size(); ++i) CHECK(got[i].tokens == greedy[i].tokens);
  }

  heed::PredictOptions bad;
  bad.sample = true;
  bad.temperature = 0.0;
  CHECK_ERROR(heed::ValueError, "predict_seq2seq: temperature must be positive and finite, got 0",
              heed::predict_seq2seq<float>(*net, sentences, data.src_vocab, data.tgt_vocab, 10, bad));
  bad.temperature = 1.0;
  bad.top_p = 0.0;
  CHECK_ERROR(heed::ValueError, "predict_seq2seq: top_p must be in (0, 1], got 0",
              heed::predict_seq2seq<float>(*net, sentences, data.src_vocab, data.tgt_vocab, 10, bad));
  bad.top_p = 1.0;
  bad.top_k = -1;
  CHECK_ERROR(heed::ValueError, "predict_seq2seq: top_k must be >= 0 (0: every token), got -1",
              heed::predict_seq2seq<float>(*net, sentences, data.src_vocab, data.tgt_vocab, 10, bad));
}

TEMPLATE_TEST_CASE("predict_seq2seq never emits <pad> or <bos>, however probable the model makes them",
                   "[seq2seq][predict]", BahdanauNet<float>, TransformerNet<float>) {
  using Net = TestType;
  heed::NmtData data = small_corpus(80);
  heed::Generator gen(5);
  const std::unique_ptr<Net> net = small_net<Net>(data, gen);
  const index_t pad = data.tgt_vocab["<pad>"], bos = data.tgt_vocab["<bos>"];
  {  // the output layer's bias makes <pad> and <bos> e^40 times likelier than any other token
    heed::NoGradGuard no_grad;
    float* bias = net->decoder().dense.bias.data();
    bias[pad] = bias[bos] = 40.0f;
  }
  heed::PredictOptions greedy, beam, sampled;
  beam.beam_size = beam.n_best = 3;
  sampled.sample = true;
  sampled.beam_size = sampled.n_best = 4;
  sampled.temperature = 5.0;
  sampled.generator = &gen;
  for (const heed::PredictOptions* options : {&greedy, &beam, &sampled}) {
    const auto out = heed::predict_seq2seq<float>(*net, kSentences, data.src_vocab, data.tgt_vocab, 10, *options);
    for (std::size_t i = 0; i < kSentences.size(); ++i)
      for (const auto& h : out[i].n_best) {
        INFO("beam " << options->beam_size << (options->sample ? " sampled" : "") << ": " << kSentences[i] << " => "
                     << h.text);
        CHECK(std::count(h.tokens.begin(), h.tokens.end(), pad) == 0);
        CHECK(std::count(h.tokens.begin(), h.tokens.end(), bos) == 0);
        // log P stays the model's: each token some 40 nats below <pad> and <bos>.
        CHECK(h.log_prob < -35.0 * static_cast<double>(h.tokens.size()));
      }
  }
}

TEMPLATE_TEST_CASE("predict_seq2seq refuses options that overflow or cannot fit before allocating",
                   "[seq2seq][predict][errors]", BahdanauNet<float>, TransformerNet<float>) {
  using Net = TestType;
  heed::NmtData data = small_corpus(40);
  heed::Generator gen(5);
  const std::unique_ptr<Net> net = small_net<Net>(data, gen);
  const std::vector<std::string> four = {"go .", "a .", "b .", "c ."};
  const auto predict = [&](const std::vector<std::string>& sentences, const heed::PredictOptions& options) {
    return heed::predict_seq2seq<float>(*net, sentences, data.src_vocab, data.tgt_vocab, 10, options);
  };
  heed::PredictOptions huge;
  huge.beam_size = index_t(1) << 62;  // × 4 sentences wraps int64
  CHECK_ERROR(heed::ValueError, "predict_seq2seq: 4 * 4611686018427387904 overflows int64 (sentences × beam_size)",
              predict(four, huge));
  huge.beam_size = index_t(1) << 40;  // fits int64, not memory: a step's logits alone are terabytes
  CHECK_ERROR(heed::OutOfMemoryError, "bytes of memory", predict(four, huge));
  huge.beam_size = 1'000'000'000;  // sampling: a generator per sample, refused at once
  huge.sample = true;
  CHECK_ERROR(heed::OutOfMemoryError, "predict_seq2seq: ", predict({"go ."}, huge));

  heed::PredictOptions lengths;
  lengths.max_length = std::numeric_limits<index_t>::max();  // the GRU has no positions: kMaxLength bounds it
  CHECK_ERROR(heed::ValueError, "predict_seq2seq: max_length = 9223372036854775807 steps is more than the decoder's ",
              predict(four, lengths));
  lengths.max_length = heed::PredictOptions::kMaxLength + 1;
  CHECK_ERROR(heed::ValueError, "steps is more than the decoder's", predict(four, lengths));
  if constexpr (std::is_same_v<Net, TransformerNet<float>>) {  // the positional table: 1000 positions
    lengths.max_length = 1001;
    CHECK_ERROR(heed::ValueError, "predict_seq2seq: max_length = 1001 steps is more than the decoder's 1000 positions",
                predict(four, lengths));
    lengths.max_length = 1000;  // the last position the table has
    lengths.save_attention_weights = false;
    CHECK(predict({"go ."}, lengths).front().tokens.size() <= 1000);
    heed::PredictOptions short_output;  // the decoder's steps fit: the source's do not
    short_output.max_length = 10;
    CHECK_ERROR(heed::ValueError, "predict_seq2seq: num_steps = 1001 is more than the encoder's 1000 positions",
                heed::predict_seq2seq<float>(*net, four, data.src_vocab, data.tgt_vocab, 1001, short_output));
  }

  heed::PredictOptions penalty;
  penalty.beam_size = 2;
  for (const double alpha : {std::numeric_limits<double>::infinity(), std::numeric_limits<double>::quiet_NaN(), 10.5}) {
    penalty.length_penalty = alpha;
    INFO("length_penalty " << alpha);
    CHECK_ERROR(heed::ValueError, "predict_seq2seq: length_penalty must be in [0, 10], got ", predict(four, penalty));
  }
  penalty.length_penalty = 10.0;  // the largest: every score stays finite and ordered
  for (const auto& t : predict(four, penalty))
    for (const auto& h : t.n_best) CHECK(std::isfinite(h.score));
}

TEST_CASE("sample_token draws each token with its tempered, cut and renormalised probability", "[seq2seq][predict]") {
  // P = (1/2, 1/4, 1/8, 1/8)
  const std::vector<double> logits = {std::log(0.5), std::log(0.25), std::log(0.125), std::log(0.125)};
  struct Case {
    double temperature;
    index_t top_k;
    double top_p;
    std::vector<index_t> forbidden;
    std::vector<double> expected;
  };
  const double r2 = std::sqrt(0.5), r4 = 0.5, r8 = std::sqrt(0.125), t2 = r2 + r4 + 2 * r8;
  const std::vector<Case> cases = {
      {1.0, 0, 1.0, {}, {0.5, 0.25, 0.125, 0.125}},
      {1.0, 2, 1.0, {}, {2.0 / 3, 1.0 / 3, 0, 0}},
      {1.0, 3, 1.0, {}, {0.5, 0.25, 0.125, 0.125}},  // a tie at the 3rd: both kept
      {1.0, 0, 0.7, {}, {2.0 / 3, 1.0 / 3, 0, 0}},   // 1/2 < 0.7 <= 3/4
      {1.0, 0, 0.5, {}, {1, 0, 0, 0}},
      {2.0, 0, 1.0, {}, {r2 / t2, r4 / t2, r8 / t2, r8 / t2}},
      {1.0, 0, 1.0, {0}, {0, 0.5, 0.25, 0.25}},
      {1.0, 1, 1.0, {0}, {0, 1, 0, 0}},
  };
  heed::Generator gen(7);
  heed::detail::SampleScratch scratch;
  constexpr int kDraws = 40000;
  for (const Case& c : cases) {
    heed::PredictOptions options;
    options.temperature = c.temperature;
    options.top_k = c.top_k;
    options.top_p = c.top_p;
    INFO("temperature " << c.temperature << ", top_k " << c.top_k << ", top_p " << c.top_p << ", " << c.forbidden.size()
                        << " forbidden");
    std::vector<int> counts(4, 0);
    for (int draw = 0; draw < kDraws; ++draw) {
      std::vector<double> row = logits;
      heed::detail::TopToken<double> top{};
      REQUIRE(heed::detail::sample_token(row.data(), 4, &top, c.forbidden, options, gen, scratch) == 1);
      ++counts[static_cast<std::size_t>(top.token)];
      CHECK(top.log_prob == Approx(logits[static_cast<std::size_t>(top.token)]).margin(1e-12));  // the model's log P
    }
    for (std::size_t v = 0; v < 4; ++v) {
      // 5 standard deviations of a binomial share at most: 5 · 0.5 / √40000 = 0.0125
      CHECK(static_cast<double>(counts[v]) / kDraws == Approx(c.expected[v]).margin(0.0125));
      if (c.expected[v] == 0.0) CHECK(counts[v] == 0);
    }
  }
  std::vector<double> row = logits;
  heed::detail::TopToken<double> top{};
  CHECK(heed::detail::sample_token(row.data(), 4, &top, {0, 1, 2, 3}, heed::PredictOptions{}, gen, scratch) == 0);
}

TEST_CASE("forbidden_tokens: <eos> before min_length and the ends of repeated n-grams", "[seq2seq][predict]") {
  heed::PredictOptions options;
  std::vector<index_t> out;
  const index_t eos = 3;
  options.min_length = 2;
  heed::detail::forbidden_tokens({7}, options, eos, {}, out);
  CHECK(out == std::vector<index_t>{3});
  heed::detail::forbidden_tokens({7, 8}, options, eos, {}, out);
  CHECK(out.empty());
  options.min_length = 0;
  const std::vector<index_t> tokens = {5, 6, 5, 6, 5};
  options.no_repeat_ngram_size = 1;
  heed::detail::forbidden_tokens(tokens, options, eos, {}, out);
  CHECK(out == std::vector<index_t>{5, 6, 5, 6, 5});
  options.no_repeat_ngram_size = 2;  // after 5: the bigrams (5, 6) at 0 and 2
  heed::detail::forbidden_tokens(tokens, options, eos, {}, out);
  CHECK(out == std::vector<index_t>{6, 6});
  options.no_repeat_ngram_size = 3;  // after (6, 5): (6, 5, 6) at 1
  heed::detail::forbidden_tokens(tokens, options, eos, {}, out);
  CHECK(out == std::vector<index_t>{6});
  options.no_repeat_ngram_size = 6;  // longer than the hypothesis
  heed::detail::forbidden_tokens(tokens, options, eos, {}, out);
  CHECK(out.empty());
  // The reserved tokens that are not <eos> come first, always.
  heed::detail::forbidden_tokens(tokens, options, eos, {1, 2}, out);
  CHECK(out == std::vector<index_t>{1, 2});
  options.min_length = 9;
  heed::detail::forbidden_tokens(tokens, options, eos, {1, 2}, out);
  CHECK(out == std::vector<index_t>{1, 2, 3});
  options.min_length = 0;
  // top_log_probs skips the forbidden tokens but keeps the model's log P.
  std::vector<float> logits = {0.5f, 2.0f, -1.0f, 1.0f};
  const heed::Tensor<float> expected = heed::log_softmax(heed::tensor<float>({0.5f, 2.0f, -1.0f, 1.0f}), 0);
  heed::detail::TopToken<float> best{};
  REQUIRE(heed::detail::top_log_probs(logits.data(), 4, &best, 1, {1}) == 1);
  CHECK(best.token == 3);
  CHECK(best.log_prob == expected.data()[3]);
  std::vector<float> none = {0.5f, 2.0f};
  CHECK(heed::detail::top_log_probs(none.data(), 2, &best, 1, {0, 1}) == 0);
}

TEST_CASE("Word alignments are the argmax of the encoder-decoder attention", "[seq2seq][alignment]") {
  // (1 layer, 2 heads, 3 target steps, 4 source steps)
  const Tensorf weights({0.7f, 0.1f, 0.1f, 0.1f, 0.1f, 0.6f, 0.2f, 0.1f, 0.0f, 0.0f, 0.1f, 0.9f,   // head 0
                         0.1f, 0.7f, 0.1f, 0.1f, 0.1f, 0.1f, 0.1f, 0.7f, 0.0f, 0.0f, 0.9f, 0.1f},  // head 1
                        Shape{1, 2, 3, 4});
  const heed::Alignment head0 = heed::align(weights, 0, 0, false);
  CHECK(head0 == heed::Alignment{{0, 0}, {1, 1}, {3, 2}});
  CHECK(heed::pharaoh(head0) == "0-0 1-1 3-2");
  CHECK(heed::pharaoh(heed::align(weights, 0, -1, false)) == "1-0 3-1 2-2");
  // Mean of the heads: step 0 (0.4, 0.4, 0.1, 0.1) and step 2 (0, 0, 0.5, 0.5) tie, the
  // first wins; step 1 (0.1, 0.35, 0.15, 0.4).
  CHECK(heed::pharaoh(heed::align(weights)) == "0-0 3-1 2-2");
  CHECK(heed::alignment_table({"he's", "calm", ".", "<eos>"}, {"il", "est", "calme"}, head0) ==
        "il → he's\nest → calm\ncalme → <eos>\n");
  CHECK_ERROR(heed::IndexError, "align: layer 1 and head 0 out of range for 1 layers and 2 heads",
              heed::align(weights, 1, 0, false));
  CHECK_ERROR(heed::ShapeError, "align: cross_attention must be (num_layers, num_heads, target steps, source steps)",
              heed::align(heed::zeros<float>({3, 4})));
}
