// heed/autograd/engine.hpp — Tensor::backward(): one reverse pass over the graph.
//
// The pass counts, for every node reachable from the output, how many consumers will
// send it a gradient; it then runs each node once all of them have (reverse
// topological order), sums what arrives for every input, and adds the result into the
// .grad() of leaves that require it. Unless retain_graph, each node drops its inputs
// and saved tensors as soon as it has run, so the graph is freed by the pass itself.
//
// While a LeafGradients is installed on a thread (LeafGradientsScope), backward on
// that thread adds leaf gradients there instead of into .grad(): several threads can
// then back-propagate through graphs that share parameters (train_seq2seq's
// micro-batches), each into its own sums, and the sums be added in a fixed order.
#pragma once

#include "heed/detail/header_begin.hpp"

#include <atomic>
#include <unordered_map>
#include <vector>

#include "heed/autograd/node.hpp"
#include "heed/core/factory.hpp"
#include "heed/ops/elementwise.hpp"
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
  heed::detail::add_scaled_on_host(sum.data(), g.data(), g.numel(), T(1));
}

/// Adds g into `sum`. On first arrival `sum` keeps g itself when it is the sole owner,
/// and a copy otherwise: g may be shared with another input's gradient (add passes one
/// gradient to both its inputs) or with the caller.
template <typename T>
void accumulate_gradient(Tensor<T>& sum, Tensor<T>&& g) {
  if (!sum.defined()) {
    sum = sole_owner(g) ? std::move(g) : heed::detail::copy_of(g);
  } else {
    add_into(sum, g);
    heed::detail::impl(sum).storage->bump_version();
  }
}

}  // namespace detail

/// The gradients one thread's backward passes computed for leaves, summed per leaf,
/// apart from the leaves' .grad() (see the top of this file). It holds each leaf it has
/// a sum for, so that the leaf outlives the sum.
template <typename T>
class LeafGradients {
 public:
  /// The sum for `leaf`; undefined when no gradient reached it.
  Tensor<T> of(const Tensor<T>& leaf) const {
    const auto it = sums_.find(&heed::detail::impl(leaf));
    return it == sums_.end() ? Tensor<T>() : it->second.sum;
  }
  void clear() { sums_.clear(); }
  /// Calls f(leaf, sum) for every leaf a gradient reached, in no particular order.
  template <typename F>
  void for_each(F&& f) {
    for (auto& [impl, entry] : sums_) f(entry.leaf, entry.sum);
  }
  /// Adds g into the sum for `leaf` (backward's part).
  void add(const Tensor<T>& leaf, Tensor<T>&& g) {
    Entry& entry = sums_[&heed::detail::impl(leaf)];
    if (!entry.leaf.defined()) entry.leaf = leaf;
    detail::accumulate_gradient(entry.sum, std::move(g));
  }

  /// The LeafGradients installed on this thread, or null.
  static LeafGradients*& current() {
    thread_local LeafGradients* installed = nullptr;
    return installed;
  }

 private:
  struct Entry {
    Tensor<T> leaf, sum;
  };
  std::unordered_map<const heed::detail::TensorImpl<T>*, Entry> sums_;
};

/// Installs `sums` on this thread for the scope's lifetime (and the previous one after).
template <typename T>
class LeafGradientsScope {
 public:
  explicit LeafGradientsScope(LeafGradients<T>& sums) : previous_(LeafGradients<T>::current()) {
    LeafGradients<T>::current() = &sums;
  }
  ~LeafGradientsScope() { LeafGradients<T>::current() = previous_; }
  LeafGradientsScope(const LeafGradientsScope&) = delete;
  LeafGradientsScope& operator=(const LeafGradientsScope&) = delete;

 private:
  LeafGradients<T>* previous_;
};

namespace detail {

/// Adds g into the leaf's .grad(), or into this thread's LeafGradients when one is
/// installed.
template <typename T>
void accumulate_into_leaf(const Tensor<T>& leaf, Tensor<T>&& g) {
  if (LeafGradients<T>* sums = LeafGradients<T>::current())
    sums->add(leaf, std::move(g));
  else
    accumulate_gradient(heed::detail::impl(leaf).grad, std::move(g));
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
  heed::detail::check_defined(root, "backward", "the output");
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
    accumulate_into_leaf(root, std::move(seed));
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
          accumulate_into_leaf(input.leaf, std::move(grads[i]));
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
