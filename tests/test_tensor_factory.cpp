// Creating tensors (heed/core/factory.hpp): zeros, ones, arange, eye, tensor(), the
// *_like functions and the random ones with their seeds.
#include "tensor_common.hpp"

// ---- creation ---------------------------------------------------------------------------

TEMPLATE_TEST_CASE("zeros, ones and full fill every element with one value", "[tensor]", float, double) {
  const auto z = heed::zeros<TestType>({2, 3});
  CHECK(z.shape() == Shape{2, 3});
  check_values(z, {0, 0, 0, 0, 0, 0});
  const auto o = heed::ones<TestType>({4});
  CHECK(o.shape() == Shape{4});
  check_values(o, {1, 1, 1, 1});
  const auto f = heed::full<TestType>({1, 2, 1}, TestType(2.5));
  CHECK(f.shape() == Shape{1, 2, 1});
  check_values(f, {2.5, 2.5});
  const auto s = heed::full<TestType>({}, TestType(-1));
  CHECK(s.dim() == 0);
  CHECK(s.item() == TestType(-1));
}

TEST_CASE("zeros without a type argument makes float tensors", "[tensor]") {
  auto z = heed::zeros({2, 2});
  STATIC_REQUIRE(std::is_same_v<decltype(z), heed::Tensor<float>>);
  CHECK(std::string(z.dtype()) == "float32");
}

TEMPLATE_TEST_CASE("arange counts from start by step and stops before end", "[tensor]", float, double) {
  check_values(heed::arange<TestType>(5), {0, 1, 2, 3, 4});
  check_values(heed::arange<TestType>(1, 2, 0.25), {1, 1.25, 1.5, 1.75});
  check_values(heed::arange<TestType>(5, 0, -2), {5, 3, 1});
  check_values(heed::arange<TestType>(2, 5, 1.5), {2, 3.5});

  const auto tenths = heed::arange<TestType>(0, 1, TestType(0.1));
  REQUIRE(tenths.shape() == Shape{10});
  for (index_t i = 0; i < 10; ++i) CHECK(tenths.at({i}) == Approx(0.1 * static_cast<double>(i)).margin(1e-6));

  CHECK(heed::arange<TestType>(0, 0.3, 0.1).numel() == 3);  // bounds in double, as PyTorch: not 4
  CHECK(heed::arange<TestType>(3, 3).numel() == 0);
}

TEST_CASE("eye is the identity, square or rectangular", "[tensor]") {
  const auto i3 = heed::eye(3);
  CHECK(i3.shape() == Shape{3, 3});
  check_values(i3, {1, 0, 0, 0, 1, 0, 0, 0, 1});
  const auto wide = heed::eye<double>(2, 3);
  CHECK(wide.shape() == Shape{2, 3});
  check_values(wide, {1, 0, 0, 0, 1, 0});
  const auto tall = heed::eye(3, 2);
  CHECK(tall.shape() == Shape{3, 2});
  check_values(tall, {1, 0, 0, 1, 0, 0});
}

