// heed/core/factory.hpp — making tensors.
//
//   auto a = heed::zeros({2, 3});                    // Tensor<float>
//   auto b = heed::ones<double>({4});
//   auto c = heed::arange(0, 1, 0.25);               // [0, 0.25, 0.5, 0.75], float
//   auto d = heed::tensor<float>({{1, 2}, {3, 4}});  // nested lists, shape (2, 2)
//   auto e = heed::Tensor<float>({1, 2, 3, 4, 5, 6}, {2, 3});
//   heed::Generator gen(0);
//   auto f = heed::randn<float>({3, 3}, gen);
//
// Random tensors take an explicit heed::Generator; the same seed gives the same
// numbers on every compiler and platform.
#pragma once

#include "heed/detail/header_begin.hpp"

#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <type_traits>
#include <utility>
#include <vector>

#include "heed/core/generator.hpp"
#include "heed/core/tensor.hpp"

namespace heed {

namespace detail {

/// full, zeros, ones and eye: `op` names the caller in errors.
template <typename T>
Tensor<T> filled(const Shape& shape, T value, Device device, const char* op) {
  check_device_usable(device, op);
  Tensor<T> out = make_tensor<T>(shape, device, op);
  if (!device.is_cpu()) {
    device_fill(device, detail::device_data(out), out.numel(), value);
    return out;
  }
  out.array().setConstant(value);
  return out;
}

/// A fresh copy of x's elements on x's device, not recorded.
template <typename T>
Tensor<T> copy_of(const Tensor<T>& x) {
  Tensor<T> out = make_tensor<T>(x.shape(), x.device());
  const auto n = static_cast<std::size_t>(x.numel());
  if (x.is_cpu())
    std::copy(x.data(), x.data() + n, out.data());
  else
    device_copy(x.device(), device_data(out), device_data(x), n * sizeof(T));
  return out;
}

}  // namespace detail

/// A tensor of `value`s, on `device` (the CPU unless given), as torch.full.
template <typename T = float>
Tensor<T> full(const Shape& shape, T value, Device device = Device::cpu()) {
  return detail::filled<T>(shape, value, device, "full");
}

template <typename T = float>
Tensor<T> zeros(const Shape& shape, Device device = Device::cpu()) {
  return detail::filled<T>(shape, T(0), device, "zeros");
}

template <typename T = float>
Tensor<T> ones(const Shape& shape, Device device = Device::cpu()) {
  return detail::filled<T>(shape, T(1), device, "ones");
}

/// Like x: its shape, and its device.
template <typename T>
Tensor<T> zeros_like(const Tensor<T>& x) {
  return zeros<T>(x.shape(), x.device());
}

template <typename T>
Tensor<T> ones_like(const Tensor<T>& x) {
  return ones<T>(x.shape(), x.device());
}

template <typename T>
Tensor<T> full_like(const Tensor<T>& x, T value) {
  return full<T>(x.shape(), value, x.device());
}

/// start, start + step, … up to (not including) end, as torch.arange. The bounds are
/// doubles, as PyTorch's are, so arange<float>(0, 0.3, 0.1) has 3 elements.
template <typename T = float>
Tensor<T> arange(double start, double end, double step = 1.0) {
  HEED_CHECK(std::isfinite(start) && std::isfinite(end) && std::isfinite(step), ValueError,
             "arange: start, end and step must be finite, got ", start, ", ", end, " and ", step);
  HEED_CHECK(step != 0.0, ValueError, "arange: step must be nonzero");
  HEED_CHECK((end - start) * step >= 0.0, ValueError, "arange: step ", step, " does not lead from ", start, " to ",
             end);
  // In double, as the bounds are; 2^63 is exact, and an inf (end - start overflowing) or
  // a count at or above it does not fit in index_t.
  const double steps = std::ceil((end - start) / step);
  HEED_CHECK(steps < 9.223372036854775808e18, ValueError, "arange: ", start, " to ", end, " by ", step, " gives ",
             steps, " elements, more than ", INT64_MAX);
  const auto count = static_cast<index_t>(steps);
  Tensor<T> out = detail::make_tensor<T>(Shape{count}, Device::cpu(), "arange");
  if (count == 0) return out;
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    // The values run monotonically from the first to the last: both must convert.
    const double ends[] = {start, start + static_cast<double>(count - 1) * step};
    const index_t bad = detail::first_unconvertible<T>(ends, 2);
    HEED_CHECK(bad < 0, ValueError, "arange: value ", ends[bad], " at flat index ", bad == 0 ? 0 : count - 1,
               " does not fit in ", detail::dtype_name<T>());
  }
  for (index_t i = 0; i < count; ++i) out.data()[i] = static_cast<T>(start + static_cast<double>(i) * step);
  return out;
}

