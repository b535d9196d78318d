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
// A float module whose weights were converted for inference (convert_weights_, heed/nn/
// convert_weights.hpp) saves them as they are, a quantised checkpoint: an int8 weight as
// I8 values with an F32 "<name>_scale" of one scale per row (w ≈ q · scale, PyTorch's
// per-channel scale; CTranslate2's weight_scale is its reciprocal), a bf16 one as BF16,
// each listed with its precision in the metadata's "heed.converted_weights" (a line
// "<name> int8" each). load reads such a weight into the module as its converted form,
// without an fp32 copy, whatever the module held; a weight the file holds in fp32 loads
// into a module that held it converted as fp32 again.
//
// save is atomic as save_safetensors is, so a checkpoint is never half-written; load
// reads and checks everything before it touches a parameter, so a failed load leaves the
// module bit-for-bit as it was, and a mismatch names what is missing, unexpected, or of
// the wrong dtype or shape.
#pragma once

#include "heed/detail/header_begin.hpp"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <new>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "heed/autograd/node.hpp"
#include "heed/io/safetensors.hpp"
#include "heed/nn/module.hpp"
#include "heed/ops/precision.hpp"
#include "heed/ops/quantized_gemm.hpp"

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

/// The metadata key listing a checkpoint's converted weights, a line "<name> <precision>"
/// each (precision int8 or bf16).
inline constexpr const char* kConvertedWeightsKey = "heed.converted_weights";

/// The converted weights of `module` as items to write, int8 as I8 values and an F32
/// "<name>_scale", bf16 as BF16, their bytes kept in `bytes` until written, and listed
/// in `metadata` (whose kConvertedWeightsKey is refused: heed writes it).
template <typename T>
void add_converted_items(const char* op, const std::string& path, const Module<T>& module,
                         std::vector<SafetensorsItem>& items, std::vector<std::vector<unsigned char>>& bytes,
                         std::map<std::string, std::string>& metadata) {
  HEED_CHECK(metadata.count(kConvertedWeightsKey) == 0, ValueError, op, ": ", path, ": metadata key '",
             kConvertedWeightsKey, "' is reserved: heed lists a module's converted weights under it");
  const auto converted_weights = module.named_converted_weights();
  bytes.reserve(bytes.size() + 2 * converted_weights.size());  // no reallocation: items point into it
  std::string listed;
  for (const auto& [name, converted] : converted_weights) {
    const LowPrecisionWeight& w = *converted;
    const std::vector<index_t> shape{w.out_features(), w.in_features()};
    const auto numel = static_cast<std::size_t>(w.out_features() * w.in_features());
    if (w.precision() == Precision::int8) {
      std::vector<unsigned char>& values = bytes.emplace_back(numel);
      std::vector<unsigned char>& scales = bytes.emplace_back(static_cast<std::size_t>(w.out_features()) * 4);
      w.unpack_int8(reinterpret_cast<std::int8_t*>(values.data()), reinterpret_cast<float*>(scales.data()));
      items.push_back({name, "I8", shape, values.data(), values.size(), 1, false});
      items.push_back({name + "_scale", "F32", {w.out_features()}, scales.data(), scales.size(), 4, true});
    } else {
      std::vector<unsigned char>& values = bytes.emplace_back(numel * 2);
      w.unpack_bf16(reinterpret_cast<std::uint16_t*>(values.data()));
      items.push_back({name, "BF16", shape, values.data(), values.size(), 2, true});
    }
    listed += name + " " + to_string(w.precision()) + "\n";
  }
  if (!listed.empty()) metadata[kConvertedWeightsKey] = listed;
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
  save_checkpoint(module, path, metadata, detail::safetensors_dtype<T>());
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
  std::vector<detail::SafetensorsItem> items;
  std::vector<std::vector<unsigned char>> bytes;
  std::map<std::string, std::string> all_metadata = metadata;
  detail::add_converted_items("save_checkpoint", path, module, items, bytes, all_metadata);
  detail::save_tensors_as("save_checkpoint", path, module.named_parameters(), all_metadata, dtype, std::move(items));
}

