// Every entry of the op table (tests/op_table.hpp) in every mode: forward against the
// reference, gradcheck in double, float against double, each device against the CPU,
// 1 thread against 3, and each input left undefined.
#include "op_table_shapes.hpp"

#include "check.hpp"

#include <cmath>
#include <cstdint>
#include <functional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#ifdef _OPENMP
#include <omp.h>
#endif

namespace {

using namespace heed_test::op_table;
using heed::Device;

/// "add (2, 3), (3) args [1, 0]": an entry's case, for the report.
std::string describe(const Entry& e, const Case& c) {
  std::ostringstream os;
  os << e.name;
  for (std::size_t i = 0; i < c.shapes.size(); ++i) os << (i ? ", " : " ") << heed::to_string(c.shapes[i]);
  if (!c.args.empty()) {
    os << " args [";
    for (std::size_t i = 0; i < c.args.size(); ++i) os << (i ? ", " : "") << c.args[i];
    os << "]";
  }
  if (c.index.defined()) os << " index " << heed::to_string(c.index.shape());
  if (c.scalar != 0.0) os << " scalar " << c.scalar;
  return os.str();
}

/// A seed per entry and case (FNV-1a of the name), the same on every run.
std::uint64_t seed_of(const Entry& e, std::size_t case_index) {
  std::uint64_t h = 1469598103934665603ull;
  for (unsigned char ch : e.name) h = (h ^ ch) * 1099511628211ull;
  return (h ^ case_index) % 1000003;
}

/// got matches expected element by element within tol · (largest |expected| + 1); NaN
/// only where expected is NaN.
void check_near(const std::vector<double>& got, const std::vector<double>& expected, double tol, const char* what) {
  REQUIRE(got.size() == expected.size());
  double scale = 0, error = 0;
  std::size_t worst = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(expected[i])) {
      INFO(what << " element " << i << " should be NaN");
      CHECK(std::isnan(got[i]));
      continue;
    }
    scale = std::max(scale, std::abs(expected[i]));
    const double diff = std::abs(got[i] - expected[i]);
    if (!(diff <= error)) error = std::isnan(diff) ? HUGE_VAL : diff, worst = i;
  }
  INFO(what << ": largest difference " << error << " at element " << worst << " for largest value " << scale);
  CHECK(error <= tol * (scale + 1));
}

/// What one run of an op gives: its output and, after a backward pass with a fixed
/// random gradient, each input's gradient (zeros where none arrived).
struct Run {
  Device device;
  Shape shape;
  std::vector<double> out;
  std::vector<std::vector<double>> grads;
};

template <typename T>
std::vector<double> doubles(const Tensor<T>& x) {
  const std::vector<T> v = x.to_vector();
  return std::vector<double>(v.begin(), v.end());
}

template <typename T>
Run run(const Entry& e, const Case& c, const Inputs<double>& in, Device device, bool backward) {
  Inputs<T> x = cast_inputs<T>(in);
  for (Tensor<T>& t : x) {
    if (device != Device::cpu()) t = t.to(device);
    if (backward) t.requires_grad_();
  }
  const Tensor<T> y = e.fn.template get<T>()(x, c);
  Run r{y.device(), y.shape(), doubles(y), {}};
  if (backward) {
    heed::Generator gen(99);
    const Tensor<T> g = heed::randn<double>(y.shape(), gen).template to<T>();
    y.backward(device == Device::cpu() ? g : g.to(device));
    for (const Tensor<T>& t : x)
      r.grads.push_back(t.grad().defined() ? doubles(t.grad())
                                           : std::vector<double>(static_cast<std::size_t>(t.numel())));
  }
  return r;
}

/// Runs check with label in the report; an exception fails the check there, and the
/// next one runs.
template <typename F>
void guarded(const std::string& label, F&& check) {
  INFO(label);
  try {
    check();
  } catch (const std::exception& error) {
    FAIL_CHECK(label << " threw: " << error.what());
  }
}

/// Runs body for every case of every entry (and the large cases where asked), each
/// described in the report.
void for_each_case(bool with_large, const std::function<void(const Entry&, const Case&, std::uint64_t, bool)>& body) {
  for (const Entry& e : table()) {
    std::size_t k = 0;
    for (const std::vector<Case>* cases : {&e.cases, &e.large_cases}) {
      const bool large = cases == &e.large_cases;
      if (large && !with_large) continue;
      for (const Case& c : *cases) {
        const std::uint64_t seed = seed_of(e, k++);
        guarded(describe(e, c), [&] { body(e, c, seed, large); });
      }
    }
  }
}

