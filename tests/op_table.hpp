// One table of heed's ops, in the manner of ggml's test-backend-ops and PyTorch's
// OpInfo: each entry names an op, the cases to run it on (input shapes, several per
// op, with 0-sized and broadcast shapes where the op allows them, and the integer
// arguments and index tensors it reads), how its inputs are drawn, the op itself as a
// generic lambda (run in float and in double), a reference (naive loops in double, or
// a composition of simpler ops), tolerances, what a device does with it (and cases for
// the device alone), the arguments it refuses, PyTorch's golden values and, for an op
// with bf16 and int8 paths, their tolerances against fp32.
// tests/test_op_table.cpp runs every entry in every mode: forward against the
// reference, gradcheck in double, float against double, each device against the CPU,
// 1 thread against 3, each input left undefined (the error must name the op), its
// error cases, its golden values and each low-precision path on every CPU path this
// machine can force; and checks that every op heed::compiled
// instantiates has an entry.
//
// The table is in six headers: this one (what an entry is, how inputs are drawn),
// op_table_references.hpp (the references, naive loops in double), the entries,
// op_table_math.hpp (element-wise, reductions, products, softmax, layer_norm,
// dropout) and op_table_shapes.hpp (lookups, recurrences, losses, attention, shape
// ops, and table()), and what is attached to entries by name: op_table_errors.hpp
// (error cases) and op_table_goldens.hpp (PyTorch's values). Adding an op is adding
// one entry to one of those lists:
//
//   entry("exp", op([](const auto& x, const Case&) { return heed::exp(x[0]); }), unary_cases())
//       .reference(unary_ref([](double v) { return std::exp(v); }))
//       .large({Case{{Shape{3, 32768}}}}),
#pragma once

#include <catch2/catch.hpp>
#include <heed/heed.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace heed_test::op_table {

using heed::index_t;
using heed::IndexTensor;
using heed::Shape;
using heed::Tensor;
using heed::Tensord;

template <typename T>
using Inputs = std::vector<Tensor<T>>;

/// What the CUDA backend does with the op: runs forward and backward; runs forward only
/// (backward throws DeviceError); has no implementation (forward throws DeviceError);
/// or, for an empty input of an op without one, returns an empty tensor on the CPU
/// (the op never reads the input). entry: as the case's entry says.
enum class DeviceSupport { full, forward_only, none, empty_on_cpu, entry };

/// One way to run an op: the shapes of its floating-point inputs, the integers it
/// reads (dims, sizes, flags; their meaning is the entry's), an index tensor (indices,
/// labels, valid lengths or a 0/1 mask), a floating-point scalar, and, where a case
/// differs from its entry, what the CUDA backend does with it.
struct Case {
  std::vector<Shape> shapes;
  std::vector<std::int64_t> args = {};
  IndexTensor index = {};
  double scalar = 0.0;
  DeviceSupport device = DeviceSupport::entry;
};

/// How an input's values are drawn: uniform in [low, high), then, with
/// away_from_zero, every other one negated (so |x| >= low > 0), or with integers,
/// rounded (so that comparisons see ties).
struct Domain {
  double low = -1.0, high = 1.0;
  bool away_from_zero = false, integers = false;
};

/// An argument the op must refuse: the call (its inputs written out in it), the
/// heed::Error subclass it throws, and its message: the whole message where `whole`,
/// otherwise a fragment of it. The table checks each: a heed::Error is thrown, of that
/// type, with that message.
struct ErrorCase {
  std::string type_name;
  std::function<bool(const heed::Error&)> is_type;
  std::string message;
  bool whole;
  std::function<void()> call;
};

/// The heed::Error subclass's name, for the report.
template <typename E>
std::string error_name() {
  if constexpr (std::is_same_v<E, heed::ShapeError>) return "ShapeError";
  if constexpr (std::is_same_v<E, heed::IndexError>) return "IndexError";
  if constexpr (std::is_same_v<E, heed::ValueError>) return "ValueError";
  if constexpr (std::is_same_v<E, heed::DeviceError>) return "DeviceError";
  if constexpr (std::is_same_v<E, heed::AutogradError>) return "AutogradError";
  if constexpr (std::is_same_v<E, heed::OutOfMemoryError>) return "OutOfMemoryError";
  return "Error";
}

