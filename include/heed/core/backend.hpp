// heed/core/backend.hpp — the boundary between heed's device-neutral ops and a device.
//
// The CPU is heed's own backend and lives in the headers: an op computes on the CPU
// inline. Every other device type (today CUDA) is served by a DeviceBackend that a
// compiled library registers at start-up: heed::cuda registers the CUDA backend (real
// or emulated on the host, src/cuda/backend.cpp). An op whose operands live on such a
// device validates and records its autograd node as on the CPU, then calls the
// backend's memory functions here and its kernels (heed/ops/kernels.hpp).
//
// The registry is a table of one pointer per device type, the same in every
// translation unit: nothing here depends on how a file was compiled, so a program may
// link files compiled with and without the CUDA backend's headers in the same way.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "heed/core/device.hpp"
#include "heed/core/error.hpp"

namespace heed {

template <typename T>
class DeviceKernels;  // heed/ops/kernels.hpp

/// Work that only some backends can do. An op or module asks before choosing a path
/// (supports()), instead of asking which device it is on.
enum class Capability {
  fused_attention,  // scaled_dot_product_attention without materialising the weights
};

/// A device type's memory, copies and kernels. One instance per device type, shared by
/// all its devices (each call names the device index). Every function may throw
/// CudaError (or the backend's own heed::Error) naming the failed call.
class DeviceBackend {
 public:
  virtual ~DeviceBackend() = default;

  /// "CUDA", "CUDA (emulated on the host)".
  virtual const char* name() const = 0;
  /// Devices usable by this process; 0 without a driver or a device (never throws).
  virtual int device_count() const noexcept = 0;
  /// Waits for everything queued on the device.
  virtual void synchronize(int device) = 0;
  virtual bool supports(Capability capability) const = 0;

  /// At least `bytes` of device memory (OutOfMemoryError when the device has none left).
  virtual void* allocate(int device, std::size_t bytes) = 0;
  virtual void release(int device, void* ptr, std::size_t bytes) noexcept = 0;

  virtual void copy_to_device(int device, void* dst, const void* src, std::size_t bytes) = 0;
  /// Waits for the device's queued work, then for the copy.
  virtual void copy_to_host(int device, void* dst, const void* src, std::size_t bytes) = 0;
  virtual void copy_on_device(int device, void* dst, const void* src, std::size_t bytes) = 0;
  /// n elements of `value_bytes` (1, 4 or 8) bytes each set to the bytes at `value`.
  virtual void fill(int device, void* out, std::int64_t n, const void* value, std::size_t value_bytes) = 0;

  /// The element-wise, product and row kernels for float and double.
  virtual DeviceKernels<float>& kernels(float) = 0;
  virtual DeviceKernels<double>& kernels(double) = 0;
};

namespace detail {

inline std::atomic<DeviceBackend*>& backend_slot(DeviceType type) {
  static std::atomic<DeviceBackend*> slots[2] = {};  // one per DeviceType; cpu's stays empty
  return slots[static_cast<int>(type)];
}

}  // namespace detail

/// Makes `backend` serve every device of `type` (the CPU cannot be replaced). Called
/// by a backend library at start-up; the backend must outlive every tensor on it.
inline void register_backend(DeviceType type, DeviceBackend* backend) {
  HEED_CHECK(type != DeviceType::cpu, ValueError, "register_backend: the CPU is heed's own backend");
  detail::backend_slot(type).store(backend, std::memory_order_release);
}

/// The backend registered for `type`, or null (always null for the CPU).
inline DeviceBackend* registered_backend(DeviceType type) {
  return detail::backend_slot(type).load(std::memory_order_acquire);
}

/// Whether a CUDA backend is linked into this program (heed::cuda).
inline bool cuda_is_built() { return registered_backend(DeviceType::cuda) != nullptr; }

/// CUDA devices usable now: 0 without the backend, without a driver, or without a GPU.
inline int cuda_device_count() {
  const DeviceBackend* backend = registered_backend(DeviceType::cuda);
  return backend == nullptr ? 0 : backend->device_count();
}

inline bool cuda_is_available() { return cuda_device_count() > 0; }

/// Whether `device` can do `capability`. The CPU does everything heed offers.
inline bool supports(Device device, Capability capability) {
  if (device.is_cpu()) return true;
  const DeviceBackend* backend = registered_backend(device.type());
  return backend != nullptr && backend->supports(capability);
}

namespace detail {

/// Throws DeviceError unless `device` can hold tensors in this program and process.
inline void check_device_usable(Device device, const char* op) {
  if (device.is_cpu()) return;
  if (!cuda_is_built())
    throw DeviceError(concat(op, ": ", to_string(device),
                             " asked of a program without the CUDA backend (configure with -DHEED_WITH_CUDA=ON and "
                             "link heed::cuda)"));
  const int count = cuda_device_count();
  if (device.index() >= count)
    throw DeviceError(concat(op, ": ", to_string(device), " is not available: this process sees ", count,
                             " CUDA device", count == 1 ? "" : "s"));
}

/// The backend of a device that is not the CPU. A tensor exists there only once its
/// backend is registered, so this fails only for a device no tensor can be on.
inline DeviceBackend& backend_of(Device device) {
  DeviceBackend* backend = registered_backend(device.type());
  if (backend == nullptr || device.is_cpu()) throw DeviceError(concat("heed: no backend serves ", to_string(device)));
  return *backend;
}

/// Fills n elements of a device buffer with value.
template <typename T>
void device_fill(Device device, T* out, std::int64_t n, T value) {
  static_assert(sizeof(T) == 1 || sizeof(T) == 4 || sizeof(T) == 8, "device_fill: 1-, 4- or 8-byte elements");
  backend_of(device).fill(device.index(), out, n, &value, sizeof(T));
}

/// Copies `bytes` between two buffers of one device.
inline void device_copy(Device device, void* dst, const void* src, std::size_t bytes) {
  if (bytes > 0) backend_of(device).copy_on_device(device.index(), dst, src, bytes);
}

}  // namespace detail
}  // namespace heed

// The one place where how a file is compiled matters: a file compiled as part of a
// target that links heed::cuda (which defines HEED_WITH_CUDA) references the backend's
// registration, so that the linker keeps it; the registration itself runs once.
#ifdef HEED_WITH_CUDA
namespace heed::cuda {
bool register_backend() noexcept;
}
namespace {
[[maybe_unused]] const bool heed_cuda_backend_registered = heed::cuda::register_backend();
}
#endif
