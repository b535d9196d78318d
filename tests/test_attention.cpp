// Tests of masked_softmax and the scoring modules (d2l 10.3 and the concatenation
// rule): d2l's listings, golden values from d2l's PyTorch code
// (tests/data/make_attention_golden.py), the mask contract on every mask path, and
// gradients against finite differences; the fused scaled_dot_product_attention against
// the classic path (at the end).
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

#ifdef _OPENMP
#include <omp.h>
#endif

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

// ---- scaled_dot_product_attention, the fused path ----------------------------------------
// It equals the classic path, matmul → masked_softmax → dropout → matmul, forward and
// backward, for every mask form, dropout, grouped heads and tile-crossing sizes; its
// gradients match finite differences; any thread count gives the same bits; the
// modules switch to it when their weights are not kept without changing results.

namespace {

/// max |x − y| / max |y|: the relative difference of two results of one shape.
template <typename T>
double relative_difference(const Tensor<T>& x, const Tensor<T>& y) {
  REQUIRE(x.shape() == y.shape());
  double diff = 0, scale = 0;
  for (index_t i = 0; i < x.numel(); ++i) {
    const double a = static_cast<double>(x.data()[i]), b = static_cast<double>(y.data()[i]);
    diff = std::isfinite(a) ? std::max(diff, std::abs(a - b)) : std::numeric_limits<double>::infinity();
    scale = std::max(scale, std::abs(b));
  }
  return scale > 0 ? diff / scale : diff;
}

template <typename T>
constexpr double kTolerance = std::is_same_v<T, float> ? 1e-5 : 1e-10;

/// The classic path, written out: what DotProductAttention computes when it keeps
/// its weights.
template <typename T>
Tensor<T> classic_attention(const Tensor<T>& q, const Tensor<T>& k, const Tensor<T>& v, const AttentionMask<T>& mask,
                            double p, heed::Generator& gen) {
  const T scale = T(1) / static_cast<T>(std::sqrt(static_cast<double>(q.shape()[-1])));
  if (q.dim() == 3 || q.shape()[1] == k.shape()[1]) {
    const Tensor<T> weights = heed::masked_softmax(heed::matmul(q * scale, k, false, true), mask);
    return heed::matmul(heed::dropout(weights, p, p > 0, gen), v);
  }
  // Grouped heads: each key/value head repeated for the query heads that share it.
  const index_t group = q.shape()[1] / k.shape()[1];
  const Tensor<T> keys = k.repeat_interleave(group, 1), values = v.repeat_interleave(group, 1);
  const Tensor<T> weights = heed::masked_softmax(heed::matmul(q * scale, keys, false, true), mask);
  return heed::matmul(heed::dropout(weights, p, p > 0, gen), values);
}

struct Case {
  std::string name;
  Shape q, k, v;
  std::function<AttentionMask<double>()> mask;
  double dropout = 0.0;
};

/// Masks of every form for scores (batch 2, [heads 4,] queries 70, keys 300): two query
/// tiles and two key tiles, the last of each ragged.
std::vector<Case> cases() {
  const Shape q3{2, 70, 16}, k3{2, 300, 16}, v3{2, 300, 12};
  const Shape q4{2, 4, 70, 16}, k4{2, 4, 300, 16}, v4{2, 4, 300, 12};
  const Shape kg{2, 2, 300, 16}, vg{2, 2, 300, 12};  // grouped: 2 kv heads for 4 query heads
  heed::Generator gen(5);
  const BoolTensor allowed = heed::rand<double>({2, 1, 70, 300}, gen) > 0.3;
  const BoolTensor allowed_keys = heed::rand<double>({2, 1, 1, 300}, gen) > 0.5;
  Tensord additive = heed::randn<double>({70, 300}, gen);
  for (index_t j = 0; j < 300; j += 3) additive.data()[5 * 300 + j] = -std::numeric_limits<double>::infinity();
  for (index_t j = 0; j < 300; ++j) additive.data()[9 * 300 + j] = -std::numeric_limits<double>::infinity();
  std::vector<std::int64_t> per_query(2 * 70), per_row(2 * 4 * 70);
  for (std::size_t i = 0; i < per_query.size(); ++i) per_query[i] = static_cast<std::int64_t>((i * 37) % 320);
  for (std::size_t i = 0; i < per_row.size(); ++i) per_row[i] = static_cast<std::int64_t>((i * 53) % 310);
  per_query[3] = 0;  // a query that sees nothing
  using M = AttentionMask<double>;
  return {
      {"3-D, no mask", q3, k3, v3, [] { return M(); }},
      {"3-D, valid_lens (batch)", q3, k3, v3,
       [] {
         return M(lens({0, 270}, {2}));
       }},
      {"3-D, valid_lens (batch, queries)", q3, k3, v3,
       [=] {
         return M(lens(per_query, {2, 70}));
       }},
      {"3-D, causal", q3, k3, v3, [] { return M::causal(); }},
      {"4-D, valid_lens (batch)", q4, k4, v4,
       [] {
         return M(lens({77, 300}, {2}));
       }},
      {"4-D, valid_lens per row", q4, k4, v4,
       [=] {
         return M(lens(per_row, {2, 4, 70}));
       }},
      {"4-D, boolean (batch, 1, queries, keys)", q4, k4, v4, [=] { return M(allowed); }},
      {"4-D, boolean over keys only", q4, k4, v4, [=] { return M(allowed_keys); }},
      {"4-D, additive with -inf, broadcast", q4, k4, v4, [=] { return M::additive(additive); }},
      {"4-D, causal + valid_lens + boolean", q4, k4, v4,
       [=] {
         return M::causal().with_valid_lens(lens({250, 40}, {2})).with_allowed(allowed);
       }},
      {"4-D grouped heads, causal", q4, kg, vg, [] { return M::causal(); }},
      {"4-D grouped heads, valid_lens, dropout", q4, kg, vg,
       [] {
         return M(lens({300, 123}, {2}));
       },
       0.3},
      {"3-D, valid_lens, dropout", q3, k3, v3,
       [] {
         return M(lens({200, 300}, {2}));
       },
       0.5},
      {"4-D, additive, dropout 1", q4, k4, v4, [=] { return M::additive(additive); }, 1.0},
  };
}

template <typename T>
AttentionMask<T> convert(const AttentionMask<double>& m) {
  AttentionMask<T> out;
  if (m.valid_lens().defined()) out.with_valid_lens(m.valid_lens());
  if (m.allowed().defined()) out.with_allowed(m.allowed());
  if (m.additive_mask().defined()) out.with_additive(m.additive_mask().template to<T>());
  return out.with_causal(m.is_causal());
}

/// Outputs and input gradients of attention f on random inputs of a case.
template <typename T, typename F>
std::vector<Tensor<T>> run(const Case& c, F&& f) {
  heed::Generator gen(11);
  Tensor<T> q = heed::randn<T>(c.q, gen).requires_grad_();
  Tensor<T> k = heed::randn<T>(c.k, gen).requires_grad_();
  Tensor<T> v = heed::randn<T>(c.v, gen).requires_grad_();
  const Tensor<T> out = f(q, k, v);
  out.backward(heed::randn<T>(out.shape(), gen));
  return {out.detach(), q.grad(), k.grad(), v.grad()};
}

}  // namespace

