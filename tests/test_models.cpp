// Nadaraya-Watson kernel regression (d2l 10.2): the data, the non-parametric pooling and
// the parametric NWKernelRegression model with its training loop.
#include "check.hpp"
#include "golden.hpp"

#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

using Catch::Matchers::Contains;
using heed::index_t;
using heed::Tensord;
using heed::Tensorf;
using heed_test::check_close;
using heed_test::check_values;

namespace {

double truth(double x) { return 2 * std::sin(x) + std::pow(x, 0.8); }

/// Mean and sample standard deviation of the noise y_train − f(x_train).
template <typename T>
std::pair<double, double> noise_stats(const heed::NadarayaWatsonData<T>& data) {
  const index_t n = data.x_train.numel();
  double sum = 0, sum_sq = 0;
  for (index_t i = 0; i < n; ++i) {
    const double noise = data.y_train.data()[i] - truth(data.x_train.data()[i]);
    sum += noise;
    sum_sq += noise * noise;
  }
  const double mean = sum / n;
  return {mean, std::sqrt((sum_sq - n * mean * mean) / (n - 1))};
}

/// The Gaussian-kernel average at query x: Σ k(x − x_i) y_i / Σ k(x − x_i), k(d) = exp(−(w d)²/2).
double kernel_average(double x, const std::vector<double>& keys, const std::vector<double>& values, double w = 1.0) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < keys.size(); ++i) {
    const double d = (x - keys[i]) * w;
    const double k = std::exp(-d * d / 2);
    num += k * values[i];
    den += k;
  }
  return num / den;
}

std::vector<double> as_double(const Tensorf& x) {
  std::vector<double> out;
  for (float v : x.to_vector()) out.push_back(v);
  return out;
}

}  // namespace

// ---- data -----------------------------------------------------------------------------------

TEST_CASE("nadaraya_watson_data makes d2l's training and test sets", "[models]") {
  heed::Generator gen(0);
  const auto data = heed::nadaraya_watson_data<float>(gen);
  REQUIRE(data.x_train.shape() == heed::Shape{50});
  REQUIRE(data.y_train.shape() == heed::Shape{50});
  REQUIRE(data.x_test.shape() == heed::Shape{50});
  REQUIRE(data.y_truth.shape() == heed::Shape{50});

  const auto x = data.x_train.to_vector();
  for (std::size_t i = 0; i < x.size(); ++i) {
    INFO("x_train " << i);
    CHECK(x[i] >= 0.f);
    CHECK(x[i] < 5.f);
    if (i > 0) CHECK(x[i - 1] <= x[i]);
  }
  // Spread over [0, 5): 50 uniform draws leave no gap wider than 1.5.
  CHECK(x.front() < 0.5f);
  CHECK(x.back() > 4.5f);

  std::vector<double> x_test, y_truth;
  for (int i = 0; i < 50; ++i) {
    x_test.push_back(0.1 * i);
    y_truth.push_back(truth(0.1 * i));
  }
  check_values(data.x_test, x_test, 1e-6);
  check_values(data.y_truth, y_truth, 1e-5);
  CHECK(data.y_truth.data()[0] == 0.f);
  CHECK(heed::NadarayaWatsonData<double>::f(1.0) == Approx(2 * std::sin(1.0) + 1.0));

  // The noise: y_train − f(x_train) has mean about 0 and standard deviation about 0.5.
  const auto [mean, std] = noise_stats(data);
  CHECK(std::fabs(mean) < 0.25);
  CHECK(std >= 0.35);
  CHECK(std <= 0.65);
}

