// src/cuda/backend.cpp — the CUDA backend as heed's ops see it: the device table of
// heed/core/backend.hpp and the kernel table of heed/ops/kernels.hpp, each entry one
// call of the backend's functions (heed/cuda/runtime.hpp). Compiled by the host's C++
// compiler into heed::cuda, for the real backend and for its host emulation alike.
#include <cstring>

#include "heed/core/backend.hpp"
#include "heed/cuda/runtime.hpp"
#include "heed/ops/kernels.hpp"

namespace heed::cuda {
namespace {

template <typename T>
class CudaKernels final : public DeviceKernels<T> {
 public:
  using index_t = typename DeviceKernels<T>::index_t;

  void gemm_strided_batched(int device, bool trans_a, bool trans_b, index_t m, index_t n, index_t k, const T* a,
                            index_t stride_a, const T* b, index_t stride_b, T* c, index_t stride_c,
                            index_t batches) override {
    cuda::gemm_strided_batched<T>(device, trans_a, trans_b, m, n, k, a, stride_a, b, stride_b, c, stride_c, batches);
  }
  void binary(int device, BinaryOp op, T* out, const T* a, const StridedShape& a_shape, const T* b,
              const StridedShape& b_shape) override {
    cuda::binary<T>(device, op, out, a, a_shape, b, b_shape);
  }
  void gather(int device, T* out, const T* x, const StridedShape& src) override {
    cuda::gather<T>(device, out, x, src);
  }
  void scatter(int device, T* dx, const T* g, const StridedShape& dst) override {
    cuda::scatter<T>(device, dx, g, dst);
  }
  void dropout(int device, T* out, T* mask, const T* x, const StridedShape& shape, std::uint64_t key,
               std::uint32_t threshold, T scale) override {
    cuda::dropout<T>(device, out, mask, x, shape, key, threshold, scale);
  }
  void unary(int device, UnaryOp op, T* out, const T* x, index_t n) override { cuda::unary<T>(device, op, out, x, n); }
  void unary_backward(int device, UnaryOp op, T* dx, const T* g, const T* saved, index_t n) override {
    cuda::unary_backward<T>(device, op, dx, g, saved, n);
  }
  void affine(int device, T* out, const T* x, index_t n, T alpha, T beta) override {
    cuda::affine<T>(device, out, x, n, alpha, beta);
  }
  void axpy(int device, T* dst, const T* src, index_t n, T alpha) override {
    cuda::axpy<T>(device, dst, src, n, alpha);
  }
  void sum_to(int device, T* out, index_t n_out, const T* g, const StridedShape& out_strides) override {
    cuda::sum_to<T>(device, out, n_out, g, out_strides);
  }
  void adam_step(int device, T* p, T* m, T* v, const T* g, index_t n, const AdamStep& step) override {
    cuda::adam_step<T>(device, p, m, v, g, n, step);
  }
  void sum_of_squares(int device, double* total, const T* x, index_t n) override {
    cuda::sum_of_squares<T>(device, total, x, n);
  }
  void clip_by_norm(int device, T* x, index_t n, const double* sum_of_squares, double max_norm) override {
    cuda::clip_by_norm<T>(device, x, n, sum_of_squares, max_norm);
  }
  void layer_norm_forward(int device, T* out, T* mean, T* rstd, const T* x, const T* weight, const T* bias,
                          index_t rows, index_t n, double eps) override {
    cuda::layer_norm_forward<T>(device, out, mean, rstd, x, weight, bias, rows, n, eps);
  }
  void layer_norm_backward(int device, T* dx, T* dweight, T* dbias, const T* g, const T* x, const T* mean,
                           const T* rstd, const T* weight, index_t rows, index_t n) override {
    cuda::layer_norm_backward<T>(device, dx, dweight, dbias, g, x, mean, rstd, weight, rows, n);
  }
  void embedding_forward(int device, T* out, const T* weight, const std::int64_t* indices, index_t count,
                         index_t num_embeddings, index_t dim) override {
    cuda::embedding_forward<T>(device, out, weight, indices, count, num_embeddings, dim);
  }
  void embedding_backward(int device, T* dweight, const T* g, const std::int64_t* indices, index_t count,
                          index_t num_embeddings, index_t dim) override {
    cuda::embedding_backward<T>(device, dweight, g, indices, count, num_embeddings, dim);
  }
  void cross_entropy_forward(int device, T* loss, T* stats, const T* x, const CrossEntropyRows& rows) override {
    cuda::cross_entropy_forward<T>(device, loss, stats, x, rows);
  }
  void cross_entropy_backward(int device, T* dx, const T* x, const T* stats, const CrossEntropyRows& rows, const T* g,
                              index_t g_stride, T divisor) override {
    cuda::cross_entropy_backward<T>(device, dx, x, stats, rows, g, g_stride, divisor);
  }
  void masked_softmax_forward(int device, T* out, const T* scores, index_t batch, index_t heads, index_t num_queries,
                              index_t num_keys, const SoftmaxMask<T>& mask) override {
    cuda::masked_softmax_forward<T>(device, out, scores, batch, heads, num_queries, num_keys, mask);
  }
  void softmax_backward(int device, T* grad_in, const T* grad_out, const T* y, index_t rows, index_t cols) override {
    cuda::softmax_backward<T>(device, grad_in, grad_out, y, rows, cols);
  }
};

class CudaBackend final : public DeviceBackend {
 public:
  const char* name() const override { return backend_name(); }
  int device_count() const noexcept override { return cuda::device_count(); }
  void synchronize(int device) override { cuda::synchronize(device); }
  // The fused attention is heed's CPU kernel; on CUDA the modules take the classic path.
  bool supports(Capability) const override { return false; }

