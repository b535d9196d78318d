// matmul with transpose flags (heed/ops/matmul.hpp) against matmul of transposed
// copies, by gradcheck, and its operand checks.
#include "nn_common.hpp"

// ---- matmul with transposed operands -------------------------------------------------------------

namespace {

/// The operand as stored: (…, rows, cols), or (…, cols, rows) when it is to be transposed.
Tensord operand(heed::Shape shape, bool transposed, std::uint64_t seed) {
  if (transposed) std::swap(shape[-1], shape[-2]);
  return leaf(shape, seed);
}

Tensord op(const Tensord& x, bool transposed) { return transposed ? x.transpose(-2, -1) : x; }

}  // namespace

TEST_CASE("matmul with transpose flags equals matmul of transposed copies", "[ops]") {
  struct Case {
    heed::Shape a, b, out;  // logical op(a), op(b) shapes
  };
  const std::vector<Case> cases = {
      {{3, 4}, {4, 5}, {3, 5}},
      {{2, 3, 4}, {2, 4, 5}, {2, 3, 5}},
      {{2, 1, 3, 4}, {3, 4, 2}, {2, 3, 3, 2}},  // 4-D against 3-D, batch dims broadcast
      {{3, 4}, {2, 4, 5}, {2, 3, 5}},
      {{2, 3, 4}, {2, 1, 4, 5}, {2, 2, 3, 5}},
  };
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      for (std::size_t c = 0; c < cases.size(); ++c) {
        INFO("transpose_a " << ta << ", transpose_b " << tb << ", case " << c);
        const Tensord a = operand(cases[c].a, ta, 100 + c), b = operand(cases[c].b, tb, 200 + c);
        const Tensord got = heed::matmul(a, b, ta, tb);
        const Tensord expected = heed::matmul(op(a, ta), op(b, tb));
        REQUIRE(got.shape() == cases[c].out);
        check_close(got, expected, 1e-12);
      }

  // A small product by hand: Aᵀ Bᵀ with A (2, 2), B (2, 2).
  const auto a = heed::tensor<double>({{1, 2}, {3, 4}});
  const auto b = heed::tensor<double>({{5, 6}, {7, 8}});
  check_values(heed::matmul(a, b, false, false), {19, 22, 43, 50});
  check_values(heed::matmul(a, b, true, false), {26, 30, 38, 44});
  check_values(heed::matmul(a, b, false, true), {17, 23, 39, 53});
  check_values(heed::matmul(a, b, true, true), {23, 31, 34, 46});
}

TEST_CASE("gradcheck of matmul with transpose flags", "[ops]") {
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      INFO("transpose_a " << ta << ", transpose_b " << tb);
      const Fn f = [ta, tb](const Inputs& in) { return heed::matmul(in[0], in[1], ta, tb); };
      CHECK_GRADIENTS(f, {operand({3, 4}, ta, 1), operand({4, 2}, tb, 2)});
      CHECK_GRADIENTS(f, {operand({2, 3, 4}, ta, 3), operand({2, 4, 2}, tb, 4)});
      CHECK_GRADIENTS(f, {operand({2, 1, 3, 4}, ta, 5), operand({3, 4, 2}, tb, 6)});
      CHECK_GRADIENTS(f, {operand({2, 3, 4}, ta, 7), operand({2, 1, 4, 2}, tb, 8)});
      CHECK_GRADIENTS(f, {operand({3, 4}, ta, 9), operand({2, 4, 2}, tb, 10)});
    }
}

TEST_CASE("matmul with transpose flags checks its operands", "[ops]") {
  const auto a = heed::zeros<float>({3, 4});
  CHECK_ERROR(heed::ShapeError, "matmul: transposed operands need at least 2 dims",
              heed::matmul(a, heed::zeros<float>({4}), false, false));
  CHECK_ERROR(heed::ShapeError, "matmul: inner dims differ", heed::matmul(a, heed::zeros<float>({3, 5}), false, false));
  CHECK(heed::matmul(a, heed::zeros<float>({3, 5}), true, false).shape() == heed::Shape{4, 5});
  CHECK_ERROR(heed::ShapeError, "matmul: inner dims differ", heed::matmul(a, a, false, false));
  CHECK(heed::matmul(a, a, false, true).shape() == heed::Shape{3, 3});
  CHECK(heed::matmul(a, a, true, false).shape() == heed::Shape{4, 4});
  CHECK_ERROR(heed::ShapeError, "matmul: batch dims",
              heed::matmul(heed::zeros<float>({2, 3, 4}), heed::zeros<float>({3, 4, 5}), false, false));
}
