// The PyTorch-style ops of issue 21 (heed/ops/reduce.hpp, elementwise.hpp's clamp,
// shape.hpp, gather.hpp, sort.hpp, loss.hpp) against PyTorch's own values: golden values
// from tests/data/make_ops_golden.py (tests/data/ops_golden.txt).
//
// Every case runs in double and in float: the output (and the int64 indices where the op
// returns them) against PyTorch's, then the gradients of (output * R).sum() with respect
// to every floating-point input, R a random tensor of the output's shape. Values match to
// 1e-12 relative in double and 1e-5 in float, indices exactly; NaN must be NaN where
// PyTorch's is. Cases with NaN inputs are forward-only.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iomanip>
#include <limits>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "check.hpp"
#include "golden.hpp"

using heed::BoolTensor;
using heed::index_t;
using heed::IndexTensor;
using heed::Reduction;
using heed::Tensor;

namespace {

const heed_test::Golden& golden() {
  static const heed_test::Golden g("ops_golden.txt");
  return g;
}

/// Python's `end=None` in a slice.
constexpr index_t kEnd = std::numeric_limits<index_t>::max();

template <typename T>
double relative() {
  return std::is_same_v<T, float> ? 1e-5 : 1e-12;
}

template <typename T>
double absolute() {
  return std::is_same_v<T, float> ? 1e-6 : 1e-13;
}

/// actual has expected's shape and values: NaN where expected is NaN, otherwise equal
/// within relative<T>() (absolute<T>() near zero).
template <typename T>
void check_same(const Tensor<T>& actual, const Tensor<T>& expected, const std::string& what) {
  INFO(what << ": heed's shape " << heed::to_string(actual.shape()) << ", PyTorch's "
            << heed::to_string(expected.shape()));
  REQUIRE(actual.defined());
  CHECK(actual.shape() == expected.shape());
  if (actual.shape() != expected.shape()) return;
  for (index_t i = 0; i < expected.numel(); ++i) {
    const double a = static_cast<double>(actual.data()[i]), e = static_cast<double>(expected.data()[i]);
    INFO("element " << i << ": heed " << std::setprecision(17) << a << ", PyTorch " << e);
    if (std::isnan(e))
      CHECK(std::isnan(a));
    else if (std::isinf(e))
      CHECK(a == e);
    else
      CHECK(a == Approx(e).epsilon(relative<T>()).margin(absolute<T>()));
  }
}

/// Indices match exactly.
void check_same(const IndexTensor& actual, const IndexTensor& expected, const std::string& what) {
  INFO(what << ": heed's shape " << heed::to_string(actual.shape()) << ", PyTorch's "
            << heed::to_string(expected.shape()));
  REQUIRE(actual.defined());
  CHECK(actual.shape() == expected.shape());
  if (actual.shape() == expected.shape()) CHECK(actual.to_vector() == expected.to_vector());
}

/// One golden case, `<name>.x`, `<name>.output`, ...: its inputs in T, and checks of an
/// op's result and of the gradients that flow back to the inputs taken with in().
template <typename T>
class Case {
 public:
  explicit Case(std::string name) : name_(std::move(name)) {}

  /// A floating-point input as a leaf that requires grad; check() compares its gradient.
  Tensor<T> in(const std::string& input) {
    Tensor<T> x = golden().tensor<T>(key(input)).requires_grad_();
    leaves_.emplace_back(input, x);
    return x;
  }
  /// A floating-point tensor of the case, not a leaf (forward-only cases, expected values).
  Tensor<T> value(const std::string& n) const { return golden().tensor<T>(key(n)); }
  IndexTensor index(const std::string& n) const { return golden().tensor<std::int64_t>(key(n)); }
  /// A mask, stored as int64 0 / 1.
  BoolTensor mask(const std::string& n) const { return golden().tensor<double>(key(n)) > 0.5; }

  /// out is `<name>.output`; the gradients of (out * R).sum() are `<name>.grad.<input>`.
  void check(const Tensor<T>& out) const {
    check_same(out, value("output"), key("output"));
    out.backward(value("R"));
    check_grads();
  }

  /// values are `<name>.output`, indices `<name>.indices`; gradients as above.
  void check(const heed::ValuesIndices<T>& result) const {
    check_same(result.indices, index("indices"), key("indices"));
    check(result.values);
  }

