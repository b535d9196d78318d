// heed/core/storage.hpp — the reference-counted, 64-byte-aligned buffer behind tensors.
//
// Several tensors may share one Storage (a tensor and its reshape views, or a tensor
// and what autograd saved of it). `version` counts in-place writes, so that autograd
// can tell when a saved tensor was modified after it was saved. CPU buffers come from
// heed's buffer cache (heed/core/buffer_cache.hpp); device buffers from their backend
// (heed/core/backend.hpp): CUDA's caching allocator.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <type_traits>

#include "heed/core/backend.hpp"
#include "heed/core/buffer_cache.hpp"
#include "heed/core/shape.hpp"

namespace heed::detail {

template <typename T>
constexpr const char* dtype_name() {
  if constexpr (std::is_same_v<T, float>)
    return "float32";
  else if constexpr (std::is_same_v<T, double>)
    return "float64";
  else if constexpr (std::is_same_v<T, std::int64_t>)
    return "int64";
  else if constexpr (std::is_same_v<T, std::int32_t>)
    return "int32";
  else if constexpr (std::is_same_v<T, bool>)
    return "bool";
  else
    return "unknown";
}

constexpr std::size_t kBufferAlignment = BufferCache::kSmallGranule;  // a cache line; AVX-512 loads

/// The most elements of T one buffer holds: its bytes, rounded up to the alignment, stay
/// within PTRDIFF_MAX, so that every pointer difference inside it is defined.
template <typename T>
constexpr index_t max_buffer_size() {
  return static_cast<index_t>((static_cast<std::size_t>(PTRDIFF_MAX) - (kBufferAlignment - 1)) / sizeof(T));
}

/// The element count of a buffer for `shape`; a ValueError naming op and the shape when
/// its elements (see Shape::numel) or its bytes do not fit.
template <typename T>
index_t buffer_size(const Shape& shape, const char* op) {
  const index_t size = shape.numel(op);
  HEED_CHECK(size <= max_buffer_size<T>(), ValueError, op, ": shape ", to_string(shape), " of ", dtype_name<T>(),
             " needs ", size, " x ", sizeof(T), " bytes, more than the ", PTRDIFF_MAX, " one buffer can hold");
  return size;
}

template <typename T>
class Storage {
 public:
  static constexpr std::size_t kAlignment = kBufferAlignment;

  /// A buffer for a tensor of `shape`, made by `op`: the name its errors carry.
  Storage(const Shape& shape, Device device, const char* op) : size_(buffer_size<T>(shape, op)), device_(device) {
    bytes_ = static_cast<std::size_t>(size_) * sizeof(T);
    bytes_ = (bytes_ + kAlignment - 1) / kAlignment * kAlignment;  // aligned_alloc needs a multiple
    if (bytes_ == 0) bytes_ = kAlignment;
    if (!device.is_cpu()) {
      data_ = static_cast<T*>(backend_of(device).allocate(device.index(), bytes_));
      return;
    }
    bytes_ = BufferCache::size_class(bytes_);
    owner_ = BufferCache::thread_id();
    data_ = static_cast<T*>(BufferCache::instance().take(bytes_));
    if (data_ == nullptr) {
      data_ = static_cast<T*>(std::aligned_alloc(kAlignment, bytes_));
      if (data_ != nullptr) BufferCache::instance().allocated(bytes_);
    }
    HEED_CHECK(data_ != nullptr, OutOfMemoryError, op, ": out of memory: the system refused ", bytes_,
               " bytes for a tensor of shape ", to_string(shape), " of ", dtype_name<T>());
  }
  ~Storage() {
    if (!device_.is_cpu()) {
      backend_of(device_).release(device_.index(), data_, bytes_);
      return;
    }
    BufferCache::instance().give(data_, bytes_, owner_);
  }
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  /// The buffer: host memory on the CPU, device memory on a CUDA device.
  T* data() { return data_; }
  const T* data() const { return data_; }
  index_t size() const { return size_; }
  Device device() const { return device_; }

  std::uint64_t version() const { return version_; }
  void bump_version() { ++version_; }

 private:
  T* data_ = nullptr;
  index_t size_;
  Device device_;
  std::size_t bytes_;        // of the allocation, ≥ size_ · sizeof(T)
  std::uint64_t owner_ = 0;  // the thread that took the buffer (BufferCache::thread_id)
  std::uint64_t version_ = 0;
};

}  // namespace heed::detail
