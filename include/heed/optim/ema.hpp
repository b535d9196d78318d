// heed/optim/ema.hpp — an exponential moving average of a model's parameters (Marian's
// "exponential smoothing", TensorFlow's ExponentialMovingAverage): after each optimiser
// update, ema = decay·ema + (1 − decay)·param, kept in fp32 beside the parameters. The
// training itself never reads it; a model validated or saved with the averaged weights
// often translates better than the last update's.
//
//   heed::ExponentialMovingAverage ema;
//   ema.start(net.parameters());               // ema = the parameters before the first update
//   for (...) { ...; optimizer.step(); ema.update(net.parameters(), 0.9999); }
//   ema.swap_into(net.parameters());           // validate or save with the averages
//   ema.swap_into(net.parameters());           // and back
//
// train_seq2seq keeps one when TrainOptions::ema_decay > 0 (heed/seq2seq/train.hpp), and
// save_training_checkpoint stores it as "ema.<name>" tensors (heed/io/training_checkpoint.hpp).
// Each element is updated by the same float arithmetic whatever the thread count, so the
// averages' bits depend on the parameters' alone. The averages live on the host: a model
// on a CUDA device has its parameters copied out at each update.
#pragma once

#include "heed/detail/header_begin.hpp"

#include <cstdint>
#include <utility>
#include <vector>

#include "heed/autograd/node.hpp"
#include "heed/detail/parallel.hpp"
#include "heed/ops/elementwise.hpp"

namespace heed {

class ExponentialMovingAverage {
 public:
  /// Whether start() (or set()) has been called.
  bool started() const { return !values_.empty(); }
  /// Updates since start() (those before a resume included, when set() restored them).
  std::int64_t updates() const { return updates_; }
  /// The averages, one fp32 host tensor per parameter, in the parameters' order.
  const std::vector<Tensor<float>>& values() const { return values_; }

  /// ema = the parameters' values now (converted to fp32), 0 updates.
  template <typename T>
  void start(const std::vector<Tensor<T>>& params) {
    std::vector<Tensor<float>> values;
    values.reserve(params.size());
    for (std::size_t i = 0; i < params.size(); ++i) {
      HEED_CHECK(params[i].defined(), ValueError, "ExponentialMovingAverage.start: parameter ", i, " is undefined");
      values.push_back(to_float(params[i]));
    }
    values_ = std::move(values);
    updates_ = 0;
  }

  /// Restores averages saved before (a training checkpoint's): one fp32 host tensor per
  /// parameter, and the updates they hold. ValueError for an undefined tensor, a tensor
  /// on a device, or a negative count.
  void set(std::vector<Tensor<float>> values, std::int64_t updates) {
    HEED_CHECK(updates >= 0, ValueError, "ExponentialMovingAverage.set: updates must be >= 0, got ", updates);
    for (std::size_t i = 0; i < values.size(); ++i)
      HEED_CHECK(values[i].defined() && values[i].device().is_cpu(), ValueError,
                 "ExponentialMovingAverage.set: tensor ", i, " is undefined or not on the host");
    values_ = std::move(values);
    updates_ = updates;
  }

  /// ema = decay·ema + (1 − decay)·param for every parameter, in float, element by
  /// element. decay must be in [0, 1) (ValueError), the parameters those of start()
  /// (as many, of the same shapes: ShapeError), start() called (ValueError).
  template <typename T>
  void update(const std::vector<Tensor<T>>& params, double decay) {
    HEED_CHECK(decay >= 0.0 && decay < 1.0, ValueError,
               "ExponentialMovingAverage.update: decay must be in [0, 1), got ", decay);
    check(params, "ExponentialMovingAverage.update");
    NoGradGuard no_grad;
    std::vector<Tensor<T>> host;  // parameters on a device copied out, alive until read
    std::vector<index_t> sizes;
    for (const Tensor<T>& p : params) {
      host.push_back(host_of(p));
      sizes.push_back(p.numel());
    }
    const float d = static_cast<float>(decay), one_minus_d = static_cast<float>(1.0 - decay);
    detail::parallel_chunks(detail::chunks_of(sizes), [&](std::size_t, const detail::Chunk& c) {
      float* e = values_[c.item].data();
      const T* p = host[c.item].data();
      for (index_t j = c.begin; j < c.end; ++j) e[j] = d * e[j] + one_minus_d * static_cast<float>(p[j]);
    });
    ++updates_;
  }

  /// Exchanges the averages and the parameters' values (converted): called twice, the
  /// parameters are as they were (for float parameters, bit for bit). Checks as update.
  template <typename T>
  void swap_into(const std::vector<Tensor<T>>& params) {
    check(params, "ExponentialMovingAverage.swap_into");
    NoGradGuard no_grad;
    for (std::size_t i = 0; i < params.size(); ++i) {
      Tensor<float> old = to_float(params[i]);
      Tensor<T> averaged = Tensor<T>::empty(params[i].shape());
      for (index_t j = 0; j < averaged.numel(); ++j) averaged.data()[j] = static_cast<T>(values_[i].data()[j]);
      const_cast<Tensor<T>&>(params[i]).copy_(averaged.to(params[i].device()));
      values_[i] = std::move(old);
    }
  }

 private:
  /// The parameter itself on the CPU, else a copy there.
  template <typename T>
  static Tensor<T> host_of(const Tensor<T>& p) {
    return p.device().is_cpu() ? p : p.detach().to(Device::cpu());
  }

  template <typename T>
  static Tensor<float> to_float(const Tensor<T>& p) {
    const Tensor<T> host = host_of(p);
    Tensor<float> out = Tensor<float>::empty(p.shape());
    for (index_t j = 0; j < out.numel(); ++j) out.data()[j] = static_cast<float>(host.data()[j]);
    return out;
  }

  template <typename T>
  void check(const std::vector<Tensor<T>>& params, const char* op) const {
    HEED_CHECK(started(), ValueError, op, ": start() was not called");
    HEED_CHECK(params.size() == values_.size(), ShapeError, op, ": ", params.size(),
               " parameters, the averages are of ", values_.size());
    for (std::size_t i = 0; i < params.size(); ++i)
      HEED_CHECK(params[i].defined() && params[i].shape() == values_[i].shape(), ShapeError, op, ": parameter ", i,
                 " has shape ", params[i].defined() ? to_string(params[i].shape()) : std::string("(undefined)"),
                 ", its average ", to_string(values_[i].shape()));
  }

  std::vector<Tensor<float>> values_;
  std::int64_t updates_ = 0;
};

}  // namespace heed

#include "heed/detail/header_end.hpp"
