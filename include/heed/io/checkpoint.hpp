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
// of d2l's state_dict(): float models save F32, double models F64, or either F16 or BF16
// where asked (half the file of F32; pretrained HuggingFace checkpoints often come so).
// load converts F32, F64, F16 and BF16 to the model's type.
//
// save is atomic as save_safetensors is, so a checkpoint is never half-written; load
// reads and checks everything before it touches a parameter, so a failed load leaves the
// module bit-for-bit as it was, and a mismatch names what is missing, unexpected, or of
// the wrong dtype or shape.
#pragma once

#include "heed/detail/header_begin.hpp"

#include <cstring>
#include <map>
#include <new>
#include <set>
#include <string>
#include <utility>
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

/// As above, every parameter saved as `dtype`: the module's own ("F32" for float, "F64"
/// for double, as the overload without it saves), or "F16" or "BF16", each value rounded
/// to nearest-even (heed/io/half.hpp). A finite value beyond the dtype's range (magnitude
/// 65520 or more for F16) throws ValueError naming the parameter and the value, before
/// any file is created, rather than be saved as inf; ±inf and NaN are kept. Any other
/// dtype throws ValueError. load_checkpoint reads the file into a float or double model.
template <typename T>
void save_checkpoint(const Module<T>& module, const std::string& path,
                     const std::map<std::string, std::string>& metadata, const std::string& dtype) {
  detail::save_tensors_as("save_checkpoint", path, module.named_parameters(), metadata, dtype);
}

namespace detail {

/// Reads the tensors of `reader` that `expected` names (name → shape), all of them with
/// T's type, into new host tensors (F32, F64, F16 and BF16 convert to T). The file must hold exactly
/// those names: a missing or extra name, another dtype or a shape that differs, or damage
/// throws FileError naming the file and what differs, before anything outside is touched.
template <typename T>
std::map<std::string, Tensor<T>> read_checkpoint_tensors(SafetensorsReader& reader,
                                                         const std::vector<std::pair<std::string, Shape>>& expected,
                                                         const char* what) {
  using Entry = SafetensorsReader::Entry;
  std::map<std::string, const Entry*> in_file;
  for (const Entry& e : reader.entries()) in_file[e.name] = &e;
  std::set<std::string> wanted;
  std::vector<std::string> missing, unexpected;
  for (const auto& [name, shape] : expected) {
    wanted.insert(name);
    if (in_file.count(name) == 0) missing.push_back(name);
  }
  for (const auto& [name, entry] : in_file)
    if (wanted.count(name) == 0) unexpected.push_back(name);
  if (!missing.empty() || !unexpected.empty())
    reader.fail("the tensors do not match the model's ", what, ": ",
                missing.empty() ? "" : "missing from the file: " + format_names(missing),
                !missing.empty() && !unexpected.empty() ? "; " : "",
                unexpected.empty() ? "" : concat("not ", what, " of the model: ", format_names(unexpected)));

  // A float file loads into a double model and back, and an F16 or BF16 one (pretrained
  // weights often come so) into either, converted as PyTorch's load_state_dict converts;
  // any other dtype, or a shape that differs, is a problem.
  const std::string dtype = safetensors_dtype<T>();
  const auto is_floating = [](const std::string& d) { return d == "F32" || d == "F64" || is_half_dtype(d); };
  std::vector<std::string> problems;
  for (const auto& [name, shape] : expected) {
    const Entry& e = *in_file.at(name);
    if (e.dtype != dtype && !is_floating(e.dtype))
      problems.push_back(concat("tensor '", name, "': dtype ", e.dtype, ", model wants ", dtype));
    if (e.shape != shape.to_vector())
      problems.push_back(concat("tensor '", name, "': shape ", format_shape(e.shape), " in the file, model wants ",
                                format_shape(shape.to_vector())));
  }
  if (problems.size() == 1) reader.fail(problems.front());
  if (!problems.empty()) {
    // One per line, as many as format_names shows.
    constexpr std::size_t kShown = 20;
    std::string list = concat(problems.size(), " differences from the model's ", what, ":");
    for (std::size_t i = 0; i < problems.size() && i < kShown; ++i) list += "\n  " + problems[i];
    if (problems.size() > kShown) list += concat("\n  and ", problems.size() - kShown, " more");
    reader.fail(list);
  }

  std::map<std::string, Tensor<T>> values;
  std::map<std::string, std::vector<unsigned char>> converted;  // the file's bytes of another dtype
  try {
    for (const auto& [name, shape] : expected) {
      values.emplace(name, Tensor<T>::empty(shape));
      const Entry& e = *in_file.at(name);
      if (e.dtype != dtype) converted[name].resize(static_cast<std::size_t>(e.end - e.begin));
    }
  } catch (const OutOfMemoryError& e) {
    reader.out_of_memory("for the new values: ", e.what());
  } catch (const std::bad_alloc&) {
    reader.out_of_memory("for the ", reader.data_size(), " bytes of the new values");
  }
  reader.read_data([&](const Entry& e) {
    return converted.count(e.name) ? converted.at(e.name).data()
                                   : reinterpret_cast<unsigned char*>(values.at(e.name).data());
  });
  const bool swap = !host_is_little_endian();
  for (auto& named : values) {  // not a structured binding: the lambda below captures it
    Tensor<T>& value = named.second;
    const auto found = converted.find(named.first);
    if (found == converted.end()) {
      if (swap)
        swap_bytes(reinterpret_cast<unsigned char*>(value.data()), static_cast<std::size_t>(value.numel()), sizeof(T));
      continue;
    }
    std::vector<unsigned char>& bytes = found->second;
    const std::string& source = in_file.at(named.first)->dtype;
    if (is_half_dtype(source)) {  // read as little-endian: no swap
      from_half_bytes(bytes.data(), static_cast<std::size_t>(value.numel()), source, value.data());
      continue;
    }
    const auto convert = [&](auto stored) {  // stored: a value of the file's element type
      using S = decltype(stored);
      if (swap) swap_bytes(bytes.data(), static_cast<std::size_t>(value.numel()), sizeof(S));
      for (index_t i = 0; i < value.numel(); ++i) {
        S v;
        std::memcpy(&v, bytes.data() + static_cast<std::size_t>(i) * sizeof(S), sizeof(S));
        value.data()[i] = static_cast<T>(v);
      }
    };
    if (source == "F32")
      convert(float());
    else
      convert(double());
  }
  return values;
}

}  // namespace detail

/// Loads every parameter of `module` from a safetensors file (heed's or PyTorch's) and
/// returns the file's metadata. The file must hold exactly the module's parameter names,
/// each F32, F64, F16 or BF16 (converted to T, as PyTorch's load_state_dict converts)
/// with the parameter's shape. Any
/// difference or damage throws FileError naming the file and saying what differs, and
/// leaves the module bit-for-bit as it was: everything is read and checked first.
template <typename T>
std::map<std::string, std::string> load_checkpoint(Module<T>& module, const std::string& path) {
  detail::SafetensorsReader reader("load_checkpoint", path);
  auto parameters = module.named_parameters();
  std::vector<std::pair<std::string, Shape>> expected;
  for (const auto& [name, parameter] : parameters) expected.emplace_back(name, parameter.shape());
  std::map<std::string, Tensor<T>> values = detail::read_checkpoint_tensors<T>(reader, expected, "parameters");
  // Everything is read and checked: from here on nothing can fail.
  NoGradGuard no_grad;
  for (auto& [name, parameter] : parameters) parameter.copy_(values.at(name));
  return reader.metadata();
}

}  // namespace heed

#include "heed/detail/header_end.hpp"
