// Every op validates its arguments and throws a typed heed::Error naming itself.
#include "check.hpp"

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <type_traits>
#include <vector>

using Catch::Matchers::Contains;
using heed::Tensorf;
using Index = heed::Tensor<std::int64_t>;

TEST_CASE("every heed exception is a heed::Error and a std::runtime_error", "[errors]") {
  CHECK(std::is_base_of_v<std::runtime_error, heed::Error>);
  CHECK(std::is_base_of_v<heed::Error, heed::ShapeError>);
  CHECK(std::is_base_of_v<heed::Error, heed::IndexError>);
  CHECK(std::is_base_of_v<heed::Error, heed::ValueError>);
  CHECK(std::is_base_of_v<heed::Error, heed::AutogradError>);
  CHECK(std::is_base_of_v<heed::Error, heed::OutOfMemoryError>);
  // The kinds are distinct: catching one never catches another.
  CHECK_FALSE(std::is_base_of_v<heed::ShapeError, heed::IndexError>);
  CHECK_FALSE(std::is_base_of_v<heed::ValueError, heed::ShapeError>);
  CHECK_THROWS_AS(heed::zeros({2}).size(1), std::runtime_error);
}

TEST_CASE("an undefined tensor argument is named with its op, in ops, modules and backward", "[errors]") {
  // Every op of the op table is checked too (test_op_table.cpp); these reach ops through
  // what users call.
  const heed::Tensorf none, x = heed::ones({2, 3});
  CHECK_ERROR(heed::ValueError, "add: b is an undefined tensor", x + none);
  CHECK_ERROR(heed::ValueError, "matmul: a is an undefined tensor", heed::matmul(none, x));
  CHECK_ERROR(heed::ValueError, "cat: tensor 1 is an undefined tensor", heed::cat({x, none}));
  CHECK_ERROR(heed::ValueError, "stack: tensor 0 is an undefined tensor", heed::stack({none, x}));
  CHECK_ERROR(heed::ValueError, "sum: x is an undefined tensor", none.sum());
  CHECK_ERROR(heed::ValueError, "t: self is an undefined tensor", none.t());
  CHECK_ERROR(heed::ValueError, "backward: the output is an undefined tensor", none.backward());
  heed::Generator gen(1);
  heed::Linear<float> layer(3, 2, true, gen);
  CHECK_ERROR(heed::ValueError, "linear: x is an undefined tensor", layer(none));
  CHECK_ERROR(heed::ValueError, "masked_softmax: scores is an undefined tensor", heed::masked_softmax(none));
  CHECK_ERROR(heed::ValueError, "cross_entropy: labels is an undefined tensor",
              heed::cross_entropy(x, heed::IndexTensor()));
  // An optional argument may stay undefined: no bias, no valid_lens.
  CHECK(heed::linear(x, heed::ones({2, 3})).shape() == heed::Shape{2, 2});
  CHECK(heed::masked_softmax(heed::ones({1, 2, 3}), heed::IndexTensor()).shape() == heed::Shape{1, 2, 3});
}

TEST_CASE("reshape rejects sizes that do not fit", "[errors]") {
  const auto x = heed::zeros({2, 3});
  CHECK_ERROR(heed::ShapeError, "invalid for input of shape (2, 3)", x.view({7}));
}

TEST_CASE("a dim out of range is an IndexError naming the op, the dim and the rank", "[errors]") {
  const auto x = heed::zeros({2, 3});
  CHECK_ERROR(heed::IndexError, "size: dim 2 out of range for shape (2, 3)", x.size(2));
  // A rank-0 tensor accepts dims 0 and -1, as in PyTorch, and nothing else.
  CHECK(heed::scalar_tensor(2.f).sum(0).item() == 2.f);
}

TEST_CASE("ranges inside a dim are checked by narrow, select, slice and index_select", "[errors]") {
  const auto x = heed::zeros({2, 3});
  // Out-of-range slice bounds clamp, as in Python: no error, an empty or shorter result.
  CHECK(x.slice(1, 5, 9).shape() == heed::Shape{2, 0});
  CHECK(x.slice(1, -9, 2).shape() == heed::Shape{2, 2});
}

TEST_CASE("flatten and squeeze of what is not there", "[errors]") {
  const auto x = heed::zeros({2, 3, 4});
  CHECK_ERROR(heed::ShapeError, "Shape: rank above 6", heed::zeros({1, 1, 1, 1, 1, 1}).unsqueeze(0));
  CHECK(x.squeeze(1).shape() == x.shape());  // not size 1: unchanged, as in PyTorch
}

