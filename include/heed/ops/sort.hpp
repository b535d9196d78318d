// heed/ops/sort.hpp — sort, argsort and topk along a dim, as PyTorch's.
//
//   x: (2, 5)
//   auto [values, indices] = heed::sort(x, 1);           // (2, 5) each, ascending
//   heed::argsort(x, -1, /*descending=*/true)            -> (2, 5), Tensor<int64_t>
//   auto [top, at] = heed::topk(x, 3);                    // (2, 3) each, largest first
//
// Sorting is stable: equal elements keep their order (torch.sort(stable=True)), and
// topk lists tied elements by index. NaN counts as larger than any number, as in
// PyTorch. The values are gathered from x at the indices, so their gradient flows back
// to the positions they came from.
#pragma once

#include "heed/detail/header_begin.hpp"

#include <algorithm>
#include <numeric>
#include <vector>

#include "heed/ops/gather.hpp"
#include "heed/ops/reduce.hpp"

namespace heed {
namespace detail {

/// The indices of the first k elements along dim in sorted order (ascending, or
/// descending), ties by index; a tensor of x's shape with dim of size k.
template <typename T>
IndexTensor sorted_indices(const Tensor<T>& x, int dim, index_t k, bool descending) {
  const DimSplit s(x.shape(), dim);
  Shape shape = x.shape();
  if (x.dim()) shape[dim] = k;
  IndexTensor out = make_tensor<std::int64_t>(shape);
  const T* in = x.data();
  std::vector<index_t> order(static_cast<std::size_t>(s.size));
  std::vector<T> row(static_cast<std::size_t>(s.size));
  // NaN above every number; among equals the smaller index first, which makes
  // std::sort and std::partial_sort give the stable order.
  const auto before = [&](index_t a, index_t b) {
    const T va = row[static_cast<std::size_t>(a)], vb = row[static_cast<std::size_t>(b)];
    const bool nan_a = va != va, nan_b = vb != vb;
    if (nan_a || nan_b) return nan_a != nan_b ? (descending ? nan_a : nan_b) : a < b;
    if (va != vb) return descending ? va > vb : va < vb;
    return a < b;
  };
  for (index_t o = 0; o < s.outer; ++o)
    for (index_t i = 0; i < s.inner; ++i) {
      for (index_t j = 0; j < s.size; ++j) row[static_cast<std::size_t>(j)] = in[(o * s.size + j) * s.inner + i];
      std::iota(order.begin(), order.end(), index_t(0));
      if (k == s.size)
        std::sort(order.begin(), order.end(), before);
      else
        std::partial_sort(order.begin(), order.begin() + k, order.end(), before);
      for (index_t j = 0; j < k; ++j) out.data()[(o * k + j) * s.inner + i] = order[static_cast<std::size_t>(j)];
    }
  return out;
}

}  // namespace detail

/// x sorted along dim (ascending unless descending), and where each value came from.
template <typename T>
ValuesIndices<T> sort(const Tensor<T>& x, int dim = -1, bool descending = false) {
  detail::check_defined(x, "sort", "x");
  dim = detail::normalize_dim(dim, x.dim(), "sort");
  IndexTensor indices = detail::sorted_indices(x, dim, x.dim() ? x.shape()[dim] : 1, descending);
  return {gather(x, dim, indices), indices};
}

/// The indices that sort x along dim.
template <typename T>
IndexTensor argsort(const Tensor<T>& x, int dim = -1, bool descending = false) {
  detail::check_defined(x, "argsort", "x");
  dim = detail::normalize_dim(dim, x.dim(), "argsort");
  return detail::sorted_indices(x, dim, x.dim() ? x.shape()[dim] : 1, descending);
}

/// The k largest (smallest unless largest) elements along dim, in order, and their
/// indices.
template <typename T>
ValuesIndices<T> topk(const Tensor<T>& x, index_t k, int dim = -1, bool largest = true) {
  detail::check_defined(x, "topk", "x");
  dim = detail::normalize_dim(dim, x.dim(), "topk");
  const index_t size = x.dim() ? x.shape()[dim] : 1;
  HEED_CHECK(k >= 0 && k <= size, IndexError, "topk: k = ", k, " out of range for dim ", dim, " of size ", size,
             " (shape ", to_string(x.shape()), ")");
  IndexTensor indices = detail::sorted_indices(x, dim, k, largest);
  return {gather(x, dim, indices), indices};
}

// clang-format off
template <typename T> ValuesIndices<T> Tensor<T>::sort(int dim, bool descending) const { return heed::sort(*this, dim, descending); }
template <typename T> IndexTensor Tensor<T>::argsort(int dim, bool descending) const { return heed::argsort(*this, dim, descending); }
template <typename T> ValuesIndices<T> Tensor<T>::topk(index_t k, int dim, bool largest) const { return heed::topk(*this, k, dim, largest); }
// clang-format on

}  // namespace heed

#include "heed/detail/header_end.hpp"
