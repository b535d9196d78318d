// predict_seq2seq (heed/seq2seq/predict.hpp): greedy, batched and beam search; and the
// word alignments taken from its attention (heed/seq2seq/alignment.hpp).
#include <cmath>
#include <limits>

#include "seq2seq_common.hpp"

namespace {

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

}  // namespace

TEMPLATE_TEST_CASE("predict_seq2seq decodes greedily, in batches, and with beam search", "[seq2seq][predict]",
                   BahdanauNet<float>, TransformerNet<float>) {
  using Net = TestType;
  heed::NmtData data = small_corpus(80);
  const std::unique_ptr<Net> net = trained_small_net<Net>(data, 11);
  const std::vector<std::string> sentences = {"go .", "i'm home .", "he's calm .", "we are not tired at all ."};

  // Greedy: each step's token is the argmax, its log-probability what the decoder gives.
  const auto greedy = heed::predict_seq2seq<float>(*net, sentences, data.src_vocab, data.tgt_vocab, 10);
  REQUIRE(greedy.size() == sentences.size());
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
  const std::vector<std::string> sentences = {"go .",     "i'm home .", "he's calm .", "we are not tired at all .",
                                              "i lost .", "he ran .",   "i'm fine .",  "wait ."};
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

TEST_CASE("top_log_probs gives the best tokens of a row with log_softmax's values", "[seq2seq][predict]") {
  // Ties go to the lower token, as a stable sort of the log-probabilities would order them.
  const std::vector<float> logits = {0.5f, 2.0f, -1.0f, 2.0f, 1.5f, -3.0f};
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
  const std::vector<float> with_nan = {nan, 1.0f, 2.0f};
  REQUIRE(heed::detail::top_log_probs(with_nan.data(), 3, best.data(), best.size()) == 1);
  std::vector<heed::detail::TopToken<float>> general(2);
  REQUIRE(heed::detail::top_log_probs(with_nan.data(), 3, general.data(), general.size()) == 2);
  CHECK(best[0].token == general[0].token);
  CHECK(std::isnan(best[0].log_prob) == std::isnan(general[0].log_prob));
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
