// heed/nn/linear.hpp — Linear: y = x Wᵀ + b, as torch.nn.Linear.
//
//   heed::Linear<float> fc(20, 8, /*bias=*/false);
//   auto y = fc(x);   // x: (..., 20) -> y: (..., 8)
//
// weight is (out_features, in_features) and bias (out_features), PyTorch's layout and
// initialisation: both uniform in ±1/√in_features.
#pragma once

#include "heed/detail/header_begin.hpp"

#include <cmath>
#include <memory>
#include <string>
#include <type_traits>

#include "heed/core/factory.hpp"
#include "heed/nn/module.hpp"
#include "heed/ops/linear.hpp"

namespace heed {

template <typename T>
class Linear : public Module<T> {
 public:
  Linear(index_t in_features, index_t out_features, bool use_bias = true, Generator& gen = default_generator())
      : Module<T>("Linear"), in_features_(in_features), out_features_(out_features) {
    HEED_CHECK(in_features > 0 && out_features > 0, ValueError,
               "Linear: in_features and out_features must be positive, got ", in_features, " and ", out_features);
    // The weight's size first: named after Linear rather than the uniform that fills it.
    (void)detail::buffer_size<T>(Shape{out_features, in_features}, "Linear");
    const T bound = T(1) / static_cast<T>(std::sqrt(static_cast<double>(in_features)));
    const bool draw = !detail::skips_init();  // not for a net about to be loaded
    weight = draw ? uniform<T>({out_features, in_features}, -bound, bound, gen)
                  : detail::make_tensor<T>({out_features, in_features}, Device::cpu(), "Linear");
    this->register_parameter("weight", weight);
    this->register_convertible("weight", converted_weight);
    if (use_bias) {
      this->bias = draw ? uniform<T>({out_features}, -bound, bound, gen)
                        : detail::make_tensor<T>({out_features}, Device::cpu(), "Linear");
      this->register_parameter("bias", this->bias);
    }
  }

  // x: (..., in_features) -> (..., out_features)
  Tensor<T> forward(const Tensor<T>& x) const {
    if constexpr (std::is_same_v<T, float>)
      if (converted_weight) return linear(x, *converted_weight, bias);
    return linear(x, weight, bias);
  }
  Tensor<T> operator()(const Tensor<T>& x) const { return forward(x); }

  index_t in_features() const { return in_features_; }
  index_t out_features() const { return out_features_; }
  std::string extra_repr() const override {
    return detail::concat("in_features=", in_features_, ", out_features=", out_features_,
                          ", bias=", bias.defined() ? "True" : "False",
                          converted_weight ? std::string(", weight=") + to_string(converted_weight->precision()) : "");
  }

  Tensor<T> weight;  // (out_features, in_features); undefined once converted
  Tensor<T> bias;    // (out_features), undefined when built with bias = false
  // The weight in bf16 or int8 for inference (heed/nn/convert_weights.hpp); null in fp32.
  std::shared_ptr<const detail::LowPrecisionWeight> converted_weight;

 private:
  index_t in_features_, out_features_;
};

}  // namespace heed

#include "heed/detail/header_end.hpp"
