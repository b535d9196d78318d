// The CPU paths of heed's low-precision kernels (heed/ops/cpu_features.hpp), each forced
// in turn: shared by the kernels' tests (unity_nn.cpp) and the op table's precision mode
// (test_op_table.cpp).
#pragma once

#include <catch2/catch.hpp>
#include <heed/ops/cpu_features.hpp>

#include <vector>

namespace heed_test {

/// Forces the kernels' features for its lifetime.
struct ForcedCpuFeatures {
  explicit ForcedCpuFeatures(const heed::CpuFeatures& f) { heed::set_cpu_features(f); }
  ~ForcedCpuFeatures() { heed::set_cpu_features(saved); }
  ForcedCpuFeatures(const ForcedCpuFeatures&) = delete;
  ForcedCpuFeatures& operator=(const ForcedCpuFeatures&) = delete;
  heed::CpuFeatures saved = heed::cpu_features();
};

/// Every set of features this CPU allows that picks a different path: the portable one
/// (none), AVX-512 alone (still portable for these kernels), with VNNI, with BF16.
inline std::vector<heed::CpuFeatures> feature_sets() {
  const heed::CpuFeatures have = heed::detected_cpu_features();
  std::vector<heed::CpuFeatures> sets{heed::CpuFeatures{}};
  if (have.avx512) sets.push_back({true, false, false});
  if (have.avx512_vnni) sets.push_back({true, true, false});
  if (have.avx512_bf16) sets.push_back({true, false, true});
  // CI's machines have both (AMD Zen 5): say so where they are missing.
  if (!have.avx512_vnni || !have.avx512_bf16)
    WARN("this CPU lacks " << (have.avx512_vnni ? "" : "avx512_vnni ") << (have.avx512_bf16 ? "" : "avx512_bf16")
                           << ": only the portable paths of those are tested");
  return sets;
}

}  // namespace heed_test
