// heed/ops/kernels.hpp — the ops' vocabulary and the kernels a device backend provides.
//
// An op on a device that is not the CPU does what it does on the CPU (validate, shape
// the output, record one autograd node) and calls one of these kernels on raw device
// pointers, through detail::kernels_for(). The CUDA backend implements them with its
// own kernels and cuBLAS (src/cuda), and its host emulation with plain loops. The
// kernels are declared once, in heed/ops/kernel_list.hpp; the words they share are in
// heed/ops/vocabulary.hpp; the per-element rules both sides
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
#include "heed/ops/kernel_list.hpp"
#include "heed/ops/vocabulary.hpp"

namespace heed {

/// The kernels of a device backend for elements of type T, one pure virtual per entry of
/// heed/ops/kernel_list.hpp (where each is documented). Each takes the device index
/// first; pointers are the device's. Only float and double have kernels. Only heed's
/// backends implement this class, so a kernel added or renamed here needs no alias.
template <typename T>
class DeviceKernels {
 public:
  using index_t = std::int64_t;
  virtual ~DeviceKernels() = default;

#define HEED_DECLARE_KERNEL(name, parameters, arguments) virtual void name parameters = 0;
  HEED_DEVICE_KERNELS(HEED_DECLARE_KERNEL, T)
#undef HEED_DECLARE_KERNEL
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

/// The floating type of T's width, whose copies move T's bits unchanged: a strided copy
/// only reads and writes whole elements, so an int64 tensor's runs as doubles' (8 bytes)
/// and a 4-byte one's as floats'. Other widths (bool) have none: kernels_for throws.
template <typename T>
using SameWidthFloat =
    std::conditional_t<sizeof(T) == sizeof(double), double, std::conditional_t<sizeof(T) == sizeof(float), float, T>>;

/// The kernels serving x's device, for an op on x.
template <typename T>
DeviceKernels<T>& kernels_for(const Tensor<T>& x, const char* op) {
  return kernels_for<T>(x.device(), op);
}

}  // namespace detail
}  // namespace heed

#include "heed/detail/header_end.hpp"
