// Differentiable ops: golden values, edge semantics and error messages of arithmetic,
// reductions, matmul, softmax, layer_norm, embedding and gelu. Each op against a naive
// reference, its gradcheck, float against double and the thread counts are in the op
// table (tests/op_table.hpp, run by test_op_table.cpp).
#include <catch2/catch.hpp>
#include <heed/heed.hpp>
#include <heed/ops/embedding.hpp>
#include <heed/ops/layer_norm.hpp>

#include "check.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <type_traits>
#include <vector>

namespace {

using heed::index_t;
using heed::Shape;
using heed_test::check_values;

/// The elements of x as doubles, row-major.
template <typename T>
std::vector<double> values_of(const heed::Tensor<T>& x) {
  return std::vector<double>(x.data(), x.data() + x.numel());
}

template <typename T>
bool all_finite(const heed::Tensor<T>& x) {
  for (index_t i = 0; i < x.numel(); ++i)
    if (!std::isfinite(x.data()[i])) return false;
  return true;
}

}  // namespace

// ---- binary arithmetic ------------------------------------------------------------------

TEST_CASE("broadcasting add of a row over a matrix", "[ops]") {
  auto a = heed::tensor<float>({{1, 2, 3}, {4, 5, 6}});
  auto b = heed::tensor<float>({10, 20, 30});
  CHECK((a + b).to_vector() == std::vector<float>{11, 22, 33, 14, 25, 36});
}

TEMPLATE_TEST_CASE("add, sub, mul and div broadcast a row over a matrix", "[ops]", float, double) {
  const auto a = heed::tensor<TestType>({{1, 2, 3}, {4, 5, 6}});
  const auto b = heed::tensor<TestType>({10, 20, 30});
  const auto sum = a + b;
  CHECK(sum.shape() == Shape{2, 3});
  check_values(sum, {11, 22, 33, 14, 25, 36});
  check_values(heed::add(b, a), {11, 22, 33, 14, 25, 36});
  check_values(a - b, {-9, -18, -27, -6, -15, -24});
  check_values(b - a, {9, 18, 27, 6, 15, 24});
  check_values(a * b, {10, 40, 90, 40, 100, 180});
  check_values(a / b, {0.1, 0.1, 0.1, 0.4, 0.25, 0.2});
  check_values(b / a, {10, 10, 10, 2.5, 4, 5});
  check_values(heed::sub(a, a), {0, 0, 0, 0, 0, 0});
}

TEMPLATE_TEST_CASE("a column times a row is their outer product", "[ops]", float, double) {
  const auto col = heed::tensor<TestType>({{1}, {2}});
  const auto row = heed::tensor<TestType>({{3, 4, 5}});
  const auto outer = col * row;
  CHECK(outer.shape() == Shape{2, 3});
  check_values(outer, {3, 4, 5, 6, 8, 10});
  const auto diff = row - col;
  CHECK(diff.shape() == Shape{2, 3});
  check_values(diff, {2, 3, 4, 1, 2, 3});
}

TEMPLATE_TEST_CASE("shapes (4, 1, 3) and (2, 1) broadcast to (4, 2, 3)", "[ops]", float, double) {
  const auto x = heed::arange<TestType>(12).reshape({4, 1, 3});
  const auto y = heed::tensor<TestType>({{100}, {200}});
  const auto z = x + y;
  REQUIRE(z.shape() == Shape{4, 2, 3});
  for (index_t i = 0; i < 4; ++i)
    for (index_t j = 0; j < 2; ++j)
      for (index_t k = 0; k < 3; ++k) REQUIRE(z.at({i, j, k}) == static_cast<TestType>(3 * i + k + 100 * (j + 1)));
  const auto w = y * x;  // the same broadcast with the operands swapped
  REQUIRE(w.shape() == Shape{4, 2, 3});
  CHECK(w.at({3, 1, 2}) == TestType(200 * 11));
  CHECK(w.at({1, 0, 0}) == TestType(100 * 3));
}

TEMPLATE_TEST_CASE("a rank-0 tensor broadcasts against any shape", "[ops]", float, double) {
  const auto x = heed::tensor<TestType>({{1, 2}, {3, 4}});
  const auto s = heed::scalar_tensor<TestType>(10);
  check_values(x * s, {10, 20, 30, 40});
  check_values(s - x, {9, 8, 7, 6});
  CHECK((s + s).dim() == 0);
  CHECK((s + s).item() == TestType(20));
}