TEMPLATE_TEST_CASE("scaled_dot_product_attention equals matmul → masked_softmax → dropout → matmul",
                   "[attention][fused][autograd]", float, double) {
  using T = TestType;
  for (const Case& c : cases()) {
    DYNAMIC_SECTION(c.name) {
      const AttentionMask<T> mask = convert<T>(c.mask());
      const auto fused = run<T>(c, [&](const Tensor<T>& q, const Tensor<T>& k, const Tensor<T>& v) {
        heed::Generator gen(3);
        return heed::scaled_dot_product_attention(q, k, v, mask, c.dropout, gen);
      });
      const auto classic = run<T>(c, [&](const Tensor<T>& q, const Tensor<T>& k, const Tensor<T>& v) {
        heed::Generator gen(3);
        return classic_attention(q, k, v, mask, c.dropout, gen);
      });
      const char* names[] = {"output", "queries' gradient", "keys' gradient", "values' gradient"};
      for (std::size_t i = 0; i < fused.size(); ++i) {
        INFO(names[i]);
        CHECK(relative_difference(fused[i], classic[i]) <= kTolerance<T>);
      }
    }
  }
}

TEST_CASE("scaled_dot_product_attention: fully masked rows give zeros, never NaN", "[attention][fused]") {
  heed::Generator gen(2);
  Tensord q = heed::randn<double>({2, 3, 4}, gen).requires_grad_();
  Tensord k = heed::randn<double>({2, 5, 4}, gen).requires_grad_();
  Tensord v = heed::randn<double>({2, 5, 3}, gen).requires_grad_();
  const Tensord out = heed::scaled_dot_product_attention(q, k, v, lens({0, 2}, {2}));
  for (index_t i = 0; i < 9; ++i) CHECK(out.select(0, 0).data()[i] == 0.0);
  CHECK(out.select(0, 1).abs().sum().item() > 0);
  out.sum().backward();
  CHECK(q.grad().select(0, 0).abs().sum().item() == 0.0);
  CHECK(k.grad().select(0, 0).abs().sum().item() == 0.0);
  CHECK(v.grad().select(0, 0).abs().sum().item() == 0.0);
  CHECK(v.grad().select(0, 1).slice(0, 2, 5).abs().sum().item() == 0.0);  // keys past the valid length
}

