// Every entry of the op table (tests/op_table.hpp) in every mode: forward against the
// reference, gradcheck in double, float against double, each device against the CPU,
// 1 thread against 3, each input left undefined, and each error case. Also: every op
// heed::compiled instantiates has an entry, and the device mode notices a wrong kernel.
//
// heed_tests runs this file against the host emulation of a CUDA device (where the
// build has HEED_CUDA_EMULATION), heed_cuda_tests against a real GPU (HEED_TEST_CUDA:
// the program links heed::cuda).
#include "op_table_shapes.hpp"

#include "check.hpp"
#include "cpu_paths.hpp"
#include "wrong_kernel.hpp"

#ifdef HEED_TEST_CUDA
#include <heed/cuda/runtime.hpp>
#endif

#include <cmath>
#include <cstdint>
#include <fstream>
#include <functional>
#include <map>
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

/// Where a check's outcome goes: a Catch assertion in the table's tests (catch_check),
/// a list of failures where a test expects some (the wrong-kernel test).
using Sink = std::function<void(bool ok, const std::string& what)>;

void catch_check(bool ok, const std::string& what) {
  INFO(what);
  CHECK(ok);
}

/// got matches expected element by element within tol · (largest |expected| + 1); NaN
/// only where expected is NaN.
void compare(const std::vector<double>& got, const std::vector<double>& expected, double tol, const std::string& what,
             const Sink& sink) {
  if (got.size() != expected.size()) {
    sink(false, what + ": " + std::to_string(got.size()) + " elements, expected " + std::to_string(expected.size()));
    return;
  }
  double scale = 0, error = 0;
  std::size_t worst = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(expected[i])) {
      sink(std::isnan(got[i]), what + " element " + std::to_string(i) + " should be NaN");
      continue;
    }
    scale = std::max(scale, std::abs(expected[i]));
    const double diff = std::abs(got[i] - expected[i]);
    if (!(diff <= error)) error = std::isnan(diff) ? HUGE_VAL : diff, worst = i;
  }
  std::ostringstream os;
  os << what << ": largest difference " << error << " at element " << worst << " for largest value " << scale;
  sink(error <= tol * (scale + 1), os.str());
}

void check_near(const std::vector<double>& got, const std::vector<double>& expected, double tol, const char* what) {
  compare(got, expected, tol, what, catch_check);
}

/// What one run of an op gives: its output and, after a backward pass with a fixed
/// random gradient, each input's gradient (zeros where none arrived).
struct Run {
  Device device;
  Shape shape;
  std::vector<double> out;
  std::vector<std::vector<double>> grads;
  std::vector<bool> grad_defined;  // per input: whether a gradient arrived
  std::vector<Device> grad_devices;
};

template <typename T>
std::vector<double> doubles(const Tensor<T>& x) {
  const std::vector<T> v = x.to_vector();
  return std::vector<double>(v.begin(), v.end());
}