TEMPLATE_TEST_CASE("pow raises elementwise to a tensor or a scalar exponent", "[ops]", float, double) {
  const auto x = heed::tensor<TestType>({{1, 2, 3}, {4, 5, 6}});
  const auto e = heed::tensor<TestType>({2, 1, 0.5});
  const auto p = heed::pow(x, e);
  CHECK(p.shape() == Shape{2, 3});
  check_values(p, {1, 2, 1.7320508075688772, 16, 5, 2.449489742783178});
  check_values(x.pow(e), values_of(p));
  check_values(x.pow(TestType(2)), {1, 4, 9, 16, 25, 36});
  check_values(heed::pow(x, TestType(-1)), {1, 0.5, 1.0 / 3, 0.25, 0.2, 1.0 / 6});
  check_values(heed::pow(heed::tensor<TestType>({4, 9}), TestType(0.5)), {2, 3});
}

TEMPLATE_TEST_CASE("scalars work on either side of every operator", "[ops]", float, double) {
  const auto x = heed::tensor<TestType>({1, 2, 4});
  check_values(x + 1.0, {2, 3, 5});
  check_values(1.0 + x, {2, 3, 5});
  check_values(x - 1.0, {0, 1, 3});
  check_values(2.0 - x, {1, 0, -2});
  check_values(x * 3.0, {3, 6, 12});
  check_values(3.0 * x, {3, 6, 12});
  check_values(x / 2.0, {0.5, 1, 2});
  check_values(1.0 / x, {1, 0.5, 0.25});
  check_values(8.0 / x, {8, 4, 2});
  check_values(-x, {-1, -2, -4});
  check_values(heed::add(x, TestType(-1)), {0, 1, 3});
  check_values(heed::mul(x, TestType(0.5)), {0.5, 1, 2});
}

// ---- unary ------------------------------------------------------------------------------

TEMPLATE_TEST_CASE("sigmoid, tanh and exp of large inputs stay finite where the result is", "[ops]", float, double) {
  const auto big = heed::tensor<TestType>({-1000, -100, 100, 1000});
  const auto s = heed::sigmoid(big);
  CHECK(all_finite(s));
  check_values(s, {0, 0, 1, 1}, 1e-12);
  const auto t = heed::tanh(big);
  CHECK(all_finite(t));
  check_values(t, {-1, -1, 1, 1});
  CHECK(heed::exp(heed::tensor<TestType>({-1000})).item() == TestType(0));
}

// ---- comparisons and masks --------------------------------------------------------------

TEST_CASE("comparisons give bool tensors, elementwise and broadcast", "[ops]") {
  const auto a = heed::tensor<float>({1, 2, 3});
  const auto b = heed::tensor<float>({3, 2, 1});
  CHECK(heed::eq(a, b).to_vector() == std::vector<bool>{false, true, false});
  CHECK(heed::ne(a, b).to_vector() == std::vector<bool>{true, false, true});
  CHECK(heed::lt(a, b).to_vector() == std::vector<bool>{true, false, false});
  CHECK(heed::le(a, b).to_vector() == std::vector<bool>{true, true, false});
  CHECK(heed::gt(a, b).to_vector() == std::vector<bool>{false, false, true});
  CHECK(heed::ge(a, b).to_vector() == std::vector<bool>{false, true, true});
  CHECK((a == b).to_vector() == heed::eq(a, b).to_vector());
  CHECK((a != b).to_vector() == heed::ne(a, b).to_vector());
  CHECK((a < b).to_vector() == heed::lt(a, b).to_vector());
  CHECK((a <= b).to_vector() == heed::le(a, b).to_vector());
  CHECK((a > b).to_vector() == heed::gt(a, b).to_vector());
  CHECK((a >= b).to_vector() == heed::ge(a, b).to_vector());

  const auto col = heed::tensor<double>({{1}, {2}});
  const auto row = heed::tensor<double>({0, 1, 2});
  const auto grid = heed::gt(col, row);
  CHECK(grid.shape() == Shape{2, 3});
  CHECK(grid.to_vector() == std::vector<bool>{true, false, false, true, true, false});
  CHECK(std::string(grid.dtype()) == "bool");

  const auto i = heed::tensor<std::int64_t>({0, 5, 7});
  CHECK(heed::eq(i, std::int64_t(5)).to_vector() == std::vector<bool>{false, true, false});
}

TEST_CASE("comparison with a scalar: x > 0.5", "[ops]") {
  const auto x = heed::tensor<float>({0.2f, 0.5f, 0.9f});
  CHECK((x > 0.5).to_vector() == std::vector<bool>{false, false, true});
  CHECK((x >= 0.5).to_vector() == std::vector<bool>{false, true, true});
  CHECK((x < 0.5).to_vector() == std::vector<bool>{true, false, false});
  CHECK((x <= 0.5).to_vector() == std::vector<bool>{true, true, false});
  CHECK((x == 0.5).to_vector() == std::vector<bool>{false, true, false});
  CHECK((x != 0.5).to_vector() == std::vector<bool>{true, false, true});
  CHECK(heed::gt(x, 0.5f).to_vector() == std::vector<bool>{false, false, true});
}

