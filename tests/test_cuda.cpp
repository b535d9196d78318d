// The CUDA backend beyond single ops, against the CPU: tensors moving, device errors,
// modules (attention, Linear, optimisers, a whole d2l Transformer training and decoding,
// a Translator), the caching allocator, TF32 and bf16 products, printing and
// checkpoints, on fresh random inputs, float within 1e-5 and double within 1e-12
// (largest difference over the largest value). Before a module runs, the device cache
// holds blocks filled with NaN, so that an output element a kernel leaves unwritten
// fails the comparison.
//
// Each op on the device against the CPU is the op table's device mode
// (test_op_table.cpp), which this program runs too: one list of ops, run here against a
// real GPU and in heed_tests against the host emulation.
//
// Built only with heed::cuda: against a GPU (HEED_WITH_CUDA), or in CI against the host
// emulation of one device (HEED_CUDA_EMULATION), which runs every CUDA code path of the
// headers with the kernels' arithmetic. main() (cuda_main.cpp) skips, with exit code 77
// (CTest's "skipped"), where no CUDA device is present.
#include "check.hpp"

#include <heed/cuda/runtime.hpp>
#include <heed/seq2seq/translator.hpp>

#include <cmath>
#include <cstdio>
#include <limits>
#include <set>
#include <sstream>
#include <string>

using heed::Device;
using heed::index_t;
using heed::Shape;
using heed::Tensor;

namespace {

const Device gpu = Device::cuda();

template <typename T>
constexpr double tolerance() {
  return std::is_same_v<T, float> ? 1e-5 : 1e-12;
}

/// Fills the device cache with NaN blocks of these element counts (and nothing else
/// idle), so that the next outputs of those sizes are allocated from poisoned memory.
template <typename T>
void poison(std::initializer_list<index_t> numels) {
  heed::cuda::empty_cache();
  std::vector<Tensor<T>> blocks;
  for (index_t n : numels) {
    blocks.push_back(heed::detail::make_tensor<T>(Shape{n}, gpu));
    blocks.back().fill_(std::numeric_limits<T>::quiet_NaN());
  }
}

/// The largest difference between the CPU tensor and the device tensor, over the
/// largest CPU value, is within tol (with a floor of tol / 10); any NaN fails.
template <typename T>
void check_matches(const Tensor<T>& cpu, const Tensor<T>& device, double tol = tolerance<T>()) {
  REQUIRE(device.device() == gpu);
  REQUIRE(cpu.shape() == device.shape());
  const std::vector<T> expected = cpu.to_vector(), got = device.to_vector();
  double scale = 0, error = 0;
  for (std::size_t i = 0; i < expected.size(); ++i) {
    scale = std::max(scale, std::abs(static_cast<double>(expected[i])));
    const double diff = std::abs(static_cast<double>(expected[i]) - static_cast<double>(got[i]));
    if (!(diff <= error)) error = std::isnan(diff) ? std::numeric_limits<double>::infinity() : diff;
  }
  INFO("shape " << heed::to_string(cpu.shape()) << ": largest difference " << error << " for largest value " << scale);
  // Plus a floor for gradients that are zero but for rounding (a key bias's, whose
  // shift of every score in a row the softmax cancels).
  CHECK(error <= tol * (scale + 0.1));
}

/// A leaf on the CPU and its copy on the device, both requiring grad.
template <typename T>
std::pair<Tensor<T>, Tensor<T>> leaf_pair(const Shape& shape, heed::Generator& gen) {
  Tensor<T> cpu = heed::randn<T>(shape, gen);
  Tensor<T> device = cpu.to(gpu);
  cpu.requires_grad_();
  device.requires_grad_();
  return {cpu, device};
}

/// Runs a module (op: the call) on the CPU leaves and on the device leaves, compares
/// the outputs, then back-propagates one random gradient through both and compares
/// every leaf's gradient. (Single ops are the op table's device mode.)
template <typename T, typename Op>
void check_module(const std::vector<Shape>& shapes, heed::Generator& gen, Op&& op, double tol = tolerance<T>()) {
  std::vector<Tensor<T>> cpu, device;
  for (const Shape& s : shapes) {
    auto [c, d] = leaf_pair<T>(s, gen);
    cpu.push_back(c);
    device.push_back(d);
  }
  const Tensor<T> expected = op(cpu);
  poison<T>({expected.numel(), expected.numel()});
  const Tensor<T> got = op(device);
  check_matches(expected, got, tol);
  const Tensor<T> g = heed::randn<T>(expected.shape(), gen);
  expected.backward(g);
  poison<T>({expected.numel()});
  got.backward(g.to(gpu));
  for (std::size_t i = 0; i < cpu.size(); ++i) {
    INFO("gradient of operand " << i);
    REQUIRE(device[i].grad().defined());
    check_matches(cpu[i].grad(), device[i].grad(), tol);
  }
}

/// Trains two nets made alike by make_net(data), one on the CPU and one moved to the
/// device, for `epochs` epochs of a corpus of 64 pairs in the same batch order with the
/// same dropout draws, and checks that the device's losses and parameters follow the
/// CPU's within 1e-9 (double). Returns the CPU's net, trained, with its data.
template <typename Net, typename MakeNet>
std::pair<std::unique_ptr<Net>, heed::NmtData> check_trains_alike(MakeNet&& make_net, std::uint64_t corpus_seed,
                                                                  index_t epochs, std::uint64_t seed) {
  auto corpus = [&] { return heed::load_data_nmt_text(heed::builtin_fra_eng(), 16, 10, 64, corpus_seed); };
  heed::NmtData data_cpu = corpus(), data_gpu = corpus();
  std::unique_ptr<Net> net_cpu = make_net(data_cpu), net_gpu = make_net(data_gpu);
  net_gpu->to(gpu);
  heed::TrainOptions options;
  heed::Generator order_cpu(seed), order_gpu(seed);
  const auto train = [&](Net& net, heed::NmtData& data, heed::Generator& order) {
    options.generator = &order;
    heed::manual_seed(seed + 1);  // dropout's generator
    return heed::train_seq2seq<double>(net, data.data_iter, 0.005, epochs, data.tgt_vocab, options).losses;
  };
  const std::vector<double> cpu = train(*net_cpu, data_cpu, order_cpu);
  const std::vector<double> device = train(*net_gpu, data_gpu, order_gpu);
  REQUIRE(device.size() == static_cast<std::size_t>(epochs));
  for (std::size_t i = 0; i < cpu.size(); ++i) {
    INFO("epoch " << i + 1);
    CHECK(device[i] == Approx(cpu[i]).epsilon(1e-9));
  }
  CHECK(cpu.back() < cpu.front());  // it learns
  CHECK(net_gpu->device() == gpu);
  const auto params_cpu = net_cpu->named_parameters(), params_gpu = net_gpu->named_parameters();
  REQUIRE(params_cpu.size() == params_gpu.size());
  for (std::size_t i = 0; i < params_cpu.size(); ++i) {
    INFO(params_cpu[i].first);
    check_matches(params_cpu[i].second.detach(), params_gpu[i].second.detach(), 1e-9);
  }
  return {std::move(net_cpu), std::move(data_cpu)};
}

}  // namespace

