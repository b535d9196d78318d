// src/cuda/gru.cu — the GRU cell's step, forward and backward: a thread per (row, unit),
// between the step's products (cuBLAS), which heed/ops/gru.hpp launches.
#include "common.cuh"
#include "instantiate.hpp"
#include "kernels.cuh"

namespace heed::cuda {

template <typename T>
__global__ void gru_cell_forward_kernel(T* gates, T* h_next, const T* gi, const T* gh, const T* h_prev, index_t B,
                                        index_t H) {
  for (index_t e = blockIdx.x * index_t(blockDim.x) + threadIdx.x; e < B * H; e += index_t(blockDim.x) * gridDim.x)
    kernels::gru_cell_forward_one(e, gates, h_next, gi, gh, h_prev, H);
}

template <typename T>
__global__ void gru_cell_backward_kernel(T* dgi, T* dgh, T* dh_direct, const T* gates, const T* h_prev, const T* dh,
                                         index_t B, index_t H) {
  for (index_t e = blockIdx.x * index_t(blockDim.x) + threadIdx.x; e < B * H; e += index_t(blockDim.x) * gridDim.x)
    kernels::gru_cell_backward_one(e, dgi, dgh, dh_direct, gates, h_prev, dh, H);
}

template <typename T>
void gru_cell_forward(int device, T* gates, T* h_next, const T* gi, const T* gh, const T* h_prev, index_t B,
                      index_t H) {
  if (B * H == 0) return;
  gru_cell_forward_kernel<<<detail::blocks_for(B * H), detail::kThreads, 0, detail::stream_for(device)>>>(
      gates, h_next, gi, gh, h_prev, B, H);
  detail::check_launch("gru_cell_forward", device);
}

template <typename T>
void gru_cell_backward(int device, T* dgi, T* dgh, T* dh_direct, const T* gates, const T* h_prev, const T* dh,
                       index_t B, index_t H) {
  if (B * H == 0) return;
  gru_cell_backward_kernel<<<detail::blocks_for(B * H), detail::kThreads, 0, detail::stream_for(device)>>>(
      dgi, dgh, dh_direct, gates, h_prev, dh, B, H);
  detail::check_launch("gru_cell_backward", device);
}

HEED_CUDA_INSTANTIATE(HEED_KERNELS_GRU)

}  // namespace heed::cuda
