// heed/optim/sgd.hpp — stochastic gradient descent, as torch.optim.SGD.
//
//   heed::SGD<float> trainer(net.parameters(), /*lr=*/0.5);
//   trainer.zero_grad();
//   loss.backward();
//   trainer.step();
//
// With momentum μ and weight decay λ (both 0 by default), PyTorch's update:
//   g ← grad + λ p;  b ← μ b + g (b = g at the first step);  p ← p − lr · b
// Parameters without a gradient (not reached by backward) are left alone.
#pragma once

#include "heed/detail/header_begin.hpp"

#include <vector>

#include "heed/autograd/node.hpp"
#include "heed/ops/elementwise.hpp"
#include "heed/optim/trainable.hpp"

namespace heed {

template <typename T>
class SGD {
 public:
  SGD(std::vector<Tensor<T>> params, double lr, double momentum = 0.0, double weight_decay = 0.0)
      : params_(std::move(params)), lr_(lr), momentum_(momentum), weight_decay_(weight_decay) {
    HEED_CHECK(lr >= 0.0, ValueError, "SGD: learning rate must be non-negative, got ", lr);
    HEED_CHECK(momentum >= 0.0, ValueError, "SGD: momentum must be non-negative, got ", momentum);
    HEED_CHECK(weight_decay >= 0.0, ValueError, "SGD: weight_decay must be non-negative, got ", weight_decay);
    detail::check_trainable(params_, "SGD");
    momentum_buffers_.resize(params_.size());
  }

  /// One update of every parameter that has a gradient.
  void step() {
    NoGradGuard no_grad;
    for (std::size_t i = 0; i < params_.size(); ++i) {
      Tensor<T>& p = params_[i];
      Tensor<T> g = p.grad();
      if (!g.defined()) continue;
      if (weight_decay_ != 0.0) g = g + p * static_cast<T>(weight_decay_);
      if (momentum_ != 0.0) {
        Tensor<T>& buffer = momentum_buffers_[i];
        if (!buffer.defined())
          buffer = g.clone();
        else
          buffer.mul_(static_cast<T>(momentum_)).add_(g);
        g = buffer;
      }
      p.sub_(g, static_cast<T>(lr_));
    }
  }

  /// Forgets every parameter's gradient.
  void zero_grad() {
    for (auto& p : params_) p.zero_grad();
  }

  double lr() const { return lr_; }
  void set_lr(double lr) {
    HEED_CHECK(lr >= 0.0, ValueError, "SGD: learning rate must be non-negative, got ", lr);
    lr_ = lr;
  }
  const std::vector<Tensor<T>>& params() const { return params_; }

 private:
  std::vector<Tensor<T>> params_;
  std::vector<Tensor<T>> momentum_buffers_;
  double lr_, momentum_, weight_decay_;
};

}  // namespace heed

#include "heed/detail/header_end.hpp"
