// Fuzz target: heed::Device's string constructor ("cpu", "cuda", "cuda:N"). A heed::Error
// is the expected answer to any other string (std::stoi's own exceptions are findings);
// a device that parses must print as a string that parses back to it.
#include "fuzz_common.hpp"

#include <heed/core/device.hpp>
#include <heed/core/error.hpp>

#include <cstddef>
#include <cstdint>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string spec(reinterpret_cast<const char*>(data), size);
  heed::Device device;
  try {
    device = heed::Device(spec);
  } catch (const heed::Error&) {
    return 0;
  }
  if (device.index() < 0 || (device.is_cpu() && device.index() != 0)) heed_fuzz::fail("Device: bad index");
  const std::string printed = heed::to_string(device);
  try {
    if (heed::Device(printed) != device) heed_fuzz::fail("Device: \"" + printed + "\" parses to another device");
  } catch (const heed::Error& e) {
    heed_fuzz::fail("Device: its own name \"" + printed + "\" does not parse: " + e.what());
  }
  return 0;
}
