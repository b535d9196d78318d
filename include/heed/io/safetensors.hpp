// heed/io/safetensors.hpp — the safetensors format, the one PyTorch users write with
// safetensors.torch.save_file(model.state_dict(), path): a file of named tensors.
//
//   heed::save_safetensors("weights.safetensors", named_tensors, {{"epochs", "200"}});
//   heed::SafetensorsFile file = heed::read_safetensors("weights.safetensors");
//   auto meta = heed::read_safetensors_metadata("weights.safetensors");  // the header only
//   auto header = heed::read_safetensors_header("weights.safetensors");   // and the shapes
//
// Module checkpoints (save_checkpoint, load_checkpoint) are files of this format: see
// heed/io/checkpoint.hpp.
//
// The format: an 8-byte little-endian length N, N bytes of UTF-8 JSON (padded with spaces),
// then the data section, each tensor little-endian and row-major at data_offsets
// [begin, end) counted from the start of the data section:
//
//   {"__metadata__": {"epochs": "200"},   (optional; values are strings)
//    "fc.weight": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]}, ...}
//
// float and double tensors also convert to and from F16 and BF16, the 2-byte floats of
// many pretrained checkpoints (HuggingFace's MarianMT among them): to_tensor and
// load_checkpoint read them, and from_tensor, save_safetensors and save_checkpoint write
// them where asked, rounding to nearest-even (heed/io/half.hpp).
//
// The reader accepts any valid file (any key order, any safetensors dtype in the low-level
// read_safetensors) and checks what safetensors' own validator checks: the header is at
// most 100 MB and an object; every entry has a known dtype, a shape of non-negative
// integers and data_offsets whose size is numel × element size; the tensors cover the
// data section exactly, without overlaps, holes or trailing bytes. Anything else throws
// FileError naming the file and the field, as does a header nested more than 64 deep (a
// valid one nests 3) or a path that is not a regular file (a FIFO would block the read).
// The reader itself is in heed/io/safetensors_reader.hpp.
//
// heed's writer adds the CRC-32C of each tensor's bytes to the metadata, as
// "heed.crc32c.<tensor name>": "<8 hex digits>", and the readers check the bytes against it
// where it is present (files from other writers have none and load unchecked). These keys
// are the format's, not the user's: the readers leave them out of the metadata they return
// and the writer refuses them in the metadata it is given.
//
// save writes a temporary file beside the target, fsyncs it and renames it over the
// target, so a file is never half-written, and removes the temporary files of earlier
// saves to the same target that were killed before they could (see
// remove_stale_temporaries).
#pragma once

#include "heed/detail/header_begin.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <iomanip>
#include <limits>
#include <map>
#include <new>
#include <set>
#include <sstream>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "heed/autograd/node.hpp"
#include "heed/detail/files.hpp"
#include "heed/detail/inline.hpp"
#include "heed/io/crc32c.hpp"
#include "heed/io/half.hpp"
#include "heed/io/safetensors_reader.hpp"
#include "heed/ops/elementwise.hpp"

namespace heed {

/// One tensor as a safetensors file stores it.
struct TensorRecord {
  std::string dtype;                // "F32", "F64", "I64", "I32", or any other safetensors dtype ("BF16", …)
  std::vector<index_t> shape;       // any rank (a heed Tensor stops at 6)
  std::vector<unsigned char> data;  // numel × element size bytes, little-endian, row-major

