// Linear (heed/nn/linear.hpp) and the linear op behind it (heed/ops/linear.hpp).
#include "nn_common.hpp"

// ---- Linear ---------------------------------------------------------------------------------

TEST_CASE("Linear computes x W^T + b", "[nn]") {
  heed::Generator gen(0);
  heed::Linear<float> fc(3, 2, true, gen);
  CHECK(fc.in_features() == 3);
  CHECK(fc.out_features() == 2);
  CHECK(fc.weight.shape() == heed::Shape{2, 3});
  CHECK(fc.bias.shape() == heed::Shape{2});
  CHECK(names_of(fc.named_parameters()) == std::vector<std::string>{"weight", "bias"});
  CHECK(fc.num_parameters() == 8);
  {
    heed::NoGradGuard no_grad;
    fc.weight.copy_(heed::tensor<float>({{1, 2, 3}, {-1, 0, 2}}));
    fc.bias.copy_(heed::tensor<float>({0.5, -1}));
  }

  SECTION("2-D input") {
    const auto x = heed::tensor<float>({{1, 1, 1}, {2, 0, -1}});
    const auto y = fc(x);
    REQUIRE(y.shape() == heed::Shape{2, 2});
    // row 0: (1+2+3)+0.5, (−1+0+2)−1; row 1: (2+0−3)+0.5, (−2+0−2)−1
    check_values(y, {6.5, 0, -0.5, -5});
    check_values(heed::linear(x, fc.weight, fc.bias), {6.5, 0, -0.5, -5});
    check_values(heed::linear(x, fc.weight), {6, 1, -1, -4});
  }
  SECTION("3-D and 1-D inputs") {
    const auto x = heed::tensor<float>({{{1, 1, 1}, {2, 0, -1}}, {{0, 0, 0}, {0.5, 1, 1.5}}});
    const auto y = fc(x);
    REQUIRE(y.shape() == heed::Shape{2, 2, 2});
    // (0.5, 1, 1.5): 0.5+2+4.5+0.5 = 7.5, −0.5+0+3−1 = 1.5
    check_values(y, {6.5, 0, -0.5, -5, 0.5, -1, 7.5, 1.5});
    const auto v = fc(heed::tensor<float>({1, 1, 1}));
    REQUIRE(v.shape() == heed::Shape{2});
    check_values(v, {6.5, 0});
  }
  SECTION("random weights against a hand-written product") {
    heed::Generator g(3);
    heed::Linear<double> big(5, 4, true, g);
    const Tensord x = heed::randn<double>({2, 3, 5}, g);
    const Tensord y = big(x);
    REQUIRE(y.shape() == heed::Shape{2, 3, 4});
    std::vector<double> expected;
    for (index_t r = 0; r < 6; ++r)
      for (index_t o = 0; o < 4; ++o) {
        double s = big.bias.data()[o];
        for (index_t i = 0; i < 5; ++i) s += x.data()[r * 5 + i] * big.weight.data()[o * 5 + i];
        expected.push_back(s);
      }
    check_values(y, expected, 1e-12);
  }
}

TEST_CASE("Linear without bias has only a weight", "[nn]") {
  heed::Generator gen(0);
  heed::Linear<float> fc(3, 2, false, gen);
  CHECK_FALSE(fc.bias.defined());
  CHECK(names_of(fc.named_parameters()) == std::vector<std::string>{"weight"});
  CHECK(fc.parameters().size() == 1);
  CHECK(fc.num_parameters() == 6);
  {
    heed::NoGradGuard no_grad;
    fc.weight.copy_(heed::tensor<float>({{1, 2, 3}, {-1, 0, 2}}));
  }
  check_values(fc(heed::tensor<float>({{1, 1, 1}, {2, 0, -1}})), {6, 1, -1, -4});
}

