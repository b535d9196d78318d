// heed/optim/adam.hpp — Adam, exactly as torch.optim.Adam (PyTorch 1.13, amsgrad=False,
// the default single-tensor path).
//
//   heed::Adam<float> optimizer(net.parameters(), /*lr=*/0.005);   // d2l's train_seq2seq
//   optimizer.zero_grad();
//   loss.backward();
//   optimizer.step();
//
// Per parameter p with gradient g, at its own step count t (1 at its first update):
//   g ← g + λ p                                  (weight_decay λ, 0 by default)
//   m ← β1 m + (1 − β1) g;   v ← β2 v + (1 − β2) g²
//   p ← p − lr / (1 − β1^t) · m / (√v / √(1 − β2^t) + eps)
// The bias corrections and the step size are computed in double, as PyTorch does in
// Python; the tensor arithmetic runs in T with the scalars rounded to T, in PyTorch's
// operation order, so float runs follow PyTorch's float trajectory. They agree to the
// last bit or so, not always exactly: PyTorch's AVX2 kernels fuse the multiply-adds of
// the moment updates (one rounding instead of two), its plain kernels do not, and
// neither does heed (a per-element std::fma would not vectorise). Parameters
// without a gradient (not reached by backward) are skipped and their step count stays.
#pragma once

#include "heed/detail/header_begin.hpp"

#include <cmath>
#include <cstdint>
#include <vector>

#include "heed/autograd/node.hpp"
#include "heed/detail/parallel.hpp"
#include "heed/ops/elementwise.hpp"
#include "heed/optim/trainable.hpp"

namespace heed {

/// What Adam keeps for one parameter (torch's state[p]: step, exp_avg, exp_avg_sq).
/// The tensors are undefined until the parameter's first update.
template <typename T>
struct AdamState {
  std::int64_t step = 0;
  Tensor<T> exp_avg;     // m, shaped like the parameter
  Tensor<T> exp_avg_sq;  // v, shaped like the parameter
};

template <typename T>
class Adam {
  static_assert(std::is_floating_point_v<T>, "heed::Adam<T> needs a floating-point T");

 public:
  Adam(std::vector<Tensor<T>> params, double lr = 1e-3, double beta1 = 0.9, double beta2 = 0.999, double eps = 1e-8,
       double weight_decay = 0.0)
      : params_(std::move(params)), beta1_(beta1), beta2_(beta2), eps_(eps), weight_decay_(weight_decay) {
    set_lr(lr);
    // PyTorch's checks, with its wording.
    HEED_CHECK(eps >= 0.0, ValueError, "Adam: invalid epsilon value: ", eps);
    HEED_CHECK(beta1 >= 0.0 && beta1 < 1.0, ValueError, "Adam: invalid beta parameter at index 0: ", beta1);
    HEED_CHECK(beta2 >= 0.0 && beta2 < 1.0, ValueError, "Adam: invalid beta parameter at index 1: ", beta2);
    HEED_CHECK(weight_decay >= 0.0, ValueError, "Adam: invalid weight_decay value: ", weight_decay);
    detail::check_trainable(params_, "Adam");
    state_.resize(params_.size());
  }

