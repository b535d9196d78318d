// x Wᵀ + b in bf16 and int8 (heed/ops/quantized_gemm.hpp), through every path this CPU
// can take (heed/ops/cpu_features.hpp), and linear() inside a bf16 or int8
// PackedWeightsGuard.
#include "nn_common.hpp"

#include <heed/io/half.hpp>
#include <heed/ops/linear.hpp>

#include "cpu_paths.hpp"

namespace {

using heed::CpuFeatures;
using heed::Precision;
using heed::detail::LowPrecisionWeight;
using heed_test::feature_sets;
using heed_test::ForcedCpuFeatures;

std::vector<float> apply(const LowPrecisionWeight& w, const Tensorf& x, const float* bias) {
  std::vector<float> out(static_cast<std::size_t>(x.shape()[0] * w.out_features()));
  w.apply(x.data(), x.shape()[0], bias, out.data());
  return out;
}

/// |y − x Wᵀ − b| within the error the precision's rounding allows, element by element:
/// int8 rounds x and W to half a step of max|row| / 127 each; bf16 each operand to 2⁻⁸
/// of itself; both add fp32 accumulation over k.
void check_within_rounding(const std::vector<float>& y, const Tensorf& x, const Tensorf& w, const Tensorf& b,
                           Precision precision) {
  const index_t rows = x.shape()[0], out = w.shape()[0], in = w.shape()[1];
  for (index_t r = 0; r < rows; ++r) {
    double x_max = 0;
    for (index_t k = 0; k < in; ++k) x_max = std::max(x_max, std::fabs(double(x.data()[r * in + k])));
    for (index_t n = 0; n < out; ++n) {
      double exact = b.defined() ? b.data()[n] : 0.0, abs_sum = 0, w_abs = 0, x_abs = 0, w_max = 0;
      for (index_t k = 0; k < in; ++k) {
        const double xk = x.data()[r * in + k], wk = w.data()[n * in + k];
        exact += xk * wk;
        abs_sum += std::fabs(xk * wk);
        w_abs += std::fabs(wk);
        x_abs += std::fabs(xk);
        w_max = std::max(w_max, std::fabs(wk));
      }
      const double rounding = precision == Precision::int8
                                  ? x_max / 254 * w_abs + w_max / 254 * (x_abs + double(in) * x_max / 254)
                                  : std::ldexp(abs_sum, -7);
      const double bound = 1.01 * rounding + double(in + 2) * std::ldexp(abs_sum + std::fabs(exact), -23) + 1e-30;
      const double got = y[static_cast<std::size_t>(r * out + n)];
      INFO("row " << r << ", feature " << n << ": " << got << " against " << exact << ", bound " << bound);
      CHECK(std::fabs(got - exact) <= bound);
    }
  }
}

}  // namespace

TEST_CASE("int8 and bf16 products stay within their rounding of fp32 on every path, int8's paths bit for bit",
          "[ops]") {
  heed::Generator gen(31);
  const auto sets = feature_sets();
  // Rows on both sides of a tile (6), features on both sides of a vector (16) and of a
  // tile (64), in_features on both sides of a group of k (2 and 4).
  for (const index_t rows : {index_t(1), index_t(5), index_t(6), index_t(7), index_t(13)})
    for (const index_t out : {index_t(1), index_t(16), index_t(17), index_t(64), index_t(130)})
      for (const index_t in : {index_t(1), index_t(3), index_t(5), index_t(64), index_t(515)}) {
        INFO("rows " << rows << ", out " << out << ", in " << in);
        const Tensorf x = heed::randn<float>({rows, in}, gen), w = heed::randn<float>({out, in}, gen),
                      b = heed::randn<float>({out}, gen);
        for (const Precision precision : {Precision::int8, Precision::bf16}) {
          INFO(heed::to_string(precision));
          const LowPrecisionWeight converted(w.data(), out, in, precision);
          std::vector<float> first, first_no_bias;
          for (const CpuFeatures& f : sets) {
            INFO("features " << heed::to_string(f));
            const ForcedCpuFeatures forced(f);
            const auto y = apply(converted, x, b.data()), y_no_bias = apply(converted, x, nullptr);
            check_within_rounding(y, x, w, b, precision);
            check_within_rounding(y_no_bias, x, w, Tensorf(), precision);
            if (first.empty()) {
              first = y;
              first_no_bias = y_no_bias;
            } else if (precision == Precision::int8) {
              CHECK(y == first);  // exact int32 sums, the same fp32 epilogue
              CHECK(y_no_bias == first_no_bias);
            } else {
              // vdpbf16ps's order, emulated; the instruction alone flushes denormals.
              for (std::size_t i = 0; i < y.size(); ++i) CHECK(y[i] == Approx(first[i]).margin(1e-5));
            }
          }
        }
      }
}

