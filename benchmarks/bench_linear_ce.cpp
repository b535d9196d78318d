// bench_linear_ce — the decoder's output layer and the masked loss of a training step,
// forward and backward: linear then masked_softmax_ce_loss (the logits and their
// gradient held whole) against masked_linear_ce_loss (heed/ops/linear_cross_entropy.hpp).
//
// The shape is the realistic Transformer's (compare_scale.py): a batch of 128 sequences of
// 12 steps, 128 hidden, a target vocabulary of 9,807 words. Args: whether every step
// counts (1) or each sequence's valid length is 3 to 12 (0, as in a batch of real
// sentences). The counter peak_MiB is the most tensor memory in use during a call
// (heed::buffer_usage().peak_in_use, reset before each).
#include <benchmark/benchmark.h>

#include <cstdint>

#include <heed/heed.hpp>

namespace {

using heed::index_t;

constexpr index_t kBatch = 128, kSteps = 12, kHidden = 128, kVocab = 9807;

struct Inputs {
  heed::Tensor<float> hidden, weight, bias;
  heed::IndexTensor labels, valid_len;
};

Inputs make_inputs(bool full) {
  heed::Generator gen(7);
  Inputs in;
  in.hidden = heed::randn<float>({kBatch, kSteps, kHidden}, gen).requires_grad_(true);
  in.weight = heed::mul(heed::randn<float>({kVocab, kHidden}, gen), 0.05f).detach().requires_grad_(true);
  in.bias = heed::mul(heed::randn<float>({kVocab}, gen), 0.05f).detach().requires_grad_(true);
  in.labels = heed::detail::make_tensor<std::int64_t>(heed::Shape{kBatch, kSteps});
  for (index_t i = 0; i < kBatch * kSteps; ++i) in.labels.data()[i] = (i * 7919) % kVocab;
  in.valid_len = heed::detail::make_tensor<std::int64_t>(heed::Shape{kBatch});
  for (index_t b = 0; b < kBatch; ++b) in.valid_len.data()[b] = full ? kSteps : 3 + (b * 7) % 10;
  return in;
}

template <typename Step>
void run(benchmark::State& state, Step&& step) {
  Inputs in = make_inputs(state.range(0) != 0);
  double peak = 0;
  for (auto _ : state) {
    heed::reset_buffer_peaks();
    heed::Tensor<float> loss = step(in);
    loss.backward();
    peak = static_cast<double>(heed::buffer_usage().peak_in_use) / (1 << 20);
    in.hidden.zero_grad();
    in.weight.zero_grad();
    in.bias.zero_grad();
  }
  state.counters["peak_MiB"] = peak;
}

void BM_LinearThenMaskedCE(benchmark::State& state) {
  run(state, [](const Inputs& in) {
    return heed::sum(
        heed::masked_softmax_ce_loss(heed::linear(in.hidden, in.weight, in.bias), in.labels, in.valid_len));
  });
}

void BM_MaskedLinearCE(benchmark::State& state) {
  run(state, [](const Inputs& in) {
    return heed::sum(heed::masked_linear_ce_loss(in.hidden, in.weight, in.bias, in.labels, in.valid_len));
  });
}

BENCHMARK(BM_LinearThenMaskedCE)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_MaskedLinearCE)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
