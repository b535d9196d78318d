// heed/ops/dropout.hpp — inverted dropout, as PyTorch's F.dropout.
//
//   dropout(x, p, training): in training each element is zeroed with probability p and
//   the survivors scaled by 1 / (1 − p), so the expected value is unchanged; otherwise x
//   itself is returned.
//
// The keep/drop decisions come from a Generator: one draw per call is the key of the
// mask, and each element's decision is a hash of the key and the element's
// coordinates, (i0, ..., i_last), not of its offset in memory. So a tensor cut to a
// prefix of its extents (train_seq2seq cuts the padding off each batch) gets the mask
// the whole tensor would have had there, and a seed gives the same mask for any thread
// count.
#pragma once

#include "heed/detail/header_begin.hpp"

#include <cstdint>
#include <vector>

#include "heed/core/generator.hpp"
#include "heed/detail/rules.hpp"
#include "heed/ops/elementwise.hpp"
#include "heed/ops/kernels.hpp"

namespace heed {

template <typename T>
Tensor<T> dropout(const Tensor<T>& x, double p, bool training, Generator& gen = default_generator()) {
  detail::check_floating<T>("dropout");
  HEED_CHECK(p >= 0.0 && p <= 1.0, ValueError, "dropout: probability must be in [0, 1], got ", p);
  if (!training || p == 0.0) return x;
  // The mask holds 0 or 1 / (1 − p) (0 everywhere when p = 1), so out = x · mask and
  // dx = g · mask.
  Tensor<T> mask;
  const T scale = p < 1.0 ? static_cast<T>(1.0 / (1.0 - p)) : T(0);
  const std::uint32_t threshold = detail::dropout_threshold(p);
  if (!x.is_cpu()) {  // the same masks, one element per thread (heed/detail/rules.hpp)
    Tensor<T> out = detail::make_tensor<T>(x.shape(), x.device());
    mask = detail::make_tensor<T>(x.shape(), x.device());
    StridedShape shape;
    shape.rank = x.dim();
    for (int d = 0; d < x.dim(); ++d) shape.sizes[d] = x.shape()[d];
    detail::kernels_for(x, "dropout")
        .dropout(x.device().index(), detail::device_data(out), detail::device_data(mask), detail::device_data(x), shape,
                 detail::dropout_mix(gen.next_u64()), threshold, scale);
    if (autograd::needs_grad(x))
      autograd::record(out, "DropoutBackward", {x},
                       [mask](const Tensor<T>& g) { return autograd::Grads<T>{g * mask}; });
    return out;
  }
  Tensor<T> out = detail::make_tensor<T>(x.shape());
  mask = detail::make_tensor<T>(x.shape());
  T* m = mask.data();
  T* y = out.data();
  const T* in = x.data();
  const Shape& shape = x.shape();
  const int rank = shape.rank();
  const index_t row_length = rank == 0 ? 1 : shape[rank - 1];
  const int leading = rank > 0 ? rank - 1 : 0;
  // keys[d]: the key mixed with coordinates 0..d of the current row.
  std::vector<std::uint64_t> keys(static_cast<std::size_t>(leading) + 1);
  std::vector<index_t> coords(static_cast<std::size_t>(leading), 0);
  keys[0] = detail::dropout_mix(gen.next_u64());
  auto rekey = [&](int from) {  // keys of dims from.. after coords[from..] changed
    for (int d = from; d < leading; ++d)
      keys[static_cast<std::size_t>(d) + 1] = detail::dropout_rekey(keys[static_cast<std::size_t>(d)], coords[d]);
  };
  rekey(0);
  const index_t num_rows = row_length == 0 ? 0 : mask.numel() / row_length;
  for (index_t row = 0; row < num_rows; ++row) {
    const std::uint32_t row_seed = detail::dropout_row_seed(keys[static_cast<std::size_t>(leading)]);
    T* row_mask = m + row * row_length;
    T* row_out = y + row * row_length;
    const T* row_in = in + row * row_length;
    for (index_t j = 0; j < row_length; ++j) {
      row_mask[j] = detail::dropout_drops(row_seed, j, threshold) ? T(0) : scale;
      row_out[j] = row_in[j] * row_mask[j];
    }
    // The next row: an odometer over the leading coordinates.
    int d = leading - 1;
    while (d >= 0 && ++coords[static_cast<std::size_t>(d)] == shape[d]) coords[static_cast<std::size_t>(d--)] = 0;
    if (d >= 0) rekey(d);
  }
  if (autograd::needs_grad(x))
    autograd::record(out, "DropoutBackward", {x}, [mask](const Tensor<T>& g) {
      return autograd::Grads<T>{detail::zip_map<T>([](const auto& a, const auto& b) { return a * b; }, g, mask)};
    });
  return out;
}

}  // namespace heed

#include "heed/detail/header_end.hpp"
