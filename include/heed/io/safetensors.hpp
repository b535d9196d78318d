// heed/io/safetensors.hpp — checkpoints in the safetensors format, the one PyTorch users
// write with safetensors.torch.save_file(model.state_dict(), path).
//
//   heed::save_checkpoint(net, "transformer.safetensors", {{"num_hiddens", "32"}});
//   auto meta = heed::read_safetensors_metadata("transformer.safetensors");  // rebuild net from it
//   heed::load_checkpoint(net, "transformer.safetensors");                   // returns meta too
//
// A checkpoint holds the module's named_parameters(), not its buffers (d2l's state_dict()
// has no positional-encoding table either), under their dotted names, which are the keys
// of d2l's state_dict(): float models save F32, double models F64.
//
// The format: an 8-byte little-endian length N, N bytes of UTF-8 JSON (padded with spaces),
// then the data section, each tensor little-endian and row-major at data_offsets
// [begin, end) counted from the start of the data section:
//
//   {"__metadata__": {"epochs": "200"},   (optional; values are strings)
//    "fc.weight": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]}, ...}
//
// The reader accepts any valid file (any key order, any safetensors dtype in the low-level
// read_safetensors) and checks what safetensors' own validator checks: the header is at
// most 100 MB and an object; every entry has a known dtype, a shape of non-negative
// integers and data_offsets whose size is numel × element size; the tensors cover the
// data section exactly, without overlaps, holes or trailing bytes. Anything else throws
// FileError naming the file and the field, as does a header nested more than 64 deep (a
// valid one nests 3) or a path that is not a regular file (a FIFO would block the read).
//
// heed's writer adds the CRC-32C of each tensor's bytes to the metadata, as
// "heed.crc32c.<tensor name>": "<8 hex digits>", and the readers check the bytes against it
// where it is present (files from other writers have none and load unchecked). These keys
// are the format's, not the user's: the readers leave them out of the metadata they return
// and the writer refuses them in the metadata it is given.
//
// save writes a temporary file beside the target, fsyncs it and renames it over the
// target, so a checkpoint is never half-written, and removes the temporary files of earlier
// saves to the same target that were killed before they could (see
// remove_stale_temporaries); load reads and checks everything before it touches a
// parameter, so a failed load leaves the module bit-for-bit as it was.
#pragma once

#include "heed/detail/header_begin.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <map>
#include <new>
#include <set>
#include <string>
#include <system_error>
#include <type_traits>
#include <utility>
#include <vector>

#if !defined(_WIN32)
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>
#endif

#include "heed/autograd/node.hpp"
#include "heed/detail/files.hpp"
#include "heed/io/crc32c.hpp"
#include "heed/nn/module.hpp"
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
  /// A new tensor holding the record; dtype must be T's (no conversion) and the rank at most 6.
  template <typename T>
  Tensor<T> to_tensor() const;
};

/// Everything in a safetensors file.
struct SafetensorsFile {
  std::map<std::string, TensorRecord> tensors;
  std::map<std::string, std::string> metadata;  // the "__metadata__" object, empty when absent
};

