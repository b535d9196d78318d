// src/cuda/token_choice.cu — decoding's choice of tokens on the device, so that a step
// copies back its best tokens rather than its logits: a block per row, the row's
// log-normaliser by reductions in a fixed order, each thread's best tokens over its
// stride, merged by the first thread (heed/seq2seq/token_choice.hpp's top_log_probs).
#include <cmath>

#include "common.cuh"
#include "instantiate.hpp"
#include "kernels.cuh"

namespace heed::cuda {

namespace {

constexpr int kChoiceThreads = 128;

/// a before b: a larger log P, or the lower token at a tie.
template <typename T>
__device__ bool before(T a, std::int64_t token_a, T b, std::int64_t token_b) {
  return a > b || (a == b && token_a < token_b);
}

/// The block's maximum (with `max`) or sum of one value per thread, in a fixed tree order.
template <typename T>
__device__ T block_reduce(T value, T* scratch, bool max) {
  const int t = threadIdx.x;
  scratch[t] = value;
  __syncthreads();
  for (int half = kChoiceThreads / 2; half > 0; half /= 2) {
    if (t < half)
      scratch[t] =
          max ? (scratch[t + half] > scratch[t] ? scratch[t + half] : scratch[t]) : scratch[t] + scratch[t + half];
    __syncthreads();
  }
  const T total = scratch[0];
  __syncthreads();
  return total;
}

template <typename T>
__global__ void top_log_probs_kernel(T* log_probs, std::int64_t* tokens, std::int64_t* found, const T* logits,
                                     index_t V, index_t count, const std::int64_t* banned, index_t num_banned,
                                     const std::int64_t* eos_banned, std::int64_t eos) {
  __shared__ T scratch[kChoiceThreads];
  __shared__ T best[kChoiceThreads * kDeviceTopTokens];
  __shared__ std::int64_t best_token[kChoiceThreads * kDeviceTopTokens];
  __shared__ int best_count[kChoiceThreads];
  const index_t r = blockIdx.x;
  const int t = threadIdx.x;
  const T* row = logits + r * V;
  T max = -INFINITY;
  for (index_t j = t; j < V; j += kChoiceThreads) max = row[j] > max ? row[j] : max;
  max = block_reduce(max, scratch, true);
  T sum = 0;
  for (index_t j = t; j < V; j += kChoiceThreads) sum += exp(row[j] - max);
  const T normaliser = max + log(block_reduce(sum, scratch, false));
  // This thread's best, best first: its tokens ascend, so a tie keeps the earlier one.
  T* mine = best + t * kDeviceTopTokens;
  std::int64_t* mine_token = best_token + t * kDeviceTopTokens;
  index_t n = 0;
  for (index_t j = t; count > 0 && j < V; j += kChoiceThreads)
    if (kernels::choosable(row[j], j, banned, num_banned, eos_banned[r] != 0, eos))
      kernels::keep_best(mine, mine_token, n, count, row[j] - normaliser, j);
  best_count[t] = static_cast<int>(n);
  __syncthreads();
  if (t != 0) return;
  int head[kChoiceThreads] = {};
  index_t k = 0;
  for (; k < count; ++k) {
    int from = -1;
    for (int i = 0; i < kChoiceThreads; ++i) {
      if (head[i] == best_count[i]) continue;
      const int at = i * kDeviceTopTokens + head[i];
      if (from < 0) {
        from = i;
        continue;
      }
      const int leader = from * kDeviceTopTokens + head[from];
      if (before(best[at], best_token[at], best[leader], best_token[leader])) from = i;
    }
    if (from < 0) break;
    const int at = from * kDeviceTopTokens + head[from]++;
    log_probs[r * count + k] = best[at];
    tokens[r * count + k] = best_token[at];
  }
  found[r] = k;
}

}  // namespace

template <typename T>
void top_log_probs(int device, T* log_probs, std::int64_t* tokens, std::int64_t* found, const T* logits, index_t rows,
                   index_t V, index_t count, const std::int64_t* banned, index_t num_banned,
                   const std::int64_t* eos_banned, std::int64_t eos) {
  if (rows == 0) return;
  if (count < 0 || count > kDeviceTopTokens)
    throw CudaError(heed::detail::concat("top_log_probs ", detail::on_device(device), ": count ", count,
                                         " is not in [0, ", kDeviceTopTokens, "]"));
  top_log_probs_kernel<<<static_cast<unsigned>(rows), kChoiceThreads, 0, detail::stream_for(device)>>>(
      log_probs, tokens, found, logits, V, count, banned, num_banned, eos_banned, eos);
  detail::check_launch("top_log_probs", device);
}

HEED_CUDA_INSTANTIATE(HEED_KERNELS_TOKEN_CHOICE)

}  // namespace heed::cuda