namespace {

/// Where a NaN or an infinity goes in (queries, keys, values) of shape (2, 70, 8),
/// (2, 300, 8), (2, 300, 4): tensor 0, 1 or 2, flat index, value.
struct Poison {
  std::string name;
  std::vector<std::tuple<int, index_t, double>> at;
};

struct NanMask {
  std::string name;
  AttentionMask<double> mask;
  std::function<bool(index_t, index_t, index_t)> visible;  // (batch, query, key)
  double dropout = 0.0;
};

/// Output, gradients of queries, keys and values, then those inputs, of attention f on
/// poisoned random inputs.
template <typename T, typename F>
std::vector<Tensor<T>> run_poisoned(const Poison& poison, F&& f) {
  heed::Generator gen(21);
  std::vector<Tensor<T>> in{heed::randn<T>({2, 70, 8}, gen), heed::randn<T>({2, 300, 8}, gen),
                            heed::randn<T>({2, 300, 4}, gen)};
  for (const auto& [tensor, index, value] : poison.at)
    in[static_cast<std::size_t>(tensor)].data()[index] = static_cast<T>(value);
  for (Tensor<T>& t : in) t.requires_grad_();
  const Tensor<T> out = f(in[0], in[1], in[2]);
  out.backward(heed::randn<T>(out.shape(), gen));
  return {out.detach(), in[0].grad(), in[1].grad(), in[2].grad(), in[0].detach(), in[1].detach(), in[2].detach()};
}

/// x and y are NaN at the same elements, infinite at the same ones with the same sign,
/// and close elsewhere (relative to y's largest finite magnitude).
template <typename T>
void check_same_nans(const Tensor<T>& x, const Tensor<T>& y) {
  REQUIRE(x.shape() == y.shape());
  double scale = 1, worst = 0;
  index_t mismatches = 0, first = -1;
  for (index_t i = 0; i < y.numel(); ++i)
    if (std::isfinite(y.data()[i])) scale = std::max(scale, std::abs(static_cast<double>(y.data()[i])));
  for (index_t i = 0; i < x.numel(); ++i) {
    const double a = static_cast<double>(x.data()[i]), b = static_cast<double>(y.data()[i]);
    if (std::isfinite(a) && std::isfinite(b)) {
      worst = std::max(worst, std::abs(a - b));
    } else if (std::isnan(a) != std::isnan(b) || (!std::isnan(a) && a != b)) {
      if (mismatches++ == 0) first = i;
    }
  }
  INFO(mismatches << " elements differ in being NaN or infinite, the first at flat index " << first);
  CHECK(mismatches == 0);
  CHECK(worst <= kTolerance<T> * scale);
}

/// The NaN elements of the output by the definition: a row is NaN when a key it sees
/// has a NaN or +inf score; column c of a batch is NaN when a value of it is NaN,
/// whether or not it is seen (its weight 0 multiplies it).
template <typename T>
void check_output_nans(const std::vector<Tensor<T>>& r, const NanMask& m) {
  const Tensor<T>&out = r[0], &q = r[4], &k = r[5], &v = r[6];
  index_t wrong = 0;
  for (index_t b = 0; b < 2; ++b)
    for (index_t i = 0; i < 70; ++i) {
      bool row_nan = false;
      for (index_t j = 0; j < 300 && !row_nan; ++j) {
        if (!m.visible(b, i, j)) continue;
        double s = 0;
        for (index_t c = 0; c < 8; ++c)
          s += static_cast<double>(q.data()[(b * 70 + i) * 8 + c]) *
               static_cast<double>(k.data()[(b * 300 + j) * 8 + c]);
        row_nan = std::isnan(s) || s == std::numeric_limits<double>::infinity();
      }
      for (index_t c = 0; c < 4; ++c) {
        bool nan = row_nan;
        for (index_t j = 0; j < 300; ++j) nan = nan || std::isnan(v.data()[(b * 300 + j) * 4 + c]);
        wrong += nan != std::isnan(out.data()[(b * 70 + i) * 4 + c]);
      }
    }
  CHECK(wrong == 0);
}

template <typename T>
bool any_nan(const Tensor<T>& x) {
  return std::any_of(x.data(), x.data() + x.numel(), [](T e) { return std::isnan(e); });
}

}  // namespace