/// Runs check in float, then in double, each labelled.
template <typename F>
void in_float_and_double(F&& check) {
  guarded("in float", [&] { check(0.0f); });
  guarded("in double", [&] { check(0.0); });
}

}  // namespace

TEST_CASE("the op table lists each op once, each with cases and a reference", "[ops][table]") {
  std::set<std::string> names;
  for (const Entry& e : table()) {
    INFO(e.name);
    CHECK(names.insert(e.name).second);
    CHECK(!e.cases.empty());
    CHECK((e.ref || e.prop));
    for (const Case& c : e.cases) CHECK(!c.shapes.empty());
  }
  // The ops of include/heed/ops, each with its own entry.
  for (const char* name : {"add",
                           "sub",
                           "mul",
                           "div",
                           "pow",
                           "add_scalar",
                           "mul_scalar",
                           "pow_scalar",
                           "neg",
                           "exp",
                           "log",
                           "sqrt",
                           "tanh",
                           "sigmoid",
                           "relu",
                           "gelu",
                           "silu",
                           "softplus",
                           "abs",
                           "sin",
                           "cos",
                           "clone",
                           "where",
                           "masked_fill",
                           "sequence_mask",
                           "sum",
                           "mean",
                           "max",
                           "argmax",
                           "matmul",
                           "bmm",
                           "linear",
                           "softmax",
                           "log_softmax",
                           "masked_softmax",
                           "layer_norm",
                           "dropout",
                           "dropout_p0",
                           "embedding",
                           "gru_layer",
                           "cross_entropy",
                           "scaled_dot_product_attention",
                           "reshape",
                           "flatten",
                           "unsqueeze",
                           "squeeze",
                           "permute",
                           "transpose",
                           "slice",
                           "narrow",
                           "select",
                           "repeat",
                           "repeat_interleave",
                           "expand",
                           "index_select",
                           "cat",
                           "stack",
                           "min",
                           "argmin",
                           "max_with_indices",
                           "min_with_indices",
                           "prod",
                           "sum_dims",
                           "mean_dims",
                           "var",
                           "std",
                           "clamp",
                           "mse_loss",
                           "l1_loss",
                           "t",
                           "mT",
                           "operator[]",
                           "repeat_interleave_flat",
                           "split",
                           "chunk",
                           "slice_scatter",
                           "select_scatter",
                           "gather",
                           "scatter_add",
                           "masked_select",
                           "sort",
                           "argsort",
                           "topk"}) {
    INFO(name);
    CHECK(names.count(name) == 1);
  }
}

TEST_CASE("op table: forward in double matches the reference", "[ops][table]") {
  for_each_case(false, [](const Entry& e, const Case& c, std::uint64_t seed, bool) {
    const Inputs<double> in = make_inputs(e, c, seed);
    const Tensord out = e.fn.d(in, c);
    if (e.prop) e.prop(in, c, out);
    if (!e.ref) return;
    const Tensord expected = e.ref(in, c);
    INFO("shape " << heed::to_string(out.shape()) << ", expected " << heed::to_string(expected.shape()));
    REQUIRE(out.shape() == expected.shape());
    check_near(doubles(out), doubles(expected), e.tol, "output");
  });
}

TEST_CASE("op table: gradcheck in double against finite differences", "[ops][table][gradcheck]") {
  for_each_case(false, [](const Entry& e, const Case& c, std::uint64_t seed, bool) {
    Inputs<double> in = make_inputs(e, c, seed);
    for (Tensord& x : in) x.requires_grad_();
    const std::function<Tensord(const Inputs<double>&)> f = [&](const Inputs<double>& x) { return e.fn.d(x, c); };
    if (e.differentiable)
      CHECK_GRADCHECK(heed::gradcheck(f, in, e.grad));
    else
      CHECK_FALSE(f(in).requires_grad());  // comparisons and argmax record nothing
  });
}

TEST_CASE("op table: float matches double, forward and backward", "[ops][table]") {
  for_each_case(false, [](const Entry& e, const Case& c, std::uint64_t seed, bool) {
    const Inputs<double> in = make_inputs(e, c, seed);
    const Run f = run<float>(e, c, in, Device::cpu(), e.differentiable);
    const Run d = run<double>(e, c, in, Device::cpu(), e.differentiable);
    REQUIRE(f.shape == d.shape);
    check_near(f.out, d.out, e.float_tol, "output");
    for (std::size_t i = 0; i < d.grads.size(); ++i) {
      INFO("gradient of input " << i);
      check_near(f.grads[i], d.grads[i], e.float_tol, "gradient");
    }
  });
}

