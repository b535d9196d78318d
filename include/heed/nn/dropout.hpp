// heed/nn/dropout.hpp — Dropout as a module: active in training mode only.
//
//   heed::Dropout<float> dropout(0.1);
//   y = dropout(x);   // training: elements zeroed with p = 0.1, the rest scaled by 1/0.9
//   dropout.eval();
//   y = dropout(x);   // eval: y is x
//
// The draws come from default_generator() unless a generator is given; seed it with
// heed::manual_seed for repeatable runs.
#pragma once

#include "heed/detail/header_begin.hpp"

#include <string>

#include "heed/nn/module.hpp"
#include "heed/ops/dropout.hpp"

namespace heed {

template <typename T>
class Dropout : public Module<T> {
 public:
  explicit Dropout(double p = 0.5, Generator* gen = nullptr) : Module<T>("Dropout"), p_(p), gen_(gen) {
    HEED_CHECK(p >= 0.0 && p <= 1.0, ValueError, "Dropout: probability must be in [0, 1], got ", p);
  }

  // x: any shape -> same shape
  Tensor<T> forward(const Tensor<T>& x) const { return dropout(x, p_, this->is_training(), generator()); }
  Tensor<T> operator()(const Tensor<T>& x) const { return forward(x); }

  double p() const { return p_; }
  /// The generator the masks are drawn from.
  Generator& generator() const { return gen_ ? *gen_ : default_generator(); }
  std::string extra_repr() const override { return detail::concat("p=", p_, ", inplace=False"); }

 private:
  double p_;
  Generator* gen_;
};

}  // namespace heed

#include "heed/detail/header_end.hpp"
