// heed/nn/module.hpp — Module<T>: the base of every layer and model, as torch.nn.Module.
//
//   template <typename T>
//   class Scale : public heed::Module<T> {
//    public:
//     Scale() : heed::Module<T>("Scale") { this->register_parameter("w", w); }
//     heed::Tensor<T> forward(const heed::Tensor<T>& x) const { return x * w; }
//     heed::Tensor<T> w = heed::ones<T>({1});
//   };
//
// A module registers its parameters, buffers and child modules by name; the dotted
// names ("W_q.weight") are those of the PyTorch module it mirrors, so parameters and
// checkpoints line up with d2l's state_dict() (state_dict() and load_state_dict() take
// and give them as a name → tensor map). forward() is not virtual: each module
// takes the arguments its d2l counterpart takes, and operator() forwards to it.
//
// Registration keeps pointers to the members, so a module can be neither copied nor
// moved; build it in place (C++17 returns it from a factory without a move) and keep
// collections of modules as std::vector<std::unique_ptr<M>>.
#pragma once

#include "heed/detail/header_begin.hpp"

#include <map>
#include <memory>
#include <ostream>
#include <sstream>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "heed/autograd/node.hpp"
#include "heed/core/tensor.hpp"
#include "heed/ops/device.hpp"

namespace heed {

namespace detail {

/// Whether forwards on this thread keep what modules record for inspection (attention
/// weights). train_seq2seq runs a step's micro-batches through one model on several
/// threads at once; only the first micro-batch's thread keeps them, so that the others
/// do not race to overwrite them and what is kept does not depend on timing.
inline bool& keeps_forward_records() {
  thread_local bool keep = true;
  return keep;
}

/// Sets keeps_forward_records on this thread for its lifetime.
class ForwardRecordsScope {
 public:
  explicit ForwardRecordsScope(bool keep) : saved_(keeps_forward_records()) { keeps_forward_records() = keep; }
  ~ForwardRecordsScope() { keeps_forward_records() = saved_; }
  ForwardRecordsScope(const ForwardRecordsScope&) = delete;
  ForwardRecordsScope& operator=(const ForwardRecordsScope&) = delete;

 private:
  bool saved_;
};

}  // namespace detail

template <typename T>
class Module;

namespace detail {

class LowPrecisionWeight;  // heed/ops/quantized_gemm.hpp

/// T, or when T is void the element type of Net's parameters: train_seq2seq and
/// predict_seq2seq take their type from the model unless one is given.
template <typename T, typename Net>
using model_type_or =
    std::conditional_t<std::is_void_v<T>,
                       typename std::decay_t<decltype(std::declval<const Net&>().parameters())>::value_type::value_type,
                       T>;

}  // namespace detail

template <typename T>
class Module {
 public:
  template <typename V>
  using Named = std::vector<std::pair<std::string, V>>;

  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;
  virtual ~Module() = default;

  /// The learnable tensors of this module and its children, in registration order.
  std::vector<Tensor<T>> parameters() const {
    std::vector<Tensor<T>> result;
    for (auto& [name, p] : named_parameters()) result.push_back(p);
    return result;
  }
  /// The parameters with their dotted names. A tensor registered under several names
  /// (tied weights: tie_parameter) comes once, under the first, as in PyTorch.
  Named<Tensor<T>> named_parameters() const {
    Named<Tensor<T>> all, result;
    collect(&Module::parameters_, "", all);
    for (auto& entry : all) {
      bool seen = false;
      for (auto& kept : result) seen = seen || kept.second.is_same(entry.second);
      if (!seen) result.push_back(std::move(entry));
    }
    return result;
  }
  /// A parameter that may be held in bf16 or int8 for inference instead (Linear's and
  /// Embedding's weight: heed/nn/convert_weights.hpp): the fp32 tensor, undefined once
  /// converted, and the converted weight, null until then.
  struct Convertible {
    Tensor<T>* weight;
    std::shared_ptr<const detail::LowPrecisionWeight>* converted;
  };
  /// The convertible parameters with their dotted names, tied ones under each name.
  Named<Convertible> named_convertibles() const {
    Named<Convertible> result;
    collect_convertibles("", result);
    return result;
  }
  /// The weights held converted, with their dotted names; one shared by several modules
  /// (tied) comes once, under the first.
  Named<std::shared_ptr<const detail::LowPrecisionWeight>> named_converted_weights() const {
    Named<std::shared_ptr<const detail::LowPrecisionWeight>> result;
    for (auto& [name, c] : named_convertibles()) {
      bool seen = !*c.converted;
      for (auto& kept : result) seen = seen || kept.second == *c.converted;
      if (!seen) result.emplace_back(name, *c.converted);
    }
    return result;
  }
  /// Tensors that are part of the state but not learnt (a positional-encoding table).
  Named<Tensor<T>> named_buffers() const {
    Named<Tensor<T>> result;
    collect(&Module::buffers_, "", result);
    return result;
  }
  /// The direct children, in registration order.
  Named<Module*> named_children() const { return children_; }
  /// Total number of learnable scalars.
  index_t num_parameters() const {
    index_t n = 0;
    for (auto& [name, p] : named_parameters()) n += p.numel();
    return n;
  }

