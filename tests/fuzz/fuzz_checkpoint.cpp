// Fuzz target: load_checkpoint into a small model (a Linear and an Embedding) from a
// file of the input's bytes. A heed::Error is the expected answer to a bad file, and
// after one the parameters must be bit-for-bit what they were (load_checkpoint promises
// it); a successful load must have copied exactly the file's tensors (F64 ones rounded
// to float; int8 and bf16 ones, a quantised checkpoint's, held converted), which
// read_safetensors must then read too. The model is restored after each success (built
// anew after a quantised one) so that every input starts from the same state.
#include "fuzz_common.hpp"
#include "tiny_net.hpp"

#include <heed/core/error.hpp>
#include <heed/core/generator.hpp>
#include <heed/io/checkpoint.hpp>
#include <heed/io/safetensors.hpp>
#include <heed/nn/convert_weights.hpp>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace {

struct Snapshot {
  std::vector<std::string> names;
  std::vector<std::vector<heed::index_t>> shapes;
  std::vector<std::vector<unsigned char>> bytes;
  std::vector<const float*> addresses;
};

Snapshot snapshot(const heed::Module<float>& module) {
  Snapshot s;
  for (const auto& [name, parameter] : module.named_parameters()) {
    s.names.push_back(name);
    s.shapes.push_back(parameter.shape().to_vector());
    const auto* first = reinterpret_cast<const unsigned char*>(parameter.data());
    s.bytes.emplace_back(first, first + static_cast<std::size_t>(parameter.numel()) * sizeof(float));
    s.addresses.push_back(parameter.data());
  }
  return s;
}

bool same_layout(const Snapshot& a, const Snapshot& b) {
  return a.names == b.names && a.shapes == b.shapes && a.addresses == b.addresses;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const heed_fuzz::InputFile input("checkpoint", ".safetensors");
  static const auto make_net = [] {
    heed::Generator gen(7);
    return std::make_unique<heed_fuzz::TinyNet>(gen);
  };
  static std::unique_ptr<heed_fuzz::TinyNet> model = make_net();
  heed_fuzz::TinyNet& net = *model;
  static Snapshot original = snapshot(net);
  const std::string& path = input.write(data, size);

  std::map<std::string, std::string> metadata;
  try {
    metadata = heed::load_checkpoint(net, path);
  } catch (const heed::Error&) {
    const Snapshot after = snapshot(net);
    if (!same_layout(after, original) || after.bytes != original.bytes)
      heed_fuzz::fail("a failed load_checkpoint changed the model");
    return 0;
  }

  heed::SafetensorsFile file;
  try {
    file = heed::read_safetensors(path);
  } catch (const heed::Error& e) {
    heed_fuzz::fail(std::string("read_safetensors refused a file load_checkpoint loaded: ") + e.what());
  }
  if (file.metadata != metadata) heed_fuzz::fail("load_checkpoint returned other metadata than read_safetensors");
  const auto converted = net.named_converted_weights();
  if (!converted.empty()) {
    // A quantised checkpoint: each converted weight holds the file's values as they are.
    std::size_t stored = net.named_parameters().size();
    for (const auto& [name, weight] : converted) {
      const auto it = file.tensors.find(name);
      const auto rows = static_cast<std::size_t>(weight->out_features()),
                 numel = rows * static_cast<std::size_t>(weight->in_features());
      const bool int8 = weight->precision() == heed::Precision::int8;
      if (it == file.tensors.end() || it->second.dtype != (int8 ? "I8" : "BF16"))
        heed_fuzz::fail("load_checkpoint converted '" + name + "' other than the file holds it");
      std::vector<unsigned char> values(numel * (int8 ? 1 : 2)), scales(rows * 4);
      if (int8) {
        weight->unpack_int8(reinterpret_cast<std::int8_t*>(values.data()), reinterpret_cast<float*>(scales.data()));
        const auto scale = file.tensors.find(name + "_scale");
        if (scale == file.tensors.end() || scale->second.data != scales)
          heed_fuzz::fail("load_checkpoint took other scales for '" + name + "' than the file holds");
      } else {
        weight->unpack_bf16(reinterpret_cast<std::uint16_t*>(values.data()));
      }
      if (heed::detail::host_is_little_endian() && values != it->second.data)
        heed_fuzz::fail("load_checkpoint converted '" + name + "' other than the file holds it");
      stored += int8 ? 2 : 1;
    }
    if (file.tensors.size() != stored) heed_fuzz::fail("load_checkpoint accepted extra tensors");
    model = make_net();  // the next input starts from the fp32 model again
    original = snapshot(*model);
    return 0;
  }
  const Snapshot loaded = snapshot(net);
  if (!same_layout(loaded, original)) heed_fuzz::fail("load_checkpoint changed the model's parameters' layout");
  if (file.tensors.size() != loaded.names.size()) heed_fuzz::fail("load_checkpoint accepted extra tensors");
  for (std::size_t i = 0; i < loaded.names.size(); ++i) {
    const auto it = file.tensors.find(loaded.names[i]);
    if (it == file.tensors.end() ||
        (it->second.dtype != "F32" && it->second.dtype != "F64" && !heed::detail::is_half_dtype(it->second.dtype)) ||
        it->second.shape != loaded.shapes[i])
      heed_fuzz::fail("load_checkpoint loaded '" + loaded.names[i] + "' other than the file holds it");
    // The bytes are the file's on a little-endian host, which is where fuzzing runs; F64
    // values are rounded to float, F16 and BF16 ones widened, as load_checkpoint converts them.
    std::vector<unsigned char> expected = it->second.data;
    if (heed::detail::is_half_dtype(it->second.dtype)) {
      expected.assign(it->second.data.size() * 2, 0);
      heed::detail::from_half_bytes(it->second.data.data(), it->second.data.size() / 2, it->second.dtype,
                                    reinterpret_cast<float*>(expected.data()));
    } else if (it->second.dtype == "F64") {
      expected.assign(it->second.data.size() / 2, 0);
      for (std::size_t j = 0; j < expected.size() / sizeof(float); ++j) {
        double value;
        std::memcpy(&value, it->second.data.data() + j * sizeof(double), sizeof(double));
        const auto rounded = static_cast<float>(value);
        std::memcpy(expected.data() + j * sizeof(float), &rounded, sizeof(float));
      }
    }
    if (heed::detail::host_is_little_endian() && expected != loaded.bytes[i])
      heed_fuzz::fail("load_checkpoint loaded '" + loaded.names[i] + "' other than the file holds it");
  }

  std::size_t k = 0;
  for (auto& [name, parameter] : net.named_parameters()) {
    std::memcpy(parameter.data(), original.bytes[k].data(), original.bytes[k].size());
    ++k;
  }
  return 0;
}
