// heed/ops/dropout.hpp — inverted dropout, as PyTorch's F.dropout.
//
//   dropout(x, p, training): in training each element is zeroed with probability p and
//   the survivors scaled by 1 / (1 − p), so the expected value is unchanged; otherwise x
//   itself is returned.
//
// The keep/drop decisions come from a Generator (one draw per call seeds a fast
// stream for the mask), serially in row-major order, so a seed gives the same mask for
// any thread count.
#pragma once

#include <cstdint>

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
  // One draw from the generator seeds a xoshiro256++ stream for this mask, and each
  // 64-bit output decides two elements by comparing 32-bit halves with p·2³²: a
  // Mersenne-Twister draw per element was a fifth of a d2l Transformer training step.
  std::uint64_t seed = gen.next_u64(), state[4];
  for (std::uint64_t& word : state) {  // splitmix64, xoshiro's recommended seeding
    std::uint64_t z = (seed += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    word = z ^ (z >> 31);
  }
  auto next = [&state] {
    auto rotl = [](std::uint64_t x, int k) { return (x << k) | (x >> (64 - k)); };
    const std::uint64_t result = rotl(state[0] + state[3], 23) + state[0], t = state[1] << 17;
    state[2] ^= state[0], state[3] ^= state[1], state[1] ^= state[2], state[0] ^= state[3];
    state[2] ^= t, state[3] = rotl(state[3], 45);
    return result;
  };
  const double scaled = p * 4294967296.0;  // p·2³², exact for p = 1 too
  const std::uint64_t threshold = scaled >= 4294967296.0 ? (1ull << 32) : static_cast<std::uint64_t>(scaled);
  Tensor<T> out = detail::make_tensor<T>(x.shape());
  T* m = mask.data();
  T* y = out.data();
  const T* in = x.data();
  const index_t n = mask.numel();
  for (index_t i = 0; i < n; i += 2) {
    const std::uint64_t bits = next();
    m[i] = (bits & 0xFFFFFFFFull) < threshold ? T(0) : scale;
    y[i] = in[i] * m[i];
    if (i + 1 < n) m[i + 1] = (bits >> 32) < threshold ? T(0) : scale, y[i + 1] = in[i + 1] * m[i + 1];
  }
  if (autograd::needs_grad(x))
    autograd::record(out, "DropoutBackward", {x}, [mask](const Tensor<T>& g) {
      return autograd::Grads<T>{detail::zip_map<T>([](const auto& a, const auto& b) { return a * b; }, g, mask)};
    });
  return out;
}

}  // namespace heed