TEST_CASE("Linear initialises uniformly within 1 over sqrt in_features, by seed", "[nn]") {
  heed::Generator gen(7);
  heed::Linear<float> fc(20, 8, true, gen);
  const double bound = 1.0 / std::sqrt(20.0);
  for (const auto& [name, p] : fc.named_parameters()) {
    INFO(name);
    const auto values = p.to_vector();
    double lo = 1, hi = -1;
    for (float v : values) {
      CHECK(std::fabs(v) <= bound);
      lo = std::min(lo, static_cast<double>(v));
      hi = std::max(hi, static_cast<double>(v));
    }
    // The 160 weights spread over the whole range, not clustered (8 biases are too few to tell).
    if (name == "weight") {
      CHECK(lo < -0.8 * bound);
      CHECK(hi > 0.8 * bound);
    }
  }

  heed::Generator g1(42), g2(42), g3(43);
  heed::Linear<float> a(6, 3, true, g1), b(6, 3, true, g2), c(6, 3, true, g3);
  CHECK(a.weight.to_vector() == b.weight.to_vector());
  CHECK(a.bias.to_vector() == b.bias.to_vector());
  CHECK(a.weight.to_vector() != c.weight.to_vector());

  // The default generator, seeded as torch.manual_seed.
  heed::manual_seed(5);
  heed::Linear<float> d(6, 3);
  heed::manual_seed(5);
  heed::Linear<float> e(6, 3);
  CHECK(d.weight.to_vector() == e.weight.to_vector());
  CHECK(d.bias.to_vector() == e.bias.to_vector());
  // and it is the same stream as an explicit Generator with that seed
  heed::Generator g5(5);
  heed::Linear<float> f(6, 3, true, g5);
  CHECK(d.weight.to_vector() == f.weight.to_vector());
}

TEST_CASE("Linear refuses non-positive sizes", "[nn]") {
  CHECK_ERROR(heed::ValueError, "Linear: in_features and out_features must be positive, got 0 and 3",
              heed::Linear<float>(0, 3));
  CHECK_ERROR(heed::ValueError, "Linear", heed::Linear<float>(3, 0));
  CHECK_ERROR(heed::ValueError, "Linear", heed::Linear<float>(-2, 4, false));
}

TEST_CASE("linear names itself on shape errors", "[ops]") {
  const auto x = heed::zeros<float>({2, 3});
  const auto w = heed::zeros<float>({4, 3});
  CHECK_ERROR(heed::ShapeError, "linear: weight must be (out_features, in_features), got (3)",
              heed::linear(x, heed::zeros<float>({3})));
  CHECK_ERROR(heed::ShapeError, "linear: weight", heed::linear(x, heed::zeros<float>({1, 4, 3})));
  CHECK_ERROR(heed::ShapeError, "linear: input of shape (2, 3) does not end in in_features = 5",
              heed::linear(x, heed::zeros<float>({4, 5})));
  CHECK_ERROR(heed::ShapeError, "linear: input", heed::linear(heed::scalar_tensor<float>(1), w));
  CHECK_ERROR(heed::ShapeError, "linear: bias of shape (3) does not match out_features = 4",
              heed::linear(x, w, heed::zeros<float>({3})));
  CHECK_ERROR(heed::ShapeError, "linear: bias", heed::linear(x, w, heed::zeros<float>({1, 4})));
  heed::Generator gen(0);
  heed::Linear<float> fc(3, 2, true, gen);
  CHECK_ERROR(heed::ShapeError, "linear", fc(heed::zeros<float>({2, 4})));
}

TEST_CASE("gradcheck of linear", "[ops]") {
  const Fn with_bias = [](const Inputs& in) { return heed::linear(in[0], in[1], in[2]); };
  const Fn without_bias = [](const Inputs& in) { return heed::linear(in[0], in[1]); };
  SECTION("2-D x") { CHECK_GRADIENTS(with_bias, {leaf({3, 4}, 1), leaf({5, 4}, 2), leaf({5}, 3)}); }
  SECTION("3-D x") { CHECK_GRADIENTS(with_bias, {leaf({2, 3, 4}, 4), leaf({2, 4}, 5), leaf({2}, 6)}); }
  SECTION("1-D x") { CHECK_GRADIENTS(with_bias, {leaf({4}, 7), leaf({3, 4}, 8), leaf({3}, 9)}); }
  SECTION("without bias") {
    CHECK_GRADIENTS(without_bias, {leaf({3, 4}, 10), leaf({5, 4}, 11)});
    CHECK_GRADIENTS(without_bias, {leaf({2, 3, 4}, 12), leaf({2, 4}, 13)});
  }
  SECTION("only some inputs require grad") {
    heed::Generator gen(14);
    const Tensord x = heed::randn<double>({3, 4}, gen), w = heed::randn<double>({2, 4}, gen),
                  b = heed::randn<double>({2}, gen);
    CHECK_GRADIENTS(with_bias, {x, leaf({2, 4}, 15), leaf({2}, 16)});
    CHECK_GRADIENTS(with_bias, {leaf({3, 4}, 17), w, b});
    CHECK_GRADIENTS(with_bias, {x, w, leaf({2}, 18)});
  }
  SECTION("the gradients by hand") {
    const Tensord x = heed::tensor<double>({{1, 2}, {3, 4}, {5, 6}}).requires_grad_();
    const Tensord w = heed::tensor<double>({{1, 0}, {0, 1}, {1, 1}}).requires_grad_();
    const Tensord b = heed::zeros<double>({3}).requires_grad_();
    heed::linear(x, w, b).sum().backward();
    check_values(x.grad(), {2, 2, 2, 2, 2, 2});     // column sums of W
    check_values(w.grad(), {9, 12, 9, 12, 9, 12});  // column sums of x, per output
    check_values(b.grad(), {3, 3, 3});
    CHECK(heed::linear(x, w, b).grad_fn_name() == "AddmmBackward");
  }
}

