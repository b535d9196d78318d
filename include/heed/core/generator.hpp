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
#include <cstring>
#include <random>
#include <sstream>
#include <string>

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

  /// Everything the next draws depend on, as text (torch.Generator.get_state's role):
  /// set_state(get_state()) on any generator makes it draw what this one would.
  std::string get_state() const {
    std::ostringstream out;
    std::uint64_t spare_bits = 0;
    std::memcpy(&spare_bits, &spare_normal_, sizeof spare_bits);
    out << kStateTag << ' ' << seed_ << ' ' << (has_spare_normal_ ? 1 : 0) << ' ' << spare_bits << ' ' << engine_;
    return out.str();
  }

  /// Restores a state from get_state(). Text that is not one throws ValueError and
  /// leaves the generator as it was.
  void set_state(const std::string& state) {
    std::istringstream in(state);
    std::string tag;
    std::uint64_t seed = 0, spare_bits = 0;
    int has_spare = -1;
    std::mt19937_64 engine;
    in >> tag >> seed >> has_spare >> spare_bits >> engine;
    HEED_CHECK(tag == kStateTag, ValueError, "Generator::set_state: not a generator state (it should begin with '",
               kStateTag, "', got '", tag.substr(0, 32), "')");
    HEED_CHECK(!in.fail() && (has_spare == 0 || has_spare == 1) && (in >> std::ws).eof(), ValueError,
               "Generator::set_state: a damaged state (", state.size(), " characters)");
    engine_ = engine;
    seed_ = seed;
    has_spare_normal_ = has_spare == 1;
    std::memcpy(&spare_normal_, &spare_bits, sizeof spare_bits);
  }

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
  static constexpr const char* kStateTag = "heed.mt19937_64";
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
