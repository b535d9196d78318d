// Products with bf16 operands and fp32 sums (heed/ops/bf16_gemm.hpp) in every layout,
// through every path this CPU can take, and AutocastGuard (heed/ops/autocast.hpp)
// sending linear's and matmul's products there, forward and backward.
#include "nn_common.hpp"

#include <heed/ops/linear.hpp>
#include <heed/ops/masked_cross_entropy.hpp>
#include <heed/ops/matmul.hpp>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "cpu_paths.hpp"

namespace {

using heed::AutocastGuard;
using heed::CpuFeatures;
using heed::Precision;
using heed_test::feature_sets;
using heed_test::ForcedCpuFeatures;

/// The element (i, j) of op(x), x stored row-major with `cols` columns.
float element(const Tensorf& x, bool trans, index_t i, index_t j) {
  const index_t cols = x.shape()[1];
  return trans ? x.data()[j * cols + i] : x.data()[i * cols + j];
}

/// c0 + op(a) op(b) + bias in double, and each element's bound on a bf16 product's error:
/// bf16's rounding of each operand (2⁻⁸ of a product, 2⁻⁹ each) and fp32's of the sum.
struct ExactProduct {
  std::vector<double> value, bound;
};

ExactProduct exact_product(const std::vector<float>& c0, const Tensorf& a, bool trans_a, const Tensorf& b, bool trans_b,
                           const Tensorf& bias, index_t m, index_t n, index_t k) {
  ExactProduct exact{std::vector<double>(static_cast<std::size_t>(m * n)),
                     std::vector<double>(static_cast<std::size_t>(m * n))};
  for (index_t i = 0; i < m; ++i)
    for (index_t j = 0; j < n; ++j) {
      const auto e = static_cast<std::size_t>(i * n + j);
      double sum = c0.empty() ? 0.0 : c0[e], abs_sum = 0;
      if (bias.defined()) sum += bias.data()[j];
      for (index_t l = 0; l < k; ++l) {
        const double product = double(element(a, trans_a, i, l)) * element(b, trans_b, l, j);
        sum += product;
        abs_sum += std::fabs(product);
      }
      exact.value[e] = sum;
      exact.bound[e] = std::ldexp(abs_sum, -7) + double(k + 2) * std::ldexp(abs_sum + std::fabs(sum), -23);
    }
  return exact;
}

/// Every element of c within its bound; one assertion naming the worst element (an
/// assertion per element made this test the slowest of the suite under the sanitizers).
void check_within_bf16(const std::vector<float>& c, const ExactProduct& exact, index_t n) {
  std::size_t worst = 0;
  double worst_excess = -1;  // |got − exact| / bound
  for (std::size_t e = 0; e < c.size(); ++e) {
    const double excess = std::fabs(c[e] - exact.value[e]) / exact.bound[e];
    if (!(excess <= worst_excess)) {  // NaN becomes the worst
      worst = e;
      worst_excess = excess;
    }
  }
  INFO("worst element (" << worst / std::size_t(n) << ", " << worst % std::size_t(n) << "): " << c[worst] << " against "
                         << exact.value[worst] << ", bound " << exact.bound[worst]);
  CHECK(worst_excess <= 1);
}

/// got (computed under an AutocastGuard of bf16) within the op table's bf16 tolerance
/// of want (fp32), relative to want's largest value, and not equal to it: bf16 did run.
void check_bf16_close(const Tensorf& got, const Tensorf& want) {
  double largest = 0, error = 0;
  for (index_t i = 0; i < want.numel(); ++i) {
    largest = std::max(largest, std::fabs(double(want.data()[i])));
    error = std::max(error, std::fabs(double(got.data()[i]) - want.data()[i]));
  }
  INFO("largest error " << error << " of largest value " << largest);
  CHECK(error > 0);
  CHECK(error <= 2e-2 * largest);
}

#ifdef _OPENMP
/// Runs f with `threads` OpenMP threads, then restores the count.
template <typename F>
auto with_threads(int threads, F&& f) {
  const int saved = omp_get_max_threads();
  omp_set_num_threads(threads);
  auto result = f();
  omp_set_num_threads(saved);
  return result;
}
#else
template <typename F>
auto with_threads(int, F&& f) {
  return f();
}
#endif

}  // namespace

