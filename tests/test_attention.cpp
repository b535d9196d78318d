// The scoring modules (heed/attention: DotProductAttention, AdditiveAttention,
// ConcatAttention): d2l's listings, golden values from d2l's PyTorch code
// (tests/data/make_attention_golden.py) and gradients against finite differences.
#include "attention_common.hpp"

// ---- DotProductAttention ------------------------------------------------------------------

TEST_CASE("DotProductAttention reproduces the d2l listing", "[attention]") {
  D2lInputs in;
  heed::Generator gen(0);
  const Tensorf queries = heed::normal<float>(0, 1, {2, 1, 2}, gen);
  heed::DotProductAttention<float> attention(0.5);
  attention.eval();
  check_values(attention(queries, in.keys, in.values, in.valid_lens), {2, 3, 4, 5, 10, 11, 12, 13}, 1e-5);
  REQUIRE(attention.attention_weights().shape() == Shape{2, 1, 10});
  CHECK(attention.attention_weights().at({0, 0, 1}) == Approx(0.5));
  CHECK(attention.attention_weights().at({1, 0, 6}) == 0.0f);
}

TEMPLATE_TEST_CASE("DotProductAttention matches d2l's PyTorch code", "[attention][golden]", float, double) {
  for (const std::string c : {"dot", "dot1", "dot_d2l"}) {
    heed::DotProductAttention<TestType> attention(0.0);
    check_golden_attention<TestType>(golden(), attention, c);
  }
}

TEST_CASE("DotProductAttention: gradients, heads, dropout and kept weights", "[attention][autograd]") {
  heed::Generator gen(1);
  SECTION("gradcheck with 2-D valid_lens and with a causal mask") {
    Tensord q = heed::randn<double>({2, 3, 4}, gen).requires_grad_();
    Tensord k = heed::randn<double>({2, 5, 4}, gen).requires_grad_();
    Tensord v = heed::randn<double>({2, 5, 3}, gen).requires_grad_();
    heed::DotProductAttention<double> attention(0.0);
    for (const AttentionMask<double>& mask :
         {AttentionMask<double>(lens({1, 0, 5, 2, 3, 4}, {2, 3})), AttentionMask<double>::causal()}) {
      const auto result = heed::gradcheck(
          [&](const std::vector<Tensord>& in) { return attention(in[0], in[1], in[2], mask); }, {q, k, v});
      INFO(result.message);
      CHECK(result.ok);
    }
  }
  SECTION("4-D (batch, heads, steps, d) inputs equal attention head by head") {
    const Tensorf q = heed::randn<float>({2, 3, 4, 8}, gen), k = heed::randn<float>({2, 3, 6, 8}, gen),
                  v = heed::randn<float>({2, 3, 6, 5}, gen);
    const IndexTensor valid_lens = lens({3, 6}, {2});
    heed::DotProductAttention<float> attention;
    const Tensorf out = attention(q, k, v, valid_lens);
    for (index_t h = 0; h < 3; ++h) {
      heed::DotProductAttention<float> single;
      check_close(out.select(1, h), single(q.select(1, h), k.select(1, h), v.select(1, h), valid_lens), 1e-6);
    }
  }
  SECTION("dropout acts in training mode only; outputs do not depend on keeping weights") {
    const Tensorf q = heed::randn<float>({2, 4, 8}, gen), k = heed::randn<float>({2, 6, 8}, gen),
                  v = heed::randn<float>({2, 6, 5}, gen);
    heed::DotProductAttention<float> attention(0.5), plain(0.0);
    attention.eval();
    const Tensorf expected = plain(q, k, v);
    check_close(attention(q, k, v), expected, 0);
    attention.train();
    const Tensorf dropped = attention(q, k, v);
    bool differs = false;
    for (index_t i = 0; i < dropped.numel(); ++i) differs = differs || dropped.data()[i] != expected.data()[i];
    CHECK(differs);
    attention.eval();
    attention.keep_attention_weights(false);  // the fused path: the same up to rounding
    check_close(attention(q, k, v), expected, 1e-6);
    CHECK_FALSE(attention.attention_weights().defined());
  }
  SECTION("a query that sees no key gets a zero output and passes no gradient") {
    Tensord q = heed::randn<double>({2, 3, 4}, gen).requires_grad_();
    Tensord k = heed::randn<double>({2, 5, 4}, gen).requires_grad_();
    Tensord v = heed::randn<double>({2, 5, 3}, gen).requires_grad_();
    heed::DotProductAttention<double> attention;
    const Tensord out = attention(q, k, v, lens({0, 2}, {2}));  // batch 0 sees nothing
    check_values(out.select(0, 0), std::vector<double>(9, 0.0), 0);
    CHECK(out.select(0, 1).abs().sum().item() > 0);
    out.sum().backward();
    check_values(q.grad().select(0, 0), std::vector<double>(12, 0.0), 0);
    check_values(k.grad().select(0, 0), std::vector<double>(20, 0.0), 0);
    check_values(v.grad().select(0, 0), std::vector<double>(15, 0.0), 0);
    check_values(v.grad().select(0, 1).slice(0, 2, 5), std::vector<double>(9, 0.0), 0);  // keys past valid_len
  }
  SECTION("shape errors name the module") {
    heed::DotProductAttention<float> attention;
    const Tensorf q = heed::zeros<float>({2, 4, 8});
    CHECK_THROWS_AS(attention(q, heed::zeros<float>({2, 6, 7}), heed::zeros<float>({2, 6, 5})), heed::ShapeError);
    CHECK_THROWS_WITH(attention(q, heed::zeros<float>({3, 6, 8}), heed::zeros<float>({3, 6, 5})),
                      Contains("DotProductAttention") && Contains("batch"));
    CHECK_THROWS_AS(attention(q, heed::zeros<float>({2, 6, 8}), heed::zeros<float>({2, 5, 5})), heed::ShapeError);
    CHECK_THROWS_AS(attention(heed::zeros<float>({4, 8}), heed::zeros<float>({6, 8}), heed::zeros<float>({6, 5})),
                    heed::ShapeError);
  }
}

