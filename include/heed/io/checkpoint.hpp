// heed/io/checkpoint.hpp — module checkpoints: a Module's named parameters saved to and
// loaded from a safetensors file (heed/io/safetensors.hpp), the one PyTorch users write
// with safetensors.torch.save_file(model.state_dict(), path).
//
//   heed::save_checkpoint(net, "transformer.safetensors", {{"num_hiddens", "32"}});
//   auto meta = heed::read_safetensors_metadata("transformer.safetensors");  // rebuild net from it
//   heed::load_checkpoint(net, "transformer.safetensors");                   // returns meta too
//
// A checkpoint holds the module's named_parameters(), not its buffers (d2l's state_dict()
// has no positional-encoding table either), under their dotted names, which are the keys
// of d2l's state_dict(): float models save F32, double models F64.
//
// save is atomic as save_safetensors is, so a checkpoint is never half-written; load
// reads and checks everything before it touches a parameter, so a failed load leaves the
// module bit-for-bit as it was, and a mismatch names what is missing, unexpected, or of
// the wrong dtype or shape.
#pragma once

#include "heed/detail/header_begin.hpp"

#include <map>
#include <new>
#include <set>
#include <string>
#include <vector>

#include "heed/autograd/node.hpp"
#include "heed/io/safetensors.hpp"
#include "heed/nn/module.hpp"

namespace heed {

namespace detail {

/// 'a', 'b', 'c' — at most 20 of them, then how many more.
inline std::string format_names(const std::vector<std::string>& names) {
  constexpr std::size_t kShown = 20;
  std::string out;
  for (std::size_t i = 0; i < names.size() && i < kShown; ++i) out += (i ? ", '" : "'") + names[i] + "'";
  if (names.size() > kShown) out += concat(" and ", names.size() - kShown, " more");
  return out;
}

}  // namespace detail

// ---- checkpoints --------------------------------------------------------------------

/// Saves module.named_parameters() (not the buffers) under their dotted names, which are
/// d2l's state_dict() keys, with the given metadata. Atomic: see save_safetensors. A
/// module on a CUDA device is copied to the host for the write; load_checkpoint copies
/// the values back to where each parameter is.
template <typename T>
void save_checkpoint(const Module<T>& module, const std::string& path,
                     const std::map<std::string, std::string>& metadata = {}) {
  std::vector<detail::SafetensorsItem> items;
  std::vector<Tensor<T>> on_host;  // parameters on a device copied out, alive until written
  for (const auto& [name, parameter] : module.named_parameters()) {
    on_host.push_back(detail::on_host(parameter));
    items.push_back(detail::safetensors_item("save_checkpoint", path, name, on_host.back()));
  }
  detail::write_safetensors("save_checkpoint", path, std::move(items), metadata);
}

/// Loads every parameter of `module` from a safetensors file (heed's or PyTorch's) and
/// returns the file's metadata. The file must hold exactly the module's parameter names,
/// each with T's dtype (F32 for float, F64 for double) and the parameter's shape. Any
/// difference or damage throws FileError naming the file and saying what differs, and
/// leaves the module bit-for-bit as it was: everything is read and checked first.
template <typename T>
std::map<std::string, std::string> load_checkpoint(Module<T>& module, const std::string& path) {
  using Entry = detail::SafetensorsReader::Entry;
  detail::SafetensorsReader reader("load_checkpoint", path);
  auto parameters = module.named_parameters();

  std::map<std::string, const Entry*> in_file;
  for (const Entry& e : reader.entries()) in_file[e.name] = &e;
  std::set<std::string> in_model;
  std::vector<std::string> missing, unexpected;
  for (const auto& [name, parameter] : parameters) {
    in_model.insert(name);
    if (in_file.count(name) == 0) missing.push_back(name);
  }
  for (const auto& [name, entry] : in_file)
    if (in_model.count(name) == 0) unexpected.push_back(name);
  if (!missing.empty() || !unexpected.empty())
    reader.fail("the tensors do not match the model's parameters: ",
                missing.empty() ? "" : "missing from the file: " + detail::format_names(missing),
                !missing.empty() && !unexpected.empty() ? "; " : "",
                unexpected.empty() ? "" : "not parameters of the model: " + detail::format_names(unexpected));

  const std::string dtype = detail::safetensors_dtype<T>();
  std::string problems;
  for (const auto& [name, parameter] : parameters) {
    const Entry& e = *in_file.at(name);
    const std::vector<index_t> shape = parameter.shape().to_vector();
    if (e.dtype != dtype)
      problems +=
          detail::concat(problems.empty() ? "" : "; ", "tensor '", name, "': dtype ", e.dtype, ", model wants ", dtype);
    if (e.shape != shape)
      problems +=
          detail::concat(problems.empty() ? "" : "; ", "tensor '", name, "': shape ", detail::format_shape(e.shape),
                         " in the file, model wants ", detail::format_shape(shape));
  }
  if (!problems.empty()) reader.fail(problems);

  std::map<std::string, Tensor<T>> values;
  try {
    for (const auto& [name, parameter] : parameters) values.emplace(name, Tensor<T>::empty(parameter.shape()));
  } catch (const OutOfMemoryError& e) {
    throw OutOfMemoryError(detail::concat("load_checkpoint: ", path, ": ", e.what()));
  } catch (const std::bad_alloc&) {
    reader.out_of_memory("for the ", reader.data_size(), " bytes of the parameters' new values");
  }
  reader.read_data([&](const Entry& e) { return reinterpret_cast<unsigned char*>(values.at(e.name).data()); });
  if (!detail::host_is_little_endian())
    for (auto& [name, value] : values)
      detail::swap_bytes(reinterpret_cast<unsigned char*>(value.data()), static_cast<std::size_t>(value.numel()),
                         sizeof(T));

  // Everything is read and checked: from here on nothing can fail.
  NoGradGuard no_grad;
  for (auto& [name, parameter] : parameters) parameter.copy_(values.at(name));
  return reader.metadata();
}

}  // namespace heed

#include "heed/detail/header_end.hpp"
