// heed/optim/clip.hpp — gradient clipping by the global norm, as d2l's grad_clipping
// (d2l 8.5), which train_seq2seq calls with theta = 1.
//
//   loss.backward();
//   heed::grad_clipping(net, 1.0);                      // d2l's spelling
//   heed::clip_grad_norm(net.parameters(), 1.0);        // the same on a list of tensors
//   optimizer.step();
//
// norm = √(Σ over every parameter that has a gradient of Σ grad²); when norm > max_norm,
// every gradient is multiplied by max_norm / norm, so the global norm becomes max_norm.
// Parameters without a gradient are skipped (d2l's would fail on them).
//
// This is d2l's rule, not torch.nn.utils.clip_grad_norm_'s: PyTorch scales by
// max_norm / (norm + 1e-6) whenever that is below 1, so its clipped norm falls just
// short of max_norm, and a norm within 1e-6 above max_norm is left alone here but
// scaled (by a factor just under 1) there. A NaN norm clips nothing, as in d2l.
#pragma once

#include "heed/detail/header_begin.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include "heed/core/factory.hpp"
#include "heed/detail/parallel.hpp"
#include "heed/nn/module.hpp"
#include "heed/ops/elementwise.hpp"

namespace heed {

namespace detail {

/// clip_grad_norm where the gradients live on a device backend, decided there: returns
/// Σ grad² as a 0-d double tensor on the device, read by nobody unless the caller wants
/// the norm. Undefined, and nothing done, when every gradient is on the host (or there is
/// none): the caller's CPU path. A host gradient among device ones is a DeviceError.
template <typename T>
Tensor<double> clip_grad_norm_on_device(const std::vector<Tensor<T>>& params, double max_norm) {
  std::vector<Tensor<T>> grads;
  for (const Tensor<T>& p : params)
    if (p.defined() && p.grad().defined()) grads.push_back(p.grad());
  const auto on_device = std::find_if(grads.begin(), grads.end(), [](const Tensor<T>& g) { return !g.is_cpu(); });
  if (on_device == grads.end()) return {};
  Tensor<double> total = zeros<double>(Shape{}, on_device->device());
  for (const Tensor<T>& g : grads) {
    common_device("clip_grad_norm", total, g);
    kernels_for(g, "clip_grad_norm").sum_of_squares(g.device().index(), device_data(total), device_data(g), g.numel());
  }
  for (const Tensor<T>& g : grads) {
    heed::detail::impl(g).storage->bump_version();
    kernels_for(g, "clip_grad_norm")
        .clip_by_norm(g.device().index(), device_data(g), g.numel(), device_data(total), max_norm);
  }
  return total;
}

/// Σ x² over n values, in double, in 16 running sums (element i in sum i mod 16), added
/// in order at the end: a fixed order, vectorised. Eigen's cast<double>().square().sum()
/// did not vectorise the cast: 34 µs against 3.7 for d2l's Bahdanau model's 49,449
/// gradients, 2–3 % of its training.
template <typename T>
double sum_of_squares(const T* x, index_t n) {
  constexpr index_t kSums = 16;
  double sums[kSums] = {};
  index_t i = 0;
  for (; i + kSums <= n; i += kSums)
    for (index_t j = 0; j < kSums; ++j) {
      const auto v = static_cast<double>(x[i + j]);
      sums[j] += v * v;
    }
  double total = 0.0;
  for (; i < n; ++i) {
    const auto v = static_cast<double>(x[i]);
    total += v * v;
  }
  for (const double s : sums) total += s;
  return total;
}

/// clip_grad_norm on the host: returns the norm before clipping. Σ grad² is summed per
/// chunk (chunks_of), the chunks' sums added in order: the same bits on any
/// number of threads.
template <typename T>
T clip_grad_norm_on_host(const std::vector<Tensor<T>>& params, double max_norm) {
  std::vector<Tensor<T>> grad_tensors;
  std::vector<T*> grads;
  std::vector<index_t> sizes;
  for (const Tensor<T>& p : params) {
    if (!p.defined() || !p.grad().defined()) continue;
    grad_tensors.push_back(p.grad());  // a handle: scaling it scales the parameter's gradient
    grads.push_back(grad_tensors.back().data());
    sizes.push_back(grad_tensors.back().numel());
  }
  // Σ grad² in double: float would lose the small gradients' share of a large sum.
  const std::vector<Chunk> chunks = chunks_of(sizes);
  std::vector<double> chunk_sums(chunks.size(), 0.0);
  const auto grad_of = [&](const Chunk& c) {
    return Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>>(grads[c.item] + c.begin, c.end - c.begin);
  };
  parallel_chunks(chunks, [&](std::size_t index, const Chunk& c) {
    chunk_sums[index] = sum_of_squares(grads[c.item] + c.begin, c.end - c.begin);
  });
  double sum_of_squares = 0.0;
  for (const double s : chunk_sums) sum_of_squares += s;
  const double norm = std::sqrt(sum_of_squares);
  if (norm > max_norm) {
    for (const Tensor<T>& g : grad_tensors) check_in_place(g, "clip_grad_norm");
    const T scale = static_cast<T>(max_norm / norm);
    parallel_chunks(chunks, [&](std::size_t, const Chunk& c) { grad_of(c) *= scale; });
  }
  return static_cast<T>(norm);
}

}  // namespace detail

/// Scales the gradients of `params` so that their global norm is at most max_norm
/// (d2l's rule above). Returns the global norm before clipping, as
/// torch.nn.utils.clip_grad_norm_ does; 0 when no parameter has a gradient. On a device
/// the decision is taken there, and returning the norm reads one value back.
template <typename T>
T clip_grad_norm(const std::vector<Tensor<T>>& params, double max_norm) {
  static_assert(std::is_floating_point_v<T>, "clip_grad_norm needs floating-point parameters");
  HEED_CHECK(max_norm >= 0.0, ValueError, "clip_grad_norm: max_norm must be >= 0, got ", max_norm);
  if (const Tensor<double> total = detail::clip_grad_norm_on_device(params, max_norm); total.defined())
    return static_cast<T>(std::sqrt(total.item()));
  return detail::clip_grad_norm_on_host(params, max_norm);
}

/// clip_grad_norm without reading the norm back: on a device the decision is taken
/// there, and nothing waits for it (what a training loop wants).
template <typename T>
void clip_grad_norm_(const std::vector<Tensor<T>>& params, double max_norm) {
  static_assert(std::is_floating_point_v<T>, "clip_grad_norm_ needs floating-point parameters");
  HEED_CHECK(max_norm >= 0.0, ValueError, "clip_grad_norm_: max_norm must be >= 0, got ", max_norm);
  if (!detail::clip_grad_norm_on_device(params, max_norm).defined()) detail::clip_grad_norm_on_host(params, max_norm);
}

template <typename T>
T grad_clipping(const Module<T>& net, double theta) {
  std::vector<Tensor<T>> params;
  for (const Tensor<T>& p : net.parameters())
    if (p.requires_grad()) params.push_back(p);
  return clip_grad_norm(params, theta);
}

}  // namespace heed

#include "heed/detail/header_end.hpp"
