// heed/ops/linear.hpp — the affine map of a Linear layer, as PyTorch's F.linear.
//
//   x: (..., in_features)  weight: (out_features, in_features)  bias: (out_features)
//   linear(x, weight, bias) = x Wᵀ + b: (..., out_features)
//
// The weight is kept as (out, in), PyTorch's layout, so that checkpoints carry the
// same tensors; the product reads it transposed in place, and all leading dims of x
// fold into the rows of one GEMM, forward and backward.
#pragma once

#include "heed/detail/header_begin.hpp"

#include "heed/ops/broadcast.hpp"
#include "heed/ops/matmul.hpp"
#include "heed/ops/packed_gemm.hpp"

namespace heed {

template <typename T>
Tensor<T> linear(const Tensor<T>& x, const Tensor<T>& weight, const Tensor<T>& bias = Tensor<T>()) {
  detail::check_defined(x, "linear", "x");
  detail::check_defined(weight, "linear", "weight");
  detail::check_floating<T>("linear");
  HEED_CHECK(weight.dim() == 2, ShapeError, "linear: weight must be (out_features, in_features), got ",
             to_string(weight.shape()));
  HEED_CHECK(x.dim() >= 1 && x.shape()[-1] == weight.shape()[1], ShapeError, "linear: input of shape ",
             to_string(x.shape()), " does not end in in_features = ", weight.shape()[1], " (weight ",
             to_string(weight.shape()), ")");
  const index_t rows = detail::leading_rows(x.shape()), in = weight.shape()[1], out_features = weight.shape()[0];
  if (bias.defined())
    HEED_CHECK(bias.shape() == Shape{out_features}, ShapeError, "linear: bias of shape ", to_string(bias.shape()),
               " does not match out_features = ", out_features);
  Shape shape = x.shape();
  shape[-1] = out_features;
  using detail::device_data;
  const Device device = detail::common_device("linear", x, weight, bias);
  Tensor<T> out = detail::make_tensor<T>(shape, device);
  const bool records = autograd::needs_grad(x, weight, bias);
  if (const auto converted = detail::low_precision_weight_for(weight, records)) {  // a bf16 or int8 guard
    if constexpr (std::is_same_v<T, float>) {
      converted->apply(x.data(), rows, bias.defined() ? bias.data() : nullptr, out.data());
      return out;
    }
  }
  if (const auto packed = detail::packed_weight_for(weight, records)) {  // inside a PackedWeightsGuard
    packed->apply(x.data(), rows, bias.defined() ? bias.data() : nullptr, out.data());
    return out;
  }
  detail::gemm_on(device, device_data(x), false, device_data(weight), true, device_data(out), rows, out_features, in,
                  bias.defined() ? device_data(bias) : nullptr);

  if (records) {
    autograd::record(out, "AddmmBackward", {x, weight, bias},
                     [=, saved = detail::SavedProduct<T>(x, weight), x_shape = x.shape(), w_shape = weight.shape(),
                      need_b = bias.defined() && bias.requires_grad()](const Tensor<T>& g) {
                       // dx = g W,  dW = gᵀ x,  db = Σ_rows g
                       autograd::Grads<T> grads(3);
                       using detail::device_data;
                       if (saved.need_a) {
                         grads[0] = detail::make_tensor<T>(x_shape, device);
                         detail::gemm_on(device, device_data(g), false, device_data(saved.b.get()), false,
                                         device_data(grads[0]), rows, in, out_features);
                       }
                       if (saved.need_b) {
                         grads[1] = detail::make_tensor<T>(w_shape, device);
                         detail::gemm_on(device, device_data(g), true, device_data(saved.a.get()), false,
                                         device_data(grads[1]), out_features, in, rows);
                       }
                       if (need_b && !device.is_cpu()) {
                         grads[2] = detail::sum_to(g, Shape{out_features});
                       } else if (need_b) {
                         grads[2] = detail::make_tensor<T>(Shape{out_features});
                         detail::sum_rows(g.data(), rows, out_features, grads[2].data());
                       }
                       return grads;
                     });
  }
  return out;
}

/// x Wᵀ + b by a weight converted to bf16 or int8 (heed/ops/quantized_gemm.hpp; a
/// Linear's after convert_weights_): float on the CPU, for inference, so the output
/// records no gradient, whatever requires one.
inline Tensor<float> linear(const Tensor<float>& x, const detail::LowPrecisionWeight& weight,
                            const Tensor<float>& bias = Tensor<float>()) {
  detail::check_defined(x, "linear", "x");
  HEED_CHECK(x.is_cpu() && (!bias.defined() || bias.is_cpu()), DeviceError, "linear: a weight converted to ",
             to_string(weight.precision()), " multiplies on the CPU only, got x on ", to_string(x.device()));
  HEED_CHECK(x.dim() >= 1 && x.shape()[-1] == weight.in_features(), ShapeError, "linear: input of shape ",
             to_string(x.shape()), " does not end in in_features = ", weight.in_features(), " (",
             to_string(weight.precision()), " weight (", weight.out_features(), ", ", weight.in_features(), "))");
  if (bias.defined())
    HEED_CHECK(bias.shape() == Shape{weight.out_features()}, ShapeError, "linear: bias of shape ",
               to_string(bias.shape()), " does not match out_features = ", weight.out_features());
  Shape shape = x.shape();
  shape[-1] = weight.out_features();
  Tensor<float> out = detail::make_tensor<float>(shape);
  weight.apply(x.data(), detail::leading_rows(x.shape()), bias.defined() ? bias.data() : nullptr, out.data());
  return out;
}

}  // namespace heed

#include "heed/detail/header_end.hpp"
