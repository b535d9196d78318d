// Module checkpoints (heed/io/checkpoint.hpp): round trips, parameters not buffers,
// metadata, a checkpoint written by PyTorch, every damage or mismatch a load must refuse
// (leaving the model as it was), and atomic saves with the clean-up after killed ones.
#include "io_common.hpp"

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

TEMPLATE_TEST_CASE("A training checkpoint round-trips the parameters and Adam's state", "[io]", float, double) {
  using T = TestType;
  TempDir dir;
  const std::string path = dir.file("training.safetensors");
  heed::Generator gen_a(1), gen_b(2);
  TinyNet<T> a(gen_a), b(gen_b);
  randomize(a, 3);
  heed::Adam<T> adam_a(a.parameters(), 0.01), adam_b(b.parameters(), 0.5);
  // Two updates of everything, then one where ln.bias has no gradient (its step stays 2).
  const auto x = heed::uniform<T>({5, 3}, T(-1), T(1), gen_a);
  for (int step = 0; step < 3; ++step) {
    adam_a.zero_grad();
    const heed::Tensor<T> y = a(x);
    (step < 2 ? heed::sum(y * y) : heed::sum(a.fc(x))).backward();
    if (step == 2) a.ln.bias.zero_grad(), a.ln.weight.zero_grad();
    adam_a.step();
  }
  heed::save_training_checkpoint(a, adam_a, path, {{"epoch", "3"}});
  const Metadata metadata = heed::load_training_checkpoint(b, adam_b, path);
  CHECK(metadata.at("epoch") == "3");
  CHECK(metadata.at("heed.adam.steps") == "3 3 2 2");  // fc.weight, fc.bias, ln.weight, ln.bias
  CHECK(bits(b) == bits(a));
  for (std::size_t i = 0; i < adam_a.state().size(); ++i) {
    CHECK(adam_b.state()[i].step == adam_a.state()[i].step);
    CHECK(adam_b.state()[i].exp_avg.to_vector() == adam_a.state()[i].exp_avg.to_vector());
    CHECK(adam_b.state()[i].exp_avg_sq.to_vector() == adam_a.state()[i].exp_avg_sq.to_vector());
  }
  CHECK(adam_b.lr() == 0.5);  // the caller's hyper-parameters stay
  // The next update is the same in both.
  for (auto* pair : {&a, &b}) {
    heed::Adam<T>& adam = pair == &a ? adam_a : adam_b;
    adam.set_lr(0.01);
    adam.zero_grad();
    heed::sum((*pair)(x)).backward();
    adam.step();
  }
  CHECK(bits(b) == bits(a));
  CHECK(dir.listing() == std::vector<std::string>{"training.safetensors"});
}

