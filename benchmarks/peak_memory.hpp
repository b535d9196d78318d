// benchmarks/peak_memory.hpp — the peak resident memory that one run adds, for the
// benchmarks' --peak-memory modes (bench_transformer, bench_fused_attention).
//
// The peak is VmHWM of /proc/self/status, the high-water mark of this process's own
// memory map: getrusage's ru_maxrss is the same number in a process started from a
// shell, but it survives execve (getrusage(2)), so in a process started by a large one
// (a comparison script with PyTorch loaded) it begins at the parent's peak and hides
// the growth; both are printed. heed's buffer cache (core/storage.hpp) keeps freed
// large buffers for reuse; they are resident, so they count, as they would in a
// training loop. Run each measurement in a fresh process.
#pragma once

#include <sys/resource.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>

#include <heed/heed.hpp>

namespace heed_bench {

inline double max_rss_mib() {  // ru_maxrss: includes the peak of the process that exec'ed this one
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / 1024.0;  // KiB on Linux
}

// A "VmXXX:  1234 kB" line of /proc/self/status in MiB: VmHWM (peak resident size of this
// process's memory map) or VmRSS (resident now).
inline double status_mib(const char* field) {
  std::ifstream status("/proc/self/status");
  std::string line;
  const std::size_t n = std::strlen(field);
  while (std::getline(status, line))
    if (line.compare(0, n, field) == 0 && line.size() > n && line[n] == ':')
      return std::stod(line.substr(n + 1)) / 1024.0;
  return -1.0;
}

// One small forward+backward of a module of its own: starts OpenMP's threads and the
// like, touching nothing the measured run will use.
inline void tiny_warm_up() {
  heed::Generator gen(1);
  heed::TransformerOptions options;
  options.generator = &gen;
  heed::EncoderBlock<float> block(16, 16, 16, 16, heed::Shape{16}, 16, 32, 2, 0.0, false, options);
  auto X = heed::randn<float>({2, 4, 16}, gen).requires_grad_();
  heed::IndexTensor lens = heed::randint(1, 5, {2}, gen);
  auto out = block(X, heed::AttentionMask<float>(lens));
  out.backward(heed::ones<float>({2, 4, 16}));
}

/// Warms up, runs `run` once and prints one JSON line with the growth of the peak in
/// MiB ("peak_delta_mib") and the numbers it comes from.
template <typename Run>
int report_peak(const std::string& which, Run&& run) {
  tiny_warm_up();
  const double before = status_mib("VmHWM"), rss_before = status_mib("VmRSS"), maxrss_before = max_rss_mib();
  run();
  const double after = status_mib("VmHWM"), maxrss_after = max_rss_mib();
  const double cached = static_cast<double>(heed::buffer_cache_idle_bytes()) / (1024.0 * 1024.0);
  std::printf(
      "{\"case\": \"%s\", \"hwm_before_mib\": %.1f, \"hwm_after_mib\": %.1f, \"rss_before_mib\": %.1f, "
      "\"maxrss_before_mib\": %.1f, \"maxrss_after_mib\": %.1f, \"buffer_cache_idle_mib\": %.1f, "
      "\"peak_delta_mib\": %.1f}\n",
      which.c_str(), before, after, rss_before, maxrss_before, maxrss_after, cached, after - before);
  return 0;
}

}  // namespace heed_bench
