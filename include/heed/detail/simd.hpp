// heed/detail/simd.hpp — the SIMD vectors heed's own CPU kernels compute in.
//
// Simd<T, Bytes> is a vector of Bytes bytes of float or double with broadcast, fused
// multiply-add and unaligned whole-vector loads and stores, written once for the
// products' kernels (ops/packed_gemm.hpp, ops/small_gemm.hpp):
//   64  AVX-512 (__m512, __m512d)            when the build targets AVX-512F
//   32  AVX2 + FMA, or AVX-512VL (__m256, ...) when the build targets either
//   16  a GNU vector, always: the baseline (SSE2) holds it in a register; a wider GNU
//       vector passed by value changes the ABI there (-Wpsabi)
// kWidestSimdBytes is the widest the build has.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
#include <immintrin.h>
#endif

namespace heed::detail {

#if defined(__AVX512F__)
#define HEED_SIMD_512 1
#else
#define HEED_SIMD_512 0
#endif
#if (defined(__AVX512F__) && defined(__AVX512VL__)) || (defined(__AVX2__) && defined(__FMA__))
#define HEED_SIMD_256 1
#else
#define HEED_SIMD_256 0
#endif

constexpr int kWidestSimdBytes = HEED_SIMD_512 ? 64 : HEED_SIMD_256 ? 32 : 16;

template <typename T, int Bytes>
struct Simd;

template <typename T>
struct Simd<T, 16> {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>, "Simd: float or double");
  static constexpr std::int64_t lanes = static_cast<std::int64_t>(16 / sizeof(T));
  typedef T V __attribute__((vector_size(16)));
  static V broadcast(T a) {
    V v;
    for (std::int64_t i = 0; i < lanes; ++i) v[i] = a;
    return v;
  }
  static V fma(V a, V b, V c) { return a * b + c; }
  typedef T Unaligned __attribute__((vector_size(16), aligned(alignof(T)), may_alias));
  static V load(const T* p) { return *reinterpret_cast<const Unaligned*>(p); }
  static void store(T* p, V v) { *reinterpret_cast<Unaligned*>(p) = v; }
};

#if HEED_SIMD_256
template <typename T>
struct Simd<T, 32> {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>, "Simd: float or double");
  static constexpr std::int64_t lanes = static_cast<std::int64_t>(32 / sizeof(T));
  // Overloads for float and double; V is what broadcast returns for T.
  static __m256 broadcast(float a) { return _mm256_set1_ps(a); }
  static __m256d broadcast(double a) { return _mm256_set1_pd(a); }
  using V = decltype(broadcast(T()));
  static __m256 fma(__m256 a, __m256 b, __m256 c) { return _mm256_fmadd_ps(a, b, c); }
  static __m256d fma(__m256d a, __m256d b, __m256d c) { return _mm256_fmadd_pd(a, b, c); }
  // Whole vectors by intrinsics, not memcpy: GCC 12 keeps an accumulator whose address
  // reaches a memcpy on the stack, stored back on every step of a k loop.
  static __m256 load(const float* p) { return _mm256_loadu_ps(p); }
  static __m256d load(const double* p) { return _mm256_loadu_pd(p); }
  static void store(float* p, __m256 v) { _mm256_storeu_ps(p, v); }
  static void store(double* p, __m256d v) { _mm256_storeu_pd(p, v); }
};
#endif

#if HEED_SIMD_512
template <typename T>
struct Simd<T, 64> {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>, "Simd: float or double");
  static constexpr std::int64_t lanes = static_cast<std::int64_t>(64 / sizeof(T));
  static __m512 broadcast(float a) { return _mm512_set1_ps(a); }
  static __m512d broadcast(double a) { return _mm512_set1_pd(a); }
  using V = decltype(broadcast(T()));
  static __m512 fma(__m512 a, __m512 b, __m512 c) { return _mm512_fmadd_ps(a, b, c); }
  static __m512d fma(__m512d a, __m512d b, __m512d c) { return _mm512_fmadd_pd(a, b, c); }
  static __m512 load(const float* p) { return _mm512_loadu_ps(p); }
  static __m512d load(const double* p) { return _mm512_loadu_pd(p); }
  static void store(float* p, __m512 v) { _mm512_storeu_ps(p, v); }
  static void store(double* p, __m512d v) { _mm512_storeu_pd(p, v); }
};
#endif

}  // namespace heed::detail
