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

template <typename T>
Tensor<T> dropout(const Tensor<T>& x, double p, bool training, Generator& gen = default_generator()) {
  detail::check_floating<T>("dropout");
  HEED_CHECK(p >= 0.0 && p <= 1.0, ValueError, "dropout: probability must be in [0, 1], got ", p);
  if (!training || p == 0.0) return x;
  // The mask holds 0 or 1 / (1 − p) (0 everywhere when p = 1), so out = x · mask and
  // dx = g · mask.
  Tensor<T> mask = detail::make_tensor<T>(x.shape());
  const T scale = p < 1.0 ? static_cast<T>(1.0 / (1.0 - p)) : T(0);
  // The key mixed with the leading coordinates gives each row's key; a 64-bit hash of
  // the row key and j / 2 decides the elements j of a pair by comparing its 32-bit
  // halves with p·2³² (a Mersenne-Twister draw per element was a fifth of a d2l
  // Transformer training step). The mixer is splitmix64's finaliser.
  auto mix = [](std::uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  };
  const double scaled = p * 4294967296.0;  // p·2³², exact for p = 1 too
  const std::uint64_t threshold = scaled >= 4294967296.0 ? (1ull << 32) : static_cast<std::uint64_t>(scaled);
  Tensor<T> out = detail::make_tensor<T>(x.shape());
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
  keys[0] = mix(gen.next_u64());
  auto rekey = [&](int from) {  // keys of dims from.. after coords[from..] changed
    for (int d = from; d < leading; ++d)
      keys[static_cast<std::size_t>(d) + 1] =
          mix(keys[static_cast<std::size_t>(d)] + 0x9E3779B97F4A7C15ull * (static_cast<std::uint64_t>(coords[d]) + 1));
  };
  rekey(0);
  const index_t num_rows = row_length == 0 ? 0 : mask.numel() / row_length;
  for (index_t row = 0; row < num_rows; ++row) {
    const std::uint64_t row_key = keys[static_cast<std::size_t>(leading)];
    const index_t base = row * row_length;
    for (index_t j = 0; j < row_length; j += 2) {
      const std::uint64_t bits = mix(row_key ^ (0xD1B54A32D192ED03ull * (static_cast<std::uint64_t>(j / 2) + 1)));
      const index_t i = base + j;
      m[i] = (bits & 0xFFFFFFFFull) < threshold ? T(0) : scale;
      y[i] = in[i] * m[i];
      if (j + 1 < row_length) m[i + 1] = (bits >> 32) < threshold ? T(0) : scale, y[i + 1] = in[i + 1] * m[i + 1];
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