TEST_CASE("tensors move to the device and back", "[cuda]") {
  heed::Generator gen(1);
  const Tensor<float> x = heed::randn<float>({3, 4}, gen);
  const Tensor<float> d = x.to(gpu);
  CHECK(d.device() == gpu);
  CHECK(d.is_cuda());
  CHECK(d.shape() == x.shape());
  CHECK(d.to_vector() == x.to_vector());
  CHECK(d.to(gpu).is_same(d));  // already there: the tensor itself, as in PyTorch
  const Tensor<float> back = d.to(Device::cpu());
  CHECK(back.device() == Device::cpu());
  CHECK(back.to_vector() == x.to_vector());
  CHECK(heed::Tensor<float>({2.5f}, {}).to(gpu).item() == 2.5f);

  SECTION("indices, masks and doubles keep their values") {
    const heed::IndexTensor lens({3, 0, 7}, {3});
    CHECK(lens.to(gpu).to_vector() == lens.to_vector());
    const heed::BoolTensor mask({true, false, true, true}, {2, 2});
    CHECK(mask.to(gpu).to_vector() == mask.to_vector());
    const Tensor<double> y = heed::randn<double>({5}, gen);
    CHECK(y.to(gpu).to(Device::cpu()).to_vector() == y.to_vector());
  }
  SECTION("clone, fill_, copy_, add_ and mul_ run on the device") {
    Tensor<float> c = d.clone();
    CHECK(c.device() == gpu);
    CHECK(!c.shares_storage(d));
    CHECK(c.to_vector() == x.to_vector());
    c.fill_(3.0f);
    CHECK(c.to_vector() == std::vector<float>(12, 3.0f));
    c.copy_(x);  // from the CPU
    CHECK(c.to_vector() == x.to_vector());
    c.add_(d, 2.0f).mul_(0.5f);
    check_matches(x * 1.5f, c);
    Tensor<float> row = heed::zeros<float>({3, 4}).to(gpu);
    row.copy_(heed::Tensor<float>({1, 2, 3, 4}, {4}).to(gpu));  // broadcast over the rows
    CHECK(row.to(Device::cpu()).at({2, 3}) == 4.0f);
  }
  SECTION("to() is differentiable: the gradient comes back to the CPU leaf") {
    Tensor<float> leaf = x.clone().detach().requires_grad_();
    Tensor<float> out = leaf.to(gpu) * 3.0f;
    out.backward(heed::ones<float>({3, 4}).to(gpu));
    REQUIRE(leaf.grad().defined());
    CHECK(leaf.grad().device() == Device::cpu());
    CHECK(leaf.grad().to_vector() == std::vector<float>(12, 3.0f));
  }
}

