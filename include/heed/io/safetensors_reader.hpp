// heed/io/safetensors_reader.hpp — the reading side of the safetensors format described
// in heed/io/safetensors.hpp, shared by read_safetensors and load_checkpoint
// (heed/io/checkpoint.hpp): the format's limits, dtypes and checksum keys, and
// detail::SafetensorsReader, which opens a file, validates its header as safetensors' own
// validator does and reads the tensors' bytes, checking them against their checksums.
// Everything here is heed::detail; include heed/io/safetensors.hpp to use the format.
#pragma once

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

#include "heed/core/error.hpp"
#include "heed/core/shape.hpp"
#include "heed/detail/files.hpp"
#include "heed/io/crc32c.hpp"

namespace heed {

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
      check_crc(e, crc);
    }
  }

  /// Reads each tensor's bytes (little-endian, as in the file) in order, a chunk of at
  /// most 4 MiB at a time, into consume(entry, bytes, offset, size) (offset and size in
  /// bytes within the tensor): memory for one chunk whatever the tensors' sizes. Checks
  /// each tensor against its checksum once all of it is consumed, and at the end that
  /// the file was not changed meanwhile. Call once, instead of read_data.
  template <typename Consume>
  void read_chunks(Consume&& consume) {
    std::uint64_t largest = 0;
    for (const Entry& e : entries_) largest = std::max(largest, e.end - e.begin);
    // 4 MiB rather than read_data's 1: freeing it raises glibc's mmap threshold as far as
    // read_safetensors' whole tensors did (Transformer weights of 4 MiB), and so keeps
    // buffers of 1 to 4 MiB allocated afterwards (decoding's) off fresh, faulted pages.
    constexpr std::uint64_t kStreamChunk = std::uint64_t(4) << 20;
    std::vector<unsigned char> chunk(static_cast<std::size_t>(std::min(kStreamChunk, largest)));
    for (const Entry& e : entries_) {
      const std::string what = "tensor '" + e.name + "'";
      std::uint32_t crc = 0;
      for (std::uint64_t done = 0, size = e.end - e.begin; done < size;) {
        const std::uint64_t n = std::min(kStreamChunk, size - done);
        read_exact(chunk.data(), n, what);
        if (e.has_crc) crc = crc32c(chunk.data(), static_cast<std::size_t>(n), crc);
        consume(e, static_cast<const unsigned char*>(chunk.data()), static_cast<std::size_t>(done),
                static_cast<std::size_t>(n));
        done += n;
      }
      check_crc(e, crc);
    }
    check_unchanged();
  }

  /// How much read_data reads (and checksums) at a time.
  static constexpr std::uint64_t kChunk = std::uint64_t(1) << 20;

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
  void check_crc(const Entry& e, std::uint32_t crc) const {
    if (e.has_crc && crc != e.crc)
      fail("tensor '", e.name, "': its bytes do not match their checksum (CRC-32C ", format_crc(crc),
           ", the metadata says ", format_crc(e.crc),
           "): the data is damaged, or was changed by a tool that kept heed's checksums");
  }

  /// A file rewritten in place while it was read (its size or modification time no
  /// longer those at open) may have given bytes of both versions.
  void check_unchanged() const {
#if !defined(_WIN32)
    struct ::stat info {};
    if (::fstat(::fileno(file_.get()), &info) == 0 &&
        (static_cast<std::uint64_t>(info.st_size) != size_ || modified_ != modification_time(info)))
      fail("the file was changed while being read");
#endif
  }

#if !defined(_WIN32)
  static std::int64_t modification_time(const struct ::stat& info) {
#if defined(__linux__)
    return static_cast<std::int64_t>(info.st_mtim.tv_sec) * 1000000000 + info.st_mtim.tv_nsec;
#else
    return static_cast<std::int64_t>(info.st_mtime);
#endif
  }
#endif

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
    modified_ = modification_time(info);
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
  std::int64_t modified_ = 0;  // at open, for check_unchanged
  std::vector<Entry> entries_;
  std::map<std::string, std::string> metadata_;
};

}  // namespace detail
}  // namespace heed
