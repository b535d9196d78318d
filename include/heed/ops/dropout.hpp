// heed/ops/dropout.hpp — inverted dropout, as PyTorch's F.dropout.
//
//   dropout(x, p, training): in training each element is zeroed with probability p and
//   the survivors scaled by 1 / (1 − p), so the expected value is unchanged; otherwise x
//   itself is returned.
//
// The keep/drop draws come from a Generator, serially in row-major order, so a seed
// gives the same mask for any thread count.
#pragma once

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
  T* m = mask.data();
  for (index_t i = 0; i < mask.numel(); ++i) m[i] = gen.uniform() < p ? T(0) : scale;
  Tensor<T> out = detail::zip_map<T>([](const auto& a, const auto& b) { return a * b; }, x, mask);
  if (autograd::needs_grad(x))
    autograd::record(out, "DropoutBackward", {x}, [mask](const Tensor<T>& g) {
      return autograd::Grads<T>{detail::zip_map<T>([](const auto& a, const auto& b) { return a * b; }, g, mask)};
    });
  return out;
}

}  // namespace heed