// ---- packed weights (heed/ops/packed_gemm.hpp) ------------------------------------------------

TEMPLATE_TEST_CASE("linear inside a PackedWeightsGuard equals linear without one", "[ops]", float, double) {
  using T = TestType;
  heed::Generator gen(5);
  const index_t panel = heed::detail::kPackedPanel<T>;
  // Rows on both sides of the few-rows kernel's limit (kPackedFewRows) and of a block of
  // xᵀ (kPackedPanel rows); out_features on both sides of a vector of features and of
  // several.
  for (const index_t rows : {index_t(1), index_t(5), index_t(6), index_t(8), index_t(9), index_t(17), index_t(40)})
    for (const index_t out : {index_t(1), panel - 1, panel, panel + 1, 3 * panel + 5})
      for (const index_t in : {index_t(1), index_t(7), index_t(128)}) {
        INFO("rows " << rows << ", out " << out << ", in " << in);
        const heed::Tensor<T> x = heed::randn<T>({rows, in}, gen), w = heed::randn<T>({out, in}, gen),
                              b = heed::randn<T>({out}, gen);
        const heed::Tensor<T> expected = heed::linear(x, w, b), expected_no_bias = heed::linear(x, w);
        heed::NoGradGuard no_grad;
        heed::PackedWeightsGuard packed;
        const double margin = std::is_same_v<T, float> ? 1e-4 : 1e-12;
        check_close(heed::linear(x, w, b), expected, margin);
        check_close(heed::linear(x, w), expected_no_bias, margin);
        check_close(heed::linear(x, w, b), expected, margin);  // the packed copy, reused
      }
}

TEMPLATE_TEST_CASE("linear inside a PackedWeightsGuard gives the bits of one FMA chain over k, then + bias", "[ops]",
                   float, double) {
  // The kernels read the weight in place, and each output element is fma(x[r][k],
  // W[n][k], acc) for k in order from 0, then acc + bias[n] (+ 0 without one), for every
  // split: few rows (W transposed in registers), many (xᵀ in blocks of kPackedPanel
  // rows), partial tiles of rows and features, in_features below and past a vector.
  using T = TestType;
  heed::Generator gen(9);
  const auto multiply_add = [](T a, T b, T acc) {
    // The 16-byte vectors without FMA hardware multiply, then add, as the kernels do.
    if constexpr (heed::detail::kWidestSimdBytes > 16) return std::fma(a, b, acc);
    return a * b + acc;
  };
  for (const index_t rows : {index_t(1), index_t(3), index_t(8), index_t(17), index_t(33), index_t(64)})
    for (const index_t out : {index_t(1), index_t(7), index_t(31), index_t(33), index_t(100)})
      for (const index_t in : {index_t(1), index_t(5), index_t(64), index_t(129)}) {
        INFO("rows " << rows << ", out " << out << ", in " << in);
        const heed::Tensor<T> x = heed::randn<T>({rows, in}, gen), w = heed::randn<T>({out, in}, gen),
                              b = heed::randn<T>({out}, gen);
        std::vector<T> expected(static_cast<std::size_t>(rows * out)),
            expected_no_bias(static_cast<std::size_t>(rows * out));
        for (index_t r = 0; r < rows; ++r)
          for (index_t n = 0; n < out; ++n) {
            T acc = 0;
            for (index_t k = 0; k < in; ++k) acc = multiply_add(x.data()[r * in + k], w.data()[n * in + k], acc);
            expected[static_cast<std::size_t>(r * out + n)] = acc + b.data()[n];
            expected_no_bias[static_cast<std::size_t>(r * out + n)] = acc + T(0);
          }
        heed::NoGradGuard no_grad;
        heed::PackedWeightsGuard packed;
        CHECK(heed::linear(x, w, b).to_vector() == expected);
        CHECK(heed::linear(x, w).to_vector() == expected_no_bias);
      }
}

