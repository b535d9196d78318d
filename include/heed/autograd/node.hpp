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

#include "heed/detail/header_begin.hpp"

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
struct Node;

/// Where the gradient of one input of a node goes: to the node that produced the input,
/// or into the .grad() of a leaf. An edge does not hold the input's data: the graph
/// keeps alive only what backward functions saved, as PyTorch's does, so an
/// intermediate result is freed as soon as nothing else uses it.
template <typename T>
struct Edge {
  std::shared_ptr<Node<T>> grad_fn;  // the op that produced the input; null for a leaf
  Tensor<T> leaf;                    // the leaf itself; undefined for an op's result
  Shape shape;                       // the input's, which its gradient must have

  bool defined() const { return grad_fn != nullptr || leaf.defined(); }
};

template <typename T>
struct Node {
  using BackwardFn = std::function<Grads<T>(const Tensor<T>& grad_output)>;

  const char* name;
  std::vector<Edge<T>> inputs;  // undefined where that input needs no gradient
  BackwardFn backward;          // empty once the graph is freed
  Shape output_shape;

  // Engine bookkeeping for one backward pass.
  Tensor<T> grad_output;
  std::size_t pending = 0;
  std::uint64_t visit_mark = 0;

  Node() = default;
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;
  /// Frees the nodes upstream with heed::detail::release_graph's loop, not recursion.
  ~Node() {
    for (Edge<T>& edge : inputs)
      if (edge.grad_fn != nullptr) heed::detail::release_graph(std::move(edge.grad_fn));
  }
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
  explicit SavedTensor(const Tensor<T>& t) : tensor_(t.detach()), version_(heed::detail::impl(t).storage->version()) {}
  const Tensor<T>& get() const {
    HEED_CHECK(heed::detail::impl(tensor_).storage->version() == version_, AutogradError,
               "a tensor saved for backward was modified by an in-place operation (version ", version_, " -> ",
               heed::detail::impl(tensor_).storage->version(), ")");
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
    node->inputs.resize(inputs.size());
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      const Tensor<T>& input = inputs[i];
      if (!input.requires_grad()) continue;
      Edge<T>& edge = node->inputs[i];
      edge.grad_fn = heed::detail::impl(input).grad_fn;
      if (edge.grad_fn == nullptr) edge.leaf = input;
      edge.shape = input.shape();
    }
    node->backward = std::forward<Fn>(backward);
    node->output_shape = out.shape();
    heed::detail::impl(out).grad_fn = std::move(node);
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

#include "heed/detail/header_end.hpp"
