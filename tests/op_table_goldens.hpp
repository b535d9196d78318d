// The op table's golden values from PyTorch (see tests/op_table.hpp): the cases of
// tests/data/ops_golden.txt (written by tests/data/make_ops_golden.py), each attached to
// the entry of its op by name and run by test_op_table.cpp in float and in double: the
// output (and the int64 indices where the op returns them) against PyTorch's, then the
// gradients of (output * R).sum() with respect to every floating-point input, R a
// random tensor of the output's shape. Values match to 1e-12 relative in double and
// 1e-5 in float, indices exactly; NaN must be NaN where PyTorch's is. Cases with NaN
// inputs are forward-only.
#pragma once

#include "golden.hpp"
#include "op_table.hpp"

#include <algorithm>
#include <iomanip>
#include <stdexcept>

namespace heed_test::op_table {

using heed::BoolTensor;
using heed::Reduction;

const heed_test::Golden& golden_values() {
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
class GoldenCase {
 public:
  using value_type = T;
  explicit GoldenCase(std::string name) : name_(std::move(name)) {}

  /// A floating-point input as a leaf that requires grad; check() compares its gradient.
  Tensor<T> in(const std::string& input) {
    Tensor<T> x = golden_values().tensor<T>(key(input)).requires_grad_();
    leaves_.emplace_back(input, x);
    return x;
  }
  /// A floating-point tensor of the case, not a leaf (forward-only cases, expected values).
  Tensor<T> value(const std::string& n) const { return golden_values().tensor<T>(key(n)); }
  IndexTensor index(const std::string& n) const { return golden_values().tensor<std::int64_t>(key(n)); }
  /// A mask, stored as int64 0 / 1.
  BoolTensor mask(const std::string& n) const { return golden_values().tensor<double>(key(n)) > 0.5; }

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

/// Appends golden cases to the entry named name.
inline void add_goldens(std::vector<Entry>& t, const std::string& name, std::vector<GoldenValues> goldens) {
  for (Entry& e : t)
    if (e.name == name) {
      for (GoldenValues& g : goldens) e.goldens.push_back(std::move(g));
      return;
    }
  throw std::logic_error("op table: golden values for " + name + ", which has no entry");
}

inline void add_golden_cases(std::vector<Entry>& t) {
  // sum and mean over several dims match PyTorch
  add_goldens(t, "sum", {golden_case("sum_02", [](auto& c) { c.check(heed::sum(c.in("x"), {0, 2})); })});
  add_goldens(t, "sum", {golden_case("sum_neg_keep", [](auto& c) { c.check(c.in("x").sum({-1, 0}, true)); })});
  add_goldens(t, "sum", {golden_case("sum_all", [](auto& c) {  // dim=[]: every dim
                c.check(c.in("x").sum(std::vector<int>{}));
              })});
  add_goldens(t, "mean", {golden_case("mean_1m1_keep", [](auto& c) { c.check(c.in("x").mean({1, -1}, true)); })});
  add_goldens(t, "mean", {golden_case("mean_0", [](auto& c) { c.check(heed::mean(c.in("x"), std::vector<int>{0})); })});
  // var and std match PyTorch
  add_goldens(t, "var", {golden_case("var_all", [](auto& c) { c.check(c.in("x").var()); })});
  add_goldens(t, "var", {golden_case("var_1", [](auto& c) { c.check(c.in("x").var(1)); })});
  add_goldens(t, "var", {golden_case("var_m1_keep_c0", [](auto& c) { c.check(c.in("x").var(-1, true, 0.0)); })});
  add_goldens(t, "var", {golden_case("var_02_c1", [](auto& c) { c.check(heed::var(c.in("x"), {0, 2}, false, 1.0)); })});
  add_goldens(t, "var", {golden_case("var_m1m3_keep_c0", [](auto& c) {
                c.check(c.in("x").var({-1, -3}, true, 0.0));
              })});
  add_goldens(t, "var", {golden_case("var_0_c2", [](auto& c) { c.check(heed::var(c.in("x"), 0, false, 2.0)); })});
  add_goldens(t, "std", {golden_case("std_all", [](auto& c) { c.check(c.in("x").std()); })});
  add_goldens(t, "std", {golden_case("std_0_c0", [](auto& c) { c.check(heed::std(c.in("x"), 0, false, 0.0)); })});
  add_goldens(t, "std", {golden_case("std_12_keep_c1", [](auto& c) { c.check(c.in("x").std({1, 2}, true, 1.0)); })});
  add_goldens(
      t, "std",
      {golden_case("std_m2_c0", [](auto& c) { c.check(heed::std(c.in("x"), std::vector<int>{-2}, false, 0.0)); })});
  add_goldens(t, "var", {golden_case("var_n1", [](auto& c) {  // one element per row, correction 1: 0 / 0
                c.forward(c.value("x").var(1));
              })});
  // prod matches PyTorch, zeros included
  add_goldens(t, "prod", {golden_case("prod_all", [](auto& c) { c.check(c.in("x").prod()); })});
  add_goldens(t, "prod", {golden_case("prod_1_zeros", [](auto& c) {  // rows with no zero, one zero, two zeros
                c.check(c.in("x").prod(1));
              })});
  add_goldens(t, "prod", {golden_case("prod_m1_keep", [](auto& c) { c.check(c.in("x").prod(-1, true)); })});
  add_goldens(t, "prod", {golden_case("prod_0", [](auto& c) { c.check(heed::prod(c.in("x"), 0)); })});
  add_goldens(t, "prod", {golden_case("prod_all_zero", [](auto& c) { c.check(heed::prod(c.in("x"))); })});
  add_goldens(t, "prod", {golden_case("prod_all_two_zeros", [](auto& c) { c.check(c.in("x").prod()); })});
  // max and min over everything match PyTorch, ties sharing the gradient
  add_goldens(t, "max", {golden_case("max_all_ties", [](auto& c) { c.check(c.in("x").max()); })});
  add_goldens(t, "min", {golden_case("min_all_ties", [](auto& c) { c.check(heed::min(c.in("x"))); })});
  add_goldens(t, "max", {golden_case("max_all", [](auto& c) { c.check(heed::max(c.in("x"))); })});
  add_goldens(t, "min", {golden_case("min_all", [](auto& c) { c.check(c.in("x").min()); })});
  // max and min along a dim match PyTorch, first index on ties
  add_goldens(t, "max_with_indices", {golden_case("max_dim_m1", [](auto& c) {
                c.check(heed::max_with_indices(c.in("x"), -1));
                c.forward(c.value("x").max(-1));
              })});
  add_goldens(t, "min_with_indices", {golden_case("min_dim_2_keep", [](auto& c) {
                c.check(heed::min_with_indices(c.in("x"), 2, true));
                c.forward(heed::min(c.value("x"), 2, true));
              })});
  add_goldens(t, "max_with_indices",
              {golden_case("max_dim_0", [](auto& c) { c.check(heed::max_with_indices(c.in("x"), 0)); })});
  add_goldens(t, "min_with_indices", {golden_case("min_dim_m2_keep", [](auto& c) {
                c.check(heed::min_with_indices(c.in("x"), -2, true));
                c.forward(c.value("x").min(-2, true));
              })});
  add_goldens(t, "max_with_indices",
              {golden_case("max_dim_1", [](auto& c) { c.check(heed::max_with_indices(c.in("x"), 1)); })});
  add_goldens(
      t, "max",
      {golden_case("max_dim_m1", [](auto& c) {  // The values alone, with the gradient: the same index as with_indices.
        c.check(c.in("x").max(-1));
      })});
  add_goldens(t, "min", {golden_case("min_dim_2_keep", [](auto& c) { c.check(heed::min(c.in("x"), 2, true)); })});
  // argmax and argmin match PyTorch, first index on ties
  add_goldens(t, "argmax", {golden_case("arg_tied", [](auto& c) {
                using T = typename std::decay_t<decltype(c)>::value_type;
                const Tensor<T> x = c.value("x");
                c.forward(x.argmax(), "output");
                c.forward(heed::argmin(x), "argmin");
                c.forward(x.argmax(-1), "argmax_m1");
                c.forward(heed::argmin(x, -1), "argmin_m1");
                c.forward(heed::argmax(x, 0, true), "argmax_0_keep");
                c.forward(x.argmin(1), "argmin_1");
                c.forward(x.argmax(1, true), "argmax_1_keep");
                c.forward(x.argmin(-3), "argmin_m3");
              })});
  // max, min, argmax and argmin propagate NaN as PyTorch
  add_goldens(t, "max", {golden_case("max_nan", [](auto& c) {
                using T = typename std::decay_t<decltype(c)>::value_type;
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
              })});
  // clamp matches PyTorch, the gradient passing at the bounds
  add_goldens(t, "clamp", {golden_case("clamp_both", [](auto& c) { c.check(heed::clamp(c.in("x"), -0.5, 0.5)); })});
  add_goldens(t, "clamp", {golden_case("clamp_min", [](auto& c) {
                c.check(c.in("x").clamp_min(-0.25));
                c.forward(heed::clamp(c.value("x"), -0.25));
              })});
  add_goldens(t, "clamp", {golden_case("clamp_max", [](auto& c) {
                c.check(c.in("x").clamp_max(0.75));
                c.forward(heed::clamp(c.value("x"), std::nullopt, 0.75));
              })});
  add_goldens(t, "clamp", {golden_case("clamp_min_gt_max", [](auto& c) {  // torch: max everywhere, no gradient
                c.check(c.in("x").clamp(0.5, -0.5));
              })});
  add_goldens(t, "clamp",
              {golden_case("clamp_min_eq_max", [](auto& c) { c.check(heed::clamp(c.in("x"), 0.5, 0.5)); })});
  add_goldens(t, "clamp", {golden_case("clamp_nan", [](auto& c) { c.forward(heed::clamp(c.value("x"), -0.5, 0.5)); })});
  // split and chunk match PyTorch, every piece
  add_goldens(t, "split", {golden_case("split_2_0", [](auto& c) { c.check(c.in("x").split(2)); })});
  add_goldens(t, "split", {golden_case("split_3_m1", [](auto& c) { c.check(heed::split(c.in("x"), 3, -1)); })});
  add_goldens(t, "split", {golden_case("split_sizes_1", [](auto& c) { c.check(c.in("x").split({1, 3, 0, 2}, 1)); })});
  add_goldens(t, "chunk", {golden_case("chunk_3_0", [](auto& c) { c.check(c.in("x").chunk(3)); })});
  add_goldens(t, "chunk", {golden_case("chunk_4_m1", [](auto& c) {  // 3 pieces of 2, fewer than asked
                c.check(heed::chunk(c.in("x"), 4, -1));
              })});
  add_goldens(t, "chunk", {golden_case("chunk_4_5", [](auto& c) { c.check(c.in("x").chunk(4)); })});
  // slice_scatter and select_scatter match PyTorch
  add_goldens(t, "slice_scatter", {golden_case("slice_scatter_d2l", [](auto& c) {  // P[:, :, 0::2] = X
                using T = typename std::decay_t<decltype(c)>::value_type;
                Tensor<T> x = c.in("x"), src = c.in("src");
                c.check(heed::slice_scatter(x, src, 2, 0, kEnd, 2));
              })});
  add_goldens(t, "slice_scatter", {golden_case("slice_scatter_d2l_odd", [](auto& c) {  // P[:, :, 1::2] = X
                using T = typename std::decay_t<decltype(c)>::value_type;
                Tensor<T> x = c.in("x"), src = c.in("src");
                c.check(heed::slice_scatter(x, src, -1, 1, kEnd, 2));
              })});
  add_goldens(t, "slice_scatter", {golden_case("slice_scatter_neg_start", [](auto& c) {  // x[:, -5::2] = src
                using T = typename std::decay_t<decltype(c)>::value_type;
                Tensor<T> x = c.in("x"), src = c.in("src");
                c.check(heed::slice_scatter(x, src, -1, -5, kEnd, 2));
              })});
  add_goldens(t, "slice_scatter", {golden_case("slice_scatter_clamped", [](auto& c) {  // x[:, -100:-3:3] = src
                using T = typename std::decay_t<decltype(c)>::value_type;
                Tensor<T> x = c.in("x"), src = c.in("src");
                c.check(heed::slice_scatter(x, src, 1, -100, -3, 3));
              })});
  add_goldens(t, "slice_scatter", {golden_case("slice_scatter_0", [](auto& c) {
                using T = typename std::decay_t<decltype(c)>::value_type;
                Tensor<T> x = c.in("x"), src = c.in("src");
                c.check(heed::slice_scatter(x, src, 0, 1, 4, 2));
              })});
  add_goldens(t, "select_scatter", {golden_case("select_scatter_0_m1", [](auto& c) {
                using T = typename std::decay_t<decltype(c)>::value_type;
                Tensor<T> x = c.in("x"), src = c.in("src");
                c.check(heed::select_scatter(x, src, 0, -1));
              })});
  add_goldens(t, "select_scatter", {golden_case("select_scatter_1_2", [](auto& c) {
                using T = typename std::decay_t<decltype(c)>::value_type;
                Tensor<T> x = c.in("x"), src = c.in("src");
                c.check(heed::select_scatter(x, src, 1, 2));
              })});
  // repeat_interleave, x at i, t() and mT() match PyTorch
  add_goldens(t, "repeat_interleave",
              {golden_case("repeat_interleave_2", [](auto& c) { c.check(c.in("x").repeat_interleave(2)); })});
  add_goldens(t, "repeat_interleave",
              {golden_case("repeat_interleave_2", [](auto& c) { c.check(heed::repeat_interleave(c.in("x"), 2)); })});
  add_goldens(t, "operator[]", {golden_case("index_1", [](auto& c) { c.check(c.in("x")[1]); })});
  add_goldens(t, "operator[]", {golden_case("index_m1", [](auto& c) { c.check(c.in("x")[-1]); })});
  add_goldens(t, "t", {golden_case("t_2d", [](auto& c) { c.check(c.in("x").t()); })});
  add_goldens(t, "t", {golden_case("t_1d", [](auto& c) { c.check(c.in("x").t()); })});
  add_goldens(t, "mT", {golden_case("mT_3d", [](auto& c) { c.check(c.in("x").mT()); })});
  // gather and scatter_add match PyTorch, repeated indices adding up
  add_goldens(t, "gather",
              {golden_case("gather_1", [](auto& c) { c.check(heed::gather(c.in("x"), 1, c.index("index"))); })});
  add_goldens(t, "gather", {golden_case("gather_0", [](auto& c) {  // index smaller than x in dim 1
                c.check(c.in("x").gather(0, c.index("index")));
              })});
  add_goldens(t, "gather",
              {golden_case("gather_m1", [](auto& c) { c.check(heed::gather(c.in("x"), -1, c.index("index"))); })});
  add_goldens(t, "scatter_add", {golden_case("scatter_add_1", [](auto& c) {
                using T = typename std::decay_t<decltype(c)>::value_type;
                Tensor<T> x = c.in("x"), src = c.in("src");
                c.check(heed::scatter_add(x, 1, c.index("index"), src));
              })});
  add_goldens(t, "scatter_add", {golden_case("scatter_add_0", [](auto& c) {
                using T = typename std::decay_t<decltype(c)>::value_type;
                Tensor<T> x = c.in("x"), src = c.in("src");
                c.check(x.scatter_add(0, c.index("index"), src));
              })});
  add_goldens(t, "scatter_add",
              {golden_case("scatter_add_big_src", [](auto& c) {  // src larger than index: forward only
                c.forward(heed::scatter_add(c.value("x"), -1, c.index("index"), c.value("src")));
              })});
  // masked_select matches PyTorch, broadcasting
  add_goldens(t, "masked_select",
              {golden_case("masked_select_row", [](auto& c) { c.check(c.in("x").masked_select(c.mask("mask"))); })});
  // sort and argsort match PyTorch's stable sort
  add_goldens(t, "sort", {golden_case("sort_m1", [](auto& c) {
                c.check(heed::sort(c.in("x"), -1));
                c.forward(heed::argsort(c.value("x")), "indices");
              })});
  add_goldens(t, "sort", {golden_case("sort_m1_desc", [](auto& c) {
                c.check(c.in("x").sort(-1, true));
                c.forward(c.value("x").argsort(-1, true), "indices");
              })});
  add_goldens(t, "sort", {golden_case("sort_0", [](auto& c) {
                c.check(heed::sort(c.in("x"), 0));
                c.forward(heed::argsort(c.value("x"), 0), "indices");
              })});
  add_goldens(t, "sort", {golden_case("sort_m2_desc", [](auto& c) {
                c.check(heed::sort(c.in("x"), -2, true));
                c.forward(heed::argsort(c.value("x"), -2, true), "indices");
              })});
  add_goldens(t, "sort", {golden_case("sort_1", [](auto& c) { c.check(c.in("x").sort(1)); })});
  add_goldens(t, "sort", {golden_case("sort_nan", [](auto& c) {  // NaN sorts as the largest, ties and NaNs in order
                using T = typename std::decay_t<decltype(c)>::value_type;
                const Tensor<T> x = c.value("x");
                const auto [values, indices] = heed::sort(x);
                c.forward(values, "output");
                c.forward(indices, "indices");
                const auto [desc_values, desc_indices] = x.sort(-1, true);
                c.forward(desc_values, "desc_values");
                c.forward(desc_indices, "desc_indices");
                c.forward(heed::argsort(x, -1, true), "desc_indices");
              })});
  // topk matches PyTorch, largest and smallest
  add_goldens(t, "topk", {golden_case("topk_3", [](auto& c) { c.check(heed::topk(c.in("x"), 3)); })});
  add_goldens(t, "topk", {golden_case("topk_2_smallest", [](auto& c) { c.check(c.in("x").topk(2, -1, false)); })});
  add_goldens(t, "topk", {golden_case("topk_2_0", [](auto& c) { c.check(heed::topk(c.in("x"), 2, 0)); })});
  add_goldens(t, "topk",
              {golden_case("topk_4_m2_smallest", [](auto& c) { c.check(heed::topk(c.in("x"), 4, -2, false)); })});
  add_goldens(t, "topk", {golden_case("topk_nan", [](auto& c) {  // NaN is the largest
                using T = typename std::decay_t<decltype(c)>::value_type;
                const Tensor<T> x = c.value("x");
                const auto [top, top_indices] = heed::topk(x, 2);
                c.forward(top, "output");
                c.forward(top_indices, "indices");
                const auto [bottom, bottom_indices] = heed::topk(x, 3, -1, false);
                c.forward(bottom, "bottom3_values");
                c.forward(bottom_indices, "bottom3_indices");
              })});
  // topk with ties picks PyTorch's values and set of indices, in index order
  add_goldens(t, "topk", {golden_case("topk_ties", [](auto& c) {
                // PyTorch does not promise the order of tied elements (its CPU topk lists them out of
                // order); heed lists them by index. The values and each row's set of indices match.
                using T = typename std::decay_t<decltype(c)>::value_type;
                const Tensor<T> x = c.value("x");
                const auto check_row_sets = [&](const IndexTensor& actual, const std::string& expected_name,
                                                index_t k) {
                  const IndexTensor expected = c.index(expected_name);
                  REQUIRE(actual.shape() == expected.shape());
                  for (index_t row = 0; row < actual.shape()[0]; ++row) {
                    std::vector<std::int64_t> a(actual.data() + row * k, actual.data() + (row + 1) * k),
                        e(expected.data() + row * k, expected.data() + (row + 1) * k);
                    INFO(expected_name << ", row " << row);
                    // heed: tied values in index order.
                    for (index_t j = 1; j < k; ++j)
                      if (x.data()[row * x.shape()[1] + a[j]] == x.data()[row * x.shape()[1] + a[j - 1]])
                        CHECK(a[j - 1] < a[j]);
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
              })});
  // mse_loss and l1_loss match PyTorch for every reduction
  add_goldens(t, "mse_loss", {golden_case("mse_mean", [](auto& c) {  // the default reduction
                using T = typename std::decay_t<decltype(c)>::value_type;
                Tensor<T> input = c.in("input"), target = c.in("target");
                c.check(heed::mse_loss(input, target));
              })});
  add_goldens(t, "l1_loss", {golden_case("l1_mean", [](auto& c) {
                using T = typename std::decay_t<decltype(c)>::value_type;
                Tensor<T> input = c.in("input"), target = c.in("target");
                c.check(heed::l1_loss(input, target));
              })});
  // ops on empty tensors match PyTorch
  add_goldens(t, "chunk", {golden_case("chunk_empty", [](auto& c) {  // `chunks` empty pieces
                c.check(c.in("x").chunk(3));
              })});
  add_goldens(t, "split", {golden_case("split_empty", [](auto& c) {  // one empty piece
                c.check(c.in("x").split(2));
              })});
  add_goldens(t, "prod", {golden_case("prod_empty", [](auto& c) {  // the product of nothing is 1
                using T = typename std::decay_t<decltype(c)>::value_type;
                c.forward(c.value("x").prod());
                c.forward(heed::prod(heed::zeros<T>({2, 0}), 1), "prod1");
              })});
  add_goldens(t, "mse_loss", {golden_case("loss_empty", [](auto& c) {  // the mean of no loss is NaN, the sum 0
                using T = typename std::decay_t<decltype(c)>::value_type;
                const Tensor<T> x = c.value("x");
                c.forward(heed::mse_loss(x, x));
                c.forward(heed::l1_loss(x, x), "l1_mean");
                c.forward(heed::mse_loss(x, x, Reduction::sum), "mse_sum");
                c.forward(heed::l1_loss(x, x, Reduction::sum), "l1_sum");
              })});
  add_goldens(t, "var", {golden_case("var_c5", [](auto& c) {  // correction >= n: a positive sum over a zero divisor
                using T = typename std::decay_t<decltype(c)>::value_type;
                const Tensor<T> x = c.value("x");
                c.forward(x.var(0, false, 5.0));
                c.forward(heed::var(x, 0, false, 4.0), "var_c4");
                c.forward(heed::std(x, 0, false, 5.0), "std_c5");
              })});
  // logical ops match PyTorch: on masks broadcast (1, 3) against (2, 1), the operators
  // & | ^ ~ as the functions, and on floats with -0 and NaN (nonzero, NaN too, is true)
  const auto as_ints = [](const BoolTensor& m) { return m.to<std::int64_t>(); };
  add_goldens(t, "logical_and", {golden_case("logical_masks", [as_ints](auto& c) {
                const BoolTensor a = c.mask("a"), b = c.mask("b");
                c.forward(as_ints(heed::logical_and(a, b)), "output");
                c.forward(as_ints(a & b), "output");
              })});
  add_goldens(t, "logical_or", {golden_case("logical_masks", [as_ints](auto& c) {
                const BoolTensor a = c.mask("a"), b = c.mask("b");
                c.forward(as_ints(heed::logical_or(a, b)), "or");
                c.forward(as_ints(a | b), "or");
              })});
  add_goldens(t, "logical_xor", {golden_case("logical_masks", [as_ints](auto& c) {
                const BoolTensor a = c.mask("a"), b = c.mask("b");
                c.forward(as_ints(heed::logical_xor(a, b)), "xor");
                c.forward(as_ints(a ^ b), "xor");
              })});
  add_goldens(t, "logical_not", {golden_case("logical_masks", [as_ints](auto& c) {
                c.forward(as_ints(heed::logical_not(c.mask("a"))), "not_a");
                c.forward(as_ints(~c.mask("b")), "not_b");
              })});
  add_goldens(t, "logical_and", {golden_case("logical_floats", [as_ints](auto& c) {
                c.forward(as_ints(heed::logical_and(c.value("x"), c.value("y"))), "output");
              })});
  add_goldens(t, "logical_or", {golden_case("logical_floats", [as_ints](auto& c) {
                c.forward(as_ints(heed::logical_or(c.value("x"), c.value("y"))), "or");
              })});
  add_goldens(t, "logical_xor", {golden_case("logical_floats", [as_ints](auto& c) {
                c.forward(as_ints(heed::logical_xor(c.value("x"), c.value("y"))), "xor");
              })});
  add_goldens(t, "logical_not", {golden_case("logical_floats", [as_ints](auto& c) {
                c.forward(as_ints(heed::logical_not(c.value("x"))), "not_x");
              })});
  // masked_select matches PyTorch, broadcasting
  for (const char* name : {"masked_select_row", "masked_select_col", "masked_select_bx"})
    add_goldens(t, "masked_select",
                {golden_case(name, [](auto& c) { c.check(heed::masked_select(c.in("x"), c.mask("mask"))); })});
  // mse_loss and l1_loss match PyTorch for every reduction
  for (const auto& [name, reduction] : std::vector<std::pair<std::string, heed::Reduction>>{
           {"none", heed::Reduction::none}, {"mean", heed::Reduction::mean}, {"sum", heed::Reduction::sum}}) {
    add_goldens(t, "mse_loss", {golden_case("mse_" + name, [reduction = reduction](auto& c) {
                  using T = typename std::decay_t<decltype(c)>::value_type;
                  Tensor<T> input = c.in("input"), target = c.in("target");
                  c.check(heed::mse_loss(input, target, reduction));
                })});
    // two zero differences: gradient 0 there
    add_goldens(t, "l1_loss", {golden_case("l1_" + name, [reduction = reduction](auto& c) {
                  using T = typename std::decay_t<decltype(c)>::value_type;
                  Tensor<T> input = c.in("input"), target = c.in("target");
                  c.check(heed::l1_loss(input, target, reduction));
                })});
  }
}

}  // namespace heed_test::op_table