TEST_CASE("tensor() reads each pair of braces as one dim", "[tensor]") {
  SECTION("depth 1") {
    const auto x = heed::tensor<float>({1, 2, 3});
    CHECK(x.shape() == Shape{3});
    check_values(x, {1, 2, 3});
  }
  SECTION("depth 2") {
    const auto x = heed::tensor<float>({{1, 2, 3}, {4, 5, 6}});
    CHECK(x.shape() == Shape{2, 3});
    check_values(x, {1, 2, 3, 4, 5, 6});
  }
  SECTION("a column: {{1}, {2}} is 2 x 1") {
    const auto x = heed::tensor<float>({{1}, {2}});
    CHECK(x.shape() == Shape{2, 1});
    check_values(x, {1, 2});
  }
  SECTION("a single row: {{1, 2}} is 1 x 2") {
    CHECK(heed::tensor<float>({{1, 2}}).shape() == Shape{1, 2});
    CHECK(heed::tensor<float>({1}).shape() == Shape{1});
  }
  SECTION("depth 3") {
    const auto x = heed::tensor<double>({{{1, 2}, {3, 4}}, {{5, 6}, {7, 8}}, {{9, 10}, {11, 12}}});
    CHECK(x.shape() == Shape{3, 2, 2});
    CHECK(x.at({2, 0, 1}) == 10.0);
    CHECK(x.at({1, 1, 0}) == 7.0);
  }
  SECTION("depth 4") {
    const auto x = heed::tensor<float>({{{{1, 2, 3}}, {{4, 5, 6}}}});
    CHECK(x.shape() == Shape{1, 2, 1, 3});
    check_values(x, {1, 2, 3, 4, 5, 6});
    CHECK(x.at({0, 1, 0, 2}) == 6.f);
  }
  SECTION("a bare value is rank 0") {
    const auto x = heed::tensor<float>(2.5f);
    CHECK(x.dim() == 0);
    CHECK(x.shape() == Shape{});
    CHECK(x.numel() == 1);
    CHECK(x.item() == 2.5f);
    CHECK(heed::scalar_tensor(4.0).item() == 4.0);
  }
  SECTION("integer lists make int64 tensors, as torch.tensor([1, 2]); a decimal point makes floats") {
    const auto i = heed::tensor({1, 2, 3});
    static_assert(std::is_same_v<decltype(i), const heed::Tensor<std::int64_t>>);
    CHECK(i.to_vector() == std::vector<std::int64_t>{1, 2, 3});
    const auto rows = heed::tensor({{1, -2}, {3, 4}});
    CHECK(rows.shape() == Shape{2, 2});
    CHECK(rows.to_vector() == std::vector<std::int64_t>{1, -2, 3, 4});
    const auto blocks = heed::tensor({{{1}, {2}}, {{3}, {4}}});
    CHECK(blocks.shape() == Shape{2, 2, 1});
    CHECK(blocks.at({1, 0, 0}) == 3);
    const auto f = heed::tensor({1.5, 2.0});
    static_assert(std::is_same_v<decltype(f), const heed::Tensor<float>>);
    check_values(f, {1.5, 2});
    CHECK(heed::tensor<double>({1, 2}).to_vector() == std::vector<double>{1, 2});  // an explicit type wins
    CHECK_ERROR(heed::ValueError, "tensor: ragged nested list", heed::tensor({{1, 2}, {3}}));
  }
  SECTION("integer and bool element types") {
    const auto i = heed::tensor<std::int64_t>({{1, -2}, {3, 4}});
    CHECK(i.shape() == Shape{2, 2});
    CHECK(i.to_vector() == std::vector<std::int64_t>{1, -2, 3, 4});
    const auto b = heed::tensor<bool>({true, false});
    CHECK(b.to_vector() == std::vector<bool>{true, false});
  }
}

TEST_CASE("a tensor built from a vector and a shape holds the values row-major", "[tensor]") {
  const heed::Tensor<float> x({1, 2, 3, 4, 5, 6}, {3, 2});
  CHECK(x.shape() == Shape{3, 2});
  CHECK(x.at({0, 1}) == 2.f);
  CHECK(x.at({2, 0}) == 5.f);
  const heed::Tensor<double> s({7.0}, Shape{});
  CHECK(s.dim() == 0);
  CHECK(s.item() == 7.0);
  const heed::Tensor<float> empty(std::vector<float>{}, {0, 3});
  CHECK(empty.numel() == 0);
  CHECK(empty.shape() == Shape{0, 3});
}

TEMPLATE_TEST_CASE("zeros_like, ones_like and full_like copy the shape, not the values", "[tensor]", float, double) {
  const auto x = heed::arange<TestType>(6).reshape({3, 2});
  const auto z = heed::zeros_like(x);
  const auto o = heed::ones_like(x);
  const auto f = heed::full_like(x, TestType(9));
  CHECK(z.shape() == x.shape());
  CHECK(o.shape() == x.shape());
  CHECK_FALSE(z.shares_storage(x));
  check_values(z, {0, 0, 0, 0, 0, 0});
  check_values(o, {1, 1, 1, 1, 1, 1});
  check_values(f, {9, 9, 9, 9, 9, 9});
}

// ---- random -----------------------------------------------------------------------------