namespace detail {

/// The largest header safetensors reads (its MAX_HEADER_SIZE); a bigger length means a
/// corrupt file or not a safetensors file at all.
inline constexpr std::uint64_t kSafetensorsMaxHeader = 100000000;

/// The deepest nesting of arrays and objects a header may have. A valid one has 3 (the
/// header, an entry, its shape); the cap keeps a crafted one from exhausting the stack of
/// code that walks the parsed value recursively.
inline constexpr std::size_t kSafetensorsMaxDepth = 64;

/// The metadata key of a tensor's checksum is this prefix and the tensor's name.
inline constexpr const char* kChecksumPrefix = "heed.crc32c.";

/// Whether a metadata key is one of heed's checksums.
inline bool is_checksum_key(const std::string& key) { return key.rfind(kChecksumPrefix, 0) == 0; }

/// "0a1b2c3d": a checksum as the metadata holds it.
inline std::string format_crc(std::uint32_t crc) {
  static const char digits[] = "0123456789abcdef";
  std::string out(8, '0');
  for (int i = 7; i >= 0; --i, crc >>= 4) out[static_cast<std::size_t>(i)] = digits[crc & 0xF];
  return out;
}

/// Reads exactly 8 hex digits (either case) into crc.
inline bool parse_crc(const std::string& text, std::uint32_t& crc) {
  if (text.size() != 8) return false;
  crc = 0;
  for (const char c : text) {
    const int digit = c >= '0' && c <= '9'   ? c - '0'
                      : c >= 'a' && c <= 'f' ? c - 'a' + 10
                      : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                             : -1;
    if (digit < 0) return false;
    crc = crc << 4 | static_cast<std::uint32_t>(digit);
  }
  return true;
}

/// The dtypes safetensors defines, with their sizes in bytes.
inline const std::map<std::string, std::size_t>& safetensors_dtypes() {
  static const std::map<std::string, std::size_t> sizes = {
      {"BOOL", 1}, {"U8", 1},   {"I8", 1},  {"F8_E5M2", 1}, {"F8_E4M3", 1}, {"F8_E8M0", 1}, {"I16", 2}, {"U16", 2},
      {"F16", 2},  {"BF16", 2}, {"I32", 4}, {"U32", 4},     {"F32", 4},     {"I64", 8},     {"U64", 8}, {"F64", 8}};
  return sizes;
}

/// Bytes per element of a safetensors dtype; 0 for a name safetensors does not define.
inline std::size_t safetensors_dtype_size(const std::string& dtype) {
  const auto it = safetensors_dtypes().find(dtype);
  return it == safetensors_dtypes().end() ? 0 : it->second;
}

inline std::string safetensors_dtype_list() {
  std::string names;
  for (const auto& entry : safetensors_dtypes()) names += (names.empty() ? "" : ", ") + entry.first;
  return names;
}

/// The safetensors dtype that holds T.
template <typename T>
constexpr const char* safetensors_dtype() {
  if constexpr (std::is_same_v<T, float>)
    return "F32";
  else if constexpr (std::is_same_v<T, double>)
    return "F64";
  else if constexpr (std::is_same_v<T, std::int64_t>)
    return "I64";
  else if constexpr (std::is_same_v<T, std::int32_t>)
    return "I32";
  else
    static_assert(sizeof(T) == 0, "safetensors: T must be float, double, std::int64_t or std::int32_t");
}

inline bool host_is_little_endian() {
  const std::uint16_t one = 1;
  unsigned char first = 0;
  std::memcpy(&first, &one, 1);
  return first == 1;
}

/// Reverses the bytes of each of `count` elements of `size` bytes (little- ↔ big-endian).
inline void swap_bytes(unsigned char* bytes, std::size_t count, std::size_t size) {
  for (std::size_t i = 0; i < count; ++i) std::reverse(bytes + i * size, bytes + (i + 1) * size);
}

/// "(2, 3)"; "()" for a scalar: the form of heed's other messages.
inline std::string format_shape(const std::vector<index_t>& shape) {
  std::string out = "(";
  for (std::size_t d = 0; d < shape.size(); ++d) out += (d ? ", " : "") + std::to_string(shape[d]);
  return out + ")";
}

/// 'a', 'b', 'c' — at most 20 of them, then how many more.
inline std::string format_names(const std::vector<std::string>& names) {
  constexpr std::size_t kShown = 20;
  std::string out;
  for (std::size_t i = 0; i < names.size() && i < kShown; ++i) out += (i ? ", '" : "'") + names[i] + "'";
  if (names.size() > kShown) out += concat(" and ", names.size() - kShown, " more");
  return out;
}

/// Appends `value` as JSON writes it, stopping once `out` holds more than `budget` bytes.
/// Each level of nesting writes a byte before it goes deeper, so the recursion stops
/// within budget + 1 levels however deep the value is; strings are cut to the budget
/// before they are escaped, so a long one costs no more than a short one.
inline void append_json_excerpt(const nlohmann::json& value, std::string& out, std::size_t budget) {
  const auto quote = [&out, budget](const std::string& text) {
    out += nlohmann::json(text.substr(0, budget + 1)).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  };
  if (out.size() > budget) return;
  if (value.is_string()) {
    quote(value.get_ref<const std::string&>());
  } else if (value.is_array() || value.is_object()) {
    out += value.is_array() ? '[' : '{';
    for (auto it = value.begin(); it != value.end() && out.size() <= budget; ++it) {
      if (it != value.begin()) out += ',';
      if (value.is_object()) {
        quote(it.key());
        out += ':';
      }
      append_json_excerpt(it.value(), out, budget);
    }
    out += value.is_array() ? ']' : '}';
  } else {
    out += value.dump();  // a number, a boolean or null
  }
}

/// A JSON value as it would be written, cut short for a message.
inline std::string json_excerpt(const nlohmann::json& value) {
  constexpr std::size_t kShown = 60;
  std::string text;
  append_json_excerpt(value, text, kShown);
  if (text.size() <= kShown) return text;
  std::size_t cut = kShown - 3;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;  // not inside a UTF-8 character
  return text.substr(0, cut) + "...";
}

/// Where JSON text first nests arrays and objects more than `limit` deep (outside its
/// strings), or npos. A scan of the bytes, before the text is parsed into anything.
inline std::size_t json_too_deep_at(const std::string& text, std::size_t limit) {
  std::size_t depth = 0;
  bool in_string = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\')
        ++i;  // the escaped character, which may be a quote
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > limit) return i;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;  // unbalanced brackets are the parser's to report
    }
  }
  return std::string::npos;
}