  /// The pieces of split or chunk are `<name>.output0`, ...; the gradients those of
  /// Σ_k (piece_k * R_k).sum().
  void check(const std::vector<Tensor<T>>& pieces) const {
    const auto count = static_cast<std::size_t>(index("count").item());
    INFO(name_ << ": " << pieces.size() << " pieces, PyTorch " << count);
    REQUIRE(pieces.size() == count);
    Tensor<T> loss;
    for (std::size_t k = 0; k < count; ++k) {
      const std::string n = std::to_string(k);
      check_same(pieces[k], value("output" + n), key("output" + n));
      const Tensor<T> term = heed::sum(heed::mul(pieces[k], value("R" + n)));
      loss = k == 0 ? term : heed::add(loss, term);
    }
    loss.backward();
    check_grads();
  }

  /// A forward-only result against the case's tensor `expected`.
  void forward(const Tensor<T>& actual, const std::string& expected = "output") const {
    check_same(actual, value(expected), key(expected));
  }
  void forward(const IndexTensor& actual, const std::string& expected) const {
    check_same(actual, index(expected), key(expected));
  }

 private:
  std::string key(const std::string& n) const { return name_ + "." + n; }

  void check_grads() const {
    for (const auto& [input, x] : leaves_) {
      INFO("the gradient of " << key(input) << " must be defined");
      REQUIRE(x.grad().defined());
      check_same(x.grad(), value("grad." + input), key("grad." + input));
    }
  }

  std::string name_;
  std::vector<std::pair<std::string, Tensor<T>>> leaves_;
};

}  // namespace

// ---- reduce.hpp ------------------------------------------------------------------------------

TEMPLATE_TEST_CASE("sum and mean over several dims match PyTorch", "[ops][golden]", float, double) {
  using T = TestType;
  {
    Case<T> c("sum_02");
    c.check(heed::sum(c.in("x"), {0, 2}));
  }
  {
    Case<T> c("sum_neg_keep");
    c.check(c.in("x").sum({-1, 0}, true));
  }
  {
    Case<T> c("sum_all");  // dim=[]: every dim
    c.check(c.in("x").sum(std::vector<int>{}));
  }
  {
    Case<T> c("mean_1m1_keep");
    c.check(c.in("x").mean({1, -1}, true));
  }
  {
    Case<T> c("mean_0");
    c.check(heed::mean(c.in("x"), std::vector<int>{0}));
  }
}

TEMPLATE_TEST_CASE("var and std match PyTorch", "[ops][golden]", float, double) {
  using T = TestType;
  {
    Case<T> c("var_all");
    c.check(c.in("x").var());
  }
  {
    Case<T> c("var_1");
    c.check(c.in("x").var(1));
  }
  {
    Case<T> c("var_m1_keep_c0");
    c.check(c.in("x").var(-1, true, 0.0));
  }
  {
    Case<T> c("var_02_c1");
    c.check(heed::var(c.in("x"), {0, 2}, false, 1.0));
  }
  {
    Case<T> c("var_m1m3_keep_c0");
    c.check(c.in("x").var({-1, -3}, true, 0.0));
  }
  {
    Case<T> c("var_0_c2");
    c.check(heed::var(c.in("x"), 0, false, 2.0));
  }
  {
    Case<T> c("std_all");
    c.check(c.in("x").std());
  }
  {
    Case<T> c("std_0_c0");
    c.check(heed::std(c.in("x"), 0, false, 0.0));
  }
  {
    Case<T> c("std_12_keep_c1");
    c.check(c.in("x").std({1, 2}, true, 1.0));
  }
  {
    Case<T> c("std_m2_c0");
    c.check(heed::std(c.in("x"), std::vector<int>{-2}, false, 0.0));
  }
  {
    Case<T> c("var_n1");  // one element per row, correction 1: 0 / 0
    c.forward(c.value("x").var(1));
  }
}

TEMPLATE_TEST_CASE("prod matches PyTorch, zeros included", "[ops][golden]", float, double) {
  using T = TestType;
  {
    Case<T> c("prod_all");
    c.check(c.in("x").prod());
  }
  {
    Case<T> c("prod_1_zeros");  // rows with no zero, one zero, two zeros
    c.check(c.in("x").prod(1));
  }
  {
    Case<T> c("prod_m1_keep");
    c.check(c.in("x").prod(-1, true));
  }
  {
    Case<T> c("prod_0");
    c.check(heed::prod(c.in("x"), 0));
  }
  {
    Case<T> c("prod_all_zero");
    c.check(heed::prod(c.in("x")));
  }
  {
    Case<T> c("prod_all_two_zeros");
    c.check(c.in("x").prod());
  }
}

