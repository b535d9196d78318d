// heed/core/buffer_cache.hpp — where heed's CPU tensor buffers come from and go back to.
//
// Every op returns a new tensor, so a training loop frees and allocates buffers of the
// same sizes on every step. Buffers go back to a cache rather than to the system:
// fresh large memory would have to be faulted in page by page (about 30 ms for 64 MiB
// here, twice the time of a softmax over it), and glibc's aligned allocation of small
// buffers took a tenth of a Bahdanau training step. heed::empty_buffer_cache()
// releases what is idle; heed::set_buffer_cache_limit() bounds it (1 GiB by default).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <iterator>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <thread>
#include <vector>

#if defined(__GLIBC__)  // known from <cstdlib> above
#include <malloc.h>     // mallopt, malloc_trim (retain_freed_memory, empty_buffer_cache)
#endif

namespace heed {

/// The bytes of heed's CPU tensor buffers: in tensors now (`in_use`), kept idle for reuse
/// (`idle`), and the most in tensors (`peak_in_use`, as PyTorch's max_memory_allocated)
/// and the most held in all (`peak_held`, in tensors or idle: what the process's
/// resident size sees) since the start or the last reset_buffer_peaks. Sizes are those
/// of the allocations (rounded up to 64 bytes and to their size class).
struct BufferUsage {
  std::size_t in_use = 0, idle = 0, peak_in_use = 0, peak_held = 0;
};

}  // namespace heed

namespace heed::detail {

/// A lock for critical sections of a few dozen instructions taken very often from
/// several threads (every tensor's allocation and release): a waiter spins instead of
/// sleeping in the kernel as std::mutex's does, which cost more than the section itself
/// (d2l's Bahdanau model trained on 2 threads in micro-batches, each part allocating
/// thousands of small buffers a step). After a while it yields, in case the holder was
/// descheduled.
class SpinMutex {
 public:
  void lock() noexcept {
    for (int spins = 0; locked_.exchange(true, std::memory_order_acquire);)
      while (locked_.load(std::memory_order_relaxed))
        if (++spins > 64)
          std::this_thread::yield();
        else
          pause();
  }
  void unlock() noexcept { locked_.store(false, std::memory_order_release); }

 private:
  static void pause() noexcept {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();  // tells the core this is a spin: less power, no memory-order stall on exit
#endif
  }
  std::atomic<bool> locked_{false};
};

/// Idle buffers, kept for reuse: small ones by size class (a free list per multiple of
/// 64 bytes; see size_class), large ones by size (best fit). A buffer below
/// kThreadMaxBytes goes back to a cache of the thread that took it, when that thread
/// frees it: the next tensor that thread makes reuses lines still in its core's cache,
/// and takes no lock another thread also takes. Buffers freed on another thread, larger
/// ones, and those of threads that have ended go to one pool shared by all threads. With
/// a single shared pool, d2l's Bahdanau model trained in two micro-batches on two threads
/// took 1.21× the wall time and 1.24× the CPU time: each thread wrote buffers whose
/// lines the other core held, and both contended for the pool's lock.
class BufferCache {
 public:
  static constexpr std::size_t kMinBytes = std::size_t(1) << 16;  // below: the small lists
  static constexpr std::size_t kSmallGranule = 64;                // sizes are multiples of this
  static constexpr std::size_t kSmallPerSize = 1024;  // idle buffers kept per size (a GRU step saves hundreds)
  static constexpr std::size_t kThreadMaxBytes = std::size_t(1) << 20;  // below: back to the taking thread

  /// The bytes a buffer of at least `bytes` is allocated with: above 1 KiB, small sizes
  /// round up to one of eight classes per octave (at most 12.5 % more), so that tensors
  /// whose sizes drift a little, as decoding's do while sentences end and caches grow,
  /// reuse each other's buffers instead of each allocating and faulting in its own.
  static constexpr std::size_t size_class(std::size_t bytes) {
    if (bytes <= 1024 || bytes >= kMinBytes) return bytes;
    std::size_t octave = 1024;
    while (octave * 2 <= bytes) octave *= 2;
    const std::size_t step = octave / 8;
    return (bytes + step - 1) / step * step;
  }

  static BufferCache& instance() {
    static BufferCache* cache = new BufferCache;  // never destroyed: tensors may outlive statics
    return *cache;
  }

  /// The calling thread's number (1, 2, ...; 0 once its cache has gone at its exit): a
  /// buffer remembers the thread that took it, for give.
  static std::uint64_t thread_id() {
    ThreadPool* own = thread_pool();
    return own != nullptr ? own->id : 0;
  }

