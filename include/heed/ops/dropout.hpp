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

#include <cstdint>
#include <vector>

#include "heed/core/generator.hpp"
#include "heed/ops/elementwise.hpp"

namespace heed {

namespace detail {

// The keep/drop hash, shared with the fused attention (which draws the masks of the
// weights it never stores). The call's key mixed with the leading coordinates gives
// each row's 64-bit key (splitmix64's finaliser); a 32-bit hash of the row key and j
// (murmur3's finaliser, a loop the compiler vectorises) decides element j by comparing
// with p·2³². A Mersenne-Twister draw per element was a fifth of a d2l Transformer
// training step.

inline std::uint64_t dropout_mix(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
/// The key of coordinates (…, coord) from the key of (…).
inline std::uint64_t dropout_rekey(std::uint64_t key, index_t coord) {
  return dropout_mix(key + 0x9E3779B97F4A7C15ull * (static_cast<std::uint64_t>(coord) + 1));
}
inline std::uint32_t dropout_row_seed(std::uint64_t row_key) {
  return static_cast<std::uint32_t>(row_key ^ (row_key >> 32));
}
/// p·2³² (p = 1 needs no threshold: the scale is 0 whatever the hash).
inline std::uint32_t dropout_threshold(double p) {
  const double scaled = p * 4294967296.0;
  return scaled >= 4294967295.0 ? 0xFFFFFFFFu : static_cast<std::uint32_t>(scaled);
}
/// Whether element j of the row whose seed is row_seed is dropped.
inline bool dropout_drops(std::uint32_t row_seed, index_t j, std::uint32_t threshold) {
  std::uint32_t h = row_seed + 0x9E3779B9u * static_cast<std::uint32_t>(j + 1);
  h = (h ^ (h >> 16)) * 0x85EBCA6Bu;
  h = (h ^ (h >> 13)) * 0xC2B2AE35u;
  h ^= h >> 16;
  return h < threshold;
}

}  // namespace detail

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
#ifdef HEED_WITH_CUDA
  if (x.is_cuda()) {  // the same masks, one element per thread (kernels.cuh: dropout_drops)
    Tensor<T> out = detail::make_tensor<T>(x.shape(), x.device());
    mask = detail::make_tensor<T>(x.shape(), x.device());
    cuda::StridedShape shape;
    shape.rank = x.dim();
    for (int d = 0; d < x.dim(); ++d) shape.sizes[d] = x.shape()[d];
    cuda::dropout(x.device().index(), detail::device_data(out), detail::device_data(mask), detail::device_data(x),
                  shape, detail::dropout_mix(gen.next_u64()), threshold, scale);
    if (autograd::needs_grad(x))
      autograd::record(out, "DropoutBackward", {x},
                       [mask](const Tensor<T>& g) { return autograd::Grads<T>{g * mask}; });
    return out;
  }
#endif
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
