// heed/ops/sequence_mask.hpp — d2l's sequence_mask (d2l 9.7.3): blank out the padding
// of a batch of sequences.
//
//   X:         (batch, num_steps, ...)   any arithmetic element type
//   valid_len: (batch)                   int64, >= 0
//   sequence_mask(X, valid_len, value): X with every entry at step t >= valid_len[b]
//                                        of sequence b set to value
//
//   auto X = heed::tensor<float>({{1, 2, 3}, {4, 5, 6}});
//   heed::sequence_mask(X, heed::IndexTensor({1, 2}, {2}));   // [[1, 0, 0], [4, 5, 0]]
//
// Unlike d2l's, which writes into X, it returns a new tensor. Differentiable with
// respect to X: the gradient passes where X passes and is 0 where `value` was written.
// A valid length at or above num_steps masks nothing; a negative one is refused.
#pragma once

#include "heed/detail/header_begin.hpp"

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "heed/ops/elementwise.hpp"

namespace heed {
namespace detail {

/// The valid length of each sequence, clipped to num_steps, after checking its shape
/// and sign; `op` names the caller in messages.
inline std::vector<index_t> sequence_lens(const IndexTensor& valid_len, index_t batch, index_t num_steps,
                                          const char* op) {
  HEED_CHECK(valid_len.defined(), ValueError, op, ": valid_len is undefined");
  HEED_CHECK(valid_len.shape() == Shape{batch}, ShapeError, op, ": valid_len of shape ", to_string(valid_len.shape()),
             " does not match a batch of ", batch, " sequences; expected (", batch, ")");
  const IndexTensor on_host = valid_len.to(Device::cpu());  // a device's lengths come back: few, and checked here
  std::vector<index_t> lens(static_cast<std::size_t>(batch));
  for (index_t b = 0; b < batch; ++b) {
    const std::int64_t len = on_host.data()[b];
    HEED_CHECK(len >= 0, ValueError, op, ": valid_len must not be negative, got ", len, " at index ", b);
    lens[static_cast<std::size_t>(b)] = std::min<index_t>(len, num_steps);
  }
  return lens;
}

/// out = x with each sequence's steps from lens[b] on set to value; x: (batch, steps, inner).
template <typename T>
Tensor<T> keep_prefixes(const Tensor<T>& x, const std::vector<index_t>& lens, T value) {
  if (!x.is_cpu()) {  // where() under a (batch, steps, 1, …) mask of the kept steps, made here
    Shape mask_shape{x.shape()[0], x.shape()[1]};
    for (int d = 2; d < x.dim(); ++d) mask_shape.push_back(1);
    Tensor<bool> kept = make_tensor<bool>(mask_shape);
    for (index_t b = 0; b < mask_shape[0]; ++b)
      for (index_t t = 0; t < mask_shape[1]; ++t)
        kept.data()[b * mask_shape[1] + t] = t < lens[static_cast<std::size_t>(b)];
    return where(kept.to(x.device()), x.detach(), scalar_on(x.device(), value));
  }
  Tensor<T> out = make_tensor<T>(x.shape());
  const index_t batch = x.shape()[0], block = batch > 0 ? x.numel() / batch : 0;
  const index_t inner = x.shape()[1] > 0 ? block / x.shape()[1] : 0;
  for (index_t b = 0; b < batch; ++b) {
    const index_t kept = lens[static_cast<std::size_t>(b)] * inner;
    std::copy_n(x.data() + b * block, kept, out.data() + b * block);
    std::fill(out.data() + b * block + kept, out.data() + (b + 1) * block, value);
  }
  return out;
}

}  // namespace detail

template <typename T>
Tensor<T> sequence_mask(const Tensor<T>& X, const IndexTensor& valid_len, double value = 0.0) {
  detail::check_defined(X, "sequence_mask", "X");
  detail::check_defined(valid_len, "sequence_mask", "valid_len");
  HEED_CHECK(X.dim() >= 2, ShapeError, "sequence_mask: X must be (batch, num_steps, ...), got shape ",
             to_string(X.shape()));
  std::vector<index_t> lens = detail::sequence_lens(valid_len, X.shape()[0], X.shape()[1], "sequence_mask");
  Tensor<T> out = detail::keep_prefixes(X, lens, static_cast<T>(value));
  if constexpr (std::is_floating_point_v<T>) {
    if (autograd::needs_grad(X))
      // out = X where kept, value elsewhere:  dX = g where kept, 0 elsewhere
      autograd::record(out, "SequenceMaskBackward", {X}, [lens = std::move(lens)](const Tensor<T>& g) {
        return autograd::Grads<T>{detail::keep_prefixes(g, lens, T(0))};
      });
  }
  return out;
}

}  // namespace heed

#include "heed/detail/header_end.hpp"