  /// A cached buffer of at least `bytes` and at most twice that (the smallest such), or
  /// nullptr; its size is written back to `bytes`. The calling thread's own cache is
  /// asked first, then the shared pool, then other threads' caches. A resident buffer a
  /// little too big beats fresh memory, which would raise the peak. On a miss the caller
  /// allocates afresh, and only as many bytes of smaller idle buffers go
  /// (release_smaller): a training step needs the same sizes step after step, so once
  /// the first step has run, every request finds its buffer and nothing is allocated or
  /// faulted in again. (Releasing every idle buffer on a miss, as heed once did, freed
  /// buffers that the same step needed a moment later: the realistic Transformer, 16
  /// steps, faulted in 512k pages instead of 93k and trained in 8.6 s instead of 3.4.)
  void* take(std::size_t& bytes) {
    void* p = nullptr;
    ThreadPool* own = bytes < kThreadMaxBytes ? thread_pool() : nullptr;
    if (own != nullptr) {
      std::lock_guard<SpinMutex> lock(own->mutex);
      p = own->pool.take(bytes);
    }
    if (p == nullptr) {
      std::lock_guard<SpinMutex> lock(mutex_);
      p = shared_.take(bytes);
      // Other threads' idle buffers before fresh memory, which would raise the peak:
      // while one thread decodes alone, say, the others' caches sit idle.
      for (std::size_t i = 0; p == nullptr && own != nullptr && i < threads_.size(); ++i) {
        if (threads_[i] == own) continue;
        std::lock_guard<SpinMutex> thread_lock(threads_[i]->mutex);
        p = threads_[i]->pool.take(bytes);
      }
    }
    if (p == nullptr) {
      misses_.fetch_add(1, std::memory_order_relaxed);
      if (bytes >= kMinBytes) release_smaller(bytes);
      return nullptr;
    }
    note_in_use(bytes);
    return p;
  }

  /// Counts a buffer the caller allocated afresh after take missed.
  void allocated(std::size_t bytes) {
    raise_peak(peak_held_, held_.fetch_add(bytes, std::memory_order_relaxed) + bytes);
    note_in_use(bytes);
  }

  /// Takes back a buffer of `bytes` that thread `owner` (thread_id) took: into that
  /// thread's cache when it is the calling thread, else into the shared pool, within
  /// the limit on idle bytes; else back to the system.
  void give(void* p, std::size_t bytes, std::uint64_t owner) {
    in_use_.fetch_sub(bytes, std::memory_order_relaxed);
    if (idle_bytes() <= limit_.load(std::memory_order_relaxed) && keep(p, bytes, owner)) return;
    release(p, bytes);
  }

  /// Frees every idle buffer: the shared pool's and those in every thread's cache.
  void empty() {
    std::lock_guard<SpinMutex> lock(mutex_);
    release_all(shared_);
    for (ThreadPool* thread : threads_) {
      std::lock_guard<SpinMutex> thread_lock(thread->mutex);
      release_all(thread->pool);
    }
  }

  void set_limit(std::size_t bytes) {
    limit_.store(bytes, std::memory_order_relaxed);
    if (idle_bytes() > bytes) empty();
  }

  std::size_t idle_bytes() const {
    // Two loads, not one snapshot: while other threads take and give buffers, this is
    // off by theirs (and a difference below zero reads as 0).
    const std::size_t held = held_.load(std::memory_order_relaxed), in_use = in_use_.load(std::memory_order_relaxed);
    return held > in_use ? held - in_use : 0;
  }

  /// Requests the cache could not serve (each one a fresh allocation).
  std::uint64_t misses() const { return misses_.load(std::memory_order_relaxed); }

  BufferUsage usage() const {
    const std::size_t idle = idle_bytes();
    return {in_use_.load(std::memory_order_relaxed), idle, peak_in_use_.load(std::memory_order_relaxed),
            peak_held_.load(std::memory_order_relaxed)};
  }
  void reset_peaks() {
    peak_in_use_.store(in_use_.load(std::memory_order_relaxed), std::memory_order_relaxed);
    peak_held_.store(held_.load(std::memory_order_relaxed), std::memory_order_relaxed);
  }

 private:
  /// The idle buffers of one owner (a thread, or all threads): small ones by size class,
  /// large ones by size (best fit).
  struct Pool {
    std::multimap<std::size_t, void*> large;
    std::vector<void*> small[kMinBytes / kSmallGranule];

