// Tensor<T>: creation, handle semantics, shape ops, element access, printing.
#include <catch2/catch.hpp>
#include <heed/heed.hpp>

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