TEST_CASE("element access checks the number and range of indices", "[errors]") {
  auto x = heed::zeros({2, 3});
  CHECK_ERROR(heed::IndexError, "at: 1 indices for a tensor of shape (2, 3)", x.at({1}));
  CHECK_ERROR(heed::IndexError, "at: 3 indices for a tensor of shape (2, 3)", x.at({1, 1, 1}));
  CHECK_ERROR(heed::IndexError, "at: index 3 out of range for dim 1 of size 3 (shape (2, 3))", x.at({1, 3}));
  CHECK_ERROR(heed::IndexError, "at: index -3 out of range for dim 0 of size 2", x.at({-3, 0}));
  const auto& cx = x;
  CHECK_ERROR(heed::IndexError, "at: index 2 out of range for dim 0", cx.at({2, 0}));
  x.at({-1, -1}) = 5.f;  // negative indices count from the end
  CHECK(x.at({1, 2}) == 5.f);

  CHECK_ERROR(heed::ValueError, "item: needs a tensor with one element, got shape (2, 3)", x.item());
  CHECK_ERROR(heed::ValueError, "item: needs a tensor with one element, got shape (0)", heed::zeros({0}).item());
  CHECK_ERROR(heed::ShapeError, "matrix: 4 x 2 does not cover shape (2, 3)", x.matrix(4, 2));
}

TEST_CASE("constructors and factories validate sizes and parameters", "[errors]") {
  CHECK_ERROR(heed::ShapeError, "Tensor: 3 values do not fill shape (2, 2) (4 elements)",
              heed::Tensor<float>({1, 2, 3}, {2, 2}));
  CHECK_ERROR(heed::ValueError, "tensor: ragged nested list: expected 2 items at depth 1, got 1",
              heed::tensor<float>({{1, 2}, {3}}));
  CHECK_ERROR(heed::ValueError, "tensor: ragged nested list: a list at depth 1 where values belong",
              heed::tensor<float>({1, {2}}));
  CHECK_ERROR(heed::ValueError, "got a value", heed::tensor<float>({{1, 2}, 3}));
  CHECK_ERROR(heed::ValueError, "arange: step must be nonzero", heed::arange(0.f, 1.f, 0.f));
  CHECK_ERROR(heed::ValueError, "arange: step -1 does not lead from 0 to 1", heed::arange(0.f, 1.f, -1.f));
  CHECK_ERROR(heed::ValueError, "eye: negative size -2", heed::eye(-2));
  CHECK_ERROR(heed::ValueError, "eye: negative size -3", heed::eye(2, -3));
  CHECK(heed::eye(2).shape() == heed::Shape{2, 2});  // m defaults to n

  heed::Generator gen(0);
  CHECK_ERROR(heed::ValueError, "normal: std must be non-negative, got -1", heed::normal(0.f, -1.f, {2}, gen));
  CHECK_ERROR(heed::ValueError, "uniform: low 1 above high 0", heed::uniform({2}, 1.f, 0.f, gen));
  CHECK_ERROR(heed::ValueError, "randint: empty range [3, 3)", heed::randint(3, 3, {2}, gen));
  CHECK_ERROR(heed::ValueError, "randint: empty range [5, 1)", heed::randint(5, 1, {2}, gen));
  CHECK_ERROR(heed::ValueError, "randperm: n must be non-negative, got -1", heed::randperm(-1, gen));
}

TEST_CASE("Shape refuses ranks above 6 and negative sizes", "[errors]") {
  CHECK_ERROR(heed::ShapeError, "Shape: rank above 6 is not supported", heed::Shape{1, 1, 1, 1, 1, 1, 1});
  CHECK_ERROR(heed::ShapeError, "Shape: rank above 6", heed::Shape(std::vector<heed::index_t>(7, 2)));
  CHECK_ERROR(heed::ValueError, "Shape: negative size -1", heed::Shape{2, -1});
  CHECK_ERROR(heed::ValueError, "Shape: negative size -4", heed::zeros({-4}));
  CHECK_NOTHROW(heed::Shape{1, 2, 3, 4, 5, 6});
}

