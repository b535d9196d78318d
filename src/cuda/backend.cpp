// src/cuda/backend.cpp — the CUDA backend as heed's ops see it: the device table of
// heed/core/backend.hpp and the kernel table of heed/ops/kernels.hpp, each kernel of
// heed/ops/kernel_list.hpp one call of the backend's functions (heed/cuda/runtime.hpp).
// Compiled by the host's C++ compiler into heed::cuda, for the real backend and for its
// host emulation alike.
#include <cstring>

#include "heed/core/backend.hpp"
#include "heed/cuda/runtime.hpp"
#include "heed/ops/kernels.hpp"

namespace heed::cuda {
namespace {

/// DeviceKernels<T>, each kernel of heed/ops/kernel_list.hpp forwarded to heed::cuda's.
template <typename T>
class CudaKernels final : public DeviceKernels<T> {
 public:
  using index_t = typename DeviceKernels<T>::index_t;

#define HEED_CUDA_FORWARD_KERNEL(name, parameters, arguments) \
  void name parameters override { cuda::name<T> arguments; }
  HEED_DEVICE_KERNELS(HEED_CUDA_FORWARD_KERNEL, T)
#undef HEED_CUDA_FORWARD_KERNEL
};

class CudaBackend final : public DeviceBackend {
 public:
  const char* name() const override { return backend_name(); }
  int device_count() const noexcept override { return cuda::device_count(); }
  void synchronize(int device) override { cuda::synchronize(device); }
  // fused_attention: attention.cu's kernels, which scaled_dot_product_attention and the
  // attention modules take on a device.
  bool supports(Capability capability) const override { return capability == Capability::fused_attention; }

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