TEST_CASE("random tensors repeat for a seed and differ between seeds", "[tensor]") {
  heed::Generator a(42), b(42), c(43);
  SECTION("randn") {
    const auto x = heed::randn<float>({64}, a), y = heed::randn<float>({64}, b), z = heed::randn<float>({64}, c);
    CHECK(x.to_vector() == y.to_vector());
    CHECK(x.to_vector() != z.to_vector());
  }
  SECTION("rand") {
    const auto x = heed::rand<double>({8, 8}, a), y = heed::rand<double>({8, 8}, b), z = heed::rand<double>({8, 8}, c);
    CHECK(x.to_vector() == y.to_vector());
    CHECK(x.to_vector() != z.to_vector());
  }
  SECTION("randint") {
    const auto x = heed::randint(0, 1000, {64}, a), y = heed::randint(0, 1000, {64}, b);
    const auto z = heed::randint(0, 1000, {64}, c);
    CHECK(x.to_vector() == y.to_vector());
    CHECK(x.to_vector() != z.to_vector());
  }
  SECTION("without a generator, the default one, as torch.rand and torch.randn") {
    heed::manual_seed(42);
    const heed::Tensorf x = heed::randn<float>({16});
    const heed::Tensord u = heed::rand<double>({4});
    const heed::Tensorf n = heed::normal(1.0f, 2.0f, {4});
    const heed::Tensord w = heed::uniform(Shape{4}, -1.0, 1.0);
    const heed::IndexTensor k = heed::randint(0, 9, {4});
    heed::Generator same(42);
    CHECK(x.to_vector() == heed::randn<float>({16}, same).to_vector());
    CHECK(u.to_vector() == heed::rand<double>({4}, same).to_vector());
    CHECK(n.to_vector() == heed::normal(1.0f, 2.0f, {4}, same).to_vector());
    CHECK(w.to_vector() == heed::uniform(Shape{4}, -1.0, 1.0, same).to_vector());
    CHECK(k.to_vector() == heed::randint(0, 9, {4}, same).to_vector());
  }
  SECTION("one generator moves on, and manual_seed rewinds it") {
    const auto first = heed::randn<float>({16}, a);
    const auto second = heed::randn<float>({16}, a);
    CHECK(first.to_vector() != second.to_vector());
    a.manual_seed(42);
    CHECK(a.initial_seed() == 42u);
    CHECK(heed::randn<float>({16}, a).to_vector() == first.to_vector());
  }
}

TEST_CASE("A generator's state restores its next draws, a spare normal included", "[tensor]") {
  heed::Generator a(42);
  (void)a.normal();  // Box-Muller leaves the second value for the next call
  const std::string state = a.get_state();
  const double next_normal = a.normal();
  const std::uint64_t next_bits = a.next_u64();
  heed::Generator b(7);
  b.set_state(state);
  CHECK(b.initial_seed() == 42u);
  CHECK(b.normal() == next_normal);
  CHECK(b.next_u64() == next_bits);
  CHECK(b.get_state() == a.get_state());

  // Text that is not a state throws and changes nothing.
  heed::Generator c(9);
  const std::string before = c.get_state();
  CHECK_ERROR(heed::ValueError,
              "Generator::set_state: not a generator state (it should begin with 'heed.mt19937_64', "
              "got 'mt19937')",
              c.set_state("mt19937 1 0 0"));
  CHECK_ERROR(heed::ValueError, "Generator::set_state: a damaged state",
              c.set_state(state.substr(0, state.size() / 2)));
  CHECK_ERROR(heed::ValueError, "Generator::set_state: a damaged state", c.set_state(state + " 17"));
  CHECK_ERROR(heed::ValueError, "Generator::set_state: a damaged state", c.set_state("heed.mt19937_64 1 2 0"));
  CHECK_ERROR(heed::ValueError, "Generator::set_state: not a generator state", c.set_state(""));
  CHECK(c.get_state() == before);
}