  /// Training mode (dropout active) for this module and all children; eval() turns it off.
  Module& train(bool mode = true) {
    training_ = mode;
    for (auto& [name, child] : children_) child->train(mode);
    return *this;
  }
  Module& eval() { return train(false); }
  bool is_training() const { return training_; }

  /// Moves every parameter and buffer, with its gradient, to `device` in place, as
  /// PyTorch's Module.to does: every handle to them (an optimiser's) sees the move.
  Module& to(Device device) {
    detail::check_device_usable(device, "Module.to");
    for (auto& [name, p] : named_parameters()) detail::move_to_device_(p, device);
    for (auto& [name, b] : named_buffers()) detail::move_to_device_(b, device);
    return *this;
  }
  /// The device of the first parameter or buffer; the CPU for a module with neither.
  Device device() const {
    for (auto& [name, p] : named_parameters()) return p.device();
    for (auto& [name, b] : named_buffers()) return b.device();
    return Device::cpu();
  }

  /// The parameters and buffers by dotted name, as PyTorch's state_dict(): tensors that
  /// share the module's storage, cut from the graph.
  std::map<std::string, Tensor<T>> state_dict() const {
    std::map<std::string, Tensor<T>> result;
    for (auto& [name, p] : named_parameters()) result.emplace(name, p.detach());
    for (auto& [name, b] : named_buffers()) result.emplace(name, b.detach());
    return result;
  }

  /// What load_state_dict left out, as PyTorch's: parameters the map lacks (strict=false
  /// only) and names that are neither a parameter nor a buffer.
  struct LoadResult {
    std::vector<std::string> missing_keys, unexpected_keys;
  };

  /// Copies values by dotted name into the parameters and buffers (to their devices), as
  /// PyTorch's load_state_dict. With strict, every parameter must be in the map and every
  /// name must be a parameter or buffer; buffers may be left out (heed's are tables its
  /// constructors compute, such as the positional encoding's, which d2l does not save).
  /// A shape that differs, or with strict a missing or unknown name, throws ValueError
  /// naming them before anything is copied.
  LoadResult load_state_dict(const std::map<std::string, Tensor<T>>& values, bool strict = true) {
    const auto parameters = named_parameters(), buffers = named_buffers();
    LoadResult result;
    std::map<std::string, Tensor<T>> targets;
    for (auto& [name, p] : parameters) {
      targets.emplace(name, p);
      if (values.count(name) == 0) result.missing_keys.push_back(name);
    }
    for (auto& [name, b] : buffers) targets.emplace(name, b);
    for (auto& [name, value] : values)
      if (targets.count(name) == 0) result.unexpected_keys.push_back(name);
    const auto listed = [](const std::vector<std::string>& names) {
      std::string out;
      for (const std::string& name : names) out += (out.empty() ? "'" : ", '") + name + "'";
      return out;
    };
    HEED_CHECK(!strict || (result.missing_keys.empty() && result.unexpected_keys.empty()), ValueError,
               "load_state_dict: ", type_name_, ": ",
               result.missing_keys.empty() ? "" : "missing " + listed(result.missing_keys),
               !result.missing_keys.empty() && !result.unexpected_keys.empty() ? "; " : "",
               result.unexpected_keys.empty() ? "" : "unexpected " + listed(result.unexpected_keys),
               " (strict=false loads what matches)");
    for (auto& [name, value] : values) {
      const auto target = targets.find(name);
      if (target == targets.end()) continue;
      HEED_CHECK(value.defined() && value.shape() == target->second.shape(), ValueError,
                 "load_state_dict: ", type_name_, ": '", name, "' has shape ",
                 value.defined() ? to_string(value.shape()) : "undefined", ", the module's is ",
                 to_string(target->second.shape()));
    }
    // Everything is checked: nothing below can fail but an allocation on a device.
    NoGradGuard no_grad;
    for (auto& [name, value] : values) {
      const auto target = targets.find(name);
      if (target != targets.end()) target->second.copy_(value.to(target->second.device()));
    }
    return result;
  }

