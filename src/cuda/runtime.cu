// src/cuda/runtime.cu — devices, streams, cuBLAS handles, the caching allocator, copies.
#include <atomic>
#include <mutex>

#include "caching_allocator.hpp"
#include "common.cuh"

namespace heed::cuda {
namespace detail {

const char* cublas_status_name(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS:
      return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED:
      return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED:
      return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE:
      return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH:
      return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR:
      return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED:
      return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR:
      return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED:
      return "CUBLAS_STATUS_NOT_SUPPORTED";
    case CUBLAS_STATUS_LICENSE_ERROR:
      return "CUBLAS_STATUS_LICENSE_ERROR";
    default:
      return "unknown cuBLAS status";
  }
}

namespace {

/// Per-device state, created on first use and kept for the process's life (never
/// destroyed: tensors in static storage may be released after main returns).
struct DeviceState {
  std::once_flag created;
  cudaStream_t stream = nullptr;
  cublasHandle_t cublas = nullptr;
  CachingAllocator allocator;
};

constexpr int kMaxDevices = 64;

DeviceState& state(int device) {
  static DeviceState* states = new DeviceState[kMaxDevices];
  if (device < 0 || device >= kMaxDevices)
    throw ValueError(heed::detail::concat("heed::cuda: device index ", device, " out of range"));
  return states[device];
}

void set_device(int device) {
  int current = -1;
  HEED_CUDA_CHECK(cudaGetDevice(&current), "");
  if (current != device) HEED_CUDA_CHECK(cudaSetDevice(device), on_device(device));
}

DeviceState& ready(int device) {
  DeviceState& s = state(device);
  set_device(device);
  std::call_once(s.created, [&] {
    HEED_CUDA_CHECK(cudaStreamCreateWithFlags(&s.stream, cudaStreamNonBlocking), on_device(device));
    HEED_CUBLAS_CHECK(cublasCreate(&s.cublas), on_device(device));
    HEED_CUBLAS_CHECK(cublasSetStream(s.cublas, s.stream), on_device(device));
  });
  return s;
}

void cuda_free(void* p) { (void)cudaFree(p); }

}  // namespace

cudaStream_t stream_for(int device) { return ready(device).stream; }
cublasHandle_t cublas_for(int device) { return ready(device).cublas; }

}  // namespace detail

const char* backend_name() { return "CUDA"; }

int device_count() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    (void)cudaGetLastError();  // no driver or no GPU: not an error for the caller
    return 0;
  }
  return count;
}

void synchronize(int device) {
  HEED_CUDA_CHECK(cudaStreamSynchronize(detail::stream_for(device)), detail::on_device(device));
}

void* allocate(int device, std::size_t bytes) {
  detail::DeviceState& s = detail::ready(device);
  cudaError_t failure = cudaSuccess;
  void* p = s.allocator.allocate(
      bytes,
      [&](std::size_t size) -> void* {
        void* block = nullptr;
        failure = cudaMalloc(&block, size);
        if (failure == cudaSuccess) return block;
        (void)cudaGetLastError();  // clear it: the allocator may free the cache and retry
        return nullptr;
      },
      detail::cuda_free);
  if (p == nullptr)
    detail::throw_cuda(
        "cudaMalloc", failure,
        heed::detail::concat("(", detail::CachingAllocator::size_class(bytes), " bytes) ", detail::on_device(device),
                             ", with ", s.allocator.live_bytes(), " bytes in live tensors"));
  return p;
}

void release(int device, void* ptr, std::size_t) noexcept { detail::state(device).allocator.release(ptr); }

void empty_cache() {
  const int count = device_count();
  for (int d = 0; d < count && d < detail::kMaxDevices; ++d) {
    detail::set_device(d);
    detail::state(d).allocator.free_idle(detail::cuda_free);  // cudaFree waits for the device
  }
}

std::size_t allocated_bytes(int device) { return detail::state(device).allocator.live_bytes(); }
std::size_t cached_bytes(int device) { return detail::state(device).allocator.idle_bytes(); }
std::size_t malloc_count(int device) { return detail::state(device).allocator.mallocs(); }

void copy_to_device(int device, void* dst, const void* src, std::size_t bytes) {
  HEED_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, detail::stream_for(device)),
                  heed::detail::concat("(", bytes, " bytes) ", detail::on_device(device)));
}

void copy_to_host(int device, void* dst, const void* src, std::size_t bytes) {
  cudaStream_t stream = detail::stream_for(device);
  HEED_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream),
                  heed::detail::concat("(", bytes, " bytes) ", detail::on_device(device)));
  HEED_CUDA_CHECK(cudaStreamSynchronize(stream), detail::on_device(device));
}

void copy_on_device(int device, void* dst, const void* src, std::size_t bytes) {
  HEED_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, detail::stream_for(device)),
                  heed::detail::concat("(", bytes, " bytes) ", detail::on_device(device)));
}

namespace {
std::atomic<MathMode> g_math_mode{MathMode::float32};
}

void set_math_mode(MathMode mode) { g_math_mode = mode; }
MathMode math_mode() { return g_math_mode; }

}  // namespace heed::cuda