    void* take(std::size_t& bytes) {
      if (bytes < kMinBytes) {
        std::vector<void*>& list = small[bytes / kSmallGranule];
        if (list.empty()) return nullptr;
        void* p = list.back();
        list.pop_back();
        return p;
      }
      auto it = large.lower_bound(bytes);
      if (it == large.end() || it->first / 2 > bytes) return nullptr;
      bytes = it->first;
      void* p = it->second;
      large.erase(it);
      return p;
    }
    /// Whether p was kept: a small list holds at most kSmallPerSize, and keeping needs
    /// memory of its own (this runs in destructors, which must not throw).
    bool keep(void* p, std::size_t bytes) noexcept {
      try {
        if (bytes >= kMinBytes) {
          large.emplace(bytes, p);
          return true;
        }
        std::vector<void*>& list = small[bytes / kSmallGranule];
        if (list.size() >= kSmallPerSize) return false;
        list.push_back(p);
        return true;
      } catch (const std::bad_alloc&) {
        return false;
      }
    }
    /// Hands every idle buffer to f(p, bytes) and forgets it.
    template <typename F>
    void drain(F&& f) {
      for (const auto& entry : large) f(entry.second, entry.first);
      large.clear();
      for (std::size_t size = 0; size < std::size(small); ++size) {
        for (void* p : small[size]) f(p, size * kSmallGranule);
        small[size].clear();
      }
    }
  };

  /// A thread's own cache. Its thread locks it on each take and give (a lock no other
  /// thread wants, whose line stays in that core's cache); other threads lock it only
  /// on a miss of their own and in empty(), with mutex_ held first.
  struct ThreadPool {
    SpinMutex mutex;
    std::uint64_t id = 0;
    Pool pool;
  };

  /// Registers the thread's cache on first use, and at the thread's exit hands its idle
  /// buffers to the shared pool (tensors freed on the thread after that, in later
  /// destructors, go there too).
  class ThreadPoolOwner {
   public:
    ThreadPoolOwner() {
      auto own = std::make_unique<ThreadPool>();
      instance().enrol(own.get());  // may throw: then nothing is registered, and the next call tries again
      own_ = own.release();
    }
    ~ThreadPoolOwner() {
      instance().retire(own_);
      state() = State::gone;
    }
    ThreadPoolOwner(const ThreadPoolOwner&) = delete;
    ThreadPoolOwner& operator=(const ThreadPoolOwner&) = delete;
    ThreadPool* get() const { return own_; }

   private:
    ThreadPool* own_ = nullptr;
  };
  enum class State : unsigned char { none, live, gone };
  static State& state() {
    static thread_local State s = State::none;  // trivially destructible: readable in any destructor
    return s;
  }
  static ThreadPool* thread_pool() {
    static thread_local ThreadPool* own = nullptr;
    if (state() == State::live) return own;
    if (state() == State::gone) return nullptr;
    static thread_local ThreadPoolOwner owner;
    own = owner.get();
    state() = State::live;
    return own;
  }

  void enrol(ThreadPool* thread) {
    std::lock_guard<SpinMutex> lock(mutex_);
    thread->id = ++next_thread_id_;
    threads_.push_back(thread);
  }
  void retire(ThreadPool* thread) {
    std::lock_guard<SpinMutex> lock(mutex_);
    threads_.erase(std::find(threads_.begin(), threads_.end(), thread));  // out of empty()'s reach
    thread->pool.drain([&](void* p, std::size_t bytes) {
      if (!shared_.keep(p, bytes)) release(p, bytes);
    });
    delete thread;
  }

  /// Whether give kept p: in the calling thread's cache when it took the buffer, else in
  /// the shared pool. A thread's first give makes its cache, which needs memory; when
  /// there is none, p is not kept (give runs in destructors, which must not throw).
  bool keep(void* p, std::size_t bytes, std::uint64_t owner) noexcept {
    try {
      ThreadPool* own = bytes < kThreadMaxBytes && owner != 0 ? thread_pool() : nullptr;
      if (own != nullptr && own->id == owner) {
        std::lock_guard<SpinMutex> lock(own->mutex);
        if (own->pool.keep(p, bytes)) return true;
      }
      std::lock_guard<SpinMutex> lock(mutex_);
      return shared_.keep(p, bytes);
    } catch (const std::bad_alloc&) {
      return false;
    }
  }

  void note_in_use(std::size_t bytes) {
    raise_peak(peak_in_use_, in_use_.fetch_add(bytes, std::memory_order_relaxed) + bytes);
  }
  static void raise_peak(std::atomic<std::size_t>& peak, std::size_t now) {
    std::size_t seen = peak.load(std::memory_order_relaxed);
    while (now > seen && !peak.compare_exchange_weak(seen, now, std::memory_order_relaxed)) {
    }
  }

