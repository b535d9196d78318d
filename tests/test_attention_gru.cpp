// attention_gru (heed/ops/attention_gru.hpp), the Bahdanau decoder's loop as one op:
// against the step-by-step composition of the modules it replaces (outputs, dropout
// masks and gradients), against finite differences, and its errors.
#include <heed/ops/attention_gru.hpp>

#include "seq2seq_common.hpp"

namespace {

/// The decoder's loop as it ran before attention_gru, from public modules and ops.
template <typename T>
struct StepByStep {
  heed::AdditiveAttention<T>& attention;
  heed::GRU<T>& rnn;

  heed::AttentionGruOutput<T> operator()(const Tensor<T>& embedded, Tensor<T> state, const Tensor<T>& values,
                                         const Tensor<T>& projected_keys, const IndexTensor& valid_lens) {
    std::vector<Tensor<T>> outputs, weights;
    for (index_t t = 0; t < embedded.shape()[0]; ++t) {
      const Tensor<T> query = heed::unsqueeze(heed::select(state, 0, rnn.num_layers() - 1), 1);
      const Tensor<T> context = attention.attend(query, projected_keys, values, valid_lens);
      weights.push_back(attention.attention_weights().squeeze(1));
      const Tensor<T> x = heed::cat({heed::transpose(context, 0, 1), heed::narrow(embedded, 0, t, 1)}, -1);
      heed::GRUOutput<T> step = rnn(x, state);
      outputs.push_back(step.outputs);
      state = step.state;
    }
    return {heed::cat(outputs, 0), state, heed::stack(weights, 0)};
  }
};

/// The decoder's parameters as attention_gru takes them.
template <typename T>
heed::AttentionGruWeights<T> weights_of(const heed::AdditiveAttention<T>& attention, const heed::GRU<T>& rnn) {
  return {attention.W_q.weight, attention.w_v.weight, rnn.weight_ih, rnn.weight_hh, rnn.bias_ih, rnn.bias_hh};
}

heed::AttentionGruOptions training_options(double p, bool keep_weights) {
  heed::AttentionGruOptions options;
  options.attention_dropout = options.dropout = p;
  options.attention_training = options.training = true;
  options.keep_attention_weights = keep_weights;
  return options;
}

}  // namespace

TEMPLATE_TEST_CASE("attention_gru gives the step-by-step decoder's outputs, dropout masks included",
                   "[seq2seq][attention_gru]", float, double) {
  using T = TestType;
  const double margin = std::is_same_v<T, float> ? 1e-6 : 1e-14;
  heed::Generator gen(3);
  const index_t batch = 5, num_keys = 7, H = 6, embed = 4, num_steps = 4;
  for (index_t num_layers : {1, 3}) {
    INFO(num_layers << " layer(s)");
    heed::AdditiveAttention<T> attention(H, H, H, 0.3, gen);
    heed::GRU<T> rnn(H + embed, H, num_layers, 0.3, gen);
    const Tensor<T> embedded = heed::randn<T>({num_steps, batch, embed}, gen);
    const Tensor<T> state = heed::randn<T>({num_layers, batch, H}, gen);
    const Tensor<T> values = heed::randn<T>({batch, num_keys, H}, gen);
    const Tensor<T> keys = attention.W_k(heed::randn<T>({batch, num_keys, H}, gen));
    const IndexTensor valid_lens = lens({7, 0, 3, 1, 9}, {batch});  // none, all and more than all

    heed::manual_seed(11);
    const auto fused = heed::attention_gru(embedded, state, values, keys, valid_lens, weights_of(attention, rnn),
                                           training_options(0.3, true));
    const std::uint64_t after_fused = heed::default_generator().next_u64();
    heed::manual_seed(11);
    const auto reference = StepByStep<T>{attention, rnn}(embedded, state, values, keys, valid_lens);
    // A mask that differed would move an output by far more than rounding.
    check_close(fused.outputs, reference.outputs, margin);
    check_close(fused.state, reference.state, margin);
    check_close(fused.attention_weights, reference.attention_weights, margin);
    // Both drew as many keys from the generator.
    CHECK(heed::default_generator().next_u64() == after_fused);
  }
}