TEST_CASE("PackedWeightsGuard packs a weight again after an in-place change, and records autograd as before", "[ops]") {
  heed::Generator gen(6);
  Tensorf w = heed::randn<float>({40, 16}, gen).requires_grad_();
  const Tensorf x = heed::randn<float>({9, 16}, gen), b = heed::randn<float>({40}, gen);
  heed::PackedWeightsGuard packed;
  REQUIRE(heed::detail::current_packed_weights() != nullptr);
  {
    heed::NoGradGuard no_grad;
    const Tensorf before = heed::linear(x, w, b);
    check_close(before, heed::linear(x, w.detach(), b), 1e-5);
    w.mul_(2.0f);  // bumps the version: the packed copy is stale
    check_close(heed::linear(x, w, b), (before - b) * 2.0f + b, 1e-4);
  }
  // With gradients to record, linear multiplies as without a guard and records the op.
  const Tensorf y = heed::linear(x, w, b);
  REQUIRE(y.requires_grad());
  y.sum().backward();
  REQUIRE(w.grad().defined());
  // d Σy / dW[o][i] = Σ_rows x[r][i]
  const Tensorf column_sums = x.sum(0);
  for (index_t o = 0; o < 40; o += 13)
    for (index_t i = 0; i < 16; ++i) CHECK(w.grad().at({o, i}) == Approx(column_sums.at({i})).epsilon(1e-5));
  {
    heed::PackedWeightsGuard nested;  // shares the outer guard's copies
    CHECK(heed::detail::current_packed_weights() != nullptr);
  }
  CHECK(heed::detail::current_packed_weights() != nullptr);
}

TEST_CASE("PackedWeightsGuard ends with its scope", "[ops]") {
  { heed::PackedWeightsGuard packed; }
  CHECK(heed::detail::current_packed_weights() == nullptr);
}

#ifdef _OPENMP
TEST_CASE("a packed product gives the same bits on any thread count", "[ops]") {
  heed::Generator gen(7);
  const Tensorf x = heed::randn<float>({37, 128}, gen), w = heed::randn<float>({700, 128}, gen),
                b = heed::randn<float>({700}, gen);
  const int threads = omp_get_max_threads();
  heed::NoGradGuard no_grad;
  heed::PackedWeightsGuard packed;
  omp_set_num_threads(1);
  const std::vector<float> one = heed::linear(x, w, b).to_vector();
  omp_set_num_threads(3);
  const std::vector<float> three = heed::linear(x, w, b).to_vector();
  omp_set_num_threads(threads);
  CHECK(one == three);
}
#endif

#ifdef _OPENMP
TEST_CASE("linear's bias gradient sums g's rows, with the same bits on any thread count", "[ops]") {
  // 1000 × 1100: over the size where sum_rows shares its column blocks (256 wide, the
  // last 76) among the threads.
  heed::Generator gen(8);
  const Tensorf x = heed::randn<float>({1000, 3}, gen), w = heed::randn<float>({1100, 3}, gen),
                g = heed::randn<float>({1000, 1100}, gen);
  const auto bias_grad = [&] {
    const Tensorf b = heed::zeros<float>({1100}).requires_grad_();
    heed::linear(x, w, b).backward(g);
    return b.grad().to_vector();
  };
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  const std::vector<float> one = bias_grad();
  omp_set_num_threads(3);
  const std::vector<float> three = bias_grad();
  omp_set_num_threads(threads);
  CHECK(one == three);
  for (index_t c : {index_t(0), index_t(255), index_t(256), index_t(1099)}) {
    double sum = 0;
    for (index_t r = 0; r < 1000; ++r) sum += g.at({r, c});
    CHECK(one[static_cast<std::size_t>(c)] == Approx(sum).margin(1e-3));
  }
}
#endif
