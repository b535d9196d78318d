// heed/io/training_checkpoint.hpp — what resuming training needs in one safetensors
// file: a module's parameters and Adam's state for each of them.
//
//   heed::save_training_checkpoint(net, optimizer, "last.safetensors",
//                                  {{"loader_generator", loader.generator().get_state()}});
//   // later, in a new process, after building the same net and optimizer:
//   auto meta = heed::load_training_checkpoint(net, optimizer, "last.safetensors");
//   loader.generator().set_state(meta.at("loader_generator"));
//
// The parameters are stored as save_checkpoint stores them (so load_checkpoint cannot
// read the file, which holds more, but read_safetensors_metadata and PyTorch's
// safetensors can), and Adam's moments as "optimizer.exp_avg.<name>" and
// "optimizer.exp_avg_sq.<name>" for each parameter it has updated; the step counts, in
// the order of the optimizer's parameters, go in the metadata under "heed.adam.steps".
// Adam's hyper-parameters are not stored: the caller's optimizer keeps its own (a run
// may resume with another learning rate). The caller's metadata travels with it
// (generators' states, the epoch, the vocabularies). Saving is atomic; loading reads and
// checks everything first, so a file of another model or optimizer throws FileError
// saying what differs and changes neither the module nor the optimizer.
#pragma once

#include "heed/detail/header_begin.hpp"

#include <cstdint>
#include <map>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "heed/io/checkpoint.hpp"
#include "heed/optim/adam.hpp"

namespace heed {

namespace detail {

constexpr const char* kAdamStepsKey = "heed.adam.steps";

/// The optimizer's parameters by their names in `module`, in the optimizer's order;
/// `op` names the caller in the error when one is not the module's.
template <typename T>
std::vector<std::string> optimizer_parameter_names(const Module<T>& module, const Adam<T>& optimizer, const char* op) {
  std::map<const TensorImpl<T>*, std::string> name_of;
  for (const auto& [name, parameter] : module.named_parameters()) name_of.emplace(&impl(parameter), name);
  std::vector<std::string> names;
  for (std::size_t i = 0; i < optimizer.params().size(); ++i) {
    const auto it = name_of.find(&impl(optimizer.params()[i]));
    HEED_CHECK(it != name_of.end(), ValueError, op, ": the optimizer's parameter ", i, " (shape ",
               to_string(optimizer.params()[i].shape()), ") is not a parameter of the module");
    names.push_back(it->second);
  }
  return names;
}

}  // namespace detail

/// Saves the module's parameters, the optimizer's state and `metadata` to `path`
/// (atomically), as the top of this file says. The optimizer's parameters must be the
/// module's (ValueError otherwise); "heed.adam.steps" is heed's key in the metadata.
template <typename T>
void save_training_checkpoint(const Module<T>& module, const Adam<T>& optimizer, const std::string& path,
                              std::map<std::string, std::string> metadata = {}) {
  constexpr const char* op = "save_training_checkpoint";
  const std::vector<std::string> names = detail::optimizer_parameter_names(module, optimizer, op);
  HEED_CHECK(metadata.count(detail::kAdamStepsKey) == 0, ValueError, op, ": the metadata key '", detail::kAdamStepsKey,
             "' is heed's");
  std::vector<detail::SafetensorsItem> items;
  std::vector<Tensor<T>> on_host;  // tensors on a device copied out, alive until written
  const auto add = [&](const std::string& name, const Tensor<T>& tensor) {
    on_host.push_back(detail::on_host(tensor));
    items.push_back(detail::safetensors_item(op, path, name, on_host.back()));
  };
  for (const auto& [name, parameter] : module.named_parameters()) add(name, parameter);
  std::string steps;
  for (std::size_t i = 0; i < names.size(); ++i) {
    const AdamState<T>& state = optimizer.state()[i];
    steps += (i ? " " : "") + std::to_string(state.step);
    if (state.step == 0) continue;  // no moments yet
    add("optimizer.exp_avg." + names[i], state.exp_avg);
    add("optimizer.exp_avg_sq." + names[i], state.exp_avg_sq);
  }
  metadata[detail::kAdamStepsKey] = steps;
  detail::write_safetensors(op, path, std::move(items), metadata);
}

/// Loads what save_training_checkpoint saved into `module` and `optimizer` and returns
/// the file's metadata. The file must hold exactly the module's parameters and the
/// moments of the parameters whose step count is not 0, with the module's dtype and
/// shapes; anything else throws FileError naming the file and what differs, before the
/// module or the optimizer is touched.
template <typename T>
std::map<std::string, std::string> load_training_checkpoint(Module<T>& module, Adam<T>& optimizer,
                                                            const std::string& path) {
  constexpr const char* op = "load_training_checkpoint";
  const std::vector<std::string> names = detail::optimizer_parameter_names(module, optimizer, op);
  detail::SafetensorsReader reader(op, path);
  const auto& metadata = reader.metadata();
  const auto found = metadata.find(detail::kAdamStepsKey);
  if (found == metadata.end())
    reader.fail("not a training checkpoint (no '", detail::kAdamStepsKey, "' in its metadata)");
  std::vector<std::int64_t> steps;
  std::istringstream in(found->second);
  for (std::int64_t step = 0; in >> step;) {
    if (step < 0) reader.fail("'", detail::kAdamStepsKey, "' holds a negative step count, ", step);
    steps.push_back(step);
  }
  if (!in.eof()) reader.fail("'", detail::kAdamStepsKey, "' is not a list of step counts");
  if (steps.size() != names.size())
    reader.fail("the optimizer state is for ", steps.size(), " parameters, the optimizer has ", names.size());

  auto parameters = module.named_parameters();
  std::map<std::string, Shape> shape_of;
  std::vector<std::pair<std::string, Shape>> expected;
  for (const auto& [name, parameter] : parameters) {
    expected.emplace_back(name, parameter.shape());
    shape_of.emplace(name, parameter.shape());
  }
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (steps[i] == 0) continue;
    expected.emplace_back("optimizer.exp_avg." + names[i], shape_of.at(names[i]));
    expected.emplace_back("optimizer.exp_avg_sq." + names[i], shape_of.at(names[i]));
  }
  std::map<std::string, Tensor<T>> values =
      detail::read_checkpoint_tensors<T>(reader, expected, "parameters and optimizer state");

  std::vector<AdamState<T>> states(names.size());
  for (std::size_t i = 0; i < names.size(); ++i) {
    states[i].step = steps[i];
    if (steps[i] == 0) continue;
    const Device device = optimizer.params()[i].device();  // the moments live with their parameter
    states[i].exp_avg = values.at("optimizer.exp_avg." + names[i]).to(device);
    states[i].exp_avg_sq = values.at("optimizer.exp_avg_sq." + names[i]).to(device);
  }

  // Everything is read and checked: from here on nothing can fail.
  NoGradGuard no_grad;
  for (auto& [name, parameter] : parameters) parameter.copy_(values.at(name));
  optimizer.state() = std::move(states);
  return reader.metadata();
}

}  // namespace heed

#include "heed/detail/header_end.hpp"
