// heed/ops/layer_norm.hpp — layer normalisation over the trailing dims, fused, as
// PyTorch's F.layer_norm.
//
//   x:      (..., *normalized_shape)
//   weight: normalized_shape (optional; scale)    bias: normalized_shape (optional; shift)
//   layer_norm(x, normalized_shape, weight, bias, eps): same shape as x
//
// Each row of numel(normalized_shape) elements is normalised with its mean and biased
// variance: x̂ = (x − mean) / √(var + eps), y = x̂·weight + bias. One primitive with
// a closed-form backward (it saves x and each row's mean and 1/σ, as PyTorch does):
//   dx = (1/σ) · (ĝ − mean(ĝ) − x̂ · mean(ĝ·x̂)),  ĝ = g·weight
//   dweight = Σ_rows g·x̂,  dbias = Σ_rows g
#pragma once

#include "heed/detail/header_begin.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <utility>
#include <vector>

#include "heed/ops/reduce.hpp"

namespace heed {
namespace detail {

/// layer_norm's backward cuts its rows into ⌈rows / kLayerNormRowBlock⌉ blocks of equal
/// size, at most kLayerNormBlocks (each block keeps four columns of n values).
constexpr index_t kLayerNormRowBlock = 64;
constexpr index_t kLayerNormBlocks = 64;

/// Rows and row length of x for normalising over normalized_shape.
inline std::pair<index_t, index_t> layer_norm_rows(const Shape& x, const Shape& normalized_shape, const char* op) {
  const int k = normalized_shape.rank();
  bool matches = k >= 1 && k <= x.rank();
  for (int d = 0; matches && d < k; ++d) matches = x[x.rank() - k + d] == normalized_shape[d];
  HEED_CHECK(matches, ShapeError, op, ": input of shape ", to_string(x), " does not end in normalized_shape ",
             to_string(normalized_shape));
  const index_t row = normalized_shape.numel();
  return {row == 0 ? 0 : x.numel() / row, row};
}

/// The mean and 1/√(var + eps) of one row, the variance of the deviations from the
/// mean (two passes, no E[x²] − E[x]² cancellation). Squares past the type's range
/// (|x − mean| above 1.8e19 in float) or a sum past it would make var inf and the row
/// zeros, so then the row is first scaled by its largest magnitude: [1e30, −1e30, 3]
/// gives ±1.2247. A row holding NaN or inf stays NaN, as in PyTorch.
template <typename T>
std::pair<T, T> layer_norm_moments(const ConstVecMap<T>& in, T eps) {
  const T mu = in.mean();
  const T var = (in - mu).square().mean();
  if (std::isfinite(var) || !in.allFinite()) return {mu, T(1) / std::sqrt(var + eps)};
  const T scale = in.abs().maxCoeff();
  const T scaled_mu = (in / scale).mean();
  const T scaled_var = (in / scale - scaled_mu).square().mean();
  return {scaled_mu * scale, T(1) / scale / std::sqrt(scaled_var + eps / scale / scale)};
}

/// The gradients (dx, dweight, dbias) of layer_norm, each only where asked for (need),
/// from the saved input, weight (undefined: none) and each row's mean and rstd: on a
/// device by its kernels (a warp per row for dx, a thread per column for the others).
template <typename T>
autograd::Grads<T> layer_norm_backward(const Tensor<T>& g, const Tensor<T>& in, const Tensor<T>& weight,
                                       const Tensor<T>& mean, const Tensor<T>& rstd, const Shape& normalized_shape,
                                       const std::array<bool, 3>& need, index_t rows, index_t n) {
  const bool need_x = need[0], need_w = need[1], need_b = need[2];
  autograd::Grads<T> grads(3);
  if (!g.is_cpu()) {
    const Device device = g.device();
    const auto data_or_null = [](const Tensor<T>& t) { return t.defined() ? device_data(t) : nullptr; };
    if (need_x) grads[0] = make_tensor<T>(in.shape(), device);
    if (need_w) grads[1] = make_tensor<T>(normalized_shape, device);
    if (need_b) grads[2] = make_tensor<T>(normalized_shape, device);
    kernels_for(g, "layer_norm backward")
        .layer_norm_backward(device.index(), data_or_null(grads[0]), data_or_null(grads[1]), data_or_null(grads[2]),
                             device_data(g), device_data(in), device_data(mean), device_data(rstd),
                             data_or_null(weight), rows, n);
    return grads;
  }
  if (need_x) grads[0] = make_tensor<T>(in.shape());
  const T *g_data = g.data(), *in_data = in.data(), *row_mean = mean.data(), *row_rstd = rstd.data();
  const T* w_data = weight.defined() ? weight.data() : nullptr;
  T* dx_data = need_x ? grads[0].data() : nullptr;
  // Blocks of rows whose edges depend only on `rows`, each on one thread, with
  // its own column of partial sums for dweight and dbias, added in block order
  // after: the bits do not depend on the thread count. Each block has its own
  // x̂ and ĝ rows, allocated here (the body must not throw).
  using Columns = Eigen::Array<T, Eigen::Dynamic, Eigen::Dynamic>;
  const index_t blocks = std::min(kLayerNormBlocks, (rows + kLayerNormRowBlock - 1) / kLayerNormRowBlock);
  const index_t per_block = blocks == 0 ? 0 : (rows + blocks - 1) / blocks;
  Columns partial_w = Columns::Zero(need_w ? n : 0, blocks), partial_b = Columns::Zero(need_b ? n : 0, blocks);
  Columns x_hats(n, blocks), g_hats(n, blocks);
  parallel_tasks(blocks, 4 * rows * n, [&](index_t block) {
    auto x_hat = x_hats.col(block), g_hat = g_hats.col(block);
    const index_t last = std::min(rows, (block + 1) * per_block);
    for (index_t r = block * per_block; r < last; ++r) {
      const ConstVecMap<T> gr(g_data + r * n, n);
      x_hat = (ConstVecMap<T>(in_data + r * n, n) - row_mean[r]) * row_rstd[r];
      if (need_w) partial_w.col(block) += gr * x_hat;
      if (need_b) partial_b.col(block) += gr;
      if (!need_x) continue;
      if (w_data)
        g_hat = gr * ConstVecMap<T>(w_data, n);
      else
        g_hat = gr;
      VecMap<T>(dx_data + r * n, n) = row_rstd[r] * (g_hat - g_hat.mean() - x_hat * (g_hat * x_hat).mean());
    }
  });
  Eigen::Array<T, Eigen::Dynamic, 1> dw = Eigen::Array<T, Eigen::Dynamic, 1>::Zero(need_w ? n : 0);
  Eigen::Array<T, Eigen::Dynamic, 1> db = Eigen::Array<T, Eigen::Dynamic, 1>::Zero(need_b ? n : 0);
  for (index_t block = 0; block < blocks; ++block) {
    if (need_w) dw += partial_w.col(block);
    if (need_b) db += partial_b.col(block);
  }
  if (need_w) grads[1] = make_tensor<T>(normalized_shape), grads[1].array() = dw;
  if (need_b) grads[2] = make_tensor<T>(normalized_shape), grads[2].array() = db;
  return grads;
}

}  // namespace detail

template <typename T>
Tensor<T> layer_norm(const Tensor<T>& x, const Shape& normalized_shape, const Tensor<T>& weight = Tensor<T>(),
                     const Tensor<T>& bias = Tensor<T>(), double eps = 1e-5) {
  detail::check_defined(x, "layer_norm", "x");
  detail::check_floating<T>("layer_norm");
  // Plain variables, not a structured binding: the lambdas below use them, and C++17
  // (and clang before 16, even in C++20) cannot capture a structured binding.
  const std::pair<index_t, index_t> rows_and_n = detail::layer_norm_rows(x.shape(), normalized_shape, "layer_norm");
  const index_t rows = rows_and_n.first, n = rows_and_n.second;
  for (const Tensor<T>* affine : {&weight, &bias})
    HEED_CHECK(!affine->defined() || affine->shape() == normalized_shape, ShapeError,
               "layer_norm: ", affine == &weight ? "weight" : "bias", " of shape ", to_string(affine->shape()),
               " does not match normalized_shape ", to_string(normalized_shape));
  HEED_CHECK(eps >= 0 && std::isfinite(eps), ValueError, "layer_norm: eps must be finite and >= 0, got ", eps);

  const bool on_device = detail::on_device("layer_norm", x, weight, bias);
  const Device device = x.device();
  Tensor<T> out = detail::make_tensor<T>(x.shape(), device);
  Tensor<T> mean = detail::make_tensor<T>(Shape{rows}, device), rstd = detail::make_tensor<T>(Shape{rows}, device);
  if (on_device) {
    const auto data_or_null = [](const Tensor<T>& t) { return t.defined() ? detail::device_data(t) : nullptr; };
    detail::kernels_for(x, "layer_norm")
        .layer_norm_forward(device.index(), detail::device_data(out), detail::device_data(mean),
                            detail::device_data(rstd), detail::device_data(x), data_or_null(weight), data_or_null(bias),
                            rows, n, eps);
  } else {
    const T* w = weight.defined() ? weight.data() : nullptr;
    const T* b = bias.defined() ? bias.data() : nullptr;
    // The pointers once, not per row: data() checks the device, out of line.
    const T* x_data = x.data();
    T *out_data = out.data(), *mean_data = mean.data(), *rstd_data = rstd.data();
    detail::parallel_for(rows, detail::kParallelGrain / std::max<index_t>(n, 1) + 1, [&](index_t begin, index_t end) {
      for (index_t r = begin; r < end; ++r) {
        const detail::ConstVecMap<T> in(x_data + r * n, n);
        detail::VecMap<T> y(out_data + r * n, n);
        const auto [mu, sigma_inv] = detail::layer_norm_moments(in, static_cast<T>(eps));
        mean_data[r] = mu;
        rstd_data[r] = sigma_inv;
        y = (in - mu) * sigma_inv;
        if (w) y *= detail::ConstVecMap<T>(w, n);
        if (b) y += detail::ConstVecMap<T>(b, n);
      }
    });
  }
  if (autograd::needs_grad(x, weight, bias))
    autograd::record(
        out, "NativeLayerNormBackward", {x, weight, bias},
        [rows = rows, n = n, normalized_shape, mean, rstd,
         need = std::array<bool, 3>{x.requires_grad(), weight.defined() && weight.requires_grad(),
                                    bias.defined() && bias.requires_grad()},
         saved_x = autograd::save(x), saved_w_defined = weight.defined(),
         saved_w = weight.defined() ? autograd::save(weight) : autograd::SavedTensor<T>()](const Tensor<T>& g) {
          return detail::layer_norm_backward(g, saved_x.get(), saved_w_defined ? saved_w.get() : Tensor<T>(), mean,
                                             rstd, normalized_shape, need, rows, n);
        });
  return out;
}

}  // namespace heed

#include "heed/detail/header_end.hpp"