TEST_CASE("reductions of nothing are refused where they have no value", "[errors]") {
  // Where the answer is well defined, an empty input is no error.
  CHECK(heed::zeros({0}).sum().item() == 0.f);
  CHECK(heed::zeros({0, 3}).max(1).shape() == heed::Shape{0});
  CHECK(heed::zeros({2, 0}).mean(0).shape() == heed::Shape{0});
}

TEST_CASE("softmax over an empty dim gives an empty result, not a crash", "[errors]") {
  const auto x = heed::zeros<double>({2, 0});
  CHECK(heed::softmax(x, 1).shape() == heed::Shape{2, 0});
  CHECK(heed::log_softmax(heed::zeros<double>({0, 3}), 0).shape() == heed::Shape{0, 3});
  auto w = heed::zeros<double>({0, 3}).requires_grad_();
  heed::softmax(w, 0).sum().backward();
  CHECK(w.grad().shape() == heed::Shape{0, 3});
}

TEST_CASE("in-place updates need an operand that broadcasts to the target", "[errors]") {
  auto x = heed::zeros({2, 2});
  CHECK_ERROR(heed::ShapeError, "copy_: source of shape (3) does not broadcast to (2, 2)", x.copy_(heed::zeros({3})));
  CHECK_ERROR(heed::ShapeError, "add_: operand of shape (3) does not broadcast to (2, 2)", x.add_(heed::zeros({3})));
  CHECK_ERROR(heed::ShapeError, "add_: operand of shape (2, 2, 2) does not broadcast to (2, 2)",
              x.sub_(heed::zeros({2, 2, 2})));
  CHECK(x.to_vector() == std::vector<float>{0, 0, 0, 0});  // left as it was
}

TEST_CASE("using an undefined tensor is a ValueError, not a crash", "[errors]") {
  const Tensorf undefined;
  CHECK_FALSE(undefined.defined());
  CHECK_FALSE(undefined.requires_grad());
  CHECK_ERROR(heed::ValueError, "Tensor: use of an undefined tensor", undefined.numel());
  CHECK_ERROR(heed::ValueError, "Tensor: use of an undefined tensor", undefined.shape());
  CHECK_ERROR(heed::ValueError, "Tensor: use of an undefined tensor", undefined.grad());
  CHECK_ERROR(heed::ValueError, "Tensor: use of an undefined tensor", undefined.item());
  Tensorf target = heed::zeros({2});
  CHECK_ERROR(heed::ValueError, "copy_: src is an undefined tensor", target.copy_(undefined));
  CHECK_ERROR(heed::ValueError, "add_: other is an undefined tensor", target.add_(undefined));
}

TEST_CASE("gradcheck refuses inputs it cannot check", "[errors]") {
  const auto f = [](const std::vector<heed::Tensord>& in) { return in[0] * 2.0; };
  auto x = heed::tensor<double>({1, 2}).requires_grad_();
  CHECK_ERROR(heed::ValueError, "gradcheck: inputs must be defined leaf tensors", heed::gradcheck(f, {x * 2.0}));
  CHECK_ERROR(heed::ValueError, "gradcheck: inputs must be defined leaf tensors",
              heed::gradcheck(f, {heed::Tensord()}));
  CHECK_ERROR(heed::ValueError, "gradcheck: the output does not require grad",
              heed::gradcheck(f, {heed::tensor<double>({1, 2})}));
}

// ---- sizes and conversions that overflow ----------------------------------------------------

namespace {

constexpr heed::index_t kBig = heed::index_t(1) << 31;  // kBig * kBig floats: 2^64 bytes
constexpr heed::index_t kMax = std::numeric_limits<heed::index_t>::max();
constexpr heed::index_t kMin = std::numeric_limits<heed::index_t>::min();
const float kNaN = std::numeric_limits<float>::quiet_NaN();
const float kInf = std::numeric_limits<float>::infinity();

}  // namespace