TEMPLATE_TEST_CASE("max and min over everything match PyTorch, ties sharing the gradient", "[ops][golden]", float,
                   double) {
  using T = TestType;
  {
    Case<T> c("max_all_ties");
    c.check(c.in("x").max());
  }
  {
    Case<T> c("min_all_ties");
    c.check(heed::min(c.in("x")));
  }
  {
    Case<T> c("max_all");
    c.check(heed::max(c.in("x")));
  }
  {
    Case<T> c("min_all");
    c.check(c.in("x").min());
  }
}

TEMPLATE_TEST_CASE("max and min along a dim match PyTorch, first index on ties", "[ops][golden]", float, double) {
  using T = TestType;
  {
    Case<T> c("max_dim_m1");
    c.check(heed::max_with_indices(c.in("x"), -1));
    c.forward(c.value("x").max(-1));
  }
  {
    Case<T> c("min_dim_2_keep");
    c.check(heed::min_with_indices(c.in("x"), 2, true));
    c.forward(heed::min(c.value("x"), 2, true));
  }
  {
    Case<T> c("max_dim_0");
    c.check(heed::max_with_indices(c.in("x"), 0));
  }
  {
    Case<T> c("min_dim_m2_keep");
    c.check(heed::min_with_indices(c.in("x"), -2, true));
    c.forward(c.value("x").min(-2, true));
  }
  {
    Case<T> c("max_dim_1");
    c.check(heed::max_with_indices(c.in("x"), 1));
  }
  // The values alone, with the gradient: the same index as with_indices.
  {
    Case<T> c("max_dim_m1");
    c.check(c.in("x").max(-1));
  }
  {
    Case<T> c("min_dim_2_keep");
    c.check(heed::min(c.in("x"), 2, true));
  }
}

TEMPLATE_TEST_CASE("argmax and argmin match PyTorch, first index on ties", "[ops][golden]", float, double) {
  using T = TestType;
  Case<T> c("arg_tied");
  const Tensor<T> x = c.value("x");
  c.forward(x.argmax(), "output");
  c.forward(heed::argmin(x), "argmin");
  c.forward(x.argmax(-1), "argmax_m1");
  c.forward(heed::argmin(x, -1), "argmin_m1");
  c.forward(heed::argmax(x, 0, true), "argmax_0_keep");
  c.forward(x.argmin(1), "argmin_1");
  c.forward(x.argmax(1, true), "argmax_1_keep");
  c.forward(x.argmin(-3), "argmin_m3");
}

TEMPLATE_TEST_CASE("max, min, argmax and argmin propagate NaN as PyTorch", "[ops][golden]", float, double) {
  using T = TestType;
  Case<T> c("max_nan");
  const Tensor<T> x = c.value("x");
  c.forward(x.max(), "output");
  c.forward(x.min(), "min");
  c.forward(x.argmax(), "argmax");
  c.forward(x.argmin(), "argmin");
  const auto [max1, max1_indices] = heed::max_with_indices(x, 1);
  c.forward(max1, "max1");
  c.forward(max1_indices, "max1_indices");
  const auto [min1, min1_indices] = heed::min_with_indices(x, 1);
  c.forward(min1, "min1");
  c.forward(min1_indices, "min1_indices");
  const auto [max0, max0_indices] = heed::max_with_indices(x, 0);
  c.forward(max0, "max0");
  c.forward(max0_indices, "max0_indices");
  c.forward(x.argmax(1), "argmax1");
  c.forward(x.argmin(1), "argmin1");
}

// ---- elementwise.hpp: clamp --------------------------------------------------------------------

