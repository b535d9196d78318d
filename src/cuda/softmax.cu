// src/cuda/softmax.cu — masked softmax forward and backward, a warp per row for rows of
// up to 1024 keys (held in registers: one read, one write) and a block per row beyond.
#include <cmath>

#include "common.cuh"
#include "instantiate.hpp"
#include "kernels.cuh"

namespace heed::cuda {

using detail::kWarp;
using detail::warp_max;
using detail::warp_sum;

constexpr int kWarpsPerBlock = 4;
constexpr int kRowThreads = 512;  // a block per row

/// Max or sum over a block of kRowThreads threads; every thread gets the result.
template <typename T, bool kMax>
__device__ T block_reduce(T v, T* shared) {
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  v = kMax ? warp_max(v) : warp_sum(v);
  __syncthreads();  // `shared` may still be read by the previous reduction
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  v = lane < kRowThreads / kWarp ? shared[lane] : (kMax ? -INFINITY : T(0));
  return kMax ? warp_max(v) : warp_sum(v);
}

template <typename T, int kPerLane>
__global__ void softmax_warp_kernel(T* out, const T* scores, index_t rows, index_t heads, index_t num_queries,
                                    index_t num_keys, SoftmaxMask<T> mask) {
  const index_t r = blockIdx.x * index_t(kWarpsPerBlock) + threadIdx.x / kWarp;
  if (r >= rows) return;
  const int lane = threadIdx.x % kWarp;
  const kernels::SoftmaxRow<T> row(r, heads, num_queries, num_keys, mask);
  const T* x = scores + r * num_keys;
  T* y = out + r * num_keys;
  T v[kPerLane];
  T max = -INFINITY;
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) {
    const index_t j = lane + i * kWarp;
    v[i] = j < num_keys ? row.score(x, j) : -INFINITY;
    max = v[i] > max ? v[i] : max;
  }
  max = warp_max(max);
  T sum = 0;
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) {
    v[i] = v[i] == -INFINITY ? T(0) : exp(v[i] - max);  // masked keys: exactly 0
    sum += v[i];
  }
  sum = warp_sum(sum);
  const T scale = max == -INFINITY ? T(0) : T(1) / sum;  // a fully masked row: zeros
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) {
    const index_t j = lane + i * kWarp;
    if (j < num_keys) y[j] = v[i] * scale;
  }
}

template <typename T>
__global__ void softmax_block_kernel(T* out, const T* scores, index_t heads, index_t num_queries, index_t num_keys,
                                     SoftmaxMask<T> mask) {
  __shared__ T shared[kRowThreads / kWarp];
  const index_t r = blockIdx.x;
  const kernels::SoftmaxRow<T> row(r, heads, num_queries, num_keys, mask);
  const T* x = scores + r * num_keys;
  T* y = out + r * num_keys;
  T max = -INFINITY;
  for (index_t j = threadIdx.x; j < num_keys; j += kRowThreads) {
    const T s = row.score(x, j);
    max = s > max ? s : max;
  }
  max = block_reduce<T, true>(max, shared);
  if (max == -INFINITY) {
    for (index_t j = threadIdx.x; j < num_keys; j += kRowThreads) y[j] = 0;
    return;
  }
  T sum = 0;
  for (index_t j = threadIdx.x; j < num_keys; j += kRowThreads) {
    const T s = row.score(x, j);
    sum += s == -INFINITY ? T(0) : exp(s - max);
  }
  const T scale = T(1) / block_reduce<T, false>(sum, shared);
  for (index_t j = threadIdx.x; j < num_keys; j += kRowThreads) {
    const T s = row.score(x, j);
    y[j] = s == -INFINITY ? T(0) : exp(s - max) * scale;
  }
}

template <typename T, int kPerLane>
void launch_warp(int device, T* out, const T* scores, index_t rows, index_t heads, index_t num_queries,
                 index_t num_keys, const SoftmaxMask<T>& mask) {
  const index_t blocks = (rows + kWarpsPerBlock - 1) / kWarpsPerBlock;
  softmax_warp_kernel<T, kPerLane>
      <<<static_cast<unsigned>(blocks), kWarpsPerBlock * kWarp, 0, detail::stream_for(device)>>>(
          out, scores, rows, heads, num_queries, num_keys, mask);
}

