// Tests of masked_softmax and the scoring modules (d2l 10.3 and the concatenation
// rule): d2l's listings, golden values from d2l's PyTorch code
// (tests/data/make_attention_golden.py), the mask contract on every mask path, and
// gradients against finite differences.
#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "check.hpp"
#include "golden.hpp"

using Catch::Matchers::Contains;
using heed::AttentionMask;
using heed::BoolTensor;
using heed::index_t;
using heed::IndexTensor;
using heed::Shape;
using heed::Tensor;
using heed::Tensord;
using heed::Tensorf;
using heed_test::check_close;
using heed_test::check_golden_attention;
using heed_test::check_parameter_grads;
using heed_test::check_values;
using heed_test::leaf;
using heed_test::lens;
using heed_test::load_parameters;
using heed_test::tolerance;

namespace {

const heed_test::Golden& golden() {
  static const heed_test::Golden g("attention_golden.txt");
  return g;
}

/// The d2l listing's inputs: keys of ones, values 0..39, valid_lens [2, 6].
struct D2lInputs {
  Tensorf keys = heed::ones<float>({2, 10, 2});
  Tensorf values = heed::arange<float>(0, 40).reshape({1, 10, 4}).repeat({2, 1, 1});
  IndexTensor valid_lens = lens({2, 6}, {2});
};

// ---- a reference masked softmax in double, straight from the definition ---------------

struct Reference {
  std::vector<double> weights;  // row-major, scores' shape
  std::vector<bool> allowed;
};

/// softmax over the allowed keys of each row; `allowed(row, query, key)` and `add(i)`
/// describe the mask element-wise.
Reference reference_softmax(const Tensord& scores, const std::function<bool(index_t, index_t, index_t)>& allowed,
                            const std::function<double(index_t)>& add) {
  const index_t num_queries = scores.shape()[-2], num_keys = scores.shape()[-1];
  const index_t rows = scores.numel() / num_keys;
  Reference ref{std::vector<double>(static_cast<std::size_t>(scores.numel()), 0.0),
                std::vector<bool>(static_cast<std::size_t>(scores.numel()), false)};
  for (index_t r = 0; r < rows; ++r) {
    double max = -std::numeric_limits<double>::infinity();
    for (index_t j = 0; j < num_keys; ++j) {
      const index_t i = r * num_keys + j;
      const double s = scores.data()[i] + add(i);
      ref.allowed[static_cast<std::size_t>(i)] = allowed(r, r % num_queries, j) && s > -1e300;
      if (ref.allowed[static_cast<std::size_t>(i)]) max = std::max(max, s);
    }
    double sum = 0;
    for (index_t j = 0; j < num_keys; ++j) {
      const auto i = static_cast<std::size_t>(r * num_keys + j);
      if (ref.allowed[i]) sum += ref.weights[i] = std::exp(scores.data()[i] + add(static_cast<index_t>(i)) - max);
    }
    for (index_t j = 0; j < num_keys; ++j) ref.weights[static_cast<std::size_t>(r * num_keys + j)] /= sum > 0 ? sum : 1;
  }
  return ref;
}

/// The mask contract: values equal the reference; masked keys get weight 0 and gradient
/// 0; a fully masked row gives zeros; and backward agrees with finite differences.
void check_mask_contract(const Tensord& scores, const AttentionMask<double>& mask, const Reference& ref) {
  Tensord x = scores.clone().detach().requires_grad_();
  const Tensord weights = heed::masked_softmax(x, mask);
  check_values(weights, ref.weights, 1e-12);
  const index_t num_keys = scores.shape()[-1];
  heed::Generator gen(7);
  const Tensord g = heed::randn<double>(scores.shape(), gen);
  weights.backward(g);
  for (index_t r = 0; r < scores.numel() / num_keys; ++r) {
    bool any = false;
    double sum = 0;
    for (index_t j = 0; j < num_keys; ++j) {
      const index_t i = r * num_keys + j;
      any = any || ref.allowed[static_cast<std::size_t>(i)];
      sum += weights.data()[i];
      if (!ref.allowed[static_cast<std::size_t>(i)]) {
        INFO("row " << r << ", key " << j);
        CHECK(weights.data()[i] == 0.0);
        CHECK(x.grad().data()[i] == 0.0);
      }
    }
    INFO("row " << r);
    CHECK(sum == Approx(any ? 1.0 : 0.0).margin(1e-12));
  }
  const auto result =
      heed::gradcheck([&](const std::vector<Tensord>& in) { return heed::masked_softmax(in[0], mask); }, {x});
  INFO(result.message);
  CHECK(result.ok);
}

}  // namespace

// ---- masked_softmax ---------------------------------------------------------------------