TEST_CASE("attention_gru's gradients are the step-by-step decoder's", "[seq2seq][attention_gru]") {
  heed::Generator gen(4);
  const index_t batch = 3, num_keys = 5, H = 4, embed = 3, num_steps = 3, num_layers = 2;
  heed::AdditiveAttention<double> attention(H, H, H, 0.25, gen);
  heed::GRU<double> rnn(H + embed, H, num_layers, 0.25, gen);
  const Tensord embedded = heed::randn<double>({num_steps, batch, embed}, gen).requires_grad_();
  const Tensord state = heed::randn<double>({num_layers, batch, H}, gen).requires_grad_();
  const Tensord values = heed::randn<double>({batch, num_keys, H}, gen).requires_grad_();
  const Tensord keys = heed::randn<double>({batch, num_keys, H}, gen).requires_grad_();
  const IndexTensor valid_lens = lens({5, 2, 0}, {batch});
  const Tensord out_weights = heed::randn<double>({num_steps, batch, H}, gen);
  const Tensord state_weights = heed::randn<double>({num_layers, batch, H}, gen);

  std::vector<Tensord> inputs{embedded, state, values, keys, attention.W_q.weight, attention.w_v.weight};
  for (auto& p : rnn.parameters()) inputs.push_back(p);
  // d loss / d every input, for a loss that reads both outputs.
  const auto gradients = [&](const heed::AttentionGruOutput<double>& out) {
    for (auto& x : inputs) x.zero_grad();
    (heed::sum(out.outputs * out_weights) + heed::sum(out.state * state_weights)).backward();
    std::vector<std::vector<double>> grads;
    for (const auto& x : inputs) grads.push_back(x.grad().to_vector());
    return grads;
  };
  heed::manual_seed(5);
  const auto fused = gradients(heed::attention_gru(embedded, state, values, keys, valid_lens,
                                                   weights_of(attention, rnn), training_options(0.25, false)));
  heed::manual_seed(5);
  const auto reference = gradients(StepByStep<double>{attention, rnn}(embedded, state, values, keys, valid_lens));
  REQUIRE(fused.size() == reference.size());
  for (std::size_t i = 0; i < fused.size(); ++i) {
    INFO("input " << i);
    REQUIRE(fused[i].size() == reference[i].size());
    for (std::size_t j = 0; j < fused[i].size(); ++j) CHECK(fused[i][j] == Approx(reference[i][j]).margin(1e-12));
  }
}

TEST_CASE("attention_gru gradients match finite differences, dropout on", "[seq2seq][attention_gru][gradcheck]") {
  heed::Generator gen(6);
  const index_t batch = 2, num_keys = 4, H = 3, embed = 2, num_steps = 3;
  for (index_t num_layers : {1, 2}) {
    INFO(num_layers << " layer(s)");
    heed::AdditiveAttention<double> attention(H, H, 5, 0.2, gen);  // attention's hidden size 5, not H
    heed::GRU<double> rnn(H + embed, H, num_layers, 0.2, gen);
    std::vector<Tensord> inputs{heed::randn<double>({num_steps, batch, embed}, gen).requires_grad_(),
                                heed::randn<double>({num_layers, batch, H}, gen).requires_grad_(),
                                heed::randn<double>({batch, num_keys, H}, gen).requires_grad_(),
                                heed::randn<double>({batch, num_keys, 5}, gen).requires_grad_(),
                                attention.W_q.weight,
                                attention.w_v.weight};
    for (auto& p : rnn.parameters()) inputs.push_back(p);
    const IndexTensor valid_lens = lens({4, 2}, {batch});
    heed::Generator masks(8);
    auto options = training_options(0.2, false);
    options.attention_generator = &masks;
    auto f = [&](const std::vector<Tensord>& in) {
      masks.manual_seed(8);  // the same masks at every evaluation
      heed::manual_seed(9);
      heed::AttentionGruWeights<double> w{in[4], in[5], {}, {}, {}, {}};
      for (index_t l = 0; l < num_layers; ++l)
        for (auto* list : {&w.weight_ih, &w.weight_hh, &w.bias_ih, &w.bias_hh})
          list->push_back(in[static_cast<std::size_t>(6 + 4 * l) + static_cast<std::size_t>(list - &w.weight_ih)]);
      const auto out = heed::attention_gru(in[0], in[1], in[2], in[3], valid_lens, w, options);
      return heed::cat({out.outputs.reshape({-1}), out.state.reshape({-1})}, 0);
    };
    CHECK_GRADCHECK(heed::gradcheck(f, inputs));
  }
}

