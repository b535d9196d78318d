// LayerNorm (heed/nn/layer_norm.hpp): parameters, d2l's values, the op and gradcheck,
// printing and errors.
#include "nn_common.hpp"

// ---- LayerNorm ------------------------------------------------------------------------------

TEST_CASE("LayerNorm has weight ones and bias zeros of normalized_shape", "[nn]") {
  heed::LayerNorm<float> ln(2);
  CHECK(ln.normalized_shape() == heed::Shape{2});
  CHECK(names_of(ln.named_parameters()) == std::vector<std::string>{"weight", "bias"});
  CHECK(ln.weight.shape() == heed::Shape{2});
  CHECK(ln.bias.shape() == heed::Shape{2});
  CHECK(ln.weight.to_vector() == std::vector<float>{1, 1});
  CHECK(ln.bias.to_vector() == std::vector<float>{0, 0});
  CHECK(ln.weight.requires_grad());
  CHECK(ln.bias.requires_grad());
  CHECK(ln.num_parameters() == 4);

  heed::LayerNorm<double> ln2(heed::Shape{3, 4});
  CHECK(ln2.normalized_shape() == heed::Shape{3, 4});
  CHECK(ln2.weight.shape() == heed::Shape{3, 4});
  CHECK(ln2.bias.shape() == heed::Shape{3, 4});
  CHECK(ln2.weight.to_vector() == std::vector<double>(12, 1.0));
  CHECK(ln2.bias.to_vector() == std::vector<double>(12, 0.0));
  CHECK(ln2.num_parameters() == 24);
  CHECK(ln2.named_buffers().empty());
  CHECK(ln2.named_children().empty());

  heed::LayerNorm<float> plain(4, 1e-5, false);
  CHECK_FALSE(plain.weight.defined());
  CHECK_FALSE(plain.bias.defined());
  CHECK(plain.named_parameters().empty());
  CHECK(plain.num_parameters() == 0);
}

TEST_CASE("LayerNorm normalises d2l's [[1, 2], [2, 3]] and applies weight and bias", "[nn]") {
  heed::LayerNorm<double> ln(2);
  const auto x = heed::tensor<double>({{1, 2}, {2, 3}});
  const double a = 0.5 / std::sqrt(0.25 + 1e-5);
  check_values(ln(x), {-a, a, -a, a}, 1e-12);
  check_values(ln.forward(x), {-1, 1, -1, 1}, 3e-5);  // d2l's printout

  {
    heed::NoGradGuard no_grad;
    ln.weight.copy_(heed::tensor<double>({2, 3}));
    ln.bias.copy_(heed::tensor<double>({10, 20}));
  }
  const auto y = ln(x);
  check_values(y, {10 - 2 * a, 20 + 3 * a, 10 - 2 * a, 20 + 3 * a}, 1e-12);
  CHECK(y.grad_fn_name() == "NativeLayerNormBackward");
  y.sum().backward();
  check_values(ln.weight.grad(), {-2 * a, 2 * a}, 1e-12);
  check_values(ln.bias.grad(), {2, 2}, 1e-12);

  // eps is the module's, added to the biased variance.
  heed::LayerNorm<double> wide(2, 3.0);
  check_values(wide(heed::tensor<double>({1, 3})), {-0.5, 0.5}, 1e-12);
  // Without affine parameters the output is x̂ itself.
  heed::LayerNorm<double> plain(2, 1e-5, false);
  check_values(plain(x), {-a, a, -a, a}, 1e-12);
  CHECK_FALSE(plain(x).requires_grad());
}

TEST_CASE("LayerNorm over (3, 4) agrees with layer_norm and gradchecks", "[nn]") {
  heed::Generator gen(3);
  heed::LayerNorm<double> ln(heed::Shape{3, 4});
  {
    heed::NoGradGuard no_grad;
    ln.weight.copy_(heed::randn<double>({3, 4}, gen));
    ln.bias.copy_(heed::randn<double>({3, 4}, gen));
  }
  const auto x = heed::randn<double>({2, 3, 4}, gen);
  const auto y = ln(x);
  REQUIRE(y.shape() == heed::Shape{2, 3, 4});
  check_close(y, heed::layer_norm(x, heed::Shape{3, 4}, ln.weight, ln.bias, 1e-5), 0.0);
  // Each row of 12, with weight and bias undone, has mean 0 and variance about 1.
  const auto x_hat = (y - ln.bias) / ln.weight;
  for (index_t r = 0; r < 2; ++r) {
    double mean = 0, var = 0;
    for (index_t i = 0; i < 12; ++i) mean += x_hat.data()[r * 12 + i] / 12;
    for (index_t i = 0; i < 12; ++i) var += std::pow(x_hat.data()[r * 12 + i] - mean, 2) / 12;
    CHECK(mean == Approx(0).margin(1e-9));
    CHECK(var == Approx(1).margin(1e-4));
  }

  // Through the module's own parameters: x, weight and bias.
  const Fn f = [&ln](const Inputs& in) {
    ln.weight.zero_grad();
    ln.bias.zero_grad();
    return ln(in[0]);
  };
  CHECK_GRADIENTS(f, {leaf({2, 3, 4}, 4)});
  const Fn with_parameters = [](const Inputs& in) { return heed::layer_norm(in[0], heed::Shape{3, 4}, in[1], in[2]); };
  CHECK_GRADIENTS(with_parameters,
                  {leaf({2, 3, 4}, 5), ln.weight.detach().requires_grad_(), ln.bias.detach().requires_grad_()});
}

