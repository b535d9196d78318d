// heed/detail/batch_iterator.hpp — the input iterator of heed's loaders (NmtDataLoader,
// DataLoader): it holds batch i of the current epoch, loader.batch(i), made when the
// iterator arrives at it.
#pragma once

#include <cstddef>
#include <iterator>

#include "heed/core/shape.hpp"

namespace heed::detail {

template <typename Loader, typename Batch>
class BatchIterator {
 public:
  using iterator_category = std::input_iterator_tag;
  using value_type = Batch;
  using difference_type = std::ptrdiff_t;
  using pointer = const Batch*;
  using reference = const Batch&;

  BatchIterator(const Loader* loader, index_t index) : loader_(loader), index_(index) { load(); }
  const Batch& operator*() const { return batch_; }
  const Batch* operator->() const { return &batch_; }
  BatchIterator& operator++() {
    ++index_;
    load();
    return *this;
  }
  bool operator==(const BatchIterator& other) const { return index_ == other.index_; }
  bool operator!=(const BatchIterator& other) const { return index_ != other.index_; }

 private:
  void load() {
    if (index_ < loader_->num_batches()) batch_ = loader_->batch(index_);
  }
  const Loader* loader_;
  index_t index_;
  Batch batch_;
};

}  // namespace heed::detail