  /// Forgets the gradients of every parameter.
  void zero_grad() {
    for (auto& p : parameters()) p.zero_grad();
  }

  const std::string& type_name() const { return type_name_; }
  /// The constructor arguments shown by repr(), as PyTorch's extra_repr().
  virtual std::string extra_repr() const { return {}; }
  /// PyTorch's summary: `Linear(in_features=2, out_features=8, bias=False)`, children indented.
  std::string repr() const {
    std::ostringstream os;
    os << type_name_ << "(";
    if (children_.empty()) {
      os << extra_repr();
    } else {
      os << "\n";
      if (!extra_repr().empty()) os << "  " << extra_repr() << "\n";
      for (auto& [name, child] : children_) {
        std::string text = child->repr(), indented;
        for (char c : text) indented += c == '\n' ? std::string("\n  ") : std::string(1, c);
        os << "  (" << name << "): " << indented << "\n";
      }
    }
    os << ")";
    return os.str();
  }

 protected:
  explicit Module(std::string type_name) : type_name_(std::move(type_name)) {}

  /// Makes `parameter` (a member of the derived module) learnable under `name`.
  Tensor<T>& register_parameter(const std::string& name, Tensor<T>& parameter) {
    check_name(name, "register_parameter");
    HEED_CHECK(parameter.defined() && parameter.is_leaf(), ValueError, type_name_, ".register_parameter: '", name,
               "' must be a defined leaf tensor");
    parameter.requires_grad_();
    parameters_.emplace_back(name, &parameter);
    return parameter;
  }
  /// Lets the parameter registered as `name` be held converted in `converted` (a member)
  /// for inference: convert_weights_ and quantised checkpoints use it.
  void register_convertible(const std::string& name, std::shared_ptr<const detail::LowPrecisionWeight>& converted) {
    Tensor<T>* weight = nullptr;
    for (auto& entry : parameters_)
      if (entry.first == name) weight = entry.second;
    HEED_CHECK(weight != nullptr, ValueError, type_name_, ".register_convertible: '", name,
               "' is not a registered parameter");
    convertibles_.emplace_back(name, Convertible{weight, &converted});
  }
  Tensor<T>& register_buffer(const std::string& name, Tensor<T>& buffer) {
    check_name(name, "register_buffer");
    HEED_CHECK(buffer.defined(), ValueError, type_name_, ".register_buffer: '", name, "' is undefined");
    buffers_.emplace_back(name, &buffer);
    return buffer;
  }
  template <typename M>
  M& register_module(const std::string& name, M& child) {
    check_name(name, "register_module");
    children_.emplace_back(name, &child);
    return child;
  }

 private:
  void check_name(const std::string& name, const char* op) const {
    HEED_CHECK(!name.empty() && name.find('.') == std::string::npos, ValueError, type_name_, ".", op, ": name '", name,
               "' must be non-empty and contain no '.'");
    bool taken = false;
    for (auto& entry : parameters_) taken = taken || entry.first == name;
    for (auto& entry : buffers_) taken = taken || entry.first == name;
    for (auto& entry : children_) taken = taken || entry.first == name;
    HEED_CHECK(!taken, ValueError, type_name_, ".", op, ": name '", name, "' is already registered");
  }

