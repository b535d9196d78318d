// The safetensors format (heed/io/safetensors.hpp): the byte layout, files laid out as
// PyTorch's writer lays them out, low-level records of any dtype, header validation,
// hostile files (deep nesting, huge numbers, changed data, FIFOs), the CRC-32C
// checksums (heed/io/crc32c.hpp), and F16 and BF16 values (heed/io/half.hpp).
#include "io_common.hpp"

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
  CHECK(file.tensors.at("half").to_tensor<float>().to_vector() == std::vector<float>{1, 2});  // BF16 converts
  CHECK_ERROR(heed::ValueError, "dtype BF16, wanted I32", file.tensors.at("half").to_tensor<std::int32_t>());
  CHECK_ERROR(heed::ValueError, "dtype F32, wanted F64 (or F16, BF16) for a float64 tensor",
              file.tensors.at("scalar").to_tensor<double>());

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

TEST_CASE("read_safetensors_metadata validates the header without reading the tensors", "[io]") {
  TempDir dir;
  const std::string path = dir.file("meta.safetensors");
  const std::string bytes = encode(tiny_file());
  write_file(path, bytes);
  CHECK(heed::read_safetensors_metadata(path) == Metadata{{"format", "pt"}});
  // read_safetensors_header: the same metadata, and each tensor's dtype and shape.
  const heed::SafetensorsHeader header = heed::read_safetensors_header(path);
  CHECK(header.metadata == Metadata{{"format", "pt"}});
  REQUIRE(header.tensors.size() == 4);
  CHECK(header.tensors.at("fc.weight").dtype == "F32");
  CHECK(header.tensors.at("fc.weight").shape == std::vector<index_t>{4, 3});
  CHECK(header.tensors.at("ln.bias").shape == std::vector<index_t>{4});
  write_file(path, bytes.substr(0, bytes.size() - 1));
  CHECK_ERROR(heed::FileError,
              "read_safetensors_metadata: " + path + ": tensor 'fc.bias': data_offsets [80, 96] run past",
              heed::read_safetensors_metadata(path));
  CHECK_ERROR(heed::FileError, path + ": tensor 'fc.bias': data_offsets [80, 96] run past",
              heed::read_safetensors_header(path));
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

// ---- F16 and BF16 (heed/io/half.hpp) ----------------------------------------------------

namespace {

/// Little-endian bytes of 2-byte values, written out as a file holds them.
std::string le16(const std::vector<std::uint16_t>& values) {
  std::string out;
  for (std::uint16_t v : values) {
    out += static_cast<char>(v & 0xFF);
    out += static_cast<char>(v >> 8);
  }
  return out;
}

/// Each value rounded to F16 (or BF16) and back: what a file of that dtype holds of it.
template <typename T>
std::vector<T> rounded(const std::vector<T>& values, bool f16) {
  std::vector<T> out;
  for (T v : values) out.push_back(f16 ? heed::from_f16<T>(heed::to_f16(v)) : heed::from_bf16<T>(heed::to_bf16(v)));
  return out;
}

bool is_f16_nan(std::uint16_t bits) { return (bits & 0x7C00) == 0x7C00 && (bits & 0x03FF) != 0; }
bool is_bf16_nan(std::uint16_t bits) { return (bits & 0x7F80) == 0x7F80 && (bits & 0x007F) != 0; }

}  // namespace

TEMPLATE_TEST_CASE("F16 converts to and from float and double bit for bit, ties to even", "[io]", float, double) {
  using T = TestType;
  const T inf = std::numeric_limits<T>::infinity();
  const auto p2 = [](int e) { return std::ldexp(T(1), e); };
  struct Case {
    T value;
    std::uint16_t bits;
    bool exact;  // the value is the F16 value, so it converts back
  };
  const std::vector<Case> cases = {{T(0), 0x0000, true},
                                   {-T(0), 0x8000, true},
                                   {T(1), 0x3C00, true},
                                   {T(-2), 0xC000, true},
                                   {T(0.5), 0x3800, true},
                                   {T(65504), 0x7BFF, true},  // the largest F16
                                   {T(-65504), 0xFBFF, true},
                                   {p2(-24), 0x0001, true},  // the smallest subnormal
                                   {-p2(-24), 0x8001, true},
                                   {p2(-14), 0x0400, true},            // the smallest normal
                                   {p2(-14) - p2(-24), 0x03FF, true},  // the largest subnormal
                                   {inf, 0x7C00, true},
                                   {-inf, 0xFC00, true},
                                   {T(1) + p2(-10), 0x3C01, true},
                                   {T(1) + p2(-11), 0x3C00, false},            // a tie: to the even 1
                                   {T(1) + 3 * p2(-11), 0x3C02, false},        // a tie: to the even 1 + 2^-9
                                   {T(1) + p2(-11) + p2(-20), 0x3C01, false},  // above the tie: up
                                   {T(1) - p2(-12), 0x3C00, false},            // below 1, within half an ulp
                                   {T(65519), 0x7BFF, false},                  // below the tie with inf
                                   {T(65520), 0x7C00, false},                  // the tie with inf: to inf (even)
                                   {T(1e9), 0x7C00, false},                    // overflows
                                   {T(-1e9), 0xFC00, false},
                                   {p2(-25), 0x0000, false},            // a tie between 0 and 2^-24: to 0
                                   {-p2(-25), 0x8000, false},           // and keeps its sign
                                   {p2(-25) + p2(-40), 0x0001, false},  // above it: up
                                   {3 * p2(-25), 0x0002, false},        // a tie between 2^-24 and 2^-23: to 2^-23
                                   {p2(-14) - p2(-25), 0x0400, false},  // rounds up out of the subnormals
                                   {T(1e-8), 0x0000, false},
                                   {T(0.1), 0x2E66, false},
                                   {std::numeric_limits<T>::denorm_min(), 0x0000, false}};
  for (const Case& c : cases) {
    INFO(std::setprecision(std::numeric_limits<T>::max_digits10) << c.value << " -> 0x" << std::hex << c.bits);
    CHECK(heed::to_f16(c.value) == c.bits);
    if (c.exact) {
      const T back = heed::from_f16<T>(c.bits);
      CHECK(back == c.value);
      CHECK(std::signbit(back) == std::signbit(c.value));
    }
  }
  if (std::is_same_v<T, double>) {
    // Rounded once: through float, 1 + 2^-11 + 2^-40 would first become the tie 1 + 2^-11, then 1.
    CHECK(heed::to_f16(1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40)) == 0x3C01);
    CHECK(heed::to_f16(std::numeric_limits<double>::max()) == 0x7C00);
  }

  // NaN stays NaN both ways, its sign kept; what to_f16 makes is quiet.
  const T nan = std::numeric_limits<T>::quiet_NaN();
  CHECK(is_f16_nan(heed::to_f16(nan)));
  CHECK((heed::to_f16(nan) & 0x0200) != 0);
  CHECK((heed::to_f16(-nan) & 0x8000) != 0);
  CHECK(is_f16_nan(heed::to_f16(std::numeric_limits<T>::signaling_NaN())));
  for (std::uint16_t bits : {0x7E00, 0x7C01, 0xFE00, 0x7FFF}) {
    CHECK(std::isnan(heed::from_f16<T>(bits)));
    CHECK(std::signbit(heed::from_f16<T>(bits)) == ((bits & 0x8000) != 0));
  }

  // Every F16 value converts exactly and back, and every midpoint between two neighbours
  // (exact in float too) rounds to the even one.
  for (std::uint32_t b = 0; b <= 0xFFFF; ++b) {
    const auto bits = static_cast<std::uint16_t>(b);
    if (is_f16_nan(bits)) continue;
    const T value = heed::from_f16<T>(bits);
    REQUIRE(heed::to_f16(value) == bits);
    REQUIRE(static_cast<T>(heed::from_f16<float>(bits)) == value);
    if ((bits & 0x7FFF) >= 0x7BFF) continue;  // the next one is inf
    const T middle = value + (heed::from_f16<T>(static_cast<std::uint16_t>(bits + 1)) - value) / 2;  // no overflow
    INFO("between 0x" << std::hex << b << " and the next");
    REQUIRE(heed::to_f16(middle) == ((bits & 1) ? bits + 1 : bits));
  }
}

