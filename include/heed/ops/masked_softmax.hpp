// heed/ops/masked_softmax.hpp — softmax over the keys with some keys masked out.
//
//   scores:     (batch, num_queries, num_keys) or (batch, heads, num_queries, num_keys)
//   valid_lens: (batch)                       the same length for every query (and head)
//               (batch, num_queries)          one length per query (same for every head)
//               (batch, heads, num_queries)   one per head and query (4-D scores)
//   masked_softmax(scores, valid_lens): keys at or past a row's valid length get weight 0
//
// The mask's forms (valid lengths, boolean, additive, causal) are AttentionMask's
// (heed/ops/attention_mask.hpp).
//
// A row with every key masked gives all-zero weights, never NaN, and a zero gradient;
// d2l instead fills masked scores with -1e6, which turns such a row into a uniform
// average: mask.with_uniform_when_fully_masked() gives d2l's numbers (weights 1/num_keys
// in such rows, still a zero gradient; CPU only). Masked keys get exactly 0 (not exp(-1e6)) and a zero gradient. A
// valid length at or above num_keys masks nothing, as in d2l. The additive mask is a constant: no gradient flows into
// it.
#pragma once

#include "heed/detail/header_begin.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "heed/detail/rules.hpp"
#include "heed/ops/attention_mask.hpp"
#include "heed/ops/softmax.hpp"