TEST_CASE("nadaraya_watson_data repeats with the seed", "[models]") {
  heed::Generator g1(3), g2(3), g3(4);
  const auto a = heed::nadaraya_watson_data<double>(g1);
  const auto b = heed::nadaraya_watson_data<double>(g2);
  const auto c = heed::nadaraya_watson_data<double>(g3);
  CHECK(a.x_train.to_vector() == b.x_train.to_vector());
  CHECK(a.y_train.to_vector() == b.y_train.to_vector());
  CHECK(a.x_train.to_vector() != c.x_train.to_vector());
  CHECK(a.y_train.to_vector() != c.y_train.to_vector());
  CHECK(a.x_test.to_vector() == c.x_test.to_vector());  // fixed grid
  CHECK(a.y_truth.to_vector() == c.y_truth.to_vector());

  // Noise std over several seeds, in double.
  for (std::uint64_t seed : {1u, 2u, 5u, 42u}) {
    INFO("seed " << seed);
    heed::Generator gen(seed);
    const auto data = heed::nadaraya_watson_data<double>(gen);
    const double std = noise_stats(data).second;
    CHECK(std >= 0.35);
    CHECK(std <= 0.65);
  }

  // Another training size.
  heed::Generator gen(0);
  const auto small = heed::nadaraya_watson_data<float>(gen, 7);
  CHECK(small.x_train.shape() == heed::Shape{7});
  CHECK(small.y_train.shape() == heed::Shape{7});
  CHECK(small.x_test.shape() == heed::Shape{50});
  CHECK_ERROR(heed::ValueError, "nadaraya_watson_data: n_train must be at least 2, got 1",
              heed::nadaraya_watson_data<float>(gen, 1));
}

TEST_CASE("leave_one_out drops element i from row i", "[models]") {
  const auto x = heed::tensor<float>({1, 2, 3, 4});
  const auto out = heed::leave_one_out(x);
  REQUIRE(out.shape() == heed::Shape{4, 3});
  check_values(out, {2, 3, 4, 1, 3, 4, 1, 2, 4, 1, 2, 3});
  const auto two = heed::leave_one_out(heed::tensor<double>({5, -7}));
  REQUIRE(two.shape() == heed::Shape{2, 1});
  check_values(two, {-7, 5});

  CHECK_ERROR(heed::ShapeError, "leave_one_out: expected a 1-D tensor of at least 2 elements, got (2, 2)",
              heed::leave_one_out(heed::zeros<float>({2, 2})));
  CHECK_ERROR(heed::ShapeError, "leave_one_out", heed::leave_one_out(heed::zeros<float>({1})));
  CHECK_ERROR(heed::ShapeError, "leave_one_out", heed::leave_one_out(heed::scalar_tensor<float>(1)));
}

// ---- non-parametric ---------------------------------------------------------------------------

TEST_CASE("nadaraya_watson averages values with Gaussian-kernel weights", "[models]") {
  heed::Generator gen(0);
  const auto data = heed::nadaraya_watson_data<double>(gen);
  const auto [y_hat, weights] = heed::nadaraya_watson(data.x_test, data.x_train, data.y_train);
  REQUIRE(y_hat.shape() == heed::Shape{50});
  REQUIRE(weights.shape() == heed::Shape{50, 50});

  const auto keys = data.x_train.to_vector(), values = data.y_train.to_vector();
  std::vector<double> expected, expected_weights;
  for (double q : data.x_test.to_vector()) {
    expected.push_back(kernel_average(q, keys, values));
    double den = 0;
    for (double k : keys) den += std::exp(-(q - k) * (q - k) / 2);
    for (double k : keys) expected_weights.push_back(std::exp(-(q - k) * (q - k) / 2) / den);
  }
  check_values(y_hat, expected, 1e-12);
  check_values(weights, expected_weights, 1e-12);

  for (index_t i = 0; i < 50; ++i) {
    INFO("row " << i);
    double row = 0;
    for (index_t j = 0; j < 50; ++j) row += weights.at({i, j});
    CHECK(row == Approx(1.0).epsilon(1e-12));
  }
  // The prediction follows the truth loosely: smoothing, not interpolation.
  double error = 0;
  for (index_t i = 0; i < 50; ++i) error += std::fabs(y_hat.data()[i] - data.y_truth.data()[i]);
  CHECK(error / 50 < 1.0);
}