TEMPLATE_TEST_CASE("scaled_dot_product_attention is NaN exactly where the classic path is",
                   "[attention][fused][autograd]", float, double) {
  using T = TestType;
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  // Flat indices: queries (b·70 + i)·8 + c, keys (b·300 + j)·8 + c, values (b·300 + j)·4 + c.
  const std::vector<Poison> poisons{
      {"NaN query (0, 5)", {{0, 5 * 8, nan}}},
      {"+inf key (0, 3)", {{1, 3 * 8 + 1, inf}}},
      {"NaN key (1, 10)", {{1, (300 + 10) * 8 + 2, nan}}},
      {"NaN value (0, 20)", {{2, 20 * 4 + 3, nan}}},
      {"NaN value (1, 290)", {{2, (300 + 290) * 4 + 1, nan}}},  // past valid length 270, in a skipped tile
      {"NaN key (0, 280), +inf key (0, 150)", {{1, 280 * 8, nan}, {1, 150 * 8 + 4, inf}}},
  };
  heed::Generator gen(13);
  BoolTensor allowed = heed::rand<double>({2, 70, 300}, gen) > 0.3;
  // masked_softmax's max drops a NaN unless it comes first, so key 0 stays visible.
  for (index_t r = 0; r < 2 * 70; ++r) allowed.data()[r * 300] = true;
  const auto lens_visible = [](index_t l0, index_t l1) {
    return [=](index_t b, index_t, index_t j) { return j < (b == 0 ? l0 : l1); };
  };
  using M = AttentionMask<double>;
  const std::vector<NanMask> masks{
      {"no mask", M(), [](index_t, index_t, index_t) { return true; }},
      {"valid_lens (100, 270)", M(lens({100, 270}, {2})), lens_visible(100, 270)},
      {"valid_lens (0, 300)", M(lens({0, 300}, {2})), lens_visible(0, 300)},
      {"causal", M::causal(), [](index_t, index_t i, index_t j) { return j <= i + 230; }},
      {"boolean", M(allowed), [&](index_t b, index_t i, index_t j) { return allowed.data()[(b * 70 + i) * 300 + j]; }},
      {"valid_lens (100, 270), dropout", M(lens({100, 270}, {2})), lens_visible(100, 270), 0.3},
  };
  const char* names[] = {"output", "queries' gradient", "keys' gradient", "values' gradient"};
  for (const NanMask& m : masks)
    for (const Poison& poison : poisons) {
      DYNAMIC_SECTION(m.name << ", " << poison.name) {
        const AttentionMask<T> mask = convert<T>(m.mask);
        const auto fused = run_poisoned<T>(poison, [&](const Tensor<T>& q, const Tensor<T>& k, const Tensor<T>& v) {
          heed::Generator dropout_gen(3);
          return heed::scaled_dot_product_attention(q, k, v, mask, m.dropout, dropout_gen);
        });
        const auto classic = run_poisoned<T>(poison, [&](const Tensor<T>& q, const Tensor<T>& k, const Tensor<T>& v) {
          heed::Generator dropout_gen(3);
          return classic_attention(q, k, v, mask, m.dropout, dropout_gen);
        });
        check_output_nans(fused, m);
        for (std::size_t i = 0; i < 4; ++i) {
          INFO(names[i]);
          check_same_nans(fused[i], classic[i]);
        }
        if (poison.name.rfind("NaN key (0, 280)", 0) == 0 && m.name.rfind("valid_lens (100", 0) == 0) {
          // Keys no query sees: nothing NaN but the queries' gradient, where the
          // scores' zero gradient multiplies the keys (0 · NaN, as the classic matmul).
          CHECK_FALSE(any_nan(fused[0]));
          CHECK_FALSE(any_nan(fused[2]));
          CHECK_FALSE(any_nan(fused[3]));
          CHECK(any_nan(fused[1]));
        }
      }
    }
}

