// heed/ops/embedding.hpp — table lookup, as PyTorch's F.embedding.
//
//   weight:  (num_embeddings, embedding_dim)
//   indices: any shape, int64 in [0, num_embeddings)
//   embedding(weight, indices): (*indices.shape, embedding_dim)
//
// Backward adds each output row's gradient into the row of the table it came from
// (rows picked twice accumulate).
#pragma once

#include <algorithm>

#include "heed/ops/elementwise.hpp"

namespace heed {

template <typename T>
Tensor<T> embedding(const Tensor<T>& weight, const IndexTensor& indices) {
  HEED_CHECK(weight.dim() == 2, ShapeError, "embedding: weight must be (num_embeddings, embedding_dim), got ",
             to_string(weight.shape()));
  HEED_CHECK(indices.defined(), ValueError, "embedding: indices are undefined");
  const index_t num_embeddings = weight.shape()[0], dim = weight.shape()[1], count = indices.numel();
  const std::int64_t* index = indices.data();
  for (index_t i = 0; i < count; ++i)
    HEED_CHECK(index[i] >= 0 && index[i] < num_embeddings, IndexError, "embedding: index ", index[i],
               " at flat position ", i, " of indices ", to_string(indices.shape()), " is out of range for ",
               num_embeddings, " embeddings");
  std::vector<index_t> dims(indices.shape().begin(), indices.shape().end());
  dims.push_back(dim);
  Tensor<T> out = detail::make_tensor<T>(Shape(dims));
  for (index_t i = 0; i < count; ++i) std::copy_n(weight.data() + index[i] * dim, dim, out.data() + i * dim);
  if (autograd::needs_grad(weight))
    autograd::record(out, "EmbeddingBackward", {weight},
                     [indices, table = weight.shape(), dim, count](const Tensor<T>& g) {
                       Tensor<T> dw = detail::make_tensor<T>(table);
                       dw.array().setZero();
                       for (index_t i = 0; i < count; ++i)
                         detail::VecMap<T>(dw.data() + indices.data()[i] * dim, dim) +=
                             detail::ConstVecMap<T>(g.data() + i * dim, dim);
                       return autograd::Grads<T>{dw};
                     });
  return out;
}

}  // namespace heed