TEST_CASE("bf16_gemm stays within bf16's rounding of the exact product in every layout and on every path", "[ops]") {
  heed::Generator gen(41);
  const auto sets = feature_sets();
  // Rows on both sides of a tile (6) and of a chunk converted together (96); columns on
  // both sides of a vector (16), a tile (64) and a packed block (512); k on both sides of
  // a pair, of 32 values converted together and of a packed block (512).
  for (const auto& [m, n, k] : std::vector<std::array<index_t, 3>>{
           {1, 1, 1}, {7, 17, 3}, {13, 64, 16}, {97, 65, 33}, {200, 70, 515}, {6, 200, 2}, {8, 520, 530}})
    for (const bool trans_a : {false, true})
      for (const bool trans_b : {false, true}) {
        INFO("m " << m << ", n " << n << ", k " << k << ", trans_a " << trans_a << ", trans_b " << trans_b);
        const Tensorf a = trans_a ? heed::randn<float>({k, m}, gen) : heed::randn<float>({m, k}, gen);
        const Tensorf b = trans_b ? heed::randn<float>({n, k}, gen) : heed::randn<float>({k, n}, gen);
        const Tensorf bias = heed::randn<float>({n}, gen);
        const Tensorf start = heed::randn<float>({m * n}, gen);
        const std::vector<float> c0(start.data(), start.data() + m * n);
        const ExactProduct with_bias = exact_product({}, a, trans_a, b, trans_b, bias, m, n, k),
                           accumulated = exact_product(c0, a, trans_a, b, trans_b, Tensorf(), m, n, k);
        std::vector<float> first;
        for (const CpuFeatures& f : sets) {
          INFO("features " << heed::to_string(f));
          const ForcedCpuFeatures forced(f);
          std::vector<float> c(static_cast<std::size_t>(m * n), -7.0f);
          heed::detail::bf16_gemm(a.data(), trans_a, b.data(), trans_b, c.data(), m, n, k, bias.data());
          check_within_bf16(c, with_bias, n);
          std::vector<float> added = c0;
          heed::detail::bf16_gemm(a.data(), trans_a, b.data(), trans_b, added.data(), m, n, k, nullptr, true);
          check_within_bf16(added, accumulated, n);
          // vdpbf16ps's order, emulated: the same bits (the instruction alone flushes
          // denormals, which these sums do not meet).
          if (first.empty()) first = c;
          CHECK(c == first);
        }
      }
}

TEST_CASE("bf16_gemm gives the same bits on 1, 2 and 3 threads", "[ops]") {
  heed::Generator gen(42);
  const index_t m = 300, n = 200, k = 130;  // 4 panels of rows × 4 tiles of columns
  const Tensorf a = heed::randn<float>({k, m}, gen), b = heed::randn<float>({k, n}, gen);
  const auto product = [&] {
    std::vector<float> c(static_cast<std::size_t>(m * n));
    heed::detail::bf16_gemm(a.data(), true, b.data(), false, c.data(), m, n, k);
    return c;
  };
  const auto one = with_threads(1, product);
  CHECK(with_threads(2, product) == one);
  CHECK(with_threads(3, product) == one);
}