  void release(void* p, std::size_t bytes) {
    std::free(p);
    held_.fetch_sub(bytes, std::memory_order_relaxed);
  }
  void release_all(Pool& pool) {
    pool.drain([&](void* p, std::size_t bytes) { release(p, bytes); });
  }

  /// Before a fresh allocation of `bytes` (large): idle large buffers smaller than it,
  /// which could not serve it, go back to the system allocator, the largest first (the
  /// calling thread's, then the shared pool's, then other threads'), until as many bytes
  /// as it asks have gone, so that it can join them to serve it, instead of both staying
  /// resident.
  void release_smaller(std::size_t bytes) {
    if (idle_bytes() < bytes) return;
    std::size_t freed = 0;
    const auto release_from = [&](Pool& pool) {
      auto it = pool.large.lower_bound(bytes);
      while (freed < bytes && it != pool.large.begin()) {
        --it;
        freed += it->first;
        release(it->second, it->first);
        it = pool.large.erase(it);
      }
    };
    ThreadPool* own = thread_pool();
    std::lock_guard<SpinMutex> lock(mutex_);
    if (own != nullptr) {
      std::lock_guard<SpinMutex> thread_lock(own->mutex);
      release_from(own->pool);
    }
    release_from(shared_);
    for (ThreadPool* thread : threads_) {
      if (thread == own) continue;
      std::lock_guard<SpinMutex> thread_lock(thread->mutex);
      release_from(thread->pool);
    }
  }

  SpinMutex mutex_;  // the shared pool and the list of threads
  Pool shared_;
  std::vector<ThreadPool*> threads_;
  std::uint64_t next_thread_id_ = 0;
  // Bytes from the system not yet returned (in tensors or idle), in tensors, and their peaks.
  std::atomic<std::size_t> held_{0}, in_use_{0}, peak_held_{0}, peak_in_use_{0};
  std::atomic<std::size_t> limit_{std::size_t(1) << 30};
  std::atomic<std::uint64_t> misses_{0};
};

}  // namespace heed::detail

namespace heed {

/// Asks the C library to keep memory that is freed for reuse instead of giving it back
/// to the system, and returns whether it could (glibc: yes; elsewhere nothing changes).
/// glibc's malloc unmaps a large block when it is freed and trims the top of its heap,
/// so memory freed and then wanted again is faulted in afresh, page by page. Decoding
/// wants it again at once: its tensors change size at every step as sentences end,
/// and each size that no idle buffer fits frees smaller ones (above) for the new one.
/// It sets glibc's M_MMAP_THRESHOLD to 32 MiB (its largest) and M_TRIM_THRESHOLD to
/// 2 GiB, for the whole process: a trade of resident memory for speed that is the
/// program's to make (the README's figures: 8-10 % faster decoding at the recipe's
/// size, 4 % at OPUS-MT's, for a peak RSS up to a quarter higher; heed's programs do
/// not call it). empty_buffer_cache() still gives idle memory back to the system.
inline bool retain_freed_memory() {
#if defined(__GLIBC__) && defined(M_MMAP_THRESHOLD) && defined(M_TRIM_THRESHOLD)
  const bool mmap_set = mallopt(M_MMAP_THRESHOLD, 32 << 20) == 1;
  return mallopt(M_TRIM_THRESHOLD, std::numeric_limits<int>::max()) == 1 && mmap_set;
#else
  return false;
#endif
}

/// Frees the idle buffers heed keeps for reuse (see core/buffer_cache.hpp), and has the
/// C library give back to the system what it then holds unused (glibc's malloc_trim).
inline void empty_buffer_cache() {
  detail::BufferCache::instance().empty();
#if defined(__GLIBC__)
  malloc_trim(0);
#endif
}

/// Bounds the bytes of idle buffers kept for reuse; 0 turns the cache off.
inline void set_buffer_cache_limit(std::size_t bytes) { detail::BufferCache::instance().set_limit(bytes); }

/// Bytes of idle buffers held for reuse right now.
inline std::size_t buffer_cache_idle_bytes() { return detail::BufferCache::instance().idle_bytes(); }

/// The bytes in tensors and held idle, now and at their peaks (BufferUsage, above).
inline BufferUsage buffer_usage() { return detail::BufferCache::instance().usage(); }
/// Starts the peaks of buffer_usage again from what is in use and held now.
inline void reset_buffer_peaks() { detail::BufferCache::instance().reset_peaks(); }

/// How many tensor buffers heed has allocated from the system so far (requests its
/// cache could not serve): constant across the steady-state steps of a training loop.
inline std::uint64_t buffer_allocations() { return detail::BufferCache::instance().misses(); }

}  // namespace heed