TEST_CASE("nadaraya_watson on a small case by hand", "[models]") {
  // keys 0 and 1, values 0 and 1: at query 0 the weights are 1 : e^{−1/2}.
  const auto [y_hat, weights] = heed::nadaraya_watson(heed::tensor<float>({0.f, 0.5f, 1.f}),
                                                      heed::tensor<float>({0.f, 1.f}), heed::tensor<float>({0.f, 1.f}));
  const double e = std::exp(-0.5);
  check_values(y_hat, {e / (1 + e), 0.5, 1 / (1 + e)});
  check_values(weights, {1 / (1 + e), e / (1 + e), 0.5, 0.5, e / (1 + e), 1 / (1 + e)});

  // In float, on the d2l data, against the same formula in double.
  heed::Generator gen(1);
  const auto data = heed::nadaraya_watson_data<float>(gen);
  const auto result = heed::nadaraya_watson(data.x_test, data.x_train, data.y_train);
  const auto keys = as_double(data.x_train), values = as_double(data.y_train);
  std::vector<double> expected;
  for (double q : as_double(data.x_test)) expected.push_back(kernel_average(q, keys, values));
  check_values(result.first, expected, 1e-5);
}

TEST_CASE("nadaraya_watson checks shapes", "[models]") {
  const auto q = heed::zeros<float>({3});
  const auto k = heed::zeros<float>({4});
  CHECK_ERROR(heed::ShapeError, "nadaraya_watson: keys and values must be 1-D of one length, got (4) and (5)",
              heed::nadaraya_watson(q, k, heed::zeros<float>({5})));
  CHECK_ERROR(heed::ShapeError, "nadaraya_watson: keys and values",
              heed::nadaraya_watson(q, heed::zeros<float>({3, 4}), heed::zeros<float>({3, 4})));
  CHECK_ERROR(heed::ShapeError, "nadaraya_watson: expected queries (n)",
              heed::nadaraya_watson(heed::zeros<float>({3, 1}), k, k));
  CHECK_ERROR(heed::ShapeError, "nadaraya_watson", heed::nadaraya_watson(heed::scalar_tensor<float>(0), k, k));
}

// ---- parametric -----------------------------------------------------------------------------

TEST_CASE("NWKernelRegression with w = 1 is the non-parametric estimator", "[models]") {
  heed::Generator gen(0);
  const auto data = heed::nadaraya_watson_data<double>(gen);
  heed::NWKernelRegression<double> net(gen);
  CHECK(net.num_parameters() == 1);
  REQUIRE(net.named_parameters().size() == 1);
  CHECK(net.named_parameters()[0].first == "w");
  CHECK(net.named_parameters()[0].second.is_same(net.w));
  CHECK(net.w.shape() == heed::Shape{1});
  CHECK(net.w.item() >= 0.0);
  CHECK(net.w.item() < 1.0);
  CHECK(net.repr() == "NWKernelRegression()");

  net.w.data()[0] = 1.0;
  const index_t n_test = data.x_test.numel(), n_train = data.x_train.numel();
  const Tensord keys = data.x_train.repeat({n_test, 1});  // each query's own copy, as d2l
  const Tensord values = data.y_train.repeat({n_test, 1});
  REQUIRE(keys.shape() == heed::Shape{n_test, n_train});
  const Tensord y_hat = net(data.x_test, keys, values);
  REQUIRE(y_hat.shape() == heed::Shape{n_test});
  const auto [expected, expected_weights] = heed::nadaraya_watson(data.x_test, data.x_train, data.y_train);
  check_close(y_hat, expected, 1e-12);

  const Tensord& weights = net.attention_weights();
  REQUIRE(weights.shape() == heed::Shape{n_test, n_train});
  check_close(weights, expected_weights, 1e-12);
  CHECK_FALSE(weights.requires_grad());
  CHECK(y_hat.requires_grad());
}

