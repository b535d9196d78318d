// Checkpoints in the safetensors format (heed/io/safetensors.hpp): round trips, the byte
// layout, files laid out as PyTorch's writer lays them out, a checkpoint written by
// PyTorch, every kind of damage or mismatch a load must refuse (leaving the model as it
// was), hostile files (deep nesting, huge numbers, changed data, FIFOs), CRC-32C
// (heed/io/crc32c.hpp), and atomic saves with the clean-up after killed ones.
#include "golden.hpp"

#include <heed/io/checkpoint.hpp>
#include <heed/io/crc32c.hpp>
#include <heed/io/safetensors.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <thread>
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

// ---- round trips ---------------------------------------------------------------------------

TEMPLATE_TEST_CASE("save_checkpoint and load_checkpoint round-trip every bit", "[io]", float, double) {
  using T = TestType;
  TempDir dir;
  const std::string path = dir.file("tiny.safetensors");
  heed::Generator gen_a(1), gen_b(2);
  TinyNet<T> a(gen_a), b(gen_b);
  randomize(a, 3);
  // Values a text format would lose: signed zero, infinities, a NaN with a payload, subnormals.
  T* w = a.fc.weight.data();
  w[0] = -T(0);
  w[1] = std::numeric_limits<T>::infinity();
  w[2] = -std::numeric_limits<T>::infinity();
  w[3] = std::numeric_limits<T>::denorm_min();
  const std::uint64_t nan_bits = sizeof(T) == 4 ? 0x7fc01234u : 0x7ff8000000abcdefull;
  std::memcpy(&w[4], &nan_bits, sizeof(T));
  REQUIRE(bits(a) != bits(b));

  heed::save_checkpoint(a, path, {{"epochs", "200"}});
  CHECK(heed::load_checkpoint(b, path) == Metadata{{"epochs", "200"}});
  CHECK(bits(b) == bits(a));
  CHECK(dir.listing() == std::vector<std::string>{"tiny.safetensors"});  // no temporary left

  // The file holds exactly the parameters, in T's dtype.
  const heed::SafetensorsFile file = heed::read_safetensors(path);
  std::vector<std::string> keys;
  for (const auto& [name, record] : file.tensors) {
    keys.push_back(name);
    CHECK(record.dtype == (std::is_same_v<T, float> ? "F32" : "F64"));
  }
  CHECK(keys == std::vector<std::string>{"fc.bias", "fc.weight", "ln.bias", "ln.weight"});
  CHECK(file.tensors.at("fc.weight").shape == std::vector<index_t>{4, 3});
  CHECK(file.tensors.at("fc.weight").template to_tensor<T>().shape() == heed::Shape{4, 3});
  CHECK(file.metadata == Metadata{{"epochs", "200"}});
}

TEST_CASE("A TransformerEncoder checkpoint holds its parameters, not its buffers", "[io]") {
  TempDir dir;
  const std::string path = dir.file("encoder.safetensors");
  auto make = [](heed::Generator& gen) {
    heed::TransformerOptions options;
    options.generator = &gen;
    return std::make_unique<heed::TransformerEncoder<float>>(10, 8, 8, 8, 8, heed::Shape{8}, 8, 16, 2, 2, 0.0, false,
                                                             options);
  };
  heed::Generator gen_a(11), gen_b(12);
  auto a = make(gen_a), b = make(gen_b);
  randomize(*a, 13);  // LayerNorms too
  REQUIRE(bits(*a) != bits(*b));
  REQUIRE_FALSE(a->named_buffers().empty());  // the positional-encoding table

  heed::save_checkpoint(*a, path);
  const heed::SafetensorsFile file = heed::read_safetensors(path);
  std::vector<std::string> names = names_of(*a), keys;
  std::sort(names.begin(), names.end());
  for (const auto& entry : file.tensors) keys.push_back(entry.first);
  CHECK(keys == names);
  CHECK(file.tensors.count("embedding.weight") == 1);
  CHECK(file.tensors.count("blks.block1.attention.W_q.weight") == 1);
  for (const auto& [name, buffer] : a->named_buffers()) CHECK(file.tensors.count(name) == 0);
  CHECK(file.metadata.empty());

  CHECK(heed::load_checkpoint(*b, path).empty());
  CHECK(bits(*b) == bits(*a));
  a->eval();
  b->eval();
  const heed::IndexTensor tokens({1, 2, 3, 4, 5, 6}, {2, 3});
  const heed::Tensorf ya = a->forward(tokens), yb = b->forward(tokens);
  CHECK(ya.to_vector() == yb.to_vector());
}

