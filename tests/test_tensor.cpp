// Tensor<T>: creation, handle semantics, shape ops, element access, printing.
#include <catch2/catch.hpp>
#include <heed/heed.hpp>

#include "check.hpp"

#include <cmath>
#include <cstdint>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

namespace {

using heed::index_t;
using heed::Shape;
using heed_test::check_values;

template <typename T>
std::string repr(const heed::Tensor<T>& x) {
  std::ostringstream os;
  os << x;
  return os.str();
}

/// 0, 1, …, 23 as a (2, 3, 4) float tensor: element (i, j, k) is 12 i + 4 j + k.
heed::Tensor<float> iota234() { return heed::arange(24.f).reshape({2, 3, 4}); }

}  // namespace

// ---- creation ---------------------------------------------------------------------------

TEMPLATE_TEST_CASE("zeros, ones and full fill every element with one value", "[tensor]", float, double) {
  const auto z = heed::zeros<TestType>({2, 3});
  CHECK(z.shape() == Shape{2, 3});
  check_values(z, {0, 0, 0, 0, 0, 0});
  const auto o = heed::ones<TestType>({4});
  CHECK(o.shape() == Shape{4});
  check_values(o, {1, 1, 1, 1});
  const auto f = heed::full<TestType>({1, 2, 1}, TestType(2.5));
  CHECK(f.shape() == Shape{1, 2, 1});
  check_values(f, {2.5, 2.5});
  const auto s = heed::full<TestType>({}, TestType(-1));
  CHECK(s.dim() == 0);
  CHECK(s.item() == TestType(-1));
}

TEST_CASE("zeros without a type argument makes float tensors", "[tensor]") {
  auto z = heed::zeros({2, 2});
  STATIC_REQUIRE(std::is_same_v<decltype(z), heed::Tensor<float>>);
  CHECK(std::string(z.dtype()) == "float32");
}

TEMPLATE_TEST_CASE("arange counts from start by step and stops before end", "[tensor]", float, double) {
  check_values(heed::arange<TestType>(5), {0, 1, 2, 3, 4});
  check_values(heed::arange<TestType>(1, 2, 0.25), {1, 1.25, 1.5, 1.75});
  check_values(heed::arange<TestType>(5, 0, -2), {5, 3, 1});
  check_values(heed::arange<TestType>(2, 5, 1.5), {2, 3.5});

  const auto tenths = heed::arange<TestType>(0, 1, TestType(0.1));
  REQUIRE(tenths.shape() == Shape{10});
  for (index_t i = 0; i < 10; ++i) CHECK(tenths.at({i}) == Approx(0.1 * static_cast<double>(i)).margin(1e-6));

  CHECK(heed::arange<TestType>(0, 0.3, 0.1).numel() == 3);  // bounds in double, as PyTorch: not 4
  CHECK(heed::arange<TestType>(3, 3).numel() == 0);
}

TEST_CASE("eye is the identity, square or rectangular", "[tensor]") {
  const auto i3 = heed::eye(3);
  CHECK(i3.shape() == Shape{3, 3});
  check_values(i3, {1, 0, 0, 0, 1, 0, 0, 0, 1});
  const auto wide = heed::eye<double>(2, 3);
  CHECK(wide.shape() == Shape{2, 3});
  check_values(wide, {1, 0, 0, 0, 1, 0});
  const auto tall = heed::eye(3, 2);
  CHECK(tall.shape() == Shape{3, 2});
  check_values(tall, {1, 0, 0, 1, 0, 0});
}

TEST_CASE("tensor() reads each pair of braces as one dim", "[tensor]") {
  SECTION("depth 1") {
    const auto x = heed::tensor<float>({1, 2, 3});
    CHECK(x.shape() == Shape{3});
    check_values(x, {1, 2, 3});
  }
  SECTION("depth 2") {
    const auto x = heed::tensor<float>({{1, 2, 3}, {4, 5, 6}});
    CHECK(x.shape() == Shape{2, 3});
    check_values(x, {1, 2, 3, 4, 5, 6});
  }
  SECTION("a column: {{1}, {2}} is 2 x 1") {
    const auto x = heed::tensor<float>({{1}, {2}});
    CHECK(x.shape() == Shape{2, 1});
    check_values(x, {1, 2});
  }
  SECTION("a single row: {{1, 2}} is 1 x 2") {
    CHECK(heed::tensor<float>({{1, 2}}).shape() == Shape{1, 2});
    CHECK(heed::tensor<float>({1}).shape() == Shape{1});
  }
  SECTION("depth 3") {
    const auto x = heed::tensor<double>({{{1, 2}, {3, 4}}, {{5, 6}, {7, 8}}, {{9, 10}, {11, 12}}});
    CHECK(x.shape() == Shape{3, 2, 2});
    CHECK(x.at({2, 0, 1}) == 10.0);
    CHECK(x.at({1, 1, 0}) == 7.0);
  }
  SECTION("depth 4") {
    const auto x = heed::tensor<float>({{{{1, 2, 3}}, {{4, 5, 6}}}});
    CHECK(x.shape() == Shape{1, 2, 1, 3});
    check_values(x, {1, 2, 3, 4, 5, 6});
    CHECK(x.at({0, 1, 0, 2}) == 6.f);
  }
  SECTION("a bare value is rank 0") {
    const auto x = heed::tensor<float>(2.5f);
    CHECK(x.dim() == 0);
    CHECK(x.shape() == Shape{});
    CHECK(x.numel() == 1);
    CHECK(x.item() == 2.5f);
    CHECK(heed::scalar_tensor(4.0).item() == 4.0);
  }
  SECTION("integer and bool element types") {
    const auto i = heed::tensor<std::int64_t>({{1, -2}, {3, 4}});
    CHECK(i.shape() == Shape{2, 2});
    CHECK(i.to_vector() == std::vector<std::int64_t>{1, -2, 3, 4});
    const auto b = heed::tensor<bool>({true, false});
    CHECK(b.to_vector() == std::vector<bool>{true, false});
  }
}