TEST_CASE("device errors name the op, the shapes and the devices", "[cuda]") {
  heed::Generator gen(2);
  const Tensor<float> cpu = heed::randn<float>({2, 3}, gen);
  const Tensor<float> device = cpu.to(gpu);
  CHECK_ERROR(heed::DeviceError, "add: operands on different devices: (2, 3) on cpu, (2, 3) on cuda:0",
              heed::add(cpu, device));
  CHECK_ERROR(heed::DeviceError, "matmul", heed::matmul(device, heed::randn<float>({3, 2}, gen)));
  CHECK_ERROR(heed::DeviceError, "masked_softmax",
              heed::masked_softmax(heed::randn<float>({2, 2, 3}, gen).to(gpu), heed::IndexTensor({1, 2}, {2})));
  // An op without a CUDA implementation refuses rather than copying through the host.
  CHECK_ERROR(heed::DeviceError, "has no implementation on cuda:0", heed::pow(device, device));
  CHECK_ERROR(heed::DeviceError, "cat: tensor 1 of shape (2, 3) is on cpu, tensor 0 on cuda:0",
              heed::cat<float>({device, cpu}));
  CHECK_ERROR(heed::DeviceError, "index_select: operands on different devices",
              heed::index_select(device, 0, heed::IndexTensor({1}, {1})));
  CHECK_ERROR(heed::DeviceError, "is on cuda:0", device.data());
  CHECK_ERROR(heed::DeviceError, "cuda:7 is not available", cpu.to(Device::cuda(7)));
}

TEMPLATE_TEST_CASE("DotProductAttention runs on the device and matches the CPU", "[cuda]", float, double) {
  using T = TestType;
  heed::Generator gen(7);
  heed::DotProductAttention<T> attention_cpu, attention_gpu;
  const heed::IndexTensor valid_lens({2, 6}, {2});
  check_module<T>({{2, 3, 8}, {2, 6, 8}, {2, 6, 5}}, gen, [&](const std::vector<Tensor<T>>& x) {
    const bool on_gpu = x[0].is_cuda();
    heed::DotProductAttention<T>& attention = on_gpu ? attention_gpu : attention_cpu;
    return attention(x[0], x[1], x[2], valid_lens.to(x[0].device()));
  });
  check_matches(attention_cpu.attention_weights(), attention_gpu.attention_weights());
}

TEMPLATE_TEST_CASE("an embedding index out of range gives NaN on the device", "[cuda]", float, double) {
  // The CPU refuses it (IndexError); a kernel cannot throw, so the row is NaN instead.
  using T = TestType;
  heed::Generator gen(20);
  const Tensor<T> out = heed::embedding(heed::randn<T>({3, 2}, gen).to(gpu), heed::IndexTensor({1, 3}, {2}).to(gpu));
  const std::vector<T> values = out.to_vector();
  CHECK(!std::isnan(values[0]));
  CHECK(std::isnan(values[2]));
}

TEMPLATE_TEST_CASE("an index_select index out of range gives NaN on the device", "[cuda]", float, double) {
  // As embedding's: the CPU refuses it, the device's rows of it are NaN.
  using T = TestType;
  heed::Generator gen(21);
  const Tensor<T> x = heed::randn<T>({2, 3, 2}, gen);
  const heed::IndexTensor index({2, 3, -1}, {3});
  const std::vector<T> rows = heed::index_select(x.to(gpu), 1, index.to(gpu)).to_vector();
  CHECK(rows[0] == x.to_vector()[4]);                              // x[0, 2, 0]
  for (std::size_t i = 2; i < 6; ++i) CHECK(std::isnan(rows[i]));  // x[0, 3] and x[0, −1]
  CHECK(rows[6] == x.to_vector()[10]);                             // x[1, 2, 0]
}

TEST_CASE("a module moves to the device in place, with its gradients", "[cuda]") {
  heed::Generator gen(8);
  heed::Linear<float> layer(4, 3, true, gen);
  const Tensor<float> x = heed::randn<float>({2, 4}, gen);
  const Tensor<float> expected = layer(x);
  expected.backward(heed::ones<float>({2, 3}));
  const std::vector<Tensor<float>> handles = layer.parameters();  // as an optimiser holds them
  layer.to(gpu);
  CHECK(layer.device() == gpu);
  for (const auto& p : handles) {
    CHECK(p.device() == gpu);
    REQUIRE(p.grad().defined());
    CHECK(p.grad().device() == gpu);
  }
  check_matches(expected.detach(), layer(x.to(gpu)).detach());
  layer.to(Device::cpu());
  CHECK(handles[0].device() == Device::cpu());
}

TEST_CASE("the caching allocator serves a steady loop without new allocations", "[cuda]") {
  heed::Generator gen(9);
  const Tensor<float> w = heed::randn<float>({64, 64}, gen).to(gpu).requires_grad_();
  const Tensor<float> x = heed::randn<float>({8, 64}, gen).to(gpu);
  auto step = [&] {
    Tensor<float> y = heed::matmul(x, w) + x;
    y.backward(heed::ones<float>({8, 64}).to(gpu));
  };
  step();
  step();
  const std::size_t mallocs = heed::cuda::malloc_count(0);
  for (int i = 0; i < 5; ++i) step();
  CHECK(heed::cuda::malloc_count(0) == mallocs);
  CHECK(heed::cuda::allocated_bytes(0) > 0);
}

TEST_CASE("TF32 and bf16 products stay within their documented tolerance", "[cuda]") {
  heed::Generator gen(10);
  const Tensor<float> a = heed::randn<float>({4, 64, 64}, gen), b = heed::randn<float>({4, 64, 64}, gen);
  const Tensor<float> expected = heed::bmm(a, b);
  for (auto [mode, tol] : {std::pair{heed::cuda::MathMode::tf32, 1e-2}, std::pair{heed::cuda::MathMode::bf16, 5e-2}}) {
    heed::cuda::set_math_mode(mode);
    const Tensor<float> got = heed::bmm(a.to(gpu), b.to(gpu));
    heed::cuda::set_math_mode(heed::cuda::MathMode::float32);
    check_matches(expected, got, tol);
  }
}