namespace detail {

/// Reads the tensors of `reader` that `expected` names (name → shape), all of them with
/// T's type, into new host tensors (F32, F64, F16 and BF16 convert to T), except those
/// `raw` names (name → dtype), which must have that dtype and whose bytes, as the file
/// holds them, go to `raw_bytes`. The file must hold exactly those names: a missing or
/// extra name, another dtype or a shape that differs, or damage throws FileError naming
/// the file and what differs, before anything outside is touched.
template <typename T>
std::map<std::string, Tensor<T>> read_checkpoint_tensors(
    SafetensorsReader& reader, const std::vector<std::pair<std::string, Shape>>& expected, const char* what,
    const std::map<std::string, std::string>& raw = {},
    std::map<std::string, std::vector<unsigned char>>* raw_bytes = nullptr) {
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
    const auto exact = raw.find(name);
    if (exact != raw.end() ? e.dtype != exact->second : e.dtype != dtype && !is_floating(e.dtype))
      problems.push_back(
          concat("tensor '", name, "': dtype ", e.dtype, ", model wants ", exact != raw.end() ? exact->second : dtype));
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
      const Entry& e = *in_file.at(name);
      const auto size = static_cast<std::size_t>(e.end - e.begin);
      if (raw.count(name)) {
        (*raw_bytes)[name].resize(size);
        continue;
      }
      values.emplace(name, Tensor<T>::empty(shape));
      if (e.dtype != dtype) converted[name].resize(size);
    }
  } catch (const OutOfMemoryError& e) {
    reader.out_of_memory("for the new values: ", e.what());
  } catch (const std::bad_alloc&) {
    reader.out_of_memory("for the ", reader.data_size(), " bytes of the new values");
  }
  reader.read_data([&](const Entry& e) {
    if (raw.count(e.name)) return raw_bytes->at(e.name).data();
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

/// The converted weights a checkpoint's metadata lists (kConvertedWeightsKey), name →
/// precision; FileError starting with `where` ("load_checkpoint: path") for a list that
/// does not parse.
inline std::map<std::string, Precision> converted_weights_of(const std::map<std::string, std::string>& metadata,
                                                             const std::string& where) {
  std::map<std::string, Precision> out;
  const auto it = metadata.find(kConvertedWeightsKey);
  if (it == metadata.end()) return out;
  std::size_t begin = 0;
  while (begin < it->second.size()) {
    std::size_t end = it->second.find('\n', begin);
    if (end == std::string::npos) end = it->second.size();
    const std::string line = it->second.substr(begin, end - begin);
    begin = end + 1;
    const std::size_t space = line.rfind(' ');
    const std::string name = space == std::string::npos ? "" : line.substr(0, space);
    const std::string precision = space == std::string::npos ? "" : line.substr(space + 1);
    if (name.empty() || (precision != "int8" && precision != "bf16") ||
        !out.emplace(name, precision == "int8" ? Precision::int8 : Precision::bf16).second)
      throw FileError(concat(where, ": metadata '", kConvertedWeightsKey, "': line '", line.substr(0, 80),
                             "' is not '<name> int8' or '<name> bf16' of a weight listed once"));
  }
  return out;
}

/// A converted weight read from a checkpoint's bytes (int8: values and scales; bf16:
/// bits, little-endian); FileError for a scale that is negative or not finite.
inline std::shared_ptr<const LowPrecisionWeight> converted_weight_of(
    const SafetensorsReader& reader, const std::string& name, Precision precision, const Shape& shape,
    std::map<std::string, std::vector<unsigned char>>& raw) {
  const index_t out = shape[0], in = shape[1];
  std::vector<unsigned char>& values = raw.at(name);
  std::shared_ptr<const LowPrecisionWeight> result;
  if (precision == Precision::int8) {
    std::vector<unsigned char>& scale_bytes = raw.at(name + "_scale");
    std::vector<float> scales(static_cast<std::size_t>(out));
    for (index_t n = 0; n < out; ++n) {
      std::uint32_t bits = 0;
      for (int b = 0; b < 4; ++b) bits |= std::uint32_t(scale_bytes[static_cast<std::size_t>(4 * n + b)]) << 8 * b;
      std::memcpy(&scales[static_cast<std::size_t>(n)], &bits, 4);
      const float scale = scales[static_cast<std::size_t>(n)];
      if (!std::isfinite(scale) || scale < 0.0f)
        reader.fail("tensor '", name, "_scale': row ", n, " has scale ", scale, ", not a finite non-negative number");
    }
    result = std::make_shared<const LowPrecisionWeight>(
        LowPrecisionWeight::from_int8(reinterpret_cast<const std::int8_t*>(values.data()), scales.data(), out, in));
  } else {
    std::vector<std::uint16_t> bits(values.size() / 2);
    for (std::size_t i = 0; i < bits.size(); ++i)
      bits[i] = static_cast<std::uint16_t>(values[2 * i] | values[2 * i + 1] << 8);
    result = std::make_shared<const LowPrecisionWeight>(LowPrecisionWeight::from_bf16(bits.data(), out, in));
  }
  std::vector<unsigned char>().swap(values);  // freed as each converts: the bytes are not held twice
  return result;
}

}  // namespace detail

/// Loads every parameter of `module` from a safetensors file (heed's or PyTorch's) and
/// returns the file's metadata. The file must hold exactly the module's parameter names,
/// each F32, F64, F16 or BF16 (converted to T, as PyTorch's load_state_dict converts)
/// with the parameter's shape; a float module's convertible weight (a Linear's or an
/// Embedding's) may be stored converted instead, as the top of this file says, and is
/// then loaded as such. Any difference or damage throws FileError naming the file and
/// saying what differs, and leaves the module bit-for-bit as it was: everything is read
/// and checked first.
template <typename T>
std::map<std::string, std::string> load_checkpoint(Module<T>& module, const std::string& path) {
  detail::SafetensorsReader reader("load_checkpoint", path);
  const std::map<std::string, Precision> stored =
      detail::converted_weights_of(reader.metadata(), detail::concat("load_checkpoint: ", path));
  if (!std::is_same_v<T, float> && !stored.empty())
    reader.fail("holds weights converted to ", to_string(stored.begin()->second), " ('", stored.begin()->first,
                "'), which load into a float model only, not a ", Tensor<T>::dtype(), " one");
  // Each parameter by its first name: the fp32 ones, then the converted ones.
  std::vector<std::pair<std::string, Shape>> expected;
  std::map<std::string, Tensor<T>> targets;
  for (const auto& [name, parameter] : module.named_parameters()) {
    targets.emplace(name, parameter);
    expected.emplace_back(name, parameter.shape());
  }
  // Each convertible weight by its first name, with its (out_features, in_features).
  const auto groups = detail::convertible_groups(module);
  std::map<std::string, std::pair<const detail::ConvertibleGroup<T>*, Shape>> group_of;
  for (const auto& group : groups) {
    const auto& c = group.converted();
    group_of.emplace(group.name,
                     std::pair(&group, c ? Shape{c->out_features(), c->in_features()} : group.weight().shape()));
    if (c) expected.emplace_back(group.name, group_of.at(group.name).second);
  }
  // The weights stored converted: their values (and scales) read as the file holds them.
  std::map<std::string, std::string> raw;
  for (const auto& [name, precision] : stored) {
    const auto group = group_of.find(name);
    if (group == group_of.end())
      reader.fail("metadata '", detail::kConvertedWeightsKey, "' lists '", name, "' as ", to_string(precision),
                  ", which is not a convertible weight of the model (a Linear's or an Embedding's)");
    raw.emplace(name, precision == Precision::int8 ? "I8" : "BF16");
    if (precision == Precision::int8) {
      const Shape& shape = group->second.second;
      if (shape[1] > detail::kMaxInt8InFeatures)
        reader.fail("tensor '", name, "' ", to_string(shape), ": int8 weights take at most ",
                    detail::kMaxInt8InFeatures, " columns");
      raw.emplace(name + "_scale", "F32");
      expected.emplace_back(name + "_scale", Shape{shape[0]});
    }
  }
  std::map<std::string, std::vector<unsigned char>> raw_bytes;
  std::map<std::string, Tensor<T>> values =
      detail::read_checkpoint_tensors<T>(reader, expected, "parameters", raw, &raw_bytes);
  std::map<std::string, std::shared_ptr<const detail::LowPrecisionWeight>> converted;
  if constexpr (std::is_same_v<T, float>) {
    try {
      for (const auto& [name, precision] : stored)
        converted.emplace(name,
                          detail::converted_weight_of(reader, name, precision, group_of.at(name).second, raw_bytes));
    } catch (const std::bad_alloc&) {
      reader.out_of_memory("for the converted weights");
    }
  }
  // Everything is read and checked: from here on nothing can fail.
  NoGradGuard no_grad;
  for (auto& [name, value] : values) {
    const auto target = targets.find(name);
    if (target != targets.end()) {
      target->second.copy_(value);
      continue;
    }
    // Converted in the module, fp32 in the file: a parameter again.
    value.requires_grad_();
    for (const auto& member : group_of.at(name).first->members) {
      *member.weight = value;
      member.converted->reset();
    }
  }
  for (auto& [name, weight] : converted)
    for (const auto& member : group_of.at(name).first->members) {
      *member.converted = weight;
      *member.weight = Tensor<T>();
    }
  if (!converted.empty()) empty_buffer_cache();  // the fp32 storage of the weights now converted
  return reader.metadata();
}

}  // namespace heed

#include "heed/detail/header_end.hpp"
