// heed/nn/convert_weights.hpp — a float net's weights converted to bf16 or int8 for
// inference, in place, their fp32 copies freed.
//
//   heed::NoGradGuard no_grad;
//   heed::convert_weights_(*net, heed::Precision::int8);   // a quarter of the weights' bytes
//   auto y = (*net)(x);                                    // int8 products from now on
//
// Every Linear's weight and every Embedding's table (every parameter a module registers
// as convertible: Module::register_convertible) becomes a detail::LowPrecisionWeight
// (heed/ops/quantized_gemm.hpp: int8 with a scale per row, or bf16), which the module
// then multiplies by (or reads rows of), whatever PredictOptions::precision says; a
// tensor that several modules share (an embedding tied to the output layer) is
// converted once and shared. The fp32 tensors are released: named_parameters(),
// state_dict() and num_parameters() leave them out, and they take no gradient. This is
// PyTorch's quantize_dynamic for the Linear layers, with the embeddings too (as
// CTranslate2's int8), and saves the memory that PackedWeightsGuard(Precision), which
// converts copies per guard, does not.
//
// The storage of each tensor goes back to the system once the last module holding it is
// converted (unless something else, an optimiser, still holds it).
//
// Modules that read a Linear's weight tensor themselves cannot run on a converted one:
// Bahdanau's decoder fuses its attention into the GRU step (heed/ops/attention_gru.hpp).
// Decode such a net in bf16 or int8 with PredictOptions::precision instead.
#pragma once

#include "heed/detail/header_begin.hpp"

#include <cmath>
#include <cstddef>
#include <memory>
#include <vector>

#include "heed/nn/embedding.hpp"
#include "heed/nn/linear.hpp"
#include "heed/nn/module.hpp"

namespace heed {

/// What convert_weights_ converted: the tensors (tied ones once) and their bytes before
/// (fp32) and after.
struct ConvertedWeights {
  index_t tensors = 0;
  std::size_t fp32_bytes = 0, converted_bytes = 0;
};

/// Converts `net`'s Linear weights and Embedding tables to `precision` (bf16 or int8) as
/// the top of this file says, and returns what it converted. Modules already converted
/// stay as they are. Each tensor is freed as soon as its last module is converted, and
/// the freed buffers go back to the system (empty_buffer_cache), so that the process
/// never holds much more than the fp32 weights. Everything that can be refused is
/// checked first, so a ValueError (fp32 asked for, a net not on the CPU, an int8 weight
/// that is not finite, named) leaves the net as it was.
inline ConvertedWeights convert_weights_(Module<float>& net, Precision precision) {
  HEED_CHECK(precision != Precision::fp32, ValueError,
             "convert_weights_: precision must be bf16 or int8 (fp32 is the weights as they are)");
  HEED_CHECK(net.device().is_cpu(), ValueError, "convert_weights_: ", to_string(precision),
             " weights are for the CPU, got a net on ", to_string(net.device()));
  const auto groups = detail::convertible_groups(net);
  if (precision == Precision::int8)
    for (const auto& group : groups) {
      if (group.converted()) continue;
      const Tensor<float>& w = group.weight();
      for (index_t i = 0; i < w.numel(); ++i)
        HEED_CHECK(std::isfinite(w.data()[i]), ValueError, "convert_weights_: int8: '", group.name, "' ",
                   to_string(w.shape()), " holds ", w.data()[i], " at flat position ", i,
                   ": int8 scales need finite weights");
    }
  ConvertedWeights report;
  for (const auto& group : groups) {
    if (group.converted()) continue;  // converted before
    const Tensor<float>& w = group.weight();
    auto converted =
        std::make_shared<const detail::LowPrecisionWeight>(w.data(), w.shape()[0], w.shape()[1], precision);
    ++report.tensors;
    report.fp32_bytes += static_cast<std::size_t>(w.numel()) * sizeof(float);
    report.converted_bytes += converted->bytes();
    for (const auto& member : group.members) {  // tied weights share their conversion
      *member.converted = converted;
      *member.weight = Tensor<float>();
    }
    empty_buffer_cache();  // the fp32 storage goes back to the system
  }
  return report;
}

}  // namespace heed

#include "heed/detail/header_end.hpp"
