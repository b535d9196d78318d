// heed/core/error.hpp — the exceptions heed throws.
//
// Every public function validates its arguments in every build type and throws a
// subclass of heed::Error whose message names the operation and the offending
// shapes or values, e.g. "bmm: batch sizes differ: (2, 3, 4) vs (3, 4, 5)".
//
//   try { heed::bmm(a, b); } catch (const heed::ShapeError& e) { std::cerr << e.what(); }
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace heed {

/// Base of every exception heed throws.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

/// Shapes that do not fit the operation (mismatched, not broadcastable, wrong rank).
class ShapeError : public Error {
 public:
  using Error::Error;
};

/// A dimension or element index out of range.
class IndexError : public Error {
 public:
  using Error::Error;
};

/// An argument whose value is invalid (negative size, bad probability, ragged list, …).
class ValueError : public Error {
 public:
  using Error::Error;
};

/// A file that cannot be read or written, or whose contents are malformed (a dataset
/// line without a tab, a corrupt checkpoint). The message names the file and the line
/// or field.
class FileError : public Error {
 public:
  using Error::Error;
};

/// Misuse of the autograd engine (backward on a non-scalar, a freed graph, …).
class AutogradError : public Error {
 public:
  using Error::Error;
};

/// A tensor on the wrong device: operands on different devices, an op without an
/// implementation for the device its inputs are on, or CUDA asked of a build without it.
class DeviceError : public Error {
 public:
  using Error::Error;
};

/// An allocation the system refused (std::bad_alloc, or a null aligned_alloc); the
/// message names the operation and the bytes asked for. A size too large to allocate at
/// all (its bytes overflow) is a ValueError instead.
class OutOfMemoryError : public Error {
 public:
  using Error::Error;
};

/// A failed call into the CUDA runtime or cuBLAS; the message names the call and the
/// error code ("cudaMalloc(1073741824 bytes) on cuda:0: cudaErrorMemoryAllocation ...").
class CudaError : public Error {
 public:
  using Error::Error;
};

/// A failed call into the library that carries data-parallel training between processes
/// (MPI); the message names the call, the rank and the library's own error text.
class CommunicationError : public Error {
 public:
  using Error::Error;
};

namespace detail {

/// Streams every argument into one string: concat("sum: dim ", 3, " out of range").
template <typename... Args>
std::string concat(Args&&... args) {
  std::ostringstream out;
  (out << ... << std::forward<Args>(args));
  return out.str();
}

}  // namespace detail
}  // namespace heed

/// Throws ErrorType(concat(message...)) unless cond holds. The message is only built
/// on failure, so checks cost a branch on the hot path. Active in release builds too.
#define HEED_CHECK(cond, ErrorType, ...)                               \
  do {                                                                 \
    if (!(cond)) throw ErrorType(::heed::detail::concat(__VA_ARGS__)); \
  } while (false)
