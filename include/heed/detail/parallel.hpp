// heed/detail/parallel.hpp — splitting independent work across threads.
//
// With OpenMP enabled in the user's build (-fopenmp), large loops split into one
// contiguous chunk per thread; without it, or for small work, they run on the calling
// thread. Each element is computed by exactly one thread in the same order as the
// serial loop, so results do not depend on the thread count. The threads that run a
// region's parts take the calling thread's ThreadContext for them.
#pragma once

#include <algorithm>
#include <cstddef>
#include <vector>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "heed/core/shape.hpp"

namespace heed::detail {

/// A thread's settings that its parallel regions carry to the threads running their
/// parts, so that a part computes as its caller would: whether float products run in
/// bf16 (an AutocastGuard, heed/ops/autocast.hpp).
struct ThreadContext {
  bool bf16_products = false;
};

inline ThreadContext& thread_context() {
  thread_local ThreadContext context;
  return context;
}

/// Sets this thread's context for its lifetime: a worker taking its caller's, a guard.
class ThreadContextScope {
 public:
  explicit ThreadContextScope(const ThreadContext& context) : saved_(thread_context()) { thread_context() = context; }
  ~ThreadContextScope() { thread_context() = saved_; }
  ThreadContextScope(const ThreadContextScope&) = delete;
  ThreadContextScope& operator=(const ThreadContextScope&) = delete;

 private:
  ThreadContext saved_;
};

/// Elements per chunk below which threading costs more than it saves.
constexpr index_t kParallelGrain = 32768;

/// Calls body(begin, end) over [0, n), in parallel when each thread gets ≥ grain units.
template <typename Body>
void parallel_for(index_t n, index_t grain, Body&& body) {
#ifdef _OPENMP
  const index_t threads = std::min<index_t>(omp_get_max_threads(), n / std::max<index_t>(grain, 1));
  if (threads > 1 && !omp_in_parallel()) {
    const ThreadContext context = thread_context();
#pragma omp parallel for num_threads(static_cast <int>(threads)) schedule(static)
    for (index_t chunk = 0; chunk < threads; ++chunk) {
      const ThreadContextScope caller(context);
      body(n * chunk / threads, n * (chunk + 1) / threads);
    }
    return;
  }
#else
  (void)grain;
#endif
  if (n > 0) body(index_t(0), n);
}

/// Multiply-adds (or elementwise updates) below which parallel_tasks and
/// parallel_chunks run on the calling thread: waking a sleeping thread
/// (OMP_WAIT_POLICY=passive) costs tens of µs, more than such work takes. Decoding's
/// attention over its cache (128 sentences × 4 heads, one query each) and d2l's tiny
/// models made several such regions a step, and ran slower on 2 threads than on 1.
constexpr index_t kParallelTaskWork = index_t(1) << 20;

/// How many threads parallel_tasks would use for a large job here: OpenMP's count
/// outside a parallel region, 1 inside one (or without OpenMP).
inline index_t parallel_threads() {
#ifdef _OPENMP
  return omp_in_parallel() ? 1 : omp_get_max_threads();
#else
  return 1;
#endif
}

/// Calls body(task) for each task in [0, n), handing tasks out one at a time to the
/// threads: for tasks of uneven cost (attention under a causal mask). Each task runs
/// whole on one thread, so results do not depend on the thread count when tasks write
/// disjoint outputs. `work` estimates the whole job in multiply-adds: below
/// kParallelTaskWork it runs on the calling thread. Body must not throw.
template <typename Body>
void parallel_tasks(index_t n, index_t work, Body&& body) {
#ifdef _OPENMP
  const index_t threads = work < kParallelTaskWork ? 1 : std::min<index_t>(omp_get_max_threads(), n);
  if (threads > 1 && !omp_in_parallel()) {
    const ThreadContext context = thread_context();
#pragma omp parallel for num_threads(static_cast <int>(threads)) schedule(dynamic, 1)
    for (index_t task = 0; task < n; ++task) {
      const ThreadContextScope caller(context);
      body(task);
    }
    return;
  }
#else
  (void)work;
#endif
  for (index_t task = 0; task < n; ++task) body(task);
}

/// Elements per task of parallel_chunks: a multiple of every SIMD width, so that a chunk
/// boundary never moves an element between a vectorised loop and its scalar tail (the
/// bits of an elementwise pass are those of one pass over the whole buffer).
constexpr index_t kChunkElements = index_t(1) << 16;

/// A range [begin, end) of buffer `item`: one task of parallel_chunks.
struct Chunk {
  std::size_t item;
  index_t begin, end;
};

/// Buffers of `sizes` elements cut into chunks of kChunkElements, in order: the edges
/// depend only on the sizes.
inline std::vector<Chunk> chunks_of(const std::vector<index_t>& sizes) {
  std::vector<Chunk> chunks;
  for (std::size_t item = 0; item < sizes.size(); ++item)
    for (index_t begin = 0; begin < sizes[item]; begin += kChunkElements)
      chunks.push_back({item, begin, std::min(sizes[item], begin + kChunkElements)});
  return chunks;
}

/// Calls body(index, chunks[index]) for every chunk, handed out as parallel_tasks:
/// elementwise work over many buffers of very different sizes (every parameter of a
/// model: Adam's update, clipping), spread evenly over the threads. Body must not throw.
template <typename Body>
void parallel_chunks(const std::vector<Chunk>& chunks, Body&& body) {
  index_t total = 0;
  for (const Chunk& c : chunks) total += c.end - c.begin;
  parallel_tasks(static_cast<index_t>(chunks.size()), total, [&](index_t task) {
    const auto index = static_cast<std::size_t>(task);
    body(index, chunks[index]);
  });
}

}  // namespace heed::detail