  /// One update of every parameter that has a gradient. On the CPU the elementwise
  /// updates of all parameters run as one parallel pass, cut into chunks (every element
  /// is updated by the same arithmetic whatever the thread count).
  void step() {
    NoGradGuard no_grad;
    struct HostUpdate {
      T *param, *exp_avg, *exp_avg_sq;
      const T* grad;
      T step_size, sqrt_bias_correction2;
    };
    std::vector<HostUpdate> updates;
    std::vector<index_t> sizes;
    for (std::size_t i = 0; i < params_.size(); ++i) {
      Tensor<T>& param = params_[i];
      const Tensor<T> grad = param.grad();
      if (!grad.defined()) continue;
      AdamState<T>& s = state_[i];
      if (!s.exp_avg.defined()) {
        s.exp_avg = zeros_like(param);
        s.exp_avg_sq = zeros_like(param);
      }
      HEED_CHECK(s.exp_avg.shape() == param.shape() && s.exp_avg_sq.shape() == param.shape(), ShapeError,
                 "Adam: state of parameter ", i, " has shapes ", to_string(s.exp_avg.shape()), " and ",
                 to_string(s.exp_avg_sq.shape()), " for a parameter of shape ", to_string(param.shape()));
      ++s.step;
      const double step = static_cast<double>(s.step);
      const double bias_correction1 = 1.0 - std::pow(beta1_, step);
      const double bias_correction2 = 1.0 - std::pow(beta2_, step);
      const double step_size = lr_ / bias_correction1;

      detail::check_in_place(param, "Adam.step");  // bumps the version: saved copies of p are stale
      if (detail::on_device("Adam.step", param, grad, s.exp_avg, s.exp_avg_sq)) {
        using detail::device_data;
        detail::kernels_for(param, "Adam.step")
            .adam_step(param.device().index(), device_data(param), device_data(s.exp_avg), device_data(s.exp_avg_sq),
                       device_data(grad), param.numel(),
                       {beta1_, beta2_, weight_decay_, step_size, std::sqrt(bias_correction2), eps_});
        continue;
      }
      updates.push_back({param.data(), s.exp_avg.data(), s.exp_avg_sq.data(), grad.data(), static_cast<T>(step_size),
                         static_cast<T>(std::sqrt(bias_correction2))});
      sizes.push_back(param.numel());
    }
    const T beta1 = static_cast<T>(beta1_), beta2 = static_cast<T>(beta2_), eps = static_cast<T>(eps_);
    const T one_minus_beta1 = static_cast<T>(1.0 - beta1_), one_minus_beta2 = static_cast<T>(1.0 - beta2_);
    const T weight_decay = static_cast<T>(weight_decay_);
    detail::parallel_chunks(detail::chunks_of(sizes), [&](std::size_t, const detail::Chunk& c) {
      using Map = Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>>;
      const HostUpdate& u = updates[c.item];
      const index_t n = c.end - c.begin;
      Map p(u.param + c.begin, n), m(u.exp_avg + c.begin, n), v(u.exp_avg_sq + c.begin, n);
      const Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>> g(u.grad + c.begin, n);
      // Each line one vectorised pass, without temporaries; the order of the products
      // is PyTorch's (add_ with alpha: a + alpha·b; addcmul_: a + (value·b)·c).
      if (weight_decay_ == 0.0) {
        m = m * beta1 + one_minus_beta1 * g;
        v = v * beta2 + (one_minus_beta2 * g) * g;
      } else {
        const auto decayed = g + weight_decay * p;  // grad.add(param, alpha=weight_decay)
        m = m * beta1 + one_minus_beta1 * decayed;
        v = v * beta2 + (one_minus_beta2 * decayed) * decayed;
      }
      // denom = sqrt(v) / sqrt(bias_correction2) + eps;  p.addcdiv_(m, denom, value=-step_size)
      p += (-u.step_size * m) / (v.sqrt() / u.sqrt_bias_correction2 + eps);
    });
  }

  /// Forgets every parameter's gradient.
  void zero_grad() {
    for (auto& p : params_) p.zero_grad();
  }

  double lr() const { return lr_; }
  void set_lr(double lr) {
    HEED_CHECK(lr >= 0.0, ValueError, "Adam: invalid learning rate: ", lr);
    lr_ = lr;
  }
  double beta1() const { return beta1_; }
  double beta2() const { return beta2_; }
  double eps() const { return eps_; }
  double weight_decay() const { return weight_decay_; }
  const std::vector<Tensor<T>>& params() const { return params_; }

  /// The per-parameter state, in the order of params(); writable, for checkpoints.
  const std::vector<AdamState<T>>& state() const { return state_; }
  std::vector<AdamState<T>>& state() { return state_; }

 private:
  std::vector<Tensor<T>> params_;
  std::vector<AdamState<T>> state_;
  double lr_ = 0.0, beta1_, beta2_, eps_, weight_decay_;
};

}  // namespace heed

#include "heed/detail/header_end.hpp"