TEST_CASE("logical ops combine masks, broadcast, and are the operators on bool tensors", "[ops]") {
  const auto x = heed::tensor<float>({{0.2f, 0.5f, 0.9f}, {-1, 0.7f, 2}});
  const heed::BoolTensor big = x > 0.4, small = x < 0.8;
  CHECK((big & small).to_vector() == std::vector<bool>{false, true, false, false, true, false});
  CHECK((big | small).to_vector() == std::vector<bool>{true, true, true, true, true, true});
  CHECK((big ^ small).to_vector() == std::vector<bool>{true, false, true, true, false, true});
  CHECK((~big).to_vector() == std::vector<bool>{true, false, false, true, false, false});
  CHECK((big & small).to_vector() == heed::logical_and(big, small).to_vector());
  CHECK((big | small).to_vector() == heed::logical_or(big, small).to_vector());
  CHECK((big ^ small).to_vector() == heed::logical_xor(big, small).to_vector());
  CHECK((~big).to_vector() == heed::logical_not(big).to_vector());
  // De Morgan, and a mask xor itself is all false.
  CHECK((~(big & small)).to_vector() == (~big | ~small).to_vector());
  CHECK((big ^ big).to_vector() == std::vector<bool>(6, false));

  // A column against a row broadcasts to (2, 3), as PyTorch's.
  const auto col = heed::tensor<bool>({{true}, {false}});
  const auto row = heed::tensor<bool>({true, false, true});
  const auto grid = col & row;
  CHECK(grid.shape() == Shape{2, 3});
  CHECK(grid.to_vector() == std::vector<bool>{true, false, true, false, false, false});
  CHECK((col | row).to_vector() == std::vector<bool>{true, true, true, true, false, true});

  // Other element types read nonzero as true, NaN included; -0 is zero.
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const heed::Tensord d({0.0, -0.0, nan, 2.5}, {4});
  CHECK(heed::logical_not(d).to_vector() == std::vector<bool>{true, true, false, false});
  CHECK(heed::logical_and(d, heed::scalar_tensor(1.0)).to_vector() == std::vector<bool>{false, false, true, true});
  const auto i = heed::tensor({0, 3, -1});
  CHECK(heed::logical_or(i, heed::tensor({0, 0, 0})).to_vector() == std::vector<bool>{false, true, true});
  CHECK(heed::logical_xor(i, heed::tensor({1, 1, 0})).to_vector() == std::vector<bool>{true, false, true});

  // Not differentiable: nothing is recorded, even from inputs that require grad.
  const auto leaf = heed::tensor<double>({0, 1}).requires_grad_();
  CHECK_FALSE(heed::logical_not(leaf).requires_grad());
  CHECK(std::string(heed::logical_and(leaf, leaf).dtype()) == "bool");
}

TEMPLATE_TEST_CASE("where picks from a or b and broadcasts all three", "[ops]", float, double) {
  const heed::Tensor<bool> rows({true, false}, {2, 1});
  const auto a = heed::tensor<TestType>({1, 2, 3});
  const auto zero = heed::scalar_tensor<TestType>(0);
  const auto w = heed::where(rows, a, zero);
  CHECK(w.shape() == Shape{2, 3});
  check_values(w, {1, 2, 3, 0, 0, 0});

  const auto x = heed::tensor<TestType>({{1, -2, 3}, {-4, 5, -6}});
  const auto relu = heed::where(x > 0.0, x, heed::zeros_like(x));
  check_values(relu, {1, 0, 3, 0, 5, 0});
  const auto cols = heed::tensor<bool>({true, false, true});
  const auto fill = heed::tensor<TestType>({{10}, {20}});
  check_values(heed::where(cols, x, fill), {1, 10, 3, -4, 20, -6});
}

TEMPLATE_TEST_CASE("masked_fill writes a value where the broadcast mask is true", "[ops]", float, double) {
  const auto x = heed::arange<TestType>(6).reshape({2, 3});
  const auto mask = heed::tensor<bool>({true, false, true});
  check_values(heed::masked_fill(x, mask, TestType(-1)), {-1, 1, -1, -1, 4, -1});
  check_values(heed::masked_fill(x, x > 2.0, TestType(0)), {0, 1, 2, 0, 0, 0});
  const auto big = heed::masked_fill(x, heed::tensor<bool>({{false}, {true}}), TestType(-1e6));
  check_values(big, {0, 1, 2, -1e6, -1e6, -1e6});
  check_values(x, {0, 1, 2, 3, 4, 5});  // the input is untouched
}

// ---- reductions -------------------------------------------------------------------------

