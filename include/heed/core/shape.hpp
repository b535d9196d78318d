// heed/core/shape.hpp — the shape of a tensor: rank 0 to 6, row-major.
//
//   heed::Shape s{2, 3, 4};
//   s.rank() == 3; s.numel() == 24; s[-1] == 4; heed::to_string(s) == "(2, 3, 4)"
//   s.size() == 3  // the dims counted as a container counts its items (len(x.shape))
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <ostream>
#include <string>
#include <vector>
#if __has_include(<unistd.h>)
#include <unistd.h>  // sysconf: the machine's memory
#endif

#include "heed/core/error.hpp"

namespace heed {

using index_t = std::int64_t;

class Shape {
 public:
  static constexpr int kMaxRank = 6;

  Shape() = default;
  Shape(std::initializer_list<index_t> dims) { assign(dims.begin(), dims.end()); }
  explicit Shape(const std::vector<index_t>& dims) { assign(dims.begin(), dims.end()); }

  int rank() const { return rank_; }
  /// The number of dims, rank() as a std container's size(), so that a Shape serves
  /// where a container of sizes is expected (and as Python's len(x.shape)). Not the
  /// number of elements: that is numel().
  std::size_t size() const { return static_cast<std::size_t>(rank_); }
  bool empty() const { return rank_ == 0; }

  /// Size of dimension d; negative d counts from the end.
  index_t operator[](int d) const { return dims_[d < 0 ? d + rank_ : d]; }
  index_t& operator[](int d) { return dims_[d < 0 ? d + rank_ : d]; }

  /// The number of elements. The product of the sizes other than 0 must fit in index_t,
  /// or this is a ValueError naming `op` and the shape: then every stride and every
  /// offset inside a tensor of this shape fits too, whatever the order of the dims.
  index_t numel(const char* op = "Shape") const {
    index_t n = 1;
    bool overflow = false, has_zero = false;
    for (int d = 0; d < rank_; ++d) {
      has_zero |= dims_[d] == 0;
      overflow |= __builtin_mul_overflow(n, dims_[d] == 0 ? 1 : dims_[d], &n);
    }
    if (overflow) throw_too_large(op);
    return has_zero ? 0 : n;
  }

  const index_t* begin() const { return dims_.data(); }
  const index_t* end() const { return dims_.data() + rank_; }
  std::vector<index_t> to_vector() const { return {begin(), end()}; }

  /// Row-major strides in elements.
  std::array<index_t, kMaxRank> strides() const {
    (void)numel();  // throws for sizes whose products would overflow below
    std::array<index_t, kMaxRank> s{};
    index_t step = 1;
    for (int d = rank_ - 1; d >= 0; --d) {
      s[d] = step;
      step *= dims_[d];
    }
    return s;
  }

  void push_back(index_t size) {
    HEED_CHECK(rank_ < kMaxRank, ShapeError, "Shape: rank above ", kMaxRank, " is not supported");
    dims_[rank_++] = size;
  }
  void insert(int pos, index_t size) {
    push_back(size);
    for (int d = rank_ - 1; d > pos; --d) dims_[d] = dims_[d - 1];
    dims_[pos] = size;
  }
  void erase(int pos) {
    for (int d = pos; d + 1 < rank_; ++d) dims_[d] = dims_[d + 1];
    --rank_;
  }

  friend bool operator==(const Shape& a, const Shape& b) {
    if (a.rank_ != b.rank_) return false;
    for (int d = 0; d < a.rank_; ++d)
      if (a.dims_[d] != b.dims_[d]) return false;
    return true;
  }
  friend bool operator!=(const Shape& a, const Shape& b) { return !(a == b); }

 private:
  template <typename It>
  void assign(It first, It last) {
    for (; first != last; ++first) {
      HEED_CHECK(*first >= 0, ValueError, "Shape: negative size ", *first);
      push_back(*first);
    }
  }

  [[noreturn]] void throw_too_large(const char* op) const;