// ---- AdditiveAttention ----------------------------------------------------------------------

TEST_CASE("AdditiveAttention reproduces the d2l listing", "[attention]") {
  D2lInputs in;
  heed::Generator gen(0);
  const Tensorf queries = heed::normal<float>(0, 1, {2, 1, 20}, gen);
  heed::AdditiveAttention<float> attention(2, 20, 8, 0.1, gen);
  attention.eval();
  check_values(attention(queries, in.keys, in.values, in.valid_lens), {2, 3, 4, 5, 10, 11, 12, 13}, 1e-5);
  REQUIRE(attention.attention_weights().shape() == Shape{2, 1, 10});
  CHECK(attention.num_parameters() == 2 * 8 + 20 * 8 + 8);
  CHECK(attention.repr() ==
        "AdditiveAttention(\n"
        "  (W_k): Linear(in_features=2, out_features=8, bias=False)\n"
        "  (W_q): Linear(in_features=20, out_features=8, bias=False)\n"
        "  (w_v): Linear(in_features=8, out_features=1, bias=False)\n"
        "  (dropout): Dropout(p=0.1, inplace=False)\n"
        ")");
}

TEMPLATE_TEST_CASE("AdditiveAttention matches d2l's PyTorch code", "[attention][golden]", float, double) {
  for (const std::string c : {"additive", "additive_d2l"}) {
    heed::AdditiveAttention<TestType> attention(2, 20, 8, 0.0);
    load_parameters(golden(), attention, c);
    check_golden_attention<TestType>(golden(), attention, c);
  }
}