namespace heed {

namespace detail {

/// Keeps a parameter out of template argument deduction, so that an IndexTensor or a
/// BoolTensor converts to AttentionMask<T> with T taken from the scores.
template <typename U>
struct Identity {
  using type = U;
};
template <typename U>
using NonDeduced = typename Identity<U>::type;

/// Per-row view of a mask operand broadcast to the scores: the offset of each row's
/// first element and the stride along the keys (0 when broadcast over them).
struct MaskRows {
  std::vector<index_t> offsets;
  index_t key_stride = 0;
};

inline void check_mask_shape(const Shape& mask, const Shape& scores, const char* what) {
  HEED_CHECK(
      mask.rank() <= scores.rank() && broadcastable(mask, scores) && broadcast_shapes(mask, scores, "") == scores,
      ShapeError, "masked_softmax: ", what, " of shape ", to_string(mask), " does not broadcast to the scores' shape ",
      to_string(scores));
}

inline MaskRows mask_rows(const Shape& mask, const Shape& scores, const char* what) {
  check_mask_shape(mask, scores, what);
  const auto strides = broadcast_strides(mask, scores);
  const int rank = scores.rank();
  MaskRows rows;
  rows.key_stride = strides[rank - 1];
  const index_t count = scores.numel() / std::max<index_t>(scores[-1], 1);
  rows.offsets.resize(static_cast<std::size_t>(count));
  for (index_t r = 0; r < count; ++r) {
    index_t rest = r, offset = 0;
    for (int d = rank - 2; d >= 0; --d) {
      offset += (rest % scores[d]) * strides[d];
      rest /= scores[d];
    }
    rows.offsets[static_cast<std::size_t>(r)] = offset;
  }
  return rows;
}

/// The valid length of each row of the scores, from d2l's 1-D or 2-D valid_lens or one
/// length per row; values past num_keys are clipped to it.
/// Which form valid_lens of shape `s` take for these scores; ShapeError if none.
inline LensForm valid_lens_form(const Shape& s, const Shape& scores) {
  using Lens = LensForm;
  const index_t batch = scores[0], num_queries = scores[-2];
  Shape per_row;
  for (int d = 0; d + 1 < scores.rank(); ++d) per_row.push_back(scores[d]);
  if (s == Shape{batch}) return Lens::per_batch;
  if (s == Shape{batch, num_queries}) return Lens::per_query;
  // For 3-D scores the per-row form is the per-query one: name it once.
  HEED_CHECK(s == per_row, ShapeError, "masked_softmax: valid_lens of shape ", to_string(s),
             " do not fit scores of shape ", to_string(scores), "; expected (", batch, ")",
             per_row == Shape{batch, num_queries} ? " or " : ", ", "(", batch, ", ", num_queries, ")",
             per_row == Shape{batch, num_queries} ? std::string() : " or " + to_string(per_row));
  return Lens::per_row;
}

inline std::vector<index_t> row_valid_lens(const IndexTensor& valid_lens, const Shape& scores) {
  const index_t batch = scores[0], num_queries = scores[-2], num_keys = scores[-1];
  const index_t rows = scores.numel() / std::max<index_t>(num_keys, 1);
  const Shape& s = valid_lens.shape();
  const auto form = valid_lens_form(s, scores);
  const bool per_batch = form == LensForm::per_batch, per_query = form == LensForm::per_query;
  const std::int64_t* v = valid_lens.data();
  for (index_t i = 0; i < valid_lens.numel(); ++i)
    HEED_CHECK(v[i] >= 0, ValueError, "masked_softmax: valid_lens must not be negative, got ", v[i], " at flat index ",
               i, " of shape ", to_string(s));
  std::vector<index_t> lens(static_cast<std::size_t>(rows));
  const index_t rows_per_batch = rows / std::max<index_t>(batch, 1);
  for (index_t r = 0; r < rows; ++r) {
    const index_t b = r / rows_per_batch, q = r % num_queries;
    const index_t len = per_batch ? v[b] : per_query ? v[b * num_queries + q] : v[r];
    lens[static_cast<std::size_t>(r)] = valid_limit(len, num_keys);
  }
  return lens;
}

/// Valid lengths and the causal rule both leave a prefix of each row's keys visible:
/// the length of that prefix for each row of scores of this shape, or nothing when
/// the mask has neither.
template <typename T>
std::vector<index_t> row_limits(const AttentionMask<T>& mask, const Shape& scores) {
  const index_t num_queries = scores[-2], num_keys = scores[-1];
  const index_t rows = scores.numel() / std::max<index_t>(num_keys, 1);
  std::vector<index_t> limits;
  if (mask.valid_lens().defined()) limits = row_valid_lens(mask.valid_lens(), scores);
  if (mask.is_causal()) {
    limits.resize(static_cast<std::size_t>(rows), num_keys);
    for (index_t r = 0; r < rows; ++r) {
      auto& limit = limits[static_cast<std::size_t>(r)];
      limit = std::min(limit, causal_limit(r % num_queries, num_queries, num_keys));
    }
  }
  return limits;
}

/// Rows shorter than this are exponentiated in a block of fixed size (softmax_prefix).
constexpr index_t kShortSoftmaxRow = 16;

/// out[0, n) = exp(in[j] − max) / their sum, for n < kShortSoftmaxRow, in a block of
/// fixed size read from `in` and written to `out` once: over a runtime length under a
/// vector's, Eigen runs std::exp per key (d2l's rows are at most 10 keys; their scalar
/// exp was 3 % of a training step).
template <typename T>
void softmax_short(const T* in, index_t n, T max, T* out) {
  Eigen::Array<T, kShortSoftmaxRow, 1> block;
  for (index_t j = 0; j < kShortSoftmaxRow; ++j) block[j] = j < n ? in[j] - max : T(0);  // a masked load
  block = block.exp();
  for (index_t j = 0; j < kShortSoftmaxRow; ++j)  // the padding out; flush_exp_underflow's rule (NaN stays)
    block[j] = j < n && !(block[j] < std::numeric_limits<T>::min()) ? block[j] : T(0);
  block *= T(1) / block.sum();
  for (index_t j = 0; j < kShortSoftmaxRow; ++j)
    if (j < n) out[j] = block[j];  // a masked store
}

/// The softmax of one row's visible prefix `in` into `out`; zeros when nothing is
/// visible (an empty prefix, or every score -inf). The max propagates NaN: a row whose
/// only visible scores are NaN must come out NaN, not look fully masked.
template <typename T, typename Out>
void softmax_prefix(const ConstVecMap<T>& in, Out&& out) {
  const T max = in.size() > 0 ? in.template maxCoeff<Eigen::PropagateNaN>() : -std::numeric_limits<T>::infinity();
  if (max == -std::numeric_limits<T>::infinity()) {
    out.setZero();
    return;
  }
  if (in.size() < kShortSoftmaxRow) return softmax_short(in.data(), in.size(), max, out.data());
  out = (in - max).exp();
  flush_exp_underflow(out.data(), out.size());
  out *= T(1) / out.sum();
}

/// The softmax of one row's prefix with a boolean and/or additive mask, each given by
/// its row pointer (null when absent) and key stride (1, or 0 when broadcast over the
/// keys). A key is visible when allowed and its masked score is above -inf.
///
/// Written as branch-free loops over contiguous arrays, so that the compiler
/// vectorises them (GCC does not vectorise loads of bool: `keep` is bytes), and so that
/// masked keys never reach exp(): Eigen's vectorised exp of -inf is a subnormal (slow
/// to produce, and not 0) rather than 0.
template <typename T, typename Out>
void softmax_masked(const T* in, const bool* allowed, index_t allowed_stride, const T* additive,
                    index_t additive_stride, std::uint8_t* keep, Out&& out) {
  constexpr T kMinusInf = -std::numeric_limits<T>::infinity();
  const index_t n = out.size();
  T* v = out.data();
  // Pass 1: the masked scores, -inf where not visible, and the visibility as bytes.
  // One loop per operand layout (contiguous or one value for the row), so that each
  // is a plain vectorisable loop.
  auto first_pass = [&](auto score, auto allow) {
    for (index_t j = 0; j < n; ++j) {
      const T s = score(j);
      const auto k = static_cast<std::uint8_t>(allow(j) & (s != kMinusInf));
      keep[j] = k;
      v[j] = k ? s : kMinusInf;
    }
  };
  static_assert(sizeof(bool) == 1, "a bool mask is read as bytes");
  const auto* allowed_bytes = reinterpret_cast<const std::uint8_t*>(allowed);
  const std::uint8_t allowed_all = allowed == nullptr ? 1 : allowed_bytes[0];
  const T added = additive == nullptr ? T(0) : additive[0];
  auto row_allowed = [&](index_t j) { return allowed_bytes[j]; };
  auto same_allowed = [&](index_t) { return allowed_all; };
  auto with_additive = [&](index_t j) { return in[j] + additive[j]; };
  auto plus_constant = [&](index_t j) { return in[j] + added; };
  const bool row_mask = allowed != nullptr && allowed_stride == 1,
             row_additive = additive != nullptr && additive_stride == 1;
  if (row_mask && row_additive)
    first_pass(with_additive, row_allowed);
  else if (row_mask)
    first_pass(plus_constant, row_allowed);
  else if (row_additive)
    first_pass(with_additive, same_allowed);
  else
    first_pass(plus_constant, same_allowed);
  const T max = n > 0 ? out.template maxCoeff<Eigen::PropagateNaN>() : kMinusInf;  // NaN: see softmax_prefix
  if (max == kMinusInf) {
    out.setZero();
    return;
  }
  for (index_t j = 0; j < n; ++j) {
    const T s = v[j] - max;
    v[j] = keep[j] ? s : T(0);  // exp(0) for masked keys, zeroed below
  }
  out = out.exp();
  for (index_t j = 0; j < n; ++j) {
    const T e = v[j];
    v[j] = keep[j] ? e : T(0);
  }
  out *= T(1) / out.sum();
}

/// masked_softmax's forward on the CPU, rows split across threads.
template <typename T>
Tensor<T> cpu_masked_softmax(const Tensor<T>& scores, const AttentionMask<T>& mask, index_t num_keys, index_t rows) {
  const Shape& shape = scores.shape();
  const std::vector<index_t> limits = row_limits(mask, shape);
  const bool has_allowed = mask.allowed().defined(), has_additive = mask.additive_mask().defined();
  MaskRows allowed_rows, additive_rows;
  if (has_allowed) allowed_rows = mask_rows(mask.allowed().shape(), shape, "the boolean mask");
  if (has_additive) additive_rows = mask_rows(mask.additive_mask().shape(), shape, "the additive mask");

  Tensor<T> out = make_tensor<T>(shape);
  const T* x = scores.data();
  T* y = out.data();
  parallel_for(rows, kParallelGrain / std::max<index_t>(num_keys, 1) + 1, [&](index_t begin, index_t end) {
    std::vector<std::uint8_t> keep(has_allowed || has_additive ? static_cast<std::size_t>(num_keys) : 0);
    for (index_t r = begin; r < end; ++r) {
      const auto ri = static_cast<std::size_t>(r);
      const index_t limit = limits.empty() ? num_keys : limits[ri];
      VecMap<T> row(y + r * num_keys, num_keys);
      row.tail(num_keys - limit).setZero();
      if (!has_allowed && !has_additive) {
        softmax_prefix(ConstVecMap<T>(x + r * num_keys, limit), row.head(limit));
        continue;
      }
      const bool* allowed = has_allowed ? mask.allowed().data() + allowed_rows.offsets[ri] : nullptr;
      const T* additive = has_additive ? mask.additive_mask().data() + additive_rows.offsets[ri] : nullptr;
      softmax_masked(x + r * num_keys, allowed, allowed_rows.key_stride, additive, additive_rows.key_stride,
                     keep.data(), row.head(limit));
    }
  });

  return out;
}

/// The mask of scores of `shape` (rank 3 or 4) as a device's kernels read it: the valid
/// lengths' form, causal, and each mask with its strides broadcast to the scores; the
/// masks' shapes checked. Pointers into the mask's tensors: keep the mask alive.
template <typename T>
SoftmaxMask<T> device_softmax_mask(const AttentionMask<T>& mask, const Shape& shape) {
  const bool four_d = shape.rank() == 4;
  SoftmaxMask<T> args;
  // Strides of a mask broadcast to the scores, as (batch, heads, queries, keys).
  const auto strides_of = [&](const Shape& mask_shape, index_t(&out)[4]) {
    const auto s = broadcast_strides(mask_shape, shape);
    out[0] = s[0];
    out[1] = four_d ? s[1] : 0;
    out[2] = s[four_d ? 2 : 1];
    out[3] = s[four_d ? 3 : 2];
  };
  if (mask.valid_lens().defined()) {
    args.lens_form = valid_lens_form(mask.valid_lens().shape(), shape);
    args.valid_lens = device_data(mask.valid_lens());
  }
  args.causal = mask.is_causal();
  if (mask.allowed().defined()) {
    check_mask_shape(mask.allowed().shape(), shape, "the boolean mask");
    args.allowed = device_data(mask.allowed());
    strides_of(mask.allowed().shape(), args.allowed_strides);
  }
  if (mask.additive_mask().defined()) {
    check_mask_shape(mask.additive_mask().shape(), shape, "the additive mask");
    args.additive = device_data(mask.additive_mask());
    strides_of(mask.additive_mask().shape(), args.additive_strides);
  }
  return args;
}

/// masked_softmax's forward on a device backend. Valid lengths are read there, so unlike
/// on the CPU a negative one is not reported: it masks every key.
template <typename T>
Tensor<T> device_masked_softmax(const Tensor<T>& scores, const AttentionMask<T>& mask) {
  const Shape& shape = scores.shape();
  const bool four_d = shape.rank() == 4;
  const SoftmaxMask<T> args = device_softmax_mask(mask, shape);
  Tensor<T> out = make_tensor<T>(shape, scores.device());
  kernels_for(scores, "masked_softmax")
      .masked_softmax_forward(scores.device().index(), device_data(out), device_data(scores), shape[0],
                              four_d ? shape[1] : 1, shape[-2], shape[-1], args);
  return out;
}

}  // namespace detail

namespace detail {

/// d2l's fully masked rows: out's all-zero rows (only a fully masked row sums to 0)
/// become 1/num_keys; returns them, so that backward keeps their gradient 0, as d2l's
/// constant −1e6 scores give.
template <typename T>
std::vector<index_t> fill_fully_masked_rows(Tensor<T>& out, index_t num_keys, index_t rows) {
  HEED_CHECK(out.is_cpu(), DeviceError, "masked_softmax: uniform_when_fully_masked has no implementation on ",
             to_string(out.device()), " (scores of shape ", to_string(out.shape()), ")");
  std::vector<index_t> uniform_rows;
  for (index_t r = 0; r < rows && num_keys > 0; ++r) {
    T* row = out.data() + r * num_keys;
    if (std::any_of(row, row + num_keys, [](T w) { return w != T(0); })) continue;
    std::fill(row, row + num_keys, T(1) / static_cast<T>(num_keys));
    uniform_rows.push_back(r);
  }
  return uniform_rows;
}

}  // namespace detail

/// Softmax over the last axis of scores (rank 3 or 4), with masked keys weighted 0. See
/// the top of this file for the mask forms; an empty mask is a plain softmax.
template <typename T>
Tensor<T> masked_softmax(const Tensor<T>& scores, const detail::NonDeduced<AttentionMask<T>>& mask = {}) {
  detail::check_defined(scores, "masked_softmax", "scores");
  detail::check_floating<T>("masked_softmax");
  HEED_CHECK(scores.dim() == 3 || scores.dim() == 4, ShapeError,
             "masked_softmax: scores must be (batch, queries, keys) or (batch, heads, queries, keys), got ",
             to_string(scores.shape()));
  const Shape& shape = scores.shape();
  const index_t num_keys = shape[-1];
  const index_t rows = shape.numel() / std::max<index_t>(num_keys, 1);
  Tensor<T> out;
  if (detail::on_device("masked_softmax", scores, mask.valid_lens(), mask.allowed(), mask.additive_mask()))
    out = detail::device_masked_softmax(scores, mask);
  if (!out.defined()) out = detail::cpu_masked_softmax(scores, mask, num_keys, rows);
  std::vector<index_t> uniform_rows;  // d2l's fully masked rows, when asked for
  if (mask.uniform_when_fully_masked()) uniform_rows = detail::fill_fully_masked_rows(out, num_keys, rows);

  if (autograd::needs_grad(scores))
    // Masked weights are 0, so softmax's backward y · (g − Σ g·y) gives them a zero
    // gradient, and fully masked rows too, with no mask to consult; d2l's uniform rows
    // are zeroed.
    autograd::record(out, "MaskedSoftmaxBackward", {scores},
                     [saved = autograd::save(out), uniform_rows, num_keys](const Tensor<T>& g) {
                       Tensor<T> dx = detail::softmax_backward(g, saved.get(), g.dim() - 1);
                       for (index_t r : uniform_rows) std::fill_n(dx.data() + r * num_keys, num_keys, T(0));
                       return autograd::Grads<T>{dx};
                     });
  return out;
}

}  // namespace heed

#include "heed/detail/header_end.hpp"
