// Checkpoint averaging (average_checkpoints, heed/io/training_checkpoint.hpp) and the
// weights' exponential moving average (ExponentialMovingAverage, heed/optim/ema.hpp, and
// its tensors in a training checkpoint): exact values, refusals, atomicity, threads.
#include "io_common.hpp"

#include <heed/optim/ema.hpp>

#if defined(_OPENMP)
#include <omp.h>
#endif

namespace {

/// Every parameter's values, in named_parameters() order.
template <typename T>
std::vector<T> values_of(const heed::Module<T>& module) {
  std::vector<T> out;
  for (const auto& [name, p] : module.named_parameters()) out.insert(out.end(), p.data(), p.data() + p.numel());
  return out;
}

}  // namespace

TEMPLATE_TEST_CASE("average_checkpoints: the mean of three checkpoints, summed in double in file order", "[io]", float,
                   double) {
  using T = TestType;
  TempDir dir;
  heed::Generator gen(0);
  TinyNet<T> a(gen), b(gen), c(gen), averaged(gen);
  randomize(a, 1);
  randomize(b, 2);
  randomize(c, 3);
  // Values whose mean is exact, and one whose sum needs double: 1e8 + 1 - 1e8 in float is 0.
  a.fc.weight.data()[0] = T(1), b.fc.weight.data()[0] = T(2), c.fc.weight.data()[0] = T(6);
  a.fc.weight.data()[1] = T(1e8), b.fc.weight.data()[1] = T(3), c.fc.weight.data()[1] = T(-1e8);
  heed::save_checkpoint(a, dir.file("a.safetensors"), {{"run", "a"}});
  heed::save_checkpoint(b, dir.file("b.safetensors"), {{"run", "b"}});
  heed::save_checkpoint(c, dir.file("c.safetensors"), {{"run", "c"}});
  heed::average_checkpoints({dir.file("a.safetensors"), dir.file("b.safetensors"), dir.file("c.safetensors")},
                            dir.file("mean.safetensors"));
  CHECK(heed::load_checkpoint(averaged, dir.file("mean.safetensors")) ==
        Metadata{{"run", "a"}, {"heed.averaged_checkpoints", "3"}});
  const std::vector<T> va = values_of(a), vb = values_of(b), vc = values_of(c), got = values_of(averaged);
  REQUIRE(got.size() == va.size());
  std::size_t differ = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const T expected = static_cast<T>((static_cast<double>(va[i]) + vb[i] + vc[i]) / 3.0);
    differ += std::memcmp(&expected, &got[i], sizeof(T)) != 0;
  }
  CHECK(differ == 0);
  CHECK(averaged.fc.weight.data()[0] == T(3));
  CHECK(averaged.fc.weight.data()[1] == T(1));
  // In the file's dtype, and the same bits from the same files.
  CHECK(heed::read_safetensors(dir.file("mean.safetensors")).tensors.at("fc.weight").dtype ==
        (std::is_same_v<T, float> ? "F32" : "F64"));
  heed::average_checkpoints({dir.file("a.safetensors"), dir.file("b.safetensors"), dir.file("c.safetensors")},
                            dir.file("again.safetensors"));
  CHECK(read_file(dir.file("again.safetensors")) == read_file(dir.file("mean.safetensors")));
  // One file is itself.
  heed::average_checkpoints({dir.file("b.safetensors")}, dir.file("one.safetensors"));
  heed::load_checkpoint(averaged, dir.file("one.safetensors"));
  CHECK(bits(averaged) == bits(b));
}

TEST_CASE("average_checkpoints drops a training checkpoint's optimizer state, moving average and training keys",
          "[io]") {
  TempDir dir;
  heed::Generator gen(0);
  TinyNet<float> a(gen), b(gen), averaged(gen);
  randomize(a, 1);
  randomize(b, 2);
  heed::Adam<float> adam(a.parameters(), 0.1);
  heed::sum(a(heed::ones<float>({2, 3}))).backward();
  adam.step();
  heed::ExponentialMovingAverage ema;
  ema.start(a.parameters());
  heed::TrainState state;
  state.loader_generator = state.default_generator = heed::Generator(1).get_state();
  auto metadata = state.to_metadata();
  metadata["model"] = "tiny";
  heed::save_training_checkpoint(a, adam, dir.file("last.safetensors"), metadata, &ema);
  REQUIRE(heed::read_safetensors(dir.file("last.safetensors")).tensors.count("ema.fc.weight") == 1);
  heed::save_checkpoint(b, dir.file("b.safetensors"), {{"model", "tiny"}});
  heed::average_checkpoints({dir.file("last.safetensors"), dir.file("b.safetensors")}, dir.file("mean.safetensors"));
  CHECK(heed::load_checkpoint(averaged, dir.file("mean.safetensors")) ==
        Metadata{{"model", "tiny"}, {"heed.averaged_checkpoints", "2"}});
  const std::vector<float> va = values_of(a), vb = values_of(b), got = values_of(averaged);
  for (std::size_t i = 0; i < got.size(); ++i)
    CHECK(got[i] == static_cast<float>((static_cast<double>(va[i]) + vb[i]) / 2.0));
}

