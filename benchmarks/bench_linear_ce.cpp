// bench_linear_ce — the decoder's output layer and the masked loss of a training step,
// forward and backward: linear then masked_softmax_ce_loss (the logits and their
// gradient held whole) against masked_linear_ce_loss (heed/ops/linear_cross_entropy.hpp).
//
// The shape is the realistic Transformer's (compare_scale.py): a batch of 128 sequences of
// 12 steps, 128 hidden, a target vocabulary of 9,807 words. Args: whether every step
// counts (1) or each sequence's valid length is 3 to 12 (0, as in a batch of real
// sentences); the batch (128, or 64: one of training's two micro-batches). The counter
// peak_MiB is the most tensor memory in use during a call (heed::buffer_usage().peak_in_use,
// reset before each). BM_MaskedLinearCE's backward gets a uniform upstream gradient (the
// loss summed), so it hands out the gradient formed with the forward; with
// BM_MaskedLinearCERecompute's, not uniform, the backward computes the logits again.
#include <benchmark/benchmark.h>

#include <cstdint>

#include <heed/heed.hpp>

namespace {

using heed::index_t;

constexpr index_t kSteps = 12, kHidden = 128, kVocab = 9807;

struct Inputs {
  heed::Tensor<float> hidden, weight, bias;
  heed::IndexTensor labels, valid_len;
};

Inputs make_inputs(bool full, index_t batch) {
  heed::Generator gen(7);
  Inputs in;
  in.hidden = heed::randn<float>({batch, kSteps, kHidden}, gen).requires_grad_(true);
  in.weight = heed::mul(heed::randn<float>({kVocab, kHidden}, gen), 0.05f).detach().requires_grad_(true);
  in.bias = heed::mul(heed::randn<float>({kVocab}, gen), 0.05f).detach().requires_grad_(true);
  in.labels = heed::detail::make_tensor<std::int64_t>(heed::Shape{batch, kSteps});
  for (index_t i = 0; i < batch * kSteps; ++i) in.labels.data()[i] = (i * 7919) % kVocab;
  in.valid_len = heed::detail::make_tensor<std::int64_t>(heed::Shape{batch});
  for (index_t b = 0; b < batch; ++b) in.valid_len.data()[b] = full ? kSteps : 3 + (b * 7) % 10;
  return in;
}

template <typename Step>
void run(benchmark::State& state, Step&& step, bool uniform = true) {
  Inputs in = make_inputs(state.range(0) != 0, state.range(1));
  heed::Tensor<float> upstream = heed::ones<float>({1});
  if (!uniform) {
    upstream = heed::ones<float>({state.range(1)});
    upstream.data()[0] = 0.5f;
  }
  double peak = 0;
  for (auto _ : state) {
    heed::reset_buffer_peaks();
    heed::Tensor<float> loss = step(in);
    if (uniform)
      heed::sum(loss).backward();
    else
      loss.backward(upstream);
    peak = static_cast<double>(heed::buffer_usage().peak_in_use) / (1 << 20);
    in.hidden.zero_grad();
    in.weight.zero_grad();
    in.bias.zero_grad();
  }
  state.counters["peak_MiB"] = peak;
}

void BM_LinearThenMaskedCE(benchmark::State& state) {
  run(state, [](const Inputs& in) {
    return heed::masked_softmax_ce_loss(heed::linear(in.hidden, in.weight, in.bias), in.labels, in.valid_len);
  });
}

heed::Tensor<float> masked_linear_ce(const Inputs& in) {
  return heed::masked_linear_ce_loss(in.hidden, in.weight, in.bias, in.labels, in.valid_len);
}

void BM_MaskedLinearCE(benchmark::State& state) { run(state, masked_linear_ce); }

void BM_MaskedLinearCERecompute(benchmark::State& state) { run(state, masked_linear_ce, false); }

// {every step counts, batch}
void shapes(benchmark::internal::Benchmark* b) {
  b->ArgNames({"full", "batch"})->Args({0, 128})->Args({1, 128})->Args({0, 64});
  b->Unit(benchmark::kMillisecond)->UseRealTime();
}

BENCHMARK(BM_LinearThenMaskedCE)->Apply(shapes);
BENCHMARK(BM_MaskedLinearCE)->Apply(shapes);
BENCHMARK(BM_MaskedLinearCERecompute)->Apply(shapes);

}  // namespace