TEMPLATE_TEST_CASE("clamp matches PyTorch, the gradient passing at the bounds", "[ops][golden]", float, double) {
  using T = TestType;
  {
    Case<T> c("clamp_both");
    c.check(heed::clamp(c.in("x"), -0.5, 0.5));
  }
  {
    Case<T> c("clamp_min");
    c.check(c.in("x").clamp_min(-0.25));
    c.forward(heed::clamp(c.value("x"), -0.25));
  }
  {
    Case<T> c("clamp_max");
    c.check(c.in("x").clamp_max(0.75));
    c.forward(heed::clamp(c.value("x"), std::nullopt, 0.75));
  }
  {
    Case<T> c("clamp_min_gt_max");  // torch: max everywhere, no gradient
    c.check(c.in("x").clamp(0.5, -0.5));
  }
  {
    Case<T> c("clamp_min_eq_max");
    c.check(heed::clamp(c.in("x"), 0.5, 0.5));
  }
  {
    Case<T> c("clamp_nan");
    c.forward(heed::clamp(c.value("x"), -0.5, 0.5));
  }
}

// ---- shape.hpp ---------------------------------------------------------------------------------

TEMPLATE_TEST_CASE("split and chunk match PyTorch, every piece", "[ops][golden]", float, double) {
  using T = TestType;
  {
    Case<T> c("split_2_0");
    c.check(c.in("x").split(2));
  }
  {
    Case<T> c("split_3_m1");
    c.check(heed::split(c.in("x"), 3, -1));
  }
  {
    Case<T> c("split_sizes_1");
    c.check(c.in("x").split({1, 3, 0, 2}, 1));
  }
  {
    Case<T> c("chunk_3_0");
    c.check(c.in("x").chunk(3));
  }
  {
    Case<T> c("chunk_4_m1");  // 3 pieces of 2, fewer than asked
    c.check(heed::chunk(c.in("x"), 4, -1));
  }
  {
    Case<T> c("chunk_4_5");
    c.check(c.in("x").chunk(4));
  }
}

TEMPLATE_TEST_CASE("slice_scatter and select_scatter match PyTorch", "[ops][golden]", float, double) {
  using T = TestType;
  {
    Case<T> c("slice_scatter_d2l");  // P[:, :, 0::2] = X
    Tensor<T> x = c.in("x"), src = c.in("src");
    c.check(heed::slice_scatter(x, src, 2, 0, kEnd, 2));
  }
  {
    Case<T> c("slice_scatter_d2l_odd");  // P[:, :, 1::2] = X
    Tensor<T> x = c.in("x"), src = c.in("src");
    c.check(heed::slice_scatter(x, src, -1, 1, kEnd, 2));
  }
  {
    Case<T> c("slice_scatter_neg_start");  // x[:, -5::2] = src
    Tensor<T> x = c.in("x"), src = c.in("src");
    c.check(heed::slice_scatter(x, src, -1, -5, kEnd, 2));
  }
  {
    Case<T> c("slice_scatter_clamped");  // x[:, -100:-3:3] = src
    Tensor<T> x = c.in("x"), src = c.in("src");
    c.check(heed::slice_scatter(x, src, 1, -100, -3, 3));
  }
  {
    Case<T> c("slice_scatter_0");
    Tensor<T> x = c.in("x"), src = c.in("src");
    c.check(heed::slice_scatter(x, src, 0, 1, 4, 2));
  }
  {
    Case<T> c("select_scatter_0_m1");
    Tensor<T> x = c.in("x"), src = c.in("src");
    c.check(heed::select_scatter(x, src, 0, -1));
  }
  {
    Case<T> c("select_scatter_1_2");
    Tensor<T> x = c.in("x"), src = c.in("src");
    c.check(heed::select_scatter(x, src, 1, 2));
  }
}

TEMPLATE_TEST_CASE("repeat_interleave, x at i, t() and mT() match PyTorch", "[ops][golden]", float, double) {
  using T = TestType;
  {
    Case<T> c("repeat_interleave_2");
    c.check(c.in("x").repeat_interleave(2));
  }
  {
    Case<T> c("repeat_interleave_2");
    c.check(heed::repeat_interleave(c.in("x"), 2));
  }
  {
    Case<T> c("index_1");
    c.check(c.in("x")[1]);
  }
  {
    Case<T> c("index_m1");
    c.check(c.in("x")[-1]);
  }
  {
    Case<T> c("t_2d");
    c.check(c.in("x").t());
  }
  {
    Case<T> c("t_1d");
    c.check(c.in("x").t());
  }
  {
    Case<T> c("mT_3d");
    c.check(c.in("x").mT());
  }
}