TEST_CASE("int64 sum and prod wrap around on overflow, as PyTorch's", "[ops]") {
  // torch.tensor([2**62, 2**62, 1]).sum() == -2**63 + 1; torch.tensor([2**32, 2**32 + 1]).prod() == 2**64 mod 2**64
  // + 2**32 == 2**32; the same bits on every path: everything, one dim, several dims.
  constexpr std::int64_t big = std::int64_t(1) << 62, min = std::numeric_limits<std::int64_t>::min();
  const heed::IndexTensor x = heed::tensor<std::int64_t>({big, big, 1});
  CHECK(x.sum().item() == min + 1);
  CHECK(x.sum(0).item() == min + 1);
  CHECK(heed::tensor<std::int64_t>({{big, big}, {0, 3}}).sum(std::vector<int>{0, 1}).item() == min + 3);
  CHECK(heed::tensor<std::int64_t>({{big, -1}, {big, -1}}).sum(0).to_vector() == std::vector<std::int64_t>{min, -2});
  const std::int64_t two32 = std::int64_t(1) << 32;
  CHECK(heed::tensor<std::int64_t>({two32, two32 + 1}).prod().item() == two32);
  CHECK(heed::tensor<std::int64_t>({{two32, 3}, {two32, 5}}).prod(0).to_vector() == std::vector<std::int64_t>{0, 15});
  CHECK(heed::tensor<std::int64_t>({std::numeric_limits<std::int64_t>::max(), 2}).prod().item() == -2);
}

TEMPLATE_TEST_CASE("sum and mean over everything and over each dim of a 3-D tensor", "[ops]", float, double) {
  // y[i][j][k], shape (2, 2, 3)
  const auto y = heed::tensor<TestType>({{{1, 5, 5}, {5, 2, 0}}, {{1, -3, -1}, {7, 7, 7}}});
  CHECK(y.sum().dim() == 0);
  CHECK(y.sum().item() == TestType(36));
  CHECK(y.mean().item() == Approx(3.0));

  SECTION("dim 0") {
    const auto s = y.sum(0);
    CHECK(s.shape() == Shape{2, 3});
    check_values(s, {2, 2, 4, 12, 9, 7});
    check_values(y.mean(0), {1, 1, 2, 6, 4.5, 3.5});
    CHECK(y.sum(0, true).shape() == Shape{1, 2, 3});
  }
  SECTION("dim 1") {
    const auto s = y.sum(1);
    CHECK(s.shape() == Shape{2, 3});
    check_values(s, {6, 7, 5, 8, 4, 6});
    check_values(y.mean(1), {3, 3.5, 2.5, 4, 2, 3});
    CHECK(y.mean(1, true).shape() == Shape{2, 1, 3});
  }
  SECTION("dim -1 (the last)") {
    const auto s = y.sum(-1);
    CHECK(s.shape() == Shape{2, 2});
    check_values(s, {11, 7, -3, 21});
    check_values(y.sum(2), values_of(s));
    check_values(y.mean(-1), {11.0 / 3, 7.0 / 3, -1, 7});
    const auto k = y.sum(-1, true);
    CHECK(k.shape() == Shape{2, 2, 1});
    check_values(k, {11, 7, -3, 21});
  }
  SECTION("a size-1 dim and a rank-0 input") {
    const auto c = heed::tensor<TestType>({{1}, {2}});
    CHECK(c.sum(1).shape() == Shape{2});
    check_values(c.sum(1), {1, 2});
    const auto s = heed::scalar_tensor<TestType>(4);
    CHECK(s.sum(0).item() == TestType(4));
    CHECK(s.mean().item() == TestType(4));
  }
}

TEMPLATE_TEST_CASE("max and argmax over each dim report the first maximum on ties", "[ops]", float, double) {
  const auto y = heed::tensor<TestType>({{{1, 5, 5}, {5, 2, 0}}, {{1, -3, -1}, {7, 7, 7}}});
  CHECK(y.max().dim() == 0);
  CHECK(y.max().item() == TestType(7));

  SECTION("dim 0") {
    const auto m = y.max(0);
    CHECK(m.shape() == Shape{2, 3});
    check_values(m, {1, 5, 5, 7, 7, 7});
    CHECK(y.argmax(0).to_vector() == std::vector<std::int64_t>{0, 0, 0, 1, 1, 1});  // (0, 0): 1 vs 1
  }
  SECTION("dim 1") {
    check_values(y.max(1), {5, 5, 5, 7, 7, 7});
    CHECK(y.argmax(1).to_vector() == std::vector<std::int64_t>{1, 0, 0, 1, 1, 1});
    CHECK(y.max(1, true).shape() == Shape{2, 1, 3});
  }
  SECTION("dim -1 (the last)") {
    const auto m = y.max(-1);
    CHECK(m.shape() == Shape{2, 2});
    check_values(m, {5, 5, 1, 7});
    const auto a = y.argmax(-1);
    CHECK(a.shape() == Shape{2, 2});
    CHECK(a.to_vector() == std::vector<std::int64_t>{1, 0, 0, 0});  // [1, 5, 5] -> 1, [7, 7, 7] -> 0
    CHECK(y.argmax(2, true).shape() == Shape{2, 2, 1});
    CHECK(heed::argmax(y, 2).to_vector() == a.to_vector());
  }
  SECTION("negative values only") {
    const auto n = heed::tensor<TestType>({{-3, -1, -2}});
    CHECK(n.max().item() == TestType(-1));
    CHECK(n.argmax(1).to_vector() == std::vector<std::int64_t>{1});
  }
}

