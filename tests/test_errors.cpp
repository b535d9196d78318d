// Every op validates its arguments and throws a typed heed::Error naming itself.
#include <catch2/catch.hpp>
#include <heed/heed.hpp>

TEST_CASE("bmm names both shapes when batch sizes differ", "[errors]") {
  auto a = heed::zeros({2, 3, 4});
  auto b = heed::zeros({3, 4, 5});
  CHECK_THROWS_AS(heed::bmm(a, b), heed::ShapeError);
  CHECK_THROWS_WITH(heed::bmm(a, b), "bmm: batch sizes differ: (2, 3, 4) vs (3, 4, 5)");
}
