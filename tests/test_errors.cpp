// Every op validates its arguments and throws a typed heed::Error naming itself.
#include "check.hpp"

#include <cstdint>
#include <type_traits>
#include <vector>

using Catch::Matchers::Contains;
using heed::Tensorf;
using Index = heed::Tensor<std::int64_t>;

TEST_CASE("bmm names both shapes when batch sizes differ", "[errors]") {
  auto a = heed::zeros({2, 3, 4});
  auto b = heed::zeros({3, 4, 5});
  CHECK_THROWS_AS(heed::bmm(a, b), heed::ShapeError);
  CHECK_THROWS_WITH(heed::bmm(a, b), "bmm: batch sizes differ: (2, 3, 4) vs (3, 4, 5)");
}

TEST_CASE("every heed exception is a heed::Error and a std::runtime_error", "[errors]") {
  CHECK(std::is_base_of_v<std::runtime_error, heed::Error>);
  CHECK(std::is_base_of_v<heed::Error, heed::ShapeError>);
  CHECK(std::is_base_of_v<heed::Error, heed::IndexError>);
  CHECK(std::is_base_of_v<heed::Error, heed::ValueError>);
  CHECK(std::is_base_of_v<heed::Error, heed::AutogradError>);
  // The kinds are distinct: catching one never catches another.
  CHECK_FALSE(std::is_base_of_v<heed::ShapeError, heed::IndexError>);
  CHECK_FALSE(std::is_base_of_v<heed::ValueError, heed::ShapeError>);
  CHECK_THROWS_AS(heed::zeros({2}).size(1), std::runtime_error);
}

TEST_CASE("binary ops name themselves and both shapes when they do not broadcast", "[errors]") {
  const auto a = heed::zeros({2, 3});
  const auto b = heed::zeros({4});
  CHECK_THROWS_WITH(heed::add(a, b), "add: shapes (2, 3) and (4) are not broadcastable (dim 1: 3 vs 4)");
  CHECK_ERROR(heed::ShapeError, "add: shapes (2, 3) and (4) are not broadcastable", a + b);
  CHECK_ERROR(heed::ShapeError, "sub: shapes (2, 3) and (4)", a - b);
  CHECK_ERROR(heed::ShapeError, "mul: shapes (2, 3) and (4)", a * b);
  CHECK_ERROR(heed::ShapeError, "div: shapes (2, 3) and (4)", a / b);
  CHECK_ERROR(heed::ShapeError, "pow: shapes (2, 3) and (4)", heed::pow(a, b));
  CHECK_ERROR(heed::ShapeError, "lt: shapes (2, 3) and (4)", a < b);
  CHECK_ERROR(heed::ShapeError, "eq: shapes (2, 3) and (4)", a == b);
  // The mismatch may hide in a leading dim.
  CHECK_ERROR(heed::ShapeError, "add: shapes (2, 1, 3) and (3, 1, 1)", heed::zeros({2, 1, 3}) + heed::zeros({3, 1, 1}));
}