// ---- matmul -----------------------------------------------------------------------------

TEMPLATE_TEST_CASE("matmul of small hand-computed operands of rank 1 and 2", "[ops]", float, double) {
  const auto u = heed::tensor<TestType>({1, 2, 3});
  const auto v = heed::tensor<TestType>({4, 5, 6});
  const auto dot = heed::matmul(u, v);
  CHECK(dot.dim() == 0);
  CHECK(dot.item() == TestType(32));

  const auto m = heed::tensor<TestType>({{1, 2, 3}, {4, 5, 6}});
  const auto vm = heed::matmul(heed::tensor<TestType>({1, 2}), m);
  CHECK(vm.shape() == Shape{3});
  check_values(vm, {9, 12, 15});
  const auto mv = m.matmul(heed::tensor<TestType>({1, 0, -1}));
  CHECK(mv.shape() == Shape{2});
  check_values(mv, {-2, -2});

  const auto a = heed::tensor<TestType>({{1, 2}, {3, 4}});
  const auto b = heed::tensor<TestType>({{5, 6}, {7, 8}});
  check_values(heed::matmul(a, b), {19, 22, 43, 50});
  check_values(heed::matmul(b, a), {23, 34, 31, 46});
  const auto mt = heed::matmul(m, m.transpose(0, 1));
  CHECK(mt.shape() == Shape{2, 2});
  check_values(mt, {14, 32, 32, 77});
  check_values(heed::matmul(m, heed::eye<TestType>(3)), values_of(m));
}

TEST_CASE("bmm multiplies matching batches of matrices", "[ops]") {
  const auto a = heed::tensor<float>({{{1, 2}}, {{3, 4}}});       // (2, 1, 2)
  const auto b = heed::tensor<float>({{{1}, {1}}, {{2}, {-1}}});  // (2, 2, 1)
  const auto c = heed::bmm(a, b);
  CHECK(c.shape() == Shape{2, 1, 1});
  CHECK(c.to_vector() == std::vector<float>{3, 2});
  const auto d = heed::bmm(b, a);
  CHECK(d.shape() == Shape{2, 2, 2});
  CHECK(d.to_vector() == std::vector<float>{1, 2, 1, 2, 6, 8, -3, -4});
}

// ---- softmax ----------------------------------------------------------------------------

TEST_CASE("softmax of small rows by hand", "[ops]") {
  check_values(heed::softmax(heed::tensor<double>({0, std::log(3.0)}), 0), {0.25, 0.75});
  check_values(heed::tensor<float>({1, 2, 3}).softmax(0),
               {0.09003057317038046, 0.24472847105479767, 0.6652409557748219});
  check_values(heed::tensor<float>({{1, 1}, {0, 0}}).softmax(1), {0.5, 0.5, 0.5, 0.5});
  check_values(heed::tensor<double>({1, 2, 3}).log_softmax(0),
               {-2.4076059644443806, -1.4076059644443806, -0.4076059644443806});
  CHECK(heed::softmax(heed::scalar_tensor(5.f), 0).item() == 1.f);
}

TEMPLATE_TEST_CASE("exp underflows to exactly 0 at any position, minus infinity included", "[ops]", float, double) {
  using T = TestType;
  const heed::index_t n = 37;                                   // several packets and a scalar tail, at any ISA
  const T tiny = std::is_same_v<T, float> ? T(-200) : T(-800);  // exp underflows below the smallest subnormal
  for (heed::index_t at = 0; at < n; ++at) {
    INFO("-inf at " << at);
    std::vector<T> values(static_cast<std::size_t>(n), tiny);
    values[static_cast<std::size_t>(at)] = -std::numeric_limits<T>::infinity();
    values[static_cast<std::size_t>((at + 1) % n)] = T(1);
    const heed::Tensor<T> y = heed::exp(heed::Tensor<T>(values, {n}));
    for (heed::index_t j = 0; j < n; ++j) {
      if (j == (at + 1) % n)
        CHECK(y.at({j}) == Approx(std::exp(1.0)));
      else
        CHECK(y.at({j}) == T(0));
    }
  }
}