TEST_CASE("op table: each device matches the CPU, forward and backward", "[ops][table][cuda]") {
  if (!heed::cuda_is_available()) {
    WARN("no CUDA device in this process (a build without heed::cuda, or no GPU): the device mode checked nothing");
    return;
  }
  const Device gpu = Device::cuda();
  for_each_case(false, [&](const Entry& e, const Case& c, std::uint64_t seed, bool) {
    const Inputs<double> in = make_inputs(e, c, seed);
    const DeviceSupport support = c.device == DeviceSupport::entry ? e.device : c.device;
    in_float_and_double([&](auto zero) {
      using T = decltype(zero);
      const double tol = std::is_same_v<T, float> ? 1e-5 : 1e-12;
      if (support == DeviceSupport::none) {
        // Marked in the entry: the op has no CUDA implementation, and says so.
        CHECK_THROWS_WITH(run<T>(e, c, in, gpu, false), Catch::Matchers::Contains("no implementation on cuda:0"));
        return;
      }
      const Run device = run<T>(e, c, in, gpu, false);
      if (support == DeviceSupport::empty_on_cpu) {
        // Marked in the case: nothing read, nothing refused, and the result is on the CPU.
        CHECK(device.device == Device::cpu());
        CHECK(device.out.empty());
        return;
      }
      CHECK(device.device == gpu);
      const Run cpu = run<T>(e, c, in, Device::cpu(), e.differentiable);
      REQUIRE(cpu.shape == device.shape);
      check_near(device.out, cpu.out, tol, "output");
      if (!e.differentiable) return;
      if (support == DeviceSupport::forward_only) {
        CHECK_THROWS_WITH(run<T>(e, c, in, gpu, true), Catch::Matchers::Contains("no implementation on cuda:0"));
        return;
      }
      const Run both = run<T>(e, c, in, gpu, true);
      for (std::size_t i = 0; i < cpu.grads.size(); ++i) {
        INFO("gradient of input " << i);
        check_near(both.grads[i], cpu.grads[i], tol, "gradient");
      }
    });
  });
}

TEST_CASE("op table: 1 thread and 3 threads give the same bits", "[ops][table]") {
#ifdef _OPENMP
  const int saved = omp_get_max_threads();
  for_each_case(true, [&](const Entry& e, const Case& c, std::uint64_t seed, bool large) {
    const Inputs<double> in = make_inputs(e, c, seed);
    auto compare = [&](auto zero) {
      using T = decltype(zero);
      omp_set_num_threads(1);
      const Run one = run<T>(e, c, in, Device::cpu(), e.differentiable);
      omp_set_num_threads(3);
      const Run three = run<T>(e, c, in, Device::cpu(), e.differentiable);
      omp_set_num_threads(saved);
      CHECK(one.out == three.out);
      CHECK(one.grads == three.grads);
    };
    guarded("in float", [&] { compare(0.0f); });
    if (!large) guarded("in double", [&] { compare(0.0); });
  });
  omp_set_num_threads(saved);
#else
  WARN("built without OpenMP: every op runs on one thread, the thread mode checked nothing");
#endif
}

// A tensor argument left undefined (a default-constructed Tensor) is the caller's
// mistake: the error must name the op and the argument, never only "Tensor: use of an
// undefined tensor", which says neither. An op whose argument is optional (an absent
// bias) may accept it.
TEST_CASE("op table: an undefined input is an error naming the op", "[ops][table][errors]") {
  for (const Entry& e : table()) {
    const Case& c = e.cases.front();
    const Inputs<double> defined = make_inputs(e, c, seed_of(e, 0));
    for (std::size_t i = 0; i < defined.size(); ++i) {
      INFO(describe(e, c) << ", input " << i << " undefined");
      Inputs<double> in = defined;
      in[i] = Tensord();
      try {
        (void)e.fn.d(in, c);
      } catch (const heed::Error& error) {
        const std::string message = error.what();
        INFO(message);
        CHECK(message.find("undefined") != std::string::npos);
        CHECK(message.rfind("Tensor: ", 0) == std::string::npos);
      }
    }
  }
}