TEST_CASE("matmul names both operands when their dims do not fit", "[errors]") {
  CHECK_ERROR(heed::ShapeError, "matmul: inner dims differ: (2, 3) vs (4, 5)",
              heed::matmul(heed::zeros({2, 3}), heed::zeros({4, 5})));
  CHECK_ERROR(heed::ShapeError, "matmul: inner dims differ: (3) vs (4)",
              heed::matmul(heed::zeros({3}), heed::zeros({4})));
  // A 1-D operand is named as given, not as the matrix it becomes inside.
  CHECK_ERROR(heed::ShapeError, "matmul: inner dims differ: (3) vs (2, 4, 6)",
              heed::matmul(heed::zeros({3}), heed::zeros({2, 4, 6})));
  CHECK_ERROR(heed::ShapeError, "matmul: inner dims differ: (2, 4, 6) vs (5)",
              heed::matmul(heed::zeros({2, 4, 6}), heed::zeros({5})));
  CHECK_ERROR(heed::ShapeError, "matmul: inner dims differ: (2, 3, 4) vs (5, 6)",
              heed::matmul(heed::zeros({2, 3, 4}), heed::zeros({5, 6})));
  CHECK_ERROR(heed::ShapeError, "matmul: inner dims differ: (3, 4) vs (2, 5, 6)",
              heed::matmul(heed::zeros({3, 4}), heed::zeros({2, 5, 6})));
  CHECK_ERROR(heed::ShapeError, "matmul: batch dims of (2, 3, 4) and (3, 4, 6) are not broadcastable",
              heed::matmul(heed::zeros({2, 3, 4}), heed::zeros({3, 4, 6})));
  CHECK_ERROR(heed::ShapeError, "matmul: both operands need at least 1 dim, got () and (2)",
              heed::matmul(heed::scalar_tensor(1.f), heed::zeros({2})));
  CHECK_ERROR(heed::ShapeError, "matmul: inner dims differ", heed::zeros({2, 3}).matmul(heed::zeros({2, 3})));
}

TEST_CASE("bmm needs two 3-D tensors of one batch size and fitting inner dims", "[errors]") {
  CHECK_ERROR(heed::ShapeError, "bmm: expected 3-D tensors, got (3, 4) and (2, 4, 6)",
              heed::bmm(heed::zeros({3, 4}), heed::zeros({2, 4, 6})));
  CHECK_ERROR(heed::ShapeError, "bmm: expected 3-D tensors, got (2, 3, 4) and (1, 2, 4, 6)",
              heed::bmm(heed::zeros({2, 3, 4}), heed::zeros({1, 2, 4, 6})));
  CHECK_ERROR(heed::ShapeError, "bmm: batch sizes differ: (2, 3, 4) vs (3, 4, 5)",
              heed::bmm(heed::zeros({2, 3, 4}), heed::zeros({3, 4, 5})));
  CHECK_ERROR(heed::ShapeError, "bmm: inner dims differ: (2, 3, 4) vs (2, 5, 6)",
              heed::bmm(heed::zeros({2, 3, 4}), heed::zeros({2, 5, 6})));
}

TEST_CASE("reshape rejects sizes that do not fit", "[errors]") {
  const auto x = heed::zeros({2, 3});
  CHECK_ERROR(heed::ShapeError, "reshape: shape (4, 2) is invalid for input of shape (2, 3) (6 elements)",
              x.reshape({4, 2}));
  CHECK_ERROR(heed::ShapeError, "reshape: only one dim can be -1", x.reshape({-1, -1}));
  CHECK_ERROR(heed::ShapeError, "reshape: cannot view shape (2, 3) (6 elements) with a -1", x.reshape({-1, 4}));
  CHECK_ERROR(heed::ShapeError, "reshape: invalid size -2 at dim 0", x.reshape({-2, -3}));
  CHECK_ERROR(heed::ShapeError, "reshape: rank 7 above the maximum 6", x.reshape({1, 1, 1, 1, 1, 2, 3}));
  CHECK_ERROR(heed::ShapeError, "invalid for input of shape (2, 3)", x.view({7}));
}

TEST_CASE("permute needs each dim exactly once", "[errors]") {
  const auto x = heed::zeros({2, 3});
  CHECK_ERROR(heed::ShapeError, "permute: 1 dims given for a tensor of shape (2, 3)", x.permute({0}));
  CHECK_ERROR(heed::ShapeError, "permute: 3 dims given", x.permute({0, 1, 2}));
  CHECK_ERROR(heed::ValueError, "permute: dim 0 repeated", x.permute({0, 0}));
  CHECK_ERROR(heed::ValueError, "permute: dim -1 repeated", x.permute({1, -1}));
  CHECK_ERROR(heed::IndexError, "permute: dim 2 out of range", x.permute({2, 0}));
}

