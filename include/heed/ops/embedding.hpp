// heed/ops/embedding.hpp — table lookup, as PyTorch's F.embedding.
//
//   weight:  (num_embeddings, embedding_dim)
//   indices: any shape, int64 in [0, num_embeddings)
//   embedding(weight, indices): (*indices.shape, embedding_dim)
//
// Backward adds each output row's gradient into the row of the table it came from
// (rows picked twice accumulate).
#pragma once

#include "heed/detail/header_begin.hpp"

#include <algorithm>
#include <vector>

#include "heed/ops/elementwise.hpp"
#include "heed/ops/quantized_gemm.hpp"

namespace heed {

namespace detail {

/// The gradient of embedding's table: each row of g added into the row it was read from,
/// in the order of the rows (on a device: by its kernel, a thread per element of dw).
template <typename T>
Tensor<T> embedding_backward(const Tensor<T>& g, const IndexTensor& indices, const Shape& table) {
  const index_t num_embeddings = table[0], dim = table[1], count = indices.numel();
  if (!g.is_cpu()) {
    Tensor<T> dw = make_tensor<T>(table, g.device());
    kernels_for(g, "embedding backward")
        .embedding_backward(g.device().index(), device_data(dw), device_data(g), device_data(indices), count,
                            num_embeddings, dim);
    return dw;
  }
  Tensor<T> dw = make_tensor<T>(table);
  dw.array().setZero();
  for (index_t i = 0; i < count; ++i)
    VecMap<T>(dw.data() + indices.data()[i] * dim, dim) += ConstVecMap<T>(g.data() + i * dim, dim);
  return dw;
}

}  // namespace detail

template <typename T>
Tensor<T> embedding(const Tensor<T>& weight, const IndexTensor& indices) {
  detail::check_defined(weight, "embedding", "weight");
  detail::check_defined(indices, "embedding", "indices");
  HEED_CHECK(weight.dim() == 2, ShapeError, "embedding: weight must be (num_embeddings, embedding_dim), got ",
             to_string(weight.shape()));
  const index_t num_embeddings = weight.shape()[0], dim = weight.shape()[1], count = indices.numel();
  std::vector<index_t> dims(indices.shape().begin(), indices.shape().end());
  dims.push_back(dim);
  Tensor<T> out;
  if (detail::on_device("embedding", weight, indices)) {
    // Indices are read on the device, so an index out of range is not reported as on
    // the CPU: its row of the output is NaN.
    out = detail::make_tensor<T>(Shape(dims), weight.device());
    detail::kernels_for(weight, "embedding")
        .embedding_forward(weight.device().index(), detail::device_data(out), detail::device_data(weight),
                           detail::device_data(indices), count, num_embeddings, dim);
  } else {
    const std::int64_t* index = indices.data();
    for (index_t i = 0; i < count; ++i)
      HEED_CHECK(index[i] >= 0 && index[i] < num_embeddings, IndexError, "embedding: index ", index[i],
                 " at flat position ", i, " of indices ", to_string(indices.shape()), " is out of range for ",
                 num_embeddings, " embeddings");
    out = detail::make_tensor<T>(Shape(dims));
    for (index_t i = 0; i < count; ++i) std::copy_n(weight.data() + index[i] * dim, dim, out.data() + i * dim);
  }
  if (autograd::needs_grad(weight))
    autograd::record(out, "EmbeddingBackward", {weight}, [indices, table = weight.shape()](const Tensor<T>& g) {
      return autograd::Grads<T>{detail::embedding_backward(g, indices, table)};
    });
  return out;
}

/// The rows of a table converted to bf16 or int8 (heed/ops/quantized_gemm.hpp; an
/// Embedding's after convert_weights_), in float: for inference, no gradient recorded.
inline Tensor<float> embedding(const detail::LowPrecisionWeight& weight, const IndexTensor& indices) {
  detail::check_defined(indices, "embedding", "indices");
  HEED_CHECK(indices.is_cpu(), DeviceError, "embedding: a table converted to ", to_string(weight.precision()),
             " is read on the CPU only, got indices on ", to_string(indices.device()));
  const index_t num_embeddings = weight.out_features(), dim = weight.in_features(), count = indices.numel();
  const std::int64_t* index = indices.data();
  for (index_t i = 0; i < count; ++i)
    HEED_CHECK(index[i] >= 0 && index[i] < num_embeddings, IndexError, "embedding: index ", index[i],
               " at flat position ", i, " of indices ", to_string(indices.shape()), " is out of range for ",
               num_embeddings, " embeddings");
  std::vector<index_t> dims(indices.shape().begin(), indices.shape().end());
  dims.push_back(dim);
  Tensor<float> out = detail::make_tensor<float>(Shape(dims));
  for (index_t i = 0; i < count; ++i) weight.row(index[i], out.data() + i * dim);
  return out;
}

}  // namespace heed

#include "heed/detail/header_end.hpp"
