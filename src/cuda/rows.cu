// src/cuda/rows.cu — ops that work row by row: layer norm, embedding, cross-entropy; a
// warp per row, reductions in a fixed order (results do not depend on the launch).
#include <cmath>

#include "common.cuh"
#include "instantiate.hpp"
#include "kernels.cuh"

namespace heed::cuda {

using detail::kWarp;
using detail::warp_max;
using detail::warp_sum;

constexpr int kWarpsPerBlock = 4;

inline unsigned row_blocks(index_t rows) { return static_cast<unsigned>((rows + kWarpsPerBlock - 1) / kWarpsPerBlock); }

__device__ inline index_t warp_row() { return blockIdx.x * index_t(kWarpsPerBlock) + threadIdx.x / kWarp; }

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

template <typename T>
__global__ void embedding_forward_kernel(T* out, const T* weight, const std::int64_t* indices, index_t count,
                                         index_t num_embeddings, index_t dim) {
  for (index_t e = blockIdx.x * index_t(blockDim.x) + threadIdx.x; e < count * dim;
       e += index_t(blockDim.x) * gridDim.x) {
    const std::int64_t v = indices[e / dim];
    out[e] = v >= 0 && v < num_embeddings ? weight[v * dim + e % dim] : T(NAN);
  }
}

/// A thread per element of dweight, adding the rows of g whose index is its row: no
/// atomics, so the sums do not depend on the launch.
template <typename T>
__global__ void embedding_backward_kernel(T* dweight, const T* g, const std::int64_t* indices, index_t count,
                                          index_t num_embeddings, index_t dim) {
  for (index_t e = blockIdx.x * index_t(blockDim.x) + threadIdx.x; e < num_embeddings * dim;
       e += index_t(blockDim.x) * gridDim.x) {
    const index_t v = e / dim, c = e % dim;
    T total = 0;
    for (index_t i = 0; i < count; ++i)
      if (indices[i] == v) total += g[i * dim + c];
    dweight[e] = total;
  }
}

template <typename T>
void embedding_forward(int device, T* out, const T* weight, const std::int64_t* indices, index_t count,
                       index_t num_embeddings, index_t dim) {
  if (count * dim == 0) return;
  embedding_forward_kernel<<<detail::blocks_for(count * dim), detail::kThreads, 0, detail::stream_for(device)>>>(
      out, weight, indices, count, num_embeddings, dim);
  detail::check_launch("embedding_forward", device);
}

template <typename T>
void embedding_backward(int device, T* dweight, const T* g, const std::int64_t* indices, index_t count,
                        index_t num_embeddings, index_t dim) {
  if (num_embeddings * dim == 0) return;
  embedding_backward_kernel<<<detail::blocks_for(num_embeddings * dim), detail::kThreads, 0,
                              detail::stream_for(device)>>>(dweight, g, indices, count, num_embeddings, dim);
  detail::check_launch("embedding_backward", device);
}

__device__ inline bool row_counts(const CrossEntropyRows& rows, index_t r) {
  return rows.lens == nullptr || r % rows.steps < rows.lens[r / rows.steps];
}

template <typename T>
__global__ void cross_entropy_forward_kernel(T* loss, T* stats, const T* x, CrossEntropyRows rows) {
  const index_t r = warp_row();
  if (r >= rows.rows) return;
  const int lane = threadIdx.x % kWarp;
  const index_t c = rows.classes;
  if (!row_counts(rows, r)) {
    if (lane == 0) loss[r] = stats[2 * r] = stats[2 * r + 1] = T(0);
    return;
  }
  const T* row = x + r * c;
  T max = -INFINITY;
  for (index_t j = lane; j < c; j += kWarp) max = row[j] > max ? row[j] : max;
  max = warp_max(max);
  T sum = 0;
  for (index_t j = lane; j < c; j += kWarp) sum += exp(row[j] - max);
  const T log_sum = log(warp_sum(sum));
  // ε of heed/ops/cross_entropy.hpp: the target's share of the row's mean logit.
  const T eps = T(rows.label_smoothing);
  T row_sum = 0;
  if (eps != T(0)) {
    for (index_t j = lane; j < c; j += kWarp) row_sum += row[j];
    row_sum = warp_sum(row_sum);
  }
  if (lane == 0) {
    const std::int64_t label = rows.labels[r];
    stats[2 * r] = max;
    stats[2 * r + 1] = log_sum;
    // A label out of range reads nothing: its loss is NaN.
    const bool valid = label >= 0 && label < c;
    const T label_logit = valid ? row[label] : T(0);
    const T target =
        eps == T(0) ? label_logit - max : (T(1) - eps) * (label_logit - max) + eps * (row_sum / T(c) - max);
    loss[r] = valid ? log_sum - target : T(NAN);
  }
}

template <typename T>
__global__ void cross_entropy_backward_kernel(T* dx, const T* x, const T* stats, CrossEntropyRows rows, const T* g,
                                              index_t g_stride, T divisor) {
  const index_t r = warp_row();
  if (r >= rows.rows) return;
  const int lane = threadIdx.x % kWarp;
  const index_t c = rows.classes;
  T* out = dx + r * c;
  if (!row_counts(rows, r)) {
    for (index_t j = lane; j < c; j += kWarp) out[j] = T(0);
    return;
  }
  const T k = g[r / g_stride] / divisor;
  const std::int64_t label = rows.labels[r];
  const T max = stats[2 * r], log_sum = stats[2 * r + 1];
  const T eps = T(rows.label_smoothing), spread = k * eps / T(c), at_label = (T(1) - eps) * k;
  for (index_t j = lane; j < c; j += kWarp)
    out[j] = exp((x[r * c + j] - max) - log_sum) * k -
             (eps == T(0) ? (j == label ? k : T(0)) : spread + (j == label ? at_label : T(0)));
}

template <typename T>
void cross_entropy_forward(int device, T* loss, T* stats, const T* x, const CrossEntropyRows& rows) {
  if (rows.rows == 0) return;
  cross_entropy_forward_kernel<<<row_blocks(rows.rows), kWarpsPerBlock * kWarp, 0, detail::stream_for(device)>>>(
      loss, stats, x, rows);
  detail::check_launch("cross_entropy_forward", device);
}

template <typename T>
void cross_entropy_backward(int device, T* dx, const T* x, const T* stats, const CrossEntropyRows& rows, const T* g,
                            index_t g_stride, T divisor) {
  if (rows.rows == 0) return;
  cross_entropy_backward_kernel<<<row_blocks(rows.rows), kWarpsPerBlock * kWarp, 0, detail::stream_for(device)>>>(
      dx, x, stats, rows, g, g_stride, divisor);
  detail::check_launch("cross_entropy_backward", device);
}

HEED_CUDA_INSTANTIATE_ROWS(float)
HEED_CUDA_INSTANTIATE_ROWS(double)

}  // namespace heed::cuda