TEST_CASE("a dim out of range is an IndexError naming the op, the dim and the rank", "[errors]") {
  const auto x = heed::zeros({2, 3});
  CHECK_ERROR(heed::IndexError, "transpose: dim 2 out of range for a tensor of rank 2 (expected -2 to 1)",
              x.transpose(0, 2));
  CHECK_ERROR(heed::IndexError, "transpose: dim -3 out of range", x.transpose(-3, 0));
  CHECK_ERROR(heed::IndexError, "sum: dim -3 out of range for a tensor of rank 2", x.sum(-3));
  CHECK_ERROR(heed::IndexError, "mean: dim 2 out of range", x.mean(2));
  CHECK_ERROR(heed::IndexError, "max: dim 2 out of range", x.max(2));
  CHECK_ERROR(heed::IndexError, "argmax: dim 5 out of range for a tensor of rank 2", x.argmax(5));
  CHECK_ERROR(heed::IndexError, "softmax: dim 2 out of range for a tensor of rank 2", x.softmax(2));
  CHECK_ERROR(heed::IndexError, "log_softmax: dim -3 out of range", x.log_softmax(-3));
  CHECK_ERROR(heed::IndexError, "squeeze: dim 2 out of range", x.squeeze(2));
  CHECK_ERROR(heed::IndexError, "unsqueeze: dim 3 out of range for a tensor of rank 2 (expected -3 to 2)",
              x.unsqueeze(3));
  CHECK_ERROR(heed::IndexError, "flatten: dim 2 out of range", x.flatten(2));
  CHECK_ERROR(heed::IndexError, "narrow: dim 2 out of range", x.narrow(2, 0, 1));
  CHECK_ERROR(heed::IndexError, "slice: dim 2 out of range", x.slice(2, 0, 1));
  CHECK_ERROR(heed::IndexError, "select: dim -3 out of range", x.select(-3, 0));
  CHECK_ERROR(heed::IndexError, "index_select: dim 2 out of range", x.index_select(2, Index({0}, {1})));
  CHECK_ERROR(heed::IndexError, "repeat_interleave: dim 2 out of range", x.repeat_interleave(2, 2));
  CHECK_ERROR(heed::IndexError, "cat: dim 2 out of range", heed::cat<float>({x, x}, 2));
  CHECK_ERROR(heed::IndexError, "stack: dim 3 out of range for the result's rank 3", heed::stack<float>({x, x}, 3));
  CHECK_ERROR(heed::IndexError, "size: dim 2 out of range for shape (2, 3)", x.size(2));
  // A rank-0 tensor accepts dims 0 and -1, as in PyTorch, and nothing else.
  CHECK(heed::scalar_tensor(2.f).sum(0).item() == 2.f);
  CHECK_ERROR(heed::IndexError, "sum: dim 1 out of range for a tensor of rank 0", heed::scalar_tensor(2.f).sum(1));
}

