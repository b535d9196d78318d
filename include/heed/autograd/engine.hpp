// heed/autograd/engine.hpp — Tensor::backward(): one reverse pass over the graph.
//
// The pass counts, for every node reachable from the output, how many consumers will
// send it a gradient; it then runs each node once all of them have (reverse
// topological order), sums what arrives for every input, and adds the result into the
// .grad() of leaves that require it. Unless retain_graph, each node drops its inputs
// and saved tensors as soon as it has run, so the graph is freed by the pass itself.
#pragma once

#include "heed/detail/header_begin.hpp"

#include <atomic>
#include <vector>

#include "heed/autograd/node.hpp"
#include "heed/core/factory.hpp"
#include "heed/ops/kernels.hpp"

namespace heed {
namespace autograd {
namespace detail {

template <typename T>
void check_gradient_shape(const Tensor<T>& grad, const Shape& expected, const char* what) {
  HEED_CHECK(grad.shape() == expected, AutogradError, what, ": gradient of shape ", to_string(grad.shape()),
             " for a tensor of shape ", to_string(expected));
}

/// True when nothing but this handle reaches g's data (not another input's gradient,
/// not a view, not a tensor of the graph), so that it may be kept or updated in place.
template <typename T>
bool sole_owner(const Tensor<T>& g) {
  return g.use_count() == 1 && heed::detail::impl(g).storage.use_count() == 1 && !heed::detail::impl(g).grad_fn;
}

/// sum += g (same shape), on their device; gradients on different devices are an error.
template <typename T>
void add_into(Tensor<T>& sum, const Tensor<T>& g) {
  if (heed::detail::on_device("backward", sum, g)) {
    heed::detail::kernels_for(sum, "backward")
        .axpy(sum.device().index(), heed::detail::device_data(sum), heed::detail::device_data(g), g.numel(), T(1));
    return;
  }
  sum.array() += g.array();
}

/// Adds g into the leaf's .grad(). On first arrival the leaf keeps g itself when it is
/// the sole owner, and a copy otherwise: g may be shared with another input's gradient
/// (add passes one gradient to both its inputs) or with the caller.
template <typename T>
void accumulate_into_leaf(heed::detail::TensorImpl<T>& leaf, Tensor<T>&& g) {
  if (!leaf.grad.defined()) {
    if (sole_owner(g)) {
      leaf.grad = std::move(g);
      return;
    }
    leaf.grad = heed::detail::copy_of(g);
  } else {
    add_into(leaf.grad, g);
    heed::detail::impl(leaf.grad).storage->bump_version();
  }
}

/// Sums gradients arriving at a node: in place when the node holds the only handle to
/// its running sum, into a new buffer otherwise.
template <typename T>
void accumulate_into_node(Node<T>& node, Tensor<T>&& g) {
  if (!node.grad_output.defined()) {
    node.grad_output = std::move(g);
  } else if (sole_owner(node.grad_output)) {
    add_into(node.grad_output, g);
  } else {
    Tensor<T> sum = heed::detail::copy_of(node.grad_output);
    add_into(sum, g);
    node.grad_output = sum;
  }
}

inline std::uint64_t next_visit_mark() {
  static std::atomic<std::uint64_t> mark{0};
  return ++mark;
}

template <typename T>
void run_backward(const Tensor<T>& root, const Tensor<T>& gradient, bool retain_graph) {
  HEED_CHECK(root.requires_grad(), AutogradError,
             "backward: the tensor does not require grad (no input was marked with requires_grad_(), "
             "or it was computed under NoGradGuard)");
  Tensor<T> seed = gradient;
  if (!seed.defined()) {
    HEED_CHECK(root.numel() == 1, AutogradError, "backward: the output has shape ", to_string(root.shape()),
               "; without an explicit gradient it must hold one element (call sum() or pass a gradient)");
    seed = ones<T>(root.shape(), root.device());
  }
  HEED_CHECK(seed.shape() == root.shape(), ShapeError, "backward: gradient of shape ", to_string(seed.shape()),
             " for an output of shape ", to_string(root.shape()));
  heed::detail::common_device("backward", root, seed);

  NoGradGuard no_grad;
  Node<T>* root_node = heed::detail::impl(root).grad_fn.get();
  if (root_node == nullptr) {  // a leaf: its gradient is the seed itself
    accumulate_into_leaf(heed::detail::impl(root), std::move(seed));
    return;
  }

  // Pass 1: count, for every reachable node, the edges that reach it.
  const std::uint64_t mark = next_visit_mark();
  std::vector<Node<T>*> stack{root_node};
  root_node->visit_mark = mark;
  root_node->pending = 0;
  while (!stack.empty()) {
    Node<T>* node = stack.back();
    stack.pop_back();
    HEED_CHECK(node->backward, AutogradError, "backward: the graph through ", node->name,
               " was already freed by an earlier backward(); pass retain_graph = true to the first call "
               "to go through it twice");
    for (const Edge<T>& input : node->inputs) {
      Node<T>* next = input.grad_fn.get();
      if (next == nullptr) continue;
      if (next->visit_mark != mark) {
        next->visit_mark = mark;
        next->pending = 0;
        next->grad_output = Tensor<T>();  // drop what a pass that threw may have left
        stack.push_back(next);
      }
      ++next->pending;
    }
  }

  // Pass 2: run nodes whose consumers have all delivered, starting at the root. The
  // ready list owns its nodes: freeing a node's inputs may drop the last other owner.
  root_node->grad_output = seed;
  std::vector<std::shared_ptr<Node<T>>> ready{heed::detail::impl(root).grad_fn};
  while (!ready.empty()) {
    std::shared_ptr<Node<T>> node = std::move(ready.back());
    ready.pop_back();
    Tensor<T> grad_output = std::move(node->grad_output);
    node->grad_output = Tensor<T>();
    Grads<T> grads;
    if (grad_output.defined()) {  // undefined when every consumer sent "no gradient"
      try {
        grads = node->backward(grad_output);
      } catch (const AutogradError& e) {
        throw AutogradError(heed::detail::concat("backward of ", node->name, ": ", e.what()));
      }
      HEED_CHECK(grads.size() == node->inputs.size(), AutogradError, node->name, ": backward returned ", grads.size(),
                 " gradients for ", node->inputs.size(), " inputs");
      grad_output = Tensor<T>();  // a gradient that is a view of it may then be kept in place
    }
    for (std::size_t i = 0; i < node->inputs.size(); ++i) {
      const Edge<T>& input = node->inputs[i];
      if (!input.defined()) continue;
      const std::shared_ptr<Node<T>>& next = input.grad_fn;
      if (i < grads.size() && grads[i].defined()) {
        check_gradient_shape(grads[i], input.shape, node->name);
        if (next == nullptr)
          accumulate_into_leaf(heed::detail::impl(input.leaf), std::move(grads[i]));
        else
          accumulate_into_node(*next, std::move(grads[i]));
      }
      if (next != nullptr && --next->pending == 0) ready.push_back(next);
    }
    if (!retain_graph) {
      node->backward = nullptr;
      node->inputs.clear();
    }
  }
}

}  // namespace detail
}  // namespace autograd

template <typename T>
void Tensor<T>::backward(const Tensor& gradient, bool retain_graph) const {
  if constexpr (std::is_floating_point_v<T>) {
    autograd::detail::run_backward(*this, gradient, retain_graph);
  } else {
    (void)gradient;
    (void)retain_graph;
    throw AutogradError(heed::detail::concat("backward: a ", dtype(), " tensor has no gradient"));
  }
}

}  // namespace heed

#include "heed/detail/header_end.hpp"