  /// Number of elements (1 for shape []).
  index_t numel() const;
  /// The tensor's shape and data as a record: float → F32, double → F64,
  /// std::int64_t → I64, std::int32_t → I32.
  template <typename T>
  static TensorRecord from_tensor(const Tensor<T>& tensor);
  /// The tensor as a record of `dtype`: T's own, or "F16" or "BF16" for a float or double
  /// tensor, each value rounded to nearest-even (heed/io/half.hpp). A finite value beyond
  /// the dtype's range (magnitude 65520 or more for F16) throws ValueError naming it and
  /// its index rather than be stored as inf; ±inf and NaN are kept. Any other dtype
  /// throws ValueError.
  template <typename T>
  static TensorRecord from_tensor(const Tensor<T>& tensor, const std::string& dtype);
  /// A new tensor holding the record; the rank at most 6. dtype must be T's, or F16 or
  /// BF16 for float and double, whose values convert exactly; anything else (F32 for a
  /// double tensor included) throws ValueError.
  template <typename T>
  Tensor<T> to_tensor() const;
};

/// Everything in a safetensors file.
struct SafetensorsFile {
  std::map<std::string, TensorRecord> tensors;
  std::map<std::string, std::string> metadata;  // the "__metadata__" object, empty when absent
};

namespace detail {

// ---- writing ------------------------------------------------------------------------

/// A tensor to write: its bytes, in host order (a Tensor) or already little-endian (a record).
struct SafetensorsItem {
  std::string name;
  std::string dtype;
  std::vector<index_t> shape;
  const unsigned char* bytes = nullptr;
  std::size_t size = 0;          // in bytes
  std::size_t element_size = 1;  // for the byte swap on a big-endian host
  bool host_order = false;
};

/// The tensor itself on the CPU, else a copy there (cut from the graph), for writing.
template <typename T>
Tensor<T> on_host(const Tensor<T>& tensor) {
  return !tensor.defined() || tensor.device().is_cpu() ? tensor : tensor.detach().to(Device::cpu());
}

template <typename T>
SafetensorsItem safetensors_item(const std::string& op, const std::string& path, const std::string& name,
                                 const Tensor<T>& tensor) {
  HEED_CHECK(tensor.defined(), ValueError, op, ": ", path, ": tensor '", name, "' is undefined");
  return {name,
          safetensors_dtype<T>(),
          tensor.shape().to_vector(),
          reinterpret_cast<const unsigned char*>(tensor.data()),
          static_cast<std::size_t>(tensor.numel()) * sizeof(T),
          sizeof(T),
          true};
}

// ---- F16 and BF16 ---------------------------------------------------------------------

/// The 2-byte float dtypes that float and double tensors convert to and from.
inline bool is_half_dtype(const std::string& dtype) { return dtype == "F16" || dtype == "BF16"; }

/// Throws ValueError unless a tensor of T can be saved as `dtype`: its own, or F16 or
/// BF16 for float and double. `where` starts the message ("save_checkpoint: path").
template <typename T>
void check_save_dtype(const std::string& where, const std::string& dtype) {
  const bool floating = std::is_floating_point_v<T>;
  HEED_CHECK(dtype == safetensors_dtype<T>() || (floating && is_half_dtype(dtype)), ValueError, where, ": dtype '",
             dtype, "': a ", Tensor<T>::dtype(), " tensor saves as ", safetensors_dtype<T>(),
             floating ? ", F16 or BF16" : " only");
}

/// `value` in the fewest digits that read back as it: 65520.5, 1e+300.
template <typename T>
std::string shortest_text(T value) {
  std::string text;
  for (int digits = std::numeric_limits<T>::digits10; digits <= std::numeric_limits<T>::max_digits10; ++digits) {
    std::ostringstream out;
    out << std::setprecision(digits) << value;
    text = out.str();
    std::istringstream in(text);
    T back = 0;
    if (in >> back && back == value) break;
  }
  return text;
}

/// The values of a CPU tensor as little-endian F16 or BF16 bytes, rounded to
/// nearest-even. A finite value that would round to infinity throws ValueError naming it:
/// a checkpoint must not turn a weight into inf without a word. `where` names the tensor.
template <typename T>
std::vector<unsigned char> to_half_bytes(const std::string& where, const Tensor<T>& host, const std::string& dtype) {
  const bool f16 = dtype == "F16";
  const std::size_t n = static_cast<std::size_t>(host.numel());
  std::vector<unsigned char> bytes(2 * n);
  const T* values = host.data();
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint16_t bits = f16 ? to_f16(values[i]) : to_bf16(values[i]);
    const bool infinite = (bits & 0x7FFFu) == (f16 ? 0x7C00u : 0x7F80u);
    if (infinite && std::isfinite(values[i])) {
      // Digits enough to tell the value from the largest one (65520 against 65504).
      const float largest = f16 ? from_f16<float>(0x7BFF) : from_bf16<float>(0x7F7F);
      throw ValueError(concat(where, ": element ", i, " is ", shortest_text(values[i]), ", out of ", dtype,
                              "'s range (its largest value is ", shortest_text(largest), "): saved as ", dtype,
                              " it would become inf"));
    }
    bytes[2 * i] = static_cast<unsigned char>(bits & 0xFFu);  // little-endian on any host
    bytes[2 * i + 1] = static_cast<unsigned char>(bits >> 8);
  }
  return bytes;
}

/// Converts `count` little-endian F16 or BF16 values to T, exactly.
template <typename T>
void from_half_bytes(const unsigned char* bytes, std::size_t count, const std::string& dtype, T* out) {
  const bool f16 = dtype == "F16";
  for (std::size_t i = 0; i < count; ++i) {
    const auto bits = static_cast<std::uint16_t>(bytes[2 * i] | bytes[2 * i + 1] << 8);
    out[i] = f16 ? from_f16<T>(bits) : from_bf16<T>(bits);
  }
}

/// A tensor to write as `dtype`: its own bytes, or for F16 and BF16 its values converted
/// into `converted`, which must outlive the item. Throws ValueError as to_half_bytes.
template <typename T>
SafetensorsItem safetensors_item(const std::string& op, const std::string& path, const std::string& name,
                                 const Tensor<T>& tensor, const std::string& dtype,
                                 std::vector<unsigned char>& converted) {
  if (dtype == safetensors_dtype<T>()) return safetensors_item(op, path, name, tensor);
  HEED_CHECK(tensor.defined(), ValueError, op, ": ", path, ": tensor '", name, "' is undefined");
  check_save_dtype<T>(concat(op, ": ", path), dtype);
  if constexpr (std::is_floating_point_v<T>)
    converted = to_half_bytes(concat(op, ": ", path, ": tensor '", name, "'"), tensor, dtype);
  return {name, dtype, tensor.shape().to_vector(), converted.data(), converted.size(), 2, false};
}

/// Throws ValueError unless `text` is valid UTF-8, which the JSON header must be.
void check_utf8(const std::string& op, const std::string& path, const char* what, const std::string& text);

void write_safetensors(const std::string& op, const std::string& path, std::vector<SafetensorsItem> items,
                       const std::map<std::string, std::string>& metadata);

}  // namespace detail

