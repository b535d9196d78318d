// heed/nn/sequential.hpp — modules applied one after another, as torch.nn.Sequential.
//
//   heed::Sequential net(std::make_unique<heed::Linear<float>>(4, 8),        // Sequential<float>, deduced
//                        std::make_unique<heed::ActivationLayer<float>>(heed::Activation::relu),
//                        std::make_unique<heed::Linear<float>>(8, 1));
//   heed::Tensor<float> y = net(X);  // X: (B, 4) → y: (B, 1)
//   net.named_parameters();          // "0.weight", "0.bias", "2.weight", "2.bias", as PyTorch's
//
// Each module is called as module(x) on one Tensor<T> and returns one (Linear, Dropout,
// LayerNorm, ActivationLayer, PositionWiseFFN, another Sequential, a module of your
// own). Children are named by their index, as nn.Sequential(a, b) names them, or as
// given to push_back, as nn.Sequential(OrderedDict(...)) does. Unlike ModuleList, the
// modules may be of different types: each is kept with the call that runs it.
#pragma once

#include "heed/detail/header_begin.hpp"

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "heed/nn/module.hpp"

namespace heed {

template <typename T>
class Sequential : public Module<T> {
 public:
  Sequential() : Module<T>("Sequential") {}

  /// The modules appended in order; with the deduction guide below, T comes from the
  /// first module.
  template <typename M, typename... Ms>
  explicit Sequential(std::unique_ptr<M> first, std::unique_ptr<Ms>... rest) : Sequential() {
    append(std::move(first));
    (append(std::move(rest)), ...);
  }

  /// Adds a module named by its index, "0", "1", …, as torch.nn.Sequential.append.
  template <typename M>
  M& append(std::unique_ptr<M> module) {
    return add("append", std::to_string(size()), std::move(module));
  }

  /// Adds a module under `name` (names as nn.Sequential(OrderedDict(...)) gives them).
  template <typename M>
  M& push_back(const std::string& name, std::unique_ptr<M> module) {
    return add("push_back", name, std::move(module));
  }

  /// x through every module in order; x itself when there are none, as PyTorch's.
  Tensor<T> forward(const Tensor<T>& x) const {
    detail::check_defined(x, "Sequential", "x");
    Tensor<T> out = x;
    for (const Step& step : steps_) out = step.call(out);
    return out;
  }
  Tensor<T> operator()(const Tensor<T>& x) const { return forward(x); }

  std::size_t size() const { return steps_.size(); }
  bool empty() const { return steps_.empty(); }
  /// Module i (net[i] in PyTorch); an IndexError past the end.
  Module<T>& operator[](std::size_t i) { return *steps_[checked(i)].module; }
  const Module<T>& operator[](std::size_t i) const { return *steps_[checked(i)].module; }

 private:
  struct Step {
    std::unique_ptr<Module<T>> module;
    std::function<Tensor<T>(const Tensor<T>&)> call;  // the module's own operator(), not virtual in heed
  };

  template <typename M>
  M& add(const char* op, const std::string& name, std::unique_ptr<M> module) {
    static_assert(std::is_base_of_v<Module<T>, M>, "Sequential<T> holds modules derived from Module<T>");
    static_assert(std::is_invocable_r_v<Tensor<T>, const M&, const Tensor<T>&>,
                  "Sequential<T> calls each module as module(x) with one Tensor<T>, returning a Tensor<T>");
    HEED_CHECK(module != nullptr, ValueError, "Sequential.", op, ": module '", name, "' is null");
    M& child = *module;
    this->register_module(name, child);  // throws for a taken or malformed name, before anything is kept
    const M* callee = &child;
    steps_.push_back(Step{std::move(module), [callee](const Tensor<T>& x) { return (*callee)(x); }});
    return child;
  }

  std::size_t checked(std::size_t i) const {
    HEED_CHECK(i < steps_.size(), IndexError, "Sequential: index ", i, " out of range for ", steps_.size(), " modules");
    return i;
  }

  std::vector<Step> steps_;
};

/// Sequential(std::make_unique<Linear<float>>(2, 3), ...) is a Sequential<float>.
template <typename M, typename... Ms>
Sequential(std::unique_ptr<M>, std::unique_ptr<Ms>...) -> Sequential<detail::module_value_t<M>>;

}  // namespace heed

#include "heed/detail/header_end.hpp"