TEST_CASE("int8 and bf16 products give NaN for a row that is not finite and the bias for a zero row", "[ops]") {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  heed::Generator gen(32);
  const Tensorf w = heed::randn<float>({20, 8}, gen), b = heed::randn<float>({20}, gen);
  Tensorf x = heed::randn<float>({4, 8}, gen);
  for (index_t k = 0; k < 8; ++k) x.data()[8 + k] = 0.0f;  // row 1: zeros
  x.data()[2 * 8 + 3] = nan;                               // row 2: a NaN
  x.data()[3 * 8 + 5] = inf;                               // row 3: an infinity
  for (const CpuFeatures& f : feature_sets()) {
    const ForcedCpuFeatures forced(f);
    for (const Precision precision : {Precision::int8, Precision::bf16}) {
      INFO(heed::to_string(precision) << ", features " << heed::to_string(f));
      const auto y = apply(LowPrecisionWeight(w.data(), 20, 8, precision), x, b.data());
      for (index_t n = 0; n < 20; ++n) {
        CHECK(std::isfinite(y[static_cast<std::size_t>(n)]));
        CHECK(y[static_cast<std::size_t>(20 + n)] == b.data()[n]);
        CHECK(std::isnan(y[static_cast<std::size_t>(40 + n)]));
        CHECK(!std::isfinite(y[static_cast<std::size_t>(60 + n)]));  // int8: NaN; bf16: ±inf or NaN
      }
    }
  }
}

TEST_CASE("int8 quantises each weight row to 127 steps of its largest magnitude", "[ops]") {
  // W = [[0.5, -1, 0.25, 0], [0, 0, 0, 0]], x = [[2, 1, -4, 0.5]]: the weight's rows
  // and x's are exact in 127ths of their maxima only where chosen so; here W[0] is
  // (63.5 → 64, -127, 31.75 → 32, 0) / 127, x (63.5 → 64, 31.75 → 32, -127, 15.875 → 16) · 4/127.
  const std::vector<float> w{0.5f, -1.0f, 0.25f, 0.0f, 0, 0, 0, 0}, x{2.0f, 1.0f, -4.0f, 0.5f};
  const float expected0 = float(64 * 64 + 32 * -127 + -127 * 32 + 16 * 0) * (4.0f / 127.0f * (1.0f / 127.0f));
  for (const CpuFeatures& f : feature_sets()) {
    const ForcedCpuFeatures forced(f);
    const LowPrecisionWeight converted(w.data(), 2, 4, Precision::int8);
    float y[2] = {-1, -1};
    converted.apply(x.data(), 1, nullptr, y);
    CHECK(y[0] == Approx(expected0).epsilon(1e-6));
    CHECK(y[1] == 0.0f);  // an all-zero weight row
  }
}