TEMPLATE_TEST_CASE("MultiHeadAttention runs on the device and matches the CPU", "[cuda]", float, double) {
  using T = TestType;
  for (index_t num_kv_heads : {0, 2}) {  // plain multi-head, and grouped-query attention
    INFO("num_kv_heads = " << num_kv_heads);
    heed::Generator init_cpu(12), init_gpu(12), gen(13);
    heed::MultiHeadAttention<T> cpu(6, 5, 7, 8, 4, 0.0, true, num_kv_heads, init_cpu);
    heed::MultiHeadAttention<T> device(6, 5, 7, 8, 4, 0.0, true, num_kv_heads, init_gpu);
    device.to(gpu);
    const heed::IndexTensor valid_lens({3, 2, 4, 1, 5, 5}, {2, 3});
    check_module<T>({{2, 3, 5}, {2, 5, 6}, {2, 5, 7}}, gen, [&](const std::vector<Tensor<T>>& x) {
      heed::MultiHeadAttention<T>& attention = x[0].is_cuda() ? device : cpu;
      return attention(x[0], x[1], x[2], valid_lens.to(x[0].device()));
    });
    check_matches(cpu.attention_weights(), device.attention_weights());
    const auto cpu_params = cpu.named_parameters(), gpu_params = device.named_parameters();
    REQUIRE(cpu_params.size() == gpu_params.size());
    for (std::size_t i = 0; i < cpu_params.size(); ++i) {
      INFO("gradient of " << cpu_params[i].first);
      check_matches(cpu_params[i].second.grad(), gpu_params[i].second.grad());
    }
  }
}

TEMPLATE_TEST_CASE("factories make tensors on the device asked for", "[cuda]", float, double) {
  using T = TestType;
  CHECK(heed::zeros<T>({2, 3}, gpu).to_vector() == std::vector<T>(6, T(0)));
  CHECK(heed::full<T>({4}, T(2.5), gpu).to_vector() == std::vector<T>(4, T(2.5)));
  const Tensor<T> ones = heed::ones_like(heed::zeros<T>({3}, gpu));
  CHECK(ones.device() == gpu);
  CHECK(ones.to_vector() == std::vector<T>(3, T(1)));
  CHECK(heed::full<std::int64_t>({2}, 7, gpu).to_vector() == std::vector<std::int64_t>{7, 7});
}

TEMPLATE_TEST_CASE("Adam and gradient clipping on the device follow the CPU", "[cuda]", float, double) {
  using T = TestType;
  heed::Generator gen(22);
  for (double weight_decay : {0.0, 0.01}) {
    Tensor<T> cpu = heed::randn<T>({4, 5}, gen).requires_grad_();
    Tensor<T> device = cpu.detach().to(gpu).requires_grad_();
    heed::Adam<T> adam_cpu({cpu}, 0.01, 0.9, 0.999, 1e-8, weight_decay);
    heed::Adam<T> adam_gpu({device}, 0.01, 0.9, 0.999, 1e-8, weight_decay);
    for (int step = 0; step < 3; ++step) {
      const Tensor<T> target = heed::randn<T>({4, 5}, gen);
      adam_cpu.zero_grad();
      adam_gpu.zero_grad();
      ((cpu - target) * (cpu - target)).sum().backward();
      ((device - target.to(gpu)) * (device - target.to(gpu))).sum().backward();
      const T norm_cpu = heed::clip_grad_norm(std::vector<Tensor<T>>{cpu}, 1.0);
      const T norm_gpu = heed::clip_grad_norm(std::vector<Tensor<T>>{device}, 1.0);
      CHECK(static_cast<double>(norm_gpu) == Approx(static_cast<double>(norm_cpu)).epsilon(tolerance<T>()));
      check_matches(cpu.grad(), device.grad());
      adam_cpu.step();
      adam_gpu.step();
      check_matches(cpu.detach(), device.detach());
    }
    CHECK(adam_gpu.state()[0].exp_avg.device() == gpu);
  }
}

TEST_CASE("gradient clipping refuses gradients split between the host and a device", "[cuda]") {
  Tensor<float> on_host = heed::tensor<float>({3, 4}).requires_grad_();
  Tensor<float> on_device = heed::tensor<float>({1, 2}).to(gpu).requires_grad_();
  (on_host * on_host).sum().backward();
  (on_device * on_device).sum().backward();
  for (const auto& params :
       {std::vector<Tensor<float>>{on_host, on_device}, std::vector<Tensor<float>>{on_device, on_host}}) {
    CHECK_ERROR(heed::DeviceError, "clip_grad_norm", heed::clip_grad_norm(params, 1.0));
    CHECK_ERROR(heed::DeviceError, "clip_grad_norm", heed::clip_grad_norm_(params, 1.0));
  }
  // Nothing was scaled: d sum(x²) / dx = 2x.
  CHECK(on_host.grad().to_vector() == std::vector<float>{6, 8});
  CHECK(on_device.grad().to(heed::Device::cpu()).to_vector() == std::vector<float>{2, 4});
}

