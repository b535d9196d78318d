// heed/ops/cpu_features.hpp — the instruction sets heed's CPU kernels may use, found at
// run time, and a way to force each path.
//
//   heed::cpu_features().avx512_vnni               // what the kernels use now
//   heed::set_cpu_features({});                     // force the portable paths
//   HEED_CPU_FEATURES=avx512,avx512_bf16 ./prog     // the same from the environment
//
// The low-precision kernels (ops/quantized_gemm.hpp) are compiled for AVX-512 with
// __attribute__((target)), whatever the build's -march, and chosen per call from these
// flags: a build without -march=native (the sanitizers', a distribution's) still uses
// VNNI and BF16 where the CPU has them, and every path, the portable one included, runs
// on one machine by forcing it. The flags are what cpuid says the CPU has and the OS
// saves (XCR0), minus what was switched off: HEED_CPU_FEATURES (read once, at the first
// use: "native" or unset for all, "none" for none, else a comma-separated list of
// avx512, avx512_vnni, avx512_bf16) or set_cpu_features.
#pragma once

#include "heed/detail/header_begin.hpp"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <string>
#include <utility>

#include "heed/core/error.hpp"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#define HEED_X86_64 1
#else
#define HEED_X86_64 0
#endif

namespace heed {

/// What heed's CPU kernels may use. avx512: AVX-512 F, BW and VL; avx512_vnni and
/// avx512_bf16 need avx512 too.
struct CpuFeatures {
  bool avx512 = false;
  bool avx512_vnni = false;  // vpdpbusd: int8 products
  bool avx512_bf16 = false;  // vdpbf16ps: bf16 products
  bool operator==(const CpuFeatures& o) const {
    return avx512 == o.avx512 && avx512_vnni == o.avx512_vnni && avx512_bf16 == o.avx512_bf16;
  }
  bool operator!=(const CpuFeatures& o) const { return !(*this == o); }
};

inline std::string to_string(const CpuFeatures& f) {
  std::string s;
  for (auto [on, name] :
       {std::pair{f.avx512, "avx512"}, {f.avx512_vnni, "avx512_vnni"}, {f.avx512_bf16, "avx512_bf16"}})
    if (on) s += (s.empty() ? "" : ",") + std::string(name);
  return s.empty() ? "none" : s;
}

namespace detail {

inline unsigned cpu_feature_bits(const CpuFeatures& f) {
  return (f.avx512 ? 1u : 0u) | (f.avx512_vnni ? 2u : 0u) | (f.avx512_bf16 ? 4u : 0u);
}
inline CpuFeatures cpu_features_of(unsigned bits) { return {(bits & 1u) != 0, (bits & 2u) != 0, (bits & 4u) != 0}; }

/// What this CPU has and its OS saves the registers of.
inline CpuFeatures detect_cpu_features() {
  CpuFeatures f;
#if HEED_X86_64
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 27))) return f;  // OSXSAVE: xgetbv allowed
  unsigned xcr0_low = 0, xcr0_high = 0;
  __asm__("xgetbv" : "=a"(xcr0_low), "=d"(xcr0_high) : "c"(0));
  // SSE, AVX, opmask, the upper halves of zmm0-15 and zmm16-31: all saved by the OS.
  if ((xcr0_low & 0xE6u) != 0xE6u) return f;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return f;
  f.avx512 = (b & (1u << 16)) && (b & (1u << 30)) && (b & (1u << 31));  // F, BW, VL
  f.avx512_vnni = f.avx512 && (c & (1u << 11));
  if (f.avx512 && __get_cpuid_count(7, 1, &a, &b, &c, &d)) f.avx512_bf16 = (a & (1u << 5)) != 0;
#endif
  return f;
}

/// HEED_CPU_FEATURES's value as flags, within `detected`; a ValueError for a name it
/// does not know.
inline CpuFeatures parse_cpu_features(const std::string& text, const CpuFeatures& detected) {
  if (text.empty() || text == "native") return detected;
  CpuFeatures f;
  if (text == "none") return f;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t end = std::min(text.find(',', start), text.size());
    const std::string name = text.substr(start, end - start);
    if (name == "avx512")
      f.avx512 = true;
    else if (name == "avx512_vnni")
      f.avx512_vnni = true;
    else if (name == "avx512_bf16")
      f.avx512_bf16 = true;
    else
      throw ValueError("HEED_CPU_FEATURES: unknown feature '" + name +
                       "' (want native, none, or a comma-separated list of avx512, avx512_vnni, avx512_bf16), in '" +
                       text + "'");
    start = end + 1;
  }
  return {f.avx512 && detected.avx512, f.avx512_vnni && f.avx512 && detected.avx512_vnni,
          f.avx512_bf16 && f.avx512 && detected.avx512_bf16};
}

inline std::atomic<unsigned>& cpu_feature_state() {
  static std::atomic<unsigned> state{[] {
    const char* env = std::getenv("HEED_CPU_FEATURES");
    return cpu_feature_bits(parse_cpu_features(env ? env : "", detect_cpu_features()));
  }()};
  return state;
}

}  // namespace detail

/// What this CPU has (and its OS supports), whatever was forced.
inline CpuFeatures detected_cpu_features() {
  static const CpuFeatures detected = detail::detect_cpu_features();
  return detected;
}

/// What heed's CPU kernels use now.
inline CpuFeatures cpu_features() { return detail::cpu_features_of(detail::cpu_feature_state().load()); }

/// Makes heed's CPU kernels use `features` from now on (for every thread): a subset of
/// detected_cpu_features(), else a ValueError naming what the CPU lacks. Results do not
/// depend on it beyond each path's stated tolerance (the int8 paths agree bit for bit).
inline void set_cpu_features(const CpuFeatures& features) {
  const CpuFeatures have = detected_cpu_features();
  HEED_CHECK((!features.avx512 || have.avx512) && (!features.avx512_vnni || have.avx512_vnni) &&
                 (!features.avx512_bf16 || have.avx512_bf16),
             ValueError, "set_cpu_features: asked for ", to_string(features), " but this CPU has ", to_string(have));
  HEED_CHECK(features.avx512 || (!features.avx512_vnni && !features.avx512_bf16), ValueError,
             "set_cpu_features: ", to_string(features), " needs avx512 too");
  detail::cpu_feature_state().store(detail::cpu_feature_bits(features));
}

}  // namespace heed

#include "heed/detail/header_end.hpp"