  std::array<index_t, kMaxRank> dims_{};
  int rank_ = 0;
};

/// "(2, 3, 4)"; "()" for a scalar. The form used in every error message.
inline std::string to_string(const Shape& s) {
  std::string out = "(";
  for (int d = 0; d < s.rank(); ++d) out += (d ? ", " : "") + std::to_string(s[d]);
  return out + ")";
}

inline void Shape::throw_too_large(const char* op) const {
  throw ValueError(detail::concat(op, ": shape ", to_string(*this), " has more than ", INT64_MAX, " elements"));
}

/// Prints as PyTorch prints x.shape, without the module name: "Size([2, 3, 4])".
inline std::ostream& operator<<(std::ostream& os, const Shape& s) {
  os << "Size([";
  for (int d = 0; d < s.rank(); ++d) os << (d ? ", " : "") << s[d];
  return os << "])";
}

namespace detail {

/// Streams a shape as to_string writes it, "(2, 3)", but only when streamed: an error
/// message's context costs nothing until the error happens.
struct ShapeText {
  const Shape& shape;
};
inline std::ostream& operator<<(std::ostream& os, const ShapeText& s) { return os << to_string(s.shape); }

/// a * b, or a ValueError naming op when it overflows index_t; `context` is streamed
/// after the numbers to say what was being computed (only on failure: pass cheap
/// values, a ShapeText rather than a to_string). Every size heed derives from user
/// input goes through this, checked_add or Shape::numel.
template <typename... Context>
index_t checked_mul(index_t a, index_t b, const char* op, const Context&... context) {
  index_t out;
  if (__builtin_mul_overflow(a, b, &out))
    throw ValueError(concat(op, ": ", a, " * ", b, " overflows int64", context...));
  return out;
}

/// a + b, or a ValueError naming op when it overflows index_t (see checked_mul).
template <typename... Context>
index_t checked_add(index_t a, index_t b, const char* op, const Context&... context) {
  index_t out;
  if (__builtin_add_overflow(a, b, &out))
    throw ValueError(concat(op, ": ", a, " + ", b, " overflows int64", context...));
  return out;
}

/// The bytes of this machine's physical memory (0 where the system does not say).
inline std::uint64_t physical_memory_bytes() {
#if defined(_SC_PHYS_PAGES) && defined(_SC_PAGESIZE)
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  if (pages > 0 && page > 0) return static_cast<std::uint64_t>(pages) * static_cast<std::uint64_t>(page);
#endif
  return 0;
}

/// count items of item_bytes each, refused before anything is allocated when their bytes
/// overflow (ValueError) or exceed the machine's memory (OutOfMemoryError), naming op:
/// for host vectors whose length comes from an argument (a count of pieces, of steps, of
/// beams), which would otherwise ask the allocator for terabytes, or grow until the
/// system kills the process.
template <typename... Context>
void check_fits_in_memory(index_t count, std::size_t item_bytes, const char* op, const Context&... context) {
  const index_t bytes = checked_mul(count, static_cast<index_t>(item_bytes), op, context...);
  const std::uint64_t memory = physical_memory_bytes();
  if (memory > 0 && static_cast<std::uint64_t>(bytes) > memory)
    throw OutOfMemoryError(concat(op, ": ", count, " × ", item_bytes, " bytes", context...,
                                  " is more than this machine's ", memory, " bytes of memory"));
}

/// Turns a possibly negative dim into 0..rank-1, or throws IndexError naming op.
inline int normalize_dim(int dim, int rank, const char* op) {
  int r = rank == 0 ? 1 : rank;  // like PyTorch, a scalar accepts dim 0 and -1
  HEED_CHECK(dim >= -r && dim < r, IndexError, op, ": dim ", dim, " out of range for a tensor of rank ", rank,
             " (expected ", -r, " to ", r - 1, ")");
  return dim < 0 ? dim + r : dim;
}

/// Whether two shapes broadcast together (aligned at the right, sizes equal or 1).
inline bool broadcastable(const Shape& a, const Shape& b) {
  for (int d = 1; d <= a.rank() && d <= b.rank(); ++d)
    if (a[-d] != b[-d] && a[-d] != 1 && b[-d] != 1) return false;
  return true;
}

/// Broadcasts two shapes NumPy-style (align at the right; sizes equal or one of them 1).
inline Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  const int rank = a.rank() > b.rank() ? a.rank() : b.rank();
  Shape out;
  for (int d = 0; d < rank; ++d) {
    const int da = d - (rank - a.rank()), db = d - (rank - b.rank());
    const index_t sa = da >= 0 ? a[da] : 1, sb = db >= 0 ? b[db] : 1;
    HEED_CHECK(sa == sb || sa == 1 || sb == 1, ShapeError, op, ": shapes ", to_string(a), " and ", to_string(b),
               " are not broadcastable (dim ", d, ": ", sa, " vs ", sb, ")");
    out.push_back(sa == 1 ? sb : sa);
  }
  (void)out.numel(op);  // (2^40, 1) and (1, 2^40) broadcast to more elements than exist
  return out;
}

}  // namespace detail
}  // namespace heed
