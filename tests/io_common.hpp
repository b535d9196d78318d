// Shared by the safetensors and checkpoint tests (unity_io.cpp): temporary directories,
// file bytes, a tiny module, and safetensors files built by hand.
#pragma once

#include "golden.hpp"

#include <heed/io/checkpoint.hpp>
#include <heed/io/crc32c.hpp>
#include <heed/io/half.hpp>
#include <heed/io/safetensors.hpp>
#include <heed/io/training_checkpoint.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iterator>
#include <limits>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#if !defined(_WIN32)
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>
#endif

using Catch::Matchers::Contains;
using heed::index_t;
using heed_test::check_close;

namespace fs = std::filesystem;

namespace {

using Metadata = std::map<std::string, std::string>;

/// A fresh directory under the system's temporary directory, removed with its contents.
class TempDir {
 public:
  TempDir() {
    static unsigned counter = 0;
    const unsigned salt = std::random_device{}();
    path_ = fs::temp_directory_path() / ("heed_test_io-" + std::to_string(salt) + "-" + std::to_string(counter++));
    fs::create_directories(path_);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  /// The names in the directory, sorted.
  std::vector<std::string> listing() const {
    std::vector<std::string> names;
    for (const auto& entry : fs::directory_iterator(path_)) names.push_back(entry.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
  }

 private:
  fs::path path_;
};

void write_file(const std::string& path, const std::string& bytes) {
  // A new file rather than the old one truncated: ext4 flushes a truncated file as it is
  // closed, and the tests below rewrite one file thousands of times.
  std::error_code ec;
  fs::remove(path, ec);
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  REQUIRE(out.good());
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE(in.good());
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

std::string le64(std::uint64_t n) {
  std::string out;
  for (int i = 0; i < 8; ++i) out += static_cast<char>(n >> 8 * i & 0xff);
  return out;
}

std::uint64_t read_le64(const std::string& bytes, std::size_t at) {
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = n << 8 | static_cast<unsigned char>(bytes[at + i]);
  return n;
}

/// The little-endian bytes of values of type T, whatever the host's byte order.
template <typename T>
std::string le_bytes(const std::vector<T>& values) {
  std::string out;
  for (T v : values) {
    unsigned char raw[sizeof(T)];
    std::memcpy(raw, &v, sizeof(T));
    if (!heed::detail::host_is_little_endian()) std::reverse(raw, raw + sizeof(T));
    out.append(reinterpret_cast<const char*>(raw), sizeof(T));
  }
  return out;
}

/// Linear(3, 4) then LayerNorm(4): state_dict() keys fc.weight, fc.bias, ln.weight, ln.bias,
/// as TinyNet in tests/data/make_safetensors_golden.py.
template <typename T>
class TinyNet : public heed::Module<T> {
 public:
  explicit TinyNet(heed::Generator& gen) : heed::Module<T>("TinyNet"), fc(3, 4, true, gen) {
    this->register_module("fc", fc);
    this->register_module("ln", ln);
  }
  // x: (..., 3) -> (..., 4)
  heed::Tensor<T> forward(const heed::Tensor<T>& x) const { return ln(fc(x)); }
  heed::Tensor<T> operator()(const heed::Tensor<T>& x) const { return forward(x); }

  heed::Linear<T> fc;
  heed::LayerNorm<T> ln{4};
};

/// Fills every parameter with uniform values in [-1, 1) (LayerNorm starts at ones and zeros).
template <typename T>
void randomize(heed::Module<T>& module, std::uint64_t seed) {
  heed::Generator gen(seed);
  heed::NoGradGuard no_grad;
  for (auto& [name, p] : module.named_parameters()) p.copy_(heed::uniform<T>(p.shape(), T(-1), T(1), gen));
}

/// The bytes of every parameter, to compare bit for bit.
template <typename T>
std::vector<std::string> bits(const heed::Module<T>& module) {
  std::vector<std::string> out;
  for (const auto& [name, p] : module.named_parameters())
    out.emplace_back(reinterpret_cast<const char*>(p.data()), static_cast<std::size_t>(p.numel()) * sizeof(T));
  return out;
}

template <typename T>
std::vector<std::string> names_of(const heed::Module<T>& module) {
  std::vector<std::string> names;
  for (const auto& [name, p] : module.named_parameters()) names.push_back(name);
  return names;
}

// ---- hand-built files ------------------------------------------------------------------

/// A tensor for a hand-built file: its header fields and data bytes.
struct Raw {
  std::string name, dtype;
  std::vector<index_t> shape;
  std::string bytes;
};

/// A header (JSON, in insertion order) and a data section with the tensors laid out in
/// the order given.
struct Built {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  std::string data;
};

Built lay_out(const std::vector<Raw>& tensors) {
  Built b;
  for (const Raw& t : tensors) {
    b.header[t.name] = {
        {"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {b.data.size(), b.data.size() + t.bytes.size()}}};
    b.data += t.bytes;
  }
  return b;
}

/// The file's bytes: length, header text (padded with `pad` spaces), data.
std::string encode_text(const std::string& header, const std::string& data) {
  return le64(header.size()) + header + data;
}
std::string encode(const Built& b, std::size_t pad = 0) {
  return encode_text(b.header.dump() + std::string(pad, ' '), b.data);
}

std::vector<float> iota(std::size_t n, float start, float step) {
  std::vector<float> v;
  for (std::size_t i = 0; i < n; ++i) v.push_back(start + step * static_cast<float>(i));
  return v;
}

// The values of the hand-built TinyNet<float> file (all exact in float).
const std::vector<float> kFcWeight = iota(12, -1.0f, 0.25f), kFcBias = iota(4, 10.0f, 1.0f),
                         kLnWeight = iota(4, 1.0f, 0.5f), kLnBias = iota(4, 0.0f, -0.125f);

/// A valid file for TinyNet<float>, laid out as no heed file is: names not sorted, the data
/// in yet another order, metadata last.
Built tiny_file() {
  Built b = lay_out({{"ln.bias", "F32", {4}, le_bytes(kLnBias)},
                     {"fc.weight", "F32", {4, 3}, le_bytes(kFcWeight)},
                     {"ln.weight", "F32", {4}, le_bytes(kLnWeight)},
                     {"fc.bias", "F32", {4}, le_bytes(kFcBias)}});
  b.header["__metadata__"] = {{"format", "pt"}};
  return b;
}

/// Loading `bytes` into a float TinyNet throws FileError with a message naming the file
/// and containing `text`, and leaves every parameter bit for bit as it was. Unless the
/// file is valid and only differs from the model, read_safetensors refuses it too.
void check_refused(const std::string& bytes, const std::string& text, bool valid_file = false) {
  TempDir dir;
  const std::string path = dir.file("bad.safetensors");
  write_file(path, bytes);
  heed::Generator gen(7);
  TinyNet<float> net(gen);
  randomize(net, 8);
  const std::vector<std::string> before = bits(net);
  INFO("expected: " << text);
  CHECK_THROWS_AS(heed::load_checkpoint(net, path), heed::FileError);
  CHECK_THROWS_WITH(heed::load_checkpoint(net, path), Contains("load_checkpoint: " + path + ": ") && Contains(text));
  CHECK(bits(net) == before);
  if (valid_file) {
    CHECK_NOTHROW(heed::read_safetensors(path));
  } else {
    CHECK_THROWS_WITH(heed::read_safetensors(path), Contains("read_safetensors: " + path + ": ") && Contains(text));
    CHECK_THROWS_AS(heed::read_safetensors_metadata(path), heed::FileError);
  }
}

/// The good file's bytes with the JSON value at header[name][key] replaced by raw text
/// (which nlohmann could not build: a million nested arrays, 1e400).
std::string with_raw(const Built& good, const std::string& name, const std::string& key, const std::string& raw) {
  Built b = good;
  b.header[name][key] = "@@";
  std::string text = b.header.dump();
  const std::size_t at = text.find("\"@@\"");
  REQUIRE(at != std::string::npos);
  text.replace(at, 4, raw);
  return encode_text(text, b.data);
}

/// Arrays nested `depth` deep around `inner`: [[[inner]]].
std::string nested(std::size_t depth, const std::string& inner = "") {
  return std::string(depth, '[') + inner + std::string(depth, ']');
}

/// The message of the FileError that loading `bytes` into a float TinyNet throws, or ""
/// when it loads.
std::string load_error(const std::string& bytes) {
  TempDir dir;
  write_file(dir.file("bad.safetensors"), bytes);
  heed::Generator gen(0);
  TinyNet<float> net(gen);
  try {
    heed::load_checkpoint(net, dir.file("bad.safetensors"));
  } catch (const heed::FileError& e) {
    return e.what();
  }
  return "";
}

std::uint32_t crc(const std::string& bytes) { return heed::crc32c(bytes.data(), bytes.size()); }

}  // namespace