/// error<heed::ShapeError>("bmm: batch sizes differ", [] { heed::bmm(a, b); }).
template <typename E, typename F>
ErrorCase error(std::string message, F call, bool whole = false) {
  static_assert(std::is_base_of_v<heed::Error, E>, "an op's errors are heed::Error subclasses");
  return ErrorCase{error_name<E>(),
                   [](const heed::Error& e) {
                     if constexpr (std::is_same_v<E, heed::Error>)
                       return true;  // any heed::Error
                     else
                       return dynamic_cast<const E*>(&e) != nullptr;
                   },
                   std::move(message), whole, [call]() mutable { (void)call(); }};
}

/// The same, with the whole message.
template <typename E, typename F>
ErrorCase error_exactly(std::string message, F call) {
  return error<E>(std::move(message), std::move(call), true);
}

template <typename T>
class GoldenCase;  // tests/op_table_goldens.hpp

/// PyTorch's values for the op: a case of tests/data/ops_golden.txt by name, and what
/// to run on it (GoldenCase: its inputs, the checks of the output and the gradients),
/// in float and in double.
struct GoldenValues {
  std::string name;
  std::function<void(GoldenCase<float>&)> f;
  std::function<void(GoldenCase<double>&)> d;
};

/// golden_case("sum_02", [](auto& c) { c.check(heed::sum(c.in("x"), {0, 2})); }).
template <typename F>
GoldenValues golden_case(std::string name, F f) {
  return GoldenValues{std::move(name), f, f};
}

template <typename T>
using Fn = std::function<Tensor<T>(const Inputs<T>&, const Case&)>;
using Reference = std::function<Tensord(const Inputs<double>&, const Case&)>;
/// Checks (with Catch assertions) what a reference cannot say: dropout's output.
using Property = std::function<void(const Inputs<double>&, const Case&, const Tensord&)>;

struct Op {
  Fn<float> f;
  Fn<double> d;
  template <typename T>
  const Fn<T>& get() const {
    if constexpr (std::is_same_v<T, float>)
      return f;
    else
      return d;
  }
};

/// The op as one generic lambda (const Inputs<T>&, const Case&) -> Tensor<T>.
template <typename F>
Op op(F f) {
  return Op{Fn<float>(f), Fn<double>(f)};
}

struct Entry {
  std::string name;
  Op fn;
  std::vector<Case> cases;
  std::vector<Domain> domains = {Domain{}};  // per input; the last one repeats
  Reference ref;
  Property prop;
  double tol = 1e-12;       // double against the reference, relative to the largest value
  double float_tol = 2e-5;  // float against double, likewise
  heed::GradcheckOptions grad = {};
  bool differentiable = true;
  DeviceSupport device = DeviceSupport::full;
  std::vector<Case> large_cases = {};  // big enough to split across threads; threads mode only
  // Cases that reach a device's other kernels (a softmax row of 1500 keys, a reduction
  // of 4000 elements, every mask form); device mode only, where they cost little.
  std::vector<Case> device_cases = {};
  std::vector<ErrorCase> error_cases = {};  // arguments the op refuses
  std::vector<GoldenValues> goldens = {};   // PyTorch's values
  // The op's bf16 and int8 paths (inside a PackedWeightsGuard of that precision) with
  // their tolerance against fp32, relative to the largest value; none for most ops.
  std::vector<std::pair<heed::Precision, double>> precisions = {};
  // Under an AutocastGuard of bf16 (mixed-precision training): the tolerance of its large
  // cases against fp32, forward and backward, relative to the largest value; 0: the op
  // has no products that the guard reaches.
  double autocast_tol = 0.0;

