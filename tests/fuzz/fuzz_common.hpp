// tests/fuzz/fuzz_common.hpp — what the fuzz targets share: a per-process file that holds
// the current input (heed's readers take paths, not buffers) and a loud abort for a
// broken property.
#pragma once

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <system_error>

namespace heed_fuzz {

/// Prints why and aborts, so that libFuzzer records the input as a crash: the target
/// found an outcome that is neither a result nor a heed::Error.
[[noreturn]] inline void fail(const std::string& why) {
  std::fprintf(stderr, "heed fuzz property violated: %s\n", why.c_str());
  std::abort();
}

/// A file named after the target and the process (so that -jobs/-fork workers and
/// concurrent targets never share one), in /dev/shm when there is one: the readers
/// re-open it on every input and tmpfs keeps that off the disk. Removed at exit.
class InputFile {
 public:
  explicit InputFile(const std::string& tag, const std::string& suffix = "") {
    std::error_code ec;
    const std::filesystem::path dir = std::filesystem::is_directory("/dev/shm", ec)
                                          ? std::filesystem::path("/dev/shm")
                                          : std::filesystem::temp_directory_path();
    path_ = (dir / ("heed_fuzz_" + tag + "_" + std::to_string(static_cast<long>(getpid())) + suffix)).string();
  }
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;
  ~InputFile() { std::remove(path_.c_str()); }

  /// Replaces the file's contents with the bytes; returns its path.
  const std::string& write(const std::uint8_t* data, std::size_t size) const {
    std::FILE* file = std::fopen(path_.c_str(), "wb");
    if (file == nullptr) fail("cannot create " + path_);
    const bool written = size == 0 || std::fwrite(data, 1, size, file) == size;
    if (std::fclose(file) != 0 || !written) fail("cannot write " + path_);
    return path_;
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace heed_fuzz
