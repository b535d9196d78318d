// heed/ops/matmul.hpp — matrix products (through heed/ops/gemm.hpp).
//
//   matmul(a, b), PyTorch's rules:
//     (k) @ (k)               -> ()              dot product
//     (n, k) @ (k, m)         -> (n, m)
//     (B.., n, k) @ (k, m)    -> (B.., n, m)     one GEMM over all B.. · n rows
//     (B.., n, k) @ (B.., k, m) -> (B.., n, m)   batch dims broadcast
//     a 1-D operand gains a dim of 1 for the product and loses it after
//   bmm(a, b): (B, n, k) @ (B, k, m) -> (B, n, m), no broadcasting.
//   matmul(a, b, transpose_a, transpose_b): either operand's last two dims swapped
//     on the fly, e.g. scores = matmul(queries, keys, false, true) = Q Kᵀ.
//
// Each product is detail::gemm's: Eigen's kernels or, built with HEED_WITH_OPENBLAS,
// OpenBLAS's where they are faster; large ones cut into panels that the threads share,
// so that the bits of the result do not depend on the thread count.
#pragma once

#include "heed/detail/header_begin.hpp"

#include <vector>

#include "heed/detail/parallel.hpp"
#include "heed/ops/gemm.hpp"
#include "heed/ops/shape.hpp"