TEST_CASE("average_checkpoints refuses other parameters and leaves its output as it was", "[io][errors]") {
  TempDir dir;
  heed::Generator gen(0);
  TinyNet<float> a(gen), b(gen);
  randomize(a, 1);
  randomize(b, 2);
  const std::string A = dir.file("a.safetensors"), out = dir.file("out.safetensors");
  heed::save_checkpoint(a, A);
  write_file(out, "the old output");
  const auto refused = [&](const std::string& file, const std::string& message, const std::vector<std::string>& files) {
    CHECK_ERROR(heed::FileError, message, heed::average_checkpoints(files, out));
    CHECK(read_file(out) == "the old output");
    (void)file;
  };
  SECTION("an empty list, an empty output name") {
    CHECK_ERROR(heed::ValueError, "average_checkpoints: no checkpoints to average", heed::average_checkpoints({}, out));
    CHECK_ERROR(heed::ValueError, "average_checkpoints: the output file name is empty",
                heed::average_checkpoints({A}, ""));
    CHECK(read_file(out) == "the old output");
  }
  SECTION("a missing tensor, an extra one") {
    const std::string B = dir.file("b.safetensors");
    const heed::SafetensorsFile file = heed::read_safetensors(A);
    std::vector<std::pair<std::string, heed::TensorRecord>> fewer, more;
    for (const auto& [name, record] : file.tensors) {
      if (name != "ln.bias") fewer.emplace_back(name, record);
      more.emplace_back(name, record);
    }
    more.emplace_back("extra", file.tensors.at("ln.bias"));
    heed::save_safetensors(B, fewer);
    refused(B, "average_checkpoints: " + B + ": has no tensor 'ln.bias', which " + A + " has", {A, B});
    heed::save_safetensors(B, more);
    refused(B, "average_checkpoints: " + B + ": has a tensor 'extra', which " + A + " has not", {A, B});
  }
  SECTION("another dtype or shape") {
    const std::string B = dir.file("b.safetensors");
    TinyNet<double> d(gen);
    heed::save_checkpoint(d, B);
    refused(B, "average_checkpoints: " + B + ": tensor 'fc.bias' is F64, " + A + "'s is F32", {A, B});
    heed::save_checkpoint(a, B, {}, "BF16");
    refused(B, "average_checkpoints: " + B + ": tensor 'fc.bias' is BF16, " + A + "'s is F32", {A, B});
    std::vector<std::pair<std::string, heed::TensorRecord>> reshaped;
    for (const auto& [name, record] : heed::read_safetensors(A).tensors) reshaped.emplace_back(name, record);
    reshaped[1].second.shape = {3, 4};  // fc.weight, (4, 3) in a
    heed::save_safetensors(B, reshaped);
    refused(B, "average_checkpoints: " + B + ": tensor 'fc.weight' has shape (3, 4), " + A + "'s (4, 3)", {A, B});
    heed::save_safetensors(B, {{"fc.bias", heed::TensorRecord::from_tensor(heed::zeros<std::int64_t>({4}))}});
    refused(B, "tensor 'fc.bias' is I64, not a floating-point parameter", {B});
  }
  SECTION("a damaged or missing file") {
    const std::string B = dir.file("b.safetensors");
    write_file(B, "not a checkpoint");
    refused(B, B, {A, B});
    refused(B, dir.file("absent.safetensors"), {A, dir.file("absent.safetensors")});
  }
  for (const std::string& name : dir.listing()) CHECK(name.find(".tmp") == std::string::npos);  // no temporary left
}