TEST_CASE("Metadata round-trips UTF-8 and characters JSON must escape", "[io]") {
  TempDir dir;
  const std::string path = dir.file("meta.safetensors");
  const Metadata metadata = {{"ascii", "plain"},
                             {"french", "températures élevées"},
                             {"japanese", "日本語"},
                             {"emoji", "🙂"},
                             {"escapes", "quote \" backslash \\ slash / newline \n tab \t return \r"},
                             {"control", std::string("nul \0 bell \x07 escape \x1b", 21)},
                             {"key \"quoted\"\n", "value"},
                             {"", "an empty key"},
                             {"empty value", ""}};
  heed::Generator gen(0);
  TinyNet<float> net(gen);
  heed::save_checkpoint(net, path, metadata);

  CHECK(heed::read_safetensors_metadata(path) == metadata);
  CHECK(heed::read_safetensors(path).metadata == metadata);
  CHECK(heed::load_checkpoint(net, path) == metadata);
  CHECK(metadata.at("control").size() == 21);

  // UTF-8 is written as it is; quotes, backslashes and control characters escaped.
  const std::string bytes = read_file(path);
  CHECK_THAT(bytes, Contains("\"températures élevées\""));
  CHECK_THAT(bytes, Contains("\"日本語\""));
  CHECK_THAT(bytes, Contains(R"("quote \" backslash \\ slash / newline \n tab \t return \r")"));
  CHECK_THAT(bytes, Contains(R"("nul \u0000 bell \u0007 escape \u001b")"));
}

TEMPLATE_TEST_CASE("A saved file follows the safetensors layout byte for byte", "[io]", float, double) {
  using T = TestType;
  TempDir dir;
  const std::string path = dir.file("linear.safetensors");
  heed::Generator gen(0);
  heed::Linear<T> fc(3, 2, true, gen);
  {
    heed::NoGradGuard no_grad;
    fc.weight.copy_(heed::Tensor<T>({1.5, -2, 0.25, 3, 0, -0.5}, {2, 3}));
    fc.bias.copy_(heed::Tensor<T>({1.5, 4}, {2}));
  }
  const bool with_metadata = GENERATE(false, true);
  heed::save_checkpoint(fc, path, with_metadata ? Metadata{{"b", "2"}, {"a", "1"}} : Metadata{});

  const std::string bytes = read_file(path);
  REQUIRE(bytes.size() >= 8);
  const std::uint64_t n = read_le64(bytes, 0);
  INFO("header: " << bytes.substr(8, n));
  CHECK(n % 8 == 0);  // padded, so that the data starts aligned
  REQUIRE(8 + n <= bytes.size());
  const std::string header = bytes.substr(8, n);
  CHECK(header.front() == '{');
  const std::size_t close = header.find_last_of('}');
  CHECK(header.find_first_not_of(' ', close + 1) == std::string::npos);  // only spaces after the JSON
  CHECK(header.size() - close - 1 < 8);                                  // and fewer than 8 of them

  const nlohmann::json json = nlohmann::json::parse(header);
  const std::string dtype = std::is_same_v<T, float> ? "F32" : "F64";
  const std::uint64_t size = sizeof(T);
  CHECK(json.at("bias") == nlohmann::json{{"dtype", dtype}, {"shape", {2}}, {"data_offsets", {0, 2 * size}}});
  CHECK(json.at("weight") ==
        nlohmann::json{{"dtype", dtype}, {"shape", {2, 3}}, {"data_offsets", {2 * size, 8 * size}}});
  CHECK(bytes.size() == 8 + n + 8 * size);  // the tensors cover the data section exactly
  // Keys sorted, the metadata first, as safetensors writes them. It holds each tensor's
  // CRC-32C over its bytes in the file, beside the user's keys.
  CHECK(header.find("\"bias\"") < header.find("\"weight\""));
  CHECK(json.size() == 3);
  CHECK(header.find("\"__metadata__\"") == 1);
  nlohmann::json expected_metadata = {
      {"heed.crc32c.bias", heed::detail::format_crc(heed::crc32c(bytes.data() + 8 + n, 2 * size))},
      {"heed.crc32c.weight", heed::detail::format_crc(heed::crc32c(bytes.data() + 8 + n + 2 * size, 6 * size))}};
  if (with_metadata) {
    expected_metadata["a"] = "1";
    expected_metadata["b"] = "2";
  }
  CHECK(json.at("__metadata__") == expected_metadata);
  // The CRC-32C of bias [1.5, 4] and weight [[1.5, -2, 0.25], [3, 0, -0.5]] as little-endian T.
  CHECK(json.at("__metadata__").at("heed.crc32c.bias") == (std::is_same_v<T, float> ? "dd0768a3" : "4e39c756"));
  CHECK(json.at("__metadata__").at("heed.crc32c.weight") == (std::is_same_v<T, float> ? "045e38cf" : "748f5295"));

  // Little-endian IEEE 754: 1.5 is 0x3fc00000 (float) or 0x3ff8000000000000 (double).
  const std::string one_and_a_half = std::is_same_v<T, float> ? std::string("\x00\x00\xc0\x3f", 4)
                                                              : std::string("\x00\x00\x00\x00\x00\x00\xf8\x3f", 8);
  const std::size_t data = 8 + n;
  CHECK(bytes.substr(data, size) == one_and_a_half);             // bias[0]
  CHECK(bytes.substr(data + 2 * size, size) == one_and_a_half);  // weight[0, 0]
  CHECK(bytes.substr(data + size, size) == le_bytes(std::vector<T>{4}));
  CHECK(bytes.substr(data + 2 * size, 6 * size) == le_bytes(std::vector<T>{1.5, -2, 0.25, 3, 0, -0.5}));
}

TEST_CASE("A file laid out by another writer loads: names unsorted, header padded", "[io]") {
  TempDir dir;
  const std::string path = dir.file("python.safetensors");
  const Built b = tiny_file();
  const std::size_t pad = GENERATE(0, 5, 64);
  write_file(path, encode(b, pad));

  heed::Generator gen(0);
  TinyNet<float> net(gen);
  CHECK(heed::load_checkpoint(net, path) == Metadata{{"format", "pt"}});
  CHECK(net.fc.weight.to_vector() == kFcWeight);
  CHECK(net.fc.bias.to_vector() == kFcBias);
  CHECK(net.ln.weight.to_vector() == kLnWeight);
  CHECK(net.ln.bias.to_vector() == kLnBias);
  CHECK(net.fc.weight.shape() == heed::Shape{4, 3});
  CHECK(net.fc.weight.requires_grad());  // still a parameter

  // Metadata may also be null or absent, and trailing whitespace other than spaces is JSON's.
  Built no_meta = tiny_file();
  no_meta.header["__metadata__"] = nullptr;
  write_file(path, encode(no_meta));
  CHECK(heed::load_checkpoint(net, path).empty());
  no_meta.header.erase("__metadata__");
  write_file(path, encode_text(no_meta.header.dump(2) + "\n\t ", no_meta.data));
  CHECK(heed::load_checkpoint(net, path).empty());
  CHECK(net.ln.bias.to_vector() == kLnBias);
}

TEST_CASE("Low-level files hold any dtype; records convert to tensors of that dtype only", "[io]") {
  TempDir dir;
  const std::string path = dir.file("records.safetensors");
  heed::TensorRecord bf16{"BF16", {2}, {0x80, 0x3f, 0x00, 0x40}};  // 1.0 and 2.0
  const std::vector<std::pair<std::string, heed::TensorRecord>> records = {
      {"steps", heed::TensorRecord::from_tensor(heed::IndexTensor({1, -2, std::int64_t(1) << 40}, {3}))},
      {"scalar", heed::TensorRecord::from_tensor(heed::Tensorf({2.5f}, heed::Shape{}))},
      {"matrix", heed::TensorRecord::from_tensor(heed::Tensord({1, 2, 3, 4}, {2, 2}))},
      {"empty", heed::TensorRecord::from_tensor(heed::Tensor<std::int32_t>::empty({0, 3}))},
      {"counts", heed::TensorRecord::from_tensor(heed::Tensor<std::int32_t>({7, -8}, {2}))},
      {"half", bf16}};
  heed::save_safetensors(path, records, {{"kind", "mixed"}});

  const heed::SafetensorsFile file = heed::read_safetensors(path);
  CHECK(file.metadata == Metadata{{"kind", "mixed"}});
  REQUIRE(file.tensors.size() == records.size());
  for (const auto& [name, record] : records) {
    INFO(name);
    const heed::TensorRecord& back = file.tensors.at(name);
    CHECK(back.dtype == record.dtype);
    CHECK(back.shape == record.shape);
    CHECK(back.data == record.data);
  }
  CHECK(file.tensors.at("steps").to_tensor<std::int64_t>().to_vector() ==
        std::vector<std::int64_t>{1, -2, std::int64_t(1) << 40});
  CHECK(file.tensors.at("scalar").to_tensor<float>().item() == 2.5f);
  CHECK(file.tensors.at("scalar").to_tensor<float>().dim() == 0);
  CHECK(file.tensors.at("matrix").to_tensor<double>().to_vector() == std::vector<double>{1, 2, 3, 4});
  CHECK(file.tensors.at("empty").to_tensor<std::int32_t>().shape() == heed::Shape{0, 3});
  CHECK(file.tensors.at("counts").to_tensor<std::int32_t>().to_vector() == std::vector<std::int32_t>{7, -8});
  CHECK_ERROR(heed::ValueError, "dtype I64, wanted F32", file.tensors.at("steps").to_tensor<float>());
  CHECK_ERROR(heed::ValueError, "dtype BF16, wanted F32", file.tensors.at("half").to_tensor<float>());

  // Larger elements first, so that each tensor starts at a multiple of its element size.
  const std::string bytes = read_file(path);
  const nlohmann::json json = nlohmann::json::parse(bytes.substr(8, read_le64(bytes, 0)));
  for (const auto& [name, record] : records) {
    INFO(name);
    const std::uint64_t begin = json.at(name).at("data_offsets")[0];
    CHECK(begin % heed::detail::safetensors_dtype_size(record.dtype) == 0);
  }

  // The overload for tensors of one type.
  heed::save_safetensors(path, std::vector<std::pair<std::string, heed::Tensord>>{
                                   {"x", heed::Tensord({0.5, 0.25}, {2})}, {"y", heed::Tensord({1}, {1, 1})}});
  const heed::SafetensorsFile doubles = heed::read_safetensors(path);
  CHECK(doubles.metadata.empty());
  CHECK(doubles.tensors.at("x").to_tensor<double>().to_vector() == std::vector<double>{0.5, 0.25});
  CHECK(doubles.tensors.at("y").shape == std::vector<index_t>{1, 1});
}

TEST_CASE("A checkpoint written by PyTorch loads and gives PyTorch's outputs", "[io][golden]") {
  const std::string path = std::string(HEED_TEST_DATA_DIR) + "/torch_linear.safetensors";
  const heed_test::Golden golden("torch_linear_golden.txt");
  heed::Generator gen(0);
  TinyNet<float> net(gen);
  CHECK(heed::read_safetensors_metadata(path) == Metadata{{"format", "pt"}});
  CHECK(heed::load_checkpoint(net, path) == Metadata{{"format", "pt"}});
  net.eval();
  const heed::Tensorf output = net(golden.tensor<float>("x"));
  check_close(output, golden.tensor<float>("output"), 1e-6);

  // The file is F32: a double model refuses it and stays as it was.
  TinyNet<double> wide(gen);
  const auto before = bits(wide);
  CHECK_ERROR(heed::FileError, "tensor 'fc.weight': dtype F32, model wants F64", heed::load_checkpoint(wide, path));
  CHECK(bits(wide) == before);
}

// ---- refused files -----------------------------------------------------------------------

TEST_CASE("load_checkpoint refuses a damaged or mismatched file and leaves the model as it was", "[io]") {
  const Built good = tiny_file();
  auto with = [&good](const std::string& name, const std::string& key, const nlohmann::ordered_json& value) {
    Built b = good;
    b.header[name][key] = value;
    return encode(b);
  };
  auto without = [&good](const std::string& name, const std::string& key) {
    Built b = good;
    b.header[name].erase(key);
    return encode(b);
  };

  SECTION("the valid file loads") {
    TempDir dir;
    write_file(dir.file("good.safetensors"), encode(good));
    heed::Generator gen(0);
    TinyNet<float> net(gen);
    CHECK_NOTHROW(heed::load_checkpoint(net, dir.file("good.safetensors")));
  }
  SECTION("missing file") {
    TempDir dir;
    heed::Generator gen(0);
    TinyNet<float> net(gen);
    const auto before = bits(net);
    const std::string path = dir.file("absent.safetensors");
    CHECK_ERROR(heed::FileError, "load_checkpoint: " + path + ": cannot open: No such file or directory",
                heed::load_checkpoint(net, path));
    CHECK_ERROR(heed::FileError, "read_safetensors_metadata: " + path + ": cannot open",
                heed::read_safetensors_metadata(path));
    CHECK_ERROR(heed::FileError, "is a directory", heed::load_checkpoint(net, dir.file(".")));
    CHECK(bits(net) == before);
  }
  SECTION("shorter than the header length") {
    check_refused("", "the file has 0 bytes, fewer than the 8-byte header length");
    check_refused(std::string(7, '\0'), "the file has 7 bytes");
  }
  SECTION("header length past the end of the file") {
    const std::string bytes = encode(good);
    check_refused(le64(bytes.size()) + bytes.substr(8), "header length " + std::to_string(bytes.size()) +
                                                            " runs past the end of the file (" +
                                                            std::to_string(bytes.size() - 8) + " bytes follow");
    check_refused(le64(10) + "{}", "header length 10 runs past the end of the file (2 bytes follow");
  }
  SECTION("absurd header length") {
    check_refused(le64(std::uint64_t(1) << 40) + "{}", "header length 1099511627776 is over the 100000000-byte limit");
    check_refused("PK\x03\x04 not a safetensors file", "is over the 100000000-byte limit");
  }
  SECTION("header not JSON, or not an object") {
    check_refused(encode_text(R"({"fc.weight": })", ""),
                  "the header is not valid JSON: parse error at line 1, column 15");
    check_refused(encode_text("", ""), "the header is not valid JSON");
    check_refused(encode_text(R"({} {})", ""), "the header is not valid JSON");
    check_refused(encode_text(std::string("{}\0\0\0", 5), ""),
                  "the header is not valid JSON: it has a NUL byte at offset 2");  // NUL padding
    check_refused(encode_text("[1, 2]", ""), "the header is a JSON array, not an object");
    check_refused(encode_text("\"text\"", ""), "the header is a JSON string, not an object");
    check_refused(encode_text(" {}", ""), "the header must start with '{'");
    check_refused(encode_text("{\"fc.bias\": {\"dtype\": \"F32\", \"dtype\": \"F32\"}}", ""),
                  "the header has the key 'dtype' twice");
    std::string twice = good.header.dump();
    twice.insert(1, R"("fc.bias":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},)");
    check_refused(encode_text(twice, good.data), "the header has the key 'fc.bias' twice");
    check_refused(encode_text("{\"fc.bias\xff\": 1}", ""), "the header is not valid JSON");
  }
  SECTION("entry not an object, or missing a field") {
    Built number = good;
    number.header["fc.weight"] = 3;
    check_refused(encode(number),
                  "tensor 'fc.weight': the entry is a JSON number, not an object with dtype, shape and data_offsets");
    check_refused(without("fc.weight", "dtype"), "tensor 'fc.weight': no \"dtype\"");
    check_refused(without("ln.bias", "shape"), "tensor 'ln.bias': no \"shape\"");
    check_refused(without("fc.bias", "data_offsets"), "tensor 'fc.bias': no \"data_offsets\"");
  }
  SECTION("fields of the wrong JSON type") {
    check_refused(with("fc.weight", "dtype", 32), "tensor 'fc.weight': dtype is 32, not a string");
    check_refused(with("fc.weight", "shape", "4,3"), "tensor 'fc.weight': shape is \"4,3\", not an array");
    check_refused(with("fc.weight", "data_offsets", "16-64"),
                  "tensor 'fc.weight': data_offsets is \"16-64\", not [begin, end] with non-negative integers");
  }
  SECTION("unknown dtype") {
    check_refused(with("fc.bias", "dtype", "F17"), "tensor 'fc.bias': unknown dtype 'F17' (safetensors has BF16, BOOL");
    check_refused(with("fc.bias", "dtype", "f32"), "unknown dtype 'f32'");
  }
  SECTION("dtype other than the model's") {
    Built b = lay_out({{"fc.bias", "F64", {4}, le_bytes(std::vector<double>{1, 2, 3, 4})},
                       {"fc.weight", "F32", {4, 3}, le_bytes(kFcWeight)},
                       {"ln.bias", "F32", {4}, le_bytes(kLnBias)},
                       {"ln.weight", "I32", {4}, le_bytes(std::vector<std::int32_t>{1, 2, 3, 4})}});
    check_refused(encode(b),
                  "tensor 'fc.bias': dtype F64, model wants F32; tensor 'ln.weight': dtype I32, model wants F32", true);
    Built half = good;  // a dtype heed has no tensor for, of the same byte size
    half.header["ln.weight"]["dtype"] = "BF16";
    half.header["ln.weight"]["shape"] = {8};
    check_refused(encode(half),
                  "tensor 'ln.weight': dtype BF16, model wants F32; tensor 'ln.weight': shape (8) in the file, model "
                  "wants (4)",
                  true);
  }
  SECTION("shape other than the model's") {
    check_refused(with("fc.weight", "shape", {3, 4}),
                  "tensor 'fc.weight': shape (3, 4) in the file, model wants (4, 3)", true);
    check_refused(with("fc.weight", "shape", {12}), "tensor 'fc.weight': shape (12) in the file, model wants (4, 3)",
                  true);
    check_refused(with("fc.weight", "shape", {1, 4, 3}),
                  "tensor 'fc.weight': shape (1, 4, 3) in the file, model wants (4, 3)", true);
  }
  SECTION("shape entries that are not non-negative integers") {
    check_refused(with("fc.weight", "shape", {-4, -3}),
                  "tensor 'fc.weight': shape entry 0 is -4, not a non-negative integer");
    check_refused(with("fc.weight", "shape", {4.0, 3}),
                  "tensor 'fc.weight': shape entry 0 is 4.0, not a non-negative integer");
    check_refused(with("fc.weight", "shape", {4, 2.5}), "shape entry 1 is 2.5, not a non-negative integer");
    check_refused(with("fc.weight", "shape", {4, "3"}), "shape entry 1 is \"3\", not a non-negative integer");
    check_refused(with("fc.weight", "shape", {4, nullptr}), "shape entry 1 is null, not a non-negative integer");
    check_refused(with("fc.weight", "shape", {std::uint64_t(1) << 63, 2}), "shape entry 0 is 9223372036854775808");
    check_refused(with("fc.weight", "shape", {std::uint64_t(1) << 62, 8}),
                  "shape (4611686018427387904, 8) has too many elements");
  }
  SECTION("data_offsets not [begin, end] with begin <= end") {
    check_refused(with("fc.weight", "data_offsets", {16}),
                  "tensor 'fc.weight': data_offsets is [16], not [begin, end]");
    check_refused(with("fc.weight", "data_offsets", {16, 64, 64}), "data_offsets is [16,64,64], not [begin, end]");
    check_refused(with("fc.weight", "data_offsets", {-16, 32}), "data_offsets is [-16,32], not [begin, end]");
    check_refused(with("fc.weight", "data_offsets", {16.0, 64}), "data_offsets is [16.0,64], not [begin, end]");
    check_refused(with("fc.weight", "data_offsets", {"16", 64}), "data_offsets is [\"16\",64], not [begin, end]");
    check_refused(with("fc.weight", "data_offsets", {64, 16}),
                  "tensor 'fc.weight': data_offsets [64, 16] end before they begin");
  }
  SECTION("byte size other than numel × element size") {
    check_refused(with("fc.weight", "data_offsets", {16, 60}),
                  "tensor 'fc.weight': shape (4, 3) of F32 needs 48 bytes, but data_offsets [16, 60] span 44");
    check_refused(with("fc.weight", "dtype", "F64"),
                  "shape (4, 3) of F64 needs 96 bytes, but data_offsets [16, 64] span 48");
  }
  SECTION("data past the end of the data section: a truncated file") {
    const std::string bytes = encode(good);
    check_refused(bytes.substr(0, bytes.size() - 4),
                  "tensor 'fc.bias': data_offsets [80, 96] run past the end of the data section, which has 92 bytes "
                  "(the file is truncated?)");
    check_refused(bytes.substr(0, bytes.size() - 96), "which has 0 bytes");
    check_refused(with("fc.bias", "data_offsets", {std::uint64_t(1) << 62, (std::uint64_t(1) << 62) + 16}),
                  "run past the end of the data section");
  }
  SECTION("overlapping tensors, holes and trailing bytes") {
    check_refused(with("fc.bias", "data_offsets", {72, 88}),
                  "tensors 'ln.weight' (data_offsets [64, 80]) and 'fc.bias' (data_offsets [72, 88]) overlap");
    check_refused(with("fc.bias", "data_offsets", {16, 32}), "overlap");
    Built hole = good;
    hole.header["fc.bias"]["data_offsets"] = {84, 100};
    hole.data += std::string(4, '\0');
    check_refused(
        encode(hole),
        "the data section has a hole: bytes 80 to 84 before tensor 'fc.bias' belong to no tensor (safetensors "
        "requires the tensors to cover it without gaps)");
    Built trailing = good;
    trailing.data += std::string(4, '\0');
    check_refused(encode(trailing),
                  "the data section has 4 bytes after the last tensor (it has 100 bytes, the tensors "
                  "cover 96; safetensors requires them to cover it exactly)");
  }
  SECTION("parameters missing from the file, tensors the model does not have") {
    Built missing =
        lay_out({{"fc.weight", "F32", {4, 3}, le_bytes(kFcWeight)}, {"fc.bias", "F32", {4}, le_bytes(kFcBias)}});
    check_refused(encode(missing),
                  "the tensors do not match the model's parameters: missing from the file: "
                  "'ln.weight', 'ln.bias'",
                  true);
    Built extra = good;
    extra.header["extra.weight"] = {{"dtype", "F32"}, {"shape", {1}}, {"data_offsets", {96, 100}}};
    extra.header["blks.0.scale"] = {{"dtype", "F32"}, {"shape", nlohmann::json::array()}, {"data_offsets", {100, 104}}};
    extra.data += le_bytes(std::vector<float>{1, 2});
    check_refused(encode(extra), "not parameters of the model: 'blks.0.scale', 'extra.weight'", true);
    Built both = missing;
    both.header["fc.scale"] = {{"dtype", "F32"}, {"shape", {1}}, {"data_offsets", {64, 68}}};
    both.data += le_bytes(std::vector<float>{1});
    check_refused(encode(both),
                  "missing from the file: 'ln.weight', 'ln.bias'; not parameters of the model: 'fc.scale'", true);
  }
  SECTION("metadata not an object of strings") {
    Built b = good;
    b.header["__metadata__"] = {1, 2};
    check_refused(encode(b), "__metadata__ is a JSON array, not an object of strings");
    b.header["__metadata__"] = "format=pt";
    check_refused(encode(b), "__metadata__ is a JSON string, not an object of strings");
    b.header["__metadata__"] = {{"format", "pt"}, {"epochs", 10}};
    check_refused(encode(b), "__metadata__ 'epochs' is a JSON number (10), not a string");
    b.header["__metadata__"] = {{"nested", {{"a", "b"}}}};
    check_refused(encode(b), "__metadata__ 'nested' is a JSON object ({\"a\":\"b\"}), not a string");
  }
}

TEST_CASE("read_safetensors_metadata validates the header without reading the tensors", "[io]") {
  TempDir dir;
  const std::string path = dir.file("meta.safetensors");
  const std::string bytes = encode(tiny_file());
  write_file(path, bytes);
  CHECK(heed::read_safetensors_metadata(path) == Metadata{{"format", "pt"}});
  write_file(path, bytes.substr(0, bytes.size() - 1));
  CHECK_ERROR(heed::FileError,
              "read_safetensors_metadata: " + path + ": tensor 'fc.bias': data_offsets [80, 96] run past",
              heed::read_safetensors_metadata(path));
}

// ---- hostile files -----------------------------------------------------------------------

TEST_CASE("crc32c gives the standard check values", "[io]") {
  CHECK(crc("123456789") == 0xE3069283u);  // the check value of CRC-32C (iSCSI)
  CHECK(crc("") == 0u);
  CHECK(heed::crc32c(nullptr, 0) == 0u);
  CHECK(crc("a") == 0xC1D04330u);
  // RFC 3720 (iSCSI), appendix B.4: 32 zeros, 32 bytes 0xff, 0 to 31 ascending and descending.
  std::string up, down;
  for (int i = 0; i < 32; ++i) {
    up += static_cast<char>(i);
    down += static_cast<char>(31 - i);
  }
  CHECK(crc(std::string(32, '\0')) == 0x8A9136AAu);
  CHECK(crc(std::string(32, '\xff')) == 0x62A8AB43u);
  CHECK(crc(up) == 0x46DD794Eu);
  CHECK(crc(down) == 0x113FDB5Cu);

  // Continuing a CRC: crc32c(b, crc32c(a)) is the CRC of a then b, wherever the cut.
  std::mt19937 rng(5);
  std::string random(1000, '\0');
  for (char& c : random) c = static_cast<char>(rng());
  const std::uint32_t whole = crc(random);
  for (std::size_t cut = 0; cut <= random.size(); cut += 37) {
    INFO("cut " << cut);
    CHECK(heed::crc32c(random.data() + cut, random.size() - cut, heed::crc32c(random.data(), cut)) == whole);
  }
  // The CPU's crc32 instruction (when crc32c uses it) and the tables agree at every length and alignment.
  INFO("crc32 instruction: " << heed::detail::crc32c_hardware());
  const auto* bytes = reinterpret_cast<const unsigned char*>(random.data());
  std::size_t agree = 0, tried = 0;
  for (std::size_t offset = 0; offset < 8; ++offset)
    for (std::size_t size = 0; offset + size <= 200; ++size, ++tried)
      agree += heed::crc32c(bytes + offset, size) == ~heed::detail::crc32c_update_portable(~0u, bytes + offset, size);
  CHECK(agree == tried);
  CHECK(~heed::detail::crc32c_update_portable(~0u, bytes, random.size()) == whole);
}

TEST_CASE("A header nested a million deep is refused, wherever the nesting is", "[io]") {
  const Built good = tiny_file();
  const std::size_t levels = GENERATE(65, 100000, 1000000);  // arrays and objects, the header's own included
  INFO("levels " << levels);
  const std::string text = "the header nests arrays and objects more than 64 deep (at byte ";
  // In a value of an entry (the header and the entry are 2 levels), or of the header.
  check_refused(with_raw(good, "__metadata__", "format", nested(levels - 2)), text);
  check_refused(with_raw(good, "fc.weight", "dtype", nested(levels - 2)), text);
  check_refused(with_raw(good, "fc.weight", "shape", "[" + nested(levels - 3, "4") + ",3]"), text);
  check_refused(with_raw(good, "fc.bias", "data_offsets", "[" + nested(levels - 3, "80") + ",96]"), text);
  check_refused(encode_text("{\"a\":" + nested(levels - 1) + "}", ""), text);
  check_refused(encode_text(nested(levels), ""), text);
  check_refused(encode_text(std::string(levels, '['), ""), text);  // never closed
  check_refused(encode_text(std::string(levels, '{'), ""), text);
  // The message quotes no more than a line of it.
  CHECK(load_error(with_raw(good, "fc.weight", "dtype", nested(levels - 2))).size() < 200);
}

TEST_CASE("A header nested 64 deep is read, and its values are quoted in a line", "[io]") {
  const Built good = tiny_file();
  // 62 arrays in an entry of the header: 64 levels, the most a header may have.
  check_refused(with_raw(good, "fc.weight", "dtype", nested(62)),
                "tensor 'fc.weight': dtype is " + std::string(57, '[') + "..., not a string");
  const std::string deep = with_raw(good, "fc.weight", "dtype", nested(63));
  const std::size_t first = deep.substr(8, read_le64(deep, 0)).find(std::string(63, '['));
  check_refused(deep,
                "more than 64 deep (at byte " + std::to_string(first + 62) + " of the header; a valid one nests 3)");
  check_refused(with_raw(good, "__metadata__", "format", nested(62, "1")),
                "__metadata__ 'format' is a JSON array (" + std::string(57, '[') + "...), not a string");
  const std::string long_text(100000, 'x');
  check_refused(with_raw(good, "fc.weight", "dtype", "[\"" + long_text + "\"]"),
                "tensor 'fc.weight': dtype is [\"" + std::string(55, 'x') + "..., not a string");
  CHECK(load_error(with_raw(good, "fc.weight", "dtype", "[\"" + long_text + "\"]")).size() < 200);

  // Brackets inside strings are text, escaped quotes included: the file loads.
  TempDir dir;
  const std::string path = dir.file("brackets.safetensors");
  Built b = good;
  const std::string brackets = "\"" + std::string(100000, '[') + "\\\"{{" + std::string(1000, '{');
  b.header["__metadata__"]["format"] = brackets;
  write_file(path, encode(b));
  heed::Generator gen(0);
  TinyNet<float> net(gen);
  CHECK(heed::load_checkpoint(net, path) == Metadata{{"format", brackets}});
  CHECK(net.fc.weight.to_vector() == kFcWeight);
}

TEST_CASE("Numbers too large for a double are a FileError, not nlohmann's exception", "[io]") {
  const Built good = tiny_file();
  check_refused(encode_text(R"({"a":1e400})", ""),
                "the header cannot be read as JSON: number overflow parsing '1e400'");
  check_refused(with_raw(good, "__metadata__", "format", "-1e400"), "number overflow parsing '-1e400'");
  check_refused(with_raw(good, "fc.weight", "shape", "[1e400,3]"), "number overflow parsing '1e400'");
  check_refused(with_raw(good, "fc.bias", "data_offsets", "[80,1E+999]"), "number overflow parsing '1E+999'");
  // An integer past 64 bits is read as a double: not an integer, then.
  check_refused(with_raw(good, "fc.weight", "shape", "[18446744073709551616,3]"),
                "shape entry 0 is 1.8446744073709552e+19, not a non-negative integer");
}

TEST_CASE("A checkpoint's checksums catch every changed data byte and name its tensor", "[io]") {
  TempDir dir;
  const std::string path = dir.file("ckpt.safetensors");
  heed::Generator gen(0);
  TinyNet<float> a(gen), b(gen);
  randomize(a, 1);
  randomize(b, 2);
  heed::save_checkpoint(a, path, {{"epochs", "3"}});
  const std::string bytes = read_file(path);
  const std::uint64_t n = read_le64(bytes, 0);
  const nlohmann::json header = nlohmann::json::parse(bytes.substr(8, n));
  const std::size_t data = 8 + n;

  // One checksum a tensor, hidden from the metadata the readers return.
  for (const std::string& name : names_of(a)) {
    const nlohmann::json& entry = header.at(name);
    const std::size_t begin = entry.at("data_offsets")[0], end = entry.at("data_offsets")[1];
    CHECK(header.at("__metadata__").at("heed.crc32c." + name) ==
          heed::detail::format_crc(crc(bytes.substr(data + begin, end - begin))));
  }
  CHECK(header.at("__metadata__").size() == 5);
  CHECK(heed::read_safetensors_metadata(path) == Metadata{{"epochs", "3"}});
  CHECK(heed::read_safetensors(path).metadata == Metadata{{"epochs", "3"}});

  const auto before = bits(b);
  std::size_t refused = 0;
  for (std::size_t at = data; at < bytes.size(); ++at) {
    std::string owner;
    for (const std::string& name : names_of(a)) {
      const nlohmann::json& offsets = header.at(name).at("data_offsets");
      if (offsets[0] <= at - data && at - data < offsets[1]) owner = name;
    }
    std::string damaged = bytes;
    damaged[at] = static_cast<char>(damaged[at] ^ (1 << at % 8));
    write_file(path, damaged);
    INFO("byte " << at << " of tensor " << owner);
    CHECK_ERROR(heed::FileError,
                "load_checkpoint: " + path + ": tensor '" + owner + "': its bytes do not match their checksum",
                heed::load_checkpoint(b, path));
    CHECK_ERROR(heed::FileError, "read_safetensors: " + path + ": tensor '" + owner + "'",
                heed::read_safetensors(path));
    CHECK(heed::read_safetensors_metadata(path) == Metadata{{"epochs", "3"}});  // it reads no data
    refused += bits(b) == before;
  }
  CHECK(refused == bytes.size() - data);

  // Without checksums (another writer's file) the same damage goes unseen.
  nlohmann::json plain = header;
  for (const std::string& name : names_of(a)) plain.at("__metadata__").erase("heed.crc32c." + name);
  std::string damaged = encode_text(plain.dump(), bytes.substr(data));
  damaged[damaged.size() - 1] = static_cast<char>(damaged[damaged.size() - 1] ^ 1);
  write_file(path, damaged);
  CHECK(heed::load_checkpoint(b, path) == Metadata{{"epochs", "3"}});
  CHECK(bits(b) != bits(a));
}

TEST_CASE("Checksums must be well-formed and name a tensor of the file", "[io]") {
  Built b = tiny_file();
  const std::string bias_crc = heed::detail::format_crc(crc(le_bytes(kFcBias)));
  SECTION("a good one, in either case, loads") {
    std::string upper = bias_crc;
    for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    b.header["__metadata__"]["heed.crc32c.fc.bias"] = upper;
    CHECK(load_error(encode(b)).empty());
  }
  SECTION("a wrong one") {
    const std::string wrong = heed::detail::format_crc(crc(le_bytes(kFcBias)) ^ 4);
    b.header["__metadata__"]["heed.crc32c.fc.bias"] = wrong;
    const std::string message = load_error(encode(b));
    CHECK_THAT(message, Contains("tensor 'fc.bias': its bytes do not match their checksum (CRC-32C " + bias_crc +
                                 ", the metadata says " + wrong + "): the data is damaged"));
    TempDir dir;
    write_file(dir.file("wrong.safetensors"), encode(b));
    CHECK_ERROR(heed::FileError, "tensor 'fc.bias': its bytes do not match",
                heed::read_safetensors(dir.file("wrong.safetensors")));
    CHECK(heed::read_safetensors_metadata(dir.file("wrong.safetensors")) == Metadata{{"format", "pt"}});
  }
  SECTION("one that is not 8 hex digits") {
    for (const char* bad : {"", "1234567", "123456789", "0x123456", "1234567g", " 1234567"}) {
      b.header["__metadata__"]["heed.crc32c.fc.bias"] = bad;
      check_refused(encode(b),
                    "__metadata__ 'heed.crc32c.fc.bias' is \"" + std::string(bad) + "\", not a CRC-32C (8 hex digits)");
    }
  }
  SECTION("one of a tensor the file does not have") {
    b.header["__metadata__"]["heed.crc32c.fc.bias"] = bias_crc;
    b.header["__metadata__"]["heed.crc32c.fc.biaz"] = bias_crc;
    check_refused(
        encode(b),
        "__metadata__ 'heed.crc32c.fc.biaz' is the checksum of a tensor 'fc.biaz' that the file does not have");
  }
  SECTION("the writer keeps the keys to itself") {
    TempDir dir;
    const std::string path = dir.file("ckpt.safetensors");
    heed::Generator gen(0);
    TinyNet<float> net(gen);
    CHECK_ERROR(heed::ValueError,
                "save_checkpoint: " + path +
                    ": metadata key 'heed.crc32c.fc.bias' is reserved: heed writes each tensor's checksum under "
                    "'heed.crc32c.<tensor name>'",
                heed::save_checkpoint(net, path, {{"heed.crc32c.fc.bias", bias_crc}}));
    CHECK(dir.listing().empty());
  }
}

#if !defined(_WIN32)
namespace {

/// Should a reader block on the FIFO after all, this opens and closes its writing end every
/// few seconds, which ends the read: the test then fails instead of hanging.
class FifoWatchdog {
 public:
  explicit FifoWatchdog(std::string path)
      : path_(std::move(path)), thread_([this] {
          std::unique_lock<std::mutex> lock(mutex_);
          while (!done_changed_.wait_for(lock, std::chrono::seconds(3), [this] { return done_; })) {
            const int fd = ::open(path_.c_str(), O_WRONLY | O_NONBLOCK);  // only while a reader has it open
            if (fd >= 0) ::close(fd);
          }
        }) {}
  FifoWatchdog(const FifoWatchdog&) = delete;
  FifoWatchdog& operator=(const FifoWatchdog&) = delete;
  ~FifoWatchdog() {
    {
      const std::lock_guard<std::mutex> lock(mutex_);
      done_ = true;
    }
    done_changed_.notify_all();
    thread_.join();
  }

 private:
  std::string path_;
  std::mutex mutex_;
  std::condition_variable done_changed_;
  bool done_ = false;
  std::thread thread_;  // last: it starts once the rest is built
};

}  // namespace

TEST_CASE("Readers refuse a FIFO or a device at once instead of blocking on it", "[io]") {
  TempDir dir;
  const std::string fifo = dir.file("pipe.safetensors");
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  const FifoWatchdog watchdog(fifo);
  heed::Generator gen(0);
  TinyNet<float> net(gen), saved(gen);
  randomize(saved, 3);
  const auto before = bits(net);
  const auto started = std::chrono::steady_clock::now();
  CHECK_ERROR(heed::FileError, "load_checkpoint: " + fifo + ": is a FIFO (named pipe), not a safetensors file",
              heed::load_checkpoint(net, fifo));
  CHECK_ERROR(heed::FileError, "read_safetensors: " + fifo + ": is a FIFO", heed::read_safetensors(fifo));
  CHECK_ERROR(heed::FileError, "read_safetensors_metadata: " + fifo + ": is a FIFO",
              heed::read_safetensors_metadata(fifo));
  CHECK(std::chrono::steady_clock::now() - started < std::chrono::seconds(2));
  if (fs::exists("/dev/zero"))
    CHECK_ERROR(heed::FileError, "load_checkpoint: /dev/zero: is a character device, not a safetensors file",
                heed::load_checkpoint(net, "/dev/zero"));
  CHECK(bits(net) == before);

  // A save replaces the FIFO with a checkpoint: the rename never opens the target.
  heed::save_checkpoint(saved, fifo);
  CHECK(fs::is_regular_file(fifo));
  CHECK(heed::load_checkpoint(net, fifo).empty());
  CHECK(bits(net) == bits(saved));
}
#endif

// ---- saving ----------------------------------------------------------------------------

TEST_CASE("save_checkpoint is atomic: it replaces a file whole and leaves no temporary", "[io]") {
  TempDir dir;
  const std::string path = dir.file("ckpt.safetensors");
  heed::Generator gen(0);
  TinyNet<float> a(gen), b(gen), c(gen);
  randomize(a, 1);
  randomize(b, 2);

  SECTION("into a directory that does not exist: FileError, nothing created") {
    const std::string nowhere = dir.file("missing") + "/ckpt.safetensors";
    CHECK_ERROR(heed::FileError,
                "save_checkpoint: " + nowhere + ": cannot create the temporary file '" + nowhere + ".tmp-",
                heed::save_checkpoint(a, nowhere));
    CHECK_ERROR(heed::FileError, "No such file or directory", heed::save_checkpoint(a, nowhere));
    CHECK_FALSE(fs::exists(dir.file("missing")));
    CHECK(dir.listing().empty());
  }
  SECTION("over an existing file, which it replaces") {
    write_file(path, "not a checkpoint");
    heed::save_checkpoint(a, path, {{"run", "a"}});
    CHECK(dir.listing() == std::vector<std::string>{"ckpt.safetensors"});
    CHECK(heed::load_checkpoint(c, path) == Metadata{{"run", "a"}});
    CHECK(bits(c) == bits(a));
    heed::save_checkpoint(b, path, {{"run", "b"}});
    CHECK(dir.listing() == std::vector<std::string>{"ckpt.safetensors"});
    CHECK(heed::load_checkpoint(c, path) == Metadata{{"run", "b"}});
    CHECK(bits(c) == bits(b));
  }
  SECTION("a failed rename removes the temporary and leaves the target alone") {
    fs::create_directory(path);  // the target is a non-empty directory: rename fails
    write_file(path + "/inside", "x");
    CHECK_ERROR(heed::FileError, "save_checkpoint: " + path + ": cannot rename '" + path + ".tmp-",
                heed::save_checkpoint(a, path));
    CHECK(dir.listing() == std::vector<std::string>{"ckpt.safetensors"});
    CHECK(fs::is_directory(path));
    CHECK(read_file(path + "/inside") == "x");
  }
  SECTION("bad arguments throw ValueError before any file is touched") {
    heed::save_checkpoint(a, path);
    const std::string before = read_file(path);
    using Named = std::vector<std::pair<std::string, heed::Tensorf>>;
    const heed::Tensorf x({1, 2}, {2});
    CHECK_ERROR(heed::ValueError, "save_safetensors: " + path + ": tensor name 'x' appears twice",
                heed::save_safetensors(path, Named{{"x", x}, {"y", x}, {"x", x}}));
    CHECK_ERROR(heed::ValueError, "'__metadata__' is the metadata's key and cannot name a tensor",
                heed::save_safetensors(path, Named{{"__metadata__", x}}));
    CHECK_ERROR(heed::ValueError, "tensor 'u' is undefined",
                heed::save_safetensors(path, Named{{"u", heed::Tensorf()}}));
    CHECK_ERROR(heed::ValueError, "tensor name \"bad\xef\xbf\xbd\" is not valid UTF-8",
                heed::save_safetensors(path, Named{{"bad\xff", x}}));
    CHECK_ERROR(heed::ValueError, "metadata value", heed::save_checkpoint(a, path, {{"k", "\xc3"}}));
    CHECK_ERROR(heed::ValueError, "metadata key", heed::save_checkpoint(a, path, {{"\xc3", "v"}}));
    using Records = std::vector<std::pair<std::string, heed::TensorRecord>>;
    CHECK_ERROR(heed::ValueError, "tensor 'r' has 3 bytes; shape (2) of F16 needs 4",
                heed::save_safetensors(path, Records{{"r", heed::TensorRecord{"F16", {2}, {1, 2, 3}}}}));
    CHECK_ERROR(heed::ValueError, "tensor 'r' has unknown dtype 'F17'",
                heed::save_safetensors(path, Records{{"r", heed::TensorRecord{"F17", {1}, {1}}}}));
    CHECK(read_file(path) == before);
    CHECK(dir.listing() == std::vector<std::string>{"ckpt.safetensors"});
  }
}

TEST_CASE("Every truncation and every flipped bit of a checkpoint is refused, or loads the same values", "[io]") {
  TempDir dir;
  const std::string path = dir.file("ckpt.safetensors");
  heed::Generator gen(0);
  TinyNet<float> a(gen), b(gen);
  randomize(a, 1);
  heed::save_checkpoint(a, path, {{"epochs", "3"}});
  const std::string bytes = read_file(path);
  const std::size_t data = 8 + read_le64(bytes, 0);

  const auto before = bits(b);
  std::size_t refused = 0;
  for (std::size_t size = 0; size < bytes.size(); ++size) {
    write_file(path, bytes.substr(0, size));
    try {
      heed::load_checkpoint(b, path);
    } catch (const heed::FileError&) {
      refused += bits(b) == before;
    }
  }
  CHECK(refused == bytes.size());

  // A changed header may still be valid (a metadata value): then the values are a's.
  std::size_t header_refused = 0, header_loaded = 0, data_refused = 0;
  for (std::size_t bit = 0; bit < 8 * bytes.size(); ++bit) {
    std::string damaged = bytes;
    damaged[bit / 8] = static_cast<char>(damaged[bit / 8] ^ (1 << bit % 8));
    write_file(path, damaged);
    const auto current = bits(b);
    try {
      heed::load_checkpoint(b, path);
      header_loaded += bit / 8 < data && bits(b) == bits(a);
    } catch (const heed::FileError&) {
      (bit / 8 < data ? header_refused : data_refused) += bits(b) == current;
    }
  }
  CHECK(data_refused == 8 * (bytes.size() - data));
  CHECK(header_refused + header_loaded == 8 * data);
  CHECK(header_refused > header_loaded);
}

#if !defined(_WIN32)
TEST_CASE("A save removes what killed saves to its target left behind, and nothing else", "[io]") {
  TempDir dir;
  const std::string path = dir.file("ckpt.safetensors");
  heed::Generator gen(0);
  TinyNet<float> a(gen), b(gen);
  randomize(a, 1);
  const std::string dead = std::to_string(std::numeric_limits<int>::max() - 1);  // past any pid_max

  // A save killed with SIGKILL while it wrote its temporary file (named as heed names it).
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    std::FILE* file = std::fopen(heed::detail::temporary_path(path).c_str(), "wbx");
    if (file != nullptr) {
      std::fputs("half a checkpoint", file);
      std::fflush(file);
    }
    std::raise(SIGKILL);
  }
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  REQUIRE(WIFSIGNALED(status));
  const std::string killed_prefix = "ckpt.safetensors.tmp-" + std::to_string(child) + "-";

  // Stale: one of this pid no save holds (a killed process whose pid was reused), one of a
  // pid no process has.
  const std::string own_stale = heed::detail::temporary_path(path);
  write_file(own_stale, "stale");
  write_file(path + ".tmp-" + dead + "-7", "stale");
  // Kept: a save of this process in progress, one of a live process, files of other
  // targets or not named as heed names them, a directory and a link.
  auto claim = std::make_unique<heed::detail::TemporaryFile>(heed::detail::temporary_path(path));
  write_file(claim->path(), "being written");
  const std::string in_progress = fs::path(claim->path()).filename().string();
  const std::string live = "ckpt.safetensors.tmp-" + std::to_string(::getppid()) + "-0";
  write_file(dir.file(live), "a live process's");
  const std::vector<std::string> kept = {"ckpt.safetensors.tmp-",
                                         "ckpt.safetensors.tmp--1-0",
                                         "ckpt.safetensors.tmp-0-1",
                                         "ckpt.safetensors.tmp-" + dead,
                                         "ckpt.safetensors.tmp-" + dead + "-",
                                         "ckpt.safetensors.tmp-" + dead + "-7.bak",
                                         "ckpt.safetensors.tmp-" + dead + "-x7",
                                         "ckpt.safetensors.tmp-99999999999-1",
                                         "ckpt.safetensors.tmp-12ab-1",
                                         "ckpt.safetensors.tmp.tmp-" + dead + "-1",
                                         "ckpt.safetensors-" + dead + "-1",
                                         "old.ckpt.safetensors.tmp-" + dead + "-1",
                                         "other.safetensors.tmp-" + dead + "-1",
                                         "notes.txt"};
  for (const std::string& name : kept) write_file(dir.file(name), "keep");
  fs::create_directory(dir.file("ckpt.safetensors.tmp-" + dead + "-8"));
  write_file(dir.file("ckpt.safetensors.tmp-" + dead + "-8/inside"), "keep");
  fs::create_symlink(dir.file("notes.txt"), dir.file("ckpt.safetensors.tmp-" + dead + "-9"));
  const std::vector<std::string> before = dir.listing();
  CHECK(std::count_if(before.begin(), before.end(),
                      [&](const std::string& name) { return name.rfind(killed_prefix, 0) == 0; }) == 1);

  heed::save_checkpoint(a, path);
  std::vector<std::string> expected = kept;
  for (const std::string& name : {std::string("ckpt.safetensors"), std::string("ckpt.safetensors.tmp-" + dead + "-8"),
                                  std::string("ckpt.safetensors.tmp-" + dead + "-9"), in_progress, live})
    expected.push_back(name);
  std::sort(expected.begin(), expected.end());
  CHECK(dir.listing() == expected);
  CHECK(read_file(dir.file("notes.txt")) == "keep");
  CHECK(read_file(dir.file("ckpt.safetensors.tmp-" + dead + "-8/inside")) == "keep");
  CHECK(read_file(claim->path()) == "being written");
  CHECK(heed::load_checkpoint(b, path).empty());
  CHECK(bits(b) == bits(a));

  // Once its save is over, the next save removes the claimed file too.
  claim.reset();
  CHECK(fs::exists(dir.file(in_progress)));  // it never created it: not its to remove
  heed::save_checkpoint(a, path);
  CHECK_FALSE(fs::exists(dir.file(in_progress)));
  CHECK(fs::exists(dir.file(live)));
}
#endif
