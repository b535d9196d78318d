// heed/autograd/gradcheck.hpp — checks backward() against central finite differences.
//
//   auto x = heed::randn<double>({3, 4}, gen).requires_grad_();
//   auto result = heed::gradcheck([](const std::vector<heed::Tensord>& in) { return heed::tanh(in[0]); }, {x});
//   if (!result) std::cerr << result.message;
//
// The output y = f(inputs) is projected on a fixed random tensor v of its shape;
// y.backward(v) gives the analytical d(v·y)/d input, and each element of each input
// that requires grad is nudged by ±eps to get the numerical one. An element passes
// when |analytical − numerical| ≤ atol + rtol·|numerical|. Use double: in float the
// finite differences themselves are too coarse.
#pragma once

#include "heed/detail/header_begin.hpp"

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "heed/autograd/engine.hpp"
#include "heed/core/factory.hpp"

namespace heed {

struct GradcheckResult {
  bool ok = true;
  double max_error = 0.0;  // largest |analytical − numerical| seen
  std::string message;     // the first failing element, or a summary
  explicit operator bool() const { return ok; }
};

struct GradcheckOptions {
  double eps = 1e-6;
  double atol = 1e-5;
  double rtol = 1e-3;
  std::uint64_t seed = 0;  // for the projection v
};

template <typename T, typename F>
GradcheckResult gradcheck(F&& f, const std::vector<Tensor<T>>& inputs, const GradcheckOptions& options = {}) {
  static_assert(std::is_floating_point_v<T>, "gradcheck needs floating-point inputs (use double)");
  GradcheckResult result;
  for (Tensor<T> input : inputs) {  // handles: zero_grad acts on the caller's tensors
    HEED_CHECK(input.defined() && input.is_leaf(), ValueError, "gradcheck: inputs must be defined leaf tensors");
    input.zero_grad();
  }
  Generator gen(options.seed);
  const Tensor<T> output = f(inputs);
  HEED_CHECK(output.requires_grad(), ValueError,
             "gradcheck: the output does not require grad (mark an input with requires_grad_())");
  const Tensor<T> projection = randn<T>(output.shape(), gen);
  output.backward(projection);

  // v · f(inputs), evaluated without recording.
  auto projected = [&]() {
    NoGradGuard no_grad;
    const Tensor<T> y = f(inputs);
    HEED_CHECK(y.shape() == output.shape(), ShapeError, "gradcheck: f changed its output shape from ",
               to_string(output.shape()), " to ", to_string(y.shape()));
    return (y.array().template cast<double>() * projection.array().template cast<double>()).sum();
  };

  for (std::size_t i = 0; i < inputs.size(); ++i) {
    Tensor<T> input = inputs[i];
    if (!input.requires_grad()) continue;
    const Tensor<T> analytical = input.grad();
    T* data = input.data();  // nudged in place, bypassing autograd's in-place checks
    for (index_t j = 0; j < input.numel(); ++j) {
      const T saved = data[j];
      data[j] = static_cast<T>(saved + options.eps);
      const double plus = projected();
      data[j] = static_cast<T>(saved - options.eps);
      const double minus = projected();
      data[j] = saved;
      const double numerical = (plus - minus) / (2 * options.eps);
      const double got = analytical.defined() ? static_cast<double>(analytical.data()[j]) : 0.0;
      const double error = std::fabs(got - numerical);
      result.max_error = std::max(result.max_error, error);
      if (result.ok && !(error <= options.atol + options.rtol * std::fabs(numerical))) {
        result.ok = false;
        result.message = detail::concat("gradcheck: input ", i, " (shape ", to_string(input.shape()), ") element ", j,
                                        ": analytical ", got, " vs numerical ", numerical);
      }
    }
  }
  if (result.ok) result.message = detail::concat("gradcheck: ok, max error ", result.max_error);
  return result;
}

/// gradcheck(f, {x, w}): the same with the inputs listed in braces.
template <typename T, typename F>
GradcheckResult gradcheck(F&& f, std::initializer_list<Tensor<T>> inputs, const GradcheckOptions& options = {}) {
  return gradcheck(std::forward<F>(f), std::vector<Tensor<T>>(inputs), options);
}

}  // namespace heed

#include "heed/detail/header_end.hpp"