TEST_CASE("ExponentialMovingAverage: ema = decay·ema + (1 − decay)·param after each update", "[optim]") {
  heed::Generator gen(0);
  TinyNet<double> net(gen);
  randomize(net, 1);
  heed::ExponentialMovingAverage ema;
  CHECK_ERROR(heed::ValueError, "ExponentialMovingAverage.update: start() was not called",
              ema.update(net.parameters(), 0.9));
  ema.start(net.parameters());
  std::vector<float> expected;
  for (const double v : values_of(net)) expected.push_back(static_cast<float>(v));
  for (int k = 1; k <= 3; ++k) {
    randomize(net, 10 + k);
    ema.update(net.parameters(), 0.75);
    const std::vector<double> p = values_of(net);
    for (std::size_t i = 0; i < expected.size(); ++i)
      expected[i] = 0.75f * expected[i] + 0.25f * static_cast<float>(p[i]);
  }
  CHECK(ema.updates() == 3);
  std::vector<float> got;
  for (const auto& t : ema.values()) got.insert(got.end(), t.data(), t.data() + t.numel());
  CHECK(got == expected);
  // swap_into twice leaves the parameters as they were.
  TinyNet<float> f(gen);
  randomize(f, 5);
  const auto before = bits(f);
  heed::ExponentialMovingAverage fe;
  fe.start(f.parameters());
  randomize(f, 6);
  fe.update(f.parameters(), 0.5);
  const auto trained = bits(f);
  fe.swap_into(f.parameters());
  CHECK(bits(f) != trained);
  CHECK(bits(f) != before);
  fe.swap_into(f.parameters());
  CHECK(bits(f) == trained);
  CHECK_ERROR(heed::ValueError, "ExponentialMovingAverage.update: decay must be in [0, 1), got 1",
              fe.update(f.parameters(), 1.0));
  CHECK_ERROR(heed::ShapeError, "ExponentialMovingAverage.update: 2 parameters, the averages are of 4",
              fe.update(f.fc.parameters(), 0.5));
}

TEST_CASE("ExponentialMovingAverage gives the same bits on 1 and 3 threads", "[optim][threads]") {
  const auto run = [](int threads) {
#if defined(_OPENMP)
    const int saved = omp_get_max_threads();
    omp_set_num_threads(threads);
#else
    (void)threads;
#endif
    heed::Generator gen(3);
    std::vector<heed::Tensor<float>> params{heed::uniform<float>({700, 300}, -1.f, 1.f, gen),
                                            heed::uniform<float>({1001}, -1.f, 1.f, gen)};
    heed::ExponentialMovingAverage ema;
    ema.start(params);
    for (int k = 0; k < 3; ++k) {
      for (auto& p : params) p.copy_(heed::uniform<float>(p.shape(), -1.f, 1.f, gen));
      ema.update(params, 0.999);
    }
#if defined(_OPENMP)
    omp_set_num_threads(saved);
#endif
    std::string out;
    for (const auto& t : ema.values())
      out.append(reinterpret_cast<const char*>(t.data()), static_cast<std::size_t>(t.numel()) * sizeof(float));
    return out;
  };
  CHECK(run(1) == run(3));
}

TEST_CASE("A training checkpoint keeps the moving average; loading restores or drops it", "[io]") {
  TempDir dir;
  const std::string path = dir.file("last.safetensors");
  heed::Generator gen(0);
  TinyNet<float> net(gen), other(gen);
  randomize(net, 1);
  heed::Adam<float> adam(net.parameters(), 0.1);
  heed::ExponentialMovingAverage ema;
  ema.start(net.parameters());
  randomize(net, 2);
  ema.update(net.parameters(), 0.9);
  heed::save_training_checkpoint(net, adam, path, {{"k", "v"}}, &ema);
  CHECK(heed::read_safetensors_metadata(path).at("heed.ema.updates") == "1");

  heed::Adam<float> other_adam(other.parameters(), 0.1);
  heed::ExponentialMovingAverage restored;
  CHECK(heed::load_training_checkpoint(other, other_adam, path, &restored).at("k") == "v");
  CHECK(bits(other) == bits(net));
  REQUIRE(restored.values().size() == ema.values().size());
  CHECK(restored.updates() == 1);
  for (std::size_t i = 0; i < ema.values().size(); ++i)
    CHECK(std::memcmp(restored.values()[i].data(), ema.values()[i].data(),
                      static_cast<std::size_t>(ema.values()[i].numel()) * sizeof(float)) == 0);
  // Without an average to fill, it is read, checked and dropped.
  randomize(other, 3);
  heed::load_training_checkpoint(other, other_adam, path);
  CHECK(bits(other) == bits(net));
  // A file without one leaves the caller's as it was.
  heed::save_training_checkpoint(net, adam, dir.file("plain.safetensors"));
  heed::load_training_checkpoint(other, other_adam, dir.file("plain.safetensors"), &restored);
  CHECK(restored.updates() == 1);
  // A damaged count is refused before anything changes.
  auto file = heed::read_safetensors(path);
  file.metadata["heed.ema.updates"] = "-1";
  std::vector<std::pair<std::string, heed::TensorRecord>> records(file.tensors.begin(), file.tensors.end());
  heed::save_safetensors(dir.file("bad.safetensors"), records, file.metadata);
  CHECK_ERROR(heed::FileError, "'heed.ema.updates' is '-1', not a count",
              heed::load_training_checkpoint(other, other_adam, dir.file("bad.safetensors"), &restored));
}
