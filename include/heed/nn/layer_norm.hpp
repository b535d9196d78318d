// heed/nn/layer_norm.hpp — LayerNorm as torch.nn.LayerNorm.
//
//   heed::LayerNorm<float> ln({3, 4});   // normalise over the last two dims
//   auto y = ln(x);                                 // x: (..., 3, 4) -> same shape
//
// weight starts at ones and bias at zeros (PyTorch's init); eps is 1e-5.
#pragma once

#include "heed/detail/header_begin.hpp"

#include <initializer_list>
#include <string>

#include "heed/core/factory.hpp"
#include "heed/nn/module.hpp"
#include "heed/ops/layer_norm.hpp"

namespace heed {

template <typename T>
class LayerNorm : public Module<T> {
 public:
  explicit LayerNorm(Shape normalized_shape, double eps = 1e-5, bool elementwise_affine = true)
      : Module<T>("LayerNorm"), normalized_shape_(std::move(normalized_shape)), eps_(eps) {
    HEED_CHECK(normalized_shape_.rank() >= 1 && normalized_shape_.numel() > 0, ValueError,
               "LayerNorm: normalized_shape must be non-empty with positive sizes, got ", to_string(normalized_shape_));
    HEED_CHECK(eps > 0, ValueError, "LayerNorm: eps must be positive, got ", eps);
    if (elementwise_affine) {
      weight = ones<T>(normalized_shape_);
      bias = zeros<T>(normalized_shape_);
      this->register_parameter("weight", weight);
      this->register_parameter("bias", bias);
    }
  }
  /// LayerNorm({3, 4}): a braced shape (beside LayerNorm(2), which would otherwise make it ambiguous).
  explicit LayerNorm(std::initializer_list<index_t> normalized_shape, double eps = 1e-5, bool elementwise_affine = true)
      : LayerNorm(Shape(normalized_shape), eps, elementwise_affine) {}
  explicit LayerNorm(index_t normalized_size, double eps = 1e-5, bool elementwise_affine = true)
      : LayerNorm(Shape{normalized_size}, eps, elementwise_affine) {}

  // x: (..., *normalized_shape) -> same shape
  Tensor<T> forward(const Tensor<T>& x) const {
    detail::layer_norm_rows(x.shape(), normalized_shape_, "LayerNorm");
    return layer_norm(x, normalized_shape_, weight, bias, eps_);
  }
  Tensor<T> operator()(const Tensor<T>& x) const { return forward(x); }

  const Shape& normalized_shape() const { return normalized_shape_; }
  std::string extra_repr() const override {
    // As a Python tuple: (2,) and (3, 4).
    std::string dims;
    for (int d = 0; d < normalized_shape_.rank(); ++d) dims += detail::concat(d ? ", " : "", normalized_shape_[d]);
    if (normalized_shape_.rank() == 1) dims += ",";
    return detail::concat("(", dims, "), eps=", eps_ == 1e-5 ? std::string("1e-05") : detail::concat(eps_),
                          ", elementwise_affine=", weight.defined() ? "True" : "False");
  }

  Tensor<T> weight;  // normalized_shape; undefined without elementwise_affine
  Tensor<T> bias;    // normalized_shape; undefined without elementwise_affine

 private:
  Shape normalized_shape_;
  double eps_;
};

}  // namespace heed

#include "heed/detail/header_end.hpp"