TEST_CASE("A weight unpacked to its stored values and packed back multiplies bit for bit as before", "[ops]") {
  // 70 rows and 37 columns: a partial tile of features and a partial k group of each width.
  const Tensorf w = heed::uniform<float>({70, 37}, -2.0f, 2.0f, heed::default_generator());
  const Tensorf x = heed::uniform<float>({5, 37}, -1.0f, 1.0f, heed::default_generator());
  const Tensorf b = heed::uniform<float>({70}, -1.0f, 1.0f, heed::default_generator());
  for (const Precision precision : {Precision::bf16, Precision::int8}) {
    INFO(heed::to_string(precision));
    const LowPrecisionWeight converted(w.data(), 70, 37, precision);
    std::vector<float> row(37), again(37);
    if (precision == Precision::int8) {
      std::vector<std::int8_t> q(70 * 37);
      std::vector<float> scale(70);
      converted.unpack_int8(q.data(), scale.data());
      CHECK_THROWS_WITH(converted.unpack_bf16(nullptr), Contains("unpack_bf16: the weight is int8"));
      for (index_t k = 0; k < 37; ++k) CHECK(std::abs(q[k] * scale[0] - w.data()[k]) <= scale[0] * 0.5001f);
      const LowPrecisionWeight back = LowPrecisionWeight::from_int8(q.data(), scale.data(), 70, 37);
      CHECK(apply(back, x, b.data()) == apply(converted, x, b.data()));
      back.row(69, again.data());
      converted.row(69, row.data());
      CHECK(again == row);
      scale[4] = -1.0f;
      CHECK_THROWS_WITH(LowPrecisionWeight::from_int8(q.data(), scale.data(), 70, 37),
                        Contains("from_int8: row 4 of (70, 37) has scale -1"));
    } else {
      std::vector<std::uint16_t> bits(70 * 37);
      converted.unpack_bf16(bits.data());
      CHECK_THROWS_WITH(converted.unpack_int8(nullptr, nullptr), Contains("unpack_int8: the weight is bf16"));
      CHECK(bits[5] == heed::detail::float_to_bf16_bits(w.data()[5]));
      const LowPrecisionWeight back = LowPrecisionWeight::from_bf16(bits.data(), 70, 37);
      CHECK(apply(back, x, b.data()) == apply(converted, x, b.data()));
      back.row(33, again.data());
      converted.row(33, row.data());
      CHECK(again == row);
    }
  }
}

TEST_CASE("LowPrecisionWeight::select_rows keeps the stored values of the rows chosen, in their order", "[ops]") {
  const Tensorf w = heed::uniform<float>({70, 37}, -2.0f, 2.0f, heed::default_generator());
  const Tensorf x = heed::uniform<float>({5, 37}, -1.0f, 1.0f, heed::default_generator());
  const std::vector<index_t> rows = {69, 0, 33, 33, 64, 7};  // repeats, across tiles
  for (const Precision precision : {Precision::bf16, Precision::int8}) {
    INFO(heed::to_string(precision));
    const LowPrecisionWeight converted(w.data(), 70, 37, precision);
    const LowPrecisionWeight some = converted.select_rows(rows);
    CHECK(some.out_features() == 6);
    CHECK(some.precision() == precision);
    const std::vector<float> all = apply(converted, x, nullptr), kept = apply(some, x, nullptr);
    std::vector<float> row(37), again(37);
    for (std::size_t i = 0; i < rows.size(); ++i) {
      converted.row(rows[i], row.data());
      some.row(static_cast<index_t>(i), again.data());
      CHECK(again == row);
      for (index_t r = 0; r < 5; ++r)
        CHECK(kept[static_cast<std::size_t>(r * 6) + i] == all[static_cast<std::size_t>(r * 70 + rows[i])]);
    }
    CHECK_THROWS_WITH(converted.select_rows({3, 70}), Contains("select_rows: row 70 of a weight of 70 rows"));
    CHECK_THROWS_AS(converted.select_rows({-1}), heed::IndexError);
  }
}

