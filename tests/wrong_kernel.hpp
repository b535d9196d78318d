// A device backend with one kernel wrong on purpose, to show that the op table's device
// mode notices (test_op_table.cpp). It forwards everything to the backend registered
// for CUDA (the host emulation, or a real GPU) except the element-wise unary kernel,
// which adds 0.5 to the result of one UnaryOp. Installed through heed's own registry
// (register_backend), so the ops reach it by the path they always take (kernels_for).
//
// The kernels are forwarded by expanding heed/ops/kernel_list.hpp, so a new kernel needs
// nothing here; the DeviceBackend functions are forwarded by hand below.
#pragma once

#include <heed/heed.hpp>

namespace heed_test {

namespace forwarding {
using namespace heed;  // the kernel list's parameter types, unqualified

/// DeviceKernels<T> forwarding each kernel of heed/ops/kernel_list.hpp to `real`.
template <typename T>
class ForwardingKernels : public DeviceKernels<T> {
 public:
  using index_t = typename DeviceKernels<T>::index_t;
  explicit ForwardingKernels(DeviceKernels<T>& real) : real_(real) {}

#define HEED_TEST_FORWARD_KERNEL(name, parameters, arguments) \
  void name parameters override { real_.name arguments; }
  HEED_DEVICE_KERNELS(HEED_TEST_FORWARD_KERNEL, T)
#undef HEED_TEST_FORWARD_KERNEL

 protected:
  DeviceKernels<T>& real_;
};

}  // namespace forwarding

/// Every kernel forwarded, but `unary` of one UnaryOp off by 0.5.
template <typename T>
class WrongUnaryKernels final : public forwarding::ForwardingKernels<T> {
 public:
  using index_t = heed::index_t;
  WrongUnaryKernels(heed::DeviceKernels<T>& real, heed::UnaryOp wrong)
      : forwarding::ForwardingKernels<T>(real), wrong_(wrong) {}

  void unary(int device, heed::UnaryOp op, T* out, const T* x, index_t n) override {
    this->real_.unary(device, op, out, x, n);
    if (op == wrong_) this->real_.affine(device, out, out, n, T(1), T(0.5));  // the wrong answer
  }

 private:
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
