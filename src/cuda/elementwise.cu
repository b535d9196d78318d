// src/cuda/elementwise.cu — fill, broadcasting binary arithmetic, strided copies, unary
// ops, dropout, axpy, Adam, gradient clipping, and the reduction of a broadcast gradient
// back to its operand's shape (heed/ops/kernel_list.hpp's HEED_KERNELS_ELEMENTWISE).
#include "common.cuh"
#include "instantiate.hpp"
#include "kernels.cuh"

namespace heed::cuda {

template <typename T>
__global__ void fill_kernel(T* out, index_t n, T value) {
  for (index_t i = blockIdx.x * index_t(blockDim.x) + threadIdx.x; i < n; i += index_t(blockDim.x) * gridDim.x)
    out[i] = value;
}

template <typename T>
void fill(int device, T* out, index_t n, T value) {
  if (n == 0) return;
  fill_kernel<<<detail::blocks_for(n), detail::kThreads, 0, detail::stream_for(device)>>>(out, n, value);
  detail::check_launch("fill", device);
}

/// Same shapes, both contiguous: the common case, without index arithmetic.
template <typename T>
__global__ void binary_contiguous_kernel(BinaryOp op, T* out, const T* a, const T* b, index_t n) {
  for (index_t i = blockIdx.x * index_t(blockDim.x) + threadIdx.x; i < n; i += index_t(blockDim.x) * gridDim.x)
    out[i] = kernels::apply(op, a[i], b[i]);
}

template <typename T>
__global__ void binary_broadcast_kernel(BinaryOp op, T* out, const T* a, StridedShape a_shape, const T* b,
                                        StridedShape b_shape, index_t n) {
  for (index_t i = blockIdx.x * index_t(blockDim.x) + threadIdx.x; i < n; i += index_t(blockDim.x) * gridDim.x)
    out[i] = kernels::apply(op, a[kernels::strided_offset(i, a_shape)], b[kernels::strided_offset(i, b_shape)]);
}

template <typename T>
void binary(int device, BinaryOp op, T* out, const T* a, const StridedShape& a_shape, const T* b,
            const StridedShape& b_shape) {
  const index_t n = kernels::numel(a_shape);
  if (n == 0) return;
  cudaStream_t stream = detail::stream_for(device);
  if (kernels::is_contiguous(a_shape) && kernels::is_contiguous(b_shape))
    binary_contiguous_kernel<<<detail::blocks_for(n), detail::kThreads, 0, stream>>>(op, out, a, b, n);
  else
    binary_broadcast_kernel<<<detail::blocks_for(n), detail::kThreads, 0, stream>>>(op, out, a, a_shape, b, b_shape, n);
  detail::check_launch("binary", device);
}

template <typename T>
__global__ void copy_strided_kernel(T* out, const T* x, StridedShape src, index_t n) {
  for (index_t i = blockIdx.x * index_t(blockDim.x) + threadIdx.x; i < n; i += index_t(blockDim.x) * gridDim.x)
    out[i] = x[kernels::strided_offset(i, src)];
}

template <typename T>
__global__ void copy_into_strided_kernel(T* dx, const T* g, StridedShape dst, index_t n) {
  for (index_t i = blockIdx.x * index_t(blockDim.x) + threadIdx.x; i < n; i += index_t(blockDim.x) * gridDim.x)
    dx[kernels::strided_offset(i, dst)] = g[i];
}

template <typename T>
void copy_strided(int device, T* out, const T* x, const StridedShape& src) {
  const index_t n = kernels::numel(src);
  if (n == 0) return;
  copy_strided_kernel<<<detail::blocks_for(n), detail::kThreads, 0, detail::stream_for(device)>>>(out, x, src, n);
  detail::check_launch("copy_strided", device);
}

template <typename T>
void copy_into_strided(int device, T* dx, const T* g, const StridedShape& dst) {
  const index_t n = kernels::numel(dst);
  if (n == 0) return;
  copy_into_strided_kernel<<<detail::blocks_for(n), detail::kThreads, 0, detail::stream_for(device)>>>(dx, g, dst, n);
  detail::check_launch("copy_into_strided", device);
}

template <typename T>
__global__ void unary_kernel(UnaryOp op, T* out, const T* x, index_t n) {
  for (index_t i = blockIdx.x * index_t(blockDim.x) + threadIdx.x; i < n; i += index_t(blockDim.x) * gridDim.x)
    out[i] = kernels::unary_forward(op, x[i]);
}

template <typename T>
__global__ void unary_backward_kernel(UnaryOp op, T* dx, const T* g, const T* saved, index_t n) {
  for (index_t i = blockIdx.x * index_t(blockDim.x) + threadIdx.x; i < n; i += index_t(blockDim.x) * gridDim.x)
    dx[i] = kernels::unary_grad(op, g[i], saved[i]);
}

template <typename T>
void unary(int device, UnaryOp op, T* out, const T* x, index_t n) {
  if (n == 0) return;
  unary_kernel<<<detail::blocks_for(n), detail::kThreads, 0, detail::stream_for(device)>>>(op, out, x, n);
  detail::check_launch("unary", device);
}

template <typename T>
void unary_backward(int device, UnaryOp op, T* dx, const T* g, const T* saved, index_t n) {
  if (n == 0) return;
  unary_backward_kernel<<<detail::blocks_for(n), detail::kThreads, 0, detail::stream_for(device)>>>(op, dx, g, saved,
                                                                                                    n);
  detail::check_launch("unary_backward", device);
}

template <typename T>
__global__ void dropout_kernel(T* out, T* mask, const T* x, StridedShape shape, index_t n, std::uint64_t key,
                               std::uint32_t threshold, T scale) {
  for (index_t i = blockIdx.x * index_t(blockDim.x) + threadIdx.x; i < n; i += index_t(blockDim.x) * gridDim.x) {
    const T m = kernels::dropout_drops(i, shape, key, threshold) ? T(0) : scale;
    mask[i] = m;
    out[i] = x[i] * m;
  }
}

template <typename T>
void dropout(int device, T* out, T* mask, const T* x, const StridedShape& shape, std::uint64_t key,
             std::uint32_t threshold, T scale) {
  const index_t n = kernels::numel(shape);
  if (n == 0) return;
  dropout_kernel<<<detail::blocks_for(n), detail::kThreads, 0, detail::stream_for(device)>>>(out, mask, x, shape, n,
                                                                                             key, threshold, scale);
  detail::check_launch("dropout", device);
}

template <typename T>
__global__ void adam_kernel(T* p, T* m, T* v, const T* g, index_t n, AdamStep step) {
  const T beta1 = T(step.beta1), beta2 = T(step.beta2);
  const T one_minus_beta1 = T(1.0 - step.beta1), one_minus_beta2 = T(1.0 - step.beta2);
  const T weight_decay = T(step.weight_decay), minus_step_size = T(-step.step_size);
  const T sqrt_bc2 = T(step.sqrt_bias_correction2), eps = T(step.eps);
  for (index_t i = blockIdx.x * index_t(blockDim.x) + threadIdx.x; i < n; i += index_t(blockDim.x) * gridDim.x) {
    const T grad = step.weight_decay == 0.0 ? g[i] : g[i] + weight_decay * p[i];
    m[i] = m[i] * beta1 + one_minus_beta1 * grad;
    v[i] = v[i] * beta2 + (one_minus_beta2 * grad) * grad;
    p[i] += (minus_step_size * m[i]) / (sqrt(v[i]) / sqrt_bc2 + eps);
  }
}

template <typename T>
void adam_step(int device, T* p, T* m, T* v, const T* g, index_t n, const AdamStep& step) {
  if (n == 0) return;
  adam_kernel<<<detail::blocks_for(n), detail::kThreads, 0, detail::stream_for(device)>>>(p, m, v, g, n, step);
  detail::check_launch("adam_step", device);
}

/// One block: Σ x² in double, each thread a strided share, then a fixed tree.
template <typename T>
__global__ void sum_of_squares_kernel(double* total, const T* x, index_t n) {
  __shared__ double partial[detail::kThreads];
  double sum = 0;
  for (index_t i = threadIdx.x; i < n; i += detail::kThreads) sum += double(x[i]) * double(x[i]);
  partial[threadIdx.x] = sum;
  __syncthreads();
  for (int half = detail::kThreads / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) partial[threadIdx.x] += partial[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0) *total += partial[0];
}

template <typename T>
void sum_of_squares(int device, double* total, const T* x, index_t n) {
  if (n == 0) return;
  sum_of_squares_kernel<<<1, detail::kThreads, 0, detail::stream_for(device)>>>(total, x, n);
  detail::check_launch("sum_of_squares", device);
}

template <typename T>
__global__ void clip_kernel(T* x, index_t n, const double* sum_of_squares, double max_norm) {
  const double norm = sqrt(*sum_of_squares);
  if (!(norm > max_norm)) return;
  const T scale = T(max_norm / norm);
  for (index_t i = blockIdx.x * index_t(blockDim.x) + threadIdx.x; i < n; i += index_t(blockDim.x) * gridDim.x)
    x[i] *= scale;
}

template <typename T>
void clip_by_norm(int device, T* x, index_t n, const double* sum_of_squares, double max_norm) {
  if (n == 0) return;
  clip_kernel<<<detail::blocks_for(n), detail::kThreads, 0, detail::stream_for(device)>>>(x, n, sum_of_squares,
                                                                                          max_norm);
  detail::check_launch("clip_by_norm", device);
}

template <typename T>
__global__ void affine_kernel(T* out, const T* x, index_t n, T alpha, T beta) {
  for (index_t i = blockIdx.x * index_t(blockDim.x) + threadIdx.x; i < n; i += index_t(blockDim.x) * gridDim.x)
    out[i] = alpha * x[i] + beta;
}

template <typename T>
void affine(int device, T* out, const T* x, index_t n, T alpha, T beta) {
  if (n == 0) return;
  affine_kernel<<<detail::blocks_for(n), detail::kThreads, 0, detail::stream_for(device)>>>(out, x, n, alpha, beta);
  detail::check_launch("affine", device);
}

template <typename T>
__global__ void axpy_kernel(T* dst, const T* src, index_t n, T alpha) {
  for (index_t i = blockIdx.x * index_t(blockDim.x) + threadIdx.x; i < n; i += index_t(blockDim.x) * gridDim.x)
    dst[i] += alpha * src[i];
}

template <typename T>
void axpy(int device, T* dst, const T* src, index_t n, T alpha) {
  if (n == 0) return;
  axpy_kernel<<<detail::blocks_for(n), detail::kThreads, 0, detail::stream_for(device)>>>(dst, src, n, alpha);
  detail::check_launch("axpy", device);
}

template <typename T>
__global__ void sum_to_kernel(T* out, index_t n_out, const T* g, kernels::SumPlan plan) {
  for (index_t o = blockIdx.x * index_t(blockDim.x) + threadIdx.x; o < n_out; o += index_t(blockDim.x) * gridDim.x)
    out[o] = kernels::sum_one(o, g, plan);
}

/// A block per output, for few outputs of many terms each (a loss, a bias gradient):
/// each thread a strided share, then a fixed tree.
template <typename T>
__global__ void sum_to_block_kernel(T* out, const T* g, kernels::SumPlan plan) {
  __shared__ T partial[detail::kThreads];
  const index_t base = kernels::strided_offset(blockIdx.x, plan.kept);
  T sum = 0;
  for (index_t s = threadIdx.x; s < plan.summed_count; s += detail::kThreads)
    sum += g[base + kernels::strided_offset(s, plan.summed)];
  partial[threadIdx.x] = sum;
  __syncthreads();
  for (int half = detail::kThreads / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) partial[threadIdx.x] += partial[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0) out[blockIdx.x] = partial[0];
}

template <typename T>
void sum_to(int device, T* out, index_t n_out, const T* g, const StridedShape& out_strides) {
  if (n_out == 0) return;
  if (kernels::numel(out_strides) == 0) {  // nothing to add: zeros
    fill(device, out, n_out, T(0));
    return;
  }
  const kernels::SumPlan plan = kernels::make_sum_plan(out_strides);
  if (n_out < 4096 && plan.summed_count >= 64 && n_out <= 2147483647)
    sum_to_block_kernel<<<static_cast<unsigned>(n_out), detail::kThreads, 0, detail::stream_for(device)>>>(out, g,
                                                                                                           plan);
  else
    sum_to_kernel<<<detail::blocks_for(n_out), detail::kThreads, 0, detail::stream_for(device)>>>(out, n_out, g, plan);
  detail::check_launch("sum_to", device);
}

HEED_CUDA_INSTANTIATE(HEED_KERNELS_ELEMENTWISE)
HEED_CUDA_INSTANTIATE_FILL(float)
HEED_CUDA_INSTANTIATE_FILL(double)
HEED_CUDA_INSTANTIATE_FILL(std::int64_t)
HEED_CUDA_INSTANTIATE_FILL(bool)

}  // namespace heed::cuda
