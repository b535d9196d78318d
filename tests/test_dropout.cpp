// The dropout op (heed/ops/dropout.hpp): eval mode, p = 0 and 1, the kept fraction and
// scale, its gradient, seeds, cut tensors and bad probabilities.
#include "nn_common.hpp"

// ---- dropout --------------------------------------------------------------------------------

TEST_CASE("dropout is the identity in eval mode and with p = 0", "[ops]") {
  heed::Generator gen(0);
  const Tensorf x = heed::randn<float>({3, 4}, gen);
  CHECK(heed::dropout(x, 0.5, false, gen).is_same(x));
  CHECK(heed::dropout(x, 1.0, false, gen).is_same(x));
  CHECK(heed::dropout(x, 0.0, true, gen).is_same(x));

  heed::Dropout<float> module(0.5, &gen);
  module.eval();
  CHECK(module(x).is_same(x));
  heed::Dropout<float> zero(0.0, &gen);
  CHECK(zero.is_training());
  CHECK(zero(x).is_same(x));
}

TEST_CASE("dropout with p = 1 zeroes everything, gradient included", "[ops]") {
  heed::Generator gen(0);
  const Tensord x = heed::uniform<double>({4, 5}, 0.5, 1.5, gen).requires_grad_();
  const Tensord y = heed::dropout(x, 1.0, true, gen);
  REQUIRE(y.shape() == x.shape());
  check_values(y, std::vector<double>(20, 0.0), 0.0);
  y.sum().backward();
  check_values(x.grad(), std::vector<double>(20, 0.0), 0.0);
}

TEST_CASE("dropout keeps about 1 - p of the elements, scaled by 1 over 1 - p", "[ops]") {
  heed::Generator gen(1);
  const index_t n = 100000;
  const Tensorf x = heed::uniform<float>({100, 1000}, 0.5f, 1.5f, gen);  // no zeros
  for (double p : {0.1, 0.3, 0.5, 0.9}) {
    INFO("p = " << p);
    const Tensorf y = heed::dropout(x, p, true, gen);
    REQUIRE(y.shape() == x.shape());
    index_t kept = 0;
    bool survivors_scaled = true;
    for (index_t i = 0; i < n; ++i) {
      const float v = y.data()[i];
      if (v == 0.f) continue;
      ++kept;
      const double expected = x.data()[i] / (1.0 - p);
      survivors_scaled = survivors_scaled && std::fabs(v - expected) <= 1e-5 * std::fabs(expected);
    }
    CHECK(survivors_scaled);
    CHECK(static_cast<double>(kept) / static_cast<double>(n) == Approx(1.0 - p).margin(0.01));
  }

  // The module, in training mode, with its own generator.
  heed::Dropout<float> module(0.2, &gen);
  const Tensorf y = module(x);
  index_t kept = 0;
  for (index_t i = 0; i < n; ++i) kept += y.data()[i] != 0.f;
  CHECK(static_cast<double>(kept) / static_cast<double>(n) == Approx(0.8).margin(0.01));
  CHECK(module.p() == 0.2);
}

TEST_CASE("dropout's gradient is its mask times the scale", "[ops]") {
  heed::Generator gen(2);
  const double p = 0.4;
  const Tensord x = heed::uniform<double>({20, 50}, 0.5, 1.5, gen).requires_grad_();
  const Tensord y = heed::dropout(x, p, true, gen);
  CHECK(y.grad_fn_name() == "DropoutBackward");
  const Tensord v = heed::randn<double>({20, 50}, gen);
  (y * v).sum().backward();
  const Tensord g = x.grad();
  REQUIRE(g.shape() == x.shape());
  index_t dropped = 0;
  for (index_t i = 0; i < x.numel(); ++i) {
    const double mask = y.data()[i] / x.data()[i];  // 0 or 1 / (1 − p)
    INFO("element " << i);
    REQUIRE((mask == 0.0 || mask == Approx(1.0 / (1.0 - p)).epsilon(1e-12)));
    CHECK(g.data()[i] == Approx(mask * v.data()[i]).epsilon(1e-12).margin(1e-15));
    dropped += mask == 0.0;
  }
  CHECK(dropped > 300);  // about 400 of 1000
  CHECK(dropped < 500);

  // A fixed seed inside f gives one mask per call, so finite differences apply.
  const Fn f = [](const Inputs& in) {
    heed::Generator g9(9);
    return heed::dropout(in[0], 0.3, true, g9);
  };
  CHECK_GRADIENTS(f, {leaf({4, 6}, 3)});
}