/// A non-negative JSON integer ("3", not "3.0", "-1" or "\"3\"").
inline bool json_to_size(const nlohmann::json& value, std::uint64_t& out) {
  if (value.is_number_unsigned()) {
    out = value.get<std::uint64_t>();
    return true;
  }
  if (value.is_number_integer() && value.get<std::int64_t>() >= 0) {  // "-0"
    out = static_cast<std::uint64_t>(value.get<std::int64_t>());
    return true;
  }
  return false;
}

/// a × b, or false when it would not fit in 64 bits.
inline bool checked_multiply(std::uint64_t a, std::uint64_t b, std::uint64_t& out) {
  if (a != 0 && b > std::numeric_limits<std::uint64_t>::max() / a) return false;
  out = a * b;
  return true;
}

// ---- reading ------------------------------------------------------------------------
/// Opens a safetensors file, reads and validates its header; read_data() then reads the
/// tensors. Every error is a FileError "<op>: <path>: <what is wrong>", whatever throws
/// underneath (nlohmann's exceptions included).
class SafetensorsReader {
 public:
  struct Entry {
    std::string name, dtype;
    std::vector<index_t> shape;
    std::uint64_t begin = 0, end = 0;  // bytes, from the start of the data section
    bool has_crc = false;              // the metadata holds the CRC-32C of its bytes
    std::uint32_t crc = 0;
  };

  SafetensorsReader(std::string op, std::string path) : op_(std::move(op)), path_(std::move(path)) {
    try {
      open();
      read_header();
    } catch (const std::bad_alloc&) {
      out_of_memory("reading the ", header_length_, "-byte header");
    }
  }