TEST_CASE("scaled_dot_product_attention: a lone visible NaN score is NaN, not a fully masked row",
          "[attention][fused]") {
  // One query sees only key 2, whose score is NaN: the row's max must not drop it and
  // leave −inf, which would read as "nothing visible" and give zeros.
  const double nan = std::numeric_limits<double>::quiet_NaN();
  Tensord q = heed::ones<double>({1, 2, 2}).requires_grad_();
  Tensord k = heed::ones<double>({1, 4, 2}), v = heed::ones<double>({1, 4, 3});
  k.data()[2 * 2] = nan;
  k.requires_grad_();
  v.requires_grad_();
  BoolTensor allowed = heed::zeros<double>({1, 2, 4}) > 0.5;
  allowed.data()[2] = true;      // query 0: key 2 only
  allowed.data()[4 + 1] = true;  // query 1: key 1 only
  const Tensord out = heed::scaled_dot_product_attention(q, k, v, allowed);
  for (index_t c = 0; c < 3; ++c) {
    CHECK(std::isnan(out.data()[c]));
    CHECK(out.data()[3 + c] == Approx(1.0));
  }
  out.sum().backward();
  CHECK(std::isnan(q.grad().data()[0]));
  CHECK(std::isnan(v.grad().data()[2 * 3]));  // the NaN weight's value
  // The classic path agrees: masked_softmax's max keeps the NaN too.
  const Tensord weights = heed::masked_softmax(heed::matmul(q, k, false, true), allowed);
  for (index_t j = 0; j < 4; ++j) {
    INFO("key " << j);
    CHECK(std::isnan(weights.data()[j]));
    CHECK(weights.data()[4 + j] == (j == 1 ? 1.0 : 0.0));
  }
}

TEST_CASE("scaled_dot_product_attention's gradients match finite differences", "[attention][fused][autograd]") {
  heed::Generator gen(4);
  // The smallest sizes that cross tiles: 65 queries (two tiles), 257 keys (two tiles).
  Tensord q = heed::randn<double>({1, 2, 65, 2}, gen).requires_grad_();
  Tensord k = heed::randn<double>({1, 1, 257, 2}, gen).requires_grad_();
  Tensord v = heed::randn<double>({1, 1, 257, 1}, gen).requires_grad_();
  const BoolTensor allowed = heed::rand<double>({1, 1, 65, 257}, gen) > 0.2;
  using M = AttentionMask<double>;
  for (const auto& [mask, p] :
       {std::pair{M::causal().with_allowed(allowed), 0.0}, std::pair{M(lens({100}, {1})), 0.25}}) {
    const auto result = heed::gradcheck(
        [&, p = p, mask = mask](const std::vector<Tensord>& in) {
          heed::Generator dropout_gen(9);  // the same dropout mask at every evaluation
          return heed::scaled_dot_product_attention(in[0], in[1], in[2], mask, p, dropout_gen);
        },
        {q, k, v});
    CHECK_GRADCHECK(result);
  }
}

#ifdef _OPENMP
TEST_CASE("scaled_dot_product_attention gives the same bits for any thread count", "[attention][fused]") {
  const int threads = omp_get_max_threads();
  const Case c{"", {3, 4, 200, 32}, {3, 2, 333, 32}, {3, 2, 333, 16}, {}, 0.1};
  const AttentionMask<float> mask = AttentionMask<float>::causal().with_valid_lens(lens({333, 100, 7}, {3}));
  auto attend = [&](const Tensorf& q, const Tensorf& k, const Tensorf& v) {
    heed::Generator gen(1);
    return heed::scaled_dot_product_attention(q, k, v, mask, 0.1, gen);
  };
  omp_set_num_threads(1);
  const auto one = run<float>(c, attend);
  omp_set_num_threads(3);
  const auto three = run<float>(c, attend);
  omp_set_num_threads(threads);
  for (std::size_t i = 0; i < one.size(); ++i) {
    INFO("result " << i);
    CHECK(std::equal(one[i].data(), one[i].data() + one[i].numel(), three[i].data()));
  }
}
#endif