TEST_CASE("ranges inside a dim are checked by narrow, select, slice and index_select", "[errors]") {
  const auto x = heed::zeros({2, 3});
  CHECK_ERROR(heed::IndexError, "narrow: start 2 + length 2 exceeds dim 1 of size 3 (shape (2, 3))", x.narrow(1, 2, 2));
  CHECK_ERROR(heed::IndexError, "narrow: start 4 out of range for dim 1 of size 3", x.narrow(1, 4, 0));
  CHECK_ERROR(heed::IndexError, "narrow: start -4 out of range", x.narrow(1, -4, 1));
  CHECK_ERROR(heed::IndexError, "length -1 exceeds", x.narrow(1, 1, -1));
  CHECK_ERROR(heed::IndexError, "narrow: cannot narrow a rank-0 tensor", heed::scalar_tensor(1.f).narrow(0, 0, 1));
  CHECK_ERROR(heed::IndexError, "select: index 3 out of range for dim 1 of size 3", x.select(1, 3));
  CHECK_ERROR(heed::IndexError, "select: index -3 out of range for dim 0 of size 2", x.select(0, -3));
  CHECK_ERROR(heed::IndexError, "select: cannot select from a rank-0 tensor", heed::scalar_tensor(1.f).select(0, 0));
  CHECK_ERROR(heed::ValueError, "slice: step must be positive, got 0", x.slice(1, 0, 3, 0));
  CHECK_ERROR(heed::ValueError, "slice: step must be positive, got -1", x.slice(1, 0, 3, -1));
  CHECK_ERROR(heed::IndexError, "slice: cannot slice a rank-0 tensor", heed::scalar_tensor(1.f).slice(0, 0, 1));
  CHECK_ERROR(heed::IndexError, "index_select: index 3 out of range for dim 1 of size 3",
              x.index_select(1, Index({0, 3}, {2})));
  CHECK_ERROR(heed::IndexError, "index_select: index -1 out of range for dim 0 of size 2",
              x.index_select(0, Index({-1}, {1})));
  CHECK_ERROR(heed::ShapeError, "index_select: index must be 1-D, got shape (1, 2)",
              x.index_select(0, Index({0, 1}, {1, 2})));
  // Out-of-range slice bounds clamp, as in Python: no error, an empty or shorter result.
  CHECK(x.slice(1, 5, 9).shape() == heed::Shape{2, 0});
  CHECK(x.slice(1, -9, 2).shape() == heed::Shape{2, 2});
}

TEST_CASE("cat and stack name the tensor that does not fit", "[errors]") {
  const auto a = heed::zeros({2, 3});
  CHECK_ERROR(heed::ShapeError, "cat: tensor 1 has shape (3, 3), expected (2, 3) except at dim 1",
              heed::cat<float>({a, heed::zeros({3, 3})}, 1));
  CHECK_ERROR(heed::ShapeError, "cat: tensor 2 has shape (3), expected (2, 3) except at dim 0",
              heed::cat<float>({a, a, heed::zeros({3})}, 0));
  CHECK_ERROR(heed::ValueError, "cat: expected a non-empty list of tensors", heed::cat<float>({}, 0));
  CHECK_ERROR(heed::ShapeError, "cat: rank-0 tensors cannot be concatenated",
              heed::cat<float>({heed::scalar_tensor(1.f), heed::scalar_tensor(2.f)}));
  CHECK_ERROR(heed::ShapeError, "stack: tensor 1 has shape (3, 2), expected (2, 3)",
              heed::stack<float>({a, heed::zeros({3, 2})}));
  CHECK_ERROR(heed::ValueError, "stack: expected a non-empty list of tensors", heed::stack<float>({}));
}

TEST_CASE("repeat, repeat_interleave and expand reject what they cannot tile", "[errors]") {
  const auto x = heed::zeros({2, 3});
  CHECK_ERROR(heed::ShapeError, "repeat: 1 repeats for a tensor of shape (2, 3) (need at least one per dim)",
              x.repeat({2}));
  CHECK_ERROR(heed::ValueError, "repeat: negative repeat count -1", x.repeat({2, -1}));
  CHECK_ERROR(heed::ShapeError, "repeat: rank 7 above the maximum 6", x.repeat({1, 1, 1, 1, 1, 1, 1}));
  CHECK_ERROR(heed::ValueError, "repeat_interleave: negative repeat count -1", x.repeat_interleave(-1, 0));
  CHECK_ERROR(heed::ShapeError, "expand: shape (2, 3) cannot be expanded to (4, 3)", x.expand({4, 3}));
  CHECK_ERROR(heed::ShapeError, "expand: shape (2, 3) cannot be expanded to (3)", x.expand({3}));
  CHECK_ERROR(heed::ShapeError, "expand: shape (2, 3) cannot be expanded to (2, 2, 6)", x.expand({2, 2, 6}));
}

