// Quantised checkpoints (heed/io/checkpoint.hpp): a net whose weights were converted to
// int8 or bf16 (convert_weights_) saves them as they are and loads them back as they
// are, without an fp32 copy.
#include "io_common.hpp"

#include <heed/io/training_checkpoint.hpp>
#include <heed/nn/convert_weights.hpp>

#include "tied_net.hpp"

namespace {

const heed::IndexTensor kQuantisedTokens({3, 7, 49, 0, 12, 3, 25, 41}, heed::Shape{2, 4});

/// `from`'s tensors and metadata after `change`, written to `to` (checksums anew).
void rewrite(const std::string& from, const std::string& to,
             const std::function<void(heed::SafetensorsFile&)>& change) {
  heed::SafetensorsFile file = heed::read_safetensors(from);
  change(file);
  Metadata metadata;
  for (const auto& [key, value] : file.metadata)
    if (!heed::detail::is_checksum_key(key)) metadata.emplace(key, value);
  const std::vector<std::pair<std::string, heed::TensorRecord>> records(file.tensors.begin(), file.tensors.end());
  heed::save_safetensors(to, records, metadata);
}

void set_float(heed::TensorRecord& record, std::size_t index, float value) {
  std::memcpy(record.data.data() + 4 * index, &value, 4);  // little-endian hosts (the tests' check below)
}

}  // namespace

TEST_CASE("A converted net saves a quantised checkpoint that loads back without fp32 weights", "[io]") {
  for (const heed::Precision precision : {heed::Precision::bf16, heed::Precision::int8}) {
    const bool int8 = precision == heed::Precision::int8;
    INFO(heed::to_string(precision));
    TempDir dir;
    heed::Generator gen(41);
    heed_test::TiedNet net(gen);
    const heed::Tensor<float> hidden = net.hidden.weight.clone();
    heed::convert_weights_(net, precision);
    const heed::Tensor<float> logits = net.forward(kQuantisedTokens);
    const std::string path = dir.file("net.safetensors");
    heed::save_checkpoint(net, path, {{"note", "kept"}});

    const heed::SafetensorsHeader header = heed::read_safetensors_header(path);
    const std::string dtype = int8 ? "I8" : "BF16", name = heed::to_string(precision);
    CHECK(header.tensors.at("embedding.weight").dtype == dtype);
    CHECK(header.tensors.at("embedding.weight").shape == std::vector<index_t>{50, 24});
    CHECK(header.tensors.at("hidden.weight").dtype == dtype);
    CHECK(header.tensors.count("output.weight") == 0);  // tied to the embedding: saved once
    CHECK(header.tensors.at("hidden.bias").dtype == "F32");
    CHECK(header.tensors.count("hidden.weight_scale") == (int8 ? 1u : 0u));
    CHECK(header.metadata.at("heed.converted_weights") ==
          "embedding.weight " + name + "\nhidden.weight " + name + "\n");
    CHECK(header.metadata.at("note") == "kept");
    if (int8) {
      // PyTorch's per-channel quantisation: w ≈ q · scale, within half a step, each row
      // reaching ±127.
      const heed::SafetensorsFile file = heed::read_safetensors(path);
      const auto& q = file.tensors.at("hidden.weight").data;
      const heed::Tensor<float> scale = file.tensors.at("hidden.weight_scale").to_tensor<float>();
      REQUIRE(scale.shape() == heed::Shape{24});
      for (index_t n = 0; n < 24; ++n) {
        int largest = 0;
        for (index_t k = 0; k < 24; ++k) {
          const int value = static_cast<std::int8_t>(q[static_cast<std::size_t>(n * 24 + k)]);
          largest = std::max(largest, std::abs(value));
          CHECK(std::abs(value * scale.data()[n] - hidden.data()[n * 24 + k]) <= scale.data()[n] * 0.5001f);
        }
        CHECK(largest == 127);
      }
    }

    // Into a fresh fp32 net (other weights), a net converted the other way, and itself:
    // the file's weights, converted, tied as they were, no fp32 tensor.
    heed::Generator other(7);
    heed_test::TiedNet fresh(other), converted_other(other);
    heed::convert_weights_(converted_other, int8 ? heed::Precision::bf16 : heed::Precision::int8);
    for (heed_test::TiedNet* into : {&fresh, &converted_other, &net}) {
      CHECK(heed::load_checkpoint(*into, path).at("note") == "kept");
      CHECK_FALSE(into->embedding.weight.defined());
      CHECK_FALSE(into->output.weight.defined());
      REQUIRE(into->hidden.converted_weight);
      CHECK(into->hidden.converted_weight->precision() == precision);
      CHECK(into->output.converted_weight == into->embedding.converted_weight);
      CHECK(names_of(*into) == std::vector<std::string>{"hidden.bias", "output.bias"});
      CHECK(into->forward(kQuantisedTokens).to_vector() == logits.to_vector());
    }
    // Saved again, the same bytes: nothing was requantised.
    heed::save_checkpoint(fresh, dir.file("again.safetensors"), {{"note", "kept"}});
    CHECK(read_file(dir.file("again.safetensors")) == read_file(path));
  }
}