TEST_CASE("Attention modules give the same results whether or not they keep their weights",
          "[attention][fused][autograd]") {
  heed::Generator gen(6);
  const Tensorf X = heed::randn<float>({2, 90, 32}, gen);
  const IndexTensor valid_lens = lens({90, 41}, {2});
  for (const double p : {0.0, 0.2}) {
    std::vector<std::vector<Tensorf>> results;
    for (const bool keep : {true, false}) {
      heed::Generator init(8);
      heed::MultiHeadAttention<float> attention(32, 32, 32, 32, 4, p, false, 2, init);
      heed::manual_seed(12);  // the dropout masks
      attention.keep_attention_weights(keep);
      Tensorf x = X.clone().requires_grad_();
      const Tensorf out = attention(x, x, x, valid_lens);
      CHECK(attention.attention_weights().defined() == keep);
      out.backward(heed::ones<float>(out.shape()));
      std::vector<Tensorf> r{out.detach(), x.grad()};
      for (const auto& [name, param] : attention.named_parameters()) r.push_back(param.grad());
      results.push_back(r);
    }
    for (std::size_t i = 0; i < results[0].size(); ++i) {
      INFO("p = " << p << ", result " << i);
      CHECK(relative_difference(results[1][i], results[0][i]) <= 1e-5);
    }
  }
}

TEST_CASE("scaled_dot_product_attention refuses bad arguments, naming itself", "[attention][fused][errors]") {
  const Tensorf q = heed::zeros<float>({2, 4, 8}), k = heed::zeros<float>({2, 6, 8}), v = heed::zeros<float>({2, 6, 5});
  CHECK_ERROR(heed::ShapeError, "scaled_dot_product_attention: batch sizes differ",
              heed::scaled_dot_product_attention(q, heed::zeros<float>({3, 6, 8}), heed::zeros<float>({3, 6, 5})));
  CHECK_ERROR(heed::ShapeError, "different feature sizes",
              heed::scaled_dot_product_attention(q, heed::zeros<float>({2, 6, 7}), v));
  CHECK_ERROR(heed::ShapeError, "different numbers of steps",
              heed::scaled_dot_product_attention(q, k, heed::zeros<float>({2, 5, 5})));
  CHECK_ERROR(heed::ShapeError, "dividing",
              heed::scaled_dot_product_attention(heed::zeros<float>({2, 3, 4, 8}), heed::zeros<float>({2, 2, 6, 8}),
                                                 heed::zeros<float>({2, 2, 6, 5})));
  CHECK_ERROR(heed::ValueError, "dropout probability must be in [0, 1], got 1.5",
              heed::scaled_dot_product_attention(q, k, v, {}, 1.5));
  CHECK_ERROR(heed::ShapeError, "valid_lens of shape (3)",
              heed::scaled_dot_product_attention(q, k, v, lens({1, 2, 3}, {3})));
  CHECK_ERROR(heed::ValueError, "valid_lens must not be negative",
              heed::scaled_dot_product_attention(q, k, v, lens({1, -2}, {2})));
  CHECK_ERROR(heed::ShapeError, "the boolean mask of shape (2, 4, 5)",
              heed::scaled_dot_product_attention(q, k, v, heed::ones<float>({2, 4, 5}) > 0.5f));
}

TEST_CASE("scaled_dot_product_attention with no keys or no queries gives zeros", "[attention][fused]") {
  const Tensorf out = heed::scaled_dot_product_attention(heed::ones<float>({2, 3, 4}), heed::zeros<float>({2, 0, 4}),
                                                         heed::zeros<float>({2, 0, 5}));
  CHECK(out.shape() == Shape{2, 3, 5});
  CHECK(out.abs().sum().item() == 0.0f);
  CHECK(heed::scaled_dot_product_attention(heed::ones<float>({2, 0, 4}), heed::ones<float>({2, 3, 4}),
                                           heed::ones<float>({2, 3, 5}))
            .shape() == Shape{2, 0, 5});
}
