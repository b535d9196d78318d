// Shared by the attention tests (unity_attention.cpp): golden values, d2l's inputs and a
// reference masked softmax in double with the mask contract it checks.
#pragma once

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "check.hpp"
#include "golden.hpp"

using Catch::Matchers::Contains;
using heed::AttentionMask;
using heed::BoolTensor;
using heed::index_t;
using heed::IndexTensor;
using heed::Shape;
using heed::Tensor;
using heed::Tensord;
using heed::Tensorf;
using heed_test::check_close;
using heed_test::check_golden_attention;
using heed_test::check_parameter_grads;
using heed_test::check_values;
using heed_test::leaf;
using heed_test::lens;
using heed_test::load_parameters;
using heed_test::tolerance;

namespace {

const heed_test::Golden& golden() {
  static const heed_test::Golden g("attention_golden.txt");
  return g;
}

/// The d2l listing's inputs: keys of ones, values 0..39, valid_lens [2, 6].
struct D2lInputs {
  Tensorf keys = heed::ones<float>({2, 10, 2});
  Tensorf values = heed::arange<float>(0, 40).reshape({1, 10, 4}).repeat({2, 1, 1});
  IndexTensor valid_lens = lens({2, 6}, {2});
};

// ---- a reference masked softmax in double, straight from the definition ---------------

struct Reference {
  std::vector<double> weights;  // row-major, scores' shape
  std::vector<bool> allowed;
};

/// softmax over the allowed keys of each row; `allowed(row, query, key)` and `add(i)`
/// describe the mask element-wise.
Reference reference_softmax(const Tensord& scores, const std::function<bool(index_t, index_t, index_t)>& allowed,
                            const std::function<double(index_t)>& add) {
  const index_t num_queries = scores.shape()[-2], num_keys = scores.shape()[-1];
  const index_t rows = scores.numel() / num_keys;
  Reference ref{std::vector<double>(static_cast<std::size_t>(scores.numel()), 0.0),
                std::vector<bool>(static_cast<std::size_t>(scores.numel()), false)};
  for (index_t r = 0; r < rows; ++r) {
    double max = -std::numeric_limits<double>::infinity();
    for (index_t j = 0; j < num_keys; ++j) {
      const index_t i = r * num_keys + j;
      const double s = scores.data()[i] + add(i);
      ref.allowed[static_cast<std::size_t>(i)] = allowed(r, r % num_queries, j) && s > -1e300;
      if (ref.allowed[static_cast<std::size_t>(i)]) max = std::max(max, s);
    }
    double sum = 0;
    for (index_t j = 0; j < num_keys; ++j) {
      const auto i = static_cast<std::size_t>(r * num_keys + j);
      if (ref.allowed[i]) sum += ref.weights[i] = std::exp(scores.data()[i] + add(static_cast<index_t>(i)) - max);
    }
    for (index_t j = 0; j < num_keys; ++j) ref.weights[static_cast<std::size_t>(r * num_keys + j)] /= sum > 0 ? sum : 1;
  }
  return ref;
}

/// The mask contract: values equal the reference; masked keys get weight 0 and gradient
/// 0; a fully masked row gives zeros; and backward agrees with finite differences.
void check_mask_contract(const Tensord& scores, const AttentionMask<double>& mask, const Reference& ref) {
  Tensord x = scores.clone().detach().requires_grad_();
  const Tensord weights = heed::masked_softmax(x, mask);
  check_values(weights, ref.weights, 1e-12);
  const index_t num_keys = scores.shape()[-1];
  heed::Generator gen(7);
  const Tensord g = heed::randn<double>(scores.shape(), gen);
  weights.backward(g);
  for (index_t r = 0; r < scores.numel() / num_keys; ++r) {
    bool any = false;
    double sum = 0;
    for (index_t j = 0; j < num_keys; ++j) {
      const index_t i = r * num_keys + j;
      any = any || ref.allowed[static_cast<std::size_t>(i)];
      sum += weights.data()[i];
      if (!ref.allowed[static_cast<std::size_t>(i)]) {
        INFO("row " << r << ", key " << j);
        CHECK(weights.data()[i] == 0.0);
        CHECK(x.grad().data()[i] == 0.0);
      }
    }
    INFO("row " << r);
    CHECK(sum == Approx(any ? 1.0 : 0.0).margin(1e-12));
  }
  const auto result =
      heed::gradcheck([&](const std::vector<Tensord>& in) { return heed::masked_softmax(in[0], mask); }, {x});
  INFO(result.message);
  CHECK(result.ok);
}

}  // namespace