TEST_CASE("the d2l Transformer trains on the device with the CPU's loss curve", "[cuda]") {
  // Dropout included: the device draws the CPU's masks. In double, so that the curves
  // agree closely after several epochs of Adam.
  using T = double;
  using Net = heed::EncoderDecoder<T, heed::TransformerEncoder<T>, heed::TransformerDecoder<T>>;
  auto make_net = [](const heed::NmtData& data) {
    heed::Generator init(23);
    heed::TransformerOptions options;
    options.generator = &init;
    return std::make_unique<Net>(
        std::make_unique<heed::TransformerEncoder<T>>(data.src_vocab.size(), 16, 16, 16, 16, Shape{16}, 16, 32, 4, 2,
                                                      0.1, false, options),
        std::make_unique<heed::TransformerDecoder<T>>(data.tgt_vocab.size(), 16, 16, 16, 16, Shape{16}, 16, 32, 4, 2,
                                                      0.1, options));
  };
  check_trains_alike<Net>(make_net, 3, 4, 24);
}

TEST_CASE("bf16 mixed-precision training on the device follows the CPU's", "[cuda]") {
  // TrainOptions::precision bf16 on a device: the products an AutocastGuard rounds on the
  // CPU (the same size rule) take bf16 operands on the device too, summed in fp32
  // (cuBLAS's tensor cores; the emulation rounds the operands as the CPU does). So the
  // first step's loss (its forward, before any update: training amplifies whatever
  // differs, the fp32 sums' order too) agrees far closer than either with fp32's.
  using T = float;
  using Net = heed::EncoderDecoder<T, heed::TransformerEncoder<T>, heed::TransformerDecoder<T>>;
  const auto train = [&](Device device, heed::Precision precision) {
    heed::NmtData data = heed::load_data_nmt_text(heed::builtin_fra_eng(), 64, 10, 256, /*seed=*/5);
    heed::Generator init(51);
    heed::TransformerOptions transformer;
    transformer.generator = &init;
    Net net(std::make_unique<heed::TransformerEncoder<T>>(data.src_vocab.size(), 32, 32, 32, 32, Shape{32}, 32, 64, 4,
                                                          2, 0.1, false, transformer),
            std::make_unique<heed::TransformerDecoder<T>>(data.tgt_vocab.size(), 32, 32, 32, 32, Shape{32}, 32, 64, 4,
                                                          2, 0.1, transformer));
    net.to(device);
    heed::TrainOptions options;
    heed::Generator order(52);
    options.generator = &order;
    options.precision = precision;
    options.max_steps = 1;
    heed::manual_seed(53);  // dropout's generator
    return heed::train_seq2seq<T>(net, data.data_iter, 0.005, 1, data.tgt_vocab, options).losses.at(0);
  };
  const double cpu_bf16 = train(Device::cpu(), heed::Precision::bf16);
  const double gpu_bf16 = train(gpu, heed::Precision::bf16);
  const double gpu_fp32 = train(gpu, heed::Precision::fp32);
  INFO("CPU bf16 " << cpu_bf16 << ", device bf16 " << gpu_bf16 << ", device fp32 " << gpu_fp32);
  CHECK(gpu_bf16 == Approx(cpu_bf16).epsilon(1e-5));
  CHECK(std::abs(gpu_bf16 - gpu_fp32) > 10 * std::abs(gpu_bf16 - cpu_bf16));
}

TEST_CASE("a Transformer on the device translates as on the CPU", "[cuda]") {
  // Greedy, beam search, sampling, a target prefix and the attention weights, in double,
  // by a net trained until its sentences end at different steps (so that rows leave
  // the batch: the caches' rows are reordered on the device). The same tokens, and log P
  // and weights within 1e-9: the device multiplies and takes its softmax in another
  // order than the CPU's packed products and fused attention.
  using T = double;
  using Net = heed::EncoderDecoder<T, heed::TransformerEncoder<T>, heed::TransformerDecoder<T>>;
  heed::NmtData data = heed::load_data_nmt_text(heed::builtin_fra_eng(), 16, 10, 64, /*seed=*/3);
  heed::Generator init(31), train_gen(32);
  heed::TransformerOptions transformer;
  transformer.generator = &init;
  Net net(std::make_unique<heed::TransformerEncoder<T>>(data.src_vocab.size(), 16, 16, 16, 16, Shape{16}, 16, 32, 4, 2,
                                                        0.0, false, transformer),
          std::make_unique<heed::TransformerDecoder<T>>(data.tgt_vocab.size(), 16, 16, 16, 16, Shape{16}, 16, 32, 4, 2,
                                                        0.0, transformer));
  heed::TrainOptions train;
  train.generator = &train_gen;
  heed::train_seq2seq<T>(net, data.data_iter, 0.005, 60, data.tgt_vocab, train);
  const std::vector<std::string> sentences = {"go .", "i lost .", "he's calm .", "i'm home .", "we won ."};
  std::vector<heed::PredictOptions> settings(4);
  settings[0].save_attention_weights = false;  // greedy
  settings[1].beam_size = 3;
  settings[1].n_best = 2;
  settings[1].save_attention_weights = false;
  settings[2].sample = true;
  settings[2].beam_size = 2;
  settings[2].top_k = 5;
  settings[3].target_prefix = std::vector<std::vector<std::string>>(sentences.size(), {"je"});
  settings[3].min_length = 3;
  const auto translate_all = [&] {
    heed::Generator gen(33);
    settings[2].generator = &gen;
    std::vector<std::vector<heed::Translation<T>>> all;
    for (const heed::PredictOptions& options : settings)
      all.push_back(heed::predict_seq2seq(net, sentences, data.src_vocab, data.tgt_vocab, 10, options));
    return all;
  };
  const auto cpu = translate_all();
  net.to(gpu);
  const auto device = translate_all();
  std::set<std::size_t> lengths;
  for (std::size_t s = 0; s < settings.size(); ++s)
    for (std::size_t i = 0; i < sentences.size(); ++i) {
      INFO("setting " << s << ", sentence " << i);
      REQUIRE(device[s][i].n_best.size() == cpu[s][i].n_best.size());
      for (std::size_t h = 0; h < cpu[s][i].n_best.size(); ++h) {
        CHECK(device[s][i].n_best[h].tokens == cpu[s][i].n_best[h].tokens);
        CHECK(device[s][i].n_best[h].log_prob == Approx(cpu[s][i].n_best[h].log_prob).epsilon(1e-9));
        lengths.insert(cpu[s][i].n_best[h].tokens.size());
      }
      if (!settings[s].save_attention_weights) continue;
      // The weights come back to the CPU with the hypothesis.
      for (const auto& [on_device, on_cpu] : {std::pair{device[s][i].cross_attention, cpu[s][i].cross_attention},
                                              std::pair{device[s][i].self_attention, cpu[s][i].self_attention},
                                              std::pair{device[s][i].encoder_attention, cpu[s][i].encoder_attention}}) {
        REQUIRE(on_device.device() == Device::cpu());
        check_matches(on_cpu, on_device.to(gpu), 1e-9);
      }
    }
  CHECK(lengths.size() >= 3);  // sentences ended at different steps
}

