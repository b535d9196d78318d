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
// count. On the CPU the mask is kept for backward as one byte per element (kept or
// not), a quarter of a float mask (hashing again in backward cost more than that saves
// at d2l's rows of 32), and rows split across threads.
#pragma once

#include "heed/detail/header_begin.hpp"

#include <algorithm>
#include <array>
#include <cstdint>

#include "heed/core/generator.hpp"
#include "heed/detail/parallel.hpp"
#include "heed/detail/rules.hpp"
#include "heed/ops/elementwise.hpp"
#include "heed/ops/kernels.hpp"

namespace heed {
namespace detail {

/// Rows shorter than this take dropout_short_row.
constexpr index_t kShortDropoutRow = 16;

/// dropout_rows for one row of n < kShortDropoutRow elements: the 16 hashes of dropout_drops as one
/// vector, and no branch per element (over n, the loop ran scalar, with a branch on each
/// draw; d2l's attention weights are rows of 10 keys).
template <typename T>
void dropout_short_row(T* out, std::uint8_t* kept, const T* in, index_t n, std::uint32_t row_seed,
                       std::uint32_t threshold, T scale) {
  typedef std::uint32_t Lanes __attribute__((vector_size(kShortDropoutRow * sizeof(std::uint32_t))));
  typedef T Values __attribute__((vector_size(kShortDropoutRow * sizeof(T))));
  constexpr Lanes kPosition = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};  // j + 1
  Lanes h = row_seed + 0x9E3779B9u * kPosition;
  h = (h ^ (h >> 16)) * 0x85EBCA6Bu;
  h = (h ^ (h >> 13)) * 0xC2B2AE35u;
  h ^= h >> 16;
  const Lanes kept_lanes = __builtin_convertvector(h >= threshold, Lanes) & 1u;  // dropout_drops: h < threshold
  const Values factor = __builtin_convertvector(kept_lanes, Values) * scale;
  for (index_t j = 0; j < n; ++j) {
    kept[j] = static_cast<std::uint8_t>(kept_lanes[j]);
    out[j] = in[j] * factor[j];
  }
}

/// out = in · mask over a contiguous tensor of `shape`, the mask being dropout's for the
/// call whose key is `key` (0 where dropped, `scale` elsewhere), and kept[i] = whether
/// element i was kept.
template <typename T>
void dropout_rows(T* out, std::uint8_t* kept, const T* in, const Shape& shape, std::uint64_t key,
                  std::uint32_t threshold, T scale) {
  const int rank = shape.rank();
  const index_t row_length = rank == 0 ? 1 : shape[rank - 1];
  const int leading = rank > 0 ? rank - 1 : 0;
  const index_t num_rows = row_length == 0 ? 0 : shape.numel() / row_length;
  const index_t grain = std::max<index_t>(1, kParallelGrain / std::max<index_t>(row_length, 1));
  parallel_for(num_rows, grain, [&](index_t first, index_t last) {
    // Locals, not the captured references, so that the stores to out cannot alias them
    // and the loop over a row vectorises (it ran scalar, a branch per element, otherwise).
    const T keep = scale;
    const std::uint32_t limit = threshold;
    const index_t n = row_length;
    // keys[d]: the key mixed with coordinates 0..d-1 of the current row.
    std::array<std::uint64_t, Shape::kMaxRank + 1> keys{};
    std::array<index_t, Shape::kMaxRank> coords{};
    const auto at = [](int d) { return static_cast<std::size_t>(d); };
    index_t rest = first;
    for (int d = leading - 1; d >= 0; --d) coords[at(d)] = rest % shape[d], rest /= shape[d];
    keys[0] = key;
    const auto rekey = [&](int from) {  // keys of dims from.. after coords[from..] changed
      for (int d = from; d < leading; ++d) keys[at(d + 1)] = dropout_rekey(keys[at(d)], coords[at(d)]);
    };
    rekey(0);
    for (index_t row = first; row < last; ++row) {
      const std::uint32_t row_seed = dropout_row_seed(keys[at(leading)]);
      T* row_out = out + row * n;
      std::uint8_t* row_kept = kept + row * n;
      const T* row_in = in + row * n;
      if (n < kShortDropoutRow) {
        dropout_short_row(row_out, row_kept, row_in, n, row_seed, limit, keep);
      } else {
        for (index_t j = 0; j < n; ++j) {
          const bool drop = dropout_drops(row_seed, j, limit);
          row_kept[j] = drop ? 0 : 1;
          row_out[j] = row_in[j] * (drop ? T(0) : keep);
        }
      }
      // The next row: an odometer over the leading coordinates.
      int d = leading - 1;
      while (d >= 0 && ++coords[at(d)] == shape[d]) coords[at(d--)] = 0;
      if (d >= 0) rekey(d);
    }
  });
}

/// What dropout multiplies a kept element by: 1 / (1 − p), or 0 when p = 1.
template <typename T>
T dropout_scale(double p) {
  return p < 1.0 ? static_cast<T>(1.0 / (1.0 - p)) : T(0);
}

}  // namespace detail

template <typename T>
Tensor<T> dropout(const Tensor<T>& x, double p, bool training, Generator& gen = default_generator()) {
  detail::check_defined(x, "dropout", "x");
  detail::check_floating<T>("dropout");
  HEED_CHECK(p >= 0.0 && p <= 1.0, ValueError, "dropout: probability must be in [0, 1], got ", p);
  if (!training || p == 0.0) return x;
  // The mask holds 0 or 1 / (1 − p) (0 everywhere when p = 1), so out = x · mask and
  // dx = g · mask.
  const T scale = detail::dropout_scale<T>(p);
  const std::uint32_t threshold = detail::dropout_threshold(p);
  const std::uint64_t key = detail::dropout_mix(gen.next_u64());
  Tensor<T> out;
  // What backward multiplies g by: on the CPU one byte per element (kept or not), on a
  // device the mask itself (0 or scale); the other stays undefined.
  Tensor<std::uint8_t> kept;
  Tensor<T> mask;
  if (!x.is_cpu()) {  // the same masks, one element per thread (heed/detail/rules.hpp)
    out = detail::make_tensor<T>(x.shape(), x.device());
    mask = detail::make_tensor<T>(x.shape(), x.device());
    StridedShape shape;
    shape.rank = x.dim();
    for (int d = 0; d < x.dim(); ++d) shape.sizes[d] = x.shape()[d];
    detail::kernels_for(x, "dropout")
        .dropout(x.device().index(), detail::device_data(out), detail::device_data(mask), detail::device_data(x), shape,
                 key, threshold, scale);
  } else {
    out = detail::make_tensor<T>(x.shape());
    kept = detail::make_tensor<std::uint8_t>(x.shape());
    detail::dropout_rows(out.data(), kept.data(), x.data(), x.shape(), key, threshold, scale);
  }
  if (autograd::needs_grad(x))
    autograd::record(out, "DropoutBackward", {x}, [kept, mask, scale](const Tensor<T>& g) {
      if (!g.is_cpu()) return autograd::Grads<T>{g * mask};
      Tensor<T> dx = detail::make_tensor<T>(g.shape());
      const T* in = g.data();
      const std::uint8_t* k = kept.data();
      T* d = dx.data();
      detail::parallel_for(g.numel(), detail::kParallelGrain, [&](index_t begin, index_t end) {
        const T s = scale;  // a local: stores to d cannot alias it, so the loop vectorises
        for (index_t i = begin; i < end; ++i) d[i] = in[i] * (k[i] ? s : T(0));
      });
      return autograd::Grads<T>{dx};
    });
  return out;
}

}  // namespace heed

#include "heed/detail/header_end.hpp"
