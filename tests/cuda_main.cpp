// main() of heed_cuda_tests: runs the CUDA tests, or skips them (exit code 77, which
// CTest reports as skipped) where no CUDA device is present.
//
// Catch's own implementation is compiled here, apart from the tests: under the
// sanitizers GCC 12 warns (-Wmaybe-uninitialized, a false positive inside libstdc++'s
// std::regex, which Catch uses) and heed's tests build with warnings as errors.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>
#include <heed/core/backend.hpp>

#include <iostream>

int main(int argc, char** argv) {
  const int devices = heed::cuda_device_count();
  if (devices == 0) {
    std::cout << "heed_cuda_tests: no CUDA device (or no driver) on this machine: every CUDA test is skipped. "
                 "The backend was built and linked; run these tests on a machine with a GPU.\n";
    return 77;
  }
  std::cout << "heed_cuda_tests: " << devices << " CUDA device(s)\n";
  return Catch::Session().run(argc, argv);
}