TEMPLATE_TEST_CASE("BF16 converts to and from float and double bit for bit, ties to even", "[io]", float, double) {
  using T = TestType;
  const T inf = std::numeric_limits<T>::infinity();
  const auto p2 = [](int e) { return std::ldexp(T(1), e); };
  const T largest = (2 - p2(-7)) * p2(127);
  CHECK(heed::to_bf16(T(0)) == 0x0000);
  CHECK(heed::to_bf16(-T(0)) == 0x8000);
  CHECK(heed::to_bf16(T(1)) == 0x3F80);
  CHECK(heed::to_bf16(T(-2.5)) == 0xC020);
  CHECK(heed::to_bf16(T(1) + p2(-7)) == 0x3F81);
  CHECK(heed::to_bf16(T(1) + p2(-8)) == 0x3F80);      // a tie: to the even 1
  CHECK(heed::to_bf16(T(1) + 3 * p2(-8)) == 0x3F82);  // a tie: to the even 1 + 2^-6
  CHECK(heed::to_bf16(T(1) + p2(-8) + p2(-20)) == 0x3F81);
  CHECK(heed::to_bf16(largest) == 0x7F7F);
  CHECK(heed::to_bf16(largest + p2(119)) == 0x7F80);  // the tie with inf: to inf
  CHECK(heed::to_bf16(static_cast<T>(std::numeric_limits<float>::max())) == 0x7F80);
  CHECK(heed::to_bf16(-static_cast<T>(std::numeric_limits<float>::max())) == 0xFF80);
  CHECK(heed::to_bf16(p2(-133)) == 0x0001);  // the smallest subnormal
  CHECK(heed::to_bf16(p2(-134)) == 0x0000);  // a tie with 0: to 0
  CHECK(heed::to_bf16(p2(-126)) == 0x0080);  // the smallest normal
  CHECK(heed::to_bf16(inf) == 0x7F80);
  CHECK(heed::to_bf16(-inf) == 0xFF80);
  CHECK(heed::from_bf16<T>(0x7F7F) == largest);
  CHECK(heed::from_bf16<T>(0x0001) == p2(-133));
  CHECK(heed::from_bf16<T>(0xFF80) == -inf);
  CHECK(std::signbit(heed::from_bf16<T>(0x8000)));
  if (std::is_same_v<T, double>) {
    CHECK(heed::to_bf16(1.0 + std::ldexp(1.0, -8) + std::ldexp(1.0, -40)) == 0x3F81);  // rounded once
    CHECK(heed::to_bf16(1e300) == 0x7F80);
    CHECK(heed::to_bf16(1e-300) == 0x0000);
  }
  const T nan = std::numeric_limits<T>::quiet_NaN();
  CHECK(is_bf16_nan(heed::to_bf16(nan)));
  CHECK((heed::to_bf16(nan) & 0x0040) != 0);  // quiet
  CHECK((heed::to_bf16(-nan) & 0x8000) != 0);
  CHECK(is_bf16_nan(heed::to_bf16(std::numeric_limits<T>::signaling_NaN())));
  for (std::uint16_t bits : {0x7FC0, 0x7F81, 0xFFC0}) CHECK(std::isnan(heed::from_bf16<T>(bits)));

  for (std::uint32_t b = 0; b <= 0xFFFF; ++b) {
    const auto bits = static_cast<std::uint16_t>(b);
    if (is_bf16_nan(bits)) continue;
    const T value = heed::from_bf16<T>(bits);
    REQUIRE(heed::to_bf16(value) == bits);
    if ((bits & 0x7FFF) >= 0x7F7F) continue;
    const T middle = value + (heed::from_bf16<T>(static_cast<std::uint16_t>(bits + 1)) - value) / 2;  // no overflow
    INFO("between 0x" << std::hex << b << " and the next");
    REQUIRE(heed::to_bf16(middle) == ((bits & 1) ? bits + 1 : bits));
  }
}

