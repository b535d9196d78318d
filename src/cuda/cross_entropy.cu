// src/cuda/cross_entropy.cu — softmax cross-entropy of rows of logits, forward and
// backward: a warp per row, reductions in a fixed order (results do not depend on the
// launch).
#include <cmath>

#include "common.cuh"
#include "instantiate.hpp"
#include "kernels.cuh"

namespace heed::cuda {

using detail::kWarp;
using detail::kWarpsPerBlock;
using detail::row_blocks;
using detail::warp_max;
using detail::warp_row;
using detail::warp_sum;

__device__ inline bool row_counts(const CrossEntropyRows& rows, index_t r) {
  return rows.lens == nullptr || r % rows.steps < rows.lens[r / rows.steps];
}

template <typename T>
__global__ void cross_entropy_forward_kernel(T* loss, T* stats, const T* x, CrossEntropyRows rows) {
  const index_t r = warp_row();
  if (r >= rows.rows) return;
  const int lane = threadIdx.x % kWarp;
  const index_t c = rows.classes;
  if (!row_counts(rows, r)) {
    if (lane == 0) loss[r] = stats[2 * r] = stats[2 * r + 1] = T(0);
    return;
  }
  const T* row = x + r * c;
  T max = -INFINITY;
  for (index_t j = lane; j < c; j += kWarp) max = row[j] > max ? row[j] : max;
  max = warp_max(max);
  T sum = 0;
  for (index_t j = lane; j < c; j += kWarp) sum += exp(row[j] - max);
  const T log_sum = log(warp_sum(sum));
  // ε of heed/ops/cross_entropy.hpp: the target's share of the row's mean logit.
  const T eps = T(rows.label_smoothing);
  T row_sum = 0;
  if (eps != T(0)) {
    for (index_t j = lane; j < c; j += kWarp) row_sum += row[j];
    row_sum = warp_sum(row_sum);
  }
  if (lane == 0) {
    const std::int64_t label = rows.labels[r];
    stats[2 * r] = max;
    stats[2 * r + 1] = log_sum;
    // A label out of range reads nothing: its loss is NaN.
    const bool valid = label >= 0 && label < c;
    const T label_logit = valid ? row[label] : T(0);
    const T target =
        eps == T(0) ? label_logit - max : (T(1) - eps) * (label_logit - max) + eps * (row_sum / T(c) - max);
    loss[r] = valid ? log_sum - target : T(NAN);
  }
}

template <typename T>
__global__ void cross_entropy_backward_kernel(T* dx, const T* x, const T* stats, CrossEntropyRows rows, const T* g,
                                              index_t g_stride, T divisor) {
  const index_t r = warp_row();
  if (r >= rows.rows) return;
  const int lane = threadIdx.x % kWarp;
  const index_t c = rows.classes;
  T* out = dx + r * c;
  if (!row_counts(rows, r)) {
    for (index_t j = lane; j < c; j += kWarp) out[j] = T(0);
    return;
  }
  const T k = g[r / g_stride] / divisor;
  const std::int64_t label = rows.labels[r];
  const T max = stats[2 * r], log_sum = stats[2 * r + 1];
  const T eps = T(rows.label_smoothing), spread = k * eps / T(c), at_label = (T(1) - eps) * k;
  for (index_t j = lane; j < c; j += kWarp)
    out[j] = exp((x[r * c + j] - max) - log_sum) * k -
             (eps == T(0) ? (j == label ? k : T(0)) : spread + (j == label ? at_label : T(0)));
}

template <typename T>
void cross_entropy_forward(int device, T* loss, T* stats, const T* x, const CrossEntropyRows& rows) {
  if (rows.rows == 0) return;
  cross_entropy_forward_kernel<<<row_blocks(rows.rows), kWarpsPerBlock * kWarp, 0, detail::stream_for(device)>>>(
      loss, stats, x, rows);
  detail::check_launch("cross_entropy_forward", device);
}

template <typename T>
void cross_entropy_backward(int device, T* dx, const T* x, const T* stats, const CrossEntropyRows& rows, const T* g,
                            index_t g_stride, T divisor) {
  if (rows.rows == 0) return;
  cross_entropy_backward_kernel<<<row_blocks(rows.rows), kWarpsPerBlock * kWarp, 0, detail::stream_for(device)>>>(
      dx, x, stats, rows, g, g_stride, divisor);
  detail::check_launch("cross_entropy_backward", device);
}

HEED_CUDA_INSTANTIATE(HEED_KERNELS_CROSS_ENTROPY)

}  // namespace heed::cuda