TEST_CASE("Bf16PackedB's products give bf16_gemm's bits, from floats or converted rows, at any panel", "[ops]") {
  using heed::detail::Bf16PackedB;
  using heed::detail::Bf16Rows;
  if (!Bf16PackedB::available(1)) {
    WARN("this CPU lacks avx512_bf16: Bf16PackedB is not tested (CI's machines have it)");
    CHECK_THROWS_AS(Bf16PackedB(nullptr, false, 1, 1), heed::ValueError);
    return;
  }
  heed::Generator gen(45);
  // Rows past a tile (6) and a converted chunk (96), columns past a vector and a panel,
  // k odd, even and a whole block (kBf16Depth).
  for (const auto& shape :
       std::vector<std::array<index_t, 3>>{{1, 1, 1}, {7, 17, 33}, {100, 150, 64}, {13, 200, 129}, {97, 70, 512}})
    for (const bool trans_a : {false, true})
      for (const bool trans_b : {false, true}) {
        const index_t m = shape[0], n = shape[1], k = shape[2];  // named, for the lambda below
        INFO("m " << m << ", n " << n << ", k " << k << ", trans_a " << trans_a << ", trans_b " << trans_b);
        const Tensorf a = trans_a ? heed::randn<float>({k, m}, gen) : heed::randn<float>({m, k}, gen);
        const Tensorf b = trans_b ? heed::randn<float>({n, k}, gen) : heed::randn<float>({k, n}, gen);
        const Tensorf bias = heed::randn<float>({n}, gen), start = heed::randn<float>({m * n}, gen);
        std::vector<float> want(static_cast<std::size_t>(m * n)), want_added(start.data(), start.data() + m * n);
        heed::detail::bf16_gemm(a.data(), trans_a, b.data(), trans_b, want.data(), m, n, k, bias.data());
        heed::detail::bf16_gemm(a.data(), trans_a, b.data(), trans_b, want_added.data(), m, n, k, nullptr, true);
        const Bf16PackedB packed(b.data(), trans_b, k, n);
        const Bf16Rows rows = trans_a ? Bf16Rows() : Bf16Rows(a.data(), m, k);
        for (index_t j0 = 0; j0 < n; j0 += heed::detail::kFp32Panel) {
          const index_t cols = j0 == 0 ? n : n - j0;  // all columns, or from a later panel on
          INFO("columns from " << j0);
          const auto want_of = [&](const std::vector<float>& whole) {
            std::vector<float> part;
            for (index_t i = 0; i < m; ++i)
              part.insert(part.end(), whole.begin() + i * n + j0, whole.begin() + i * n + n);
            return part;
          };
          std::vector<float> c(static_cast<std::size_t>(m * cols), -7.0f),
              added = want_of(std::vector<float>(start.data(), start.data() + m * n));
          packed.multiply(a.data(), trans_a, m, j0, cols, c.data(), cols, bias.data() + j0);
          packed.multiply(a.data(), trans_a, m, j0, cols, added.data(), cols, nullptr, true);
          CHECK(c == want_of(want));
          CHECK(added == want_of(want_added));
          if (!trans_a) {
            std::vector<float> from_rows(c.size(), -7.0f);
            packed.multiply_rows(rows.row(0), m, j0, cols, from_rows.data(), cols, bias.data() + j0);
            CHECK(from_rows == c);
          }
        }
      }
  const Tensorf b = heed::randn<float>({520, 70}, gen);
  CHECK_ERROR(heed::ValueError, "Bf16PackedB: cannot pack 520 × 70 here (AVX512_BF16 and 0 < k ≤ 512 needed)",
              Bf16PackedB(b.data(), false, 520, 70));
  const Bf16PackedB packed(b.data(), false, 70, 520);
  std::vector<float> c(520);
  CHECK_ERROR(heed::ValueError, "Bf16PackedB::multiply: columns [32, 552) of 520 packed (1 rows)",
              packed.multiply(b.data(), false, 1, 32, 520, c.data(), 520));
  const ForcedCpuFeatures portable(CpuFeatures{});
  CHECK(!Bf16PackedB::available(16));
}