TEST_CASE("Records convert to and from F16 and BF16 for float and double tensors only", "[io]") {
  // 1, -2, 65504, 2^-24 as F16; 1, -2, 2.5, 2^-133 as BF16, written out by hand.
  const heed::TensorRecord f16{"F16", {2, 2}, {0x00, 0x3C, 0x00, 0xC0, 0xFF, 0x7B, 0x01, 0x00}};
  const heed::TensorRecord bf16{"BF16", {4}, {0x80, 0x3F, 0x00, 0xC0, 0x20, 0x40, 0x01, 0x00}};
  CHECK(f16.to_tensor<float>().to_vector() == std::vector<float>{1, -2, 65504, std::ldexp(1.0f, -24)});
  CHECK(f16.to_tensor<float>().shape() == heed::Shape{2, 2});
  CHECK(f16.to_tensor<double>().to_vector() == std::vector<double>{1, -2, 65504, std::ldexp(1.0, -24)});
  CHECK(bf16.to_tensor<float>().to_vector() == std::vector<float>{1, -2, 2.5f, std::ldexp(1.0f, -133)});
  CHECK(bf16.to_tensor<double>().to_vector() == std::vector<double>{1, -2, 2.5, std::ldexp(1.0, -133)});
  CHECK(heed::TensorRecord{"F16", {0}, {}}.to_tensor<float>().numel() == 0);
  CHECK_ERROR(heed::ValueError, "dtype F16, wanted I64 for a int64 tensor", f16.to_tensor<std::int64_t>());
  CHECK_ERROR(heed::ValueError, "TensorRecord::to_tensor: 3 bytes for shape (2) of BF16 (4 expected)",
              (heed::TensorRecord{"BF16", {2}, {1, 2, 3}}.to_tensor<float>()));

  const heed::Tensorf values({1, -2, 65504, 0.1f}, {2, 2});
  const heed::TensorRecord as_f16 = heed::TensorRecord::from_tensor(values, "F16");
  CHECK(as_f16.dtype == "F16");
  CHECK(as_f16.shape == std::vector<index_t>{2, 2});
  CHECK(as_f16.data == std::vector<unsigned char>{0x00, 0x3C, 0x00, 0xC0, 0xFF, 0x7B, 0x66, 0x2E});
  const heed::TensorRecord as_bf16 = heed::TensorRecord::from_tensor(heed::Tensord({1, -2.5}, {2}), "BF16");
  CHECK(as_bf16.data == std::vector<unsigned char>{0x80, 0x3F, 0x20, 0xC0});
  // The tensor's own dtype is the one-argument overload's record.
  CHECK(heed::TensorRecord::from_tensor(values, "F32").data == heed::TensorRecord::from_tensor(values).data);
  CHECK_ERROR(heed::ValueError, "TensorRecord::from_tensor: dtype 'F64': a float32 tensor saves as F32, F16 or BF16",
              heed::TensorRecord::from_tensor(values, "F64"));
  CHECK_ERROR(heed::ValueError, "dtype 'F16': a int64 tensor saves as I64 only",
              heed::TensorRecord::from_tensor(heed::IndexTensor({1}, {1}), "F16"));
  CHECK_ERROR(heed::ValueError, "the tensor is undefined", heed::TensorRecord::from_tensor(heed::Tensorf(), "F16"));
  // Out of range: refused, naming the element and every digit of the value, not made inf.
  CHECK_ERROR(heed::ValueError,
              "TensorRecord::from_tensor: element 1 is -65520, out of F16's range (its largest value is 65504)",
              heed::TensorRecord::from_tensor(heed::Tensorf({1, -65520}, {2}), "F16"));
  CHECK_ERROR(heed::ValueError, "element 0 is 65520.5",
              heed::TensorRecord::from_tensor(heed::Tensord({65520.5}, {1}), "F16"));
  CHECK_ERROR(heed::ValueError, "element 0 is 1e+300, out of BF16's range",
              heed::TensorRecord::from_tensor(heed::Tensord({1e300}, {1}), "BF16"));
  // Infinities and NaN are values F16 holds, and save as themselves.
  const float inf = std::numeric_limits<float>::infinity();
  const heed::TensorRecord special =
      heed::TensorRecord::from_tensor(heed::Tensorf({inf, -inf, std::nanf("")}, {3}), "F16");
  const std::vector<float> back = special.to_tensor<float>().to_vector();
  CHECK(back[0] == inf);
  CHECK(back[1] == -inf);
  CHECK(std::isnan(back[2]));
}