// ---- gather.hpp --------------------------------------------------------------------------------

TEMPLATE_TEST_CASE("gather and scatter_add match PyTorch, repeated indices adding up", "[ops][golden]", float, double) {
  using T = TestType;
  {
    Case<T> c("gather_1");
    c.check(heed::gather(c.in("x"), 1, c.index("index")));
  }
  {
    Case<T> c("gather_0");  // index smaller than x in dim 1
    c.check(c.in("x").gather(0, c.index("index")));
  }
  {
    Case<T> c("gather_m1");
    c.check(heed::gather(c.in("x"), -1, c.index("index")));
  }
  {
    Case<T> c("scatter_add_1");
    Tensor<T> x = c.in("x"), src = c.in("src");
    c.check(heed::scatter_add(x, 1, c.index("index"), src));
  }
  {
    Case<T> c("scatter_add_0");
    Tensor<T> x = c.in("x"), src = c.in("src");
    c.check(x.scatter_add(0, c.index("index"), src));
  }
  {
    Case<T> c("scatter_add_big_src");  // src larger than index: forward only
    c.forward(heed::scatter_add(c.value("x"), -1, c.index("index"), c.value("src")));
  }
}

TEMPLATE_TEST_CASE("masked_select matches PyTorch, broadcasting", "[ops][golden]", float, double) {
  using T = TestType;
  for (const char* name : {"masked_select_row", "masked_select_col", "masked_select_bx"}) {
    Case<T> c(name);
    c.check(heed::masked_select(c.in("x"), c.mask("mask")));
  }
  {
    Case<T> c("masked_select_row");
    c.check(c.in("x").masked_select(c.mask("mask")));
  }
}

// ---- sort.hpp ----------------------------------------------------------------------------------

TEMPLATE_TEST_CASE("sort and argsort match PyTorch's stable sort", "[ops][golden]", float, double) {
  using T = TestType;
  {
    Case<T> c("sort_m1");
    c.check(heed::sort(c.in("x"), -1));
    c.forward(heed::argsort(c.value("x")), "indices");
  }
  {
    Case<T> c("sort_m1_desc");
    c.check(c.in("x").sort(-1, true));
    c.forward(c.value("x").argsort(-1, true), "indices");
  }
  {
    Case<T> c("sort_0");
    c.check(heed::sort(c.in("x"), 0));
    c.forward(heed::argsort(c.value("x"), 0), "indices");
  }
  {
    Case<T> c("sort_m2_desc");
    c.check(heed::sort(c.in("x"), -2, true));
    c.forward(heed::argsort(c.value("x"), -2, true), "indices");
  }
  {
    Case<T> c("sort_1");
    c.check(c.in("x").sort(1));
  }
  {
    Case<T> c("sort_nan");  // NaN sorts as the largest, ties and NaNs in order
    const Tensor<T> x = c.value("x");
    const auto [values, indices] = heed::sort(x);
    c.forward(values, "output");
    c.forward(indices, "indices");
    const auto [desc_values, desc_indices] = x.sort(-1, true);
    c.forward(desc_values, "desc_values");
    c.forward(desc_indices, "desc_indices");
    c.forward(heed::argsort(x, -1, true), "desc_indices");
  }
}

TEMPLATE_TEST_CASE("topk matches PyTorch, largest and smallest", "[ops][golden]", float, double) {
  using T = TestType;
  {
    Case<T> c("topk_3");
    c.check(heed::topk(c.in("x"), 3));
  }
  {
    Case<T> c("topk_2_smallest");
    c.check(c.in("x").topk(2, -1, false));
  }
  {
    Case<T> c("topk_2_0");
    c.check(heed::topk(c.in("x"), 2, 0));
  }
  {
    Case<T> c("topk_4_m2_smallest");
    c.check(heed::topk(c.in("x"), 4, -2, false));
  }
  {
    Case<T> c("topk_nan");  // NaN is the largest
    const Tensor<T> x = c.value("x");
    const auto [top, top_indices] = heed::topk(x, 2);
    c.forward(top, "output");
    c.forward(top_indices, "indices");
    const auto [bottom, bottom_indices] = heed::topk(x, 3, -1, false);
    c.forward(bottom, "bottom3_values");
    c.forward(bottom_indices, "bottom3_indices");
  }
}

