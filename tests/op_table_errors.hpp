// The op table's error cases (see tests/op_table.hpp): for each op, arguments it must
// refuse, the heed::Error subclass it throws and its message (whole, or a fragment),
// attached to the op's entry by name and run by test_op_table.cpp. Grouped as the tests
// they came from; tests/test_errors.cpp and tests/test_ops.cpp keep the errors that are
// not one op's (factories, Shape, element access). A name with no entry stops the
// table's construction, so an error case cannot be left behind.
#pragma once

#include "op_table.hpp"

#include <limits>
#include <optional>
#include <stdexcept>

namespace heed_test::op_table {

/// Appends errors to the error cases of the entry named name.
inline void add_errors(std::vector<Entry>& t, const std::string& name, std::vector<ErrorCase> errors) {
  for (Entry& e : t)
    if (e.name == name) {
      for (ErrorCase& c : errors) e.error_cases.push_back(std::move(c));
      return;
    }
  throw std::logic_error("op table: error cases for " + name + ", which has no entry");
}

inline void add_error_cases(std::vector<Entry>& t) {
  using heed::Tensorf;
  using Index = heed::Tensor<std::int64_t>;
  constexpr heed::index_t kMax = std::numeric_limits<heed::index_t>::max();
  constexpr heed::index_t kMin = std::numeric_limits<heed::index_t>::min();
  {  // bmm names both shapes when batch sizes differ
    auto a = heed::zeros({2, 3, 4});
    auto b = heed::zeros({3, 4, 5});
    add_errors(t, "bmm",
               {
                   error_exactly<heed::ShapeError>("bmm: batch sizes differ: (2, 3, 4) vs (3, 4, 5)",
                                                   [=] { return heed::bmm(a, b); }),
               });
  }
  {  // binary ops name themselves and both shapes when they do not broadcast
    const auto a = heed::zeros({2, 3});
    const auto b = heed::zeros({4});
    add_errors(t, "add",
               {
                   error_exactly<heed::Error>("add: shapes (2, 3) and (4) are not broadcastable (dim 1: 3 vs 4)",
                                              [=] { return heed::add(a, b); }),
                   error<heed::ShapeError>("add: shapes (2, 3) and (4) are not broadcastable", [=] { return a + b; }),
               });
    add_errors(t, "sub",
               {
                   error<heed::ShapeError>("sub: shapes (2, 3) and (4)", [=] { return a - b; }),
               });
    add_errors(t, "mul",
               {
                   error<heed::ShapeError>("mul: shapes (2, 3) and (4)", [=] { return a * b; }),
               });
    add_errors(t, "div",
               {
                   error<heed::ShapeError>("div: shapes (2, 3) and (4)", [=] { return a / b; }),
               });
    add_errors(t, "pow",
               {
                   error<heed::ShapeError>("pow: shapes (2, 3) and (4)", [=] { return heed::pow(a, b); }),
               });
    add_errors(t, "lt",
               {
                   error<heed::ShapeError>("lt: shapes (2, 3) and (4)", [=] { return a < b; }),
               });
    add_errors(t, "eq",
               {
                   error<heed::ShapeError>("eq: shapes (2, 3) and (4)", [=] { return a == b; }),
               });
    // The logical ops, and the operators on masks, which name the op they call.
    const heed::BoolTensor p = a > 0.0, q = b > 0.0;
    add_errors(
        t, "logical_and",
        {
            error_exactly<heed::ShapeError>("logical_and: shapes (2, 3) and (4) are not broadcastable (dim 1: 3 vs 4)",
                                            [=] { return heed::logical_and(a, b); }),
            error<heed::ShapeError>("logical_and: shapes (2, 3) and (4)", [=] { return p & q; }),
            error_exactly<heed::ValueError>("logical_and: b is an undefined tensor",
                                            [=] { return p & heed::BoolTensor(); }),
        });
    add_errors(t, "logical_or",
               {
                   error<heed::ShapeError>("logical_or: shapes (4) and (2, 3)", [=] { return heed::logical_or(b, a); }),
                   error<heed::ShapeError>("logical_or: shapes (2, 3) and (4)", [=] { return p | q; }),
               });
    add_errors(
        t, "logical_xor",
        {
            error<heed::ShapeError>("logical_xor: shapes (2, 3) and (4)", [=] { return heed::logical_xor(a, b); }),
            error<heed::ShapeError>("logical_xor: shapes (2, 3) and (4)", [=] { return p ^ q; }),
        });
    add_errors(t, "logical_not",
               {
                   error_exactly<heed::ValueError>("logical_not: x is an undefined tensor",
                                                   [=] { return ~heed::BoolTensor(); }),
               });
    add_errors(t, "add",
               {
                   // The mismatch may hide in a leading dim.
                   error<heed::ShapeError>("add: shapes (2, 1, 3) and (3, 1, 1)",
                                           [=] {
                                             return heed::zeros({2, 1, 3}) + heed::zeros({3, 1, 1});
                                           }),
               });
  }
  {  // matmul names both operands when their dims do not fit
    add_errors(t, "matmul",
               {
                   error<heed::ShapeError>("matmul: inner dims differ: (2, 3) vs (4, 5)",
                                           [=] {
                                             return heed::matmul(heed::zeros({2, 3}), heed::zeros({4, 5}));
                                           }),
                   error<heed::ShapeError>("matmul: inner dims differ: (3) vs (4)",
                                           [=] { return heed::matmul(heed::zeros({3}), heed::zeros({4})); }),
                   // A 1-D operand is named as given, not as the matrix it becomes inside.
                   error<heed::ShapeError>("matmul: inner dims differ: (3) vs (2, 4, 6)",
                                           [=] {
                                             return heed::matmul(heed::zeros({3}), heed::zeros({2, 4, 6}));
                                           }),
                   error<heed::ShapeError>("matmul: inner dims differ: (2, 4, 6) vs (5)",
                                           [=] {
                                             return heed::matmul(heed::zeros({2, 4, 6}), heed::zeros({5}));
                                           }),
                   error<heed::ShapeError>("matmul: inner dims differ: (2, 3, 4) vs (5, 6)",
                                           [=] {
                                             return heed::matmul(heed::zeros({2, 3, 4}), heed::zeros({5, 6}));
                                           }),
                   error<heed::ShapeError>("matmul: inner dims differ: (3, 4) vs (2, 5, 6)",
                                           [=] {
                                             return heed::matmul(heed::zeros({3, 4}), heed::zeros({2, 5, 6}));
                                           }),
                   error<heed::ShapeError>("matmul: batch dims of (2, 3, 4) and (3, 4, 6) are not broadcastable",
                                           [=] {
                                             return heed::matmul(heed::zeros({2, 3, 4}), heed::zeros({3, 4, 6}));
                                           }),
                   error<heed::ShapeError>("matmul: both operands need at least 1 dim, got () and (2)",
                                           [=] { return heed::matmul(heed::scalar_tensor(1.f), heed::zeros({2})); }),
                   error<heed::ShapeError>("matmul: inner dims differ",
                                           [=] {
                                             return heed::zeros({2, 3}).matmul(heed::zeros({2, 3}));
                                           }),
               });
  }
  {  // bmm needs two 3-D tensors of one batch size and fitting inner dims
    add_errors(t, "bmm",
               {
                   error<heed::ShapeError>("bmm: expected 3-D tensors, got (3, 4) and (2, 4, 6)",
                                           [=] {
                                             return heed::bmm(heed::zeros({3, 4}), heed::zeros({2, 4, 6}));
                                           }),
                   error<heed::ShapeError>("bmm: expected 3-D tensors, got (2, 3, 4) and (1, 2, 4, 6)",
                                           [=] {
                                             return heed::bmm(heed::zeros({2, 3, 4}), heed::zeros({1, 2, 4, 6}));
                                           }),
                   error<heed::ShapeError>("bmm: batch sizes differ: (2, 3, 4) vs (3, 4, 5)",
                                           [=] {
                                             return heed::bmm(heed::zeros({2, 3, 4}), heed::zeros({3, 4, 5}));
                                           }),
                   error<heed::ShapeError>("bmm: inner dims differ: (2, 3, 4) vs (2, 5, 6)",
                                           [=] {
                                             return heed::bmm(heed::zeros({2, 3, 4}), heed::zeros({2, 5, 6}));
                                           }),
               });
  }
  {  // reshape rejects sizes that do not fit
    const auto x = heed::zeros({2, 3});
    add_errors(t, "reshape",
               {
                   error<heed::ShapeError>("reshape: shape (4, 2) is invalid for input of shape (2, 3) (6 elements)",
                                           [=] {
                                             return x.reshape({4, 2});
                                           }),
                   error<heed::ShapeError>("reshape: only one dim can be -1",
                                           [=] {
                                             return x.reshape({-1, -1});
                                           }),
                   error<heed::ShapeError>("reshape: cannot view shape (2, 3) (6 elements) with a -1",
                                           [=] {
                                             return x.reshape({-1, 4});
                                           }),
                   error<heed::ShapeError>("reshape: invalid size -2 at dim 0",
                                           [=] {
                                             return x.reshape({-2, -3});
                                           }),
                   error<heed::ShapeError>("reshape: rank 7 above the maximum 6",
                                           [=] {
                                             return x.reshape({1, 1, 1, 1, 1, 2, 3});
                                           }),
               });
  }
  {  // permute needs each dim exactly once
    const auto x = heed::zeros({2, 3});
    add_errors(t, "permute",
               {
                   error<heed::ShapeError>("permute: 1 dims given for a tensor of shape (2, 3)",
                                           [=] { return x.permute({0}); }),
                   error<heed::ShapeError>("permute: 3 dims given",
                                           [=] {
                                             return x.permute({0, 1, 2});
                                           }),
                   error<heed::ValueError>("permute: dim 0 repeated",
                                           [=] {
                                             return x.permute({0, 0});
                                           }),
                   error<heed::ValueError>("permute: dim -1 repeated",
                                           [=] {
                                             return x.permute({1, -1});
                                           }),
                   error<heed::IndexError>("permute: dim 2 out of range",
                                           [=] {
                                             return x.permute({2, 0});
                                           }),
               });
  }
  {  // a dim out of range is an IndexError naming the op, the dim and the rank
    const auto x = heed::zeros({2, 3});
    add_errors(t, "transpose",
               {
                   error<heed::IndexError>("transpose: dim 2 out of range for a tensor of rank 2 (expected -2 to 1)",
                                           [=] { return x.transpose(0, 2); }),
                   error<heed::IndexError>("transpose: dim -3 out of range", [=] { return x.transpose(-3, 0); }),
               });
    add_errors(
        t, "sum",
        {
            error<heed::IndexError>("sum: dim -3 out of range for a tensor of rank 2", [=] { return x.sum(-3); }),
        });
    add_errors(t, "mean",
               {
                   error<heed::IndexError>("mean: dim 2 out of range", [=] { return x.mean(2); }),
               });
    add_errors(t, "max",
               {
                   error<heed::IndexError>("max: dim 2 out of range", [=] { return x.max(2); }),
               });
    add_errors(
        t, "argmax",
        {
            error<heed::IndexError>("argmax: dim 5 out of range for a tensor of rank 2", [=] { return x.argmax(5); }),
        });
    add_errors(
        t, "softmax",
        {
            error<heed::IndexError>("softmax: dim 2 out of range for a tensor of rank 2", [=] { return x.softmax(2); }),
        });
    add_errors(t, "log_softmax",
               {
                   error<heed::IndexError>("log_softmax: dim -3 out of range", [=] { return x.log_softmax(-3); }),
               });
    add_errors(t, "squeeze",
               {
                   error<heed::IndexError>("squeeze: dim 2 out of range", [=] { return x.squeeze(2); }),
               });
    add_errors(t, "unsqueeze",
               {
                   error<heed::IndexError>("unsqueeze: dim 3 out of range for a tensor of rank 2 (expected -3 to 2)",
                                           [=] { return x.unsqueeze(3); }),
               });
    add_errors(t, "flatten",
               {
                   error<heed::IndexError>("flatten: dim 2 out of range", [=] { return x.flatten(2); }),
               });
    add_errors(t, "narrow",
               {
                   error<heed::IndexError>("narrow: dim 2 out of range", [=] { return x.narrow(2, 0, 1); }),
               });
    add_errors(t, "slice",
               {
                   error<heed::IndexError>("slice: dim 2 out of range", [=] { return x.slice(2, 0, 1); }),
               });
    add_errors(t, "select",
               {
                   error<heed::IndexError>("select: dim -3 out of range", [=] { return x.select(-3, 0); }),
               });
    add_errors(t, "index_select",
               {
                   error<heed::IndexError>("index_select: dim 2 out of range",
                                           [=] { return x.index_select(2, Index({0}, {1})); }),
               });
    add_errors(
        t, "repeat_interleave",
        {
            error<heed::IndexError>("repeat_interleave: dim 2 out of range", [=] { return x.repeat_interleave(2, 2); }),
        });
    add_errors(t, "cat",
               {
                   error<heed::IndexError>("cat: dim 2 out of range",
                                           [=] {
                                             return heed::cat<float>({x, x}, 2);
                                           }),
               });
    add_errors(t, "stack",
               {
                   error<heed::IndexError>("stack: dim 3 out of range for the result's rank 3",
                                           [=] {
                                             return heed::stack<float>({x, x}, 3);
                                           }),
               });
    add_errors(t, "sum",
               {
                   error<heed::IndexError>("sum: dim 1 out of range for a tensor of rank 0",
                                           [=] { return heed::scalar_tensor(2.f).sum(1); }),
               });
  }
  {  // ranges inside a dim are checked by narrow, select, slice and index_select
    const auto x = heed::zeros({2, 3});
    add_errors(t, "narrow",
               {
                   error<heed::IndexError>("narrow: start 2 + length 2 exceeds dim 1 of size 3 (shape (2, 3))",
                                           [=] { return x.narrow(1, 2, 2); }),
                   error<heed::IndexError>("narrow: start 4 out of range for dim 1 of size 3",
                                           [=] { return x.narrow(1, 4, 0); }),
                   error<heed::IndexError>("narrow: start -4 out of range", [=] { return x.narrow(1, -4, 1); }),
                   error<heed::IndexError>("narrow: cannot narrow a rank-0 tensor",
                                           [=] { return heed::scalar_tensor(1.f).narrow(0, 0, 1); }),
               });
    add_errors(
        t, "select",
        {
            error<heed::IndexError>("select: index 3 out of range for dim 1 of size 3", [=] { return x.select(1, 3); }),
            error<heed::IndexError>("select: index -3 out of range for dim 0 of size 2",
                                    [=] { return x.select(0, -3); }),
            error<heed::IndexError>("select: cannot select from a rank-0 tensor",
                                    [=] { return heed::scalar_tensor(1.f).select(0, 0); }),
        });
    add_errors(
        t, "slice",
        {
            error<heed::ValueError>("slice: step must be positive, got 0", [=] { return x.slice(1, 0, 3, 0); }),
            error<heed::ValueError>("slice: step must be positive, got -1", [=] { return x.slice(1, 0, 3, -1); }),
            error<heed::IndexError>("slice: cannot slice a rank-0 tensor",
                                    [=] { return heed::scalar_tensor(1.f).slice(0, 0, 1); }),
        });
    add_errors(t, "index_select",
               {
                   error<heed::IndexError>("index_select: index 3 out of range for dim 1 of size 3",
                                           [=] {
                                             return x.index_select(1, Index({0, 3}, {2}));
                                           }),
                   error<heed::IndexError>("index_select: index -1 out of range for dim 0 of size 2",
                                           [=] { return x.index_select(0, Index({-1}, {1})); }),
                   error<heed::ShapeError>("index_select: index must be 1-D, got shape (1, 2)",
                                           [=] {
                                             return x.index_select(0, Index({0, 1}, {1, 2}));
                                           }),
                   // It wrote past the rank-0 result's one element.
                   error<heed::ShapeError>("index_select: a rank-0 x takes an index of one value, got 2",
                                           [=] {
                                             return heed::scalar_tensor(1.f).index_select(0, Index({0, 0}, {2}));
                                           }),
               });
  }
  {  // cat and stack name the tensor that does not fit
    const auto a = heed::zeros({2, 3});
    add_errors(
        t, "cat",
        {
            error<heed::ShapeError>("cat: tensor 1 has shape (3, 3), expected (2, 3) except at dim 1",
                                    [=] {
                                      return heed::cat<float>({a, heed::zeros({3, 3})}, 1);
                                    }),
            error<heed::ShapeError>("cat: tensor 2 has shape (3), expected (2, 3) except at dim 0",
                                    [=] {
                                      return heed::cat<float>({a, a, heed::zeros({3})}, 0);
                                    }),
            error<heed::ValueError>("cat: expected a non-empty list of tensors",
                                    [=] { return heed::cat<float>({}, 0); }),
            error<heed::ShapeError>("cat: rank-0 tensors cannot be concatenated",
                                    [=] {
                                      return heed::cat<float>({heed::scalar_tensor(1.f), heed::scalar_tensor(2.f)});
                                    }),
        });
    add_errors(t, "stack",
               {
                   error<heed::ShapeError>("stack: tensor 1 has shape (3, 2), expected (2, 3)",
                                           [=] {
                                             return heed::stack<float>({a, heed::zeros({3, 2})});
                                           }),
                   error<heed::ValueError>("stack: expected a non-empty list of tensors",
                                           [=] { return heed::stack<float>({}); }),
               });
  }
  {  // repeat, repeat_interleave and expand reject what they cannot tile
    const auto x = heed::zeros({2, 3});
    add_errors(t, "repeat",
               {
                   error<heed::ShapeError>("repeat: 1 repeats for a tensor of shape (2, 3) (need at least one per dim)",
                                           [=] { return x.repeat({2}); }),
                   error<heed::ValueError>("repeat: negative repeat count -1",
                                           [=] {
                                             return x.repeat({2, -1});
                                           }),
                   error<heed::ShapeError>("repeat: rank 7 above the maximum 6",
                                           [=] {
                                             return x.repeat({1, 1, 1, 1, 1, 1, 1});
                                           }),
               });
    add_errors(t, "repeat_interleave",
               {
                   error<heed::ValueError>("repeat_interleave: negative repeat count -1",
                                           [=] { return x.repeat_interleave(-1, 0); }),
               });
    add_errors(
        t, "expand",
        {
            error<heed::ShapeError>("expand: shape (2, 3) cannot be expanded to (4, 3)",
                                    [=] {
                                      return x.expand({4, 3});
                                    }),
            error<heed::ShapeError>("expand: shape (2, 3) cannot be expanded to (3)", [=] { return x.expand({3}); }),
            error<heed::ShapeError>("expand: shape (2, 3) cannot be expanded to (2, 2, 6)",
                                    [=] {
                                      return x.expand({2, 2, 6});
                                    }),
        });
  }
  {  // flatten and squeeze of what is not there
    const auto x = heed::zeros({2, 3, 4});
    add_errors(t, "flatten",
               {
                   error<heed::ValueError>("flatten: start_dim 2 after end_dim 1", [=] { return x.flatten(2, 1); }),
               });
  }
  {  // reductions of nothing are refused where they have no value
    add_errors(t, "mean",
               {
                   error<heed::ValueError>("mean: empty tensor of shape (0)", [=] { return heed::zeros({0}).mean(); }),
                   error<heed::ValueError>("mean: dim 1 of shape (2, 0) is empty",
                                           [=] {
                                             return heed::zeros({2, 0}).mean(1);
                                           }),
               });
    add_errors(t, "max",
               {
                   error<heed::ValueError>("max: empty tensor of shape (2, 0)",
                                           [=] {
                                             return heed::zeros({2, 0}).max();
                                           }),
                   error<heed::ValueError>("max: cannot reduce over dim 1 of size 0 (shape (2, 0))",
                                           [=] {
                                             return heed::zeros({2, 0}).max(1);
                                           }),
               });
    add_errors(t, "argmax",
               {
                   error<heed::ValueError>("argmax: cannot reduce over dim 1 of size 0",
                                           [=] {
                                             return heed::zeros({2, 0}).argmax(1);
                                           }),
               });
  }
  {  // where and masked_fill need masks that broadcast
    const auto x = heed::zeros({2, 2});
    const auto bad_mask = heed::zeros({3}) > 0.0;
    add_errors(t, "where",
               {
                   error<heed::ShapeError>("where: shapes (3) and (2, 2) are not broadcastable",
                                           [=] { return heed::where(bad_mask, x, x); }),
                   error<heed::ShapeError>("where: shapes (2, 2) and (3) are not broadcastable",
                                           [=] {
                                             return heed::where(heed::zeros({2, 2}) > 0.0, x, heed::zeros({3}));
                                           }),
               });
    add_errors(t, "masked_fill",
               {
                   error<heed::ShapeError>("masked_fill: mask of shape (3) does not broadcast to (2, 2)",
                                           [=] { return heed::masked_fill(x, bad_mask, 1.f); }),
                   // A mask may not enlarge the tensor it fills.
                   error<heed::ShapeError>("masked_fill: mask of shape (2, 2) does not broadcast to (2)",
                                           [=] {
                                             return heed::masked_fill(heed::zeros({2}), heed::zeros({2, 2}) > 0.0, 1.f);
                                           }),
               });
  }
  {  // using an undefined tensor is a ValueError, not a crash
    const Tensorf undefined;
    add_errors(t, "sum",
               {
                   // An op names itself and the argument.
                   error<heed::ValueError>("sum: x is an undefined tensor", [=] { return undefined.sum(); }),
               });
    add_errors(
        t, "add",
        {
            error<heed::ValueError>("add: a is an undefined tensor", [=] { return undefined + heed::zeros({2}); }),
        });
    add_errors(
        t, "mul",
        {
            error<heed::ValueError>("mul: b is an undefined tensor", [=] { return heed::zeros({2}) * undefined; }),
        });
    add_errors(t, "reshape",
               {
                   error<heed::ValueError>("reshape: x is an undefined tensor", [=] { return undefined.reshape({2}); }),
               });
    add_errors(t, "cat",
               {
                   error<heed::ValueError>("cat: tensor 1 is an undefined tensor",
                                           [=] {
                                             return heed::cat<float>({heed::zeros({2}), undefined});
                                           }),
               });
    add_errors(t, "matmul",
               {
                   error<heed::ValueError>("matmul: a is an undefined tensor",
                                           [=] { return heed::matmul(undefined, undefined); }),
               });
  }
  {  // reshape of sizes whose product overflows is a ValueError
    const auto x = heed::zeros({2, 3});
    const heed::index_t huge = heed::index_t(1) << 40;
    add_errors(t, "reshape",
               {
                   error<heed::ValueError>(
                       "reshape: 1099511627776 * 1099511627776 overflows int64 (sizes asked of shape (2, 3))",
                       [=] {
                         return x.reshape({huge, huge, -1});
                       }),
                   error<heed::ValueError>("reshape: 1099511627776 * 1099511627776 overflows int64",
                                           [=] {
                                             return x.reshape({huge, huge});
                                           }),
                   error<heed::ShapeError>("reshape: shape (1099511627776, 0) is invalid for input of shape (2, 3)",
                                           [=] {
                                             return x.reshape({huge, 0});
                                           }),
               });
  }
  {  // narrow and slice with bounds and steps near INT64_MAX
    const auto x = heed::arange(0, 6).reshape({2, 3});
    add_errors(t, "narrow",
               {
                   error<heed::IndexError>("narrow: start 1 + length 9223372036854775807 exceeds dim 1 of size 3",
                                           [=] { return x.narrow(1, 1, kMax); }),
                   error<heed::IndexError>("narrow: start 1 + length 9223372036854775807 exceeds dim 0 of size 3",
                                           [=] { return heed::zeros({3}).narrow(0, 1, kMax); }),
                   error<heed::IndexError>("narrow: start -9223372036854775808 out of range",
                                           [=] { return x.narrow(1, kMin, 1); }),
               });
    add_errors(t, "select",
               {
                   error<heed::IndexError>("select: index 9223372036854775807 out of range",
                                           [=] { return x.select(1, kMax); }),
               });
  }
  {  // repeat, repeat_interleave, expand and cat refuse sizes that overflow
    const auto x = heed::zeros({2, 3});
    const auto wide = heed::zeros({0, heed::index_t(1) << 62});
    add_errors(
        t, "repeat_interleave",
        {
            error<heed::ValueError>(
                "repeat_interleave: 2 * 9223372036854775807 overflows int64 (dim 0 of shape (2, 3))",
                [=] { return x.repeat_interleave(kMax, 0); }),
            error<heed::ValueError>(
                "repeat_interleave: 3 * 4611686018427387904 overflows int64 (dim 1 of shape (2, 3))",
                [=] { return x.repeat_interleave(heed::index_t(1) << 62, 1); }),
            error<heed::ValueError>(
                "repeat_interleave: shape (4294967296, 0, 4294967296) has more than",
                [=] {
                  return heed::zeros({heed::index_t(1) << 32, 0, 1}).repeat_interleave(heed::index_t(1) << 32, 2);
                }),
        });
    add_errors(t, "repeat",
               {
                   error<heed::ValueError>(
                       "repeat: 4611686018427387904 * 2 overflows int64 (4611686018427387904 repeats of dim 0",
                       [=] {
                         return x.repeat({heed::index_t(1) << 62, 1});
                       }),
                   error<heed::ValueError>("repeat: shape (2199023255552, 3298534883328) has more than",
                                           [=] {
                                             return x.repeat({heed::index_t(1) << 40, heed::index_t(1) << 40});
                                           }),
               });
    add_errors(t, "expand",
               {
                   error<heed::ValueError>(
                       "expand: shape (1099511627776, 1099511627776) has more than",
                       [=] {
                         return heed::zeros({1, 1}).expand({heed::index_t(1) << 40, heed::index_t(1) << 40});
                       }),
               });
    add_errors(t, "cat",
               {
                   error<heed::ValueError>(
                       "cat: 4611686018427387904 + 4611686018427387904 overflows int64 (the sizes of dim 1)",
                       [=] {
                         return heed::cat<float>({wide, wide}, 1);
                       }),
               });
  }
  {  // float valid_lens must be whole numbers within int64
    const auto scores = heed::zeros({2, 2, 3});
    add_errors(
        t, "masked_softmax",
        {
            error<heed::ValueError>(
                "masked_softmax: valid_lens must be whole numbers that fit in int64, got 1e+30 at flat index 0 of "
                "shape (2)",
                [=] {
                  return heed::masked_softmax(scores, Tensorf({1e30f, 1}, {2}));
                }),
        });
  }
  {  // gather and scatter_add check the index's rank, sizes and values
    const auto x = heed::zeros({2, 3});
    const auto src = heed::ones({2, 2});
    add_errors(
        t, "gather",
        {
            error<heed::ShapeError>("gather: index of shape (2) must have the rank of the input, of shape (2, 3)",
                                    [=] {
                                      return heed::gather(x, 1, Index({0, 1}, {2}));
                                    }),
            error<heed::IndexError>("gather: index 3 out of range for dim 1 of size 3 (input of shape (2, 3))",
                                    [=] {
                                      return x.gather(1, Index({0, 3}, {1, 2}));
                                    }),
            error<heed::IndexError>("gather: index -1 out of range for dim 0 of size 2",
                                    [=] {
                                      return x.gather(0, Index({-1}, {1, 1}));
                                    }),
            error<heed::ShapeError>("gather: index of shape (3, 1) is larger than the input, of shape (2, 3), at dim 0",
                                    [=] {
                                      return x.gather(1, Index({0, 0, 0}, {3, 1}));
                                    }),
            error<heed::IndexError>("gather: dim 2 out of range for a tensor of rank 2",
                                    [=] {
                                      return x.gather(2, Index({0}, {1, 1}));
                                    }),
        });
    add_errors(
        t, "scatter_add",
        {
            error<heed::ShapeError>("scatter_add: src of shape (4) must have the rank of the input, of shape (2, 3)",
                                    [=] {
                                      return heed::scatter_add(x, 1, Index({0, 1}, {1, 2}), heed::ones({4}));
                                    }),
            error<heed::ShapeError>("scatter_add: index of shape (3) must have the rank of the input, of shape (2, 3)",
                                    [=] {
                                      return x.scatter_add(1, Index({0, 1, 2}, {3}), src);
                                    }),
            error<heed::ShapeError>("scatter_add: index of shape (1, 3) is larger than src, of shape (2, 2), at dim 1",
                                    [=] {
                                      return x.scatter_add(1, Index({0, 1, 2}, {1, 3}), src);
                                    }),
            error<heed::ShapeError>(
                "scatter_add: index of shape (3, 1) is larger than the input, of shape (2, 3), at dim 0",
                [=] {
                  return x.scatter_add(1, Index({0, 1, 2}, {3, 1}), heed::ones({3, 1}));
                }),
            error<heed::IndexError>("scatter_add: index 4 out of range for dim 1 of size 3 (input of shape (2, 3))",
                                    [=] {
                                      return x.scatter_add(1, Index({1, 4}, {1, 2}), src);
                                    }),
            error<heed::IndexError>("scatter_add: dim -3 out of range",
                                    [=] {
                                      return x.scatter_add(-3, Index({0}, {1, 1}), src);
                                    }),
        });
  }
  {  // masked_select needs a mask that broadcasts with the input
    const auto x = heed::zeros({2, 3});
    add_errors(t, "masked_select",
               {
                   error<heed::ShapeError>("masked_select: shapes (2, 3) and (4) are not broadcastable",
                                           [=] { return heed::masked_select(x, heed::zeros({4}) > 0.0); }),
                   error<heed::ShapeError>("masked_select: shapes (2, 3) and (3, 3) are not broadcastable",
                                           [=] {
                                             return x.masked_select(heed::zeros({3, 3}) == 0.0);
                                           }),
               });
  }
  {  // sort, argsort and topk check the dim and k
    const auto x = heed::zeros({2, 3});
    add_errors(t, "sort",
               {
                   error<heed::IndexError>("sort: dim 2 out of range for a tensor of rank 2",
                                           [=] { return heed::sort(x, 2); }),
                   error<heed::IndexError>("sort: dim -3 out of range", [=] { return x.sort(-3); }),
               });
    add_errors(t, "argsort",
               {
                   error<heed::IndexError>("argsort: dim 2 out of range for a tensor of rank 2",
                                           [=] { return heed::argsort(x, 2, true); }),
               });
    add_errors(
        t, "topk",
        {
            error<heed::IndexError>("topk: k = 4 out of range for dim 1 of size 3 (shape (2, 3))",
                                    [=] { return heed::topk(x, 4); }),
            error<heed::IndexError>("topk: k = 3 out of range for dim 0 of size 2 (shape (2, 3))",
                                    [=] { return x.topk(3, 0); }),
            error<heed::IndexError>("topk: k = -1 out of range for dim 1 of size 3", [=] { return x.topk(-1); }),
            error<heed::IndexError>("topk: dim 2 out of range for a tensor of rank 2", [=] { return x.topk(1, 2); }),
        });
  }
  {  // split and chunk need sizes that add up and positive counts
    const auto x = heed::zeros({2, 5});
    add_errors(
        t, "split",
        {
            error<heed::ValueError>("split: the split sizes add up to 4, but dim 1 of shape (2, 5) has size 5",
                                    [=] {
                                      return heed::split(x, std::vector<heed::index_t>{1, 3}, 1);
                                    }),
            error<heed::ValueError>("split: the split sizes add up to 6, but dim 1 of shape (2, 5) has size 5",
                                    [=] {
                                      return x.split(std::vector<heed::index_t>{2, 2, 2}, 1);
                                    }),
            error<heed::ValueError>("split: negative size -1 among the split sizes",
                                    [=] {
                                      return x.split(std::vector<heed::index_t>{6, -1}, 1);
                                    }),
            error<heed::ValueError>("split: split_size must be positive, got 0 for dim 0 of shape (2, 5)",
                                    [=] { return x.split(0); }),
            error<heed::ValueError>("split: split_size must be positive, got -2 for dim 1",
                                    [=] { return x.split(-2, 1); }),
            error<heed::IndexError>("split: dim 2 out of range for a tensor of rank 2", [=] { return x.split(1, 2); }),
            error<heed::IndexError>("split: cannot split a rank-0 tensor",
                                    [=] { return heed::scalar_tensor(1.f).split(1); }),
        });
    add_errors(
        t, "chunk",
        {
            error<heed::ValueError>("chunk: the number of chunks must be positive, got 0",
                                    [=] { return heed::chunk(x, 0); }),
            error<heed::ValueError>("chunk: the number of chunks must be positive, got -1",
                                    [=] { return x.chunk(-1, 1); }),
            error<heed::IndexError>("chunk: dim -3 out of range", [=] { return x.chunk(2, -3); }),
            error<heed::IndexError>("chunk: cannot chunk a rank-0 tensor",
                                    [=] { return heed::scalar_tensor(1.f).chunk(2); }),
            error<heed::OutOfMemoryError>("chunk: 1099511627776 × ",
                                          [=] { return heed::zeros({0}).chunk(heed::index_t(1) << 40); }),
            error<heed::ValueError>("chunk: 9223372036854775807 * ",
                                    [=] { return heed::zeros({0}).chunk(std::numeric_limits<heed::index_t>::max()); }),
        });
  }
  {  // slice_scatter and select_scatter need a src that fits the slice
    const auto x = heed::zeros({2, 4});
    add_errors(
        t, "slice_scatter",
        {
            error<heed::ShapeError>(
                "slice_scatter: src of shape (2, 3) does not fit the slice 0:4:2 of dim 1 of shape (2, 4), of shape "
                "(2, 2)",
                [=] {
                  return heed::slice_scatter(x, heed::ones({2, 3}), 1, 0, 4, 2);
                }),
            error<heed::ShapeError>("slice_scatter: src of shape (4) does not fit the slice 1:2:1 of dim 0",
                                    [=] { return heed::slice_scatter(x, heed::ones({4}), 0, 1, 2); }),
            error<heed::ValueError>("slice_scatter: step must be positive, got 0",
                                    [=] {
                                      return heed::slice_scatter(x, heed::ones({2, 2}), 1, 0, 4, 0);
                                    }),
            error<heed::IndexError>("slice_scatter: dim 2 out of range",
                                    [=] { return heed::slice_scatter(x, x, 2, 0, 1); }),
            error<heed::IndexError>(
                "slice_scatter: cannot slice a rank-0 tensor",
                [=] { return heed::slice_scatter(heed::scalar_tensor(1.f), heed::scalar_tensor(2.f), 0, 0, 1); }),
        });
    add_errors(t, "select_scatter",
               {
                   error<heed::IndexError>("select_scatter: index 4 out of range for dim 1 of size 4",
                                           [=] { return heed::select_scatter(x, heed::ones({2}), 1, 4); }),
                   error<heed::IndexError>("select_scatter: index -3 out of range for dim 0 of size 2",
                                           [=] { return heed::select_scatter(x, heed::ones({4}), 0, -3); }),
                   error<heed::ShapeError>("select_scatter: src of shape (2, 4) does not fit the slice at index 0 of "
                                           "dim 0 of shape (2, 4), of shape (4)",
                                           [=] { return heed::select_scatter(x, x, 0, 0); }),
                   // src of the right rank but the wrong size: the message names select_scatter and the src given.
                   error<heed::ShapeError>("select_scatter: src of shape (3)",
                                           [=] { return heed::select_scatter(x, heed::ones({3}), 0, 1); }),
                   error<heed::IndexError>(
                       "select_scatter: cannot select from a rank-0 tensor",
                       [=] { return heed::select_scatter(heed::scalar_tensor(1.f), heed::scalar_tensor(2.f), 0, 0); }),
               });
  }
  {  // t and mT need the rank they transpose
    add_errors(t, "t",
               {
                   error<heed::ShapeError>("t: expects a tensor of at most 2 dims, got shape (2, 3, 4)",
                                           [=] {
                                             return heed::zeros({2, 3, 4}).t();
                                           }),
               });
    add_errors(t, "mT",
               {
                   error<heed::ShapeError>("mT: expects a tensor of at least 2 dims, got shape (3)",
                                           [=] { return heed::zeros({3}).mT(); }),
                   error<heed::ShapeError>("mT: expects a tensor of at least 2 dims, got shape ()",
                                           [=] { return heed::scalar_tensor(1.f).mT(); }),
               });
    add_errors(t, "select",
               {
                   error<heed::IndexError>("select: index 2 out of range for dim 0 of size 2",
                                           [=] {
                                             return heed::zeros({2, 3})[2];
                                           }),
                   error<heed::IndexError>("select: cannot select from a rank-0 tensor",
                                           [=] { return heed::scalar_tensor(1.f)[0]; }),
               });
  }
  {  // clamp needs a bound, and no NaN
    const auto x = heed::zeros({2, 3});
    const double nan = std::numeric_limits<double>::quiet_NaN();
    add_errors(t, "clamp",
               {
                   error<heed::ValueError>("clamp: at least one of min and max must be given",
                                           [=] { return heed::clamp(x, std::nullopt); }),
                   error<heed::ValueError>("clamp: at least one of min and max must be given",
                                           [=] { return x.clamp(std::nullopt, std::nullopt); }),
                   error<heed::ValueError>("clamp: a NaN bound", [=] { return x.clamp(nan); }),
                   error<heed::ValueError>("clamp: a NaN bound", [=] { return x.clamp_max(nan); }),
                   error<heed::ValueError>("clamp: a NaN bound", [=] { return heed::clamp(x, 0.0, nan); }),
                   error<heed::ValueError>("clamp: at least one of min and max",
                                           [=] { return heed::clamp(heed::zeros<double>({0}), {}, {}); }),
               });
  }
  {  // reductions over dims refuse repeated dims, bad corrections and groups of nothing
    using Dims = std::vector<int>;
    const auto x = heed::zeros({2, 3});
    const auto scalar = heed::scalar_tensor(2.f);
    const auto empty = heed::zeros({2, 0});
    add_errors(t, "sum",
               {
                   error<heed::ValueError>("sum: dim 0 appears twice in [0, 0] (shape (2, 3))",
                                           [=] {
                                             return heed::sum(x, Dims{0, 0});
                                           }),
               });
    add_errors(t, "mean",
               {
                   error<heed::ValueError>("mean: dim -1 appears twice in [1, -1] (shape (2, 3))",
                                           [=] {
                                             return x.mean(Dims{1, -1}, true);
                                           }),
               });
    add_errors(t, "var",
               {
                   error<heed::ValueError>("var: dim -2 appears twice in [0, 1, -2] (shape (2, 3))",
                                           [=] {
                                             return x.var(Dims{0, 1, -2});
                                           }),
               });
    add_errors(t, "sum",
               {
                   error<heed::IndexError>("sum: dim 2 out of range for a tensor of rank 2",
                                           [=] {
                                             return x.sum(Dims{0, 2});
                                           }),
               });
    add_errors(t, "var",
               {
                   error<heed::IndexError>("var: dim -3 out of range", [=] { return heed::var(x, -3); }),
                   error<heed::ValueError>("var: correction must be non-negative, got -1",
                                           [=] { return x.var(1, false, -1.0); }),
               });
    add_errors(t, "std",
               {
                   // std reports under its own name.
                   error<heed::ValueError>("std: dim 1 appears twice in [1, 1]",
                                           [=] {
                                             return x.std(Dims{1, 1});
                                           }),
               });
    add_errors(t, "sum",
               {
                   error<heed::ValueError>("sum: dim 0 appears twice in [0, 0] (shape ())",
                                           [=] {
                                             return heed::sum(scalar, Dims{0, 0});
                                           }),
               });
    add_errors(t, "mean",
               {
                   error<heed::ValueError>("mean: dim -1 appears twice in [0, -1] (shape ())",
                                           [=] {
                                             return scalar.mean(Dims{0, -1});
                                           }),
                   error<heed::ValueError>("mean: the dims [1] of shape (2, 0) hold no element",
                                           [=] { return empty.mean(Dims{1}); }),
                   error<heed::ValueError>("mean: the dims [] of shape (2, 0) hold no element",
                                           [=] { return heed::mean(empty, Dims{}); }),
                   error<heed::ValueError>("mean: the dims [0, 1] of shape (2, 0) hold no element",
                                           [=] {
                                             return empty.mean(Dims{0, 1}, true);
                                           }),
               });
    add_errors(
        t, "var",
        {
            error<heed::ValueError>("var: the dims [] of shape (2, 0) hold no element", [=] { return empty.var(); }),
            error<heed::ValueError>("var: the dims [-1] of shape (2, 0) hold no element",
                                    [=] { return empty.var(-1); }),
        });
    add_errors(t, "min",
               {
                   // min, argmin and prod, over everything and along a dim.
                   error<heed::ValueError>("min: empty tensor of shape (2, 0)", [=] { return empty.min(); }),
                   error<heed::ValueError>("min: cannot reduce over dim 1 of size 0 (shape (2, 0))",
                                           [=] { return empty.min(1); }),
                   error<heed::ValueError>("min: cannot reduce over dim 1 of size 0",
                                           [=] { return heed::min_with_indices(empty, 1); }),
               });
    add_errors(t, "max",
               {
                   error<heed::ValueError>("max: cannot reduce over dim 1 of size 0 (shape (2, 0))",
                                           [=] { return heed::max_with_indices(empty, -1); }),
               });
    add_errors(t, "argmin",
               {
                   error<heed::ValueError>("argmin: empty tensor of shape (2, 0)", [=] { return empty.argmin(); }),
               });
    add_errors(t, "argmax",
               {
                   error<heed::ValueError>("argmax: empty tensor of shape (2, 0)", [=] { return empty.argmax(); }),
               });
    add_errors(
        t, "argmin",
        {
            error<heed::ValueError>("argmin: cannot reduce over dim 1 of size 0", [=] { return empty.argmin(1); }),
        });
    add_errors(t, "min",
               {
                   error<heed::IndexError>("min: dim 2 out of range for a tensor of rank 2", [=] { return x.min(2); }),
               });
    add_errors(t, "argmin",
               {
                   error<heed::IndexError>("argmin: dim -3 out of range", [=] { return x.argmin(-3); }),
               });
    add_errors(
        t, "prod",
        {
            error<heed::IndexError>("prod: dim 2 out of range for a tensor of rank 2", [=] { return x.prod(2); }),
        });
  }
  {  // mse_loss and l1_loss need input and target of one shape
    const auto input = heed::zeros({2, 3});
    add_errors(t, "mse_loss",
               {
                   error<heed::ShapeError>("mse_loss: input of shape (2, 3) and target of shape (3) differ",
                                           [=] { return heed::mse_loss(input, heed::zeros({3})); }),
               });
    add_errors(t, "l1_loss",
               {
                   error<heed::ShapeError>("l1_loss: input of shape (2, 3) and target of shape (3, 2) differ",
                                           [=] {
                                             return heed::l1_loss(input, heed::zeros({3, 2}), heed::Reduction::sum);
                                           }),
               });
    add_errors(t, "mse_loss",
               {
                   error<heed::ShapeError>("mse_loss: input of shape (2, 3) and target of shape (2, 1) differ",
                                           [=] {
                                             return heed::mse_loss(input, heed::zeros({2, 1}), heed::Reduction::none);
                                           }),
               });
    add_errors(t, "l1_loss",
               {
                   error<heed::ShapeError>("l1_loss: input of shape () and target of shape (1)",
                                           [=] { return heed::l1_loss(heed::scalar_tensor(1.f), heed::zeros({1})); }),
               });
  }
  {  // the same tests' errors checked by a fragment that does not begin with the op's name
    const auto x = heed::zeros({2, 3});
    add_errors(t, "narrow", {error<heed::IndexError>("length -1 exceeds", [=] { return x.narrow(1, 1, -1); })});
    const auto scores = heed::zeros({2, 2, 3});
    const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
    add_errors(t, "masked_softmax",
               {error<heed::ValueError>("got nan at flat index 1 of shape (2)",
                                        [=] {
                                          return heed::masked_softmax(scores, Tensorf({1, nan}, {2}));
                                        }),
                error<heed::ValueError>("got inf at flat index 3 of shape (2, 2)",
                                        [=] {
                                          return heed::masked_softmax(scores, Tensorf({1, 1, 1, inf}, {2, 2}));
                                        }),
                error<heed::ValueError>("got -1e+30 at flat index 0",
                                        [=] {
                                          return heed::masked_softmax(scores, Tensorf({-1e30f, 1}, {2}));
                                        }),
                error<heed::ValueError>("got 1.5 at flat index 1", [=] {
                  return heed::masked_softmax(scores, Tensorf({1, 1.5f}, {2}));
                })});
    add_errors(t, "chunk", {error<heed::OutOfMemoryError>("(empty pieces of dim 0 of shape (0, 2))", [=] {
                 return heed::zeros({0, 2}).chunk(heed::index_t(1) << 40);
               })});
    const auto xf = heed::zeros<float>({2, 3});
    add_errors(t, "layer_norm",
               {error<heed::ShapeError>("normalized_shape (3, 2)",
                                        [=] {
                                          return heed::layer_norm(xf, Shape{3, 2});
                                        }),
                error<heed::ShapeError>("layer_norm", [=] { return heed::layer_norm(xf, Shape{}); })});
  }
  // From tests/test_ops.cpp.
  {  // layer_norm checks normalized_shape, weight, bias and eps
    const auto x = heed::zeros<float>({2, 3});
    add_errors(
        t, "layer_norm",
        {
            error<heed::ShapeError>("layer_norm: input of shape (2, 3) does not end in normalized_shape (4)",
                                    [=] { return heed::layer_norm(x, Shape{4}); }),
            error<heed::ShapeError>("layer_norm: input of shape (2, 3) does not end in normalized_shape (1, 2, 3)",
                                    [=] {
                                      return heed::layer_norm(x, Shape{1, 2, 3});
                                    }),
            error<heed::ShapeError>("layer_norm: weight of shape (2) does not match normalized_shape (3)",
                                    [=] { return heed::layer_norm(x, Shape{3}, heed::ones<float>({2})); }),
            error<heed::ShapeError>("layer_norm: weight of shape (1, 3) does not match normalized_shape (3)",
                                    [=] {
                                      return heed::layer_norm(x, Shape{3}, heed::ones<float>({1, 3}));
                                    }),
            error<heed::ShapeError>(
                "layer_norm: bias of shape (4) does not match normalized_shape (3)",
                [=] { return heed::layer_norm(x, Shape{3}, heed::ones<float>({3}), heed::zeros<float>({4})); }),
            error<heed::ShapeError>("layer_norm: bias of shape (2) does not match normalized_shape (2, 3)",
                                    [=] {
                                      return heed::layer_norm(x, Shape{2, 3}, heed::Tensorf(), heed::zeros<float>({2}));
                                    }),
            error<heed::ValueError>("layer_norm: eps must be finite and >= 0, got -1",
                                    [=] { return heed::layer_norm(x, Shape{3}, {}, {}, -1.0); }),
            error<heed::ValueError>("layer_norm: eps", [=] { return heed::layer_norm(x, Shape{3}, {}, {}, -1e-5); }),
            error<heed::ValueError>(
                "layer_norm: eps",
                [=] { return heed::layer_norm(x, Shape{3}, {}, {}, std::numeric_limits<double>::infinity()); }),
            error<heed::ValueError>(
                "layer_norm: eps",
                [=] { return heed::layer_norm(x, Shape{3}, {}, {}, std::numeric_limits<double>::quiet_NaN()); }),
        });
  }
  {  // embedding checks its table and indices
    const auto weight = heed::zeros<float>({4, 3});
    add_errors(
        t, "embedding",
        {
            error<heed::IndexError>(
                "embedding: index 4 at flat position 1 of indices (3) is out of range for 4 embeddings",
                [=] {
                  return heed::embedding(weight, heed::IndexTensor({0, 4, 1}, Shape{3}));
                }),
            error<heed::IndexError>("embedding: index 100",
                                    [=] {
                                      return heed::embedding(weight, heed::IndexTensor({100}, Shape{1, 1}));
                                    }),
            error<heed::IndexError>("embedding: index -1 at flat position 3 of indices (2, 2)",
                                    [=] {
                                      return heed::embedding(weight, heed::IndexTensor({0, 1, 2, -1}, Shape{2, 2}));
                                    }),
            error<heed::ShapeError>(
                "embedding: weight must be (num_embeddings, embedding_dim), got (12)",
                [=] { return heed::embedding(heed::zeros<float>({12}), heed::IndexTensor({0}, Shape{1})); }),
            error<heed::ShapeError>(
                "embedding: weight must be (num_embeddings, embedding_dim), got (2, 2, 3)",
                [=] {
                  return heed::embedding(heed::zeros<float>({2, 2, 3}), heed::IndexTensor({0}, Shape{1}));
                }),
            error<heed::ValueError>("embedding: indices is an undefined tensor",
                                    [=] { return heed::embedding(weight, heed::IndexTensor()); }),
        });
  }
}

}  // namespace heed_test::op_table
