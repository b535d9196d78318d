// src/cuda/compare.cu — comparisons and what they select: masks, where, clamp, and the
// extremes along a dim with their indices (max, argmax, ...): heed/ops/kernel_list.hpp's
// HEED_KERNELS_COMPARE. A thread per output element throughout: an extreme's scan
// along its dim is in order, so its ties and NaNs resolve as on the CPU.
#include "common.cuh"
#include "instantiate.hpp"
#include "kernels.cuh"

namespace heed::cuda {

#define HEED_GRID_STRIDE(i, n) \
  for (index_t i = blockIdx.x * index_t(blockDim.x) + threadIdx.x; i < (n); i += index_t(blockDim.x) * gridDim.x)

template <typename T>
__global__ void compare_kernel(CompareOp op, bool* out, const T* a, StridedShape a_shape, const T* b,
                               StridedShape b_shape, index_t n) {
  HEED_GRID_STRIDE(i, n)
  out[i] = kernels::compare(op, a[kernels::strided_offset(i, a_shape)], b[kernels::strided_offset(i, b_shape)]);
}

template <typename T>
__global__ void where_kernel(T* out, const bool* cond, StridedShape cond_shape, const T* a, StridedShape a_shape,
                             const T* b, StridedShape b_shape, index_t n) {
  HEED_GRID_STRIDE(i, n)
  out[i] = cond[kernels::strided_offset(i, cond_shape)] ? a[kernels::strided_offset(i, a_shape)]
                                                        : b[kernels::strided_offset(i, b_shape)];
}

template <typename T>
__global__ void clamp_kernel(T* out, const T* x, index_t n, T lo, T hi) {
  HEED_GRID_STRIDE(i, n) out[i] = heed::detail::clamp_value(x[i], lo, hi);
}

template <typename T>
__global__ void clamp_backward_kernel(T* dx, const T* g, const T* x, index_t n, T lo, T hi) {
  HEED_GRID_STRIDE(i, n) dx[i] = heed::detail::clamp_grad(g[i], x[i], lo, hi);
}

template <typename T>
__global__ void extreme_along_kernel(T* values, std::int64_t* indices, const T* x, index_t outer, index_t size,
                                     index_t inner, bool largest) {
  HEED_GRID_STRIDE(o, outer * inner) kernels::extreme_one(o, values, indices, x, size, inner, largest);
}

template <typename T>
__global__ void scatter_along_kernel(T* dx, const T* g, const std::int64_t* indices, index_t size, index_t inner,
                                     index_t n) {
  HEED_GRID_STRIDE(o, n) dx[((o / inner) * size + indices[o]) * inner + o % inner] = g[o];
}

#undef HEED_GRID_STRIDE

template <typename T>
void compare(int device, CompareOp op, bool* out, const T* a, const StridedShape& a_shape, const T* b,
             const StridedShape& b_shape) {
  const index_t n = kernels::numel(a_shape);
  if (n == 0) return;
  compare_kernel<<<detail::blocks_for(n), detail::kThreads, 0, detail::stream_for(device)>>>(op, out, a, a_shape, b,
                                                                                             b_shape, n);
  detail::check_launch("compare", device);
}

template <typename T>
void where(int device, T* out, const bool* cond, const StridedShape& cond_shape, const T* a,
           const StridedShape& a_shape, const T* b, const StridedShape& b_shape) {
  const index_t n = kernels::numel(cond_shape);
  if (n == 0) return;
  where_kernel<<<detail::blocks_for(n), detail::kThreads, 0, detail::stream_for(device)>>>(out, cond, cond_shape, a,
                                                                                           a_shape, b, b_shape, n);
  detail::check_launch("where", device);
}

template <typename T>
void clamp(int device, T* out, const T* x, index_t n, T lo, T hi) {
  if (n == 0) return;
  clamp_kernel<<<detail::blocks_for(n), detail::kThreads, 0, detail::stream_for(device)>>>(out, x, n, lo, hi);
  detail::check_launch("clamp", device);
}

template <typename T>
void clamp_backward(int device, T* dx, const T* g, const T* x, index_t n, T lo, T hi) {
  if (n == 0) return;
  clamp_backward_kernel<<<detail::blocks_for(n), detail::kThreads, 0, detail::stream_for(device)>>>(dx, g, x, n, lo,
                                                                                                    hi);
  detail::check_launch("clamp_backward", device);
}

template <typename T>
void extreme_along(int device, T* values, std::int64_t* indices, const T* x, index_t outer, index_t size, index_t inner,
                   bool largest) {
  if (outer * inner == 0) return;
  extreme_along_kernel<<<detail::blocks_for(outer * inner), detail::kThreads, 0, detail::stream_for(device)>>>(
      values, indices, x, outer, size, inner, largest);
  detail::check_launch("extreme_along", device);
}

template <typename T>
void scatter_along(int device, T* dx, const T* g, const std::int64_t* indices, index_t outer, index_t size,
                   index_t inner) {
  if (outer * inner == 0) return;
  scatter_along_kernel<<<detail::blocks_for(outer * inner), detail::kThreads, 0, detail::stream_for(device)>>>(
      dx, g, indices, size, inner, outer * inner);
  detail::check_launch("scatter_along", device);
}

HEED_CUDA_INSTANTIATE(HEED_KERNELS_COMPARE)

}  // namespace heed::cuda