/// 0, 1, …, end - 1.
template <typename T = float>
Tensor<T> arange(double end) {
  return arange<T>(0.0, end, 1.0);
}

/// The n × m identity (m defaults to n).
template <typename T = float>
Tensor<T> eye(index_t n, index_t m = -1) {
  HEED_CHECK(n >= 0, ValueError, "eye: negative size ", n);
  HEED_CHECK(m >= -1, ValueError, "eye: negative size ", m);  // -1 (the default) means m = n
  if (m < 0) m = n;
  Tensor<T> out = detail::filled<T>(Shape{n, m}, T(0), Device::cpu(), "eye");
  for (index_t i = 0; i < std::min(n, m); ++i) out.data()[i * m + i] = T(1);
  return out;
}

// ---- nested initializer lists --------------------------------------------------------------

/// A value or a braced list of NestedLists: what tensor() accepts. Every pair of
/// braces is one dim, so {{1}, {2}} is 2 × 1 and a bare value is a rank-0 tensor.
template <typename T>
class NestedList {
 public:
  NestedList(T value) : value_(value), is_value_(true) {}  // NOLINT: implicit by design
  NestedList(std::initializer_list<NestedList> items) : items_(items) {}
  explicit NestedList(std::vector<NestedList> items) : items_(std::move(items)) {}

  /// The shape, read down the first items; flatten() then checks every item against it.
  Shape shape() const {
    Shape shape;
    for (const NestedList* node = this; !node->is_value_; node = &node->items_.front()) {
      shape.push_back(static_cast<index_t>(node->items_.size()));
      if (node->items_.empty()) break;
    }
    return shape;
  }

  /// Appends the values row-major; ragged lists (siblings of different lengths, or a
  /// value where a list belongs) are a ValueError.
  void flatten(const Shape& shape, int depth, std::vector<T>& values) const {
    if (depth == shape.rank()) {
      HEED_CHECK(is_value_, ValueError, "tensor: ragged nested list: a list at depth ", depth, " where values belong");
      values.push_back(value_);
      return;
    }
    HEED_CHECK(!is_value_ && static_cast<index_t>(items_.size()) == shape[depth], ValueError,
               "tensor: ragged nested list: expected ", shape[depth], " items at depth ", depth, ", got ",
               is_value_ ? std::string("a value") : std::to_string(items_.size()));
    for (const NestedList& item : items_) item.flatten(shape, depth + 1, values);
  }

 private:
  std::vector<NestedList> items_;
  T value_{};
  bool is_value_ = false;
};

/// A tensor from a nested list: tensor<float>({{1, 2}, {3, 4}}) is 2 × 2,
/// tensor<float>({{1}, {2}}) is 2 × 1, tensor<float>(2.5f) is rank 0.
template <typename T = float>
Tensor<T> tensor(const NestedList<T>& values) {
  const Shape shape = values.shape();
  std::vector<T> flat;
  values.flatten(shape, 0, flat);
  return Tensor<T>(flat, shape);
}

/// Integer lists make int64 tensors, as torch.tensor([1, 2]) does: tensor({1, 2}),
/// tensor({{1, 2}, {3, 4}}). (A list with a decimal point makes floats, as above.)
template <typename I, std::enable_if_t<std::is_integral_v<I> && !std::is_same_v<I, bool>, int> = 0>
Tensor<std::int64_t> tensor(std::initializer_list<I> values) {
  return tensor<std::int64_t>(
      NestedList<std::int64_t>(std::vector<NestedList<std::int64_t>>(values.begin(), values.end())));
}
template <typename I, std::enable_if_t<std::is_integral_v<I> && !std::is_same_v<I, bool>, int> = 0>
Tensor<std::int64_t> tensor(std::initializer_list<std::initializer_list<I>> rows) {
  std::vector<NestedList<std::int64_t>> items;
  for (const auto& row : rows) items.emplace_back(std::vector<NestedList<std::int64_t>>(row.begin(), row.end()));
  return tensor<std::int64_t>(NestedList<std::int64_t>(std::move(items)));
}
template <typename I, std::enable_if_t<std::is_integral_v<I> && !std::is_same_v<I, bool>, int> = 0>
Tensor<std::int64_t> tensor(std::initializer_list<std::initializer_list<std::initializer_list<I>>> blocks) {
  std::vector<NestedList<std::int64_t>> items;
  for (const auto& block : blocks) {
    std::vector<NestedList<std::int64_t>> rows;
    for (const auto& row : block) rows.emplace_back(std::vector<NestedList<std::int64_t>>(row.begin(), row.end()));
    items.emplace_back(std::move(rows));
  }
  return tensor<std::int64_t>(NestedList<std::int64_t>(std::move(items)));
}