// ---- TensorRecord -------------------------------------------------------------------

template <typename T>
TensorRecord TensorRecord::from_tensor(const Tensor<T>& tensor, const std::string& dtype) {
  if (dtype == detail::safetensors_dtype<T>()) return from_tensor(tensor);
  detail::check_save_dtype<T>("TensorRecord::from_tensor", dtype);
  HEED_CHECK(tensor.defined(), ValueError, "TensorRecord::from_tensor: the tensor is undefined");
  TensorRecord record;
  record.dtype = dtype;
  record.shape = tensor.shape().to_vector();
  if constexpr (std::is_floating_point_v<T>)
    record.data = detail::to_half_bytes("TensorRecord::from_tensor", detail::on_host(tensor), dtype);
  return record;
}

template <typename T>
TensorRecord TensorRecord::from_tensor(const Tensor<T>& tensor) {
  HEED_CHECK(tensor.defined(), ValueError, "TensorRecord::from_tensor: the tensor is undefined");
  TensorRecord record;
  record.dtype = detail::safetensors_dtype<T>();
  record.shape = tensor.shape().to_vector();
  const Tensor<T> host = detail::on_host(tensor);
  const auto* bytes = reinterpret_cast<const unsigned char*>(host.data());
  record.data.assign(bytes, bytes + static_cast<std::size_t>(tensor.numel()) * sizeof(T));
  if (!detail::host_is_little_endian())
    detail::swap_bytes(record.data.data(), static_cast<std::size_t>(tensor.numel()), sizeof(T));
  return record;
}

namespace detail {

/// Whether a tensor of `dtype` reads into T's: T's own, or F16 / BF16 for float and
/// double (converted exactly).
template <typename T>
bool reads_as(const std::string& dtype) {
  return dtype == safetensors_dtype<T>() || (std::is_floating_point_v<T> && is_half_dtype(dtype));
}

/// `count` elements of `dtype` (little-endian, as in a file; reads_as<T>(dtype)) as T's at `out`.
template <typename T>
void convert_bytes(const unsigned char* bytes, std::size_t count, const std::string& dtype, T* out) {
  if constexpr (std::is_floating_point_v<T>) {
    if (is_half_dtype(dtype)) {
      from_half_bytes(bytes, count, dtype, out);
      return;
    }
  }
  if (count != 0) std::memcpy(out, bytes, count * sizeof(T));
  if (!host_is_little_endian()) swap_bytes(reinterpret_cast<unsigned char*>(out), count, sizeof(T));
}

}  // namespace detail