TEST_CASE("NWKernelRegression sharpens the kernel with w", "[models]") {
  heed::Generator gen(0);
  heed::NWKernelRegression<double> net(gen);
  const auto queries = heed::tensor<double>({0.0, 1.0, 2.5});
  const auto keys = heed::tensor<double>({{0.5, 1.0, 3.0}, {0.0, 2.0, 1.5}, {2.0, 2.5, 4.0}});
  const auto values = heed::tensor<double>({{1.0, -1.0, 2.0}, {0.5, 0.0, 3.0}, {4.0, 1.0, -2.0}});
  for (double w : {0.5, 2.0, 3.0}) {
    INFO("w = " << w);
    net.w.data()[0] = w;
    const Tensord y = net(queries, keys, values);
    std::vector<double> expected;
    for (index_t i = 0; i < 3; ++i) {
      const std::vector<double> k(keys.data() + 3 * i, keys.data() + 3 * i + 3);
      const std::vector<double> v(values.data() + 3 * i, values.data() + 3 * i + 3);
      expected.push_back(kernel_average(queries.data()[i], k, v, w));
    }
    check_values(y, expected, 1e-12);
    const Tensord row_sums = net.attention_weights().sum(1);
    check_values(row_sums, {1, 1, 1}, 1e-12);
  }
}

TEST_CASE("gradcheck of NWKernelRegression in w and the queries", "[models]") {
  heed::Generator gen(2);
  heed::NWKernelRegression<double> net(gen);
  net.w.data()[0] = 0.8;
  const auto data = heed::nadaraya_watson_data<double>(gen, 6);
  const Tensord keys = heed::leave_one_out(data.x_train);    // (6, 5)
  const Tensord values = heed::leave_one_out(data.y_train);  // (6, 5)
  const Tensord queries = data.x_train.clone().requires_grad_();
  using Inputs = std::vector<Tensord>;
  const std::function<Tensord(const Inputs&)> f = [&](const Inputs& in) { return net(in[1], keys, values); };
  // in[0] is the module's own parameter: gradcheck nudges it in place.
  const auto result = heed::gradcheck(f, {net.w, queries});
  INFO(result.message);
  CHECK(result.ok);
  CHECK(net.w.item() == 0.8);  // restored after the nudges

  // Keys and values as inputs as well.
  const std::function<Tensord(const Inputs&)> g = [&](const Inputs& in) { return net(in[0], in[1], in[2]); };
  const auto all = heed::gradcheck(g, {queries, keys.clone().requires_grad_(), values.clone().requires_grad_()});
  INFO(all.message);
  CHECK(all.ok);
}

TEST_CASE("NWKernelRegression trains as in d2l and its loss decreases", "[models]") {
  heed::manual_seed(0);
  const auto data = heed::nadaraya_watson_data<float>(heed::default_generator());
  const Tensorf keys = heed::leave_one_out(data.x_train);    // (50, 49)
  const Tensorf values = heed::leave_one_out(data.y_train);  // (50, 49)
  heed::NWKernelRegression<float> net;
  const float w0 = net.w.item();
  heed::SGD<float> trainer(net.parameters(), 0.5);

  std::vector<double> losses;
  for (int epoch = 0; epoch < 5; ++epoch) {
    trainer.zero_grad();
    const Tensorf diff = net(data.x_train, keys, values) - data.y_train;
    const Tensorf loss = (diff * diff).sum();
    loss.backward();
    trainer.step();
    losses.push_back(loss.item());
  }
  INFO("losses " << losses[0] << " " << losses[1] << " " << losses[2] << " " << losses[3] << " " << losses[4]);
  CHECK(losses.back() < losses.front());
  CHECK(net.w.item() != w0);

  // The loss after training, recomputed, is below the first one too.
  const Tensorf diff = net(data.x_train, keys, values) - data.y_train;
  CHECK(static_cast<double>((diff * diff).sum().item()) < losses.front());

  // Seeded: a second run gives the same losses.
  heed::manual_seed(0);
  const auto again = heed::nadaraya_watson_data<float>(heed::default_generator());
  heed::NWKernelRegression<float> net2;
  CHECK(net2.w.item() == w0);
  CHECK(again.y_train.to_vector() == data.y_train.to_vector());
}

