// heed/cuda/runtime.hpp — the compiled part of the CUDA backend, as plain C++.
//
// heed is header-only on the CPU. CUDA kernels must be compiled by nvcc, and heed's
// ops are templates compiled by the user's C++ compiler, so the backend is split: the
// kernels, cuBLAS calls, streams and the device allocator live in a small static
// library built from src/cuda/*.cu (CMake target heed::cuda, which also defines
// HEED_WITH_CUDA for every translation unit that links it, so that each one registers
// the backend: heed/core/backend.hpp). The ops reach these functions only through the
// backend's kernel table (heed/ops/kernels.hpp, implemented in src/cuda/backend.cpp);
// users call the ones below the kernels' (the allocator's figures, the math mode).
// Nothing here needs a CUDA header, so a user's .cpp files stay plain C++.
//
// The kernels' entry points are templates declared from heed/ops/kernel_list.hpp, defined
// for T = float and double (fill also for std::int64_t and bool) and instantiated by
// each source file for its family (src/cuda/instantiate.hpp).
//
// Every function runs on the device's one stream (created on first use) and returns
// without waiting, except the copies to the host, which wait for their data. Failures
// of the CUDA runtime or of cuBLAS throw heed::CudaError naming the call and the code.
#pragma once

#include <cstddef>
#include <cstdint>

#include "heed/ops/kernel_list.hpp"
#include "heed/ops/vocabulary.hpp"

namespace heed::cuda {

using index_t = std::int64_t;
// The ops' vocabulary (heed/ops/vocabulary.hpp), by the names the kernels use.
using heed::AdamStep;
using heed::BinaryOp;
using heed::CrossEntropyRows;
using heed::LensForm;
using heed::SoftmaxMask;
using heed::StridedShape;
using heed::UnaryOp;
constexpr int kMaxRank = kMaxKernelRank;

// ---- the backend ----------------------------------------------------------------------------

/// Registers this library's backend for Device::cuda() (heed/core/backend.hpp) once;
/// every file compiled as part of a target linking heed::cuda calls it at start-up.
bool register_backend() noexcept;
/// "CUDA", or "CUDA (emulated on the host)" for the emulation that CI runs.
const char* backend_name();

// ---- devices, memory, copies ------------------------------------------------------------

/// CUDA devices usable by this process; 0 without a driver or a GPU (never throws).
int device_count();
/// Waits for everything queued on the device's stream.
void synchronize(int device);

/// At least `bytes` of device memory from the caching allocator: freed blocks of the
/// same size class are reused, so a training loop calls cudaMalloc only while its peak
/// grows. Never managed memory.
void* allocate(int device, std::size_t bytes);
/// Returns a block from allocate() to the cache. Later work on the device's stream is
/// ordered after earlier work, so the block is reusable at once.
void release(int device, void* ptr, std::size_t bytes) noexcept;
/// Frees the idle cached blocks of every device (cudaFree).
void empty_cache();
/// Bytes held by live tensors, and bytes cached idle, on a device.
std::size_t allocated_bytes(int device);
std::size_t cached_bytes(int device);
/// cudaMalloc calls made so far on a device (a test checks the steady state makes none).
std::size_t malloc_count(int device);

void copy_to_device(int device, void* dst, const void* src, std::size_t bytes);
/// Waits for the device's stream, then for the copy.
void copy_to_host(int device, void* dst, const void* src, std::size_t bytes);
void copy_on_device(int device, void* dst, const void* src, std::size_t bytes);

// ---- matrix products ---------------------------------------------------------------------

/// How float products run on the tensor cores. float32: exact IEEE float products.
/// tf32: inputs rounded to TF32 (10-bit mantissa), relative error about 1e-3.
/// bf16: inputs rounded to bfloat16 (7-bit mantissa), relative error about 1e-2.
/// Double products are always exact.
enum class MathMode { float32, tf32, bf16 };
void set_math_mode(MathMode mode);
MathMode math_mode();

// ---- the kernels ---------------------------------------------------------------------------

/// out[0 : n) = value; defined for float, double, std::int64_t and bool (the backend's
/// fill picks one by the element's width).
template <typename T>
void fill(int device, T* out, index_t n, T value);

// Every kernel of heed/ops/kernel_list.hpp (documented there), as a function template
// defined for float and double in its family's src/cuda/*.cu file and in
// src/cuda/emulated.cpp.
#define HEED_CUDA_DECLARE_KERNEL(name, parameters, arguments) \
  template <typename T>                                       \
  void name parameters;
HEED_DEVICE_KERNELS(HEED_CUDA_DECLARE_KERNEL, T)
#undef HEED_CUDA_DECLARE_KERNEL

}  // namespace heed::cuda