  void* allocate(int device, std::size_t bytes) override { return cuda::allocate(device, bytes); }
  void release(int device, void* ptr, std::size_t bytes) noexcept override { cuda::release(device, ptr, bytes); }
  void copy_to_device(int device, void* dst, const void* src, std::size_t bytes) override {
    cuda::copy_to_device(device, dst, src, bytes);
  }
  void copy_to_host(int device, void* dst, const void* src, std::size_t bytes) override {
    cuda::copy_to_host(device, dst, src, bytes);
  }
  void copy_on_device(int device, void* dst, const void* src, std::size_t bytes) override {
    cuda::copy_on_device(device, dst, src, bytes);
  }
  // By the value's width: the kernels copy the bits, whatever the element type.
  void fill(int device, void* out, std::int64_t n, const void* value, std::size_t value_bytes) override {
    switch (value_bytes) {
      case 1: {
        bool v;
        std::memcpy(&v, value, 1);
        cuda::fill<bool>(device, static_cast<bool*>(out), n, v);
        return;
      }
      case 4: {
        float v;
        std::memcpy(&v, value, 4);
        cuda::fill<float>(device, static_cast<float*>(out), n, v);
        return;
      }
      case 8: {
        std::int64_t v;
        std::memcpy(&v, value, 8);
        cuda::fill<std::int64_t>(device, static_cast<std::int64_t*>(out), n, v);
        return;
      }
      default:
        throw DeviceError(heed::detail::concat("fill: ", backend_name(), " fills 1-, 4- or 8-byte elements, not ",
                                               value_bytes, "-byte ones"));
    }
  }

  DeviceKernels<float>& kernels(float) override { return float_kernels_; }
  DeviceKernels<double>& kernels(double) override { return double_kernels_; }

 private:
  CudaKernels<float> float_kernels_;
  CudaKernels<double> double_kernels_;
};

}  // namespace

bool register_backend() noexcept {
  // Never destroyed: tensors with static storage duration may outlive any other object.
  static DeviceBackend* const backend = [] {
    auto* instance = new CudaBackend;
    heed::register_backend(DeviceType::cuda, instance);
    return instance;
  }();
  return backend != nullptr;
}

}  // namespace heed::cuda