TEMPLATE_TEST_CASE("A module saved as F16 or BF16 loads back as its values rounded", "[io]", float, double) {
  using T = TestType;
  TempDir dir;
  const std::string path = dir.file("half.safetensors");
  heed::Generator gen(0);
  TinyNet<T> net(gen);
  randomize(net, 3);
  {
    heed::NoGradGuard no_grad;
    net.fc.bias.copy_(heed::Tensor<T>({T(1000.1), T(-0.0001), T(1e-6), T(3)}, {4}));  // a subnormal in F16
  }
  const std::string dtype = GENERATE(as<std::string>{}, "F16", "BF16");
  INFO(dtype);
  const bool f16 = dtype == "F16";
  heed::save_checkpoint(net, path, {{"epochs", "3"}}, dtype);

  // Every tensor is 2 bytes an element, with its checksum.
  const heed::SafetensorsHeader header = heed::read_safetensors_header(path);
  CHECK(header.metadata == Metadata{{"epochs", "3"}});
  for (const auto& [name, info] : header.tensors) CHECK(info.dtype == dtype);
  const std::string bytes = read_file(path);
  CHECK(bytes.size() == 8 + read_le64(bytes, 0) + 2 * (12 + 4 + 4 + 4));

  heed::Generator gen2(1);
  TinyNet<T> loaded(gen2);
  CHECK(heed::load_checkpoint(loaded, path) == Metadata{{"epochs", "3"}});
  const auto want = net.named_parameters();
  const auto got = loaded.named_parameters();
  REQUIRE(want.size() == got.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    INFO(want[i].first);
    CHECK(got[i].second.to_vector() == rounded(want[i].second.to_vector(), f16));
    CHECK(got[i].second.to_vector() != want[i].second.to_vector());  // it did round
  }
  // The other floating type loads the same values, and read_safetensors the same bits.
  using Other = std::conditional_t<std::is_same_v<T, float>, double, float>;
  heed::Generator gen3(2);
  TinyNet<Other> other(gen3);
  heed::load_checkpoint(other, path);
  for (const auto& [name, value] : other.named_parameters()) {
    INFO(name);
    const heed::TensorRecord record = heed::read_safetensors(path).tensors.at(name);
    CHECK(record.dtype == dtype);
    CHECK(value.to_vector() == record.to_tensor<Other>().to_vector());
  }

  // save_safetensors takes the dtype too, and its records are from_tensor's.
  heed::save_safetensors(path, std::vector<std::pair<std::string, heed::Tensor<T>>>{{"b", net.fc.bias}}, {}, dtype);
  const heed::TensorRecord saved = heed::read_safetensors(path).tensors.at("b");
  CHECK(saved.data == heed::TensorRecord::from_tensor(net.fc.bias, dtype).data);
  CHECK(saved.to_tensor<T>().to_vector() == rounded(net.fc.bias.to_vector(), f16));
  // The module's own dtype saves as the overload without it does.
  heed::save_checkpoint(net, path, {}, heed::detail::safetensors_dtype<T>());
  const std::string own = read_file(path);
  heed::save_checkpoint(net, path);
  CHECK(read_file(path) == own);
}