TEMPLATE_TEST_CASE("topk with ties picks PyTorch's values and set of indices, in index order", "[ops][golden]", float,
                   double) {
  using T = TestType;
  // PyTorch does not promise the order of tied elements (its CPU topk lists them out of
  // order); heed lists them by index. The values and each row's set of indices match.
  Case<T> c("topk_ties");
  const Tensor<T> x = c.value("x");
  const auto check_row_sets = [&](const IndexTensor& actual, const std::string& expected_name, index_t k) {
    const IndexTensor expected = c.index(expected_name);
    REQUIRE(actual.shape() == expected.shape());
    for (index_t row = 0; row < actual.shape()[0]; ++row) {
      std::vector<std::int64_t> a(actual.data() + row * k, actual.data() + (row + 1) * k),
          e(expected.data() + row * k, expected.data() + (row + 1) * k);
      INFO(expected_name << ", row " << row);
      // heed: tied values in index order.
      for (index_t j = 1; j < k; ++j)
        if (x.data()[row * x.shape()[1] + a[j]] == x.data()[row * x.shape()[1] + a[j - 1]]) CHECK(a[j - 1] < a[j]);
      std::sort(a.begin(), a.end());
      std::sort(e.begin(), e.end());
      CHECK(a == e);
    }
  };
  const auto [top, top_indices] = heed::topk(x, 4);
  c.forward(top, "output");
  check_row_sets(top_indices, "indices", 4);
  c.forward(heed::gather(x, -1, top_indices), "output");
  const auto [bottom, bottom_indices] = x.topk(2, -1, false);
  c.forward(bottom, "bottom2_values");
  check_row_sets(bottom_indices, "bottom2_indices", 2);
}

// ---- loss.hpp ----------------------------------------------------------------------------------

TEMPLATE_TEST_CASE("mse_loss and l1_loss match PyTorch for every reduction", "[ops][golden]", float, double) {
  using T = TestType;
  const std::vector<std::pair<std::string, Reduction>> reductions = {
      {"none", Reduction::none}, {"mean", Reduction::mean}, {"sum", Reduction::sum}};
  for (const auto& [name, reduction] : reductions) {
    {
      Case<T> c("mse_" + name);
      Tensor<T> input = c.in("input"), target = c.in("target");
      c.check(heed::mse_loss(input, target, reduction));
    }
    {
      Case<T> c("l1_" + name);  // two zero differences: gradient 0 there
      Tensor<T> input = c.in("input"), target = c.in("target");
      c.check(heed::l1_loss(input, target, reduction));
    }
  }
  {
    Case<T> c("mse_mean");  // the default reduction
    Tensor<T> input = c.in("input"), target = c.in("target");
    c.check(heed::mse_loss(input, target));
  }
  {
    Case<T> c("l1_mean");
    Tensor<T> input = c.in("input"), target = c.in("target");
    c.check(heed::l1_loss(input, target));
  }
}

// ---- empty tensors and degenerate counts -------------------------------------------------------

TEMPLATE_TEST_CASE("ops on empty tensors match PyTorch", "[ops][golden]", float, double) {
  using T = TestType;
  {
    Case<T> c("chunk_empty");  // `chunks` empty pieces
    c.check(c.in("x").chunk(3));
  }
  {
    Case<T> c("split_empty");  // one empty piece
    c.check(c.in("x").split(2));
  }
  {
    Case<T> c("prod_empty");  // the product of nothing is 1
    c.forward(c.value("x").prod());
    c.forward(heed::prod(heed::zeros<T>({2, 0}), 1), "prod1");
  }
  {
    Case<T> c("loss_empty");  // the mean of no loss is NaN, the sum 0
    const Tensor<T> x = c.value("x");
    c.forward(heed::mse_loss(x, x));
    c.forward(heed::l1_loss(x, x), "l1_mean");
    c.forward(heed::mse_loss(x, x, Reduction::sum), "mse_sum");
    c.forward(heed::l1_loss(x, x, Reduction::sum), "l1_sum");
  }
  {
    Case<T> c("var_c5");  // correction >= n: a positive sum over a zero divisor
    const Tensor<T> x = c.value("x");
    c.forward(x.var(0, false, 5.0));
    c.forward(heed::var(x, 0, false, 4.0), "var_c4");
    c.forward(heed::std(x, 0, false, 5.0), "std_c5");
  }
}
