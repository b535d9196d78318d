// src/cuda/instantiate.hpp — the explicit instantiations of the backend's entry points
// (heed/cuda/runtime.hpp) for float and double, expanded from heed/ops/kernel_list.hpp:
// each CUDA source instantiates its family's list, the host emulation every list, so
// that both define exactly the functions the list declares.
#pragma once

#include "heed/cuda/runtime.hpp"

#define HEED_CUDA_INSTANTIATE_KERNEL(name, parameters, arguments) template void name parameters;

/// The kernels of one family list (HEED_KERNELS_BLAS, ..., or HEED_DEVICE_KERNELS for
/// all), for float and double.
#define HEED_CUDA_INSTANTIATE(list) list(HEED_CUDA_INSTANTIATE_KERNEL, float) list(HEED_CUDA_INSTANTIATE_KERNEL, double)

#define HEED_CUDA_INSTANTIATE_FILL(T) template void fill<T>(int device, T* out, index_t n, T value);
