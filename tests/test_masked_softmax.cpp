// masked_softmax (heed/ops/masked_softmax.hpp): d2l's listings, golden values from
// d2l's PyTorch code, the mask contract on every mask path, causal masks and errors.
#include "attention_common.hpp"

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

TEST_CASE("masked_softmax names each form of valid_lens the scores take once", "[attention]") {
  const heed::IndexTensor three({1, 2, 3}, Shape{3});
  CHECK_THROWS_WITH(heed::masked_softmax(heed::zeros({2, 2, 4}), three),
                    "masked_softmax: valid_lens of shape (3) do not fit scores of shape (2, 2, 4); expected (2) or "
                    "(2, 2)");
  CHECK_THROWS_WITH(heed::masked_softmax(heed::zeros({2, 5, 2, 4}), three),
                    "masked_softmax: valid_lens of shape (3) do not fit scores of shape (2, 5, 2, 4); expected (2), "
                    "(2, 2) or (2, 5, 2)");
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

TEMPLATE_TEST_CASE("masked_softmax and fused attention weigh a -inf score exactly 0 at any position",
                   "[attention][fused]", float, double) {
  // Eigen's vectorised exp gives a subnormal for -inf where its scalar tail gives 0.
  using T = TestType;
  const T inf = std::numeric_limits<T>::infinity();
  // 37: past several packets and a scalar tail, at any ISA; under 16, one padded block.
  for (const index_t n : {2, 10, 15, 37})
    for (index_t at = 0; at < n; ++at) {
      INFO(n << " keys, -inf at key " << at);
      std::vector<T> scores(static_cast<std::size_t>(n), T(0.5));
      scores[static_cast<std::size_t>(at)] = -inf;
      const heed::Tensor<T> x(scores, {1, 1, n});
      for (const auto& w : {heed::masked_softmax(x, lens({n}, {1})), heed::masked_softmax(x)}) {
        CHECK(w.at({0, 0, at}) == T(0));
        CHECK(w.at({0, 0, (at + 1) % n}) == Approx(1.0 / static_cast<double>(n - 1)));
      }
    }
  // Fused attention: a key of +inf meets queries of either sign; where the score is -inf
  // the weight is 0, so the queries' gradient is NaN (0 · inf) as on the classic path.
  const index_t n = 37;
  heed::Tensor<T> keys = heed::zeros<T>({1, n, 1});
  keys.data()[5] = inf;
  const heed::Tensor<T> queries = heed::tensor<T>({-1, 1}).reshape({1, 2, 1}).requires_grad_();
  const heed::Tensor<T> values = heed::ones<T>({1, n, 1});
  const heed::Tensor<T> out = heed::scaled_dot_product_attention(queries, keys, values);
  CHECK(out.at({0, 0, 0}) == Approx(1.0));  // query -1: key 5 weighs 0, every other 1/(n-1)
  CHECK(std::isnan(out.at({0, 1, 0})));     // query +1: score +inf, NaN as softmax makes it
  out.sum().backward();
  CHECK(std::isnan(queries.grad().at({0, 0, 0})));
}

TEMPLATE_TEST_CASE("masked_softmax of short and long rows is the definition, NaN kept", "[attention]", float, double) {
  // Rows under 16 keys are computed in one padded block, longer ones over their length.
  using T = TestType;
  const double tolerance = std::is_same_v<T, float> ? 1e-6 : 1e-14;
  heed::Generator gen(11);
  for (const index_t n : {1, 7, 10, 15, 16, 23}) {
    INFO(n << " keys");
    const heed::Tensor<T> x = heed::randn<T>({1, 3, n}, gen) * T(4);
    const heed::Tensor<T> w = heed::masked_softmax(x);
    for (index_t r = 0; r < 3; ++r) {
      long double max = -INFINITY, sum = 0;
      for (index_t k = 0; k < n; ++k) max = std::max<long double>(max, x.at({0, r, k}));
      for (index_t k = 0; k < n; ++k) sum += std::exp(static_cast<long double>(x.at({0, r, k})) - max);
      for (index_t k = 0; k < n; ++k)
        CHECK(static_cast<double>(w.at({0, r, k})) ==
              Approx(static_cast<double>(std::exp(static_cast<long double>(x.at({0, r, k})) - max) / sum))
                  .margin(tolerance));
    }
    // A NaN score makes its whole row NaN, as softmax does; the other rows are untouched.
    heed::Tensor<T> with_nan = x.clone();
    with_nan.data()[n / 2] = std::numeric_limits<T>::quiet_NaN();
    const heed::Tensor<T> w_nan = heed::masked_softmax(with_nan);
    for (index_t k = 0; k < n; ++k) CHECK(std::isnan(w_nan.at({0, 0, k})));
    CHECK(w_nan.at({0, 1, 0}) == w.at({0, 1, 0}));
  }
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