TEST_CASE("a Bahdanau seq2seq trains and translates on the device as on the CPU", "[cuda]") {
  // The GRU layers (gru_layer's cell kernels) and the attention decoder's step-by-step
  // path on the device, against the CPU's fused attention_gru: two layers, dropout
  // between them and on the attention weights (the same masks), in double. Then a
  // longer-trained net translates on both: the same tokens, log P and weights.
  using T = double;
  using Net = heed::EncoderDecoder<T, heed::Seq2SeqEncoder<T>, heed::Seq2SeqAttentionDecoder<T>>;
  auto make_net = [](const heed::NmtData& data) {
    heed::Generator init(41);
    return std::make_unique<Net>(
        std::make_unique<heed::Seq2SeqEncoder<T>>(data.src_vocab.size(), 16, 16, 2, 0.1, init),
        std::make_unique<heed::Seq2SeqAttentionDecoder<T>>(data.tgt_vocab.size(), 16, 16, 2, 0.1, init));
  };
  auto trained = check_trains_alike<Net>(make_net, 4, 3, 42);
  std::unique_ptr<Net>& net_cpu = trained.first;
  heed::NmtData& data_cpu = trained.second;

  // Trained on the CPU until its sentences end at different steps, then moved.
  heed::TrainOptions options;
  heed::Generator order(44);
  options.generator = &order;
  heed::train_seq2seq<T>(*net_cpu, data_cpu.data_iter, 0.01, 60, data_cpu.tgt_vocab, options);
  const std::vector<std::string> sentences = {"go .", "i lost .", "he's calm .", "i'm home .", "we won ."};
  std::vector<heed::PredictOptions> settings(3);
  settings[1].beam_size = 3;
  settings[1].n_best = 2;
  settings[2].sample = true;
  settings[2].top_k = 4;
  const auto translate_all = [&] {
    heed::Generator gen(44);
    settings[2].generator = &gen;
    std::vector<std::vector<heed::Translation<T>>> all;
    for (const heed::PredictOptions& setting : settings)
      all.push_back(heed::predict_seq2seq(*net_cpu, sentences, data_cpu.src_vocab, data_cpu.tgt_vocab, 10, setting));
    return all;
  };
  const auto on_cpu = translate_all();
  net_cpu->to(gpu);
  const auto on_device = translate_all();
  std::set<std::size_t> lengths;
  for (std::size_t s = 0; s < settings.size(); ++s)
    for (std::size_t i = 0; i < sentences.size(); ++i) {
      INFO("setting " << s << ", sentence " << i);
      REQUIRE(on_device[s][i].n_best.size() == on_cpu[s][i].n_best.size());
      for (std::size_t h = 0; h < on_cpu[s][i].n_best.size(); ++h) {
        const heed::Hypothesis<T>& expected = on_cpu[s][i].n_best[h];
        const heed::Hypothesis<T>& got = on_device[s][i].n_best[h];
        CHECK(got.tokens == expected.tokens);
        CHECK(got.log_prob == Approx(expected.log_prob).epsilon(1e-9));
        lengths.insert(expected.tokens.size());
        REQUIRE(expected.cross_attention.defined());
        REQUIRE(got.cross_attention.device() == Device::cpu());
        check_matches(expected.cross_attention, got.cross_attention.to(gpu), 1e-9);
      }
    }
  CHECK(lengths.size() >= 3);  // sentences ended at different steps
}