TEST_CASE("An fp32 checkpoint loads into a converted net as fp32 weights again", "[io]") {
  TempDir dir;
  heed::Generator gen(41), other(5);
  heed_test::TiedNet source(gen), net(other);
  heed::save_checkpoint(source, dir.file("fp32.safetensors"));
  heed::convert_weights_(net, heed::Precision::int8);
  heed::load_checkpoint(net, dir.file("fp32.safetensors"));
  CHECK_FALSE(net.hidden.converted_weight);
  CHECK_FALSE(net.embedding.converted_weight);
  REQUIRE(net.embedding.weight.defined());
  CHECK(net.output.weight.is_same(net.embedding.weight));  // tied again
  CHECK(net.hidden.weight.requires_grad());
  CHECK(names_of(net) == names_of(source));
  CHECK(bits(net) == bits(source));
  CHECK(net.forward(kQuantisedTokens).to_vector() == source.forward(kQuantisedTokens).to_vector());
}

TEST_CASE("A bad quantised checkpoint is refused by name and changes nothing", "[io]") {
  REQUIRE(heed::detail::host_is_little_endian());  // set_float writes little-endian bytes
  TempDir dir;
  heed::Generator gen(41), other(9);
  heed_test::TiedNet source(gen), target(other);
  const std::string good = dir.file("good.safetensors"), fp32 = dir.file("fp32.safetensors");
  heed::save_checkpoint(source, fp32);
  heed::convert_weights_(source, heed::Precision::int8);
  heed::save_checkpoint(source, good);
  heed::convert_weights_(target, heed::Precision::bf16);
  const std::vector<float> before = target.forward(kQuantisedTokens).to_vector();
  const auto hidden_before = target.hidden.converted_weight;

  const auto refused = [&](const std::function<void(heed::SafetensorsFile&)>& change, const std::string& text,
                           const std::string& from = "") {
    const std::string bad = dir.file("bad.safetensors");
    rewrite(from.empty() ? good : from, bad, change);
    CHECK_THROWS_AS(heed::load_checkpoint(target, bad), heed::FileError);
    CHECK_THROWS_WITH(heed::load_checkpoint(target, bad), Contains("load_checkpoint: " + bad + ": ") && Contains(text));
    CHECK(target.hidden.converted_weight == hidden_before);
    CHECK_FALSE(target.hidden.weight.defined());
    CHECK(target.forward(kQuantisedTokens).to_vector() == before);
  };
  refused([](heed::SafetensorsFile& f) { set_float(f.tensors.at("hidden.weight_scale"), 3, std::nanf("")); },
          "tensor 'hidden.weight_scale': row 3 has scale nan, not a finite non-negative number");
  refused([](heed::SafetensorsFile& f) { set_float(f.tensors.at("embedding.weight_scale"), 0, -0.5f); },
          "tensor 'embedding.weight_scale': row 0 has scale -0.5, not a finite non-negative number");
  refused([](heed::SafetensorsFile& f) { f.tensors.erase("hidden.weight_scale"); },
          "missing from the file: 'hidden.weight_scale'");
  refused([](heed::SafetensorsFile& f) { f.tensors.at("hidden.weight").dtype = "U8"; },
          "tensor 'hidden.weight': dtype U8, model wants I8");
  refused([](heed::SafetensorsFile& f) { f.metadata["heed.converted_weights"] = "hidden.bias int8\n"; },
          "metadata 'heed.converted_weights' lists 'hidden.bias' as int8, which is not a convertible weight");
  refused([](heed::SafetensorsFile& f) { f.metadata["heed.converted_weights"] = "hidden.weight int4\n"; },
          "metadata 'heed.converted_weights': line 'hidden.weight int4' is not '<name> int8'");
  refused([](heed::SafetensorsFile& f) { f.metadata["heed.converted_weights"] += "hidden.weight bf16\n"; },
          "line 'hidden.weight bf16' is not '<name> int8' or '<name> bf16' of a weight listed once");
  // An fp32 file that says its weight is int8.
  refused([](heed::SafetensorsFile& f) { f.metadata["heed.converted_weights"] = "hidden.weight int8\n"; },
          "missing from the file: 'hidden.weight_scale'", fp32);

  heed::Generator gen_double(3);
  TinyNet<double> doubles(gen_double);
  CHECK_THROWS_WITH(heed::load_checkpoint(doubles, good),
                    Contains("holds weights converted to int8 ('embedding.weight'), which load into a float model "
                             "only, not a float64 one"));
  CHECK_THROWS_WITH(heed::save_checkpoint(source, dir.file("x.safetensors"), {{"heed.converted_weights", "x"}}),
                    Contains("metadata key 'heed.converted_weights' is reserved"));
  heed::Adam<float> adam(source.parameters());
  CHECK_THROWS_WITH(heed::save_training_checkpoint(source, adam, dir.file("x.safetensors")),
                    Contains("'embedding.weight' was converted for inference (convert_weights_): a converted net "
                             "does not train"));
  CHECK_FALSE(fs::exists(dir.file("x.safetensors")));
}
