// heed/detail/rules.hpp — per-element rules that the CPU ops and the device kernels
// must apply identically: dropout's keep/drop hash, which keys of a softmax row are
// visible, the offset of an element read through strides, and the fused unary ops'
// values and derivatives. Written once here and compiled by both sides (nvcc marks
// these functions __host__ __device__), so a CPU tensor and a device tensor get the same
// dropout masks, the same masked rows and the same activations.
// Needs nothing but <math.h>, <cstdint> and <type_traits>.
#pragma once

#include <math.h>  // ::exp, ::erf, … for float and double, as on the device

#include <cstdint>
#include <type_traits>

#ifdef __CUDACC__
#define HEED_HOST_DEVICE __host__ __device__
#else
#define HEED_HOST_DEVICE
#endif

namespace heed::detail {

// ---- dropout ---------------------------------------------------------------------------
// The call's key mixed with the leading coordinates gives each row's 64-bit key
// (splitmix64's finaliser); a 32-bit hash of the row key and j (murmur3's finaliser, a
// loop the compiler vectorises) decides element j by comparing with p·2³². A
// Mersenne-Twister draw per element was a fifth of a d2l Transformer training step.

HEED_HOST_DEVICE inline std::uint64_t dropout_mix(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
/// The key of coordinates (…, coord) from the key of (…).
HEED_HOST_DEVICE inline std::uint64_t dropout_rekey(std::uint64_t key, std::int64_t coord) {
  return dropout_mix(key + 0x9E3779B97F4A7C15ull * (static_cast<std::uint64_t>(coord) + 1));
}
HEED_HOST_DEVICE inline std::uint32_t dropout_row_seed(std::uint64_t row_key) {
  return static_cast<std::uint32_t>(row_key ^ (row_key >> 32));
}
/// p·2³² (p = 1 needs no threshold: the scale is 0 whatever the hash).
inline std::uint32_t dropout_threshold(double p) {
  const double scaled = p * 4294967296.0;
  return scaled >= 4294967295.0 ? 0xFFFFFFFFu : static_cast<std::uint32_t>(scaled);
}
/// Whether element j of the row whose seed is row_seed is dropped.
HEED_HOST_DEVICE inline bool dropout_drops(std::uint32_t row_seed, std::int64_t j, std::uint32_t threshold) {
  std::uint32_t h = row_seed + 0x9E3779B9u * static_cast<std::uint32_t>(j + 1);
  h = (h ^ (h >> 16)) * 0x85EBCA6Bu;
  h = (h ^ (h >> 13)) * 0xC2B2AE35u;
  h ^= h >> 16;
  return h < threshold;
}

// ---- masked softmax --------------------------------------------------------------------
// A valid length and the causal rule each leave a prefix of a row's keys visible.

/// Keys visible under a valid length `len`: negative lengths show nothing.
HEED_HOST_DEVICE inline std::int64_t valid_limit(std::int64_t len, std::int64_t num_keys) {
  return len < 0 ? 0 : len < num_keys ? len : num_keys;
}
/// Keys visible to query q under the causal rule: key j iff j ≤ q + (num_keys − num_queries).
HEED_HOST_DEVICE inline std::int64_t causal_limit(std::int64_t q, std::int64_t num_queries, std::int64_t num_keys) {
  const std::int64_t visible = q + 1 + num_keys - num_queries;
  return visible < 0 ? 0 : visible < num_keys ? visible : num_keys;
}

// ---- strided reads ---------------------------------------------------------------------

/// The offset of flat element i (row-major over sizes[0..rank)) through strides.
HEED_HOST_DEVICE inline std::int64_t strided_offset(std::int64_t i, int rank, const std::int64_t* sizes,
                                                    const std::int64_t* strides) {
  std::int64_t offset = 0;
  for (int d = rank - 1; d >= 0; --d) {
    offset += (i % sizes[d]) * strides[d];
    i /= sizes[d];
  }
  return offset;
}

// ---- extremes and clamps ------------------------------------------------------------------

/// Whether a is a better extreme than b: larger (smaller with !largest), and NaN beats
/// every number, as PyTorch's max and min propagate it.
template <typename T>
HEED_HOST_DEVICE inline bool beats(T a, T b, bool largest) {
  if (a != a) return b == b;  // NaN
  return largest ? a > b : a < b;
}
/// min(max(x, lo), hi) in that order, so that hi wins where lo > hi; NaN fails both tests.
template <typename T>
HEED_HOST_DEVICE inline T clamp_value(T x, T lo, T hi) {
  const T low = x < lo ? lo : x;
  return low > hi ? hi : low;
}
/// The gradient passes where lo ≤ x ≤ hi, as PyTorch's.
template <typename T>
HEED_HOST_DEVICE inline T clamp_grad(T g, T x, T lo, T hi) {
  return x >= lo && x <= hi ? g : T(0);
}

// ---- unary ops -------------------------------------------------------------------------
// Each fused unary op (heed/ops/elementwise.hpp, UnaryOp) as its value and its gradient
// g · dy/dx, the latter from what its backward keeps: the result y (exp, sqrt, tanh,
// sigmoid, relu) or the input x (the others). The device kernels and their host
// emulation (src/cuda/kernels.cuh) apply these per element. The CPU ops apply them too
// where they compute element by element anyway (gelu: erf has no vectorised form, so
// Eigen evaluates its expressions one element at a time); where the CPU evaluates a
// vectorised Eigen expression (exp, tanh, sigmoid, …) it keeps it, with the same
// formula, since a scalar rule there would cost speed, and the op table's device mode
// checks that the two agree.

template <typename T>
HEED_HOST_DEVICE inline T exp_value(T x) {
  return ::exp(x);
}
template <typename T>
HEED_HOST_DEVICE inline T exp_grad(T g, T y) {
  return g * y;
}
template <typename T>
HEED_HOST_DEVICE inline T log_value(T x) {
  return ::log(x);
}
template <typename T>
HEED_HOST_DEVICE inline T log_grad(T g, T x) {
  return g / x;
}
template <typename T>
HEED_HOST_DEVICE inline T sqrt_value(T x) {
  return ::sqrt(x);
}
template <typename T>
HEED_HOST_DEVICE inline T sqrt_grad(T g, T y) {
  return g / (T(2) * y);
}
template <typename T>
HEED_HOST_DEVICE inline T tanh_value(T x) {
  return ::tanh(x);
}
template <typename T>
HEED_HOST_DEVICE inline T tanh_grad(T g, T y) {
  return g * (T(1) - y * y);
}
/// 1 / (1 + e^-x) through tanh, so that neither tail overflows.
template <typename T>
HEED_HOST_DEVICE inline T sigmoid_value(T x) {
  return ::tanh(T(0.5) * x) * T(0.5) + T(0.5);
}
template <typename T>
HEED_HOST_DEVICE inline T sigmoid_grad(T g, T y) {
  return g * y * (T(1) - y);
}
template <typename T>
HEED_HOST_DEVICE inline T relu_value(T x) {
  return x > T(0) ? x : T(0);
}
template <typename T>
HEED_HOST_DEVICE inline T relu_grad(T g, T y) {
  return y > T(0) ? g : T(0);
}
/// Φ(x) = (1 + erf(x/√2)) / 2, the Gaussian CDF of GELU's exact form (PyTorch's default).
template <typename T>
HEED_HOST_DEVICE inline T gelu_cdf(T x) {
  return T(0.5) + T(0.5) * ::erf(x * T(0.70710678118654752440));
}
/// x · Φ(x).
template <typename T>
HEED_HOST_DEVICE inline T gelu_value(T x) {
  return x * gelu_cdf(x);
}
/// g · d/dx x·Φ(x) = g · (Φ(x) + x·φ(x)), φ the Gaussian density.
template <typename T>
HEED_HOST_DEVICE inline T gelu_grad(T g, T x) {
  return g * (gelu_cdf(x) + x * T(0.39894228040143267794) * ::exp(T(-0.5) * x * x));
}
/// SiLU (swish): x · sigmoid(x).
template <typename T>
HEED_HOST_DEVICE inline T silu_value(T x) {
  return x * sigmoid_value(x);
}
/// g · d/dx x·s(x) = g · s(x) · (1 + x · (1 − s(x))), s = sigmoid.
template <typename T>
HEED_HOST_DEVICE inline T silu_grad(T g, T x) {
  const T s = sigmoid_value(x);
  return g * (s * (T(1) + x * (T(1) - s)));
}
/// PyTorch's softplus (beta = 1, threshold = 20): x where x > 20, else log(1 + e^x).
template <typename T>
HEED_HOST_DEVICE inline T softplus_value(T x) {
  return x > T(20) ? x : ::log1p(::exp(x));
}
/// g · e^x / (1 + e^x), g where x > 20, as PyTorch's softplus_backward.
template <typename T>
HEED_HOST_DEVICE inline T softplus_grad(T g, T x) {
  if (x > T(20)) return g;
  const T z = ::exp(x);
  return g * (z / (z + T(1)));
}
template <typename T>
HEED_HOST_DEVICE inline T abs_value(T x) {
  return x < T(0) ? -x : x;
}
template <typename T>
HEED_HOST_DEVICE inline T abs_grad(T g, T x) {
  return g * T((x > T(0)) - (x < T(0)));
}
template <typename T>
HEED_HOST_DEVICE inline T sin_value(T x) {
  return ::sin(x);
}
template <typename T>
HEED_HOST_DEVICE inline T sin_grad(T g, T x) {
  return g * ::cos(x);
}
template <typename T>
HEED_HOST_DEVICE inline T cos_value(T x) {
  return ::cos(x);
}
template <typename T>
HEED_HOST_DEVICE inline T cos_grad(T g, T x) {
  return -g * ::sin(x);
}

// ---- integer sums and products -------------------------------------------------------
// Signed overflow is undefined behaviour in C++; PyTorch's integer sum and prod wrap
// around (two's complement), and so do heed's: the arithmetic is done unsigned, where
// it is defined modulo 2⁶⁴, and the bits read back as signed.

template <typename T>
HEED_HOST_DEVICE inline T wrapping_add(T a, T b) {
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    using U = std::make_unsigned_t<std::common_type_t<T, unsigned>>;  // no promotion to int
    return static_cast<T>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
  } else {
    return static_cast<T>(a + b);
  }
}

template <typename T>
HEED_HOST_DEVICE inline T wrapping_mul(T a, T b) {
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    using U = std::make_unsigned_t<std::common_type_t<T, unsigned>>;  // no promotion to int
    return static_cast<T>(static_cast<U>(static_cast<U>(a) * static_cast<U>(b)));
  } else {
    return static_cast<T>(a * b);
  }
}

}  // namespace heed::detail