TEST_CASE("dropout masks repeat with the seed", "[ops]") {
  const Tensorf x = heed::ones<float>({50, 40});
  heed::Generator g1(11), g2(11), g3(12);
  const auto a = heed::dropout(x, 0.5, true, g1);
  const auto b = heed::dropout(x, 0.5, true, g2);
  const auto c = heed::dropout(x, 0.5, true, g3);
  CHECK(a.to_vector() == b.to_vector());
  CHECK(a.to_vector() != c.to_vector());
  // The next call draws a fresh mask.
  CHECK(heed::dropout(x, 0.5, true, g1).to_vector() != a.to_vector());

  // The module draws from the default generator unless given one.
  heed::Dropout<float> module(0.5);
  heed::manual_seed(21);
  const auto d = module(x);
  heed::manual_seed(21);
  const auto e = module(x);
  CHECK(d.to_vector() == e.to_vector());
  heed::Generator g21(21);
  CHECK(heed::dropout(x, 0.5, true, g21).to_vector() == d.to_vector());
}

TEST_CASE("dropout of a tensor cut to a prefix of its extents is the cut of the whole tensor's dropout", "[ops]") {
  // What lets train_seq2seq cut the padding off a batch without changing any mask.
  heed::Generator gen(5);
  const Tensord x = heed::randn<double>({3, 7, 2, 9}, gen);
  heed::Generator g1(17), g2(17);
  const Tensord whole = heed::dropout(x, 0.4, true, g1);
  const Tensord cut = heed::dropout(x.narrow(0, 0, 2).narrow(1, 0, 4).narrow(3, 0, 5), 0.4, true, g2);
  check_close(cut, whole.narrow(0, 0, 2).narrow(1, 0, 4).narrow(3, 0, 5), 0.0);
  // Rows under 16 elements draw their hashes as one vector; longer ones one by one.
  for (const index_t length : {1, 10, 15, 16}) {
    INFO("rows of " << length);
    const heed::Tensor<float> long_rows = heed::randn<float>({5, 40}, gen);
    heed::Generator g4(23), g5(23);
    const heed::Tensor<float> long_out = heed::dropout(long_rows, 0.3, true, g4);
    const heed::Tensor<float> short_out = heed::dropout(long_rows.narrow(1, 0, length), 0.3, true, g5);
    check_close(short_out, long_out.narrow(1, 0, length), 0.0);
  }
  // Rows and columns are not all alike: the masks of different rows differ.
  const Tensord rows = heed::dropout(heed::ones<double>({64, 16}), 0.5, true, gen);
  index_t equal_to_first = 0;
  for (index_t r = 1; r < 64; ++r)
    equal_to_first += std::equal(rows.data(), rows.data() + 16, rows.data() + r * 16) ? 1 : 0;
  CHECK(equal_to_first < 3);
  // A scalar and a vector are tensors like any other.
  heed::Generator g3(3);
  const Tensord scalar = heed::dropout(heed::full<double>(heed::Shape{}, 2.0), 0.5, true, g3);
  CHECK((scalar.item() == 0.0 || scalar.item() == 4.0));
}

TEST_CASE("dropout refuses a probability outside 0 to 1", "[ops]") {
  heed::Generator gen(0);
  const Tensorf x = heed::ones<float>({3});
  CHECK_ERROR(heed::ValueError, "dropout: probability must be in [0, 1], got -0.1", heed::dropout(x, -0.1, true, gen));
  CHECK_ERROR(heed::ValueError, "dropout: probability must be in [0, 1], got 1.5", heed::dropout(x, 1.5, true, gen));
  CHECK_ERROR(heed::ValueError, "dropout: probability", heed::dropout(x, 1.5, false, gen));  // even in eval
  CHECK_ERROR(heed::ValueError, "dropout: probability", heed::dropout(x, std::nan(""), true, gen));
  CHECK_ERROR(heed::ValueError, "Dropout: probability must be in [0, 1], got 2", heed::Dropout<float>(2.0));
  CHECK_ERROR(heed::ValueError, "Dropout: probability", heed::Dropout<float>(-0.5));
}

#ifdef _OPENMP
TEST_CASE("dropout gives the same masks and gradients for any thread count", "[ops]") {
  // Large enough that the rows are split across threads (each chunk finds its rows'
  // coordinates from its first row index), with an odd row length and three leading dims.
  const int threads = omp_get_max_threads();
  heed::Generator gen(4);
  Tensorf x = heed::uniform<float>({3, 5, 67, 301}, 0.5f, 1.5f, gen).requires_grad_();
  const Tensorf v = heed::randn<float>({3, 5, 67, 301}, gen);
  auto run = [&](int n) {
    omp_set_num_threads(n);
    x.zero_grad();
    heed::Generator g(8);
    const Tensorf y = heed::dropout(x, 0.25, true, g);
    (y * v).sum().backward();
    return std::make_pair(y.to_vector(), x.grad().to_vector());
  };
  const auto one = run(1);
  const auto three = run(3);
  omp_set_num_threads(threads);
  CHECK(one.first == three.first);
  CHECK(one.second == three.second);
  // The gradient is v where y kept x (scaled), 0 where it dropped it.
  const std::vector<float> xs = x.to_vector(), vs = v.to_vector();
  for (std::size_t i = 0; i < xs.size(); i += 997) {
    INFO("element " << i);
    CHECK(one.second[i] == (one.first[i] == 0.0f ? 0.0f : vs[i] * (1.0f / 0.75f)));
  }
}
#endif