  /// The tensors in the order of their data.
  const std::vector<Entry>& entries() const { return entries_; }
  /// Bytes of the data section, which the tensors cover exactly.
  std::uint64_t data_size() const { return data_size_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

  /// Reads each tensor's bytes (as in the file: little-endian) into destination(entry),
  /// which returns memory for entry.end - entry.begin bytes, and checks them against
  /// their checksum where the file has one. Call once.
  template <typename Destination>
  void read_data(Destination&& destination) {
    // The header was read up to its end, and the entries cover the data section in
    // order, so the tensors follow one another without a seek. Each chunk is checksummed
    // while it is still in the cache.
    constexpr std::uint64_t kChunk = std::uint64_t(1) << 20;
    for (const Entry& e : entries_) {
      auto* bytes = static_cast<unsigned char*>(destination(e));
      const std::string what = "tensor '" + e.name + "'";
      std::uint32_t crc = 0;
      for (std::uint64_t done = 0, size = e.end - e.begin; done < size;) {
        const std::uint64_t chunk = std::min(kChunk, size - done);
        read_exact(bytes + done, chunk, what);
        if (e.has_crc) crc = crc32c(bytes + done, static_cast<std::size_t>(chunk), crc);
        done += chunk;
      }
      if (e.has_crc && crc != e.crc)
        fail(what, ": its bytes do not match their checksum (CRC-32C ", format_crc(crc), ", the metadata says ",
             format_crc(e.crc), "): the data is damaged, or was changed by a tool that kept heed's checksums");
    }
  }

  template <typename... Args>
  [[noreturn]] void fail(Args&&... args) const {
    throw FileError(concat(op_, ": ", path_, ": ", std::forward<Args>(args)...));
  }

  /// For std::bad_alloc: the file was fine, the memory to read it was not there.
  template <typename... Args>
  [[noreturn]] void out_of_memory(Args&&... args) const {
    throw OutOfMemoryError(concat(op_, ": ", path_, ": out of memory ", std::forward<Args>(args)...));
  }

 private:
  /// Opens the path only if it is a regular file: a FIFO without a writer would block the
  /// read forever, a device would never end.
  void open() {
    std::error_code ec;
    const std::filesystem::file_type type = std::filesystem::status(path_, ec).type();
    if (!ec && type != std::filesystem::file_type::regular && type != std::filesystem::file_type::not_found)
      fail("is ", file_kind(type), ", not a safetensors file");
#if defined(_WIN32)
    errno = 0;
    file_.reset(std::fopen(path_.c_str(), "rb"));
    if (!file_) fail("cannot open: ", errno_message(errno));
    const std::uintmax_t size = std::filesystem::file_size(path_, ec);
    if (ec) fail("cannot tell the size: ", ec.message());
    size_ = static_cast<std::uint64_t>(size);
#else
    // The path may have been replaced since the check: O_NONBLOCK makes opening a FIFO
    // return at once, and fstat tells what was opened.
    errno = 0;
    const int fd = ::open(path_.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) fail("cannot open: ", errno_message(errno));
    struct ::stat info {};
    if (::fstat(fd, &info) != 0) {
      const int error = errno;
      ::close(fd);
      fail("cannot tell the size: ", errno_message(error));
    }
    if (!S_ISREG(info.st_mode)) {
      ::close(fd);
      fail("is ",
           file_kind(S_ISDIR(info.st_mode)    ? std::filesystem::file_type::directory
                     : S_ISFIFO(info.st_mode) ? std::filesystem::file_type::fifo
                     : S_ISSOCK(info.st_mode) ? std::filesystem::file_type::socket
                     : S_ISCHR(info.st_mode)  ? std::filesystem::file_type::character
                     : S_ISBLK(info.st_mode)  ? std::filesystem::file_type::block
                                              : std::filesystem::file_type::unknown),
           ", not a safetensors file");
    }
    const int flags = ::fcntl(fd, F_GETFL);
    if (flags >= 0) (void)::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);  // regular files ignore it anyway
    file_.reset(::fdopen(fd, "rb"));
    if (!file_) {
      const int error = errno;
      ::close(fd);
      fail("cannot open: ", errno_message(error));
    }
    size_ = static_cast<std::uint64_t>(info.st_size);
#endif
  }

  void read_exact(void* destination, std::uint64_t bytes, const std::string& what) {
    if (bytes == 0) return;
    if (std::fread(destination, 1, static_cast<std::size_t>(bytes), file_.get()) == bytes) return;
    if (std::feof(file_.get())) fail("the file ended while reading ", what, " (was it changed while being read?)");
    fail("cannot read ", what, ": ", errno_message(errno));
  }

  void read_header() {
    if (size_ < 8)
      fail("the file has ", size_, " bytes, fewer than the 8-byte header length that starts a safetensors file");
    unsigned char length_bytes[8];
    read_exact(length_bytes, 8, "the header length");
    std::uint64_t length = 0;
    for (int i = 7; i >= 0; --i) length = length << 8 | length_bytes[i];
    if (length > kSafetensorsMaxHeader)
      fail("header length ", length, " is over the ", kSafetensorsMaxHeader,
           "-byte limit (a corrupt file, or not a safetensors file)");
    if (length > size_ - 8)
      fail("header length ", length, " runs past the end of the file (", size_ - 8,
           " bytes follow the length; truncated?)");
    header_length_ = length;
    std::string header(static_cast<std::size_t>(length), '\0');
    read_exact(header.data(), length, "the header");
    data_size_ = size_ - 8 - length;
    parse_header(header);
  }

