// The backend boundary (heed/core/backend.hpp, heed/ops/kernels.hpp): what a program
// without a device backend does, what a backend reports, and that a file compiled
// without the CUDA target's definition runs the device paths of the same program.
//
// This file undefines HEED_WITH_CUDA before including heed, so in a build that links
// heed::cuda it is compiled as a file of a CPU-only target would be: the ops it
// instantiates must reach the backend that the program's other files registered.
#undef HEED_WITH_CUDA
#include "check.hpp"

#include <string>

using heed::Device;
using heed::Tensor;

namespace {

/// Takes the CUDA backend out of the registry for the test's scope, as in a program
/// that does not link heed::cuda, and puts it back after.
class WithoutCudaBackend {
 public:
  WithoutCudaBackend() : saved_(heed::registered_backend(heed::DeviceType::cuda)) {
    heed::register_backend(heed::DeviceType::cuda, nullptr);
  }
  ~WithoutCudaBackend() { heed::register_backend(heed::DeviceType::cuda, saved_); }
  WithoutCudaBackend(const WithoutCudaBackend&) = delete;
  WithoutCudaBackend& operator=(const WithoutCudaBackend&) = delete;

 private:
  heed::DeviceBackend* saved_;
};

}  // namespace

TEST_CASE("without a CUDA backend, tensors and modules stay on the CPU", "[core][backend]") {
  const WithoutCudaBackend no_backend;
  CHECK_FALSE(heed::cuda_is_built());
  CHECK(heed::cuda_device_count() == 0);
  CHECK_FALSE(heed::cuda_is_available());
  CHECK_FALSE(heed::supports(Device::cuda(), heed::Capability::fused_attention));
  const Tensor<float> x = heed::arange(6.f).reshape({2, 3});
  CHECK(x.device() == Device::cpu());
  CHECK(x.is_cpu());
  CHECK_FALSE(x.is_cuda());
  CHECK(x.to(Device::cpu()).is_same(x));  // already there: the tensor itself
  CHECK_ERROR(heed::DeviceError, "cuda:0 asked of a program without the CUDA backend", x.to(Device::cuda()));
  CHECK_ERROR(heed::DeviceError, "zeros: cuda:0 asked of a program without", heed::zeros<float>({2}, Device::cuda()));
  heed::Linear<float> layer(3, 2);
  CHECK(layer.device() == Device::cpu());
  CHECK(&layer.to(Device::cpu()) == &layer);
  CHECK_ERROR(heed::DeviceError, "Module.to: cuda:1 asked of a program without", layer.to(Device::cuda(1)));
  CHECK(layer.parameters()[0].device() == Device::cpu());  // a refused move changes nothing
}

TEST_CASE("the CPU does everything; a backend says what it does", "[core][backend]") {
  CHECK(heed::supports(Device::cpu(), heed::Capability::fused_attention));
  CHECK_ERROR(heed::ValueError, "the CPU is heed's own backend",
              heed::register_backend(heed::DeviceType::cpu, heed::registered_backend(heed::DeviceType::cuda)));
  if (!heed::cuda_is_available()) {
    WARN(
        "no CUDA backend is linked into this program (configure with HEED_CUDA_EMULATION or HEED_WITH_CUDA): "
        "the device half of this test did not run");
    return;
  }
  const heed::DeviceBackend* backend = heed::registered_backend(heed::DeviceType::cuda);
  REQUIRE(backend != nullptr);
  CHECK(std::string(backend->name()).find("CUDA") == 0);
  CHECK(backend->device_count() == heed::cuda_device_count());
  // The fused attention is a CPU kernel: on the device the modules take the classic path.
  CHECK_FALSE(heed::supports(Device::cuda(), heed::Capability::fused_attention));
}

TEMPLATE_TEST_CASE("a file built without the CUDA definition runs the device paths", "[core][backend]", float, double) {
  using T = TestType;
  if (!heed::cuda_is_available()) {
    WARN(
        "no CUDA backend is linked into this program (configure with HEED_CUDA_EMULATION or HEED_WITH_CUDA): "
        "this test did not run");
    return;
  }
  const Device gpu = Device::cuda();
  heed::Generator gen(5);
  Tensor<T> a = heed::randn<T>({3, 4}, gen).requires_grad_();
  const Tensor<T> b = heed::randn<T>({4}, gen);
  const Tensor<T> w = heed::randn<T>({4, 2}, gen);
  // y = sum(tanh(a + b) @ w): elementwise, unary, broadcast, matmul and sum kernels.
  const Tensor<T> y = heed::sum(heed::matmul(heed::tanh(a + b), w));
  y.backward();
  const Tensor<T> a_dev = a.detach().to(gpu).requires_grad_();
  const Tensor<T> y_dev = heed::sum(heed::matmul(heed::tanh(a_dev + b.to(gpu)), w.to(gpu)));
  CHECK(y_dev.device() == gpu);
  y_dev.backward();
  REQUIRE(a_dev.grad().defined());
  CHECK(a_dev.grad().device() == gpu);
  const double tol = std::is_same_v<T, float> ? 1e-5 : 1e-12;
  CHECK(std::abs(static_cast<double>(y_dev.item() - y.item())) <= tol * (1 + std::abs(static_cast<double>(y.item()))));
  const std::vector<T> expected = a.grad().to_vector(), got = a_dev.grad().to_vector();
  REQUIRE(expected.size() == got.size());
  for (std::size_t i = 0; i < got.size(); ++i)
    CHECK(std::abs(static_cast<double>(got[i] - expected[i])) <=
          tol * (1 + std::abs(static_cast<double>(expected[i]))));
}

TEST_CASE("an op with no device kernel for its type is a DeviceError naming it", "[core][backend]") {
  if (!heed::cuda_is_available()) {
    WARN("no CUDA backend is linked into this program: this test did not run");
    return;
  }
  const heed::IndexTensor indices = heed::IndexTensor({1, 2, 3}, {3}).to(Device::cuda());
  CHECK(indices.to(Device::cpu()).to_vector() == std::vector<std::int64_t>{1, 2, 3});
  CHECK_ERROR(heed::DeviceError, "has no kernels for int64 tensors (on cuda:0)", indices * indices);
  // An op the backend lacks altogether refuses instead of reading device memory on the host.
  const Tensor<float> x = heed::ones<float>({2, 3}, Device::cuda());
  CHECK_ERROR(heed::DeviceError, "has no implementation on cuda:0", heed::prod(x, 1));
  CHECK_ERROR(heed::DeviceError, "(in or after prod, the last op to check its arguments on this thread)",
              heed::prod(x, 1));
}