TEST_CASE("a shape whose bytes overflow is a ValueError naming the op and the shape", "[errors]") {
  CHECK_ERROR(heed::ValueError,
              "zeros: shape (2147483648, 2147483648) of float32 needs 4611686018427387904 x 4 bytes, more than the "
              "9223372036854775807 one buffer can hold",
              heed::zeros({kBig, kBig}));
  CHECK_ERROR(heed::ValueError, "ones: shape (2147483648, 2147483648) of float64", heed::ones<double>({kBig, kBig}));
  CHECK_ERROR(heed::ValueError, "full: shape (2147483648, 2147483648) of int64",
              heed::full<std::int64_t>({kBig, kBig}, 1));
  CHECK_ERROR(heed::ValueError, "empty: shape (2147483648, 2147483648) of float32", Tensorf::empty({kBig, kBig}));
  CHECK_ERROR(heed::ValueError, "Linear: shape (2147483648, 2147483648) of float32 needs",
              heed::Linear<float>(kBig, kBig));
  CHECK_ERROR(heed::ValueError, "Embedding: shape (2147483648, 2147483648) of float32 needs",
              heed::Embedding<float>(kBig, kBig));
  heed::Generator gen(0);
  CHECK_ERROR(heed::ValueError, "randint: shape (2147483648, 2147483648) of int64 needs",
              heed::randint(0, 2, {kBig, kBig}, gen));
  CHECK_ERROR(heed::ValueError, "randperm: shape (2305843009213693951) of int64 needs", heed::randperm(kMax / 4, gen));
  CHECK_ERROR(heed::ValueError, "uniform: shape (2147483648, 2147483648)", heed::rand({kBig, kBig}, gen));
  CHECK_ERROR(heed::ValueError, "normal: shape (2147483648, 2147483648)", heed::randn({kBig, kBig}, gen));
  // Just under the limit in elements, over it once rounded up to whole 64-byte lines.
  CHECK_ERROR(heed::ValueError, "zeros: shape (2305843009213693951) of float32", heed::zeros({kMax / 4}));
}

TEST_CASE("Shape::numel refuses an element count beyond int64", "[errors]") {
  const heed::index_t huge = heed::index_t(1) << 33;
  CHECK_ERROR(heed::ValueError, "Shape: shape (8589934592, 8589934592) has more than 9223372036854775807 elements",
              heed::Shape({huge, huge}).numel());
  CHECK_ERROR(heed::ValueError, "Shape: shape (8589934592, 8589934592)", heed::Shape({huge, huge}).strides());
  CHECK_ERROR(heed::ValueError, "zeros: shape (8589934592, 8589934592) has more than", heed::zeros({huge, huge}));
  CHECK_ERROR(heed::ValueError, "add: shape (8589934592, 8589934592) has more than",
              heed::detail::broadcast_shapes({huge, 1}, {1, huge}, "add"));
  // A size 0 makes the count 0, but the other sizes still must multiply within int64:
  // they are the strides.
  CHECK(heed::Shape({0, kBig, kBig}).numel() == 0);
  CHECK(heed::Shape({kBig, kBig, 0}).strides()[0] == 0);
  CHECK(heed::zeros({kBig, 0, kBig}).shape() == heed::Shape{kBig, 0, kBig});
  CHECK_ERROR(heed::ValueError, "Shape: shape (8589934592, 0, 8589934592) has more than",
              heed::Shape({huge, 0, huge}).numel());
  CHECK(heed::Shape({kMax}).numel() == kMax);
  CHECK_ERROR(heed::ValueError, "Tensor: shape (8589934592, 8589934592) has more than", Tensorf({1}, {huge, huge}));
}

TEST_CASE("reshape of sizes whose product overflows is a ValueError", "[errors]") {
  const heed::index_t huge = heed::index_t(1) << 40;
  CHECK(heed::zeros({0, 4}).reshape({huge, 0}).shape() == heed::Shape{huge, 0});
}

TEST_CASE("narrow and slice with bounds and steps near INT64_MAX", "[errors]") {
  const auto x = heed::arange(0, 6).reshape({2, 3});
  // Python's slicing: a step past the end takes only the first element.
  const auto first = x.slice(1, 0, 3, kMax);
  CHECK(first.shape() == heed::Shape{2, 1});
  CHECK(first.to_vector() == std::vector<float>{0, 3});
  CHECK(x.slice(1, 1, kMax, kMax).to_vector() == std::vector<float>{1, 4});
  CHECK(x.slice(1, -1, kMax, kMax - 1).to_vector() == std::vector<float>{2, 5});
  CHECK(x.slice(1, kMin, kMax).to_vector() == std::vector<float>{0, 1, 2, 3, 4, 5});
  CHECK(x.slice(1, kMax, kMin).shape() == heed::Shape{2, 0});
  CHECK(x.slice(1, kMin, kMin, kMax).shape() == heed::Shape{2, 0});
  auto w = heed::ones({2, 3}).requires_grad_();
  w.slice(1, 0, 3, kMax).sum().backward();
  CHECK(w.grad().to_vector() == std::vector<float>{1, 0, 0, 1, 0, 0});
  // An empty result of a tensor with a large zero-size dim reads nothing.
  CHECK(heed::zeros({0, kBig}).slice(1, kBig - 1, kMax).shape() == heed::Shape{0, 1});
}

