// Tensor<T> handles and shapes: views, copies and detach; shape queries and printing;
// the shape ops (heed/ops/shape.hpp).
#include "tensor_common.hpp"

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
  // size() counts dims as a container counts items (len(x.shape)); numel() counts elements.
  CHECK(x.shape().size() == 3);
  CHECK(Shape{}.size() == 0);
  CHECK(Shape{5, 0}.size() == 2);
  CHECK(static_cast<std::size_t>(x.shape().rank()) == x.shape().size());
  CHECK(static_cast<std::size_t>(std::distance(x.shape().begin(), x.shape().end())) == x.shape().size());

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
