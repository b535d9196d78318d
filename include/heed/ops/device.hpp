// heed/ops/device.hpp — moving tensors between the CPU and CUDA devices.
//
//   auto x_gpu = x.to(heed::Device::cuda());   // differentiable, like PyTorch's .to
//   float loss = step(x_gpu).item();           // item() copies one value back
//
// A program without a CUDA backend has only the CPU: to(Device::cuda()) throws
// DeviceError saying so. See heed/core/backend.hpp for how a backend joins.
#pragma once

#include "heed/detail/header_begin.hpp"

#include <memory>

#include "heed/autograd/node.hpp"

namespace heed {
namespace detail {

/// Copies src's elements into dst (same numel), across devices when they differ. A copy
/// between two devices goes through the host: moving a tensor is explicit, and rare.
template <typename T>
void copy_between_devices(Tensor<T>& dst, const Tensor<T>& src) {
  const std::size_t bytes = static_cast<std::size_t>(src.numel()) * sizeof(T);
  const Device from = src.device(), to = dst.device();
  if (bytes == 0) return;
  if (from.is_cpu() && to.is_cpu()) {
    std::copy(src.data(), src.data() + src.numel(), dst.data());
    return;
  }
  if (from.is_cpu()) {
    backend_of(to).copy_to_device(to.index(), device_data(dst), src.data(), bytes);
  } else if (to.is_cpu()) {
    backend_of(from).copy_to_host(from.index(), dst.data(), device_data(src), bytes);
  } else if (from == to) {
    device_copy(to, device_data(dst), device_data(src), bytes);
  } else {
    std::unique_ptr<unsigned char[]> staging(new unsigned char[bytes]);
    backend_of(from).copy_to_host(from.index(), staging.get(), device_data(src), bytes);
    backend_of(to).copy_to_device(to.index(), device_data(dst), staging.get(), bytes);
  }
}

/// Moves x's data to `device` in place: every handle to x sees the move (a module's
/// parameters and the optimiser holding them). The gradient, if any, moves too.
template <typename T>
void move_to_device_(Tensor<T>& x, Device device) {
  if (!x.defined() || x.device() == device) return;
  check_device_usable(device, "to");
  Tensor<T> moved = make_tensor<T>(x.shape(), device);
  copy_between_devices(moved, x);
  heed::detail::impl(x).storage = heed::detail::impl(moved).storage;
  if (heed::detail::impl(x).grad.defined()) move_to_device_(heed::detail::impl(x).grad, device);
}

}  // namespace detail

template <typename T>
Tensor<T> Tensor<T>::to(Device device) const {
  if (device == this->device()) return *this;
  detail::check_device_usable(device, "to");
  Tensor<T> out = detail::make_tensor<T>(shape(), device);
  detail::copy_between_devices(out, *this);
  if constexpr (std::is_floating_point_v<T>) {
    if (autograd::needs_grad(*this))
      autograd::record(out, "ToCopyBackward", {*this},
                       [from = this->device()](const Tensor<T>& g) { return autograd::Grads<T>{g.to(from)}; });
  }
  return out;
}

}  // namespace heed

#include "heed/detail/header_end.hpp"