TEST_CASE("repeat, repeat_interleave, expand and cat refuse sizes that overflow", "[errors]") {
  const auto x = heed::zeros({2, 3});
  // Zero repeats leave nothing to copy, however large the other sizes.
  auto y = heed::zeros({3, 1}).requires_grad_();
  const auto none = y.repeat({0, heed::index_t(1) << 62});
  CHECK(none.shape() == heed::Shape{0, heed::index_t(1) << 62});
  none.sum().backward();
  CHECK(y.grad().to_vector() == std::vector<float>{0, 0, 0});
  CHECK(x.repeat_interleave(0, 0).shape() == heed::Shape{0, 3});
}

TEST_CASE("randint covers the whole int64 range without overflowing", "[errors]") {
  heed::Generator gen(0);
  const auto all = heed::randint(kMin, kMax, {256}, gen).to_vector();
  bool negative = false, positive = false;
  for (std::int64_t v : all) {
    negative = negative || v < 0;
    positive = positive || v > 0;
    CHECK(v != kMax);  // the range is half-open
  }
  CHECK(negative);
  CHECK(positive);
  CHECK(heed::randint(kMax - 1, kMax, {3}, gen).to_vector() == std::vector<std::int64_t>(3, kMax - 1));
  CHECK(heed::randint(kMin, kMin + 1, {3}, gen).to_vector() == std::vector<std::int64_t>(3, kMin));
  CHECK_ERROR(heed::ValueError, "randint: empty range [9223372036854775807, -9223372036854775808)",
              heed::randint(kMax, kMin, {1}, gen));
  CHECK_ERROR(heed::ValueError, "Generator::uniform_int: n must be positive", gen.uniform_int(0));
}

TEST_CASE("eye and PositionalEncoding of huge sizes are a ValueError", "[errors]") {
  CHECK_ERROR(heed::ValueError, "eye: shape (4294967296, 4294967296) has more than 9223372036854775807 elements",
              heed::eye(heed::index_t(1) << 32));
  CHECK_ERROR(heed::ValueError, "eye: shape (2147483648, 2147483648) of float32 needs", heed::eye(kBig));
  CHECK_ERROR(heed::ValueError, "eye: shape (2, 9223372036854775807) has more than", heed::eye(2, kMax));
  CHECK_ERROR(heed::ValueError, "eye: shape (1, 9223372036854775807) of float32 needs", heed::eye(1, kMax));
  CHECK(heed::eye(2, 3).to_vector() == std::vector<float>{1, 0, 0, 0, 1, 0});

  CHECK_ERROR(heed::ValueError, "PositionalEncoding: shape (1, 2147483648, 2147483648) of float32 needs",
              heed::PositionalEncoding<float>(kBig, 0, kBig));
  CHECK_ERROR(heed::ValueError, "PositionalEncoding: shape (1, 1000, 9223372036854775807) has more than",
              heed::PositionalEncoding<float>(kMax, 0));
  CHECK_ERROR(heed::ValueError, "PositionalEncoding: shape (1, 9223372036854775807, 1) of float32 needs",
              heed::PositionalEncoding<float>(1, 0, kMax));
  const heed::PositionalEncoding<float> pe(4, 0, 10);
  CHECK_ERROR(heed::ValueError,
              "PositionalEncoding: 2 steps from position 9223372036854775807 of X (1, 2, 4) reach past max_len = 10",
              pe(heed::zeros({1, 2, 4}), kMax));
  CHECK_ERROR(heed::ValueError, "PositionalEncoding: offset must not be negative, got -1",
              pe(heed::zeros({1, 2, 4}), -1));
  CHECK(pe(heed::zeros({1, 2, 4}), 8).shape() == heed::Shape{1, 2, 4});
}

TEST_CASE("float valid_lens must be whole numbers within int64", "[errors]") {
  const auto scores = heed::zeros({2, 2, 3});
  // Whole lengths, even past num_keys, still work as in d2l.
  heed_test::check_values(heed::masked_softmax(scores, Tensorf({2, 1e9f}, {2})),
                          {0.5, 0.5, 0, 0.5, 0.5, 0, 1. / 3, 1. / 3, 1. / 3, 1. / 3, 1. / 3, 1. / 3});
}