TEST_CASE("a tensor built from a vector and a shape holds the values row-major", "[tensor]") {
  const heed::Tensor<float> x({1, 2, 3, 4, 5, 6}, {3, 2});
  CHECK(x.shape() == Shape{3, 2});
  CHECK(x.at({0, 1}) == 2.f);
  CHECK(x.at({2, 0}) == 5.f);
  const heed::Tensor<double> s({7.0}, Shape{});
  CHECK(s.dim() == 0);
  CHECK(s.item() == 7.0);
  const heed::Tensor<float> empty(std::vector<float>{}, {0, 3});
  CHECK(empty.numel() == 0);
  CHECK(empty.shape() == Shape{0, 3});
}

TEMPLATE_TEST_CASE("zeros_like, ones_like and full_like copy the shape, not the values", "[tensor]", float, double) {
  const auto x = heed::arange<TestType>(6).reshape({3, 2});
  const auto z = heed::zeros_like(x);
  const auto o = heed::ones_like(x);
  const auto f = heed::full_like(x, TestType(9));
  CHECK(z.shape() == x.shape());
  CHECK(o.shape() == x.shape());
  CHECK_FALSE(z.shares_storage(x));
  check_values(z, {0, 0, 0, 0, 0, 0});
  check_values(o, {1, 1, 1, 1, 1, 1});
  check_values(f, {9, 9, 9, 9, 9, 9});
}

// ---- random -----------------------------------------------------------------------------

TEST_CASE("random tensors repeat for a seed and differ between seeds", "[tensor]") {
  heed::Generator a(42), b(42), c(43);
  SECTION("randn") {
    const auto x = heed::randn<float>({64}, a), y = heed::randn<float>({64}, b), z = heed::randn<float>({64}, c);
    CHECK(x.to_vector() == y.to_vector());
    CHECK(x.to_vector() != z.to_vector());
  }
  SECTION("rand") {
    const auto x = heed::rand<double>({8, 8}, a), y = heed::rand<double>({8, 8}, b), z = heed::rand<double>({8, 8}, c);
    CHECK(x.to_vector() == y.to_vector());
    CHECK(x.to_vector() != z.to_vector());
  }
  SECTION("randint") {
    const auto x = heed::randint(0, 1000, {64}, a), y = heed::randint(0, 1000, {64}, b);
    const auto z = heed::randint(0, 1000, {64}, c);
    CHECK(x.to_vector() == y.to_vector());
    CHECK(x.to_vector() != z.to_vector());
  }
  SECTION("one generator moves on, and manual_seed rewinds it") {
    const auto first = heed::randn<float>({16}, a);
    const auto second = heed::randn<float>({16}, a);
    CHECK(first.to_vector() != second.to_vector());
    a.manual_seed(42);
    CHECK(a.initial_seed() == 42u);
    CHECK(heed::randn<float>({16}, a).to_vector() == first.to_vector());
  }
}

