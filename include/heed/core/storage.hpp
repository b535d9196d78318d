// heed/core/storage.hpp — the reference-counted, 64-byte-aligned buffer behind tensors.
//
// Several tensors may share one Storage (a tensor and its reshape views, or a tensor
// and what autograd saved of it). `version` counts in-place writes, so that autograd
// can tell when a saved tensor was modified after it was saved.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <new>

#include "heed/core/shape.hpp"

namespace heed::detail {

template <typename T>
class Storage {
 public:
  static constexpr std::size_t kAlignment = 64;  // a cache line; covers AVX-512 loads

  explicit Storage(index_t size) : size_(size) {
    std::size_t bytes = static_cast<std::size_t>(size) * sizeof(T);
    bytes = (bytes + kAlignment - 1) / kAlignment * kAlignment;  // aligned_alloc needs a multiple
    if (bytes == 0) bytes = kAlignment;
    data_ = static_cast<T*>(std::aligned_alloc(kAlignment, bytes));
    if (data_ == nullptr) throw std::bad_alloc();
  }
  ~Storage() { std::free(data_); }
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  T* data() { return data_; }
  const T* data() const { return data_; }
  index_t size() const { return size_; }

  std::uint64_t version() const { return version_; }
  void bump_version() { ++version_; }

 private:
  T* data_;
  index_t size_;
  std::uint64_t version_ = 0;
};

}  // namespace heed::detail