TEST_CASE("LayerNorm prints as PyTorch does", "[nn]") {
  CHECK(heed::LayerNorm<float>(2).repr() == "LayerNorm((2,), eps=1e-05, elementwise_affine=True)");
  CHECK(heed::LayerNorm<float>(heed::Shape{3, 4}).repr() == "LayerNorm((3, 4), eps=1e-05, elementwise_affine=True)");
  CHECK(heed::LayerNorm<float>(heed::Shape{2, 3, 4}).repr() ==
        "LayerNorm((2, 3, 4), eps=1e-05, elementwise_affine=True)");
  CHECK(heed::LayerNorm<float>(8, 1e-6).repr() == "LayerNorm((8,), eps=1e-06, elementwise_affine=True)");
  CHECK(heed::LayerNorm<float>(8, 0.001).repr() == "LayerNorm((8,), eps=0.001, elementwise_affine=True)");
  CHECK(heed::LayerNorm<double>(32, 1e-5, false).repr() == "LayerNorm((32,), eps=1e-05, elementwise_affine=False)");
}

TEST_CASE("LayerNorm refuses bad arguments and inputs, naming itself", "[nn][errors]") {
  CHECK_ERROR(heed::ValueError, "LayerNorm: normalized_shape must be non-empty with positive sizes, got (0)",
              heed::LayerNorm<float>(0));
  CHECK_ERROR(heed::ValueError, "LayerNorm: normalized_shape must be non-empty with positive sizes, got ()",
              heed::LayerNorm<float>(heed::Shape{}));
  CHECK_ERROR(heed::ValueError, "LayerNorm: normalized_shape must be non-empty with positive sizes, got (3, 0)",
              heed::LayerNorm<float>(heed::Shape{3, 0}));
  CHECK_ERROR(heed::ValueError, "negative size -2", heed::LayerNorm<float>(-2));
  CHECK_ERROR(heed::ValueError, "LayerNorm: eps must be positive, got 0", heed::LayerNorm<float>(4, 0.0));
  CHECK_ERROR(heed::ValueError, "LayerNorm: eps must be positive, got -1e-05", heed::LayerNorm<float>(4, -1e-5));
  CHECK_ERROR(heed::ValueError, "LayerNorm: eps must be positive",
              heed::LayerNorm<float>(4, std::numeric_limits<double>::quiet_NaN()));

  heed::LayerNorm<float> ln(2);
  CHECK_ERROR(heed::ShapeError, "LayerNorm: input of shape (2, 3) does not end in normalized_shape (2)",
              ln(heed::zeros<float>({2, 3})));
  CHECK_ERROR(heed::ShapeError, "LayerNorm: input of shape () does not end in normalized_shape (2)",
              ln(heed::scalar_tensor(1.f)));
  heed::LayerNorm<float> ln2(heed::Shape{3, 4});
  CHECK_ERROR(heed::ShapeError, "LayerNorm: input of shape (4, 3) does not end in normalized_shape (3, 4)",
              ln2(heed::zeros<float>({4, 3})));
  CHECK_ERROR(heed::ShapeError, "LayerNorm: input of shape (4) does not end in normalized_shape (3, 4)",
              ln2(heed::zeros<float>({4})));
  CHECK(ln2(heed::zeros<float>({5, 3, 4})).shape() == heed::Shape{5, 3, 4});
}

// The backward runs in blocks of rows (here 4 of 50), each with its own partial dweight
// and dbias.
TEST_CASE("layer_norm over 200 rows gradchecks", "[nn]") {
  heed::Generator gen(9);
  const auto weight = heed::randn<double>({6}, gen).requires_grad_(),
             bias = heed::randn<double>({6}, gen).requires_grad_();
  const Fn f = [](const Inputs& in) { return heed::layer_norm(in[0], heed::Shape{6}, in[1], in[2]); };
  CHECK_GRADIENTS(f, {leaf({200, 6}, 6), weight, bias});
}

#ifdef _OPENMP
TEST_CASE("layer_norm's backward gives the same bits on any thread count", "[nn]") {
  heed::Generator gen(10);
  const auto x = heed::randn<float>({1000, 300}, gen), g = heed::randn<float>({1000, 300}, gen);
  const auto grads = [&] {
    const auto in = x.detach().requires_grad_();
    const auto weight = heed::ones<float>({300}).requires_grad_(), bias = heed::zeros<float>({300}).requires_grad_();
    heed::layer_norm(in, heed::Shape{300}, weight, bias).backward(g);
    return std::vector<std::vector<float>>{in.grad().to_vector(), weight.grad().to_vector(), bias.grad().to_vector()};
  };
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  const auto one = grads();
  omp_set_num_threads(3);
  const auto three = grads();
  omp_set_num_threads(threads);
  CHECK(one == three);
  // dbias is the column sums of g.
  for (index_t c : {index_t(0), index_t(299)}) {
    double sum = 0;
    for (index_t r = 0; r < 1000; ++r) sum += g.at({r, c});
    CHECK(one[2][static_cast<std::size_t>(c)] == Approx(sum).margin(1e-3));
  }
}
#endif