template <typename T>
void masked_softmax_forward(int device, T* out, const T* scores, index_t batch, index_t heads, index_t num_queries,
                            index_t num_keys, const SoftmaxMask<T>& mask) {
  const index_t rows = batch * heads * num_queries;
  if (rows == 0 || num_keys == 0) return;
  if (rows > index_t(2147483647))
    throw ValueError(heed::detail::concat("masked_softmax: ", rows, " rows are more than one launch takes ",
                                          detail::on_device(device)));
  if (num_keys <= 32)
    launch_warp<T, 1>(device, out, scores, rows, heads, num_queries, num_keys, mask);
  else if (num_keys <= 64)
    launch_warp<T, 2>(device, out, scores, rows, heads, num_queries, num_keys, mask);
  else if (num_keys <= 128)
    launch_warp<T, 4>(device, out, scores, rows, heads, num_queries, num_keys, mask);
  else if (num_keys <= 256)
    launch_warp<T, 8>(device, out, scores, rows, heads, num_queries, num_keys, mask);
  else if (num_keys <= 512)
    launch_warp<T, 16>(device, out, scores, rows, heads, num_queries, num_keys, mask);
  else if (num_keys <= 1024)
    launch_warp<T, 32>(device, out, scores, rows, heads, num_queries, num_keys, mask);
  else
    softmax_block_kernel<T><<<static_cast<unsigned>(rows), kRowThreads, 0, detail::stream_for(device)>>>(
        out, scores, heads, num_queries, num_keys, mask);
  detail::check_launch("masked_softmax_forward", device);
}

template <typename T>
__global__ void softmax_backward_warp_kernel(T* grad_in, const T* grad_out, const T* y, index_t rows, index_t cols) {
  const index_t r = blockIdx.x * index_t(kWarpsPerBlock) + threadIdx.x / kWarp;
  if (r >= rows) return;
  const int lane = threadIdx.x % kWarp;
  const T* g = grad_out + r * cols;
  const T* w = y + r * cols;
  T dot = 0;
  for (index_t j = lane; j < cols; j += kWarp) dot += g[j] * w[j];
  dot = warp_sum(dot);
  for (index_t j = lane; j < cols; j += kWarp) grad_in[r * cols + j] = w[j] * (g[j] - dot);
}

template <typename T>
__global__ void softmax_backward_block_kernel(T* grad_in, const T* grad_out, const T* y, index_t cols) {
  __shared__ T shared[kRowThreads / kWarp];
  const index_t r = blockIdx.x;
  const T* g = grad_out + r * cols;
  const T* w = y + r * cols;
  T dot = 0;
  for (index_t j = threadIdx.x; j < cols; j += kRowThreads) dot += g[j] * w[j];
  dot = block_reduce<T, false>(dot, shared);
  for (index_t j = threadIdx.x; j < cols; j += kRowThreads) grad_in[r * cols + j] = w[j] * (g[j] - dot);
}

template <typename T>
void softmax_backward(int device, T* grad_in, const T* grad_out, const T* y, index_t rows, index_t cols) {
  if (rows == 0 || cols == 0) return;
  cudaStream_t stream = detail::stream_for(device);
  if (cols <= 1024) {
    const index_t blocks = (rows + kWarpsPerBlock - 1) / kWarpsPerBlock;
    softmax_backward_warp_kernel<T>
        <<<static_cast<unsigned>(blocks), kWarpsPerBlock * kWarp, 0, stream>>>(grad_in, grad_out, y, rows, cols);
  } else {
    softmax_backward_block_kernel<T>
        <<<static_cast<unsigned>(rows), kRowThreads, 0, stream>>>(grad_in, grad_out, y, cols);
  }
  detail::check_launch("softmax_backward", device);
}

HEED_CUDA_INSTANTIATE_SOFTMAX(float)
HEED_CUDA_INSTANTIATE_SOFTMAX(double)

}  // namespace heed::cuda
