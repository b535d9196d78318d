// heed/io/half.hpp — the 2-byte floats of pretrained checkpoints: IEEE 754 binary16
// (safetensors' "F16", PyTorch's float16) and bfloat16 ("BF16"), to and from float and
// double, as their bits.
//
//   std::uint16_t h = heed::to_f16(1.0f);        // 0x3C00
//   float x = heed::from_f16<float>(0x3C00);     // 1.0f
//   std::uint16_t b = heed::to_bf16(1.0);        // 0x3F80
//   double y = heed::from_bf16<double>(0x3F80);  // 1.0
//
// Every F16 and BF16 value is exactly a float (and a double), so from_* is exact: zeros
// of either sign, subnormals, infinities, and NaN, whose payload is kept (so it stays a
// NaN). to_* rounds to nearest, ties to even, as PyTorch's .half() and .bfloat16() do: a
// finite value too large becomes ±inf (the savers of heed/io/safetensors.hpp refuse it
// instead), one too small a subnormal or ±0, and NaN a quiet NaN of the same sign. A
// double rounds once, from its own value: rounding it to float first could round twice.
//
// Plain C++ on the values' bits and exact library functions (frexp, ldexp, floor): no
// F16C instruction or _Float16, the same result on every compiler and host byte order.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

namespace heed {

namespace detail {

/// A 2-byte float format: its precision in bits (the implicit leading one included) and
/// the width of its exponent field; the sign takes the last bit.
struct HalfFormat {
  int precision;
  int exponent_bits;
};
inline constexpr HalfFormat kF16Format{11, 5};
inline constexpr HalfFormat kBF16Format{8, 8};

template <typename T>
constexpr void check_half_source() {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>, "heed/io/half.hpp: T must be float or double");
}

/// `value` rounded to nearest-even in `format`, as its bits.
template <typename T>
std::uint16_t round_to_half(T value, HalfFormat format) {
  check_half_source<T>();
  const int p = format.precision;
  const int bias = (1 << (format.exponent_bits - 1)) - 1;
  const std::uint32_t sign = std::signbit(value) ? 0x8000u : 0u;
  const std::uint32_t infinity = ((1u << format.exponent_bits) - 1) << (p - 1);
  if (std::isnan(value)) return static_cast<std::uint16_t>(sign | infinity | 1u << (p - 2));  // the quiet bit
  const T magnitude = std::fabs(value);
  if (std::isinf(magnitude)) return static_cast<std::uint16_t>(sign | infinity);
  if (magnitude == 0) return static_cast<std::uint16_t>(sign);
  int e = 0;
  (void)std::frexp(magnitude, &e);                                       // magnitude is in [2^(e-1), 2^e)
  if (e - 1 > bias) return static_cast<std::uint16_t>(sign | infinity);  // at least twice the largest value
  // The unit in the last place where magnitude lands: 2^(e-p) among the normal numbers,
  // and below them the subnormals' fixed 2^(emin-(p-1)).
  const int emin = 1 - bias;
  const int ulp = e - p > emin - (p - 1) ? e - p : emin - (p - 1);
  // Scaled by a power of two into [0, 2^p]: exact, as are floor and the difference.
  const T scaled = std::ldexp(magnitude, -ulp);
  const T whole = std::floor(scaled);
  const T rest = scaled - whole;
  auto n = static_cast<std::uint32_t>(whole);
  if (rest > T(0.5) || (rest == T(0.5) && (n & 1u) != 0)) ++n;
  int exponent = ulp + (p - 1);  // of n's leading bit when n has p bits
  if (n >> p) {                  // rounded up to 2^p: one bit fewer, one exponent more
    n >>= 1;
    ++exponent;
  }
  if (n < 1u << (p - 1)) return static_cast<std::uint16_t>(sign | n);  // a subnormal (or zero): field 0
  const int field = exponent + bias;
  if (field >= (1 << format.exponent_bits) - 1) return static_cast<std::uint16_t>(sign | infinity);
  return static_cast<std::uint16_t>(sign | static_cast<std::uint32_t>(field) << (p - 1) | (n & ((1u << (p - 1)) - 1)));
}

inline float float_from_bits(std::uint32_t bits) {
  float value = 0;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

}  // namespace detail

/// The float or double that F16 bits hold, exactly (NaN's payload kept).
template <typename T>
T from_f16(std::uint16_t bits) {
  detail::check_half_source<T>();
  const std::uint32_t sign = static_cast<std::uint32_t>(bits & 0x8000u) << 16;
  const std::uint32_t field = bits >> 10 & 0x1Fu;
  std::uint32_t fraction = bits & 0x3FFu;
  std::uint32_t out = sign;  // ±0
  if (field == 0x1F) {
    out = sign | 0x7F800000u | fraction << 13;  // ±inf, or NaN with its payload
  } else if (field != 0) {
    out = sign | (field + 127 - 15) << 23 | fraction << 13;
  } else if (fraction != 0) {
    // A subnormal, fraction × 2^-24: shifted up to a leading one, a normal float.
    std::uint32_t shift = 0;
    for (; (fraction & 0x400u) == 0; ++shift) fraction <<= 1;
    out = sign | (127 - 14 - shift) << 23 | (fraction & 0x3FFu) << 13;
  }
  return static_cast<T>(detail::float_from_bits(out));  // float to double is exact
}

/// The float or double that BF16 bits hold, exactly: BF16 is a float's upper half.
template <typename T>
T from_bf16(std::uint16_t bits) {
  detail::check_half_source<T>();
  return static_cast<T>(detail::float_from_bits(static_cast<std::uint32_t>(bits) << 16));
}

/// `value` as F16 bits, rounded to nearest-even; a finite value of magnitude 65520 or
/// more becomes ±inf, NaN a quiet NaN.
template <typename T>
std::uint16_t to_f16(T value) {
  return detail::round_to_half(value, detail::kF16Format);
}

/// `value` as BF16 bits, rounded to nearest-even; a finite value too large becomes ±inf,
/// NaN a quiet NaN.
template <typename T>
std::uint16_t to_bf16(T value) {
  return detail::round_to_half(value, detail::kBF16Format);
}

}  // namespace heed
