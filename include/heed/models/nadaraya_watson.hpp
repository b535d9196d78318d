// heed/models/nadaraya_watson.hpp — Nadaraya-Watson kernel regression (d2l 10.2).
//
// Attention pooling in its simplest form: the prediction at a query x is the average
// of the training targets y_i weighted by softmax_i(−(x − x_i)² / 2), a Gaussian kernel.
// The parametric form learns a bandwidth w: softmax_i(−((x − x_i) w)² / 2).
//
//   heed::Generator gen(0);
//   auto data = heed::nadaraya_watson_data<float>(gen);   // d2l's 50 noisy samples
//   auto [y_hat, weights] = heed::nadaraya_watson(data.x_test, data.x_train, data.y_train);
#pragma once

#include "heed/detail/header_begin.hpp"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include "heed/core/factory.hpp"
#include "heed/nn/module.hpp"
#include "heed/ops/matmul.hpp"
#include "heed/ops/softmax.hpp"

namespace heed {

/// d2l's regression data: sorted uniform inputs on [0, 5), y = 2 sin x + x^0.8 + N(0, 0.5²),
/// test inputs 0, 0.1, …, 4.9 and the noise-free truth there.
template <typename T>
struct NadarayaWatsonData {
  Tensor<T> x_train, y_train;  // (n_train)
  Tensor<T> x_test, y_truth;   // (n_test)

  static T f(T x) { return T(2) * std::sin(x) + std::pow(x, T(0.8)); }
};

template <typename T>
NadarayaWatsonData<T> nadaraya_watson_data(Generator& gen, index_t n_train = 50) {
  HEED_CHECK(n_train > 1, ValueError, "nadaraya_watson_data: n_train must be at least 2, got ", n_train);
  NadarayaWatsonData<T> data;
  data.x_train = rand<T>({n_train}, gen) * T(5);
  std::sort(data.x_train.data(), data.x_train.data() + n_train);
  const Tensor<T> noise = normal<T>(T(0), T(0.5), {n_train}, gen);
  data.y_train = Tensor<T>::empty({n_train});
  for (index_t i = 0; i < n_train; ++i)
    data.y_train.data()[i] = NadarayaWatsonData<T>::f(data.x_train.data()[i]) + noise.data()[i];
  data.x_test = arange<T>(0.0, 5.0, 0.1);
  data.y_truth = Tensor<T>::empty(data.x_test.shape());
  for (index_t i = 0; i < data.x_test.numel(); ++i)
    data.y_truth.data()[i] = NadarayaWatsonData<T>::f(data.x_test.data()[i]);
  return data;
}

/// Row i of the result is x without its element i: (n) -> (n, n − 1). d2l's keys and
/// values for training, where each training input attends to all the others.
template <typename T>
Tensor<T> leave_one_out(const Tensor<T>& x) {
  HEED_CHECK(x.dim() == 1 && x.numel() > 1, ShapeError,
             "leave_one_out: expected a 1-D tensor of at least 2 elements, got ", to_string(x.shape()));
  const index_t n = x.numel();
  Tensor<T> out = Tensor<T>::empty({n, n - 1});
  for (index_t i = 0; i < n; ++i)
    for (index_t j = 0, k = 0; j < n; ++j)
      if (j != i) out.data()[i * (n - 1) + k++] = x.data()[j];
  return out;
}

namespace detail {

/// queries (n) against keys (n, m) or (m): (n, m) differences query − key.
template <typename T>
Tensor<T> query_minus_keys(const Tensor<T>& queries, const Tensor<T>& keys, const char* op) {
  HEED_CHECK(queries.dim() == 1 && (keys.dim() == 1 || (keys.dim() == 2 && keys.shape()[0] == queries.numel())),
             ShapeError, op, ": expected queries (n) and keys (n, m) or (m), got ", to_string(queries.shape()), " and ",
             to_string(keys.shape()));
  return queries.unsqueeze(1) - keys;
}

}  // namespace detail

/// Non-parametric Nadaraya-Watson: queries (n), keys and values (m) → (predictions (n),
/// attention_weights (n, m)).
template <typename T>
std::pair<Tensor<T>, Tensor<T>> nadaraya_watson(const Tensor<T>& queries, const Tensor<T>& keys,
                                                const Tensor<T>& values) {
  HEED_CHECK(keys.dim() == 1 && values.shape() == keys.shape(), ShapeError,
             "nadaraya_watson: keys and values must be 1-D of one length, got ", to_string(keys.shape()), " and ",
             to_string(values.shape()));
  const Tensor<T> diff = detail::query_minus_keys(queries, keys, "nadaraya_watson");
  Tensor<T> weights = softmax(diff * diff * T(-0.5), 1);
  return {matmul(weights, values), weights};
}

/// Parametric Nadaraya-Watson with a learnable bandwidth `w` (d2l's NWKernelRegression).
template <typename T>
class NWKernelRegression : public Module<T> {
 public:
  explicit NWKernelRegression(Generator& gen = default_generator())
      : Module<T>("NWKernelRegression"), w(rand<T>({1}, gen)) {
    this->register_parameter("w", w);
  }

  // queries: (n); keys, values: (n, m), each query's own keys -> (n)
  Tensor<T> forward(const Tensor<T>& queries, const Tensor<T>& keys, const Tensor<T>& values) {
    HEED_CHECK(keys.dim() == 2 && values.shape() == keys.shape(), ShapeError,
               "NWKernelRegression: keys and values must be (n, m) of one shape, got ", to_string(keys.shape()),
               " and ", to_string(values.shape()));
    const Tensor<T> scaled = detail::query_minus_keys(queries, keys, "NWKernelRegression") * w;
    const Tensor<T> weights = softmax(scaled * scaled * T(-0.5), 1);
    if (detail::keeps_forward_records()) attention_weights_ = weights.detach();
    // Each row's weighted sum of its own values: bmm((n, 1, m), (n, m, 1)) in d2l.
    return (weights * values).sum(1);
  }
  Tensor<T> operator()(const Tensor<T>& queries, const Tensor<T>& keys, const Tensor<T>& values) {
    return forward(queries, keys, values);
  }

  /// The weights of the last forward, cut from the graph: (n, m).
  const Tensor<T>& attention_weights() const { return attention_weights_; }

  Tensor<T> w;  // (1), the bandwidth

 private:
  Tensor<T> attention_weights_;
};

}  // namespace heed

#include "heed/detail/header_end.hpp"