TEMPLATE_TEST_CASE("decoding's token choice on the device is the CPU's", "[cuda]", float, double) {
  // Rows of rounded logits (ties: the lower token first), some −inf, tokens banned in
  // every row and <eos> in some; 1, 3 and 16 tokens a row, and more than a row allows.
  using T = TestType;
  const index_t rows = 6, V = 300, eos = 2;
  heed::Generator gen(35);
  std::vector<T> logits = heed::randn<T>({rows, V}, gen).to_vector();
  for (std::size_t i = 0; i < logits.size(); ++i) logits[i] = std::round(logits[i] * 4) / 4;
  for (index_t j = 0; j < V - 5; ++j) logits[static_cast<std::size_t>(5 * V + j)] = -INFINITY;  // row 5: 5 tokens left
  const std::vector<index_t> banned = {0, 1, 7};
  const heed::IndexTensor banned_there = heed::IndexTensor(banned, Shape{3}).to(gpu);
  const std::vector<std::int64_t> eos_banned = {1, 0, 0, 1, 0, 0};
  const Tensor<T> on_device = Tensor<T>(logits, Shape{rows, 1, V}).to(gpu);
  for (const std::size_t count : {std::size_t(1), std::size_t(3), std::size_t(16)}) {
    std::vector<heed::detail::TopToken<T>> device(rows * count), cpu(rows * count);
    std::vector<std::size_t> device_found(rows), cpu_found(rows);
    heed::detail::top_log_probs_on_device(on_device, rows, V, count, banned_there, eos_banned, eos, device.data(),
                                          device_found.data());
    for (index_t r = 0; r < rows; ++r) {
      INFO(count << " tokens, row " << r);
      std::vector<T> row(logits.begin() + r * V, logits.begin() + (r + 1) * V);
      std::vector<index_t> forbidden = banned;
      if (eos_banned[static_cast<std::size_t>(r)]) forbidden.push_back(eos);
      cpu_found[r] = heed::detail::top_log_probs(row.data(), V, cpu.data() + r * count, count, forbidden);
      REQUIRE(device_found[r] == cpu_found[r]);
      CHECK(device_found[r] == (r == 5 ? std::min<std::size_t>(count, 5) : count));
      for (std::size_t k = 0; k < cpu_found[r]; ++k) {
        CHECK(device[r * count + k].token == cpu[r * count + k].token);
        CHECK(device[r * count + k].log_prob == Approx(cpu[r * count + k].log_prob).epsilon(1e-5));
      }
    }
  }
  CHECK_ERROR(heed::ValueError, "top_log_probs: 17 tokens a row on cuda:0, at most 16",
              heed::detail::top_log_probs_on_device(on_device, rows, V, 17, banned_there, eos_banned, eos,
                                                    static_cast<heed::detail::TopToken<T>*>(nullptr), nullptr));
}

TEMPLATE_TEST_CASE("sampling's draw on the device is the CPU's", "[cuda]", float, double) {
  // sample_token against its kernel with the same uniform draws: temperatures, top_k of
  // 0 (all), 1, 5 (with ties at the threshold: rounded logits) and 16, banned tokens,
  // <eos> banned in some rows, a row of 5 tokens left and one of none.
  using T = TestType;
  const index_t rows = 7, V = 300, eos = 2;
  heed::Generator gen(36);
  std::vector<T> logits = heed::randn<T>({rows, V}, gen).to_vector();
  for (std::size_t i = 0; i < logits.size(); ++i) logits[i] = std::round(logits[i] * 4) / 4;
  for (index_t j = 0; j < V - 5; ++j) logits[static_cast<std::size_t>(5 * V + j)] = -INFINITY;  // row 5: 5 tokens left
  for (index_t j = 0; j < V; ++j)
    if (j != 0 && j != 7) logits[static_cast<std::size_t>(6 * V + j)] = -INFINITY;  // row 6: only banned ones
  const std::vector<index_t> banned = {0, 1, 7};
  const heed::IndexTensor banned_there = heed::IndexTensor(banned, Shape{3}).to(gpu);
  const std::vector<std::int64_t> eos_banned = {1, 0, 0, 1, 0, 0, 0};
  const Tensor<T> on_device = Tensor<T>(logits, Shape{rows, 1, V}).to(gpu);
  for (const double temperature : {1.0, 0.7})
    for (const index_t top_k : {0, 1, 5, 16}) {
      heed::PredictOptions options;
      options.sample = true;
      options.temperature = temperature;
      options.top_k = top_k;
      std::vector<double> uniforms;
      for (index_t r = 0; r < rows; ++r)
        uniforms.push_back(heed::Generator(static_cast<std::uint64_t>(100 + r)).uniform());
      std::vector<heed::detail::TopToken<T>> device(rows), cpu(rows);
      std::vector<std::size_t> device_found(rows);
      heed::detail::sample_tokens_on_device(on_device, rows, V, banned_there, eos_banned, eos, temperature, top_k,
                                            uniforms, device.data(), device_found.data());
      std::set<index_t> chosen;
      for (index_t r = 0; r < rows; ++r) {
        INFO("temperature " << temperature << ", top_k " << top_k << ", row " << r);
        std::vector<T> row(logits.begin() + r * V, logits.begin() + (r + 1) * V);
        std::vector<index_t> forbidden = banned;
        if (eos_banned[static_cast<std::size_t>(r)]) forbidden.push_back(eos);
        heed::Generator draws(static_cast<std::uint64_t>(100 + r));
        heed::detail::SampleScratch scratch;
        const std::size_t found =
            heed::detail::sample_token(row.data(), V, cpu.data() + r, forbidden, options, draws, scratch);
        REQUIRE(device_found[static_cast<std::size_t>(r)] == found);
        CHECK(found == (r == 6 ? 0u : 1u));
        if (!found) continue;
        CHECK(device[static_cast<std::size_t>(r)].token == cpu[static_cast<std::size_t>(r)].token);
        CHECK(device[static_cast<std::size_t>(r)].log_prob ==
              Approx(cpu[static_cast<std::size_t>(r)].log_prob).epsilon(1e-5));
        chosen.insert(cpu[static_cast<std::size_t>(r)].token);
      }
      CHECK(chosen.size() >= (top_k == 1 ? 2u : 4u));  // the draws differ
    }
  CHECK_ERROR(heed::ValueError,
              "sample_token: top_k 17 on cuda:0 must be in [0, 16] and the temperature positive, got 1",
              heed::detail::sample_tokens_on_device(on_device, rows, V, banned_there, eos_banned, eos, 1.0, 17,
                                                    std::vector<double>(rows),
                                                    static_cast<heed::detail::TopToken<T>*>(nullptr), nullptr));
}

