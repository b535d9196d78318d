// heed/core/generator.hpp — the seedable source of every random number in heed.
//
// The engine is std::mt19937_64, whose output the C++ standard fixes; the
// conversions to uniform and normal numbers are written here rather than taken from
// <random>'s distributions (whose results differ between standard libraries), so a
// seed gives the same numbers with g++, clang and any platform.
//
//   heed::Generator gen(42);
//   auto w = heed::randn<float>({3, 4}, gen);
#pragma once

#include <cmath>
#include <cstdint>
#include <random>

#include "heed/core/error.hpp"

namespace heed {

class Generator {
 public:
  static constexpr std::uint64_t kDefaultSeed = 5489u;

  explicit Generator(std::uint64_t seed = kDefaultSeed) : engine_(seed), seed_(seed) {}

  void manual_seed(std::uint64_t seed) {
    engine_.seed(seed);
    seed_ = seed;
    has_spare_normal_ = false;
  }
  std::uint64_t initial_seed() const { return seed_; }

  /// 64 random bits.
  std::uint64_t next_u64() { return engine_(); }

  /// Uniform in [0, 1), 53 random bits.
  double uniform() { return static_cast<double>(engine_() >> 11) * 0x1.0p-53; }

  /// Uniform integer in [0, n), without modulo bias. n must be positive.
  std::uint64_t uniform_int(std::uint64_t n) {
    HEED_CHECK(n > 0, ValueError, "Generator::uniform_int: n must be positive, got 0");
    const std::uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    std::uint64_t x = engine_();
    while (x >= limit) x = engine_();
    return x % n;
  }

  /// Standard normal (Box–Muller, both values used).
  double normal() {
    if (has_spare_normal_) {
      has_spare_normal_ = false;
      return spare_normal_;
    }
    double u1 = uniform();
    while (u1 <= 0.0) u1 = uniform();
    const double u2 = uniform();
    const double radius = std::sqrt(-2.0 * std::log(u1));
    const double angle = 2.0 * 3.14159265358979323846 * u2;
    spare_normal_ = radius * std::sin(angle);
    has_spare_normal_ = true;
    return radius * std::cos(angle);
  }

 private:
  std::mt19937_64 engine_;
  std::uint64_t seed_;
  double spare_normal_ = 0.0;
  bool has_spare_normal_ = false;
};

/// The generator used where none is passed (module initialisation, dropout). One per
/// thread, so threads never race on it; seed it with default_generator().manual_seed(s).
inline Generator& default_generator() {
  thread_local Generator gen;
  return gen;
}

/// Seeds this thread's default generator, as torch.manual_seed.
inline void manual_seed(std::uint64_t seed) { default_generator().manual_seed(seed); }

}  // namespace heed