TEST_CASE("to an integer type refuses NaN, infinities and values out of range", "[errors]") {
  CHECK_ERROR(heed::ValueError, "to: nan at flat index 1 of shape (3) does not fit in int64",
              Tensorf({1, kNaN, 2}, {3}).to<std::int64_t>());
  CHECK_ERROR(heed::ValueError, "to: inf at flat index 0 of shape (1) does not fit in int64",
              Tensorf({kInf}, {1}).to<std::int64_t>());
  CHECK_ERROR(heed::ValueError, "to: -inf at flat index 2 of shape (2, 2)",
              Tensorf({0, 0, -kInf, 0}, {2, 2}).to<std::int64_t>());
  CHECK_ERROR(heed::ValueError, "to: 1e+30 at flat index 0 of shape (1) does not fit in int64",
              Tensorf({1e30f}, {1}).to<std::int64_t>());
  // The bounds are exact: -2^63 converts, 2^63 does not; int32 truncates toward zero.
  CHECK_ERROR(heed::ValueError, "does not fit in int64",
              heed::Tensord({9.223372036854775808e18}, {1}).to<std::int64_t>());
  CHECK(heed::Tensord({-9.223372036854775808e18, 9.2233720368547748e18}, {2}).to<std::int64_t>().to_vector() ==
        std::vector<std::int64_t>{kMin, 9223372036854774784});
  CHECK(heed::Tensord({2147483647.9, -2147483648.9}, {2}).to<std::int32_t>().to_vector() ==
        std::vector<std::int32_t>{2147483647, -2147483647 - 1});
  CHECK_ERROR(heed::ValueError, "to: 2.14748e+09 at flat index 0 of shape (1) does not fit in int32",
              heed::Tensord({2147483648.0}, {1}).to<std::int32_t>());
  CHECK(Tensorf({-2.7f, 3.9f}, {2}).to<std::int64_t>().to_vector() == std::vector<std::int64_t>{-2, 3});
  // bool takes any value, and conversions to floating types are unchecked.
  CHECK(Tensorf({kNaN, 0}, {2}).to<bool>().to_vector() == std::vector<bool>{true, false});
  CHECK(Index({kMax}, {1}).to<float>().item() == 0x1p63f);
}

TEST_CASE("arange needs finite bounds and a count within int64", "[errors]") {
  CHECK_ERROR(heed::ValueError, "arange: 0 to 1e+30 by 1 gives 1e+30 elements, more than 9223372036854775807",
              heed::arange(0, 1e30));
  CHECK_ERROR(heed::ValueError, "arange: start, end and step must be finite, got 0, nan and 1",
              heed::arange(0, std::nan("")));
  CHECK_ERROR(heed::ValueError, "arange: start, end and step must be finite, got 0, inf and 1",
              heed::arange(0, HUGE_VAL));
  CHECK_ERROR(heed::ValueError, "got -inf, 0 and 1", heed::arange(-HUGE_VAL, 0));
  CHECK_ERROR(heed::ValueError, "got 0, 1 and nan", heed::arange(0, 1, std::nan("")));
  CHECK_ERROR(heed::ValueError, "gives inf elements", heed::arange(-1e308, 1e308, 1));
  CHECK_ERROR(heed::ValueError, "arange: shape (4611686018427387904) of float32 needs", heed::arange(0, 0x1p62));
  CHECK_ERROR(heed::ValueError, "arange: value 1e+30 at flat index 0 does not fit in int64",
              heed::arange<std::int64_t>(1e30, 1e30 + 1e15, 1e14));
  CHECK_ERROR(heed::ValueError, "arange: value 9.3e+18 at flat index 1 does not fit in int64",
              heed::arange<std::int64_t>(0, 1.5e19, 9.3e18));
  CHECK(heed::arange<std::int64_t>(-2, 3).to_vector() == std::vector<std::int64_t>{-2, -1, 0, 1, 2});
}

// Under AddressSanitizer a refused allocation aborts unless the allocator may return
// null, as glibc's does; this is the default for these tests wherever they are run from
// (the asan preset's ASAN_OPTIONS says it too). Unused without ASan.
extern "C" const char* __asan_default_options() { return "allocator_may_return_null=1"; }

