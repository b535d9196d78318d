// One translation unit of heed_tests built without heed/compiled.hpp's declarations: it
// compiles the templates it uses itself, as a header-only user does, while the other
// files use heed::compiled's. The program links and runs: an extern template
// declaration changes no definition. (heed's non-template functions are the exception,
// see heed/compiled.hpp: this file defines them inline and the library has them too,
// which links, but a program should not rely on it.)
#undef HEED_COMPILED
#include <catch2/catch.hpp>
#include <heed/heed.hpp>

#include <cmath>
#include <vector>

#ifdef HEED_COMPILED
#error "test_header_only.cpp must see no heed::compiled declarations"
#endif

TEST_CASE("a header-only translation unit links with heed::compiled", "[compiled]") {
  heed::Generator gen(3);
  heed::Linear<float> fc(3, 2, true, gen);
  const auto x = heed::randn<float>({4, 3}, gen);
  const auto y = fc(x);
  // y = x Wᵀ + b, element by element
  for (heed::index_t i = 0; i < 4; ++i)
    for (heed::index_t j = 0; j < 2; ++j) {
      float expected = fc.bias.at({j});
      for (heed::index_t k = 0; k < 3; ++k) expected += x.at({i, k}) * fc.weight.at({j, k});
      CHECK(std::fabs(y.at({i, j}) - expected) < 1e-5f);
    }
  y.sum().backward();  // d sum / d b = the number of rows
  CHECK(fc.bias.grad().to_vector() == std::vector<float>{4.f, 4.f});
}