  void parse_header(const std::string& header) {
    try {
      interpret_header(header);
    } catch (const nlohmann::json::exception& e) {
      // Whatever nlohmann throws past the checks below ("number overflow parsing '1e400'"
      // is an out_of_range) still names the file.
      fail("the header cannot be read: ", json_error_text(e));
    }
  }

  /// nlohmann's message without its "[json.exception.parse_error.101] " prefix.
  static std::string json_error_text(const nlohmann::json::exception& e) {
    const std::string what = e.what();
    const std::size_t bracket = what.find("] ");
    return bracket == std::string::npos ? what : what.substr(bracket + 2);
  }

  void interpret_header(const std::string& header) {
    // nlohmann takes a NUL byte for the end of the input; serde_json, as JSON, refuses it.
    const std::size_t nul = header.find('\0');
    if (nul != std::string::npos)
      fail("the header is not valid JSON: it has a NUL byte at offset ", nul, " (only spaces may pad it)");
    // Checked on the bytes, before anything is built: 10^6 nested arrays parse, but
    // would then take as deep a recursion (and as much memory) to be used.
    const std::size_t deep = json_too_deep_at(header, kSafetensorsMaxDepth);
    if (deep != std::string::npos)
      fail("the header nests arrays and objects more than ", kSafetensorsMaxDepth, " deep (at byte ", deep,
           " of the header; a valid one nests 3)");
    // nlohmann keeps the last of two equal keys; a valid file has none, so they are
    // looked for while parsing.
    using Event = nlohmann::json::parse_event_t;
    std::vector<std::set<std::string>> open_objects;
    std::string duplicate;
    const nlohmann::json::parser_callback_t find_duplicates = [&](int, Event event, nlohmann::json& parsed) {
      if (event == Event::object_start) {
        open_objects.emplace_back();
      } else if (event == Event::object_end) {
        if (!open_objects.empty()) open_objects.pop_back();
      } else if (event == Event::key && !open_objects.empty() && duplicate.empty()) {
        if (!open_objects.back().insert(parsed.get<std::string>()).second) duplicate = parsed.get<std::string>();
      }
      return true;
    };
    nlohmann::json root;
    try {
      root = nlohmann::json::parse(header.begin(), header.end(), find_duplicates);
    } catch (const nlohmann::json::parse_error& e) {
      fail("the header is not valid JSON: ", json_error_text(e));  // "parse error at line 1, column 15: ..."
    } catch (const nlohmann::json::exception& e) {
      fail("the header cannot be read as JSON: ", json_error_text(e));  // a number too large for a double
    }
    if (!duplicate.empty()) fail("the header has the key '", duplicate, "' twice");
    if (!root.is_object()) fail("the header is a JSON ", root.type_name(), ", not an object");
    if (header[0] != '{') fail("the header must start with '{' (only trailing spaces may pad it)");

    std::map<std::string, std::string> checksums;  // "heed.crc32c.<name>" → its value
    for (auto it = root.begin(); it != root.end(); ++it) {
      if (it.key() == "__metadata__")
        parse_metadata(it.value(), checksums);
      else
        entries_.push_back(parse_entry(it.key(), it.value()));
    }
    attach_checksums(checksums);
    check_layout();
  }

  void parse_metadata(const nlohmann::json& value, std::map<std::string, std::string>& checksums) {
    if (value.is_null()) return;  // safetensors reads "__metadata__": null as no metadata
    if (!value.is_object()) fail("__metadata__ is a JSON ", value.type_name(), ", not an object of strings");
    for (auto it = value.begin(); it != value.end(); ++it) {
      if (!it.value().is_string())
        fail("__metadata__ '", it.key(), "' is a JSON ", it.value().type_name(), " (", json_excerpt(it.value()),
             "), not a string");
      (is_checksum_key(it.key()) ? checksums : metadata_).emplace(it.key(), it.value().get<std::string>());
    }
  }

