// A device backend with one kernel wrong on purpose, to show that the op table's device
// mode notices (test_op_table.cpp). It forwards everything to the backend registered
// for CUDA (the host emulation, or a real GPU) except the element-wise unary kernel,
// which adds 0.5 to the result of one UnaryOp. Installed through heed's own registry
// (register_backend), so the ops reach it by the path they always take (kernels_for).
//
// Every DeviceKernels<T> and DeviceBackend function is forwarded here and only here:
// a kernel added to heed/ops/kernels.hpp is one more line in this file.
#pragma once

#include <heed/heed.hpp>

namespace heed_test {

template <typename T>
class WrongUnaryKernels final : public heed::DeviceKernels<T> {
 public:
  using index_t = heed::index_t;
  WrongUnaryKernels(heed::DeviceKernels<T>& real, heed::UnaryOp wrong) : real_(real), wrong_(wrong) {}

  void unary(int device, heed::UnaryOp op, T* out, const T* x, index_t n) override {
    real_.unary(device, op, out, x, n);
    if (op == wrong_) real_.affine(device, out, out, n, T(1), T(0.5));  // the wrong answer
  }

  void gemm_strided_batched(int device, bool trans_a, bool trans_b, index_t m, index_t n, index_t k, const T* a,
                            index_t stride_a, const T* b, index_t stride_b, T* c, index_t stride_c,
                            index_t batches) override {
    real_.gemm_strided_batched(device, trans_a, trans_b, m, n, k, a, stride_a, b, stride_b, c, stride_c, batches);
  }
  void binary(int device, heed::BinaryOp op, T* out, const T* a, const heed::StridedShape& a_shape, const T* b,
              const heed::StridedShape& b_shape) override {
    real_.binary(device, op, out, a, a_shape, b, b_shape);
  }
  void gather(int device, T* out, const T* x, const heed::StridedShape& src) override {
    real_.gather(device, out, x, src);
  }
  void scatter(int device, T* dx, const T* g, const heed::StridedShape& dst) override {
    real_.scatter(device, dx, g, dst);
  }
  void dropout(int device, T* out, T* mask, const T* x, const heed::StridedShape& shape, std::uint64_t key,
               std::uint32_t threshold, T scale) override {
    real_.dropout(device, out, mask, x, shape, key, threshold, scale);
  }
  void unary_backward(int device, heed::UnaryOp op, T* dx, const T* g, const T* saved, index_t n) override {
    real_.unary_backward(device, op, dx, g, saved, n);
  }
  void affine(int device, T* out, const T* x, index_t n, T alpha, T beta) override {
    real_.affine(device, out, x, n, alpha, beta);
  }
  void axpy(int device, T* dst, const T* src, index_t n, T alpha) override { real_.axpy(device, dst, src, n, alpha); }
  void sum_to(int device, T* out, index_t n_out, const T* g, const heed::StridedShape& out_strides) override {
    real_.sum_to(device, out, n_out, g, out_strides);
  }
  void adam_step(int device, T* p, T* m, T* v, const T* g, index_t n, const heed::AdamStep& step) override {
    real_.adam_step(device, p, m, v, g, n, step);
  }
  void sum_of_squares(int device, double* total, const T* x, index_t n) override {
    real_.sum_of_squares(device, total, x, n);
  }
  void clip_by_norm(int device, T* x, index_t n, const double* sum_of_squares, double max_norm) override {
    real_.clip_by_norm(device, x, n, sum_of_squares, max_norm);
  }
  void layer_norm_forward(int device, T* out, T* mean, T* rstd, const T* x, const T* weight, const T* bias,
                          index_t rows, index_t n, double eps) override {
    real_.layer_norm_forward(device, out, mean, rstd, x, weight, bias, rows, n, eps);
  }
  void layer_norm_backward(int device, T* dx, T* dweight, T* dbias, const T* g, const T* x, const T* mean,
                           const T* rstd, const T* weight, index_t rows, index_t n) override {
    real_.layer_norm_backward(device, dx, dweight, dbias, g, x, mean, rstd, weight, rows, n);
  }
  void embedding_forward(int device, T* out, const T* weight, const std::int64_t* indices, index_t count,
                         index_t num_embeddings, index_t dim) override {
    real_.embedding_forward(device, out, weight, indices, count, num_embeddings, dim);
  }
  void embedding_backward(int device, T* dweight, const T* g, const std::int64_t* indices, index_t count,
                          index_t num_embeddings, index_t dim) override {
    real_.embedding_backward(device, dweight, g, indices, count, num_embeddings, dim);
  }
  void cross_entropy_forward(int device, T* loss, T* stats, const T* x, const heed::CrossEntropyRows& rows) override {
    real_.cross_entropy_forward(device, loss, stats, x, rows);
  }
  void cross_entropy_backward(int device, T* dx, const T* x, const T* stats, const heed::CrossEntropyRows& rows,
                              const T* g, index_t g_stride, T divisor) override {
    real_.cross_entropy_backward(device, dx, x, stats, rows, g, g_stride, divisor);
  }
  void masked_softmax_forward(int device, T* out, const T* scores, index_t batch, index_t heads, index_t num_queries,
                              index_t num_keys, const heed::SoftmaxMask<T>& mask) override {
    real_.masked_softmax_forward(device, out, scores, batch, heads, num_queries, num_keys, mask);
  }
  void softmax_backward(int device, T* grad_in, const T* grad_out, const T* y, index_t rows, index_t cols) override {
    real_.softmax_backward(device, grad_in, grad_out, y, rows, cols);
  }