TEST_CASE("A hand-written F16 and BF16 file loads into float and double models", "[io]") {
  TempDir dir;
  const std::string path = dir.file("pretrained.safetensors");
  // As a HuggingFace F16 or BF16 checkpoint: fc.bias [10, 11, 12, 13] and ln.weight
  // [1, 1.5, 2, 2.5] spelt out, the others rounded by to_f16 (all exact in both).
  std::vector<std::uint16_t> weight, ln_bias;
  for (float v : kFcWeight) weight.push_back(heed::to_bf16(v));
  for (float v : kLnBias) ln_bias.push_back(heed::to_f16(v));
  Built b = lay_out({{"fc.weight", "BF16", {4, 3}, le16(weight)},
                     {"fc.bias", "F16", {4}, le16({0x4900, 0x4980, 0x4A00, 0x4A80})},
                     {"ln.weight", "BF16", {4}, le16({0x3F80, 0x3FC0, 0x4000, 0x4020})},
                     {"ln.bias", "F16", {4}, le16(ln_bias)}});
  b.header["__metadata__"] = {{"format", "pt"}};
  const std::string good = encode(b, 3);
  write_file(path, good);

  heed::Generator gen(0);
  TinyNet<float> net(gen);
  CHECK(heed::load_checkpoint(net, path) == Metadata{{"format", "pt"}});
  CHECK(net.fc.weight.to_vector() == kFcWeight);
  CHECK(net.fc.bias.to_vector() == kFcBias);
  CHECK(net.ln.weight.to_vector() == kLnWeight);
  CHECK(net.ln.bias.to_vector() == kLnBias);
  TinyNet<double> net_d(gen);
  heed::load_checkpoint(net_d, path);
  CHECK(net_d.fc.bias.to_vector() == std::vector<double>{10, 11, 12, 13});
  CHECK(net_d.ln.weight.to_vector() == std::vector<double>{1, 1.5, 2, 2.5});

  // Damaged or hostile: refused with FileError, the model untouched.
  SECTION("a span that does not fit the F16 shape") {
    Built bad = b;
    bad.header["fc.bias"]["shape"] = {3};
    check_refused(encode(bad), "tensor 'fc.bias': shape (3) of F16 needs 6 bytes, but data_offsets");
  }
  SECTION("a shape the model does not have") {
    Built bad = lay_out({{"fc.weight", "BF16", {4, 3}, le16(weight)},
                         {"fc.bias", "F16", {2, 2}, le16({0x4900, 0x4980, 0x4A00, 0x4A80})},
                         {"ln.weight", "BF16", {4}, le16({0x3F80, 0x3FC0, 0x4000, 0x4020})},
                         {"ln.bias", "F16", {4}, le16(ln_bias)}});
    check_refused(encode(bad), "tensor 'fc.bias': shape (2, 2) in the file, model wants (4)", true);
  }
  SECTION("every truncation") {
    for (std::size_t size = 0; size < good.size(); size += 3) {
      INFO("truncated to " << size << " bytes");
      CHECK_THAT(load_error(good.substr(0, size)), Contains("load_checkpoint: "));
    }
    check_refused(good.substr(0, good.size() - 1), "the file is truncated?");
  }
  SECTION("a changed byte of a checkpoint saved as F16") {
    heed::save_checkpoint(net, path, {}, "F16");
    std::string bytes = read_file(path);
    bytes[bytes.size() - 1] = static_cast<char>(bytes[bytes.size() - 1] ^ 0x01);
    CHECK_THAT(load_error(bytes), Contains("tensor 'ln.weight': its bytes do not match their checksum"));
  }
}