template <typename T>
Tensor<T> TensorRecord::to_tensor() const {
  constexpr bool floating = std::is_floating_point_v<T>;
  HEED_CHECK(detail::reads_as<T>(dtype), ValueError, "TensorRecord::to_tensor: dtype ", dtype, ", wanted ",
             detail::safetensors_dtype<T>(), floating ? " (or F16, BF16)" : "", " for a ", Tensor<T>::dtype(),
             " tensor");
  const index_t n = numel();
  const std::size_t element_size = floating && detail::is_half_dtype(dtype) ? 2 : sizeof(T);
  HEED_CHECK(data.size() == static_cast<std::size_t>(n) * element_size, ValueError,
             "TensorRecord::to_tensor: ", data.size(), " bytes for shape ", detail::format_shape(shape), " of ", dtype,
             " (", static_cast<std::size_t>(n) * element_size, " expected)");
  Tensor<T> out = Tensor<T>::empty(Shape(shape));
  detail::convert_bytes(data.data(), static_cast<std::size_t>(n), dtype, out.data());
  return out;
}

namespace detail {

/// Writes named tensors as `dtype` (T's own, or F16 / BF16 for float and double), for
/// save_safetensors and save_checkpoint (`op` names the caller in errors): device
/// tensors copied to the host, 2-byte floats converted, both kept alive until written;
/// `items` (whose bytes the caller keeps) are written with them.
template <typename T>
void save_tensors_as(const char* op, const std::string& path,
                     const std::vector<std::pair<std::string, Tensor<T>>>& tensors,
                     const std::map<std::string, std::string>& metadata, const std::string& dtype,
                     std::vector<SafetensorsItem> items = {}) {
  check_save_dtype<T>(concat(op, ": ", path), dtype);
  std::vector<Tensor<T>> host;
  std::vector<std::vector<unsigned char>> converted(tensors.size());
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    host.push_back(on_host(tensors[i].second));
    items.push_back(safetensors_item(op, path, tensors[i].first, host.back(), dtype, converted[i]));
  }
  write_safetensors(op, path, std::move(items), metadata);
}

}  // namespace detail

// ---- files --------------------------------------------------------------------------

/// Reads and validates a whole safetensors file; tensors of any safetensors dtype come
/// back as raw records. Throws FileError naming the file and what is wrong with it.
SafetensorsFile read_safetensors(const std::string& path);

/// The "__metadata__" of a safetensors file, without reading its tensors (the header is
/// validated all the same): enough to rebuild a model from its hyper-parameters before
/// loading its weights.
std::map<std::string, std::string> read_safetensors_metadata(const std::string& path);

/// A tensor as a safetensors header describes it, without its bytes.
struct TensorInfo {
  std::string dtype;           // "F32", "F64", … (any safetensors dtype)
  std::vector<index_t> shape;  // any rank
};

/// A safetensors file's header: its metadata and each tensor's dtype and shape.
struct SafetensorsHeader {
  std::map<std::string, TensorInfo> tensors;
  std::map<std::string, std::string> metadata;  // as read_safetensors_metadata returns it
};

/// The header of a safetensors file, without reading its tensors' bytes (the header is
/// validated all the same, and must cover the file's data section): enough to compare a
/// file with the model its metadata describes before building that model, which may be
/// larger than memory when the metadata lies.
SafetensorsHeader read_safetensors_header(const std::string& path);

/// Writes records (of any safetensors dtype, mixed) atomically. Bad arguments (two
/// tensors of one name, a record whose bytes do not fit its shape, text that is not
/// UTF-8) throw ValueError before any file is created; a failure to write throws
/// FileError and leaves an existing file at `path` as it was.
void save_safetensors(const std::string& path, const std::vector<std::pair<std::string, TensorRecord>>& tensors,
                      const std::map<std::string, std::string>& metadata = {});