/// A rank-0 tensor holding one value.
template <typename T = float>
Tensor<T> scalar_tensor(T value) {
  return Tensor<T>(std::vector<T>{value}, Shape{});
}

// ---- random ---------------------------------------------------------------------------------

/// Uniform in [low, high).
template <typename T = float>
Tensor<T> uniform(const Shape& shape, T low, T high, Generator& gen = default_generator()) {
  HEED_CHECK(low <= high, ValueError, "uniform: low ", low, " above high ", high);
  Tensor<T> out = detail::make_tensor<T>(shape, Device::cpu(), "uniform");
  for (index_t i = 0, n = out.numel(); i < n; ++i) {
    const T value = static_cast<T>(low + (high - low) * gen.uniform());
    // Rounding to a float can land on high itself; the range is half-open.
    out.data()[i] = value < high || low == high ? value : std::nextafter(high, low);
  }
  return out;
}

/// Uniform in [0, 1).
template <typename T = float>
Tensor<T> rand(const Shape& shape, Generator& gen = default_generator()) {
  return uniform<T>(shape, T(0), T(1), gen);
}

/// Normal with the given mean and standard deviation.
template <typename T = float>
Tensor<T> normal(T mean, T std, const Shape& shape, Generator& gen = default_generator()) {
  HEED_CHECK(std >= T(0), ValueError, "normal: std must be non-negative, got ", std);
  Tensor<T> out = detail::make_tensor<T>(shape, Device::cpu(), "normal");
  for (index_t i = 0, n = out.numel(); i < n; ++i) out.data()[i] = static_cast<T>(mean + std * gen.normal());
  return out;
}

namespace detail {

/// Whether Linear and Embedding built on this thread leave their weights uninitialised
/// instead of drawing them: for a net whose every parameter is loaded next (PyTorch's
/// skip_init, transformers' no_init_weights). Set by SkipInitGuard.
inline bool& skips_init() {
  thread_local bool skip = false;
  return skip;
}

/// Sets skips_init on this thread for its lifetime.
class SkipInitGuard {
 public:
  SkipInitGuard() : saved_(skips_init()) { skips_init() = true; }
  ~SkipInitGuard() { skips_init() = saved_; }
  SkipInitGuard(const SkipInitGuard&) = delete;
  SkipInitGuard& operator=(const SkipInitGuard&) = delete;

 private:
  bool saved_;
};

}  // namespace detail

/// Standard normal.
template <typename T = float>
Tensor<T> randn(const Shape& shape, Generator& gen = default_generator()) {
  return normal<T>(T(0), T(1), shape, gen);
}

/// Integers uniform in [low, high).
inline Tensor<std::int64_t> randint(std::int64_t low, std::int64_t high, const Shape& shape,
                                    Generator& gen = default_generator()) {
  HEED_CHECK(low < high, ValueError, "randint: empty range [", low, ", ", high, ")");
  Tensor<std::int64_t> out = detail::make_tensor<std::int64_t>(shape, Device::cpu(), "randint");
  // In unsigned arithmetic, which wraps instead of overflowing: high - low reaches
  // 2^64 - 1 for the full int64 range, and low + offset lands back inside [low, high).
  const std::uint64_t base = static_cast<std::uint64_t>(low), span = static_cast<std::uint64_t>(high) - base;
  for (index_t i = 0, n = out.numel(); i < n; ++i)
    out.data()[i] = static_cast<std::int64_t>(base + gen.uniform_int(span));
  return out;
}

/// A random permutation of 0, 1, …, n - 1, as torch.randperm (int64, shape (n)): the
/// same seed gives the same permutation, though not PyTorch's. Fisher–Yates from the
/// end, one uniform_int(i) per i from n down to 2: NmtDataLoader shuffles each epoch
/// with the same draws, so a seed orders both alike.
inline Tensor<std::int64_t> randperm(std::int64_t n, Generator& gen = default_generator()) {
  HEED_CHECK(n >= 0, ValueError, "randperm: n must be non-negative, got ", n);
  Tensor<std::int64_t> out = detail::make_tensor<std::int64_t>(Shape{n}, Device::cpu(), "randperm");
  std::int64_t* p = out.data();
  for (std::int64_t i = 0; i < n; ++i) p[i] = i;
  for (std::int64_t i = n; i > 1; --i) std::swap(p[i - 1], p[gen.uniform_int(static_cast<std::uint64_t>(i))]);
  return out;
}

}  // namespace heed

#include "heed/detail/header_end.hpp"