TEST_CASE("attention_gru refuses bad arguments, naming attention_gru and the shapes", "[seq2seq][attention_gru]") {
  heed::Generator gen(2);
  heed::AdditiveAttention<float> attention(4, 4, 4, 0.0, gen);
  heed::GRU<float> rnn(4 + 3, 4, 2, 0.0, gen);
  const Tensorf embedded = heed::randn<float>({2, 3, 3}, gen), state = heed::randn<float>({2, 3, 4}, gen);
  const Tensorf values = heed::randn<float>({3, 5, 4}, gen), keys = heed::randn<float>({3, 5, 4}, gen);
  const auto weights = weights_of(attention, rnn);
  const auto call = [&](const Tensorf& e, const Tensorf& s, const Tensorf& v, const Tensorf& k,
                        const IndexTensor& lens_, const heed::AttentionGruWeights<float>& w,
                        const heed::AttentionGruOptions& o = {}) {
    return heed::attention_gru(e, s, v, k, lens_, w, o);
  };
  CHECK_NOTHROW(call(embedded, state, values, keys, IndexTensor(), weights));
  CHECK_ERROR(heed::ShapeError, "(1, 3, 4)",
              call(embedded, heed::randn<float>({1, 3, 4}, gen), values, keys, IndexTensor(), weights));
  CHECK_ERROR(heed::ShapeError, "values (2, 5, 4)",
              call(embedded, state, heed::randn<float>({2, 5, 4}, gen), keys, IndexTensor(), weights));
  CHECK_ERROR(heed::ShapeError, "attention_gru: layer 0 must have weight_ih (12, 9)",
              call(heed::randn<float>({2, 3, 5}, gen), state, values, keys, IndexTensor(), weights));
  CHECK_ERROR(heed::ShapeError, "num_steps >= 1",
              call(heed::randn<float>({0, 3, 3}, gen), state, values, keys, IndexTensor(), weights));
  auto short_of_a_layer = weights;
  short_of_a_layer.bias_hh.pop_back();
  CHECK_ERROR(heed::ValueError, "got 2, 2, 2 and 1",
              call(embedded, state, values, keys, IndexTensor(), short_of_a_layer));
  auto wrong_w_v = weights;
  wrong_w_v.w_v = heed::randn<float>({4, 1}, gen);
  CHECK_ERROR(heed::ShapeError, "w_v (1, A) = (1, 4), got (4, 4) and (4, 1)",
              call(embedded, state, values, keys, IndexTensor(), wrong_w_v));
  CHECK_THROWS_AS(call(embedded, state, values, keys, lens({1, 2}, {2}), weights), heed::ShapeError);
  CHECK_THROWS_AS(call(embedded, state, values, keys, lens({1, -2, 3}, {3}), weights), heed::ValueError);
  heed::AttentionGruOptions bad;
  bad.dropout = 1.5;
  CHECK_ERROR(heed::ValueError, "attention_gru: dropout probability must be in [0, 1], got 1.5",
              call(embedded, state, values, keys, IndexTensor(), weights, bad));
}