TEST_CASE("The fused linear cross entropy under AutocastGuard(bf16) gives the portable path's bits", "[ops]") {
  // Its products run from x and the weight packed once (Bf16PackedB); forced onto the
  // portable path they run through bf16_gemm_portable, the same chains. 221 counted rows
  // (two row blocks of kRowTile), 300 classes (two tiles), an odd in_features.
  heed::Generator gen(46);
  const Tensorf hidden0 = heed::randn<float>({40, 9, 33}, gen), weight0 = heed::randn<float>({300, 33}, gen),
                bias0 = heed::randn<float>({300}, gen);
  heed::IndexTensor label = heed::detail::make_tensor<std::int64_t>(heed::Shape{40, 9});
  for (index_t i = 0; i < label.numel(); ++i) label.data()[i] = (i * 131) % 300;
  heed::IndexTensor valid = heed::detail::make_tensor<std::int64_t>(heed::Shape{40});
  for (index_t b = 0; b < 40; ++b) valid.data()[b] = 1 + (b * 7) % 9;
  struct Result {
    Tensorf loss, no_grad, dx, dw, db, dx_uneven;
  };
  const auto run = [&](Precision precision) {
    const AutocastGuard autocast(precision);
    Tensorf hidden = hidden0.clone(), weight = weight0.clone(), bias = bias0.clone();
    for (Tensorf* t : {&hidden, &weight, &bias}) t->requires_grad_(true);
    Result r;
    r.loss = heed::masked_linear_ce_loss(hidden, weight, bias, label, valid);
    heed::sum(r.loss).backward();  // the gradient formed with the forward
    r.dx = hidden.grad(), r.dw = weight.grad(), r.db = bias.grad();
    hidden.zero_grad();
    Tensorf uneven = heed::arange<float>(0, 40);  // the logits again, in the backward
    heed::masked_linear_ce_loss(hidden, weight, bias, label, valid).backward(uneven);
    r.dx_uneven = hidden.grad();
    const heed::NoGradGuard no_grad;
    r.no_grad = heed::masked_linear_ce_loss(hidden, weight, bias, label, valid);
    return r;
  };
  const Result fp32 = run(Precision::fp32), bf16 = run(Precision::bf16);
  check_bf16_close(bf16.loss, fp32.loss);
  check_bf16_close(bf16.dx, fp32.dx);
  check_bf16_close(bf16.dw, fp32.dw);
  check_bf16_close(bf16.dx_uneven, fp32.dx_uneven);
  Result portable;
  {
    const ForcedCpuFeatures forced(CpuFeatures{});
    portable = run(Precision::bf16);
  }
  CHECK(heed_test::same_bits(bf16.loss, portable.loss));
  CHECK(heed_test::same_bits(bf16.no_grad, portable.no_grad));
  CHECK(heed_test::same_bits(bf16.no_grad, bf16.loss));
  CHECK(heed_test::same_bits(bf16.dx, portable.dx));
  CHECK(heed_test::same_bits(bf16.dw, portable.dw));
  CHECK(heed_test::same_bits(bf16.db, portable.db));
  CHECK(heed_test::same_bits(bf16.dx_uneven, portable.dx_uneven));
}

TEST_CASE("AutocastGuard runs linear and matmul in bf16, forward and backward, and restores fp32", "[ops]") {
  heed::Generator gen(43);
  const Tensorf x0 = heed::randn<float>({2, 40, 96}, gen), w0 = heed::randn<float>({80, 96}, gen),
                b0 = heed::randn<float>({80}, gen), y0 = heed::randn<float>({2, 80, 24}, gen);
  struct Result {
    Tensorf out, dx, dw, db, dy;
  };
  const auto run = [&](Precision precision) {
    const AutocastGuard autocast(precision);
    Tensorf x = x0.clone(), w = w0.clone(), b = b0.clone(), y = y0.clone();
    for (Tensorf* t : {&x, &w, &b, &y}) t->requires_grad_(true);
    Tensorf out = heed::matmul(heed::linear(x, w, b), y);  // (2, 40, 24): a batched product
    heed::sum(out * out).backward();
    return Result{out.detach(), x.grad(), w.grad(), b.grad(), y.grad()};
  };
  const Result fp32 = run(Precision::fp32), bf16 = run(Precision::bf16);
  CHECK(AutocastGuard::current() == Precision::fp32);
  check_bf16_close(bf16.out, fp32.out);
  check_bf16_close(bf16.dx, fp32.dx);
  check_bf16_close(bf16.dw, fp32.dw);
  check_bf16_close(bf16.db, fp32.db);
  check_bf16_close(bf16.dy, fp32.dy);
  // The same bits on 1 and 3 threads: the guard reaches the threads of the batched products.
  const auto out_on = [&](int threads) { return with_threads(threads, [&] { return run(Precision::bf16); }); };
  const Result one = out_on(1), three = out_on(3);
  CHECK(heed_test::same_bits(one.out, three.out));
  CHECK(heed_test::same_bits(one.dw, three.dw));
}

TEST_CASE("AutocastGuard refuses int8, keeps small products in fp32 and nests", "[ops]") {
  CHECK_THROWS_WITH(AutocastGuard(Precision::int8), Contains("int8 is for decoding only"));
  heed::Generator gen(44);
  const Tensorf x = heed::randn<float>({4, 8}, gen), w = heed::randn<float>({8, 8}, gen);
  const Tensorf exact = heed::linear(x, w);
  const AutocastGuard outer(Precision::bf16);
  CHECK(heed_test::same_bits(heed::linear(x, w), exact));  // 256 multiply-adds: fp32
  {
    const AutocastGuard inner(Precision::fp32);
    CHECK(AutocastGuard::current() == Precision::fp32);
  }
  CHECK(AutocastGuard::current() == Precision::bf16);
}
