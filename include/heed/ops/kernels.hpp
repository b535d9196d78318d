// heed/ops/kernels.hpp — the ops' vocabulary and the kernels a device backend provides.
//
// An op on a device that is not the CPU does what it does on the CPU (validate, shape
// the output, record one autograd node) and calls one of these kernels on raw device
// pointers, through detail::kernels_for(). The CUDA backend implements them with its
// own kernels and cuBLAS (src/cuda), and its host emulation with plain loops. The
// words they share are in heed/ops/vocabulary.hpp; the per-element rules both sides
// must agree on (dropout's hash, a softmax row's mask) in heed/detail/rules.hpp.
//
// Every kernel runs on the device's queue and returns without waiting. A backend
// implements every kernel (they are pure virtual); what fails is an element type
// without kernels (kernels_for below) or an op with no device branch at all
// (Tensor::host_data), each in one place, with one message.
//
// This header includes only heed/core, so that autograd can use it too.
#pragma once

#include "heed/detail/header_begin.hpp"

#include <cstdint>
#include <type_traits>

#include "heed/core/backend.hpp"
#include "heed/core/error.hpp"
#include "heed/core/tensor.hpp"
#include "heed/ops/vocabulary.hpp"

namespace heed {

/// The kernels of a device backend for elements of type T. Each takes the device index
/// first; pointers are the device's. Only float and double have kernels.
template <typename T>
class DeviceKernels {
 public:
  using index_t = std::int64_t;
  virtual ~DeviceKernels() = default;

  /// For each of `batches` products: C = op(A) · op(B), row-major, op(A) m × k, op(B)
  /// k × n; matrix i of each operand starts i · stride elements after the first.
  virtual void gemm_strided_batched(int device, bool trans_a, bool trans_b, index_t m, index_t n, index_t k, const T* a,
                                    index_t stride_a, const T* b, index_t stride_b, T* c, index_t stride_c,
                                    index_t batches) = 0;

  /// out (contiguous, `a_shape.sizes`) = a op b, each read through its broadcast strides.
  virtual void binary(int device, BinaryOp op, T* out, const T* a, const StridedShape& a_shape, const T* b,
                      const StridedShape& b_shape) = 0;
  /// out[i] = x[strided_offset(i)]: out is contiguous with `src.sizes`.
  virtual void gather(int device, T* out, const T* x, const StridedShape& src) = 0;
  /// dx[strided_offset(i)] = g[i] where no two i share a position; dx's other elements stay.
  virtual void scatter(int device, T* dx, const T* g, const StridedShape& dst) = 0;
  /// Dropout's mask (0 or scale) and out = x · mask, by heed/detail/rules.hpp's rule.
  virtual void dropout(int device, T* out, T* mask, const T* x, const StridedShape& shape, std::uint64_t key,
                       std::uint32_t threshold, T scale) = 0;
  virtual void unary(int device, UnaryOp op, T* out, const T* x, index_t n) = 0;
  /// dx = g · op'(x), from `saved`: the result y for exp, sqrt, tanh, sigmoid and relu,
  /// the input x for the others.
  virtual void unary_backward(int device, UnaryOp op, T* dx, const T* g, const T* saved, index_t n) = 0;
  /// out = alpha · x + beta; out may be x.
  virtual void affine(int device, T* out, const T* x, index_t n, T alpha, T beta) = 0;
  /// dst += alpha · src.
  virtual void axpy(int device, T* dst, const T* src, index_t n, T alpha) = 0;
  /// out = g summed over the dims it was broadcast along (out_strides: 0 for a summed
  /// dim), each output summed in one fixed order.
  virtual void sum_to(int device, T* out, index_t n_out, const T* g, const StridedShape& out_strides) = 0;

  virtual void adam_step(int device, T* p, T* m, T* v, const T* g, index_t n, const AdamStep& step) = 0;
  /// *total += Σ x², accumulated in double.
  virtual void sum_of_squares(int device, double* total, const T* x, index_t n) = 0;
  /// x *= max_norm / √(*sum_of_squares) when that norm exceeds max_norm.
  virtual void clip_by_norm(int device, T* x, index_t n, const double* sum_of_squares, double max_norm) = 0;

  /// out = (x − mean) · rstd · weight + bias per row of n (weight, bias may be null).
  virtual void layer_norm_forward(int device, T* out, T* mean, T* rstd, const T* x, const T* weight, const T* bias,
                                  index_t rows, index_t n, double eps) = 0;
  /// Each of dx, dweight, dbias may be null (not wanted), weight may be null (none).
  virtual void layer_norm_backward(int device, T* dx, T* dweight, T* dbias, const T* g, const T* x, const T* mean,
                                   const T* rstd, const T* weight, index_t rows, index_t n) = 0;
  /// out[i] = weight[indices[i]]; an index out of range gives a row of NaN.
  virtual void embedding_forward(int device, T* out, const T* weight, const std::int64_t* indices, index_t count,
                                 index_t num_embeddings, index_t dim) = 0;
  virtual void embedding_backward(int device, T* dweight, const T* g, const std::int64_t* indices, index_t count,
                                  index_t num_embeddings, index_t dim) = 0;
  /// loss[r] = logsumexp(x_r) − x_r[label] (0 for rows that do not count); stats[2r..] =
  /// (max, log Σ exp(x − max)); a label out of range gives NaN.
  virtual void cross_entropy_forward(int device, T* loss, T* stats, const T* x, const CrossEntropyRows& rows) = 0;
  /// dx_r = (softmax(x_r) − onehot(label_r)) · g[r / g_stride] / divisor.
  virtual void cross_entropy_backward(int device, T* dx, const T* x, const T* stats, const CrossEntropyRows& rows,
                                      const T* g, index_t g_stride, T divisor) = 0;
  virtual void masked_softmax_forward(int device, T* out, const T* scores, index_t batch, index_t heads,
                                      index_t num_queries, index_t num_keys, const SoftmaxMask<T>& mask) = 0;
  /// grad_in = y · (grad_out − Σ grad_out · y) along rows of length `cols`.
  virtual void softmax_backward(int device, T* grad_in, const T* grad_out, const T* y, index_t rows, index_t cols) = 0;
};

namespace detail {

/// The kernels for T of the backend serving `device` (not the CPU). Tensors of other
/// element types have no device kernels: the op names itself in the DeviceError.
template <typename T>
DeviceKernels<T>& kernels_for(Device device, const char* op) {
  DeviceBackend& backend = backend_of(device);
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
    (void)op;
    return backend.kernels(T{});
  } else {
    throw DeviceError(concat(op, ": ", backend.name(), " has no kernels for ", dtype_name<T>(), " tensors (on ",
                             to_string(device), ")"));
  }
}

/// The kernels serving x's device, for an op on x.
template <typename T>
DeviceKernels<T>& kernels_for(const Tensor<T>& x, const char* op) {
  return kernels_for<T>(x.device(), op);
}

}  // namespace detail
}  // namespace heed

#include "heed/detail/header_end.hpp"