  Entry&& reference(Reference r) && { return ref = std::move(r), std::move(*this); }
  Entry&& property(Property p) && { return prop = std::move(p), std::move(*this); }
  Entry&& inputs(std::vector<Domain> d) && { return domains = std::move(d), std::move(*this); }
  Entry&& tolerance(double t) && { return tol = t, std::move(*this); }
  Entry&& float_tolerance(double t) && { return float_tol = t, std::move(*this); }
  Entry&& gradcheck(double atol, double rtol) && {
    grad.atol = atol, grad.rtol = rtol;
    return std::move(*this);
  }
  Entry&& not_differentiable() && { return differentiable = false, std::move(*this); }
  Entry&& on_device(DeviceSupport s) && { return device = s, std::move(*this); }
  Entry&& large(std::vector<Case> c) && { return large_cases = std::move(c), std::move(*this); }
  Entry&& on_device_also(std::vector<Case> c) && { return device_cases = std::move(c), std::move(*this); }
  Entry&& errors(std::vector<ErrorCase> c) && { return error_cases = std::move(c), std::move(*this); }
  Entry&& low_precision(std::vector<std::pair<heed::Precision, double>> p) && {
    return precisions = std::move(p), std::move(*this);
  }
  Entry&& autocast(double t) && { return autocast_tol = t, std::move(*this); }

  const Domain& domain(std::size_t input) const { return domains[std::min(input, domains.size() - 1)]; }
};

inline Entry entry(std::string name, Op fn, std::vector<Case> cases) {
  Entry e;
  e.name = std::move(name);
  e.fn = std::move(fn);
  e.cases = std::move(cases);
  return e;
}

// ---- inputs ------------------------------------------------------------------------------

/// The inputs of one case, drawn in double and rounded to float, so that the float and
/// double runs see the same values.
inline Inputs<double> make_inputs(const Entry& e, const Case& c, std::uint64_t seed) {
  Inputs<double> inputs;
  for (std::size_t i = 0; i < c.shapes.size(); ++i) {
    const Domain& d = e.domain(i);
    heed::Generator gen(seed * 1000 + i);
    std::vector<double> v = heed::uniform<double>(c.shapes[i], d.low, d.high, gen).to_vector();
    for (std::size_t j = 0; j < v.size(); ++j) {
      if (d.integers) v[j] = std::round(v[j]);
      if (d.away_from_zero && j % 2 == 1) v[j] = -v[j];
      v[j] = static_cast<double>(static_cast<float>(v[j]));
    }
    inputs.emplace_back(v, c.shapes[i]);
  }
  return inputs;
}

template <typename T>
Inputs<T> cast_inputs(const Inputs<double>& in) {
  Inputs<T> out;
  for (const Tensord& x : in) out.push_back(x.to<T>());
  return out;
}

/// The case's index tensor on the device of the op's first input (for device runs).
template <typename T>
IndexTensor index_on(const Case& c, const Inputs<T>& x) {
  // The CPU when x[0] is left undefined (the undefined-input mode): the op names it.
  return c.index.defined() && x[0].defined() ? c.index.to(x[0].device()) : c.index;
}

/// The case's index as a mask (nonzero is true) on the device of the op's first input
/// (as index_on), made there by a comparison of x's element type.
template <typename T>
heed::Tensor<bool> index_mask(const Case& c, const Inputs<T>& x) {
  const Tensor<T> values = c.index.to<T>();
  return heed::ne(x[0].defined() ? values.to(x[0].device()) : values, T(0));
}

inline Shape shape_of(const std::vector<std::int64_t>& sizes, std::size_t from = 0) {
  Shape s;
  for (std::size_t i = from; i < sizes.size(); ++i) s.push_back(sizes[i]);
  return s;
}

/// The last k dims of s.
inline Shape tail(const Shape& s, std::int64_t k) {
  Shape out;
  for (int d = s.rank() - static_cast<int>(k); d < s.rank(); ++d) out.push_back(s[d]);
  return out;
}

}  // namespace heed_test::op_table
