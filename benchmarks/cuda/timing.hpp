// benchmarks/cuda/timing.hpp — the GPU benchmarks' clock: the median of repeated runs,
// each waited for on the device.
#pragma once

#include <algorithm>
#include <chrono>
#include <functional>
#include <vector>

#include <heed/cuda/runtime.hpp>

namespace heed_bench {

/// Median seconds of `reps` runs of f after `warmups` runs, waiting for device 0.
inline double seconds(const std::function<void()>& f, int reps, int warmups = 2) {
  for (int i = 0; i < warmups; ++i) f();
  heed::cuda::synchronize(0);
  std::vector<double> times;
  for (int i = 0; i < reps; ++i) {
    const auto start = std::chrono::steady_clock::now();
    f();
    heed::cuda::synchronize(0);
    times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

}  // namespace heed_bench