TEST_CASE("A value out of F16's range is refused before a file is made, not saved as inf", "[io]") {
  TempDir dir;
  const std::string path = dir.file("range.safetensors");
  heed::Generator gen(0);
  TinyNet<float> net(gen);
  randomize(net, 5);
  {
    heed::NoGradGuard no_grad;
    net.ln.bias.copy_(heed::Tensorf({0, 1, 70000, 2}, {4}));
  }
  CHECK_ERROR(heed::ValueError,
              "save_checkpoint: " + path +
                  ": tensor 'ln.bias': element 2 is 70000, out of F16's range (its largest "
                  "value is 65504): saved as F16 it would become inf",
              heed::save_checkpoint(net, path, {}, "F16"));
  CHECK(dir.listing().empty());  // nothing written, not even a temporary
  // BF16 holds it; an existing file stays as it was when a later save is refused.
  heed::save_checkpoint(net, path, {}, "BF16");
  const std::string before = read_file(path);
  CHECK_THROWS_AS(heed::save_checkpoint(net, path, {}, "F16"), heed::ValueError);
  CHECK(read_file(path) == before);
  CHECK(dir.listing() == std::vector<std::string>{"range.safetensors"});
  CHECK_ERROR(
      heed::ValueError, "save_safetensors: " + path + ": tensor 'x': element 2 is 70000, out of F16's range",
      heed::save_safetensors(path, std::vector<std::pair<std::string, heed::Tensorf>>{{"x", net.ln.bias}}, {}, "F16"));
  // A dtype no float tensor saves as.
  CHECK_ERROR(heed::ValueError,
              "save_checkpoint: " + path + ": dtype 'F8_E4M3': a float32 tensor saves as F32, F16 or BF16",
              heed::save_checkpoint(net, path, {}, "F8_E4M3"));
  CHECK_ERROR(heed::ValueError, "dtype 'F32': a float64 tensor saves as F64, F16 or BF16",
              heed::save_checkpoint(TinyNet<double>(gen), path, {}, "F32"));
  CHECK(read_file(path) == before);
}