TEST_CASE("rand and uniform stay in their half-open range", "[tensor]") {
  heed::Generator gen(7);
  const auto u = heed::rand<float>({20000}, gen);
  double sum = 0;
  for (float v : u.to_vector()) {
    REQUIRE(v >= 0.f);
    REQUIRE(v < 1.f);
    sum += v;
  }
  CHECK(sum / 20000 == Approx(0.5).margin(0.02));

  const auto w = heed::uniform<double>({5000}, -3.0, -1.0, gen);
  double lo = 0, hi = -10;
  for (double v : w.to_vector()) {
    REQUIRE(v >= -3.0);
    REQUIRE(v < -1.0);
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  CHECK(lo < -2.9);  // the whole range is used
  CHECK(hi > -1.1);

  // Draws within 2^-25 of 1 round to 1.0f; with seed 1, draw 517518 is one of them.
  heed::Generator rounding(1);
  CHECK(heed::rand<float>({517519}, rounding).data()[517518] == std::nextafter(1.f, 0.f));
}

TEST_CASE("normal samples have the requested mean and standard deviation", "[tensor]") {
  heed::Generator gen(2024);
  const auto x = heed::normal<double>(2.0, 0.5, {20000}, gen);
  double sum = 0, sq = 0;
  for (double v : x.to_vector()) sum += v;
  const double mean = sum / 20000;
  for (double v : x.to_vector()) sq += (v - mean) * (v - mean);
  const double stddev = std::sqrt(sq / 19999);
  CHECK(mean == Approx(2.0).margin(0.02));
  CHECK(stddev == Approx(0.5).margin(0.02));

  const auto z = heed::randn<float>({20000}, gen);
  CHECK(static_cast<double>(z.mean().item()) == Approx(0.0).margin(0.03));
  CHECK(static_cast<double>((z * z).mean().item()) == Approx(1.0).margin(0.05));
}

TEST_CASE("randint draws every integer from low up to high, exclusive, and nothing else", "[tensor]") {
  heed::Generator gen(3);
  const auto x = heed::randint(-2, 3, {2000}, gen);
  CHECK(x.shape() == Shape{2000});
  std::vector<int> counts(5, 0);
  for (std::int64_t v : x.to_vector()) {
    REQUIRE(v >= -2);
    REQUIRE(v < 3);
    ++counts[static_cast<std::size_t>(v + 2)];
  }
  for (int c : counts) CHECK(c > 300);  // about 400 each
}

TEST_CASE("randperm is a permutation of 0..n-1, the same for a seed", "[tensor]") {
  heed::Generator gen(7);
  const auto p = heed::randperm(50, gen);
  CHECK(p.shape() == Shape{50});
  CHECK(std::string(p.dtype()) == "int64");
  std::vector<std::int64_t> sorted = p.to_vector();
  std::sort(sorted.begin(), sorted.end());
  std::vector<std::int64_t> expected(50);
  for (std::size_t i = 0; i < expected.size(); ++i) expected[i] = static_cast<std::int64_t>(i);
  CHECK(sorted == expected);
  CHECK(p.to_vector() != expected);  // shuffled (50! orders: the identity is no draw)

  // The same seed gives the same permutation, and the draws advance the generator.
  heed::Generator again(7);
  CHECK(heed::randperm(50, again).to_vector() == p.to_vector());
  CHECK(heed::randperm(50, again).to_vector() != p.to_vector());
  heed::Generator other(8);
  CHECK(heed::randperm(50, other).to_vector() != p.to_vector());

  // Fisher–Yates from the end, the NmtDataLoader's draws: the same generator state gives
  // the same order as an epoch of that loader shuffled.
  heed::Generator fy(3);
  std::vector<std::int64_t> order(9);
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = static_cast<std::int64_t>(i);
  for (std::size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[fy.uniform_int(i)]);
  heed::Generator three(3);
  CHECK(heed::randperm(9, three).to_vector() == order);

  // Empty and single permutations draw nothing.
  heed::Generator quiet(1);
  const std::string state = quiet.get_state();
  CHECK(heed::randperm(0, quiet).shape() == Shape{0});
  CHECK(heed::randperm(1, quiet).to_vector() == std::vector<std::int64_t>{0});
  CHECK(quiet.get_state() == state);

  // Without a generator: the default one, which manual_seed seeds.
  heed::manual_seed(11);
  const auto first = heed::randperm(20);
  heed::manual_seed(11);
  CHECK(heed::randperm(20).to_vector() == first.to_vector());
}