TEST_CASE("AdditiveAttention passes gradcheck for inputs and parameters", "[attention][autograd]") {
  heed::Generator gen(2);
  Tensord q = heed::randn<double>({2, 3, 4}, gen).requires_grad_();
  Tensord k = heed::randn<double>({2, 5, 3}, gen).requires_grad_();
  Tensord v = heed::randn<double>({2, 5, 2}, gen).requires_grad_();
  heed::AdditiveAttention<double> attention(3, 4, 6, 0.0, gen);
  std::vector<Tensord> inputs{q, k, v};
  for (auto& p : attention.parameters()) inputs.push_back(p);
  const IndexTensor valid_lens = lens({2, 4, 0, 5, 1, 3}, {2, 3});
  const auto result = heed::gradcheck(
      [&](const std::vector<Tensord>& in) { return attention(in[0], in[1], in[2], valid_lens); }, inputs);
  INFO(result.message);
  CHECK(result.ok);
  CHECK_THROWS_WITH(attention(q, heed::zeros<double>({2, 5, 4}), v), Contains("in_features"));
}

// ---- ConcatAttention --------------------------------------------------------------------------

TEST_CASE("ConcatAttention with the tutorial's sizes", "[attention]") {
  heed::Generator gen(4);
  heed::ConcatAttention<float> attention(32, 32, 32, 64, 64, gen);
  const auto [output, weights] = attention(heed::rand<float>({1, 1, 32}, gen), heed::rand<float>({1, 1, 32}, gen),
                                           heed::rand<float>({1, 32, 64}, gen));
  CHECK(output.shape() == Shape{1, 1, 64});
  CHECK(weights.shape() == Shape{1, 32});
  CHECK(weights.sum().item() == Approx(1.0f).epsilon(1e-6));
  CHECK(attention.attention_weights().shape() == Shape{1, 32});
  std::vector<std::string> names;
  for (auto& [name, p] : attention.named_parameters()) names.push_back(name);
  CHECK(names == std::vector<std::string>{"attn.weight", "attn.bias", "attn_combine.weight", "attn_combine.bias"});
  CHECK_THROWS_AS(attention(heed::rand<float>({1, 1, 31}, gen), heed::rand<float>({1, 1, 32}, gen),
                            heed::rand<float>({1, 32, 64}, gen)),
                  heed::ShapeError);
}

TEMPLATE_TEST_CASE("ConcatAttention matches the tutorial's PyTorch code", "[attention][golden]", float, double) {
  Tensor<TestType> Q = leaf<TestType>(golden(), "concat.Q"), K = leaf<TestType>(golden(), "concat.K"),
                   V = leaf<TestType>(golden(), "concat.V");
  heed::ConcatAttention<TestType> attention(4, 3, 5, 6, 7);
  load_parameters(golden(), attention, "concat");
  const auto [output, weights] = attention(Q, K, V);
  check_close(output, golden().tensor<TestType>("concat.output"), tolerance<TestType>());
  check_close(weights, golden().tensor<TestType>("concat.attention_weights"), tolerance<TestType>());
  output.backward(golden().tensor<TestType>("concat.R"));
  check_close(Q.grad(), golden().tensor<TestType>("concat.grad.Q"), tolerance<TestType>());
  check_close(K.grad(), golden().tensor<TestType>("concat.grad.K"), tolerance<TestType>());
  check_close(V.grad(), golden().tensor<TestType>("concat.grad.V"), tolerance<TestType>());
  check_parameter_grads(golden(), attention, "concat");
}

TEST_CASE("ConcatAttention passes gradcheck", "[attention][autograd]") {
  heed::Generator gen(5);
  heed::ConcatAttention<double> attention(4, 3, 5, 6, 7, gen);
  std::vector<Tensord> inputs{heed::randn<double>({1, 2, 4}, gen).requires_grad_(),
                              heed::randn<double>({1, 2, 3}, gen).requires_grad_(),
                              heed::randn<double>({1, 5, 6}, gen).requires_grad_()};
  for (auto& p : attention.parameters()) inputs.push_back(p);
  const auto result =
      heed::gradcheck([&](const std::vector<Tensord>& in) { return attention(in[0], in[1], in[2]).first; }, inputs);
  INFO(result.message);
  CHECK(result.ok);
}
