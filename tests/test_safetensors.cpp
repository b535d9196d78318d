// The safetensors format (heed/io/safetensors.hpp): the byte layout, files laid out as
// PyTorch's writer lays them out, low-level records of any dtype, header validation,
// hostile files (deep nesting, huge numbers, changed data, FIFOs) and the CRC-32C
// checksums (heed/io/crc32c.hpp).
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