/// Writes named tensors atomically (float as F32, double F64, std::int64_t I64,
/// std::int32_t I32); errors as the overload for records.
template <typename T>
void save_safetensors(const std::string& path, const std::vector<std::pair<std::string, Tensor<T>>>& tensors,
                      const std::map<std::string, std::string>& metadata = {}) {
  std::vector<detail::SafetensorsItem> items;
  std::vector<Tensor<T>> on_host;  // device tensors copied out, alive until written
  for (const auto& [name, tensor] : tensors) {
    on_host.push_back(detail::on_host(tensor));
    items.push_back(detail::safetensors_item("save_safetensors", path, name, on_host.back()));
  }
  detail::write_safetensors("save_safetensors", path, std::move(items), metadata);
}

/// As above, every tensor saved as `dtype`: T's own, or "F16" or "BF16" for float and
/// double, rounded to nearest-even. A finite value beyond the dtype's range (magnitude
/// 65520 or more for F16) throws ValueError naming the tensor and the value, before any
/// file is created, rather than be saved as inf.
template <typename T>
void save_safetensors(const std::string& path, const std::vector<std::pair<std::string, Tensor<T>>>& tensors,
                      const std::map<std::string, std::string>& metadata, const std::string& dtype) {
  detail::save_tensors_as("save_safetensors", path, tensors, metadata, dtype);
}

#if HEED_IO_DEFINITIONS

namespace detail {

HEED_IO_INLINE void check_utf8(const std::string& op, const std::string& path, const char* what,
                               const std::string& text) {
  try {
    (void)nlohmann::json(text).dump();
  } catch (const nlohmann::json::type_error&) {
    throw ValueError(
        concat(op, ": ", path, ": ", what, " ", json_excerpt(nlohmann::json(text)), " is not valid UTF-8"));
  }
}

HEED_IO_INLINE void write_safetensors(const std::string& op, const std::string& path,
                                      std::vector<SafetensorsItem> items,
                                      const std::map<std::string, std::string>& metadata) {
  // Check every argument before a file is created.
  std::set<std::string> names;
  for (const SafetensorsItem& item : items) {
    HEED_CHECK(item.name != "__metadata__", ValueError, op, ": ", path,
               ": '__metadata__' is the metadata's key and cannot name a tensor");
    HEED_CHECK(names.insert(item.name).second, ValueError, op, ": ", path, ": tensor name '", item.name,
               "' appears twice");
    check_utf8(op, path, "tensor name", item.name);
  }
  for (const auto& [key, value] : metadata) {
    check_utf8(op, path, "metadata key", key);
    check_utf8(op, path, "metadata value", value);
    HEED_CHECK(!is_checksum_key(key), ValueError, op, ": ", path, ": metadata key '", key,
               "' is reserved: heed writes each tensor's checksum under '", kChecksumPrefix, "<tensor name>'");
  }

  // As safetensors' writer: the largest elements first, then by name, so that each tensor
  // starts at a multiple of its element size once the header is padded to 8 bytes.
  std::stable_sort(items.begin(), items.end(), [](const SafetensorsItem& a, const SafetensorsItem& b) {
    return a.element_size != b.element_size ? a.element_size > b.element_size : a.name < b.name;
  });
  // Each tensor's checksum joins the metadata, over its bytes as the file holds them.
  std::map<std::string, std::string> all_metadata = metadata;
  const bool swap = !host_is_little_endian();
  for (const SafetensorsItem& item : items) {
    std::uint32_t crc = 0;
    if (swap && item.host_order) {
      std::vector<unsigned char> little(item.bytes, item.bytes + item.size);
      swap_bytes(little.data(), item.size / item.element_size, item.element_size);
      crc = crc32c(little.data(), little.size());
    } else {
      crc = crc32c(item.bytes, item.size);
    }
    all_metadata[kChecksumPrefix + item.name] = format_crc(crc);
  }
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!all_metadata.empty()) {
    nlohmann::ordered_json& meta = header["__metadata__"] = nlohmann::ordered_json::object();
    for (const auto& [key, value] : all_metadata) meta[key] = value;
  }
  std::uint64_t offset = 0;
  for (const SafetensorsItem& item : items) {
    nlohmann::ordered_json entry = nlohmann::ordered_json::object();
    entry["dtype"] = item.dtype;
    entry["shape"] = item.shape;
    entry["data_offsets"] = {offset, offset + item.size};
    header[item.name] = std::move(entry);
    offset += item.size;
  }
  std::string text = header.dump();  // compact, UTF-8 written as it is
  text.append((8 - text.size() % 8) % 8, ' ');
  HEED_CHECK(text.size() <= kSafetensorsMaxHeader, ValueError, op, ": ", path, ": the header would take ", text.size(),
             " bytes, over the ", kSafetensorsMaxHeader, " that readers accept");

