// heed/data/data_loader.hpp — mini-batches of rows of tensors, as torch.utils.data's
// TensorDataset and DataLoader.
//
//   heed::Generator gen(0);
//   heed::TensorDataset dataset(X, y);  // X: (n, 2) float, y: (n) int64: row i is (X[i], y[i])
//   heed::DataLoader loader(dataset, /*batch_size=*/10, /*shuffle=*/true, /*drop_last=*/false, gen);
//   for (int epoch = 0; epoch < 3; ++epoch)
//     for (const auto& [X_batch, y_batch] : loader)  // (10, 2) and (10); each epoch reshuffled
//       train_step(X_batch, y_batch);
//
// d2l's load_array(data_arrays, batch_size, is_train) is
// DataLoader(TensorDataset(X, y), batch_size, /*shuffle=*/is_train). Each begin() starts
// an epoch: with shuffle, the order is randperm(n, generator), drawn from the generator
// given (which the loader shares, as PyTorch's does: keep it alive as long as the
// loader); without, rows in order. The last batch holds what is left unless drop_last.
// Batches are copies (index_select) on the CPU, where the dataset's tensors must be;
// move a batch with .to(device).
#pragma once

#include "heed/detail/header_begin.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <string>
#include <tuple>
#include <utility>

#include "heed/core/error.hpp"
#include "heed/core/factory.hpp"
#include "heed/core/generator.hpp"
#include "heed/core/tensor.hpp"
#include "heed/detail/batch_iterator.hpp"
#include "heed/ops/shape.hpp"

namespace heed {

/// Tensors of the same size in dim 0, as torch.utils.data.TensorDataset: item i is the
/// tuple of their rows i. The element types may differ (features float, labels int64).
template <typename... Ts>
class TensorDataset {
  static_assert(sizeof...(Ts) > 0, "TensorDataset needs at least one tensor");

 public:
  using Item = std::tuple<Tensor<Ts>...>;

  /// Each tensor defined, on the CPU, of rank 1 or more, all of one size in dim 0:
  /// otherwise a ValueError, DeviceError or ShapeError naming the tensor (by position)
  /// and the shapes.
  explicit TensorDataset(Tensor<Ts>... tensors) : tensors_(std::move(tensors)...) {
    std::size_t i = 0;
    std::apply([&](const auto&... x) { (check(x, i++), ...); }, tensors_);
    const index_t n = std::get<0>(tensors_).shape()[0];
    bool same = true;
    std::apply([&](const auto&... x) { ((same = same && x.shape()[0] == n), ...); }, tensors_);
    if (!same) {
      std::string shapes;
      std::apply([&](const auto&... x) { ((shapes += (shapes.empty() ? "" : ", ") + to_string(x.shape())), ...); },
                 tensors_);
      throw ShapeError(detail::concat("TensorDataset: the tensors' sizes in dim 0 differ: ", shapes));
    }
  }

  /// The number of rows (len(dataset)).
  index_t size() const { return std::get<0>(tensors_).shape()[0]; }

  /// Row i of each tensor (dataset[i]); negative i counts from the end, as in Python.
  Item operator[](index_t i) const {
    HEED_CHECK(i >= -size() && i < size(), IndexError, "TensorDataset: index ", i, " out of range for ", size(),
               " rows");
    return std::apply([i](const auto&... x) { return Item(select(x, 0, i)...); }, tensors_);
  }

  /// The rows at `indices` (1-D, each in [0, size())), in that order, of each tensor.
  Item rows(const IndexTensor& indices) const {
    detail::check_defined(indices, "TensorDataset::rows", "indices");
    HEED_CHECK(indices.dim() == 1, ShapeError, "TensorDataset::rows: indices must be 1-D, got shape ",
               to_string(indices.shape()));
    return std::apply([&](const auto&... x) { return Item(index_select(x, 0, indices)...); }, tensors_);
  }

  const Item& tensors() const { return tensors_; }

 private:
  template <typename U>
  static void check(const Tensor<U>& x, std::size_t i) {
    HEED_CHECK(x.defined(), ValueError, "TensorDataset: tensor ", i, " is an undefined tensor");
    HEED_CHECK(x.is_cpu(), DeviceError, "TensorDataset: tensor ", i, " is on ", x.device(),
               "; batches are gathered on the CPU (move each batch instead)");
    HEED_CHECK(x.dim() > 0, ShapeError, "TensorDataset: tensor ", i, " has shape (), with no dim 0 to index");
  }

  Item tensors_;
};

/// Mini-batches of a TensorDataset, as torch.utils.data.DataLoader(dataset, batch_size,
/// shuffle, drop_last=..., generator=...). Iterating is an epoch; the iterators of an
/// epoch are valid until the next begin().
template <typename... Ts>
class DataLoader {
 public:
  using Batch = std::tuple<Tensor<Ts>...>;

  using Iterator = detail::BatchIterator<DataLoader, Batch>;

  /// batch_size must be positive (a ValueError otherwise). The generator is used by
  /// reference and must outlive the loader; without one, this thread's default.
  explicit DataLoader(TensorDataset<Ts...> dataset, index_t batch_size = 1, bool shuffle = false,
                      bool drop_last = false, Generator& generator = default_generator())
      : dataset_(std::move(dataset)),
        batch_size_(batch_size),
        shuffle_(shuffle),
        drop_last_(drop_last),
        generator_(&generator) {
    HEED_CHECK(batch_size > 0, ValueError, "DataLoader: batch_size must be positive, got ", batch_size);
    order_ = arange<std::int64_t>(static_cast<double>(dataset_.size()));
  }

  const TensorDataset<Ts...>& dataset() const { return dataset_; }
  index_t batch_size() const { return batch_size_; }
  bool shuffle() const { return shuffle_; }
  bool drop_last() const { return drop_last_; }
  Generator& generator() const { return *generator_; }

  /// The batches of an epoch (len(loader)): n / batch_size, rounded up unless drop_last.
  index_t num_batches() const {
    const index_t n = dataset_.size();
    return n / batch_size_ + (!drop_last_ && n % batch_size_ != 0 ? 1 : 0);
  }

  /// Starts an epoch: a fresh order, randperm(n, generator) with shuffle.
  Iterator begin() {
    const index_t n = dataset_.size();
    order_ = shuffle_ ? randperm(n, *generator_) : arange<std::int64_t>(static_cast<double>(n));
    return Iterator(this, 0);
  }
  Iterator end() const { return Iterator(this, num_batches()); }

  /// The row indices of the current epoch (in order before the first begin()).
  const IndexTensor& order() const { return order_; }

  /// Batch i (0 <= i < num_batches()) of the current epoch.
  Batch batch(index_t i) const {
    HEED_CHECK(i >= 0 && i < num_batches(), IndexError, "DataLoader::batch: index ", i, " out of range for ",
               num_batches(), " batches");
    const index_t start = i * batch_size_, rows = std::min(batch_size_, dataset_.size() - start);
    return dataset_.rows(narrow(order_, 0, start, rows));
  }

 private:
  TensorDataset<Ts...> dataset_;
  index_t batch_size_;
  bool shuffle_, drop_last_;
  Generator* generator_;
  IndexTensor order_;
};

}  // namespace heed

#include "heed/detail/header_end.hpp"
