// benchmarks/cuda/bench_cuda.cpp — heed's CUDA backend timed on a GPU, against the
// ceilings measured in the same run: a device-to-device copy for the memory-bound
// softmax kernels, cuBLAS called directly for bmm, and heed on the CPU for training.
// Run by benchmarks/cuda/run.sh after the CUDA tests; prints a table last.
//
//   bench_cuda [--quick]     --quick: smaller sizes (a smoke test)
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <heed/cuda/runtime.hpp>
#include <heed/heed.hpp>

#include "timing.hpp"

namespace {

using heed::Device;
using heed::index_t;
using heed::Shape;
using heed::Tensor;

const Device gpu = Device::cuda();

struct Row {
  std::string what, measured, reference, ratio, goal;
};
std::vector<Row> table;

/// Keeps a row for the table printed last, and prints it now: a crash later keeps it.
void add_row(Row row) {
  std::printf("  %s: %s %s %s\n", row.what.c_str(), row.measured.c_str(), row.reference.c_str(), row.ratio.c_str());
  std::fflush(stdout);
  table.push_back(std::move(row));
}

std::string format(const char* pattern, double value) {
  char text[64];
  std::snprintf(text, sizeof text, pattern, value);
  return text;
}

using heed_bench::seconds;

void check_cublas(cublasStatus_t status, const char* call) {
  if (status != CUBLAS_STATUS_SUCCESS) throw std::runtime_error(std::string(call) + " failed");
}

/// masked_softmax forward and backward on scores of `shape` (batch, queries, keys), in
/// GB/s against a device copy of the same bytes. with_valid_lens: also a forward with half
/// the keys masked, and the copy's own row. Rows over 1024 keys take the block kernels.
void softmax_vs_copy(const Shape& shape, bool with_valid_lens) {
  heed::Generator gen(1);
  const Tensor<float> scores = heed::rand<float>(shape, gen).to(gpu);
  const double bytes = static_cast<double>(scores.numel()) * sizeof(float);
  Tensor<float> copy = heed::zeros<float>(shape, gpu);
  const double t_copy = seconds([&] { copy.copy_(scores); }, 10);
  const double copy_gbs = 2 * bytes / t_copy / 1e9;
  const std::string name = heed::to_string(shape);
  if (with_valid_lens) add_row({"device-to-device copy " + name, format("%.0f GB/s", copy_gbs), "", "", ""});
  const auto add = [&](const std::string& what, double gbs) {
    add_row({what, format("%.0f GB/s", gbs), format("%.0f GB/s", copy_gbs), format("%.0f %%", 100 * gbs / copy_gbs),
             ">= 70 %"});
  };

  Tensor<float> weights;
  add("masked_softmax forward " + name, 2 * bytes / seconds([&] { weights = heed::masked_softmax(scores); }, 10) / 1e9);
  if (with_valid_lens) {
    const heed::IndexTensor valid_lens = heed::full<std::int64_t>({shape[0]}, shape[-1] / 2, gpu);
    add("masked_softmax forward, valid_lens " + name,  // counts every element
        2 * bytes / seconds([&] { weights = heed::masked_softmax(scores, valid_lens); }, 10) / 1e9);
  }
  const Tensor<float> g = heed::rand<float>(shape, gen).to(gpu);
  add("masked_softmax backward " + name,
      3 * bytes / seconds([&] { heed::detail::softmax_backward(g, weights, 2); }, 10) / 1e9);
}

void bmm_vs_cublas(index_t batch, index_t m, index_t k, index_t n) {
  heed::Generator gen(2);
  const Tensor<float> a = heed::randn<float>({batch, m, k}, gen).to(gpu),
                      b = heed::randn<float>({batch, k, n}, gen).to(gpu);
  Tensor<float> c = heed::zeros<float>({batch, m, n}, gpu);
  Tensor<float> out;
  const double t_heed = seconds([&] { out = heed::bmm(a, b); }, 20);
  cublasHandle_t handle;
  check_cublas(cublasCreate(&handle), "cublasCreate");
  const float one = 1, zero = 0;
  const double t_cublas = seconds(
      [&] {
        // Row-major C = A·B is column-major Cᵀ = Bᵀ·Aᵀ.
        check_cublas(
            cublasGemmStridedBatchedEx(
                handle, CUBLAS_OP_N, CUBLAS_OP_N, static_cast<int>(n), static_cast<int>(m), static_cast<int>(k), &one,
                heed::detail::device_data(b), CUDA_R_32F, static_cast<int>(n), k * n, heed::detail::device_data(a),
                CUDA_R_32F, static_cast<int>(k), m * k, &zero, heed::detail::device_data(c), CUDA_R_32F,
                static_cast<int>(n), m * n, static_cast<int>(batch), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
            "cublasGemmStridedBatchedEx");
        check_cublas(cudaDeviceSynchronize() == cudaSuccess ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_EXECUTION_FAILED,
                     "cudaDeviceSynchronize");
      },
      20);
  cublasDestroy(handle);
  const double flops = 2.0 * static_cast<double>(batch * m * n * k);
  char what[96];
  std::snprintf(what, sizeof what, "bmm (%lld, %lld, %lld) @ (%lld, %lld, %lld)", static_cast<long long>(batch),
                static_cast<long long>(m), static_cast<long long>(k), static_cast<long long>(batch),
                static_cast<long long>(k), static_cast<long long>(n));
  add_row({what, format("%.1f TFLOP/s", flops / t_heed / 1e12), format("%.1f TFLOP/s", flops / t_cublas / 1e12),
           format("%.0f %%", 100 * t_cublas / t_heed), ">= 95 %"});
}

void multi_head_attention(index_t batch, index_t steps, index_t hidden, index_t heads) {
  heed::Generator gen(3);
  heed::MultiHeadAttention<float> attention(hidden, hidden, hidden, hidden, heads, 0.0, false, 0, gen);
  attention.to(gpu);
  attention.keep_attention_weights(false);
  const Tensor<float> x = heed::randn<float>({batch, steps, hidden}, gen).to(gpu).requires_grad_();
  const heed::IndexTensor valid_lens = heed::full<std::int64_t>({batch}, steps, gpu);
  const Tensor<float> g = heed::randn<float>({batch, steps, hidden}, gen).to(gpu);
  const double t_forward = seconds(
      [&] {
        heed::NoGradGuard no_grad;
        attention(x, x, x, valid_lens);
      },
      5);
  const double t_both = seconds([&] { attention(x, x, x, valid_lens).backward(g); }, 5);
  // Matrix products: 4 projections and 2 attention products forward, twice that backward.
  const double forward_flops = 2.0 * static_cast<double>(batch * steps) *
                               (4.0 * static_cast<double>(hidden * hidden) + 2.0 * static_cast<double>(steps * hidden));
  char what[96];
  std::snprintf(what, sizeof what, "MultiHeadAttention B=%lld L=%lld d=%lld h=%lld", static_cast<long long>(batch),
                static_cast<long long>(steps), static_cast<long long>(hidden), static_cast<long long>(heads));
  add_row({std::string(what) + " forward", format("%.2f ms", 1e3 * t_forward),
           format("%.1f TFLOP/s", forward_flops / t_forward / 1e12), "", ""});
  add_row({std::string(what) + " forward+backward", format("%.2f ms", 1e3 * t_both),
           format("%.1f TFLOP/s", 3 * forward_flops / t_both / 1e12), "", ""});
}

/// d2l's Transformer (or a wider one) trained on the built-in corpus, tokens per second.
double training_tokens_per_second(Device device, index_t hidden, index_t ffn, index_t heads, index_t epochs) {
  using Net = heed::EncoderDecoder<float, heed::TransformerEncoder<float>, heed::TransformerDecoder<float>>;
  heed::NmtData data = heed::load_data_nmt_text(heed::builtin_fra_eng(), 64, 10, 600, 1);
  Net net(std::make_unique<heed::TransformerEncoder<float>>(data.src_vocab.size(), hidden, hidden, hidden, hidden,
                                                            Shape{hidden}, hidden, ffn, heads, 2, 0.1),
          std::make_unique<heed::TransformerDecoder<float>>(data.tgt_vocab.size(), hidden, hidden, hidden, hidden,
                                                            Shape{hidden}, hidden, ffn, heads, 2, 0.1));
  net.to(device);
  heed::TrainOptions options;
  return heed::train_seq2seq<float>(net, data.data_iter, 0.005, epochs, data.tgt_vocab, options).tokens_per_second;
}

void training(index_t hidden, index_t ffn, index_t heads, index_t epochs) {
  const double on_gpu = training_tokens_per_second(gpu, hidden, ffn, heads, epochs);
  const double on_cpu = training_tokens_per_second(Device::cpu(), hidden, ffn, heads, epochs);
  char what[96];
  std::snprintf(what, sizeof what, "Transformer training, %lld hidden, ffn %lld, %lld heads",
                static_cast<long long>(hidden), static_cast<long long>(ffn), static_cast<long long>(heads));
  add_row({what, format("%.0f tokens/s", on_gpu), format("%.0f tokens/s (CPU)", on_cpu),
           format("%.1f x", on_gpu / on_cpu), ""});
}

}  // namespace

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  if (heed::cuda_device_count() == 0) {
    std::printf("bench_cuda: no CUDA device: nothing to time\n");
    return 77;
  }
  cudaDeviceProp props;
  cudaGetDeviceProperties(&props, 0);
  std::printf("bench_cuda on %s (%d SMs)%s\n", props.name, props.multiProcessorCount, quick ? ", quick sizes" : "");
  try {
    const index_t n = quick ? 256 : 1024;
    softmax_vs_copy({n, n, n}, true);
    softmax_vs_copy({1, quick ? 4096 : 65536, quick ? 2048 : 8192}, false);       // the block kernels
    bmm_vs_cublas(quick ? 16 : 256, quick ? 256 : 1024, 64, quick ? 256 : 1024);  // scores Q Kᵀ per head
    bmm_vs_cublas(quick ? 16 : 256, quick ? 256 : 1024, quick ? 256 : 1024, 64);  // weights · V
    bmm_vs_cublas(quick ? 4 : 32, quick ? 256 : 2048, quick ? 256 : 2048, quick ? 256 : 2048);
    multi_head_attention(quick ? 2 : 16, quick ? 128 : 1024, quick ? 256 : 1024, 16);
    training(32, 64, 4, quick ? 2 : 10);    // d2l's sizes: launch-bound on a GPU
    training(256, 1024, 8, quick ? 1 : 5);  // wider
  } catch (const std::exception& e) {
    std::printf("bench_cuda: %s\n", e.what());
    return 1;
  }
  std::printf("\n%-62s %-18s %-24s %-8s %s\n", "what", "heed", "reference", "ratio", "goal");
  for (const Row& r : table)
    std::printf("%-62s %-18s %-24s %-8s %s\n", r.what.c_str(), r.measured.c_str(), r.reference.c_str(), r.ratio.c_str(),
                r.goal.c_str());
  return 0;
}
