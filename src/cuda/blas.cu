// src/cuda/blas.cu — batched matrix products through cublasGemmStridedBatchedEx, with
// row-major operands mapped to cuBLAS's column-major call (see column_major_gemm).
#include "common.cuh"
#include "instantiate.hpp"
#include "kernels.cuh"

namespace heed::cuda {

template <typename T>
void gemm_strided_batched(int device, bool trans_a, bool trans_b, index_t m, index_t n, index_t k, const T* a,
                          index_t stride_a, const T* b, index_t stride_b, T* c, index_t stride_c, index_t batches,
                          bool bf16_products) {
  if (m == 0 || n == 0 || batches == 0) return;
  if (k == 0) {  // an empty sum: C = 0
    for (index_t i = 0; i < batches; ++i) fill(device, c + i * stride_c, m * n, T(0));
    return;
  }
  constexpr bool is_float = std::is_same_v<T, float>;
  const cudaDataType_t type = is_float ? CUDA_R_32F : CUDA_R_64F;
  cublasComputeType_t compute = is_float ? CUBLAS_COMPUTE_32F : CUBLAS_COMPUTE_64F;
  if (is_float && math_mode() == MathMode::tf32) compute = CUBLAS_COMPUTE_32F_FAST_TF32;
  if (is_float && (bf16_products || math_mode() == MathMode::bf16)) compute = CUBLAS_COMPUTE_32F_FAST_16BF;
  const T one = 1, zero = 0;
  cublasHandle_t handle = detail::cublas_for(device);
  // cuBLAS takes int sizes and batch counts: larger batches go in several calls.
  constexpr index_t kMaxInt = 2147483647;
  if (m > kMaxInt || n > kMaxInt || k > kMaxInt)
    throw ValueError(heed::detail::concat("matmul: ", m, " x ", k, " by ", k, " x ", n, " is past cuBLAS's int sizes ",
                                          detail::on_device(device)));
  const kernels::ColumnMajorGemm call = kernels::column_major_gemm(trans_a, trans_b, m, n, k);
  for (index_t first = 0; first < batches; first += kMaxInt) {
    const index_t count = std::min(batches - first, kMaxInt);
    HEED_CUBLAS_CHECK(
        cublasGemmStridedBatchedEx(
            handle, call.trans_first ? CUBLAS_OP_T : CUBLAS_OP_N, call.trans_second ? CUBLAS_OP_T : CUBLAS_OP_N,
            static_cast<int>(call.rows), static_cast<int>(call.cols), static_cast<int>(call.inner), &one,
            b + first * stride_b, type, static_cast<int>(call.ld_first), stride_b, a + first * stride_a, type,
            static_cast<int>(call.ld_second), stride_a, &zero, c + first * stride_c, type, static_cast<int>(call.ld_c),
            stride_c, static_cast<int>(count), compute, CUBLAS_GEMM_DEFAULT),
        heed::detail::concat("(", count, " products of ", m, " x ", k, " by ", k, " x ", n, ") ",
                             detail::on_device(device)));
  }
}

HEED_CUDA_INSTANTIATE(HEED_KERNELS_BLAS)

}  // namespace heed::cuda