TEST_CASE("LowPrecisionWeight refuses fp32, empty weights, non-finite int8 weights and over-long int8 rows", "[ops]") {
  const std::vector<float> w{1.0f, std::numeric_limits<float>::infinity(), 0.0f, 2.0f};
  CHECK_THROWS_WITH(LowPrecisionWeight(w.data(), 2, 2, Precision::fp32), Contains("bf16 or int8, got fp32"));
  CHECK_THROWS_AS(LowPrecisionWeight(w.data(), 0, 2, Precision::int8), heed::ShapeError);
  const std::vector<float> with_nan{1.0f, 2.0f, std::numeric_limits<float>::quiet_NaN(), 0.0f};
  for (const CpuFeatures& f : feature_sets()) {
    const ForcedCpuFeatures forced(f);
    CHECK_THROWS_WITH(LowPrecisionWeight(w.data(), 2, 2, Precision::int8), Contains("row 0 of (2, 2)"));
    CHECK_THROWS_WITH(LowPrecisionWeight(with_nan.data(), 2, 2, Precision::int8), Contains("row 1 of (2, 2)"));
  }
  CHECK_NOTHROW(LowPrecisionWeight(w.data(), 2, 2, Precision::bf16));  // bf16 keeps the infinity
  CHECK_THROWS_WITH(LowPrecisionWeight(w.data(), 1, heed::detail::kMaxInt8InFeatures + 1, Precision::int8),
                    Contains("at most 65536 in_features"));
}

TEST_CASE("the kernels' bf16 rounding is heed::to_bf16's: to nearest, ties to even, NaN kept", "[ops]") {
  using heed::detail::bf16_bits_to_float;
  using heed::detail::float_to_bf16_bits;
  CHECK(bf16_bits_to_float(float_to_bf16_bits(1.0f)) == 1.0f);
  CHECK(bf16_bits_to_float(float_to_bf16_bits(1.0f + std::ldexp(1.0f, -8))) == 1.0f);  // a tie: to even
  CHECK(bf16_bits_to_float(float_to_bf16_bits(1.0f + 3 * std::ldexp(1.0f, -8))) == 1.0f + std::ldexp(1.0f, -6));
  CHECK(bf16_bits_to_float(float_to_bf16_bits(1.0f + std::ldexp(1.0f, -8) + std::ldexp(1.0f, -20))) ==
        1.0f + std::ldexp(1.0f, -7));
  CHECK(std::isnan(bf16_bits_to_float(float_to_bf16_bits(std::numeric_limits<float>::quiet_NaN()))));
  CHECK(bf16_bits_to_float(float_to_bf16_bits(-std::numeric_limits<float>::infinity())) ==
        -std::numeric_limits<float>::infinity());
  // Against the checkpoints' exact conversion (heed/io/half.hpp), over every exponent.
  heed::Generator gen(35);
  const Tensorf mantissas = heed::uniform<float>({4000}, -2.0f, 2.0f, gen);
  for (index_t i = 0; i < 4000; ++i) {
    const float value = std::ldexp(mantissas.data()[i], static_cast<int>(i % 260) - 130);
    INFO(value);
    CHECK(float_to_bf16_bits(value) == heed::to_bf16(value));
    CHECK(bf16_bits_to_float(heed::to_bf16(value)) == heed::from_bf16<float>(heed::to_bf16(value)));
  }
}