  save_atomically(op, path, [&](const SaveSink& file) {
    unsigned char length[8];
    for (int i = 0; i < 8; ++i)
      length[i] = static_cast<unsigned char>(static_cast<std::uint64_t>(text.size()) >> 8 * i);
    file.write(length, 8);
    file.write(text.data(), text.size());
    for (const SafetensorsItem& item : items) {
      if (swap && item.host_order) {
        std::vector<unsigned char> little(item.bytes, item.bytes + item.size);
        swap_bytes(little.data(), item.size / item.element_size, item.element_size);
        file.write(little.data(), little.size());
      } else {
        file.write(item.bytes, item.size);
      }
    }
  });
}

}  // namespace detail

HEED_IO_INLINE index_t TensorRecord::numel() const {
  std::uint64_t n = 1;
  for (index_t size : shape)
    HEED_CHECK(size >= 0 && detail::checked_multiply(n, static_cast<std::uint64_t>(size), n), ValueError,
               "TensorRecord: shape ", detail::format_shape(shape), " is negative or too large");
  HEED_CHECK(n <= static_cast<std::uint64_t>(std::numeric_limits<index_t>::max()), ValueError, "TensorRecord: shape ",
             detail::format_shape(shape), " is too large");
  return static_cast<index_t>(n);
}

HEED_IO_INLINE SafetensorsFile read_safetensors(const std::string& path) {
  detail::SafetensorsReader reader("read_safetensors", path);
  SafetensorsFile file;
  file.metadata = reader.metadata();
  try {
    for (const auto& e : reader.entries()) {
      TensorRecord& record = file.tensors[e.name];
      record.dtype = e.dtype;
      record.shape = e.shape;
      record.data.resize(static_cast<std::size_t>(e.end - e.begin));
    }
  } catch (const std::bad_alloc&) {
    reader.out_of_memory("for the tensors' ", reader.data_size(), " bytes");
  }
  reader.read_data([&](const detail::SafetensorsReader::Entry& e) { return file.tensors[e.name].data.data(); });
  return file;
}

HEED_IO_INLINE std::map<std::string, std::string> read_safetensors_metadata(const std::string& path) {
  return detail::SafetensorsReader("read_safetensors_metadata", path).metadata();
}

HEED_IO_INLINE SafetensorsHeader read_safetensors_header(const std::string& path) {
  const detail::SafetensorsReader reader("read_safetensors_header", path);
  SafetensorsHeader header;
  header.metadata = reader.metadata();
  for (const auto& e : reader.entries()) header.tensors[e.name] = TensorInfo{e.dtype, e.shape};
  return header;
}

HEED_IO_INLINE void save_safetensors(const std::string& path,
                                     const std::vector<std::pair<std::string, TensorRecord>>& tensors,
                                     const std::map<std::string, std::string>& metadata) {
  const std::string op = "save_safetensors";
  std::vector<detail::SafetensorsItem> items;
  for (const auto& [name, record] : tensors) {
    const std::size_t element_size = detail::safetensors_dtype_size(record.dtype);
    HEED_CHECK(element_size != 0, ValueError, op, ": ", path, ": tensor '", name, "' has unknown dtype '", record.dtype,
               "' (safetensors has ", detail::safetensors_dtype_list(), ")");
    const std::size_t expected = static_cast<std::size_t>(record.numel()) * element_size;
    HEED_CHECK(record.data.size() == expected, ValueError, op, ": ", path, ": tensor '", name, "' has ",
               record.data.size(), " bytes; shape ", detail::format_shape(record.shape), " of ", record.dtype,
               " needs ", expected);
    items.push_back({name, record.dtype, record.shape, record.data.data(), record.data.size(), element_size, false});
  }
  detail::write_safetensors(op, path, std::move(items), metadata);
}

#endif  // HEED_IO_DEFINITIONS

}  // namespace heed

#include "heed/detail/header_end.hpp"