/// before_backward: run between the forward and the backward pass.
template <typename T>
Run run(const Entry& e, const Case& c, const Inputs<double>& in, Device device, bool backward,
        const std::function<void()>& before_backward = {}) {
  Inputs<T> x = cast_inputs<T>(in);
  for (Tensor<T>& t : x) {
    if (device != Device::cpu()) t = t.to(device);
    if (backward) t.requires_grad_();
  }
  const Tensor<T> y = e.fn.template get<T>()(x, c);
  Run r{y.device(), y.shape(), doubles(y), {}, {}, {}};
  if (backward) {
    if (before_backward) before_backward();
    heed::Generator gen(99);
    const Tensor<T> g = heed::randn<double>(y.shape(), gen).template to<T>();
    y.backward(device == Device::cpu() ? g : g.to(device));
    for (const Tensor<T>& t : x) {
      r.grads.push_back(t.grad().defined() ? doubles(t.grad())
                                           : std::vector<double>(static_cast<std::size_t>(t.numel())));
      r.grad_defined.push_back(t.grad().defined());
      r.grad_devices.push_back(t.grad().defined() ? t.grad().device() : t.device());
    }
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

/// Which of an entry's cases a mode runs: its cases, and its large cases (threads
/// mode) or its device cases (device mode).
enum class Extra { none, large, device };

/// Calls body for every case of entry e named by extra, with the case's seed; large:
/// whether it is a large case.
void for_each_case_of(const Entry& e, Extra extra, const std::function<void(const Case&, std::uint64_t, bool)>& body) {
  std::size_t k = 0;
  for (const std::vector<Case>* cases : {&e.cases, &e.large_cases, &e.device_cases}) {
    const bool large = cases == &e.large_cases;
    if (large && extra != Extra::large) continue;
    if (cases == &e.device_cases && extra != Extra::device) continue;
    for (const Case& c : *cases) body(c, seed_of(e, k++), large);
  }
}

/// Runs body for every case of every entry (and the large or device cases where
/// asked), each described in the report.
void for_each_case(Extra extra, const std::function<void(const Entry&, const Case&, std::uint64_t, bool)>& body) {
  for (const Entry& e : table())
    for_each_case_of(e, extra, [&](const Case& c, std::uint64_t seed, bool large) {
      guarded(describe(e, c), [&] { body(e, c, seed, large); });
    });
}

/// Fills the device cache with NaN blocks of these element counts (and nothing else
/// idle), so that the next outputs of those sizes are allocated from poisoned memory and
/// an element a kernel leaves unwritten fails the comparison. Only where the program
/// links heed::cuda, whose cache this empties.
template <typename T>
void poison(Device device, const std::vector<index_t>& numels) {
#ifdef HEED_TEST_CUDA
  heed::cuda::empty_cache();
  std::vector<Tensor<T>> blocks;
  for (index_t n : numels) {
    if (n == 0) continue;
    blocks.push_back(heed::detail::make_tensor<T>(Shape{n}, device));
    blocks.back().fill_(std::numeric_limits<T>::quiet_NaN());
  }
#else
  (void)device, (void)numels;
#endif
}

/// Whether the registered CUDA backend is a real device (not the host emulation).
bool real_device() {
  const heed::DeviceBackend* backend = heed::registered_backend(heed::DeviceType::cuda);
  return backend != nullptr && std::string(backend->name()).find("emulated") == std::string::npos;
}

/// Expects call to throw the "no implementation on cuda:0" DeviceError.
template <typename F>
void expect_refused(F&& call, const std::string& what, const Sink& sink) {
  try {
    call();
    sink(false, what + ": ran, expected no implementation on cuda:0");
  } catch (const std::exception& error) {
    const std::string message = error.what();
    sink(message.find("no implementation on cuda:0") != std::string::npos, what + " threw: " + message);
  }
}

/// The device mode on one case: the op on the device against the CPU, forward and
/// backward, float within 1e-5 (on a real GPU, whose float rounds otherwise, the
/// entry's float-against-double tolerance) and double within 1e-12, outputs and
/// gradients allocated from NaN-poisoned memory; or, as the entry says, the op refused
/// on the device, or an empty result on the CPU. Each outcome goes to sink.
void check_on_device(const Entry& e, const Case& c, const Inputs<double>& in, Device gpu, const Sink& sink) {
  const DeviceSupport support = c.device == DeviceSupport::entry ? e.device : c.device;
  const auto in_type = [&](auto zero, const char* type) {
    using T = decltype(zero);
    const std::string label = std::string("in ") + type;
    const double tol = std::is_same_v<T, float> ? (real_device() ? std::max(1e-5, e.float_tol) : 1e-5) : 1e-12;
    if (support == DeviceSupport::none) {
      // Marked in the entry: the op has no CUDA implementation, and says so.
      expect_refused([&] { run<T>(e, c, in, gpu, false); }, label, sink);
      return;
    }
    if (support == DeviceSupport::empty_on_cpu) {
      // Marked in the case: nothing read, nothing refused, and the result is on the CPU.
      const Run device = run<T>(e, c, in, gpu, false);
      sink(device.device == Device::cpu(), label + ": the result is on the CPU");
      sink(device.out.empty(), label + ": the result is empty");
      return;
    }
    const Run cpu = run<T>(e, c, in, Device::cpu(), e.differentiable);
    const auto numel = static_cast<index_t>(cpu.out.size());
    poison<T>(gpu, {numel, numel});
    const Run device = run<T>(e, c, in, gpu, false);
    sink(device.device == gpu, label + ": the result is on " + heed::to_string(gpu));
    sink(cpu.shape == device.shape,
         label + ": shape " + heed::to_string(device.shape) + ", on the CPU " + heed::to_string(cpu.shape));
    if (cpu.shape != device.shape) return;
    compare(device.out, cpu.out, tol, label + ", output", sink);
    if (!e.differentiable) return;
    if (support == DeviceSupport::forward_only) {
      expect_refused([&] { run<T>(e, c, in, gpu, true); }, label + ", backward", sink);
      return;
    }
    std::vector<index_t> grad_numels{numel};
    for (const Tensord& x : in) grad_numels.push_back(x.numel());
    const Run both = run<T>(e, c, in, gpu, true, [&] { poison<T>(gpu, grad_numels); });
    for (std::size_t i = 0; i < cpu.grads.size(); ++i) {
      const std::string what = label + ", gradient of input " + std::to_string(i);
      // A gradient where the CPU has one, and on the device: zeros read as "none" otherwise.
      sink(!cpu.grad_defined[i] || both.grad_defined[i], what + " is missing");
      sink(!both.grad_defined[i] || both.grad_devices[i] == gpu,
           what + " is on " + heed::to_string(both.grad_devices[i]));
      compare(both.grads[i], cpu.grads[i], tol, what, sink);
    }
  };
  for (const auto& [type, check] : std::vector<std::pair<const char*, std::function<void()>>>{
           {"float", [&] { in_type(0.0f, "float"); }}, {"double", [&] { in_type(0.0, "double"); }}}) {
    try {
      check();
    } catch (const std::exception& error) {
      sink(false, std::string("in ") + type + " threw: " + error.what());
    }
  }
}

/// The device mode's failures on every case of entry e, each "case: what failed".
std::vector<std::string> device_failures(const Entry& e, Device gpu) {
  std::vector<std::string> failures;
  for_each_case_of(e, Extra::device, [&](const Case& c, std::uint64_t seed, bool) {
    check_on_device(e, c, make_inputs(e, c, seed), gpu, [&](bool ok, const std::string& what) {
      if (!ok) failures.push_back(describe(e, c) + ": " + what);
    });
  });
  return failures;
}

/// The names of what heed::compiled instantiates: for each `EXT template` line of
/// include/heed/compiled/ops.hpp, the function's name ("add", "detail::sum_to") or the
/// class's ("AttentionMask"); each name once.
std::set<std::string> compiled_names(const std::string& header) {
  std::set<std::string> names;
  const std::string marker = "EXT template ";
  for (std::size_t at = header.find(marker); at != std::string::npos; at = header.find(marker, at + 1)) {
    const std::size_t from = at + marker.size();
    std::string line = header.substr(from, header.find_first_of("\\\n;", from) - from);
    if (line.rfind("class ", 0) == 0) {
      line = line.substr(6);
      names.insert(line.substr(0, line.find('<')));
      continue;
    }
    // "Tensor<std::int64_t> argmax<T>(const Tensor<T> &, ...": the name before "<T>(".
    std::string head = line.substr(0, line.find('('));
    if (!head.empty() && head.back() == '>') head = head.substr(0, head.rfind('<'));
    names.insert(head.substr(head.find_last_of(" >") + 1));
  }
  return names;
}

/// What heed::compiled instantiates that is not an op of the table, and where each is
/// tested instead.
const std::map<std::string, std::string>& not_in_table() {
  static const std::map<std::string, std::string> exempt = {
      {"AttentionMask", "a class, masked_softmax's mask: its forms run through the masked_softmax entry"},
      {"detail::broadcast_to", "a helper of every broadcasting op: the binary entries' broadcast cases"},
      {"detail::sum_to", "broadcast_to's backward: the binary entries' gradcheck on broadcast cases"},
      {"attention_gru",
       "the Bahdanau decoder's whole loop, weights in a struct: tests/test_attention_gru.cpp, against the step-by-step "
       "decoder, with gradcheck, dropout and its errors"},
  };
  return exempt;
}

/// The names in compiled that have no entry and are not exempt.
std::vector<std::string> without_entry(const std::set<std::string>& compiled) {
  std::set<std::string> entries;
  for (const Entry& e : table()) entries.insert(e.name);
  std::vector<std::string> missing;
  for (const std::string& name : compiled)
    if (!entries.count(name) && !not_in_table().count(name)) missing.push_back(name);
  return missing;
}

std::string read_compiled_ops() {
  const std::string path = std::string(HEED_TEST_INCLUDE_DIR) + "/heed/compiled/ops.hpp";
  std::ifstream in(path);
  INFO(path);
  REQUIRE(in.good());
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
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
}

TEST_CASE("every op heed::compiled instantiates has an entry in the op table", "[ops][table]") {
  const std::string header = read_compiled_ops();
  const std::set<std::string> compiled = compiled_names(header);
  // Every line read as a name (a line of a new form would give a piece of a type).
  CHECK(compiled.size() > 70);
  for (const std::string& name : compiled) {
    INFO("read from heed/compiled/ops.hpp: '" << name << "'");
    CHECK(
        (!name.empty() && name.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_:") ==
                              std::string::npos));
  }
  CHECK(compiled.count("add") == 1);
  CHECK(compiled.count("argmax") == 1);
  CHECK(compiled.count("detail::sum_to") == 1);
  CHECK(compiled.count("AttentionMask") == 1);
  for (const auto& [name, where] : not_in_table()) {
    INFO(name << " is exempt (" << where << ") but no longer instantiated: drop it from the exemptions");
    CHECK(compiled.count(name) == 1);
  }
  const std::vector<std::string> missing = without_entry(compiled);
  for (const std::string& name : missing) FAIL_CHECK(name << " is instantiated by heed::compiled but has no entry");
  CHECK(missing.empty());
}

TEST_CASE("the op table's coverage check notices an op without an entry", "[ops][table]") {
  // One more op in heed::compiled's list, written as its lines are.
  const std::string header = read_compiled_ops() +
                             "  EXT template Tensor<T> not_an_op_yet<T>(const Tensor<T> &, int);   \\\n"
                             "  EXT template Tensor<std::int64_t> nor_this<T>(const Tensor<T> &, int, bool);\n";
  CHECK(without_entry(compiled_names(header)) == std::vector<std::string>{"nor_this", "not_an_op_yet"});
}

TEST_CASE("op table: each entry's error cases throw their error, naming the op", "[ops][table][errors]") {
  std::size_t cases = 0;
  for (const Entry& e : table())
    for (const ErrorCase& error : e.error_cases) {
      ++cases;
      INFO(e.name << ": expected " << error.type_name << (error.whole ? " \"" : " containing \"") << error.message
                  << "\"");
      bool threw = false, of_type = false;
      std::string message = "nothing thrown";
      try {
        error.call();
      } catch (const heed::Error& thrown) {
        threw = true;
        of_type = error.is_type(thrown);
        message = thrown.what();
      } catch (const std::exception& thrown) {
        message = std::string("not a heed::Error: ") + thrown.what();
      }
      INFO("threw: " << message);
      CHECK(threw);
      CHECK(of_type);
      CHECK((error.whole ? message == error.message : message.find(error.message) != std::string::npos));
    }
  CHECK(cases > 0);
}

TEST_CASE("op table: forward in double matches the reference", "[ops][table]") {
  for_each_case(Extra::none, [](const Entry& e, const Case& c, std::uint64_t seed, bool) {
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
  for_each_case(Extra::none, [](const Entry& e, const Case& c, std::uint64_t seed, bool) {
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
  for_each_case(Extra::none, [](const Entry& e, const Case& c, std::uint64_t seed, bool) {
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
  for_each_case(Extra::device, [&](const Entry& e, const Case& c, std::uint64_t seed, bool) {
    check_on_device(e, c, make_inputs(e, c, seed), Device::cuda(), catch_check);
  });
}

TEST_CASE("op table: the device mode reports an op whose kernel is wrong", "[ops][table][cuda]") {
  if (!heed::cuda_is_available()) {
    WARN("no CUDA device in this process: the wrong kernel was not tried");
    return;
  }
  // exp's kernel adds 0.5 to every result; tanh's and add's kernels are right. The
  // entries run through the device mode's own check, its failures collected.
  const auto failures_of = [](const char* name) {
    std::vector<std::string> failures;
    for (const Entry& e : table())
      if (e.name == name) failures = device_failures(e, Device::cuda());
    return failures;
  };
  std::vector<std::string> exp_failures, tanh_failures, add_failures;
  {
    const heed_test::WrongUnaryKernelInstalled wrong(heed::UnaryOp::exp);
    exp_failures = failures_of("exp");
    tanh_failures = failures_of("tanh");
    add_failures = failures_of("add");
  }
  REQUIRE(!exp_failures.empty());
  INFO("exp's first failure: " << exp_failures.front());
  CHECK(exp_failures.front().rfind("exp ", 0) == 0);
  CHECK(exp_failures.front().find("output: largest difference 0.5") != std::string::npos);
  CHECK(tanh_failures.empty());
  CHECK(add_failures.empty());
  // The right kernel again: exp passes.
  CHECK(failures_of("exp").empty());
}

TEST_CASE("op table: 1 thread and 3 threads give the same bits", "[ops][table]") {
#ifdef _OPENMP
  const int saved = omp_get_max_threads();
  for_each_case(Extra::large, [&](const Entry& e, const Case& c, std::uint64_t seed, bool large) {
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

// bf16 and int8 (heed/ops/quantized_gemm.hpp): each op that has them, on every CPU path
// this machine can force (cpu_paths.hpp), against fp32 within the precision's tolerance;
// and not equal to fp32, which says the path ran. int8's paths give the same bits.
TEST_CASE("op table: each bf16 and int8 path matches fp32 on every forced CPU path", "[ops][table]") {
  const std::vector<heed::CpuFeatures> paths = heed_test::feature_sets();
  for_each_case(Extra::large, [&](const Entry& e, const Case& c, std::uint64_t seed, bool) {
    if (e.precisions.empty()) return;
    const Inputs<double> in = make_inputs(e, c, seed);
    const Run fp32 = run<float>(e, c, in, Device::cpu(), false);
    for (const auto& [precision, tol] : e.precisions) {
      INFO(heed::to_string(precision));
      std::optional<Run> first;
      for (const heed::CpuFeatures& f : paths) {
        INFO("avx512 " << f.avx512 << ", avx512_vnni " << f.avx512_vnni << ", avx512_bf16 " << f.avx512_bf16);
        const heed_test::ForcedCpuFeatures forced(f);
        const heed::PackedWeightsGuard guard(precision);
        const Run low = run<float>(e, c, in, Device::cpu(), false);
        REQUIRE(low.shape == fp32.shape);
        check_near(low.out, fp32.out, tol, "output");
        if (!fp32.out.empty()) CHECK(low.out != fp32.out);
        if (!first) first = low;
        if (precision == heed::Precision::int8) CHECK(low.out == first->out);
      }
    }
  });
}

// Mixed precision (heed/ops/autocast.hpp): under an AutocastGuard of bf16, each product
// op's large cases run their products in bf16, forward and backward, on every CPU path
// this machine can force: within the entry's tolerance of fp32 and not equal to it. Its
// small cases, below the guard's smallest product, keep fp32's bits.
TEST_CASE("op table: each op's products under AutocastGuard(bf16) match fp32, forward and backward", "[ops][table]") {
  const std::vector<heed::CpuFeatures> paths = heed_test::feature_sets();
  for_each_case(Extra::large, [&](const Entry& e, const Case& c, std::uint64_t seed, bool large) {
    if (e.autocast_tol == 0.0) return;
    const Inputs<double> in = make_inputs(e, c, seed);
    const Run fp32 = run<float>(e, c, in, Device::cpu(), e.differentiable);
    for (const heed::CpuFeatures& f : paths) {
      INFO("avx512 " << f.avx512 << ", avx512_bf16 " << f.avx512_bf16);
      const heed_test::ForcedCpuFeatures forced(f);
      // fp32 on this path (with AVX-512 forced off, Eigen's products, not heed's fp32 GEMM):
      // the small cases keep its bits.
      const Run fp32_here = large ? fp32 : run<float>(e, c, in, Device::cpu(), e.differentiable);
      const heed::AutocastGuard autocast(heed::Precision::bf16);
      const Run bf16 = run<float>(e, c, in, Device::cpu(), e.differentiable);
      REQUIRE(bf16.shape == fp32.shape);
      if (!large) {
        CHECK(bf16.out == fp32_here.out);
        CHECK(bf16.grads == fp32_here.grads);
        continue;
      }
      check_near(bf16.out, fp32.out, e.autocast_tol, "output");
      CHECK(bf16.out != fp32.out);
      std::size_t differ = 0;  // a product too small for bf16 (linear's dW over 13 rows) keeps fp32's
      for (std::size_t i = 0; i < fp32.grads.size(); ++i) {
        INFO("the gradient of input " << i);
        check_near(bf16.grads[i], fp32.grads[i], e.autocast_tol, "gradient");
        differ += bf16.grads[i] != fp32.grads[i];
      }
      if (e.differentiable) CHECK(differ > 0);
    }
  });
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

TEST_CASE("op table: each entry's golden values match PyTorch's", "[ops][table][golden]") {
  std::size_t cases = 0;
  for (const Entry& e : table())
    for (const GoldenValues& g : e.goldens) {
      ++cases;
      INFO(e.name << ": PyTorch's case " << g.name);
      guarded("in float", [&] {
        GoldenCase<float> c(g.name);
        g.f(c);
      });
      guarded("in double", [&] {
        GoldenCase<double> c(g.name);
        g.d(c);
      });
    }
  CHECK(cases > 90);
}
