// src/cuda/softmax.cu — masked softmax forward and backward, a warp per row for rows of
// up to 1024 keys (held in registers: one read, one write) and a block per row beyond.
#include <cmath>
#include <type_traits>

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
  // Every score is loaded before any is used, the masks after: a mask test between two
  // loads made each load wait for the one before, a third of the memory bandwidth on an
  // H200.
  T v[kPerLane];
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) v[i] = row.load(x, lane + i * kWarp);
  if (row.allowed != nullptr || row.additive != nullptr) {
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) v[i] = row.apply(v[i], lane + i * kWarp);
  }
  T max = -INFINITY;
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) max = v[i] > max ? v[i] : max;
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

/// A block per row, for rows over 1024 keys. kPlain: no boolean or additive mask, so a
/// key's score is a load alone, and the loads of one thread's keys go out together (a
/// mask test between them makes each wait for the last).
template <typename T, bool kPlain>
__global__ void softmax_block_kernel(T* out, const T* scores, index_t heads, index_t num_queries, index_t num_keys,
                                     SoftmaxMask<T> mask) {
  __shared__ T shared[kRowThreads / kWarp];
  const index_t r = blockIdx.x;
  const kernels::SoftmaxRow<T> row(r, heads, num_queries, num_keys, mask);
  const T* x = scores + r * num_keys;
  T* y = out + r * num_keys;
  const auto score = [&](index_t j) { return kPlain ? row.load(x, j) : row.score(x, j); };
  T max = -INFINITY;
#pragma unroll 4
  for (index_t j = threadIdx.x; j < num_keys; j += kRowThreads) {
    const T s = score(j);
    max = s > max ? s : max;
  }
  max = block_reduce<T, true>(max, shared);
  if (max == -INFINITY) {
    for (index_t j = threadIdx.x; j < num_keys; j += kRowThreads) y[j] = 0;
    return;
  }
  T sum = 0;
#pragma unroll 4
  for (index_t j = threadIdx.x; j < num_keys; j += kRowThreads) {
    const T s = score(j);
    sum += s == -INFINITY ? T(0) : exp(s - max);
  }
  const T scale = T(1) / block_reduce<T, false>(sum, shared);
#pragma unroll 4
  for (index_t j = threadIdx.x; j < num_keys; j += kRowThreads) {
    const T s = score(j);
    y[j] = s == -INFINITY ? T(0) : exp(s - max) * scale;
  }
}

/// Calls f(std::integral_constant<int, K>) with the fewest values per lane K (1, 2, 4, …,
/// 32) that hold a row of `cols` ≤ 1024 in one warp's registers.
template <typename F>
void with_per_lane(index_t cols, F&& f) {
  if (cols <= 32)
    f(std::integral_constant<int, 1>{});
  else if (cols <= 64)
    f(std::integral_constant<int, 2>{});
  else if (cols <= 128)
    f(std::integral_constant<int, 4>{});
  else if (cols <= 256)
    f(std::integral_constant<int, 8>{});
  else if (cols <= 512)
    f(std::integral_constant<int, 16>{});
  else
    f(std::integral_constant<int, 32>{});
}

inline unsigned warp_blocks(index_t rows) {
  return static_cast<unsigned>((rows + kWarpsPerBlock - 1) / kWarpsPerBlock);
}

template <typename T>
void masked_softmax_forward(int device, T* out, const T* scores, index_t batch, index_t heads, index_t num_queries,
                            index_t num_keys, const SoftmaxMask<T>& mask) {
  const index_t rows = batch * heads * num_queries;
  if (rows == 0 || num_keys == 0) return;
  if (rows > index_t(2147483647))
    throw ValueError(heed::detail::concat("masked_softmax: ", rows, " rows are more than one launch takes ",
                                          detail::on_device(device)));
  cudaStream_t stream = detail::stream_for(device);
  if (num_keys <= 1024)
    with_per_lane(num_keys, [&](auto per_lane) {
      softmax_warp_kernel<T, decltype(per_lane)::value><<<warp_blocks(rows), kWarpsPerBlock * kWarp, 0, stream>>>(
          out, scores, rows, heads, num_queries, num_keys, mask);
    });
  else if (mask.allowed == nullptr && mask.additive == nullptr)
    softmax_block_kernel<T, true>
        <<<static_cast<unsigned>(rows), kRowThreads, 0, stream>>>(out, scores, heads, num_queries, num_keys, mask);
  else
    softmax_block_kernel<T, false>
        <<<static_cast<unsigned>(rows), kRowThreads, 0, stream>>>(out, scores, heads, num_queries, num_keys, mask);
  detail::check_launch("masked_softmax_forward", device);
}

template <typename T, int kPerLane>
__global__ void softmax_backward_warp_kernel(T* grad_in, const T* grad_out, const T* y, index_t rows, index_t cols) {
  const index_t r = blockIdx.x * index_t(kWarpsPerBlock) + threadIdx.x / kWarp;
  if (r >= rows) return;
  const int lane = threadIdx.x % kWarp;
  const T* g = grad_out + r * cols;
  const T* w = y + r * cols;
  T gv[kPerLane], wv[kPerLane];  // the row in registers: each value read once
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) {
    const index_t j = lane + i * kWarp;
    gv[i] = j < cols ? g[j] : T(0);
    wv[i] = j < cols ? w[j] : T(0);
  }
  T dot = 0;
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) dot += gv[i] * wv[i];
  dot = warp_sum(dot);
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) {
    const index_t j = lane + i * kWarp;
    if (j < cols) grad_in[r * cols + j] = wv[i] * (gv[i] - dot);
  }
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
  if (cols <= 1024)
    with_per_lane(cols, [&](auto per_lane) {
      softmax_backward_warp_kernel<T, decltype(per_lane)::value>
          <<<warp_blocks(rows), kWarpsPerBlock * kWarp, 0, stream>>>(grad_in, grad_out, y, rows, cols);
    });
  else
    softmax_backward_block_kernel<T>
        <<<static_cast<unsigned>(rows), kRowThreads, 0, stream>>>(grad_in, grad_out, y, cols);
  detail::check_launch("softmax_backward", device);
}

HEED_CUDA_INSTANTIATE(HEED_KERNELS_SOFTMAX)

}  // namespace heed::cuda