TEST_CASE("rand and uniform stay in their half-open range", "[tensor]") {
  heed::Generator gen(7);
  const auto u = heed::rand<float>({20000}, gen);
  double sum = 0;
  for (float v : u.to_vector()) {
    REQUIRE(v >= 0.f);
    REQUIRE(v < 1.f);
    sum += v;
  }
  CHECK(sum / 20000 == Approx(0.5).margin(0.02));

  const auto w = heed::uniform<double>({5000}, -3.0, -1.0, gen);
  double lo = 0, hi = -10;
  for (double v : w.to_vector()) {
    REQUIRE(v >= -3.0);
    REQUIRE(v < -1.0);
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  CHECK(lo < -2.9);  // the whole range is used
  CHECK(hi > -1.1);

  // Draws within 2^-25 of 1 round to 1.0f; with seed 1, draw 517518 is one of them.
  heed::Generator rounding(1);
  CHECK(heed::rand<float>({517519}, rounding).data()[517518] == std::nextafter(1.f, 0.f));
}

TEST_CASE("normal samples have the requested mean and standard deviation", "[tensor]") {
  heed::Generator gen(2024);
  const auto x = heed::normal<double>(2.0, 0.5, {20000}, gen);
  double sum = 0, sq = 0;
  for (double v : x.to_vector()) sum += v;
  const double mean = sum / 20000;
  for (double v : x.to_vector()) sq += (v - mean) * (v - mean);
  const double stddev = std::sqrt(sq / 19999);
  CHECK(mean == Approx(2.0).margin(0.02));
  CHECK(stddev == Approx(0.5).margin(0.02));

  const auto z = heed::randn<float>({20000}, gen);
  CHECK(static_cast<double>(z.mean().item()) == Approx(0.0).margin(0.03));
  CHECK(static_cast<double>((z * z).mean().item()) == Approx(1.0).margin(0.05));
}

TEST_CASE("randint draws every integer from low up to high, exclusive, and nothing else", "[tensor]") {
  heed::Generator gen(3);
  const auto x = heed::randint(-2, 3, {2000}, gen);
  CHECK(x.shape() == Shape{2000});
  std::vector<int> counts(5, 0);
  for (std::int64_t v : x.to_vector()) {
    REQUIRE(v >= -2);
    REQUIRE(v < 3);
    ++counts[static_cast<std::size_t>(v + 2)];
  }
  for (int c : counts) CHECK(c > 300);  // about 400 each
}

// ---- handle semantics -------------------------------------------------------------------

TEST_CASE("reshape is a view and clone is a copy", "[tensor]") {
  auto x = heed::arange(6.f);
  auto view = x.reshape({2, -1});
  CHECK(view.shape() == heed::Shape{2, 3});
  CHECK(view.shares_storage(x));
  auto copy = x.clone();
  CHECK_FALSE(copy.shares_storage(x));
  x.at({4}) = 40.f;
  CHECK(view.at({1, 1}) == 40.f);
  CHECK(copy.at({4}) == 4.f);
}

TEST_CASE("copying a tensor shares its data", "[tensor]") {
  auto x = heed::zeros({3});
  auto y = x;  // NOLINT(performance-unnecessary-copy-initialization): the copy is the point
  CHECK(y.is_same(x));
  CHECK(y.shares_storage(x));
  y.at({1}) = 5.f;
  CHECK(x.at({1}) == 5.f);

  auto c = x.clone();
  CHECK_FALSE(c.is_same(x));
  c.at({0}) = -1.f;
  CHECK(x.at({0}) == 0.f);
  check_values(c, {-1, 5, 0});

  heed::Tensor<float> undefined;
  CHECK_FALSE(undefined.defined());
  CHECK(x.defined());
  CHECK_FALSE(undefined.shares_storage(x));
}

TEST_CASE("detach shares storage but leaves the graph", "[tensor]") {
  auto w = heed::ones<double>({2, 2});
  w.requires_grad_();
  const auto y = w * 3.0;
  const auto d = y.detach();
  CHECK(y.requires_grad());
  CHECK_FALSE(d.requires_grad());
  CHECK(d.is_leaf());
  CHECK(d.shares_storage(y));
  CHECK_FALSE(d.is_same(y));
  CHECK(w.detach().shares_storage(w));
  check_values(d, {3, 3, 3, 3});
}

// ---- shape queries ----------------------------------------------------------------------

TEST_CASE("shape queries: dim, size, numel", "[tensor]") {
  const auto x = heed::zeros({2, 3, 4});
  CHECK(x.dim() == 3);
  CHECK(x.size(0) == 2);
  CHECK(x.size(2) == 4);
  CHECK(x.size(-1) == 4);
  CHECK(x.size(-3) == 2);
  CHECK(x.numel() == 24);
  CHECK(x.shape()[-2] == 3);
  CHECK(x.shape().rank() == 3);
  CHECK(x.shape().to_vector() == std::vector<index_t>{2, 3, 4});

  const auto s = heed::scalar_tensor(1.f);
  CHECK(s.dim() == 0);
  CHECK(s.numel() == 1);
  CHECK(heed::zeros({3, 0}).numel() == 0);
}

TEST_CASE("a Shape prints as PyTorch's Size and to_string gives a tuple", "[tensor]") {
  std::ostringstream os;
  os << Shape{2, 3};
  CHECK(os.str() == "Size([2, 3])");
  CHECK(heed::to_string(Shape{2, 3}) == "(2, 3)");
  CHECK(heed::to_string(Shape{5}) == "(5)");
  CHECK(heed::to_string(Shape{}) == "()");
  std::ostringstream scalar;
  scalar << Shape{};
  CHECK(scalar.str() == "Size([])");
  CHECK(Shape{}.numel() == 1);
  CHECK(Shape{2, 0, 3}.numel() == 0);
  CHECK(Shape{2, 3} != Shape{3, 2});
  CHECK(Shape{2, 3} != Shape{2, 3, 1});
}

// ---- shape ops --------------------------------------------------------------------------

TEST_CASE("reshape infers one -1 and keeps the element order", "[tensor]") {
  const auto x = iota234();
  const auto a = x.reshape({-1, 4});
  CHECK(a.shape() == Shape{6, 4});
  CHECK(a.at({5, 3}) == 23.f);
  CHECK(a.at({1, 0}) == 4.f);
  const auto b = x.reshape({4, -1});
  CHECK(b.shape() == Shape{4, 6});
  CHECK(b.at({1, 0}) == 6.f);
  CHECK(x.reshape({24}).to_vector() == x.to_vector());
  CHECK(x.view({2, 12}).shape() == Shape{2, 12});
  CHECK(heed::reshape(x, {3, 2, -1}).shape() == Shape{3, 2, 4});
  CHECK(heed::scalar_tensor(1.f).reshape({1, 1}).shape() == Shape{1, 1});
  CHECK(heed::ones({1, 1}).reshape({}).dim() == 0);
}

TEST_CASE("flatten merges a range of dims", "[tensor]") {
  const auto x = iota234();
  CHECK(x.flatten().shape() == Shape{24});
  CHECK(x.flatten(1).shape() == Shape{2, 12});
  CHECK(x.flatten(0, 1).shape() == Shape{6, 4});
  CHECK(x.flatten(-2, -1).shape() == Shape{2, 12});
  CHECK(x.flatten(1, 1).shape() == Shape{2, 3, 4});
  CHECK(x.flatten().to_vector() == x.to_vector());
  CHECK(x.flatten().shares_storage(x));
  CHECK(heed::scalar_tensor(3.f).flatten().shape() == Shape{1});
}

TEST_CASE("permute of a 3-D tensor moves every element to its permuted index", "[tensor]") {
  const auto x = iota234();
  const auto p = x.permute({2, 0, 1});
  REQUIRE(p.shape() == Shape{4, 2, 3});
  CHECK_FALSE(p.shares_storage(x));
  for (index_t i = 0; i < 2; ++i)
    for (index_t j = 0; j < 3; ++j)
      for (index_t k = 0; k < 4; ++k) REQUIRE(p.at({k, i, j}) == x.at({i, j, k}));
  CHECK(p.to_vector()[0] == 0.f);
  CHECK(p.to_vector()[1] == 4.f);   // (k=0, i=0, j=1)
  CHECK(p.to_vector()[3] == 12.f);  // (k=0, i=1, j=0)

  const auto q = x.permute({-1, 1, 0});
  REQUIRE(q.shape() == Shape{4, 3, 2});
  CHECK(q.at({3, 2, 1}) == 23.f);
  CHECK(q.at({1, 2, 0}) == 9.f);
  CHECK(x.permute({0, 1, 2}).to_vector() == x.to_vector());
}

TEST_CASE("transpose swaps two dims", "[tensor]") {
  const auto m = heed::tensor<float>({{1, 2, 3}, {4, 5, 6}});
  const auto t = m.transpose(0, 1);
  CHECK(t.shape() == Shape{3, 2});
  check_values(t, {1, 4, 2, 5, 3, 6});
  CHECK(m.transpose(-1, -2).to_vector() == t.to_vector());

  const auto x = iota234();
  const auto y = x.transpose(0, 2);
  REQUIRE(y.shape() == Shape{4, 3, 2});
  for (index_t i = 0; i < 2; ++i)
    for (index_t j = 0; j < 3; ++j)
      for (index_t k = 0; k < 4; ++k) REQUIRE(y.at({k, j, i}) == x.at({i, j, k}));
  CHECK(x.transpose(1, 1).to_vector() == x.to_vector());
}

TEST_CASE("unsqueeze adds a dim of 1 and squeeze removes dims of 1", "[tensor]") {
  const auto x = iota234();
  CHECK(x.unsqueeze(0).shape() == Shape{1, 2, 3, 4});
  CHECK(x.unsqueeze(1).shape() == Shape{2, 1, 3, 4});
  CHECK(x.unsqueeze(3).shape() == Shape{2, 3, 4, 1});
  CHECK(x.unsqueeze(-1).shape() == Shape{2, 3, 4, 1});
  CHECK(x.unsqueeze(-4).shape() == Shape{1, 2, 3, 4});
  CHECK(x.unsqueeze(1).to_vector() == x.to_vector());
  CHECK(heed::scalar_tensor(1.f).unsqueeze(0).shape() == Shape{1});

  const auto y = heed::zeros({1, 2, 1, 3});
  CHECK(y.squeeze().shape() == Shape{2, 3});
  CHECK(y.squeeze(0).shape() == Shape{2, 1, 3});
  CHECK(y.squeeze(2).shape() == Shape{1, 2, 3});
  CHECK(y.squeeze(-2).shape() == Shape{1, 2, 3});
  CHECK(y.squeeze(1).shape() == Shape{1, 2, 1, 3});  // size 2: a no-op, as in PyTorch
  CHECK(y.squeeze(-1).shape() == Shape{1, 2, 1, 3});
  CHECK(y.squeeze(0).shares_storage(y));
  CHECK(heed::ones({1, 1}).squeeze().dim() == 0);
}

TEST_CASE("narrow keeps length elements from start along a dim", "[tensor]") {
  const auto x = iota234();
  const auto n = x.narrow(1, 1, 2);
  REQUIRE(n.shape() == Shape{2, 2, 4});
  for (index_t i = 0; i < 2; ++i)
    for (index_t j = 0; j < 2; ++j)
      for (index_t k = 0; k < 4; ++k) REQUIRE(n.at({i, j, k}) == x.at({i, j + 1, k}));
  check_values(x.narrow(2, -2, 2).select(0, 0).select(0, 0), {2, 3});
  check_values(x.narrow(-1, 0, 1).flatten(), {0, 4, 8, 12, 16, 20});
  CHECK(x.narrow(0, 2, 0).numel() == 0);
}

TEST_CASE("slice takes a Python-style range with a step", "[tensor]") {
  const auto v = heed::arange(10.f);
  check_values(v.slice(0, 1, 8, 3), {1, 4, 7});
  check_values(v.slice(0, 2, 5), {2, 3, 4});
  check_values(v.slice(0, -3, 100), {7, 8, 9});  // negative start, end clamped
  check_values(v.slice(0, -100, 2), {0, 1});     // start clamped
  check_values(v.slice(0, 0, -7), {0, 1, 2});    // negative end
  check_values(v.slice(0, 0, 10, 4), {0, 4, 8});
  CHECK(v.slice(0, 5, 2).numel() == 0);  // end before start: empty
  CHECK(v.slice(0, 20, 30).numel() == 0);

  const auto m = heed::arange(12.f).reshape({3, 4});
  const auto cols = m.slice(1, 1, 4, 2);
  CHECK(cols.shape() == Shape{3, 2});
  check_values(cols, {1, 3, 5, 7, 9, 11});
  const auto rows = m.slice(-2, 1, 3);
  CHECK(rows.shape() == Shape{2, 4});
  check_values(rows, {4, 5, 6, 7, 8, 9, 10, 11});
}

TEST_CASE("select picks one index and drops the dim", "[tensor]") {
  const auto x = iota234();
  const auto s0 = x.select(0, -1);
  CHECK(s0.shape() == Shape{3, 4});
  check_values(s0, {12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23});
  const auto s1 = x.select(1, 1);
  CHECK(s1.shape() == Shape{2, 4});
  check_values(s1, {4, 5, 6, 7, 16, 17, 18, 19});
  const auto s2 = x.select(-1, -1);
  CHECK(s2.shape() == Shape{2, 3});
  check_values(s2, {3, 7, 11, 15, 19, 23});
  const auto e = heed::arange(3.f).select(0, 2);
  CHECK(e.dim() == 0);
  CHECK(e.item() == 2.f);
}

TEST_CASE("index_select gathers rows by index, repeats allowed", "[tensor]") {
  const auto m = heed::tensor<float>({{1, 2}, {3, 4}, {5, 6}});
  const auto rows = m.index_select(0, heed::tensor<std::int64_t>({2, 0, 2, 2}));
  CHECK(rows.shape() == Shape{4, 2});
  check_values(rows, {5, 6, 1, 2, 5, 6, 5, 6});
  const auto cols = m.index_select(1, heed::tensor<std::int64_t>({1, 1, 0}));
  CHECK(cols.shape() == Shape{3, 3});
  check_values(cols, {2, 2, 1, 4, 4, 3, 6, 6, 5});
  const auto mid = iota234().index_select(-2, heed::tensor<std::int64_t>({2}));
  CHECK(mid.shape() == Shape{2, 1, 4});
  check_values(mid, {8, 9, 10, 11, 20, 21, 22, 23});
  CHECK(m.index_select(0, heed::Tensor<std::int64_t>(std::vector<std::int64_t>{}, {0})).shape() == Shape{0, 2});
}

TEST_CASE("cat joins tensors along an existing dim", "[tensor]") {
  const auto a = heed::tensor<float>({{1, 2}, {3, 4}});
  const auto b = heed::tensor<float>({{5}, {6}});
  const auto c = heed::tensor<float>({{7, 8}});
  const auto rows = heed::cat({a, c}, 0);
  CHECK(rows.shape() == Shape{3, 2});
  check_values(rows, {1, 2, 3, 4, 7, 8});
  const auto cols = heed::cat({a, b}, 1);
  CHECK(cols.shape() == Shape{2, 3});
  check_values(cols, {1, 2, 5, 3, 4, 6});
  CHECK(heed::cat({a, b, b}, -1).to_vector() == std::vector<float>{1, 2, 5, 5, 3, 4, 6, 6});
  CHECK(heed::cat({a}).to_vector() == a.to_vector());

  const auto x = iota234();
  const auto mid = heed::cat({x, x.narrow(1, 0, 1)}, 1);
  REQUIRE(mid.shape() == Shape{2, 4, 4});
  CHECK(mid.at({1, 3, 2}) == x.at({1, 0, 2}));
  CHECK(mid.at({1, 2, 2}) == x.at({1, 2, 2}));
}

TEST_CASE("stack joins tensors along a new dim", "[tensor]") {
  const auto a = heed::tensor<float>({1, 2, 3});
  const auto b = heed::tensor<float>({4, 5, 6});
  const auto first = heed::stack({a, b}, 0);
  CHECK(first.shape() == Shape{2, 3});
  check_values(first, {1, 2, 3, 4, 5, 6});
  const auto last = heed::stack({a, b}, 1);
  CHECK(last.shape() == Shape{3, 2});
  check_values(last, {1, 4, 2, 5, 3, 6});
  CHECK(heed::stack({a, b}, -1).to_vector() == last.to_vector());

  const auto m = heed::tensor<float>({{1, 2}, {3, 4}});
  const auto deep = heed::stack({m, heed::neg(m), m}, -1);
  CHECK(deep.shape() == Shape{2, 2, 3});
  check_values(deep, {1, -1, 1, 2, -2, 2, 3, -3, 3, 4, -4, 4});
  const auto scalars = heed::stack({heed::scalar_tensor(1.f), heed::scalar_tensor(2.f)});
  CHECK(scalars.shape() == Shape{2});
}

TEST_CASE("repeat tiles a tensor, adding leading dims like PyTorch", "[tensor]") {
  const auto v = heed::tensor<float>({1, 2});
  check_values(v.repeat({3}), {1, 2, 1, 2, 1, 2});
  const auto tiled = v.repeat({3, 2});
  CHECK(tiled.shape() == Shape{3, 4});
  check_values(tiled, {1, 2, 1, 2, 1, 2, 1, 2, 1, 2, 1, 2});
  CHECK(v.repeat({2, 1, 1}).shape() == Shape{2, 1, 2});

  const auto m = heed::tensor<float>({{1, 2}, {3, 4}});
  const auto down = m.repeat({2, 1});
  CHECK(down.shape() == Shape{4, 2});
  check_values(down, {1, 2, 3, 4, 1, 2, 3, 4});
  const auto across = m.repeat({1, 2});
  CHECK(across.shape() == Shape{2, 4});
  check_values(across, {1, 2, 1, 2, 3, 4, 3, 4});
  CHECK(m.repeat({1, 1}).to_vector() == m.to_vector());
  CHECK(m.repeat({0, 1}).numel() == 0);
}

TEST_CASE("repeat_interleave repeats each element in place", "[tensor]") {
  check_values(heed::tensor<float>({1, 2, 3}).repeat_interleave(2, 0), {1, 1, 2, 2, 3, 3});
  const auto m = heed::tensor<float>({{1, 2}, {3, 4}});
  const auto rows = m.repeat_interleave(2, 0);
  CHECK(rows.shape() == Shape{4, 2});
  check_values(rows, {1, 2, 1, 2, 3, 4, 3, 4});
  const auto cols = m.repeat_interleave(3, -1);
  CHECK(cols.shape() == Shape{2, 6});
  check_values(cols, {1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 4});
}

TEST_CASE("expand stretches dims of 1 and adds leading dims", "[tensor]") {
  const auto col = heed::tensor<float>({{1}, {2}});
  const auto wide = col.expand({2, 3});
  CHECK(wide.shape() == Shape{2, 3});
  check_values(wide, {1, 1, 1, 2, 2, 2});
  const auto row = heed::tensor<float>({1, 2, 3});
  check_values(row.expand({2, 3}), {1, 2, 3, 1, 2, 3});
  const auto lead = col.expand({2, 2, 2});
  CHECK(lead.shape() == Shape{2, 2, 2});
  check_values(lead, {1, 1, 2, 2, 1, 1, 2, 2});
  check_values(heed::scalar_tensor(5.f).expand({3}), {5, 5, 5});
}

// ---- element access ---------------------------------------------------------------------

TEST_CASE("at reads and writes elements, with negative indices from the end", "[tensor]") {
  auto x = iota234();
  CHECK(x.at({1, 2, 3}) == 23.f);
  CHECK(x.at({-1, -1, -1}) == 23.f);
  CHECK(x.at({0, -3, 1}) == 1.f);
  CHECK(x.at({-2, 1, -4}) == 4.f);
  x.at({-1, 0, 0}) = 100.f;
  CHECK(x.at({1, 0, 0}) == 100.f);
  CHECK(x.to_vector()[12] == 100.f);
  x.at({0, 0, 0}) += 0.5f;
  CHECK(x.data()[0] == 0.5f);

  auto s = heed::scalar_tensor(2.0);
  CHECK(s.at({}) == 2.0);
  s.at({}) = 3.0;
  CHECK(s.item() == 3.0);
  CHECK(heed::ones({1, 1, 1}).item() == 1.f);
}

TEST_CASE("to_vector copies and to<U> converts the element type", "[tensor]") {
  auto x = heed::tensor<float>({{1.5f, -2.7f}, {3.f, 0.25f}});
  auto v = x.to_vector();
  CHECK(v == std::vector<float>{1.5f, -2.7f, 3.f, 0.25f});
  v[0] = 9.f;
  CHECK(x.at({0, 0}) == 1.5f);

  const auto d = x.to<double>();
  STATIC_REQUIRE(std::is_same_v<decltype(d), const heed::Tensor<double>>);
  CHECK(d.shape() == Shape{2, 2});
  check_values(d, {1.5, -2.7, 3.0, 0.25});
  CHECK(d.at({0, 1}) == static_cast<double>(-2.7f));

  const auto i = x.to<std::int64_t>();  // truncation toward zero, as PyTorch
  CHECK(i.to_vector() == std::vector<std::int64_t>{1, -2, 3, 0});
  CHECK(i.to<float>().to_vector() == std::vector<float>{1, -2, 3, 0});
  const auto b = heed::tensor<std::int64_t>({0, 3, -1}).to<bool>();
  CHECK(b.to_vector() == std::vector<bool>{false, true, true});
}

TEST_CASE("bool and int64 tensors reshape and permute", "[tensor]") {
  const heed::Tensor<bool> b({true, false, true, false, true, true}, {2, 3});
  const auto bt = b.permute({1, 0});
  CHECK(bt.shape() == Shape{3, 2});
  CHECK(bt.to_vector() == std::vector<bool>{true, false, false, true, true, true});
  CHECK(b.reshape({3, -1}).shape() == Shape{3, 2});
  CHECK(b.reshape({3, -1}).shares_storage(b));
  CHECK(b.transpose(0, 1).at({2, 1}) == true);

  const auto i = heed::arange<std::int64_t>(0, 6).reshape({2, 3});
  CHECK(i.shape() == Shape{2, 3});
  CHECK(i.permute({1, 0}).to_vector() == std::vector<std::int64_t>{0, 3, 1, 4, 2, 5});
  CHECK(i.select(1, -1).to_vector() == std::vector<std::int64_t>{2, 5});
  CHECK(i.repeat({1, 2}).to_vector() == std::vector<std::int64_t>{0, 1, 2, 0, 1, 2, 3, 4, 5, 3, 4, 5});
  CHECK(heed::cat({i, i}, 0).shape() == Shape{4, 3});
}

// ---- printing ---------------------------------------------------------------------------

TEST_CASE("tensors print exactly as PyTorch's repr", "[tensor]") {
  SECTION("whole-valued floats") { CHECK(repr(heed::tensor<float>({1, 2, 3})) == "tensor([1., 2., 3.])"); }
  SECTION("a matrix with four decimals") {
    CHECK(repr(heed::tensor<float>({{0.1f, 0.2f}, {0.3f, 0.4f}})) ==
          "tensor([[0.1000, 0.2000],\n"
          "        [0.3000, 0.4000]])");
  }
  SECTION("negative values pad to a common width") {
    CHECK(repr(heed::tensor<float>({-1.5f, 2.25f, 10.f})) == "tensor([-1.5000,  2.2500, 10.0000])");
    CHECK(repr(heed::tensor<float>({-1, 0, 10})) == "tensor([-1.,  0., 10.])");
  }
  SECTION("rank 0") {
    CHECK(repr(heed::scalar_tensor(3.5f)) == "tensor(3.5000)");
    CHECK(repr(heed::scalar_tensor(2.f)) == "tensor(2.)");
  }
  SECTION("float64 names its dtype") {
    CHECK(repr(heed::tensor<double>({1.5, 2})) == "tensor([1.5000, 2.0000], dtype=float64)");
  }
  SECTION("a marked leaf and a recorded result") {
    auto x = heed::tensor<float>({1, 2});
    x.requires_grad_();
    CHECK(repr(x) == "tensor([1., 2.], requires_grad=True)");
    CHECK(repr(x * 2.0) == "tensor([2., 4.], grad_fn=<MulBackward>)");
    auto w = heed::tensor<double>({0.5});
    w.requires_grad_();
    CHECK(repr(w) == "tensor([0.5000], dtype=float64, requires_grad=True)");
  }
  SECTION("bool") { CHECK(repr(heed::tensor<bool>({true, false})) == "tensor([ True, False])"); }
  SECTION("int64") {
    CHECK(repr(heed::tensor<std::int64_t>({1, 2, 3})) == "tensor([1, 2, 3])");
    CHECK(repr(heed::tensor<std::int64_t>({{-10, 2}, {3, 4}})) ==
          "tensor([[-10,   2],\n"
          "        [  3,   4]])");
  }
  SECTION("scientific notation when magnitudes span more than 1000x") {
    CHECK(repr(heed::tensor<float>({1e-5f, 1.f})) == "tensor([1.0000e-05, 1.0000e+00])");
    CHECK(repr(heed::tensor<float>({1.f, 1e4f})) == "tensor([1.0000e+00, 1.0000e+04])");
    CHECK(repr(heed::tensor<float>({1.f, 1000.f})) == "tensor([   1., 1000.])");
  }
  SECTION("a 3-D tensor separates its blocks by a blank line") {
    CHECK(repr(heed::arange(8.f).reshape({2, 2, 2})) ==
          "tensor([[[0., 1.],\n"
          "         [2., 3.]],\n"
          "\n"
          "        [[4., 5.],\n"
          "         [6., 7.]]])");
  }
  SECTION("long rows wrap at 80 columns") {
    CHECK(repr(heed::ones({20})) ==
          "tensor([1., 1., 1., 1., 1., 1., 1., 1., 1., 1., 1., 1., 1., 1., 1., 1., 1., 1.,\n"
          "        1., 1.])");
  }
  SECTION("more than 1000 elements are summarised with 3 edge items") {
    CHECK(repr(heed::arange(2000.f)) ==
          "tensor([0.0000e+00, 1.0000e+00, 2.0000e+00,  ..., 1.9970e+03, 1.9980e+03,\n"
          "        1.9990e+03])");
    CHECK(repr(heed::arange<std::int64_t>(0, 2000)) == "tensor([   0,    1,    2,  ..., 1997, 1998, 1999])");
    CHECK(repr(heed::ones({1001, 2})) ==
          "tensor([[1., 1.],\n"
          "        [1., 1.],\n"
          "        [1., 1.],\n"
          "        ...,\n"
          "        [1., 1.],\n"
          "        [1., 1.],\n"
          "        [1., 1.]])");
  }
  SECTION("non-finite values do not widen the columns") {
    const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
    CHECK(repr(heed::tensor<float>({1, inf})) == "tensor([1., inf])");
    CHECK(repr(heed::tensor<float>({-inf, 2})) == "tensor([-inf, 2.])");
    CHECK(repr(heed::tensor<float>({0, nan})) == "tensor([0., nan])");
    CHECK(repr(heed::tensor<float>({1.5f, nan})) == "tensor([1.5000,    nan])");
  }
  SECTION("all zeros have width 1, so 24 fit on a line") {
    std::string first, second;
    for (int i = 0; i < 24; ++i) first += i ? ", 0." : "0.";
    for (int i = 0; i < 6; ++i) second += i ? ", 0." : "0.";
    CHECK(repr(heed::zeros({30})) == "tensor([" + first + ",\n        " + second + "])");
  }
  SECTION("a suffix that would pass 80 columns goes on its own line") {
    auto x = heed::tensor<float>({-1.1258f, -1.1524f, -0.2506f, -0.4339f, 0.8487f, 0.6920f, -0.3160f, -2.1152f});
    x.requires_grad_();
    CHECK(repr(x) ==
          "tensor([-1.1258, -1.1524, -0.2506, -0.4339,  0.8487,  0.6920, -0.3160, -2.1152],\n"
          "       requires_grad=True)");
    auto m = heed::tensor<float>({{1, 2}, {3, 4}});
    m.requires_grad_();
    CHECK(repr(m) ==
          "tensor([[1., 2.],\n"
          "        [3., 4.]], requires_grad=True)");
    auto d = heed::full<double>({5}, 0.5);
    d.requires_grad_();
    CHECK(repr(d) ==
          "tensor([0.5000, 0.5000, 0.5000, 0.5000, 0.5000], dtype=float64,\n"
          "       requires_grad=True)");
  }
  SECTION("empty tensors") {
    CHECK(repr(heed::zeros<std::int64_t>({0})) == "tensor([], dtype=int64)");
    CHECK(repr(heed::zeros<bool>({0, 3})) == "tensor([], size=(0, 3), dtype=bool)");
    CHECK(repr(heed::zeros({0})) == "tensor([])");
    CHECK(repr(heed::zeros({2, 0})) == "tensor([], size=(2, 0))");
    CHECK(repr(heed::zeros<double>({0})) == "tensor([], dtype=float64)");
    CHECK(repr(heed::Tensor<float>()) == "tensor(undefined)");
  }
}

TEST_CASE("buffers are reused through the cache, which can be bounded and emptied", "[tensor]") {
  heed::empty_buffer_cache();
  CHECK(heed::buffer_cache_idle_bytes() == 0);
  const index_t n = index_t(1) << 16;  // 256 KiB of floats: above the cache's threshold
  const float* first = nullptr;
  {
    auto a = heed::zeros({n});
    first = a.data();
  }
  CHECK(heed::buffer_cache_idle_bytes() == static_cast<std::size_t>(n) * sizeof(float));
  {
    auto b = heed::ones({n});  // the same size takes the idle buffer back
    CHECK(b.data() == first);
    CHECK(heed::buffer_cache_idle_bytes() == 0);
    CHECK(b.at({n - 1}) == 1.f);
  }
  heed::empty_buffer_cache();
  CHECK(heed::buffer_cache_idle_bytes() == 0);

  heed::set_buffer_cache_limit(0);  // off: freed buffers go straight back to the system
  { auto c = heed::zeros({n}); }
  CHECK(heed::buffer_cache_idle_bytes() == 0);
  heed::set_buffer_cache_limit(std::size_t(1) << 30);

  const float* small_first = nullptr;
  {
    auto small = heed::zeros({16});  // small buffers are kept by exact size (multiples of 64 bytes)
    small_first = small.data();
  }
  CHECK(heed::buffer_cache_idle_bytes() == 64);
  {
    auto other_size = heed::zeros({17});  // 68 bytes: the 128-byte list, empty
    CHECK(other_size.data() != small_first);
    auto same_size = heed::ones({16});
    CHECK(same_size.data() == small_first);
    CHECK(heed::buffer_cache_idle_bytes() == 0);
  }
  CHECK(heed::buffer_cache_idle_bytes() == 64 + 128);
  heed::empty_buffer_cache();
  CHECK(heed::buffer_cache_idle_bytes() == 0);
}

TEST_CASE("the buffer cache reuses a resident buffer up to twice the size and frees idle ones on a miss", "[tensor]") {
  heed::empty_buffer_cache();
  const index_t n = index_t(1) << 16;  // 256 KiB of floats
  const std::size_t bytes = static_cast<std::size_t>(n) * sizeof(float);
  { auto a = heed::zeros({n}); }
  REQUIRE(heed::buffer_cache_idle_bytes() == bytes);
  {
    auto smaller = heed::zeros({n * 2 / 3});  // fits in the idle buffer: no fresh memory
    CHECK(heed::buffer_cache_idle_bytes() == 0);
  }
  REQUIRE(heed::buffer_cache_idle_bytes() == bytes);  // returned at its full size
  {
    auto larger = heed::zeros({n * 4});  // no idle buffer fits: the idle one is released first
    CHECK(heed::buffer_cache_idle_bytes() == 0);
  }
  CHECK(heed::buffer_cache_idle_bytes() == 4 * bytes);
  { auto tiny = heed::zeros({n / 2}); }  // more than twice too big: a miss, which frees the idle one
  CHECK(heed::buffer_cache_idle_bytes() == bytes / 2);
  heed::empty_buffer_cache();
}

// ---- devices ------------------------------------------------------------------------------

TEST_CASE("a Device is the CPU or a CUDA device, named as in PyTorch", "[tensor][device]") {
  CHECK(heed::Device() == heed::Device::cpu());
  CHECK(heed::Device::cpu().is_cpu());
  CHECK(heed::Device::cuda().is_cuda());
  CHECK(heed::Device::cuda().index() == 0);
  CHECK(heed::Device::cuda(2) != heed::Device::cuda(1));
  CHECK(heed::Device::cuda(0) != heed::Device::cpu());
  CHECK(heed::to_string(heed::Device::cpu()) == "cpu");
  CHECK(heed::to_string(heed::Device::cuda(3)) == "cuda:3");
  CHECK(heed::Device("cpu") == heed::Device::cpu());
  CHECK(heed::Device("cuda") == heed::Device::cuda(0));
  CHECK(heed::Device("cuda:12") == heed::Device::cuda(12));
  std::ostringstream os;
  os << heed::Device::cuda(1);
  CHECK(os.str() == "cuda:1");
  for (const char* bad : {"gpu", "cuda:", "cuda:x", "cuda:-1", "CUDA", "cuda0", ""})
    CHECK_ERROR(heed::ValueError, "expected \"cpu\", \"cuda\" or \"cuda:N\"", heed::Device(bad));
  CHECK_ERROR(heed::ValueError, "index must not be negative", heed::Device::cuda(-1));
}