TEST_CASE("flatten and squeeze of what is not there", "[errors]") {
  const auto x = heed::zeros({2, 3, 4});
  CHECK_ERROR(heed::ValueError, "flatten: start_dim 2 after end_dim 1", x.flatten(2, 1));
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
}

TEST_CASE("Shape refuses ranks above 6 and negative sizes", "[errors]") {
  CHECK_ERROR(heed::ShapeError, "Shape: rank above 6 is not supported", heed::Shape{1, 1, 1, 1, 1, 1, 1});
  CHECK_ERROR(heed::ShapeError, "Shape: rank above 6", heed::Shape(std::vector<heed::index_t>(7, 2)));
  CHECK_ERROR(heed::ValueError, "Shape: negative size -1", heed::Shape{2, -1});
  CHECK_ERROR(heed::ValueError, "Shape: negative size -4", heed::zeros({-4}));
  CHECK_NOTHROW(heed::Shape{1, 2, 3, 4, 5, 6});
}

TEST_CASE("reductions of nothing are refused where they have no value", "[errors]") {
  CHECK_ERROR(heed::ValueError, "mean: empty tensor of shape (0)", heed::zeros({0}).mean());
  CHECK_ERROR(heed::ValueError, "mean: dim 1 of shape (2, 0) is empty", heed::zeros({2, 0}).mean(1));
  CHECK_ERROR(heed::ValueError, "max: empty tensor of shape (2, 0)", heed::zeros({2, 0}).max());
  CHECK_ERROR(heed::ValueError, "max: cannot reduce over dim 1 of size 0 (shape (2, 0))", heed::zeros({2, 0}).max(1));
  CHECK_ERROR(heed::ValueError, "argmax: cannot reduce over dim 1 of size 0", heed::zeros({2, 0}).argmax(1));
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

TEST_CASE("where and masked_fill need masks that broadcast", "[errors]") {
  const auto x = heed::zeros({2, 2});
  const auto bad_mask = heed::zeros({3}) > 0.0;
  CHECK_ERROR(heed::ShapeError, "where: shapes (3) and (2, 2) are not broadcastable", heed::where(bad_mask, x, x));
  CHECK_ERROR(heed::ShapeError, "where: shapes (2, 2) and (3) are not broadcastable",
              heed::where(heed::zeros({2, 2}) > 0.0, x, heed::zeros({3})));
  CHECK_ERROR(heed::ShapeError, "masked_fill: mask of shape (3) does not broadcast to (2, 2)",
              heed::masked_fill(x, bad_mask, 1.f));
  // A mask may not enlarge the tensor it fills.
  CHECK_ERROR(heed::ShapeError, "masked_fill: mask of shape (2, 2) does not broadcast to (2)",
              heed::masked_fill(heed::zeros({2}), heed::zeros({2, 2}) > 0.0, 1.f));
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
  CHECK_ERROR(heed::ValueError, "Tensor: use of an undefined tensor", undefined.sum());
  CHECK_ERROR(heed::ValueError, "Tensor: use of an undefined tensor", undefined + heed::zeros({2}));
  CHECK_ERROR(heed::ValueError, "Tensor: use of an undefined tensor", heed::zeros({2}) * undefined);
  CHECK_ERROR(heed::ValueError, "Tensor: use of an undefined tensor", undefined.reshape({2}));
  CHECK_ERROR(heed::ValueError, "Tensor: use of an undefined tensor", undefined.grad());
  CHECK_ERROR(heed::ValueError, "Tensor: use of an undefined tensor", undefined.item());
  CHECK_ERROR(heed::ValueError, "Tensor: use of an undefined tensor", heed::cat<float>({heed::zeros({2}), undefined}));
  CHECK_ERROR(heed::ValueError, "Tensor: use of an undefined tensor", heed::matmul(undefined, undefined));
  Tensorf target = heed::zeros({2});
  CHECK_ERROR(heed::ValueError, "Tensor: use of an undefined tensor", target.copy_(undefined));
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
