// Differentiable ops: values of arithmetic, reductions, matmul and softmax.
#include <catch2/catch.hpp>
#include <heed/heed.hpp>

TEST_CASE("broadcasting add of a row over a matrix", "[ops]") {
  auto a = heed::tensor<float>({{1, 2, 3}, {4, 5, 6}});
  auto b = heed::tensor<float>({10, 20, 30});
  CHECK((a + b).to_vector() == std::vector<float>{11, 22, 33, 14, 25, 36});
}