 private:
  heed::DeviceKernels<T>& real_;
  heed::UnaryOp wrong_;
};

/// The registered CUDA backend with WrongUnaryKernels for float and double.
class WrongUnaryBackend final : public heed::DeviceBackend {
 public:
  WrongUnaryBackend(heed::DeviceBackend& real, heed::UnaryOp wrong)
      : real_(real), float_(real.kernels(float{}), wrong), double_(real.kernels(double{}), wrong) {}

  const char* name() const override { return real_.name(); }
  int device_count() const noexcept override { return real_.device_count(); }
  void synchronize(int device) override { real_.synchronize(device); }
  bool supports(heed::Capability capability) const override { return real_.supports(capability); }
  void* allocate(int device, std::size_t bytes) override { return real_.allocate(device, bytes); }
  void release(int device, void* ptr, std::size_t bytes) noexcept override { real_.release(device, ptr, bytes); }
  void copy_to_device(int device, void* dst, const void* src, std::size_t bytes) override {
    real_.copy_to_device(device, dst, src, bytes);
  }
  void copy_to_host(int device, void* dst, const void* src, std::size_t bytes) override {
    real_.copy_to_host(device, dst, src, bytes);
  }
  void copy_on_device(int device, void* dst, const void* src, std::size_t bytes) override {
    real_.copy_on_device(device, dst, src, bytes);
  }
  void fill(int device, void* out, std::int64_t n, const void* value, std::size_t value_bytes) override {
    real_.fill(device, out, n, value, value_bytes);
  }
  heed::DeviceKernels<float>& kernels(float) override { return float_; }
  heed::DeviceKernels<double>& kernels(double) override { return double_; }

 private:
  heed::DeviceBackend& real_;
  WrongUnaryKernels<float> float_;
  WrongUnaryKernels<double> double_;
};

/// While alive, CUDA is served by a WrongUnaryBackend over the registered backend; then
/// by that backend again. Both forward to the same memory, so tensors made under one
/// are released by the other.
class WrongUnaryKernelInstalled {
 public:
  explicit WrongUnaryKernelInstalled(heed::UnaryOp wrong)
      : real_(*heed::registered_backend(heed::DeviceType::cuda)), wrong_(real_, wrong) {
    heed::register_backend(heed::DeviceType::cuda, &wrong_);
  }
  ~WrongUnaryKernelInstalled() { heed::register_backend(heed::DeviceType::cuda, &real_); }
  WrongUnaryKernelInstalled(const WrongUnaryKernelInstalled&) = delete;
  WrongUnaryKernelInstalled& operator=(const WrongUnaryKernelInstalled&) = delete;

 private:
  heed::DeviceBackend& real_;
  WrongUnaryBackend wrong_;
};

}  // namespace heed_test
