// src/cuda/caching_allocator.hpp — one device's caching allocator, shared by the CUDA
// runtime (cudaMalloc/cudaFree) and the host emulation (malloc/free).
//
// Blocks are rounded to a size class and kept, after release, by size; a request takes
// the smallest idle block that fits and is at most twice as large, so a training loop
// allocates afresh only while its peak grows. All of a device's work runs on its one
// stream, in order, so a released block is safe to hand out again at once: its last
// use is queued before any new one.
#pragma once

#include <cstddef>
#include <map>
#include <mutex>
#include <unordered_map>

namespace heed::cuda::detail {

class CachingAllocator {
 public:
  /// A block of at least `bytes`; raw_alloc(size) → pointer or nullptr when out of
  /// memory, in which case the idle blocks are freed with raw_free and it is tried once
  /// more. Returns nullptr when that fails too.
  template <typename Alloc, typename Free>
  void* allocate(std::size_t bytes, Alloc&& raw_alloc, Free&& raw_free) {
    const std::size_t rounded = size_class(bytes);
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = idle_.lower_bound(rounded);
    if (it != idle_.end() && it->first / 2 <= rounded) {
      void* p = it->second;
      live_.emplace(p, it->first);
      live_bytes_ += it->first;
      idle_bytes_ -= it->first;
      idle_.erase(it);
      return p;
    }
    void* p = raw_alloc(rounded);
    if (p == nullptr) {
      free_idle_locked(raw_free);
      p = raw_alloc(rounded);
      if (p == nullptr) return nullptr;
    }
    ++mallocs_;
    live_.emplace(p, rounded);
    live_bytes_ += rounded;
    return p;
  }

  /// Returns a block to the cache; a pointer it did not hand out is ignored.
  void release(void* p) noexcept {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = live_.find(p);
    if (it == live_.end()) return;
    idle_.emplace(it->second, p);
    idle_bytes_ += it->second;
    live_bytes_ -= it->second;
    live_.erase(it);
  }

  template <typename Free>
  void free_idle(Free&& raw_free) {
    std::lock_guard<std::mutex> lock(mutex_);
    free_idle_locked(raw_free);
  }

  std::size_t live_bytes() { return locked(live_bytes_); }
  std::size_t idle_bytes() { return locked(idle_bytes_); }
  std::size_t mallocs() { return locked(mallocs_); }

  /// Small blocks in steps of 512 bytes, large ones in steps of 2 MiB: few classes, so
  /// that the sizes of one training step recur exactly.
  static std::size_t size_class(std::size_t bytes) {
    constexpr std::size_t kSmall = 512, kLarge = std::size_t(2) << 20;
    const std::size_t step = bytes <= (std::size_t(1) << 20) ? kSmall : kLarge;
    return (bytes == 0 ? 1 : bytes + step - 1) / step * step;
  }

 private:
  template <typename Free>
  void free_idle_locked(Free&& raw_free) {
    for (const auto& entry : idle_) raw_free(entry.second);
    idle_.clear();
    idle_bytes_ = 0;
  }

  std::size_t locked(const std::size_t& value) {
    std::lock_guard<std::mutex> lock(mutex_);
    return value;
  }

  std::mutex mutex_;
  std::multimap<std::size_t, void*> idle_;
  std::unordered_map<void*, std::size_t> live_;  // block → its rounded size
  std::size_t live_bytes_ = 0, idle_bytes_ = 0, mallocs_ = 0;
};

}  // namespace heed::cuda::detail