TEST_CASE("HEED_CPU_FEATURES and set_cpu_features choose within what the CPU has", "[ops]") {
  using heed::detail::parse_cpu_features;
  const CpuFeatures all{true, true, true}, avx512_only{true, false, false};
  CHECK(parse_cpu_features("", all) == all);
  CHECK(parse_cpu_features("native", all) == all);
  CHECK(parse_cpu_features("none", all) == CpuFeatures{});
  CHECK(parse_cpu_features("avx512,avx512_bf16", all) == CpuFeatures{true, false, true});
  CHECK(parse_cpu_features("avx512_vnni", all) == CpuFeatures{});  // needs avx512
  CHECK(parse_cpu_features("avx512,avx512_vnni", avx512_only) == avx512_only);
  CHECK_THROWS_WITH(parse_cpu_features("avx512,amx", all), Contains("unknown feature 'amx'"));
  CHECK_THROWS_AS(heed::set_cpu_features({false, true, false}), heed::ValueError);
  if (!heed::detected_cpu_features().avx512_bf16)
    CHECK_THROWS_WITH(heed::set_cpu_features({true, false, true}), Contains("this CPU has"));
  const CpuFeatures before = heed::cpu_features();
  {
    const ForcedCpuFeatures forced(CpuFeatures{});
    CHECK(heed::cpu_features() == CpuFeatures{});
  }
  CHECK(heed::cpu_features() == before);
}

#ifdef _OPENMP
TEST_CASE("int8 and bf16 products give the same bits on any thread count", "[ops]") {
  heed::Generator gen(33);
  const Tensorf x = heed::randn<float>({70, 300}, gen), w = heed::randn<float>({700, 300}, gen),
                b = heed::randn<float>({700}, gen);
  for (const Precision precision : {Precision::int8, Precision::bf16}) {
    const LowPrecisionWeight converted(w.data(), 700, 300, precision);
    const int threads = omp_get_max_threads();
    omp_set_num_threads(1);
    const auto one = apply(converted, x, b.data());
    omp_set_num_threads(3);
    const auto three = apply(converted, x, b.data());
    omp_set_num_threads(threads);
    CHECK(one == three);
  }
}
#endif

TEST_CASE("linear inside a bf16 or int8 PackedWeightsGuard takes the converted weight", "[ops]") {
  heed::Generator gen(34);
  Tensorf w = heed::randn<float>({40, 24}, gen).requires_grad_();
  const Tensorf x = heed::randn<float>({3, 5, 24}, gen), b = heed::randn<float>({40}, gen);
  const Tensorf x_rows = x.reshape({15, 24});
  const Tensord xd = x.to<double>(), wd = w.detach().to<double>(), expected_double = heed::linear(xd, wd);
  for (const Precision precision : {Precision::int8, Precision::bf16}) {
    INFO(heed::to_string(precision));
    heed::PackedWeightsGuard guard(precision);
    CHECK(guard.precision() == precision);
    {
      heed::NoGradGuard no_grad;
      const Tensorf y = heed::linear(x, w, b);
      CHECK(y.shape() == heed::Shape{3, 5, 40});
      CHECK(y.to_vector() == apply(LowPrecisionWeight(w.data(), 40, 24, precision), x_rows, b.data()));
      w.mul_(2.0f);  // converted anew
      CHECK(heed::linear(x, w, b).to_vector() ==
            apply(LowPrecisionWeight(w.data(), 40, 24, precision), x_rows, b.data()));
      w.mul_(0.5f);
      // Double stays in double; a nested fp32 guard multiplies in fp32 until it ends.
      check_close(heed::linear(xd, wd), expected_double, 1e-12);
      {
        heed::PackedWeightsGuard fp32;
        check_close(heed::linear(x, w, b), heed::linear(x, w.detach(), b), 1e-5);
        CHECK(fp32.precision() == Precision::fp32);
      }
      CHECK(heed::detail::current_packed_weights()->precision == precision);
    }
    // With gradients to record, linear multiplies in fp32 and records the op.
    const Tensorf y = heed::linear(x, w, b);
    CHECK(y.grad_fn_name() == "AddmmBackward");
  }
  CHECK(heed::detail::current_packed_weights() == nullptr);
}

TEST_CASE("precision names parse back and a bad one names what it was for", "[ops]") {
  for (const Precision p : {Precision::fp32, Precision::bf16, Precision::int8})
    CHECK(heed::parse_precision(heed::to_string(p)) == p);
  CHECK_THROWS_WITH(heed::parse_precision("fp16", "--precision"), Contains("--precision wants fp32, bf16 or int8"));
}