TEST_CASE("a Translator moves to the device and translates there", "[cuda]") {
  heed::TranslatorConfig config;  // d2l's Transformer, untrained
  config.num_steps = 6;
  const heed::Vocab src({{"go", "."}, {"i", "lost", "."}}, 0, {"<pad>", "<bos>", "<eos>"});
  const heed::Vocab tgt({{"va", "!"}, {"j'ai", "perdu", "."}}, 0, {"<pad>", "<bos>", "<eos>"});
  heed::Generator gen(34);
  heed::Translator translator(config, src, tgt, {}, &gen);
  heed::PredictOptions options;
  options.beam_size = 2;
  const auto cpu = translator.translate({"go .", "i lost ."}, options);
  CHECK(&translator.to(gpu) == &translator);
  CHECK(translator.device() == gpu);
  const auto device = translator.translate({"go .", "i lost ."}, options);
  for (std::size_t i = 0; i < cpu.size(); ++i) CHECK(device[i].tokens == cpu[i].tokens);
  translator.to(Device::cpu());
  translator.convert_weights_(heed::Precision::int8);
  CHECK_ERROR(heed::ValueError, "Translator::to: the weights were converted to int8, which runs on the CPU only",
              translator.to(gpu));
  CHECK(translator.device() == Device::cpu());
}

TEMPLATE_TEST_CASE("AdditiveAttention runs on the device and matches the CPU", "[cuda]", float, double) {
  using T = TestType;
  heed::Generator init_cpu(26), init_gpu(26), gen(27);
  heed::AdditiveAttention<T> cpu(6, 5, 8, 0.0, init_cpu), device(6, 5, 8, 0.0, init_gpu);
  device.to(gpu);
  const heed::IndexTensor valid_lens({2, 4}, {2});
  check_module<T>({{2, 3, 5}, {2, 4, 6}, {2, 4, 7}}, gen, [&](const std::vector<Tensor<T>>& x) {
    heed::AdditiveAttention<T>& attention = x[0].is_cuda() ? device : cpu;
    return attention(x[0], x[1], x[2], valid_lens.to(x[0].device()));
  });
  const auto cpu_params = cpu.named_parameters(), gpu_params = device.named_parameters();
  for (std::size_t i = 0; i < cpu_params.size(); ++i) {
    INFO("gradient of " << cpu_params[i].first);
    check_matches(cpu_params[i].second.grad(), gpu_params[i].second.grad());
  }
}

TEST_CASE("device tensors print as PyTorch's, with their device", "[cuda]") {
  std::ostringstream os;
  os << heed::Tensor<float>({1, 2.5f}, {2}).to(gpu);
  CHECK(os.str() == "tensor([1.0000, 2.5000], device='cuda:0')");
  std::ostringstream os2;
  os2 << heed::Tensor<double>({1, 2}, {2}).to(gpu).requires_grad_();
  CHECK(os2.str() == "tensor([1., 2.], device='cuda:0', dtype=float64, requires_grad=True)");
}

#if __has_include(<nlohmann/json.hpp>)
TEST_CASE("a module on the device saves and loads checkpoints", "[cuda]") {
  heed::Generator gen_a(28), gen_b(29);
  heed::Linear<float> a(4, 3, true, gen_a), b(4, 3, true, gen_b);
  a.to(gpu);
  b.to(gpu);
  const std::string path = "heed_cuda_checkpoint_test.safetensors";
  heed::save_checkpoint(a, path);
  heed::load_checkpoint(b, path);
  std::remove(path.c_str());
  CHECK(b.device() == gpu);
  const auto pa = a.named_parameters(), pb = b.named_parameters();
  for (std::size_t i = 0; i < pa.size(); ++i) {
    INFO(pa[i].first);
    CHECK(pb[i].second.device() == gpu);
    CHECK(pa[i].second.to_vector() == pb[i].second.to_vector());
  }
}
#endif
