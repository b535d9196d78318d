// Assertions on tensor values shared by the test files.
#pragma once

#include <catch2/catch.hpp>
#include <heed/heed.hpp>

#include <cstdint>
#include <cstring>
#include <functional>
#include <type_traits>
#include <vector>

// CHECK_ERROR(Type, "part of the message", expression): the expression throws Type,
// which is a heed::Error, with a message containing the text.
#define CHECK_ERROR(Type, text, ...)                                   \
  do {                                                                 \
    CHECK_THROWS_AS((__VA_ARGS__), Type);                              \
    CHECK_THROWS_AS((__VA_ARGS__), heed::Error);                       \
    CHECK_THROWS_WITH((__VA_ARGS__), Catch::Matchers::Contains(text)); \
  } while (false)

// CHECK_GRADCHECK(result): a heed::GradcheckResult passes; on failure the report has
// this line and gradcheck's message.
#define CHECK_GRADCHECK(...)                                      \
  do {                                                            \
    const heed::GradcheckResult gradcheck_result = (__VA_ARGS__); \
    INFO(gradcheck_result.message);                               \
    CHECK(gradcheck_result.ok);                                   \
  } while (false)

// CHECK_GRADIENTS(f, x, y, ...) or CHECK_GRADIENTS(f, {x, y}): gradcheck in double of
// f(inputs) at the leaves x, y, ... (heed_test::leaf).
#define CHECK_GRADIENTS(...) CHECK_GRADCHECK(heed_test::run_gradcheck(__VA_ARGS__))

namespace heed_test {

using heed::index_t;
using heed::Shape;

using GradInputs = std::vector<heed::Tensord>;
using GradFn = std::function<heed::Tensord(const GradInputs&)>;

/// A leaf of uniform values in [low, high) that requires grad.
inline heed::Tensord leaf(const Shape& shape, std::uint64_t seed, double low = -1.0, double high = 1.0) {
  heed::Generator gen(seed);
  return heed::uniform<double>(shape, low, high, gen).requires_grad_();
}

/// gradcheck on a std::function: one instantiation for every test (heed::compiled has it).
inline heed::GradcheckResult run_gradcheck(const GradFn& f, const GradInputs& inputs) {
  return heed::gradcheck(f, inputs);
}
template <typename... Rest>
heed::GradcheckResult run_gradcheck(const GradFn& f, const heed::Tensord& first, const Rest&... rest) {
  return run_gradcheck(f, GradInputs{first, rest...});
}

/// Valid lengths (or any int64 tensor) from values and a shape: lens({2, 6}, {2}).
inline heed::IndexTensor lens(const std::vector<std::int64_t>& values, const Shape& shape) {
  return heed::IndexTensor(values, shape);
}

/// Every element of x, in row-major order, matches `expected` within a relative
/// epsilon suited to T and an absolute `margin` (for values near zero).
template <typename T>
void check_values(const heed::Tensor<T>& x, const std::vector<double>& expected, double margin = 1e-6) {
  REQUIRE(x.numel() == static_cast<index_t>(expected.size()));
  const double eps = std::is_same_v<T, float> ? 1e-5 : 1e-12;
  for (std::size_t i = 0; i < expected.size(); ++i) {
    INFO("element " << i);
    CHECK(static_cast<double>(x.data()[i]) == Approx(expected[i]).epsilon(eps).margin(margin));
  }
}

/// x and y have one shape and agree element by element within margin.
template <typename T>
void check_close(const heed::Tensor<T>& x, const heed::Tensor<T>& y, double margin) {
  REQUIRE(x.shape() == y.shape());
  for (index_t i = 0; i < x.numel(); ++i) {
    INFO("element " << i);
    REQUIRE(static_cast<double>(x.data()[i]) == Approx(static_cast<double>(y.data()[i])).margin(margin));
  }
}

/// x and y have one shape and the same bits, element by element.
template <typename T>
bool same_bits(const heed::Tensor<T>& x, const heed::Tensor<T>& y) {
  return x.shape() == y.shape() &&
         std::memcmp(x.data(), y.data(), static_cast<std::size_t>(x.numel()) * sizeof(T)) == 0;
}

}  // namespace heed_test
