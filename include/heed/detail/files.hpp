// heed/detail/files.hpp — what every reader checks before it opens a file.
#pragma once

#include <filesystem>
#include <string>
#include <system_error>

#include "heed/core/error.hpp"

namespace heed::detail {

/// "a directory", "a FIFO (named pipe)", …: what a path is, for an error message.
inline const char* file_kind(std::filesystem::file_type type) {
  switch (type) {
    case std::filesystem::file_type::directory:
      return "a directory";
    case std::filesystem::file_type::fifo:
      return "a FIFO (named pipe)";
    case std::filesystem::file_type::socket:
      return "a socket";
    case std::filesystem::file_type::character:
      return "a character device";
    case std::filesystem::file_type::block:
      return "a block device";
    default:
      return "not a regular file";
  }
}

/// Throws FileError "<op>: <path> is a FIFO (named pipe), not a regular file" unless
/// path is a regular file (after symlinks) or does not exist (the reader's open then
/// says so): a directory cannot be read, and opening a FIFO with no writer, a terminal
/// or a socket would block the reader forever.
inline void check_regular_file(const char* op, const std::string& path) {
  std::error_code error;
  const std::filesystem::file_type type = std::filesystem::status(path, error).type();
  if (error || type == std::filesystem::file_type::regular || type == std::filesystem::file_type::not_found) return;
  throw FileError(concat(op, ": ", path, " is ", file_kind(type), ", not a regular file"));
}

}  // namespace heed::detail