  /// A checksum must be well-formed and name a tensor of the file: a damaged key would
  /// otherwise let its tensor load unchecked. A tensor without one loads unchecked, as
  /// every tensor of another writer's file does.
  void attach_checksums(const std::map<std::string, std::string>& checksums) {
    if (checksums.empty()) return;
    std::map<std::string, Entry*> by_name;
    for (Entry& e : entries_) by_name[e.name] = &e;
    for (const auto& [key, value] : checksums) {
      const std::string name = key.substr(std::strlen(kChecksumPrefix));
      const auto it = by_name.find(name);
      if (it == by_name.end())
        fail("__metadata__ '", key, "' is the checksum of a tensor '", name, "' that the file does not have");
      if (!parse_crc(value, it->second->crc))
        fail("__metadata__ '", key, "' is ", json_excerpt(nlohmann::json(value)), ", not a CRC-32C (8 hex digits)");
      it->second->has_crc = true;
    }
  }

  Entry parse_entry(const std::string& name, const nlohmann::json& value) const {
    const std::string where = "tensor '" + name + "'";
    if (!value.is_object())
      fail(where, ": the entry is a JSON ", value.type_name(), ", not an object with dtype, shape and data_offsets");
    Entry e;  // other fields an entry may have are ignored, as safetensors ignores them
    e.name = name;

    const auto dtype = value.find("dtype");
    if (dtype == value.end()) fail(where, ": no \"dtype\"");
    if (!dtype->is_string()) fail(where, ": dtype is ", json_excerpt(*dtype), ", not a string");
    e.dtype = dtype->get<std::string>();
    const std::size_t element_size = safetensors_dtype_size(e.dtype);
    if (element_size == 0)
      fail(where, ": unknown dtype '", e.dtype, "' (safetensors has ", safetensors_dtype_list(), ")");

    const auto shape = value.find("shape");
    if (shape == value.end()) fail(where, ": no \"shape\"");
    if (!shape->is_array()) fail(where, ": shape is ", json_excerpt(*shape), ", not an array");
    std::uint64_t numel = 1;
    bool overflow = false;
    for (std::size_t d = 0; d < shape->size(); ++d) {
      std::uint64_t size = 0;
      if (!json_to_size((*shape)[d], size) || size > static_cast<std::uint64_t>(std::numeric_limits<index_t>::max()))
        fail(where, ": shape entry ", d, " is ", json_excerpt((*shape)[d]), ", not a non-negative integer");
      e.shape.push_back(static_cast<index_t>(size));
      overflow = overflow || !checked_multiply(numel, size, numel);
    }

    const auto offsets = value.find("data_offsets");
    if (offsets == value.end()) fail(where, ": no \"data_offsets\"");
    if (!offsets->is_array() || offsets->size() != 2 || !json_to_size((*offsets)[0], e.begin) ||
        !json_to_size((*offsets)[1], e.end))
      fail(where, ": data_offsets is ", json_excerpt(*offsets), ", not [begin, end] with non-negative integers");
    const std::string span = concat("data_offsets [", e.begin, ", ", e.end, "]");
    if (e.begin > e.end) fail(where, ": ", span, " end before they begin");

    std::uint64_t bytes = 0;
    if (overflow || !checked_multiply(numel, element_size, bytes))
      fail(where, ": shape ", format_shape(e.shape), " has too many elements");
    if (e.end - e.begin != bytes)
      fail(where, ": shape ", format_shape(e.shape), " of ", e.dtype, " needs ", bytes, " bytes, but ", span, " span ",
           e.end - e.begin);
    if (e.end > data_size_)
      fail(where, ": ", span, " run past the end of the data section, which has ", data_size_,
           " bytes (the file is truncated?)");
    return e;
  }