TEST_CASE("masked_softmax reproduces the d2l listings", "[attention]") {
  heed::Generator gen(0);
  const Tensorf x = heed::rand<float>({2, 2, 4}, gen);
  SECTION("1-D valid_lens: each batch's rows sum to 1 over its prefix") {
    const Tensorf w = heed::masked_softmax(x, lens({2, 3}, {2}));
    for (index_t b = 0; b < 2; ++b)
      for (index_t q = 0; q < 2; ++q) {
        const index_t valid = b == 0 ? 2 : 3;
        double sum = 0;
        for (index_t k = 0; k < 4; ++k) {
          if (k >= valid) CHECK(w.at({b, q, k}) == 0.0f);
          sum += w.at({b, q, k});
        }
        CHECK(sum == Approx(1.0).epsilon(1e-6));
      }
  }
  SECTION("2-D valid_lens: one length per query") {
    const Tensorf w = heed::masked_softmax(x, lens({1, 3, 2, 4}, {2, 2}));
    CHECK(w.at({0, 0, 0}) == 1.0f);
    CHECK(w.at({0, 1, 3}) == 0.0f);
    CHECK(w.at({1, 0, 2}) == 0.0f);
    CHECK(w.at({1, 1, 3}) > 0.0f);
    check_close(w.sum(-1), heed::ones<float>({2, 2}), 1e-6);
  }
  SECTION("valid lengths as whole floats, as d2l sometimes passes them") {
    check_close(heed::masked_softmax(x, heed::tensor<float>({2, 3})), heed::masked_softmax(x, lens({2, 3}, {2})), 0);
  }
  SECTION("no valid_lens is the plain softmax") { check_close(heed::masked_softmax(x), heed::softmax(x, -1), 0); }
  SECTION("a valid length at or past num_keys masks nothing") {
    check_close(heed::masked_softmax(x, lens({4, 9}, {2})), heed::softmax(x, -1), 0);
  }
}

TEMPLATE_TEST_CASE("masked_softmax matches d2l's PyTorch code", "[attention][golden]", float, double) {
  for (const std::string c : {"ms0", "ms1", "ms2"}) {
    INFO("case " << c);
    Tensor<TestType> x = leaf<TestType>(golden(), c + ".X");
    const IndexTensor valid_lens =
        golden().has(c + ".valid_lens") ? golden().tensor<std::int64_t>(c + ".valid_lens") : IndexTensor();
    const Tensor<TestType> out = heed::masked_softmax(x, valid_lens);
    check_close(out, golden().tensor<TestType>(c + ".output"), tolerance<TestType>());
    out.backward(golden().tensor<TestType>(c + ".R"));
    check_close(x.grad(), golden().tensor<TestType>(c + ".grad.X"), tolerance<TestType>());
  }
}

TEST_CASE("masked_softmax: a valid length of 0 gives zero weights, never NaN", "[attention]") {
  // d2l's -1e6 fill would make this row uniform; heed documents zeros instead.
  Tensord x = heed::tensor<double>({{{1.0, 2.0, 3.0}, {0.5, 0.5, 0.5}}}).requires_grad_();
  const Tensord w = heed::masked_softmax(x, lens({0, 2}, {1, 2}));
  check_values(w.select(1, 0), {0, 0, 0});
  CHECK(w.select(1, 1).sum().item() == Approx(1.0));
  w.sum().backward();
  check_values(x.grad().select(1, 0), {0, 0, 0});
}

