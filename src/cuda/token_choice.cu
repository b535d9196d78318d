// src/cuda/token_choice.cu — decoding's choice of tokens on the device, so that a step
// copies back its best tokens rather than its logits: a block per row, the row's
// log-normaliser by reductions in a fixed order, each thread's best tokens over its
// stride, merged by the first thread (heed/seq2seq/token_choice.hpp's top_log_probs);
// and sampling's draw (sample_token): the top-k threshold the same way, then the sum of
// p over each thread's run of tokens, the runs added in order by the first thread, which
// scans the run where the running sum passes the draw.
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

/// log Σ exp of a row of V logits: its max, then the sum of exp(x − max), both reduced
/// over the block in a fixed order.
template <typename T>
__device__ T row_normaliser(const T* row, index_t V, T* scratch) {
  const int t = threadIdx.x;
  T max = -INFINITY;
  for (index_t j = t; j < V; j += kChoiceThreads) max = row[j] > max ? row[j] : max;
  max = block_reduce(max, scratch, true);
  T sum = 0;
  for (index_t j = t; j < V; j += kChoiceThreads) sum += exp(row[j] - max);
  return max + log(block_reduce(sum, scratch, false));
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
  const T normaliser = row_normaliser(row, V, scratch);
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

template <typename T>
__global__ void sample_tokens_kernel(T* log_probs, std::int64_t* tokens, std::int64_t* found, const T* logits,
                                     index_t V, const std::int64_t* banned, index_t num_banned,
                                     const std::int64_t* eos_banned, std::int64_t eos, double temperature,
                                     index_t top_k, const double* uniforms) {
  __shared__ T scratch[kChoiceThreads];
  __shared__ double sums[kChoiceThreads];
  __shared__ double best[kChoiceThreads * kDeviceTopTokens];
  __shared__ int best_count[kChoiceThreads];
  __shared__ index_t last_kept[kChoiceThreads];
  const index_t r = blockIdx.x;
  const int t = threadIdx.x;
  const T* row = logits + r * V;
  const bool no_eos = eos_banned[r] != 0;
  const auto allowed = [&](index_t j) { return kernels::choosable(row[j], j, banned, num_banned, no_eos, eos); };
  const T normaliser = row_normaliser(row, V, scratch);
  T kept_max = -INFINITY;  // the largest choosable logit
  double count = 0;
  for (index_t j = t; j < V; j += kChoiceThreads)
    if (allowed(j)) kept_max = row[j] > kept_max ? row[j] : kept_max, ++count;
  kept_max = block_reduce(kept_max, scratch, true);
  count = block_reduce(count, sums, false);
  if (!(kept_max > T(-INFINITY))) {  // nothing to choose (or NaN)
    if (t == 0) found[r] = 0;
    return;
  }
  const auto p = [&](index_t j) {
    return allowed(j) ? exp(static_cast<double>(row[j] - kept_max) / temperature) : 0.0;
  };
  // top_k: the k-th largest p, from each thread's k largest over its stride.
  double threshold = 0;
  if (top_k > 0 && static_cast<double>(top_k) < count) {
    double* mine = best + t * kDeviceTopTokens;
    int n = 0;
    for (index_t j = t; j < V; j += kChoiceThreads) {
      const double q = p(j);
      if (n == top_k && !(q > mine[n - 1])) continue;
      int at = n < top_k ? n++ : n - 1;
      for (; at > 0 && q > mine[at - 1]; --at) mine[at] = mine[at - 1];
      mine[at] = q;
    }
    best_count[t] = n;
    __syncthreads();
    if (t == 0) {
      int head[kChoiceThreads] = {};
      for (index_t k = 0; k < top_k; ++k) {
        int from = -1;
        for (int i = 0; i < kChoiceThreads; ++i)
          if (head[i] < best_count[i] &&
              (from < 0 || best[i * kDeviceTopTokens + head[i]] > best[from * kDeviceTopTokens + head[from]]))
            from = i;
        threshold = best[from * kDeviceTopTokens + head[from]++];
      }
      sums[0] = threshold;
    }
    __syncthreads();
    threshold = sums[0];
    __syncthreads();
  }
  // Each thread's run of tokens [begin, end): its sum of kept p and its last kept token.
  const index_t run = (V + kChoiceThreads - 1) / kChoiceThreads;
  const index_t begin = t * run, end = begin + run < V ? begin + run : V;
  double total = 0;
  index_t last = -1;
  for (index_t j = begin; j < end; ++j) {
    const double q = p(j);
    if (q > 0.0 && q >= threshold) total += q, last = j;
  }
  sums[t] = total;
  last_kept[t] = last;
  __syncthreads();
  if (t != 0) return;
  double all = 0;
  for (int i = 0; i < kChoiceThreads; ++i) all += sums[i];
  const double u = uniforms[r] * all;
  double running = 0;
  index_t chosen = -1;
  for (int i = 0; i < kChoiceThreads && chosen < 0; ++i) {
    if (!(running + sums[i] > u)) {
      running += sums[i];
      continue;
    }
    const index_t from = i * run, to = from + run < V ? from + run : V;
    for (index_t j = from; j < to && chosen < 0; ++j) {
      const double q = p(j);
      if (q > 0.0 && q >= threshold && (running += q) > u) chosen = j;
    }
  }
  for (int i = kChoiceThreads - 1; chosen < 0 && i >= 0; --i)  // short by rounding: the last kept token
    chosen = last_kept[i];
  log_probs[r] = row[chosen] - normaliser;
  tokens[r] = chosen;
  found[r] = 1;
}

}  // namespace

template <typename T>
void sample_tokens(int device, T* log_probs, std::int64_t* tokens, std::int64_t* found, const T* logits, index_t rows,
                   index_t V, const std::int64_t* banned, index_t num_banned, const std::int64_t* eos_banned,
                   std::int64_t eos, double temperature, index_t top_k, const double* uniforms) {
  if (rows == 0) return;
  if (top_k < 0 || top_k > kDeviceTopTokens || !(temperature > 0.0))
    throw CudaError(heed::detail::concat("sample_tokens ", detail::on_device(device), ": top_k ", top_k,
                                         " is not in [0, ", kDeviceTopTokens, "] or temperature ", temperature,
                                         " is not positive"));
  sample_tokens_kernel<<<static_cast<unsigned>(rows), kChoiceThreads, 0, detail::stream_for(device)>>>(
      log_probs, tokens, found, logits, V, banned, num_banned, eos_banned, eos, temperature, top_k, uniforms);
  detail::check_launch("sample_tokens", device);
}

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