TEST_CASE("load_training_checkpoint refuses another model, optimizer or file and changes nothing", "[io]") {
  TempDir dir;
  heed::Generator gen(1);
  TinyNet<float> net(gen);
  heed::Adam<float> adam(net.parameters());
  adam.zero_grad();
  heed::sum(net(heed::ones<float>({2, 3}))).backward();
  adam.step();
  const std::string path = dir.file("training.safetensors");
  heed::save_training_checkpoint(net, adam, path);

  TinyNet<float> other(gen);
  heed::Adam<float> other_adam(other.parameters());
  const auto before = bits(other);
  const auto unchanged = [&] {
    CHECK(bits(other) == before);
    for (const heed::AdamState<float>& state : other_adam.state()) CHECK(state.step == 0);
  };
  // A module's plain checkpoint has no optimizer state.
  heed::save_checkpoint(net, dir.file("plain.safetensors"));
  CHECK_ERROR(heed::FileError,
              "load_training_checkpoint: " + dir.file("plain.safetensors") +
                  ": not a training checkpoint (no 'heed.adam.steps' in its metadata)",
              heed::load_training_checkpoint(other, other_adam, dir.file("plain.safetensors")));
  unchanged();
  // An optimizer over fewer parameters.
  heed::Adam<float> fc_only(other.fc.parameters());
  CHECK_ERROR(heed::FileError, "the optimizer state is for 4 parameters, the optimizer has 2",
              heed::load_training_checkpoint(other, fc_only, path));
  unchanged();
  // A double model loads the float file, every value converted, as PyTorch's
  // load_state_dict converts.
  TinyNet<double> in_double(gen);
  heed::Adam<double> double_adam(in_double.parameters());
  heed::load_training_checkpoint(in_double, double_adam, path);
  const auto as_double = [](const heed::Tensorf& x) { return x.to<double>().to_vector(); };
  const auto float_parameters = net.parameters();
  const auto double_parameters = in_double.parameters();
  REQUIRE(float_parameters.size() == double_parameters.size());
  for (std::size_t i = 0; i < float_parameters.size(); ++i) {
    CHECK(double_parameters[i].to_vector() == as_double(float_parameters[i]));
    CHECK(double_adam.state()[i].step == adam.state()[i].step);
    CHECK(double_adam.state()[i].exp_avg.to_vector() == as_double(adam.state()[i].exp_avg));
    CHECK(double_adam.state()[i].exp_avg_sq.to_vector() == as_double(adam.state()[i].exp_avg_sq));
  }
  // Step counts that call for moments the file does not hold.
  heed::save_checkpoint(net, dir.file("steps0.safetensors"), {{"heed.adam.steps", "1 1 1 0"}});
  CHECK_ERROR(heed::FileError, "missing from the file: 'optimizer.exp_avg.fc.weight'",
              heed::load_training_checkpoint(other, other_adam, dir.file("steps0.safetensors")));
  // A damaged step list.
  heed::save_checkpoint(net, dir.file("bad_steps.safetensors"), {{"heed.adam.steps", "1 x 1 1"}});
  CHECK_ERROR(heed::FileError, "'heed.adam.steps' is not a list of step counts",
              heed::load_training_checkpoint(other, other_adam, dir.file("bad_steps.safetensors")));
  heed::save_checkpoint(net, dir.file("negative.safetensors"), {{"heed.adam.steps", "1 -1 1 1"}});
  CHECK_ERROR(heed::FileError, "'heed.adam.steps' holds a negative step count, -1",
              heed::load_training_checkpoint(other, other_adam, dir.file("negative.safetensors")));
  unchanged();
  // An optimizer that is not the module's, and heed's own metadata key.
  CHECK_ERROR(heed::ValueError,
              "save_training_checkpoint: the optimizer's parameter 0 (shape (4, 3)) is not a "
              "parameter of the module",
              heed::save_training_checkpoint(other, adam, dir.file("mixed.safetensors")));
  CHECK_ERROR(heed::ValueError, "save_training_checkpoint: the metadata key 'heed.adam.steps' is heed's",
              heed::save_training_checkpoint(net, adam, dir.file("key.safetensors"), {{"heed.adam.steps", "1"}}));
  CHECK(!fs::exists(dir.file("mixed.safetensors")));
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

  // The file is F32: a double model loads it converted and gives the same outputs.
  TinyNet<double> wide(gen);
  CHECK(heed::load_checkpoint(wide, path) == Metadata{{"format", "pt"}});
  wide.eval();
  check_close(wide(golden.tensor<double>("x")), golden.tensor<double>("output"), 1e-6);
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
    // F64 converts to the float model; I32 is no parameter's type.
    check_refused(encode(b), "tensor 'ln.weight': dtype I32, model wants F32", true);
    Built half = good;  // a dtype heed has no tensor for, of the same byte size
    half.header["ln.weight"]["dtype"] = "I16";
    half.header["ln.weight"]["shape"] = {8};
    // Several differences: one per line.
    check_refused(encode(half),
                  "2 differences from the model's parameters:\n  tensor 'ln.weight': dtype I16, model wants F32\n  "
                  "tensor 'ln.weight': shape (8) in the file, model wants (4)",
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