TEST_CASE("masked_softmax obeys the mask contract on every path", "[attention][autograd]") {
  heed::Generator gen(3);
  const Tensord scores3 = heed::randn<double>({2, 3, 5}, gen);
  const Tensord scores4 = heed::randn<double>({2, 2, 3, 5}, gen);
  const auto none = [](index_t) { return 0.0; };

  SECTION("1-D valid_lens, including an empty row") {
    const std::vector<index_t> v{0, 3};
    check_mask_contract(scores3, lens({0, 3}, {2}),
                        reference_softmax(
                            scores3, [&](index_t r, index_t, index_t j) { return j < v[r / 3]; }, none));
  }
  SECTION("2-D valid_lens") {
    const std::vector<index_t> v{1, 5, 0, 2, 9, 4};
    check_mask_contract(scores3, lens({1, 5, 0, 2, 9, 4}, {2, 3}),
                        reference_softmax(
                            scores3, [&](index_t r, index_t, index_t j) { return j < v[r]; }, none));
  }
  SECTION("4-D scores: 1-D, (batch, queries) and (batch, heads, queries) valid_lens") {
    check_mask_contract(scores4, lens({2, 0}, {2}),
                        reference_softmax(
                            scores4, [](index_t r, index_t, index_t j) { return j < (r < 6 ? 2 : 0); }, none));
    const std::vector<index_t> per_query{1, 2, 3, 4, 5, 0};  // the same for both heads
    check_mask_contract(
        scores4, lens({1, 2, 3, 4, 5, 0}, {2, 3}),
        reference_softmax(
            scores4, [&](index_t r, index_t q, index_t j) { return j < per_query[(r / 6) * 3 + q]; }, none));
    const std::vector<std::int64_t> per_head{1, 2, 3, 4, 5, 0, 0, 1, 2, 3, 4, 5};
    check_mask_contract(scores4, lens(per_head, {2, 2, 3}),
                        reference_softmax(
                            scores4, [&](index_t r, index_t, index_t j) { return j < per_head[r]; }, none));
  }
  SECTION("boolean mask (true = may attend), broadcast over queries") {
    // (batch, 1, keys): batch 0 sees keys 0 and 3, batch 1 sees none.
    const BoolTensor allowed(std::vector<bool>{true, false, false, true, false, false, false, false, false, false},
                             Shape{2, 1, 5});
    check_mask_contract(scores3, allowed,
                        reference_softmax(
                            scores3, [](index_t r, index_t, index_t j) { return r < 3 && (j == 0 || j == 3); }, none));
  }
  SECTION("boolean mask broadcast over batch and heads") {
    const BoolTensor allowed = heed::tensor<double>({{1, 0, 1, 0, 1}, {0, 0, 0, 0, 0}, {1, 1, 1, 1, 1}}) > 0.5;
    check_mask_contract(
        scores4, allowed,
        reference_softmax(
            scores4, [](index_t, index_t q, index_t j) { return q == 2 || (q == 0 && j % 2 == 0); }, none));
  }
  SECTION("additive mask with -inf entries") {
    const double inf = std::numeric_limits<double>::infinity();
    const Tensord add = heed::tensor<double>(
        {{0.5, -inf, 0.0, -1.0, 0.0}, {-inf, -inf, -inf, -inf, -inf}, {0.0, 0.0, 0.0, 0.0, 2.0}});  // (queries, keys)
    check_mask_contract(
        scores3, AttentionMask<double>::additive(add),
        reference_softmax(
            scores3, [](index_t, index_t, index_t) { return true; }, [&](index_t i) { return add.data()[i % 15]; }));
  }
  SECTION("causal, aligned at the end") {
    for (const index_t num_queries : {5, 2, 7}) {
      INFO("num_queries " << num_queries);
      const Tensord scores = heed::randn<double>({2, num_queries, 5}, gen);
      check_mask_contract(scores, AttentionMask<double>::causal(),
                          reference_softmax(
                              scores, [&](index_t, index_t q, index_t j) { return j <= q + 5 - num_queries; }, none));
    }
  }
  SECTION("causal combined with valid_lens and a boolean mask") {
    const BoolTensor allowed = heed::tensor<double>({1, 1, 0, 1, 1}) > 0.5;
    const auto mask = AttentionMask<double>(lens({2, 4}, {2})).with_causal().with_allowed(allowed);
    check_mask_contract(
        scores3, mask,
        reference_softmax(
            scores3, [](index_t r, index_t q, index_t j) { return j < (r < 3 ? 2 : 4) && j <= q + 2 && j != 2; },
            none));
  }
}

TEST_CASE("causal masking of equal lengths is the lower triangle", "[attention]") {
  const Tensorf w = heed::masked_softmax(heed::zeros<float>({1, 3, 3}), AttentionMask<float>::causal());
  check_values(w, {1, 0, 0, 0.5, 0.5, 0, 1.0 / 3, 1.0 / 3, 1.0 / 3});
}

TEST_CASE("masked_softmax rejects bad masks, naming the op and the shapes", "[attention][errors]") {
  const Tensorf x = heed::zeros<float>({2, 3, 4});
  CHECK_THROWS_AS(heed::masked_softmax(x, lens({-1, 2}, {2})), heed::ValueError);
  CHECK_THROWS_WITH(heed::masked_softmax(x, lens({-1, 2}, {2})), Contains("masked_softmax") && Contains("-1"));
  CHECK_THROWS_AS(heed::masked_softmax(x, heed::tensor<float>({1.5f, 2.f})), heed::ValueError);
  CHECK_THROWS_WITH(heed::masked_softmax(x, heed::tensor<float>({1.5f, 2.f})), Contains("whole numbers"));
  CHECK_THROWS_AS(heed::masked_softmax(x, lens({1, 2, 3}, {3})), heed::ShapeError);
  CHECK_THROWS_WITH(heed::masked_softmax(x, lens({1, 2, 3}, {3})), Contains("(3)") && Contains("(2, 3, 4)"));
  CHECK_THROWS_AS(heed::masked_softmax(x, lens({1, 2}, {1, 2})), heed::ShapeError);
  CHECK_THROWS_AS(heed::masked_softmax(heed::zeros<float>({3, 4})), heed::ShapeError);
  CHECK_THROWS_AS(heed::masked_softmax(x, heed::zeros<float>({3, 3}) > 0.f), heed::ShapeError);
  CHECK_THROWS_WITH(heed::masked_softmax(x, heed::zeros<float>({3, 3}) > 0.f), Contains("boolean mask"));
  CHECK_THROWS_AS(heed::masked_softmax(x, AttentionMask<float>::additive(heed::zeros<float>({5}))), heed::ShapeError);
}

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