TEMPLATE_TEST_CASE("softmax weighs a -inf input exactly 0 at any position, over either dim", "[ops]", float, double) {
  // Eigen's vectorised exp gives a subnormal for -inf where its scalar tail gives 0.
  using T = TestType;
  const heed::index_t n = 37;  // several packets and a scalar tail, at any ISA
  for (heed::index_t at = 0; at < n; ++at) {
    INFO("-inf at " << at);
    std::vector<T> values(static_cast<std::size_t>(2 * n), T(0.25));
    values[static_cast<std::size_t>(at)] = -std::numeric_limits<T>::infinity();
    const heed::Tensor<T> rows(values, {2, n});
    const heed::Tensor<T> by_row = heed::softmax(rows, -1), by_column = heed::softmax(rows.transpose(0, 1), 0);
    CHECK(by_row.at({0, at}) == T(0));
    CHECK(by_column.at({at, 0}) == T(0));
    CHECK(by_row.at({0, (at + 1) % n}) == Approx(1.0 / static_cast<double>(n - 1)));
    CHECK(by_column.at({(at + 1) % n, 0}) == Approx(1.0 / static_cast<double>(n - 1)));
  }
}

TEMPLATE_TEST_CASE("softmax and log_softmax do not overflow on large inputs", "[ops]", float, double) {
  const auto x = heed::tensor<TestType>({{1000, 1000, 0}, {-1000, 0, 1000}});
  const auto rows = heed::softmax(x, 1);
  CHECK(all_finite(rows));
  check_values(rows, {0.5, 0.5, 0, 0, 0, 1});
  const auto cols = heed::softmax(x, 0);
  CHECK(all_finite(cols));
  check_values(cols, {1, 1, 0, 0, 0, 1});
  const auto log_rows = heed::log_softmax(x, -1);
  CHECK(all_finite(log_rows));
  check_values(log_rows, {-std::log(2.0), -std::log(2.0), -1000 - std::log(2.0), -2000, -1000, 0}, 1e-4);
  const auto log_cols = heed::log_softmax(x, 0);
  CHECK(all_finite(log_cols));
  check_values(log_cols, {0, 0, -1000, -2000, -1000, 0}, 1e-4);
}

// ---- layer_norm, embedding and gelu -------------------------------------------------------

namespace {

using heed_test::GradFn;
using heed_test::GradInputs;
using heed_test::leaf;

/// 0.5 · x · (1 + erf(x / √2)), in double.
double gelu_reference(double x) { return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))); }

}  // namespace

TEMPLATE_TEST_CASE("layer_norm of d2l's [[1, 2], [2, 3]] over the last dim is [[-1, 1], [-1, 1]]", "[ops]", float,
                   double) {
  const auto x = heed::tensor<TestType>({{1, 2}, {2, 3}});
  const double a = 0.5 / std::sqrt(0.25 + 1e-5);  // 0.99998: eps keeps it just below 1
  const auto y = heed::layer_norm(x, Shape{2});
  REQUIRE(y.shape() == Shape{2, 2});
  check_values(y, {-a, a, -a, a});
  check_values(y, {-1, 1, -1, 1}, 3e-5);
  CHECK(y.data()[1] < TestType(1));

  // weight scales and bias shifts each normalised column.
  const auto w = heed::tensor<TestType>({2, 3});
  const auto b = heed::tensor<TestType>({10, 20});
  check_values(heed::layer_norm(x, Shape{2}, w, b), {10 - 2 * a, 20 + 3 * a, 10 - 2 * a, 20 + 3 * a});
  check_values(heed::layer_norm(x, Shape{2}, w), {-2 * a, 3 * a, -2 * a, 3 * a});
  check_values(heed::layer_norm(x, Shape{2}, heed::Tensor<TestType>(), b), {10 - a, 20 + a, 10 - a, 20 + a});

  // eps is added to the biased variance: 0 gives exactly ±1; a large eps shrinks the result.
  check_values(heed::layer_norm(heed::tensor<TestType>({1, 3}), Shape{2}, {}, {}, 0.0), {-1, 1});
  check_values(heed::layer_norm(heed::tensor<TestType>({1, 3}), Shape{2}, {}, {}, 3.0), {-0.5, 0.5});

  // A constant row normalises to zeros (0 / √eps), not NaN.
  check_values(heed::layer_norm(heed::tensor<TestType>({{5, 5, 5}}), Shape{3}), {0, 0, 0});
}

