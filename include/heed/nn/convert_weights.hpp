// heed/nn/convert_weights.hpp — a float net's weights converted to bf16 or int8 for
// inference, in place, their fp32 copies freed.
//
//   heed::NoGradGuard no_grad;
//   heed::convert_weights_(*net, heed::Precision::int8);   // a quarter of the weights' bytes
//   auto y = (*net)(x);                                    // int8 products from now on
//
// Every Linear's weight and every Embedding's table becomes a detail::LowPrecisionWeight
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
#include <map>
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

namespace detail {

inline void collect_convertible(Module<float>& module, std::vector<Linear<float>*>& linears,
                                std::vector<Embedding<float>*>& embeddings) {
  if (auto* linear = dynamic_cast<Linear<float>*>(&module)) linears.push_back(linear);
  if (auto* table = dynamic_cast<Embedding<float>*>(&module)) embeddings.push_back(table);
  for (auto& [name, child] : module.named_children()) collect_convertible(*child, linears, embeddings);
}

}  // namespace detail

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
  std::vector<Linear<float>*> linears;
  std::vector<Embedding<float>*> embeddings;
  detail::collect_convertible(net, linears, embeddings);
  if (precision == Precision::int8)
    for (const auto& [name, p] : net.named_parameters()) {
      bool converted_here = false;
      for (const Linear<float>* l : linears) converted_here = converted_here || l->weight.is_same(p);
      for (const Embedding<float>* e : embeddings) converted_here = converted_here || e->weight.is_same(p);
      if (!converted_here) continue;
      const float* v = p.data();
      for (index_t i = 0; i < p.numel(); ++i)
        HEED_CHECK(std::isfinite(v[i]), ValueError, "convert_weights_: int8: '", name, "' ", to_string(p.shape()),
                   " holds ", v[i], " at flat position ", i, ": int8 scales need finite weights");
    }
  // Each distinct tensor once, by its storage: tied weights share their conversion.
  std::map<const float*, std::shared_ptr<const detail::LowPrecisionWeight>> converted;
  ConvertedWeights report;
  const auto convert = [&](Tensor<float>& weight, std::shared_ptr<const detail::LowPrecisionWeight>& into) {
    if (into) return;  // converted before
    auto& slot = converted[weight.data()];
    if (!slot) {
      slot = std::make_shared<const detail::LowPrecisionWeight>(weight.data(), weight.shape()[0], weight.shape()[1],
                                                                precision);
      ++report.tensors;
      report.fp32_bytes += static_cast<std::size_t>(weight.numel()) * sizeof(float);
      report.converted_bytes += slot->bytes();
    }
    into = slot;
    weight = Tensor<float>();  // the storage goes when its last module lets go
    empty_buffer_cache();
  };
  for (Linear<float>* l : linears) convert(l->weight, l->converted_weight);
  for (Embedding<float>* e : embeddings) convert(e->weight, e->converted_weight);
  return report;
}

}  // namespace heed

#include "heed/detail/header_end.hpp"