TEST_CASE("an allocation the system refuses is an OutOfMemoryError naming the bytes", "[errors]") {
  // 2^62 bytes: within PTRDIFF_MAX, beyond any address space, so refused on every system.
  CHECK_ERROR(heed::OutOfMemoryError,
              "zeros: out of memory: the system refused 4611686018427387904 bytes for a tensor of shape "
              "(1152921504606846976) of float32",
              heed::zeros({heed::index_t(1) << 60}));
  CHECK_ERROR(heed::OutOfMemoryError, "zeros: out of memory: the system refused 4611686018427387904 bytes",
              heed::zeros<bool>({kBig, kBig}));
  CHECK_ERROR(heed::OutOfMemoryError, "PositionalEncoding: out of memory",
              heed::PositionalEncoding<float>(kBig, 0, kBig / 4));
  CHECK_FALSE(std::is_base_of_v<heed::ValueError, heed::OutOfMemoryError>);
  // Nothing is left broken: the next allocation works.
  CHECK(heed::ones({2}).to_vector() == std::vector<float>{1, 1});
}

TEST_CASE("matrix views need non-negative sizes whose product is numel", "[errors]") {
  auto x = heed::zeros({2, 3});
  CHECK_ERROR(heed::ShapeError, "matrix: -2 x -3 does not cover shape (2, 3)", x.matrix(-2, -3));
  CHECK_ERROR(heed::ShapeError, "matrix: 4611686018427387904 x 4 does not cover", x.matrix(heed::index_t(1) << 62, 4));
  CHECK(x.matrix(3, 2).rows() == 3);
}

TEST_CASE("gather and scatter_add check the index's rank, sizes and values", "[errors]") {
  const auto x = heed::zeros({2, 3});
  // Along dim itself the index may be longer than the input: it reads positions repeatedly.
  CHECK(x.gather(1, Index({0, 1, 2, 2, 1}, {1, 5})).shape() == heed::Shape{1, 5});
  CHECK(x.to_vector() == std::vector<float>(6, 0.f));  // out of place: x is left as it was
}

TEST_CASE("masked_select needs a mask that broadcasts with the input", "[errors]") {
  // Unlike masked_fill's, the mask may enlarge the input, as in torch.masked_select.
  CHECK(heed::masked_select(heed::zeros({3}), heed::zeros({2, 3}) == 0.0).shape() == heed::Shape{6});
}

TEST_CASE("sort, argsort and topk check the dim and k", "[errors]") {
  const auto x = heed::zeros({2, 3});
  CHECK(x.topk(0).values.shape() == heed::Shape{2, 0});  // k = 0 is no error
}

TEST_CASE("split and chunk need sizes that add up and positive counts", "[errors]") {
  // split_size 0 of an empty dim is allowed, as in PyTorch: one empty piece.
  CHECK(heed::zeros({0, 3}).split(0).size() == 1);
  // chunk of an empty dim gives `chunks` empty pieces, as torch.chunk: a count whose
  // handles cannot fit is refused before anything is allocated.
  CHECK(heed::zeros({0}).chunk(3).size() == 3);
}

TEST_CASE("t and mT need the rank they transpose", "[errors]") {
  CHECK(heed::zeros({3}).t().shape() == heed::Shape{3});  // as PyTorch's: 0-D and 1-D as they are
}

TEST_CASE("reductions over dims refuse repeated dims, bad corrections and groups of nothing", "[errors]") {
  using Dims = std::vector<int>;
  // A scalar's one "dim" is 0 or -1, once: PyTorch refuses (0, 0) and (0, -1) too.
  const auto scalar = heed::scalar_tensor(2.f);
  CHECK(heed::sum(scalar, Dims{-1}).item() == 2.f);
  const auto empty = heed::zeros({2, 0});
  CHECK(empty.mean(Dims{0}).shape() == heed::Shape{0});  // a group per column, and there are none
  CHECK(empty.sum(Dims{1}).to_vector() == std::vector<float>{0, 0});
  CHECK(empty.prod().item() == 1.f);  // the empty product
}

TEST_CASE("mse_loss and l1_loss need input and target of one shape", "[errors]") {
  // The mean of no element is NaN, as in PyTorch.
  CHECK(std::isnan(heed::mse_loss(heed::zeros({0}), heed::zeros({0})).item()));
}