  /// As safetensors' validator: sorted by offset, the tensors follow one another from
  /// byte 0 to the end of the file with neither overlap nor hole.
  void check_layout() {
    std::sort(entries_.begin(), entries_.end(), [](const Entry& a, const Entry& b) {
      return a.begin != b.begin ? a.begin < b.begin : a.end != b.end ? a.end < b.end : a.name < b.name;
    });
    std::uint64_t covered = 0;
    for (std::size_t i = 0; i < entries_.size(); ++i) {
      const Entry& e = entries_[i];
      if (e.begin < covered)
        fail("tensors '", entries_[i - 1].name, "' (data_offsets [", entries_[i - 1].begin, ", ", entries_[i - 1].end,
             "]) and '", e.name, "' (data_offsets [", e.begin, ", ", e.end, "]) overlap");
      if (e.begin > covered)
        fail("the data section has a hole: bytes ", covered, " to ", e.begin, " before tensor '", e.name,
             "' belong to no tensor (safetensors requires the tensors to cover it without gaps)");
      covered = e.end;
    }
    if (covered != data_size_)
      fail("the data section has ", data_size_ - covered, " bytes after the last tensor (it has ", data_size_,
           " bytes, the tensors cover ", covered, "; safetensors requires them to cover it exactly)");
  }

  std::string op_, path_;
  FilePtr file_;
  std::uint64_t size_ = 0, data_size_ = 0, header_length_ = 0;
  std::vector<Entry> entries_;
  std::map<std::string, std::string> metadata_;
};

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

/// Throws ValueError unless `text` is valid UTF-8, which the JSON header must be.
inline void check_utf8(const std::string& op, const std::string& path, const char* what, const std::string& text) {
  try {
    (void)nlohmann::json(text).dump();
  } catch (const nlohmann::json::type_error&) {
    throw ValueError(
        concat(op, ": ", path, ": ", what, " ", json_excerpt(nlohmann::json(text)), " is not valid UTF-8"));
  }
}

inline void write_safetensors(const std::string& op, const std::string& path, std::vector<SafetensorsItem> items,
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

// ---- TensorRecord -------------------------------------------------------------------

inline index_t TensorRecord::numel() const {
  std::uint64_t n = 1;
  for (index_t size : shape)
    HEED_CHECK(size >= 0 && detail::checked_multiply(n, static_cast<std::uint64_t>(size), n), ValueError,
               "TensorRecord: shape ", detail::format_shape(shape), " is negative or too large");
  HEED_CHECK(n <= static_cast<std::uint64_t>(std::numeric_limits<index_t>::max()), ValueError, "TensorRecord: shape ",
             detail::format_shape(shape), " is too large");
  return static_cast<index_t>(n);
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

template <typename T>
Tensor<T> TensorRecord::to_tensor() const {
  HEED_CHECK(dtype == detail::safetensors_dtype<T>(), ValueError, "TensorRecord::to_tensor: dtype ", dtype, ", wanted ",
             detail::safetensors_dtype<T>(), " for a ", Tensor<T>::dtype(), " tensor");
  const index_t n = numel();
  HEED_CHECK(data.size() == static_cast<std::size_t>(n) * sizeof(T), ValueError,
             "TensorRecord::to_tensor: ", data.size(), " bytes for shape ", detail::format_shape(shape), " of ", dtype,
             " (", static_cast<std::size_t>(n) * sizeof(T), " expected)");
  Tensor<T> out = Tensor<T>::empty(Shape(shape));
  if (n != 0) std::memcpy(out.data(), data.data(), data.size());
  if (!detail::host_is_little_endian())
    detail::swap_bytes(reinterpret_cast<unsigned char*>(out.data()), static_cast<std::size_t>(n), sizeof(T));
  return out;
}

// ---- files --------------------------------------------------------------------------

/// Reads and validates a whole safetensors file; tensors of any safetensors dtype come
/// back as raw records. Throws FileError naming the file and what is wrong with it.
inline SafetensorsFile read_safetensors(const std::string& path) {
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

/// The "__metadata__" of a safetensors file, without reading its tensors (the header is
/// validated all the same): enough to rebuild a model from its hyper-parameters before
/// loading its weights.
inline std::map<std::string, std::string> read_safetensors_metadata(const std::string& path) {
  return detail::SafetensorsReader("read_safetensors_metadata", path).metadata();
}

/// Writes records (of any safetensors dtype, mixed) atomically. Bad arguments (two
/// tensors of one name, a record whose bytes do not fit its shape, text that is not
/// UTF-8) throw ValueError before any file is created; a failure to write throws
/// FileError and leaves an existing file at `path` as it was.
inline void save_safetensors(const std::string& path, const std::vector<std::pair<std::string, TensorRecord>>& tensors,
                             const std::map<std::string, std::string>& metadata = {}) {
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
