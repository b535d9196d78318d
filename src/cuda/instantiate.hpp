// src/cuda/instantiate.hpp — the instantiations of the backend's entry points
// (heed/cuda/runtime.hpp) for float and double, one list per source file, shared by the
// CUDA sources and the host emulation so that both define exactly the same functions.
#pragma once

#include "heed/cuda/runtime.hpp"

#define HEED_CUDA_INSTANTIATE_BLAS(T)                                                                            \
  template void gemm_strided_batched<T>(int device, bool trans_a, bool trans_b, index_t m, index_t n, index_t k, \
                                        const T* a, index_t stride_a, const T* b, index_t stride_b, T* c,        \
                                        index_t stride_c, index_t batches);

#define HEED_CUDA_INSTANTIATE_ELEMENTWISE(T)                                                                      \
  template void binary<T>(int device, BinaryOp op, T* out, const T* a, const StridedShape& a_shape, const T* b,   \
                          const StridedShape& b_shape);                                                           \
  template void gather<T>(int device, T* out, const T* x, const StridedShape& src);                               \
  template void scatter<T>(int device, T* dx, const T* g, const StridedShape& dst);                               \
  template void dropout<T>(int device, T* out, T* mask, const T* x, const StridedShape& shape, std::uint64_t key, \
                           std::uint32_t threshold, T scale);                                                     \
  template void unary<T>(int device, UnaryOp op, T* out, const T* x, index_t n);                                  \
  template void unary_backward<T>(int device, UnaryOp op, T* dx, const T* g, const T* saved, index_t n);          \
  template void affine<T>(int device, T* out, const T* x, index_t n, T alpha, T beta);                            \
  template void axpy<T>(int device, T* dst, const T* src, index_t n, T alpha);                                    \
  template void sum_to<T>(int device, T* out, index_t n_out, const T* g, const StridedShape& out_strides);        \
  template void adam_step<T>(int device, T* p, T* m, T* v, const T* g, index_t n, const AdamStep& step);          \
  template void sum_of_squares<T>(int device, double* total, const T* x, index_t n);                              \
  template void clip_by_norm<T>(int device, T* x, index_t n, const double* sum_of_squares, double max_norm);

#define HEED_CUDA_INSTANTIATE_ROWS(T)                                                                                  \
  template void layer_norm_forward<T>(int device, T* out, T* mean, T* rstd, const T* x, const T* weight,               \
                                      const T* bias, index_t rows, index_t n, double eps);                             \
  template void layer_norm_backward<T>(int device, T* dx, T* dweight, T* dbias, const T* g, const T* x, const T* mean, \
                                       const T* rstd, const T* weight, index_t rows, index_t n);                       \
  template void embedding_forward<T>(int device, T* out, const T* weight, const std::int64_t* indices, index_t count,  \
                                     index_t num_embeddings, index_t dim);                                             \
  template void embedding_backward<T>(int device, T* dweight, const T* g, const std::int64_t* indices, index_t count,  \
                                      index_t num_embeddings, index_t dim);                                            \
  template void cross_entropy_forward<T>(int device, T* loss, T* stats, const T* x, const CrossEntropyRows& rows);     \
  template void cross_entropy_backward<T>(int device, T* dx, const T* x, const T* stats, const CrossEntropyRows& rows, \
                                          const T* g, index_t g_stride, T divisor);

#define HEED_CUDA_INSTANTIATE_SOFTMAX(T)                                                                      \
  template void masked_softmax_forward<T>(int device, T* out, const T* scores, index_t batch, index_t heads,  \
                                          index_t num_queries, index_t num_keys, const SoftmaxMask<T>& mask); \
  template void softmax_backward<T>(int device, T* grad_in, const T* grad_out, const T* y, index_t rows, index_t cols);

#define HEED_CUDA_INSTANTIATE_FILL(T) template void fill<T>(int device, T* out, index_t n, T value);

/// Every list, for the emulation (one file).
#define HEED_CUDA_INSTANTIATE_ALL(T)   \
  HEED_CUDA_INSTANTIATE_BLAS(T)        \
  HEED_CUDA_INSTANTIATE_ELEMENTWISE(T) \
  HEED_CUDA_INSTANTIATE_ROWS(T)        \
  HEED_CUDA_INSTANTIATE_SOFTMAX(T)     \
  HEED_CUDA_INSTANTIATE_FILL(T)