TEMPLATE_TEST_CASE("layer_norm of [1e30, -1e30, 3] is [1.2247, -1.2247, 0], not zeros", "[ops]", float, double) {
  using T = TestType;
  // In float the squared deviations (1e60) overflow; the variance must not become inf.
  const double a = std::sqrt(1.5);  // 1e30 / √(⅔ · 1e60)
  auto x = heed::tensor<T>({1e30, -1e30, 3}).requires_grad_();
  const auto y = heed::layer_norm(x, Shape{3});
  CHECK(y.data()[0] == Approx(a).epsilon(1e-6));
  CHECK(y.data()[1] == Approx(-a).epsilon(1e-6));
  CHECK(std::abs(y.data()[2]) < 1e-29);
  // Backward from the same moments: dx = (1/σ)(g − mean(g) − x̂ · mean(g·x̂)) with
  // 1/σ = a · 1e-30, x̂ = (a, −a, 0) and, for g = (1, 2, 3), mean(g·x̂) = −a/3.
  y.backward(heed::tensor<T>({1, 2, 3}));
  const double r = a * 1e-30;
  const double expected[] = {r * (1 - 2 + a * a / 3), r * (2 - 2 - a * a / 3), r * (3 - 2)};
  for (index_t i = 0; i < 3; ++i) {
    INFO("element " << i);
    CHECK(x.grad().data()[i] == Approx(expected[i]).epsilon(1e-5));
  }
  // The same where the squares overflow double.
  const auto wide = heed::layer_norm(heed::tensor<double>({1e200, -1e200, 3}), Shape{3});
  CHECK(wide.data()[0] == Approx(a).epsilon(1e-12));
  CHECK(wide.data()[1] == Approx(-a).epsilon(1e-12));
  CHECK(std::abs(wide.data()[2]) < 1e-199);
  // NaN or inf in a row still gives NaN, not the scaled moments.
  for (const T bad : {std::numeric_limits<T>::quiet_NaN(), std::numeric_limits<T>::infinity()}) {
    const auto out = heed::layer_norm(heed::tensor<T>({{1e30, bad, 3}, {1, 2, 3}}), Shape{3});
    for (index_t i = 0; i < 3; ++i) CHECK(std::isnan(out.data()[i]));
    CHECK(out.data()[5] == Approx(std::sqrt(1.5) / std::sqrt(1 + 1.5e-5)).epsilon(1e-5));
  }
}

TEST_CASE("layer_norm gradients by hand", "[ops][gradcheck]") {
  const auto x = heed::tensor<double>({{1, 2}, {2, 3}}).requires_grad_();
  const auto w = heed::ones<double>({2}).requires_grad_();
  const auto b = heed::zeros<double>({2}).requires_grad_();
  heed::layer_norm(x, Shape{2}, w, b).sum().backward();
  const double a = 0.5 / std::sqrt(0.25 + 1e-5);
  check_values(x.grad(), {0, 0, 0, 0}, 1e-12);  // each output row sums to 0 whatever x is
  check_values(w.grad(), {-2 * a, 2 * a});      // Σ_rows x̂
  check_values(b.grad(), {2, 2});               // Σ_rows 1

  // Only the inputs that require grad get one.
  const auto x2 = heed::tensor<double>({{1, 2}, {2, 3}});
  const auto w2 = heed::ones<double>({2}).requires_grad_();
  const auto y = heed::layer_norm(x2, Shape{2}, w2, heed::zeros<double>({2}));
  CHECK(y.requires_grad());
  y.sum().backward();
  check_values(w2.grad(), {-2 * a, 2 * a});
  CHECK_FALSE(x2.grad().defined());
  CHECK_FALSE(heed::layer_norm(x2, Shape{2}).requires_grad());
  {
    heed::NoGradGuard no_grad;
    CHECK_FALSE(heed::layer_norm(x, Shape{2}, w, b).requires_grad());
  }
}

TEST_CASE("gradcheck of layer_norm when only some inputs require grad", "[ops][gradcheck]") {
  const GradFn last_dim = [](const GradInputs& in) { return heed::layer_norm(in[0], Shape{4}, in[1], in[2]); };
  heed::Generator gen(20);
  const auto x = heed::randn<double>({2, 3, 4}, gen), w = heed::randn<double>({4}, gen),
             b = heed::randn<double>({4}, gen);
  CHECK_GRADIENTS(last_dim, {x, leaf({4}, 21), leaf({4}, 22)});
  CHECK_GRADIENTS(last_dim, {leaf({2, 3, 4}, 23), w, b});
  CHECK_GRADIENTS(last_dim, {x, w, leaf({4}, 24)});
}

