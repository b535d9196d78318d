// The fused scaled_dot_product_attention (heed/ops/scaled_dot_product_attention.hpp)
// against the classic path.
#include "attention_common.hpp"

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
      // One query a (batch, head), as in a decoding step (its own dot products and strips
      // of 16 values): values 40 wide (two strips and a rest) and 12 (a rest only).
      {"3-D, one query, valid_lens",
       {2, 1, 16},
       k3,
       {2, 300, 40},
       [] {
         return M(lens({0, 270}, {2}));
       }},
      {"4-D, one query, no mask", {2, 4, 1, 16}, k4, v4, [] { return M(); }},
      {"4-D, one query, boolean over keys, dropout", {2, 4, 1, 16}, k4, v4, [=] { return M(allowed_keys); }, 0.3},
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
  double first_x = 0, first_y = 0;
  for (index_t i = 0; i < y.numel(); ++i)
    if (std::isfinite(y.data()[i])) scale = std::max(scale, std::abs(static_cast<double>(y.data()[i])));
  for (index_t i = 0; i < x.numel(); ++i) {
    const double a = static_cast<double>(x.data()[i]), b = static_cast<double>(y.data()[i]);
    if (std::isfinite(a) && std::isfinite(b)) {
      worst = std::max(worst, std::abs(a - b));
    } else if (std::isnan(a) != std::isnan(b) || (!std::isnan(a) && a != b)) {
      if (mismatches++ == 0) first = i, first_x = a, first_y = b;
    }
  }
  INFO(mismatches << " elements differ in being NaN or infinite, the first at flat index " << first << " (" << first_x
                  << " against " << first_y << ")");
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
