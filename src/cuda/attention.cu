// src/cuda/attention.cu — scaled_dot_product_attention without the weights in memory: a
// thread per row of scores, its keys and values read in order with a running max
// (FlashAttention's online softmax), the backward recomputing each weight from the row's
// log Σ exp; dQ by query rows, then dK and dV by key rows, each a sum in a fixed order
// (no atomics). The arithmetic is kernels.cuh's, which the emulation runs as loops. A
// first kernel: scalar fp32/fp64 FMAs, the warp's threads reading the same key at once;
// tiles in shared memory and tensor cores are the next step.
#include "common.cuh"
#include "instantiate.hpp"
#include "kernels.cuh"

namespace heed::cuda {

namespace {

template <typename T>
__global__ void attention_forward_kernel(T* out, T* lse, const T* queries, const T* keys, const T* values,
                                         AttentionShape shape, SoftmaxMask<T> mask, index_t rows) {
  for (index_t r = blockIdx.x * index_t(blockDim.x) + threadIdx.x; r < rows; r += index_t(blockDim.x) * gridDim.x)
    kernels::attention_forward_row(r, out, lse, queries, keys, values, shape, mask);
}

template <typename T>
__global__ void attention_query_kernel(T* d_queries, T* row_d, const T* queries, const T* keys, const T* values,
                                       const T* out, const T* lse, const T* d_out, AttentionShape shape,
                                       SoftmaxMask<T> mask, index_t rows) {
  for (index_t r = blockIdx.x * index_t(blockDim.x) + threadIdx.x; r < rows; r += index_t(blockDim.x) * gridDim.x)
    kernels::attention_backward_query_row(r, d_queries, row_d, queries, keys, values, out, lse, d_out, shape, mask);
}

template <typename T>
__global__ void attention_key_kernel(T* d_keys, T* d_values, const T* row_d, const T* queries, const T* keys,
                                     const T* values, const T* lse, const T* d_out, AttentionShape shape,
                                     SoftmaxMask<T> mask, index_t key_rows) {
  for (index_t e = blockIdx.x * index_t(blockDim.x) + threadIdx.x; e < key_rows; e += index_t(blockDim.x) * gridDim.x)
    kernels::attention_backward_key_row(e / shape.num_keys, e % shape.num_keys, d_keys, d_values, row_d, queries, keys,
                                        values, lse, d_out, shape, mask);
}

}  // namespace

template <typename T>
void attention_forward(int device, T* out, T* lse, const T* queries, const T* keys, const T* values,
                       const AttentionShape& shape, const SoftmaxMask<T>& mask) {
  const index_t rows = shape.batch * shape.heads * shape.num_queries;
  if (rows == 0) return;
  attention_forward_kernel<<<detail::blocks_for(rows), detail::kThreads, 0, detail::stream_for(device)>>>(
      out, lse, queries, keys, values, shape, mask, rows);
  detail::check_launch("attention_forward", device);
}

template <typename T>
void attention_backward(int device, T* d_queries, T* d_keys, T* d_values, T* row_d, const T* queries, const T* keys,
                        const T* values, const T* out, const T* lse, const T* d_out, const AttentionShape& shape,
                        const SoftmaxMask<T>& mask) {
  const index_t rows = shape.batch * shape.heads * shape.num_queries;
  const index_t key_rows = shape.batch * shape.kv_heads * shape.num_keys;
  cudaStream_t stream = detail::stream_for(device);
  if (rows > 0) {
    attention_query_kernel<<<detail::blocks_for(rows), detail::kThreads, 0, stream>>>(
        d_queries, row_d, queries, keys, values, out, lse, d_out, shape, mask, rows);
    detail::check_launch("attention_backward (queries)", device);
  }
  if (key_rows > 0) {  // after every row's D, on the same stream
    attention_key_kernel<<<detail::blocks_for(key_rows), detail::kThreads, 0, stream>>>(
        d_keys, d_values, row_d, queries, keys, values, lse, d_out, shape, mask, key_rows);
    detail::check_launch("attention_backward (keys)", device);
  }
}

HEED_CUDA_INSTANTIATE(HEED_KERNELS_ATTENTION)

}  // namespace heed::cuda
