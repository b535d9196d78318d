// Tests of the fused scaled_dot_product_attention (heed/ops/scaled_dot_product_attention.hpp):
// it equals the classic path, matmul → masked_softmax → dropout → matmul, forward and
// backward, for every mask form, dropout, grouped heads and tile-crossing sizes; its
// gradients match finite differences; any thread count gives the same bits; the
// modules switch to it when their weights are not kept without changing results.
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "check.hpp"

using Catch::Matchers::Contains;
using heed::AttentionMask;
using heed::BoolTensor;
using heed::index_t;
using heed::IndexTensor;
using heed::Shape;
using heed::Tensor;
using heed::Tensord;
using heed::Tensorf;
using heed_test::lens;

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

TEST_CASE("scaled_dot_product_attention's gradients match finite differences", "[attention][fused][autograd]") {
  heed::Generator gen(4);
  // Sizes that cross tiles: 70 queries (two tiles), 260 keys (two tiles).
  Tensord q = heed::randn<double>({1, 2, 70, 3}, gen).requires_grad_();
  Tensord k = heed::randn<double>({1, 1, 260, 3}, gen).requires_grad_();
  Tensord v = heed::randn<double>({1, 1, 260, 2}, gen).requires_grad_();
  const BoolTensor allowed = heed::rand<double>({1, 1, 70, 260}, gen) > 0.2;
  using M = AttentionMask<double>;
  for (const auto& [mask, p] :
       {std::pair{M(), 0.0}, std::pair{M::causal().with_allowed(allowed), 0.0}, std::pair{M(lens({100}, {1})), 0.25}}) {
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
