// src/cuda/embedding.cu — table lookup and its gradient, a thread per element, without
// atomics (the sums do not depend on the launch).
#include <cmath>

#include "common.cuh"
#include "instantiate.hpp"
#include "kernels.cuh"

namespace heed::cuda {

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

HEED_CUDA_INSTANTIATE(HEED_KERNELS_EMBEDDING)

}  // namespace heed::cuda
