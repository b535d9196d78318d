// heed/ops/attention_mask.hpp — which keys each query may attend to.
//
// The forms of an AttentionMask, all combinable, all broadcasting over batch and heads:
//   boolean     true = may attend (the one polarity everywhere in heed), broadcast to scores
//   additive    added to the scores before the softmax (-inf masks), broadcast to scores
//   causal      key j is visible to query i iff j ≤ i + (num_keys − num_queries): the
//               queries are the last num_queries positions, which is what decoding one
//               step at a time against a cache needs; equal lengths give the lower triangle
#pragma once

#include "heed/detail/header_begin.hpp"

#include <cmath>
#include <cstdint>
#include <utility>

#include "heed/core/error.hpp"
#include "heed/core/tensor.hpp"

namespace heed {

/// Which keys each query may attend to; converts implicitly from valid lengths (an
/// IndexTensor, or a float tensor of whole numbers as d2l sometimes passes) and from a
/// boolean mask, so that masked_softmax(X, valid_lens) reads as in d2l.
template <typename T>
class AttentionMask {
 public:
  AttentionMask() = default;
  AttentionMask(IndexTensor valid_lens) : valid_lens_(std::move(valid_lens)) {}  // NOLINT: implicit by design
  AttentionMask(const Tensor<T>& valid_lens);                                    // NOLINT: implicit by design
  AttentionMask(BoolTensor allowed) : allowed_(std::move(allowed)) {}            // NOLINT: implicit by design

  static AttentionMask causal() { return AttentionMask().with_causal(); }
  static AttentionMask additive(Tensor<T> mask) { return AttentionMask().with_additive(std::move(mask)); }

  AttentionMask& with_valid_lens(IndexTensor valid_lens) { return valid_lens_ = std::move(valid_lens), *this; }
  AttentionMask& with_allowed(BoolTensor allowed) { return allowed_ = std::move(allowed), *this; }
  AttentionMask& with_additive(Tensor<T> mask) { return additive_ = std::move(mask), *this; }
  AttentionMask& with_causal(bool causal = true) { return causal_ = causal, *this; }
  /// d2l's numbers for a row whose every key is masked: weights 1/num_keys (what d2l's
  /// −1e6 fill gives) instead of heed's zeros. The gradient stays zero.
  AttentionMask& with_uniform_when_fully_masked(bool uniform = true) { return uniform_ = uniform, *this; }

  const IndexTensor& valid_lens() const { return valid_lens_; }
  const BoolTensor& allowed() const { return allowed_; }
  const Tensor<T>& additive_mask() const { return additive_; }
  bool is_causal() const { return causal_; }
  bool uniform_when_fully_masked() const { return uniform_; }
  /// True when the mask masks nothing.
  bool empty() const { return !valid_lens_.defined() && !allowed_.defined() && !additive_.defined() && !causal_; }

 private:
  IndexTensor valid_lens_;
  BoolTensor allowed_;
  Tensor<T> additive_;
  bool causal_ = false;
  bool uniform_ = false;
};

template <typename T>
AttentionMask<T>::AttentionMask(const Tensor<T>& valid_lens) {
  if (!valid_lens.defined()) return;  // an undefined tensor stands for "no valid_lens"
  // Whole numbers in int64's range (exact powers of two as doubles; NaN fails them), so
  // that the conversion below is defined.
  for (index_t i = 0; i < valid_lens.numel(); ++i) {
    const double v = static_cast<double>(valid_lens.data()[i]);
    HEED_CHECK(v == std::floor(v) && v >= -9.223372036854775808e18 && v < 9.223372036854775808e18, ValueError,
               "masked_softmax: valid_lens must be whole numbers that fit in int64, got ", v, " at flat index ", i,
               " of shape ", to_string(valid_lens.shape()));
  }
  valid_lens_ = valid_lens.template to<std::int64_t>();
}

}  // namespace heed

#include "heed/detail/header_end.hpp"
