// heed_test::Golden: reading tests/data/attention_golden.txt, and rejecting malformed files.
#include <catch2/catch.hpp>
#include <heed/heed.hpp>

#include "golden.hpp"

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace {

using heed::index_t;
using heed::Shape;
using heed_test::Golden;

/// A file under the temp directory holding `text`, removed again on destruction.
struct TempFile {
  explicit TempFile(const std::string& name, const std::string& text)
      : path((std::filesystem::temp_directory_path() / name).string()) {
    std::ofstream(path) << text;
  }
  ~TempFile() {
    std::error_code ignored;
    std::filesystem::remove(path, ignored);
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  std::string path;
};

}  // namespace

TEST_CASE("Golden reads the attention reference tensors with their shapes and dtypes", "[golden]") {
  const Golden golden("attention_golden.txt");
  const std::vector<std::string> names = golden.names();
  REQUIRE(!names.empty());
  CHECK(names.front() == "ms1.X");
  for (const char* name :
       {"ms1.X", "ms2.valid_lens", "ms0.grad.X", "additive.W_q.weight", "additive_d2l.output", "dot.attention_weights",
        "dot1.grad.keys", "dot_d2l.R", "concat.attn_combine.bias", "nw.grad.w", "nw_np.attention_weights"}) {
    INFO(name);
    CHECK(golden.has(name));
  }
  CHECK(!golden.has("ms1"));

  CHECK(golden.tensor<double>("ms1.X").shape() == Shape{2, 2, 4});
  CHECK(golden.tensor<float>("additive.W_q.weight").shape() == Shape{8, 20});
  CHECK(golden.tensor<double>("additive.grad.keys").shape() == Shape{2, 10, 2});
  CHECK(golden.tensor<double>("dot.output").shape() == Shape{2, 3, 6});
  CHECK(golden.tensor<double>("concat.attention_weights").shape() == Shape{1, 5});
  CHECK(golden.tensor<double>("nw_np.attention_weights").shape() == Shape{7, 6});

  const auto lens = golden.tensor<std::int64_t>("ms2.valid_lens");
  REQUIRE(lens.shape() == Shape{2, 3});
  CHECK(std::vector<std::int64_t>(lens.data(), lens.data() + 6) == std::vector<std::int64_t>{1, 3, 5, 2, 4, 7});

  // Inputs and weights are float32 values, so the float and double reads agree exactly.
  const auto xf = golden.tensor<float>("ms2.X");
  const auto xd = golden.tensor<double>("ms2.X");
  for (index_t i = 0; i < xd.numel(); ++i) CHECK(static_cast<double>(xf.data()[i]) == xd.data()[i]);
  CHECK(golden.tensor<float>("nw.w").data()[0] == 1.7f);

  // d2l's printed result for its additive-attention listing.
  const auto out = golden.tensor<double>("additive_d2l.output");
  REQUIRE(out.shape() == Shape{2, 1, 4});
  const std::vector<double> expected{2, 3, 4, 5, 10, 11, 12, 13};
  for (index_t i = 0; i < out.numel(); ++i) CHECK(out.data()[i] == Approx(expected[i]));
}

TEMPLATE_TEST_CASE("Golden ms1 softmax rows sum to 1 over the valid prefix and are 0 beyond", "[golden]", float,
                   double) {
  const Golden golden("attention_golden.txt");
  const auto out = golden.tensor<TestType>("ms1.output");
  const auto lens = golden.tensor<std::int64_t>("ms1.valid_lens");
  REQUIRE(out.shape() == Shape{2, 2, 4});
  REQUIRE(lens.shape() == Shape{2});
  for (index_t b = 0; b < 2; ++b) {
    for (index_t q = 0; q < 2; ++q) {
      INFO("batch " << b << ", query " << q);
      const TestType* row = out.data() + (b * 2 + q) * 4;
      double sum = 0;
      for (index_t k = 0; k < lens.data()[b]; ++k) {
        CHECK(row[k] > 0);
        sum += row[k];
      }
      CHECK(sum == Approx(1.0));
      for (index_t k = lens.data()[b]; k < 4; ++k) CHECK(row[k] == 0);
    }
  }
}

TEST_CASE("Golden throws naming the file and line of a malformed line", "[golden]") {
  const std::string good = "# a comment\nok float64 2 1 2 : 0.5 -1e-3\n";
  const std::vector<std::string> bad_lines{
      "x float64 1 3 : 1 2",            // too few values
      "x float64 1 1 : 1 2",            // too many values
      "x float32 1 1 : 1",              // unknown dtype
      "x float64 2 1 1 1 : 1",          // no ':' after the dims
      "x float64 1 1 : abc",            // not a number
      "x int64 1 1 : 1.5",              // not an integer
      "x float64 7 1 1 1 1 1 1 1 : 1",  // rank above 6
      "x float64 1 -1 :",               // negative dim
      "x float64 one 1 : 1",            // bad rank
      "x",                              // no dtype
      "ok float64 0 : 1",               // name seen before
  };
  for (const std::string& bad : bad_lines) {
    INFO(bad);
    const TempFile file("heed_golden_malformed.txt", good + bad + "\n");
    REQUIRE_THROWS_AS(Golden(file.path), std::runtime_error);
    REQUIRE_THROWS_WITH(Golden(file.path), Catch::Contains(file.path) && Catch::Contains("line 3"));
  }

  const TempFile file("heed_golden_good.txt", good + "\n  \nscalar int64 0 : -7\n");
  const Golden golden(file.path);
  CHECK(golden.names() == std::vector<std::string>{"ok", "scalar"});
  CHECK(golden.tensor<double>("ok").data()[1] == -1e-3);
  const auto scalar = golden.tensor<double>("scalar");
  CHECK(scalar.shape() == Shape{});
  CHECK(scalar.data()[0] == -7.0);
  CHECK_THROWS_WITH(golden.tensor<std::int64_t>("ok"), Catch::Contains("whole number"));
  CHECK_THROWS_WITH(golden.tensor<float>("missing"), Catch::Contains("missing") && Catch::Contains(file.path));
  CHECK_THROWS_WITH(Golden("no_such_file.txt"), Catch::Contains("no_such_file.txt"));
}
