// heed/io/base64.hpp: RFC 4648's test vectors, every byte value, and bad text refused.
#include <heed/io/base64.hpp>

#include <string>
#include <utility>
#include <vector>

#include "io_common.hpp"

TEST_CASE("base64 encodes RFC 4648's test vectors and decodes them back", "[io][base64]") {
  const std::vector<std::pair<std::string, std::string>> vectors = {{"", ""},
                                                                    {"f", "Zg=="},
                                                                    {"fo", "Zm8="},
                                                                    {"foo", "Zm9v"},
                                                                    {"foob", "Zm9vYg=="},
                                                                    {"fooba", "Zm9vYmE="},
                                                                    {"foobar", "Zm9vYmFy"}};
  for (const auto& [bytes, text] : vectors) {
    CHECK(heed::base64_encode(bytes) == text);
    CHECK(heed::base64_decode(text, "test") == bytes);
  }
  std::string all;
  for (int b = 0; b < 256; ++b) all += static_cast<char>(b);
  for (std::size_t n = 250; n <= 256; ++n)
    CHECK(heed::base64_decode(heed::base64_encode(all.substr(0, n)), "t") == all.substr(0, n));
}

TEST_CASE("base64_decode refuses what is not base64, naming the source", "[io][base64][errors]") {
  CHECK_ERROR(heed::FileError, "m.safetensors: heed.spm: not base64: 5 characters, not a multiple of 4",
              heed::base64_decode("Zm9vY", "m.safetensors: heed.spm"));
  CHECK_ERROR(heed::FileError, "x: not base64: character 2 is '!'", heed::base64_decode("Zm!v", "x"));
  CHECK_ERROR(heed::FileError, "x: not base64: character 1 is '='", heed::base64_decode("Z===", "x"));
  CHECK_ERROR(heed::FileError, "x: not base64: character 2 is '='", heed::base64_decode("Zm=vZm9v", "x"));
  CHECK_ERROR(heed::FileError, "x: not base64: character 0 is '\n'", heed::base64_decode("\nZm9", "x"));
}