  // A parameter left undefined (a weight converted to bf16 or int8 for inference,
  // heed/nn/convert_weights.hpp) is not listed: it is no longer learnt or saved as fp32.
  void collect(Named<Tensor<T>*> Module::*table, const std::string& prefix, Named<Tensor<T>>& out) const {
    for (auto& [name, tensor] : this->*table)
      if (tensor->defined()) out.emplace_back(prefix + name, *tensor);
    for (auto& [name, child] : children_) child->collect(table, prefix + name + ".", out);
  }

  void collect_convertibles(const std::string& prefix, Named<Convertible>& out) const {
    for (auto& [name, c] : convertibles_) out.emplace_back(prefix + name, c);
    for (auto& [name, child] : children_) child->collect_convertibles(prefix + name + ".", out);
  }

  std::string type_name_;
  bool training_ = true;
  Named<Tensor<T>*> parameters_, buffers_;
  Named<Convertible> convertibles_;
  Named<Module*> children_;
};

template <typename T>
std::ostream& operator<<(std::ostream& os, const Module<T>& module) {
  return os << module.repr();
}

namespace detail {

/// The convertible parameters of a module (Module::named_convertibles) by tensor: holders
/// of one tensor or one converted weight (tied) in one group, named by the first, the
/// name named_parameters() gives it. A holder with neither is left out.
template <typename T>
struct ConvertibleGroup {
  std::string name;
  std::vector<typename Module<T>::Convertible> members;
  Tensor<T>& weight() const { return *members.front().weight; }
  const std::shared_ptr<const LowPrecisionWeight>& converted() const { return *members.front().converted; }
};

template <typename T>
std::vector<ConvertibleGroup<T>> convertible_groups(const Module<T>& module) {
  std::vector<ConvertibleGroup<T>> groups;
  for (auto& [name, c] : module.named_convertibles()) {
    if (!c.weight->defined() && !*c.converted) continue;
    ConvertibleGroup<T>* group = nullptr;
    for (auto& g : groups)
      if (c.weight->defined() ? g.weight().is_same(*c.weight) : g.converted() == *c.converted) group = &g;
    if (group == nullptr) group = &groups.emplace_back(ConvertibleGroup<T>{name, {}});
    group->members.push_back(c);
  }
  return groups;
}

/// Throws ValueError naming `op` and the first converted weight of `module`, if it has
/// one: a net converted for inference does not train.
template <typename T>
void check_not_converted(const Module<T>& module, const char* op) {
  const auto converted = module.named_converted_weights();
  HEED_CHECK(converted.empty(), ValueError, op, ": '", converted.empty() ? "" : converted.front().first,
             "' was converted for inference (convert_weights_): a converted net does not train; train the fp32 net, "
             "then convert it");
}

}  // namespace detail

/// Weight tying: makes the parameter `tied` (a module's member) the tensor `to`, so that
/// both names read and update one tensor, its gradient the sum of both uses, learnt and
/// saved once (named_parameters lists it under its first name), as PyTorch's
/// `lm_head.weight = shared.weight`. Call it in the constructor of the module holding
/// both, after they are registered. Throws ValueError unless both are defined leaves of
/// one shape.
template <typename T>
void tie_parameter(Tensor<T>& tied, const Tensor<T>& to, const char* op = "tie_parameter") {
  HEED_CHECK(tied.defined() && to.defined() && tied.is_leaf() && to.is_leaf(), ValueError, op,
             ": tied weights must be defined leaf tensors");
  HEED_CHECK(tied.shape() == to.shape(), ValueError, op, ": cannot tie a weight of shape ", to_string(tied.shape()),
             " to one of shape ", to_string(to.shape()));
  tied = to;
}

namespace detail {

/// The T of Module<T>, a base of M (declared only, for decltype): what the deduction
/// guides of ModuleList and Sequential read from the first module given.
template <typename T>
T module_value_type(const Module<T>&);
template <typename M>
using module_value_t = decltype(module_value_type(std::declval<const M&>()));

}  // namespace detail

}  // namespace heed

#include "heed/detail/header_end.hpp"