TEST_CASE("NWKernelRegression checks shapes", "[models]") {
  heed::Generator gen(0);
  heed::NWKernelRegression<float> net(gen);
  const auto q = heed::zeros<float>({3});
  const auto kv = heed::zeros<float>({3, 4});
  CHECK(net(q, kv, kv).shape() == heed::Shape{3});
  CHECK_ERROR(heed::ShapeError, "NWKernelRegression: keys and values must be (n, m) of one shape, got (4) and (4)",
              net(q, heed::zeros<float>({4}), heed::zeros<float>({4})));
  CHECK_ERROR(heed::ShapeError, "NWKernelRegression: keys and values", net(q, kv, heed::zeros<float>({3, 5})));
  CHECK_ERROR(heed::ShapeError, "NWKernelRegression: expected queries (n) and keys (n, m) or (m), got (2) and (3, 4)",
              net(heed::zeros<float>({2}), kv, kv));
  CHECK_ERROR(heed::ShapeError, "NWKernelRegression", net(heed::zeros<float>({3, 1}), kv, kv));
}

TEMPLATE_TEST_CASE("Nadaraya-Watson matches d2l's PyTorch code", "[models][golden]", float, double) {
  const heed_test::Golden golden("attention_golden.txt");
  const double tolerance = heed_test::tolerance<TestType>();
  auto leaf = [&](const std::string& name) { return heed_test::leaf<TestType>(golden, name); };
  SECTION("non-parametric") {
    auto x_test = leaf("nw_np.x_test"), x_train = leaf("nw_np.x_train"), y_train = leaf("nw_np.y_train");
    const auto [y_hat, weights] = heed::nadaraya_watson(x_test, x_train, y_train);
    heed_test::check_close(y_hat, golden.tensor<TestType>("nw_np.output"), tolerance);
    heed_test::check_close(weights, golden.tensor<TestType>("nw_np.attention_weights"), tolerance);
    y_hat.backward(golden.tensor<TestType>("nw_np.R"));
    heed_test::check_close(x_test.grad(), golden.tensor<TestType>("nw_np.grad.x_test"), tolerance);
    heed_test::check_close(x_train.grad(), golden.tensor<TestType>("nw_np.grad.x_train"), tolerance);
    heed_test::check_close(y_train.grad(), golden.tensor<TestType>("nw_np.grad.y_train"), tolerance);
  }
  SECTION("NWKernelRegression") {
    auto queries = leaf("nw.queries"), keys = leaf("nw.keys"), values = leaf("nw.values");
    heed::NWKernelRegression<TestType> net;
    heed_test::load_parameters(golden, net, "nw");
    const auto out = net(queries, keys, values);
    heed_test::check_close(out, golden.tensor<TestType>("nw.output"), tolerance);
    heed_test::check_close(net.attention_weights(), golden.tensor<TestType>("nw.attention_weights"), tolerance);
    out.backward(golden.tensor<TestType>("nw.R"));
    heed_test::check_parameter_grads(golden, net, "nw");
    heed_test::check_close(queries.grad(), golden.tensor<TestType>("nw.grad.queries"), tolerance);
    heed_test::check_close(keys.grad(), golden.tensor<TestType>("nw.grad.keys"), tolerance);
    heed_test::check_close(values.grad(), golden.tensor<TestType>("nw.grad.values"), tolerance);
  }
}