TEMPLATE_TEST_CASE("embedding picks rows of the table for indices of any shape", "[ops]", float, double) {
  const auto weight = heed::arange<TestType>(12).reshape({4, 3});
  const heed::IndexTensor indices({0, 2, 0, 3, 3, 1}, Shape{2, 3});
  const auto out = heed::embedding(weight, indices);
  REQUIRE(out.shape() == Shape{2, 3, 3});
  check_values(out, {0, 1, 2, 6, 7, 8, 0, 1, 2, 9, 10, 11, 9, 10, 11, 3, 4, 5});

  const auto from_vector = heed::embedding(weight, heed::IndexTensor({3, 0}, Shape{2}));
  REQUIRE(from_vector.shape() == Shape{2, 3});
  check_values(from_vector, {9, 10, 11, 0, 1, 2});

  const auto from_scalar = heed::embedding(weight, heed::IndexTensor({2}, Shape{}));
  REQUIRE(from_scalar.shape() == Shape{3});
  check_values(from_scalar, {6, 7, 8});

  const auto from_empty = heed::embedding(weight, heed::IndexTensor(std::vector<std::int64_t>{}, Shape{0}));
  CHECK(from_empty.shape() == Shape{0, 3});

  const auto deep = heed::embedding(weight, heed::IndexTensor({1, 1, 1, 1}, Shape{1, 2, 1, 2}));
  REQUIRE(deep.shape() == Shape{1, 2, 1, 2, 3});
  check_values(deep, {3, 4, 5, 3, 4, 5, 3, 4, 5, 3, 4, 5});

  // The output is a copy: writing to the table afterwards does not change it.
  CHECK_FALSE(out.shares_storage(weight));
}

TEST_CASE("embedding's backward adds the gradients of repeated indices", "[ops][gradcheck]") {
  auto weight = heed::arange<double>(12).reshape({4, 3}).requires_grad_();
  const heed::IndexTensor indices({0, 2, 0, 3, 3, 3}, Shape{2, 3});
  const auto out = heed::embedding(weight, indices);
  CHECK(out.grad_fn_name() == "EmbeddingBackward");
  out.backward(heed::arange<double>(18).reshape({2, 3, 3}));
  // row 0 from positions 0 and 2, row 1 never, row 2 from position 1, row 3 from 3, 4 and 5.
  CHECK(weight.grad().to_vector() ==
        std::vector<double>{0 + 6, 1 + 7, 2 + 8, 0, 0, 0, 3, 4, 5, 9 + 12 + 15, 10 + 13 + 16, 11 + 14 + 17});

  // Gradients accumulate over backward passes, counting each use of a row.
  weight.zero_grad();
  heed::embedding(weight, indices).sum().backward();
  heed::embedding(weight, heed::IndexTensor({1}, Shape{1})).sum().backward();
  CHECK(weight.grad().to_vector() == std::vector<double>{2, 2, 2, 1, 1, 1, 1, 1, 1, 3, 3, 3});

  // A table that does not require grad records nothing.
  CHECK_FALSE(heed::embedding(heed::ones<double>({4, 3}), indices).requires_grad());
}

TEST_CASE("embedding checks its table and indices", "[ops][errors]") {
  // A refused lookup records nothing and leaves the gradient alone.
  const auto table = heed::ones<double>({2, 2}).requires_grad_();
  CHECK_THROWS_AS(heed::embedding(table, heed::IndexTensor({2}, Shape{1})), heed::IndexError);
  CHECK_FALSE(table.grad().defined());
}

TEMPLATE_TEST_CASE("gelu is 0.5 x (1 + erf(x / sqrt 2)), exact as PyTorch's default", "[ops]", float, double) {
  const std::vector<double> points{-10, -3, -2, -1, -0.5, -1e-3, 0, 1e-3, 0.5, 1, 2, 3, 10, 100};
  std::vector<TestType> values(points.begin(), points.end());
  const heed::Tensor<TestType> x(values, Shape{static_cast<index_t>(values.size())});
  std::vector<double> expected;
  for (double p : points) expected.push_back(gelu_reference(p));
  const auto y = heed::gelu(x);
  REQUIRE(y.shape() == x.shape());
  // In float, 1 + erf(x/√2) cancels for negative x: an absolute error of a few ulps of |x|.
  const double margin = std::is_same_v<TestType, float> ? 1e-6 : 1e-14;
  check_values(y, expected, margin);
  check_values(x.gelu(), expected, margin);

  // Known values.
  const auto known = heed::tensor<TestType>({1, -1, 2, -2, 0});
  check_values(heed::gelu(known),
               {0.8413447460685429, -0.15865525393145707, 1.9544997361036416, -0.04550026389635842, 0}, margin);
  // Far out it is the identity on the right and 0 on the left, finite both ways.
  const auto big = heed::gelu(heed::tensor<TestType>({-1000, 1000}));
  CHECK(all_finite(big));
  check_values(big, {0, 1000}, 0.0);
  CHECK(heed::gelu(heed::tensor<TestType>({{0.5, -0.5}, {1, -1}})).shape() == Shape{2, 2});
}

TEST_CASE("gelu's gradient is Phi(x) + x phi(x)", "[ops]") {
  const auto x = heed::tensor<double>({-1, 0, 1, 2}).requires_grad_();
  const auto y = x.gelu();
  CHECK(y.grad_fn_name() == "GeluBackward");
  y.sum().backward();
  check_values(x.grad(), {-0.08331547058768629, 0.5, 1.0833154705876864, 1.085231801078197}, 1e-12);
}