namespace heed {
namespace detail {

inline Shape batch_shape(const Shape& s) {
  Shape batch;
  for (int d = 0; d + 2 < s.rank(); ++d) batch.push_back(s[d]);
  return batch;
}

/// op(a) @ op(b) for a, b of rank ≥ 2 whose batch dims broadcast; op transposes the
/// last two dims when asked. The result has the broadcast batch shape. No graph.
template <typename T>
Tensor<T> batched_matmul(const Tensor<T>& a, bool trans_a, const Tensor<T>& b, bool trans_b, const char* op) {
  const index_t m = trans_a ? a.shape()[-1] : a.shape()[-2];
  const index_t k = trans_a ? a.shape()[-2] : a.shape()[-1];
  const index_t kb = trans_b ? b.shape()[-1] : b.shape()[-2];
  const index_t n = trans_b ? b.shape()[-2] : b.shape()[-1];
  HEED_CHECK(k == kb, ShapeError, op, ": inner dims differ: ", to_string(a.shape()), " vs ", to_string(b.shape()));
  const Shape a_batch = batch_shape(a.shape()), b_batch = batch_shape(b.shape());
  HEED_CHECK(broadcastable(a_batch, b_batch), ShapeError, op, ": batch dims of ", to_string(a.shape()), " and ",
             to_string(b.shape()), " are not broadcastable");
  Shape shape = broadcast_shapes(a_batch, b_batch, op);
  const Shape out_batch = shape;
  shape.push_back(m);
  shape.push_back(n);
  const Device device = common_device(op, a, b);
  Tensor<T> out = make_tensor<T>(shape, device);

  // Offsets of every batch's matrices, walking the broadcast batch index space.
  const index_t batches = out_batch.numel();
  std::vector<index_t> a_offsets, b_offsets;
  a_offsets.reserve(static_cast<std::size_t>(batches));
  b_offsets.reserve(static_cast<std::size_t>(batches));
  const auto a_strides = broadcast_strides(a_batch, out_batch), b_strides = broadcast_strides(b_batch, out_batch);
  StridedLoop<2> loop;
  for (int d = 0; d < out_batch.rank(); ++d) loop.add_dim(out_batch[d], {a_strides[d] * m * k, b_strides[d] * k * n});
  loop.add_dim(1, {0, 0});  // a unit inner run, so that each batch is one run
  loop.for_each_run([&](const std::array<index_t, 2>& off, index_t, const std::array<index_t, 2>&) {
    a_offsets.push_back(off[0]);
    b_offsets.push_back(off[1]);
  });

  const T* pa = device_data(a);
  const T* pb = device_data(b);
  T* pc = device_data(out);
  if (!device.is_cpu()) {
    // Consecutive batches whose offsets step evenly go in one strided-batched call:
    // every batch at once unless the batch dims broadcast in both operands.
    const auto at = [](const std::vector<index_t>& offsets, index_t i) { return offsets[static_cast<std::size_t>(i)]; };
    for (index_t first = 0, last; first < batches; first = last) {
      const index_t step_a = first + 1 < batches ? at(a_offsets, first + 1) - at(a_offsets, first) : 0;
      const index_t step_b = first + 1 < batches ? at(b_offsets, first + 1) - at(b_offsets, first) : 0;
      for (last = first + 1; last < batches && at(a_offsets, last) - at(a_offsets, last - 1) == step_a &&
                             at(b_offsets, last) - at(b_offsets, last - 1) == step_b;
           ++last) {
      }
      kernels_for<T>(device, "bmm")
          .gemm_strided_batched(device.index(), trans_a, trans_b, m, n, k, pa + at(a_offsets, first), step_a,
                                pb + at(b_offsets, first), step_b, pc + first * m * n, m * n, last - first,
                                std::is_same_v<T, float> && autocast_bf16(m, n, k));
    }
    return out;
  }
  const index_t flops_per_batch = std::max<index_t>(m * n * k, 1);
  if (flops_per_batch >= kParallelGemmWork) {  // each product large enough to split itself
    for (index_t i = 0; i < batches; ++i)
      gemm(pa + a_offsets[static_cast<std::size_t>(i)], trans_a, pb + b_offsets[static_cast<std::size_t>(i)], trans_b,
           pc + i * m * n, m, n, k);
    return out;
  }
  // One scope for all batches: the per-head products of attention are tiny and many.
  const SerialGemmScope serial(true);
  parallel_for(batches, (index_t(1) << 18) / flops_per_batch + 1, [&](index_t begin, index_t end) {
    for (index_t i = begin; i < end; ++i)
      gemm_in_scope(pa + a_offsets[static_cast<std::size_t>(i)], trans_a, pb + b_offsets[static_cast<std::size_t>(i)],
                    trans_b, pc + i * m * n, m, n, k);
  });
  return out;
}

/// What the backward of a product a·b keeps: each operand's gradient needs the other
/// operand, so each is saved only when the other one needs a gradient.
template <typename T>
struct SavedProduct {
  bool need_a, need_b;
  autograd::SavedTensor<T> a, b;
  SavedProduct(const Tensor<T>& lhs, const Tensor<T>& rhs) : need_a(lhs.requires_grad()), need_b(rhs.requires_grad()) {
    if (need_b) a = autograd::save(lhs);
    if (need_a) b = autograd::save(rhs);
  }
};

/// Product of all dims but the last: the rows of x seen as a matrix.
inline index_t leading_rows(const Shape& s) {
  index_t rows = 1;
  for (int d = 0; d + 1 < s.rank(); ++d) rows *= s[d];
  return rows;
}

/// (B.., n, k) @ (k, m) with a's leading dims folded into the rows of one GEMM.
template <typename T>
Tensor<T> folded_matmul(const Tensor<T>& a, const Tensor<T>& b) {
  Shape shape = a.shape();
  shape[-1] = b.shape()[-1];
  const Device device = common_device("matmul", a, b);
  Tensor<T> out = make_tensor<T>(shape, device);
  gemm_on(device, device_data(a), false, device_data(b), false, device_data(out), leading_rows(a.shape()),
          b.shape()[-1], a.shape()[-1]);
  return out;
}

}  // namespace detail

template <typename T>
Tensor<T> matmul(const Tensor<T>& a, const Tensor<T>& b, bool transpose_a, bool transpose_b);

template <typename T>
Tensor<T> matmul(const Tensor<T>& a, const Tensor<T>& b) {
  detail::check_defined(a, "matmul", "a");
  detail::check_defined(b, "matmul", "b");
  detail::check_floating<T>("matmul");
  HEED_CHECK(a.dim() >= 1 && b.dim() >= 1, ShapeError, "matmul: both operands need at least 1 dim, got ",
             to_string(a.shape()), " and ", to_string(b.shape()));
  // Checked once here, for every form, so that the message names 1-D operands as given.
  HEED_CHECK(a.shape()[-1] == (b.dim() == 1 ? b.shape()[0] : b.shape()[-2]), ShapeError,
             "matmul: inner dims differ: ", to_string(a.shape()), " vs ", to_string(b.shape()));
  if (a.dim() == 1 && b.dim() == 1) return reshape(matmul(unsqueeze(a, 0), unsqueeze(b, 1)), {});
  if (a.dim() == 1) return squeeze(matmul(unsqueeze(a, 0), b), -2);
  if (b.dim() == 1) return squeeze(matmul(a, unsqueeze(b, 1)), -1);

  if (b.dim() != 2) return matmul(a, b, false, false);

  // (B.., n, k) @ (k, m): one GEMM over all rows, forward and backward.
  Tensor<T> out = detail::folded_matmul(a, b);
  if (autograd::needs_grad(a, b)) {
    // out = a @ b:  da = g @ bᵀ,  db = aᵀ @ g, whose sum over the batch is one GEMM
    autograd::record(
        out, "MmBackward", {a, b},
        [saved = detail::SavedProduct<T>(a, b), a_shape = a.shape(), b_shape = b.shape()](const Tensor<T>& g) {
          autograd::Grads<T> grads(2);
          const index_t rows = detail::leading_rows(a_shape), k = b_shape[0], n = b_shape[1];
          using detail::device_data;
          if (saved.need_a) {
            grads[0] = detail::make_tensor<T>(a_shape, g.device());
            detail::gemm_on(g.device(), device_data(g), false, device_data(saved.b.get()), true, device_data(grads[0]),
                            rows, k, n);
          }
          if (saved.need_b) {
            grads[1] = detail::make_tensor<T>(b_shape, g.device());
            detail::gemm_on(g.device(), device_data(saved.a.get()), true, device_data(g), false, device_data(grads[1]),
                            k, n, rows);
          }
          return grads;
        });
  }
  return out;
}

/// op(a) @ op(b) for a and b of rank ≥ 2 whose batch dims broadcast, where op swaps the
/// last two dims when asked, without copying the transpose: attention scores are
/// matmul(queries, keys, false, true).
template <typename T>
Tensor<T> matmul(const Tensor<T>& a, const Tensor<T>& b, bool transpose_a, bool transpose_b) {
  detail::check_defined(a, "matmul", "a");
  detail::check_defined(b, "matmul", "b");
  detail::check_floating<T>("matmul");
  HEED_CHECK(a.dim() >= 2 && b.dim() >= 2, ShapeError, "matmul: transposed operands need at least 2 dims, got ",
             to_string(a.shape()), " and ", to_string(b.shape()));
  Tensor<T> out = detail::batched_matmul(a, transpose_a, b, transpose_b, "matmul");
  if (autograd::needs_grad(a, b)) {
    // out = op(a) op(b):  d op(a) = g op(b)ᵀ,  d op(b) = op(a)ᵀ g, each transposed back
    // where op transposed, and summed over broadcast batch dims.
    autograd::record(
        out, a.dim() == 2 && b.dim() == 2 ? "MmBackward" : "BmmBackward", {a, b},
        [=, saved = detail::SavedProduct<T>(a, b), a_shape = a.shape(), b_shape = b.shape()](const Tensor<T>& g) {
          using detail::batched_matmul;
          autograd::Grads<T> grads(2);
          if (saved.need_a) {
            const Tensor<T>& bb = saved.b.get();
            grads[0] = detail::sum_to(transpose_a ? batched_matmul(bb, transpose_b, g, true, "matmul")
                                                  : batched_matmul(g, false, bb, !transpose_b, "matmul"),
                                      a_shape);
          }
          if (saved.need_b) {
            const Tensor<T>& aa = saved.a.get();
            grads[1] = detail::sum_to(transpose_b ? batched_matmul(g, true, aa, transpose_a, "matmul")
                                                  : batched_matmul(aa, !transpose_a, g, false, "matmul"),
                                      b_shape);
          }
          return grads;
        });
  }
  return out;
}

/// Batched product of 3-D tensors with equal batch sizes: (B, n, k) @ (B, k, m).
template <typename T>
Tensor<T> bmm(const Tensor<T>& a, const Tensor<T>& b) {
  detail::check_defined(a, "bmm", "a");
  detail::check_defined(b, "bmm", "b");
  HEED_CHECK(a.dim() == 3 && b.dim() == 3, ShapeError, "bmm: expected 3-D tensors, got ", to_string(a.shape()), " and ",
             to_string(b.shape()));
  HEED_CHECK(a.shape()[0] == b.shape()[0], ShapeError, "bmm: batch sizes differ: ", to_string(a.shape()), " vs ",
             to_string(b.shape()));
  HEED_CHECK(a.shape()[2] == b.shape()[1], ShapeError, "bmm: inner dims differ: ", to_string(a.shape()), " vs ",
             to_string(b.shape()));
  return matmul(a, b);
}

template <typename T>
Tensor<T> Tensor<T>::matmul(const Tensor& other) const {
  return heed::matmul(*this, other);
}

}  // namespace heed

#include "heed/detail/header_end.hpp"
