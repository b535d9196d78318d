// src/cuda/layer_norm.cu — layer norm forward and backward: a warp per row for the
// output and dx, a thread per column for the weight's and bias's gradients; reductions
// in a fixed order (results do not depend on the launch).
#include <cmath>

#include "common.cuh"
#include "instantiate.hpp"
#include "kernels.cuh"

namespace heed::cuda {

using detail::kWarp;
using detail::kWarpsPerBlock;
using detail::row_blocks;
using detail::warp_row;
using detail::warp_sum;

template <typename T>
__global__ void layer_norm_forward_kernel(T* out, T* mean, T* rstd, const T* x, const T* weight, const T* bias,
                                          index_t rows, index_t n, T eps) {
  const index_t r = warp_row();
  if (r >= rows) return;
  const int lane = threadIdx.x % kWarp;
  const T* in = x + r * n;
  T sum = 0;
  for (index_t j = lane; j < n; j += kWarp) sum += in[j];
  const T mu = warp_sum(sum) / T(n);
  T squares = 0;
  for (index_t j = lane; j < n; j += kWarp) squares += (in[j] - mu) * (in[j] - mu);
  const T sigma_inv = T(1) / sqrt(warp_sum(squares) / T(n) + eps);
  if (lane == 0) mean[r] = mu, rstd[r] = sigma_inv;
  for (index_t j = lane; j < n; j += kWarp) {
    T y = (in[j] - mu) * sigma_inv;
    if (weight != nullptr) y *= weight[j];
    if (bias != nullptr) y += bias[j];
    out[r * n + j] = y;
  }
}

template <typename T>
__global__ void layer_norm_dx_kernel(T* dx, const T* g, const T* x, const T* mean, const T* rstd, const T* weight,
                                     index_t rows, index_t n) {
  const index_t r = warp_row();
  if (r >= rows) return;
  const int lane = threadIdx.x % kWarp;
  const T mu = mean[r], sigma_inv = rstd[r];
  T sum_g = 0, sum_gx = 0;  // Σ ĝ and Σ ĝ·x̂, with ĝ = g·weight and x̂ the normalised x
  for (index_t j = lane; j < n; j += kWarp) {
    const T g_hat = weight != nullptr ? g[r * n + j] * weight[j] : g[r * n + j];
    sum_g += g_hat;
    sum_gx += g_hat * ((x[r * n + j] - mu) * sigma_inv);
  }
  const T mean_g = warp_sum(sum_g) / T(n), mean_gx = warp_sum(sum_gx) / T(n);
  for (index_t j = lane; j < n; j += kWarp) {
    const T g_hat = weight != nullptr ? g[r * n + j] * weight[j] : g[r * n + j];
    dx[r * n + j] = sigma_inv * (g_hat - mean_g - ((x[r * n + j] - mu) * sigma_inv) * mean_gx);
  }
}

/// dweight and dbias: a thread per column, summing over the rows in order.
template <typename T>
__global__ void layer_norm_dw_kernel(T* dweight, T* dbias, const T* g, const T* x, const T* mean, const T* rstd,
                                     index_t rows, index_t n) {
  for (index_t j = blockIdx.x * index_t(blockDim.x) + threadIdx.x; j < n; j += index_t(blockDim.x) * gridDim.x) {
    T dw = 0, db = 0;
    for (index_t r = 0; r < rows; ++r) {
      const T gr = g[r * n + j];
      dw += gr * ((x[r * n + j] - mean[r]) * rstd[r]);
      db += gr;
    }
    if (dweight != nullptr) dweight[j] = dw;
    if (dbias != nullptr) dbias[j] = db;
  }
}

template <typename T>
void layer_norm_forward(int device, T* out, T* mean, T* rstd, const T* x, const T* weight, const T* bias, index_t rows,
                        index_t n, double eps) {
  if (rows == 0) return;
  layer_norm_forward_kernel<<<row_blocks(rows), kWarpsPerBlock * kWarp, 0, detail::stream_for(device)>>>(
      out, mean, rstd, x, weight, bias, rows, n, static_cast<T>(eps));
  detail::check_launch("layer_norm_forward", device);
}

template <typename T>
void layer_norm_backward(int device, T* dx, T* dweight, T* dbias, const T* g, const T* x, const T* mean, const T* rstd,
                         const T* weight, index_t rows, index_t n) {
  cudaStream_t stream = detail::stream_for(device);
  if (dx != nullptr && rows > 0) {
    layer_norm_dx_kernel<<<row_blocks(rows), kWarpsPerBlock * kWarp, 0, stream>>>(dx, g, x, mean, rstd, weight, rows,
                                                                                  n);
    detail::check_launch("layer_norm_backward", device);
  }
  if ((dweight != nullptr || dbias != nullptr) && n > 0) {
    layer_norm_dw_kernel<<<detail::blocks_for(n), detail::kThreads, 0, stream>>>(dweight, dbias, g, x, mean, rstd, rows,
                                                                                 n);
    detail::check_launch("layer_norm_backward (weight)", device);
  }
}

HEED_CUDA_INSTANTIATE(HEED_KERNELS_LAYER_NORM)

}  // namespace heed::cuda
