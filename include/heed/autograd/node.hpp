// heed/autograd/node.hpp — the recorded graph: one Node per differentiable op result.
//
// An op whose inputs need gradients records a Node on its output: the inputs it
// differentiates with respect to, and a backward function that maps d loss / d output
// to d loss / d input for each of them. Ops write:
//
//   if (autograd::needs_grad(x)) {
//     autograd::record(out, "ExpBackward", {x},
//         [y = autograd::save(out)](const Tensor<T>& grad) {   // y = exp(x)
//           return autograd::Grads<T>{grad * y.get()};          // dx = grad · exp(x)
//         });
//   }
//
// Backward functions run with grad mode off and return gradients shaped like their
// inputs (an undefined tensor for an input that needs none).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "heed/core/tensor.hpp"

namespace heed {

namespace autograd {

/// Whether ops record the graph, per thread (on by default).
class GradMode {
 public:
  static bool is_enabled() { return flag(); }
  static void set_enabled(bool enabled) { flag() = enabled; }

 private:
  static bool& flag() {
    thread_local bool enabled = true;
    return enabled;
  }
};

template <typename T>
using Grads = std::vector<Tensor<T>>;

template <typename T>
struct Node {
  using BackwardFn = std::function<Grads<T>(const Tensor<T>& grad_output)>;

  const char* name;
  std::vector<Tensor<T>> inputs;  // undefined where that input needs no gradient
  BackwardFn backward;            // empty once the graph is freed
  Shape output_shape;

  // Engine bookkeeping for one backward pass.
  Tensor<T> grad_output;
  std::size_t pending = 0;
  std::uint64_t visit_mark = 0;
};

/// True when an op on these inputs must record a node.
template <typename T, typename... Rest>
bool needs_grad(const Tensor<T>& first, const Rest&... rest) {
  if constexpr (!std::is_floating_point_v<T>) {
    return false;  // integer and bool tensors never require grad
  } else {
    if (!GradMode::is_enabled()) return false;
    return first.requires_grad() || (rest.requires_grad() || ...);
  }
}

/// A tensor kept for backward, with the storage version it had when saved: using it
/// after an in-place write to that storage is an error, never a wrong gradient.
template <typename T>
class SavedTensor {
 public:
  SavedTensor() = default;
  explicit SavedTensor(const Tensor<T>& t) : tensor_(t.detach()), version_(t.impl().storage->version()) {}
  const Tensor<T>& get() const {
    HEED_CHECK(tensor_.impl().storage->version() == version_, AutogradError,
               "a tensor saved for backward was modified by an in-place operation (version ", version_, " -> ",
               tensor_.impl().storage->version(), ")");
    return tensor_;
  }

 private:
  Tensor<T> tensor_;
  std::uint64_t version_ = 0;
};

template <typename T>
SavedTensor<T> save(const Tensor<T>& t) {
  return SavedTensor<T>(t);
}

/// Attaches a node to `out`: `inputs` in the order the backward function returns
/// their gradients. Call only when needs_grad(inputs...) is true. Ops that also serve
/// integer and bool tensors (the shape ops) pass a generic lambda, `(const auto& g)`,
/// whose body is then never compiled for those types.
template <typename T, typename Fn>
void record(Tensor<T>& out, const char* name, std::vector<Tensor<T>> inputs, Fn&& backward) {
  if constexpr (std::is_floating_point_v<T>) {
    auto node = std::make_shared<Node<T>>();
    node->name = name;
    for (auto& input : inputs)
      if (!input.requires_grad()) input = Tensor<T>();
    node->inputs = std::move(inputs);
    node->backward = std::forward<Fn>(backward);
    node->output_shape = out.shape();
    out.impl().grad_fn = std::move(node);
  } else {
    (void)out, (void)name, (void)inputs, (void)backward;
  }
}

}  // namespace autograd

/// Turns graph recording off for its scope (inference, optimiser steps):
///   { heed::NoGradGuard no_grad; w.sub_(w.grad(), lr); }
class NoGradGuard {
 public:
  NoGradGuard() : previous_(autograd::GradMode::is_enabled()) { autograd::GradMode::set_enabled(false); }
  ~NoGradGuard() { autograd::GradMode::set_enabled(previous_); }
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool previous_;
};

template <typename T>
std::string Tensor<T>::grad_fn_name() const {
  return impl().grad_fn ? impl().grad_fn->name : "";
}

}  // namespace heed
