// src/cuda/common.cuh — what the backend's .cu files share: error checks, the current
// device, each device's stream and cuBLAS handle, and launch shapes.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "heed/core/error.hpp"
#include "heed/cuda/runtime.hpp"

namespace heed::cuda::detail {

[[noreturn]] inline void throw_cuda(const char* call, cudaError_t code, const std::string& where) {
  throw CudaError(heed::detail::concat(call, where.empty() ? "" : " ", where, ": ", cudaGetErrorName(code), " (",
                                       cudaGetErrorString(code), ")"));
}

const char* cublas_status_name(cublasStatus_t status);

}  // namespace heed::cuda::detail

/// Throws heed::CudaError naming the call, `where` (the device or sizes) and the code.
#define HEED_CUDA_CHECK(call, where)                                                                   \
  do {                                                                                                 \
    const cudaError_t heed_cuda_code = (call);                                                         \
    if (heed_cuda_code != cudaSuccess) ::heed::cuda::detail::throw_cuda(#call, heed_cuda_code, where); \
  } while (false)

#define HEED_CUBLAS_CHECK(call, where)                                                                               \
  do {                                                                                                               \
    const cublasStatus_t heed_cublas_status = (call);                                                                \
    if (heed_cublas_status != CUBLAS_STATUS_SUCCESS)                                                                 \
      throw ::heed::CudaError(::heed::detail::concat(#call, " ", where, ": ",                                        \
                                                     ::heed::cuda::detail::cublas_status_name(heed_cublas_status))); \
  } while (false)

namespace heed::cuda::detail {

/// "on cuda:N", for messages.
inline std::string on_device(int device) { return "on cuda:" + std::to_string(device); }

/// Makes `device` current for this thread and returns its stream (created on first use).
cudaStream_t stream_for(int device);
/// The device's cuBLAS handle, bound to its stream (created on first use).
cublasHandle_t cublas_for(int device);

/// Throws CudaError if the last launch failed, naming the kernel.
inline void check_launch(const char* kernel, int device) {
  HEED_CUDA_CHECK(cudaGetLastError(), heed::detail::concat("(launching ", kernel, ") ", on_device(device)));
}

constexpr int kThreads = 256;

/// Blocks of kThreads for n elements, each thread looping with a grid stride past the
/// grid's cap (so any n launches).
inline unsigned blocks_for(index_t n) {
  const index_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(blocks < 1 ? 1 : blocks > 65535 * 8 ? 65535 * 8 : blocks);
}

constexpr int kWarp = 32;

template <typename T>
__device__ inline T warp_max(T v) {
  for (int offset = kWarp / 2; offset > 0; offset /= 2) v = max(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

/// The sum over a warp's lanes, in a fixed tree order: every lane gets the same value.
template <typename T>
__device__ inline T warp_sum(T v) {
  for (int offset = kWarp / 2; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

// ---- a warp per row (layer norm, cross-entropy) ----

constexpr int kWarpsPerBlock = 4;

inline unsigned row_blocks(index_t rows) { return static_cast<unsigned>((rows + kWarpsPerBlock - 1) / kWarpsPerBlock); }

/// The row of the calling thread's warp.
__device__ inline index_t warp_row() { return blockIdx.x * index_t(kWarpsPerBlock) + threadIdx.x / kWarp; }

}  // namespace heed::cuda::detail
