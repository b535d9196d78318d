// heed/ops/autocast.hpp — mixed-precision products for training, as PyTorch's
// torch.autocast('cpu', dtype=torch.bfloat16):
//
//   {
//     heed::AutocastGuard autocast(heed::Precision::bf16);
//     heed::Tensor<float> loss = ...;  // the forward
//     loss.backward();
//   }
//
// Inside the guard, float products on the CPU (linear, matmul and the ops built on
// them: attention, the fused output layer and loss, the GRU's gates) round their
// operands to bf16 and sum in fp32 (heed/ops/bf16_gemm.hpp), in the forward and in a
// backward run inside the guard (train_seq2seq holds it over whole steps). Everything
// else stays fp32: parameters, gradients and the optimiser (PyTorch's "master
// weights"), softmax, LayerNorm, the loss. Unlike PyTorch's, a product's output is
// fp32, not bf16 (its fp32 sum, rounded once): the elementwise ops after it stay exact.
// On a CUDA device the same products (the same size rule) go to cuBLAS with bf16
// operands and fp32 sums (CUBLAS_COMPUTE_32F_FAST_16BF, the tensor cores).
//
// Products below kAutocastMinWork multiply-adds, or with fewer than kAutocastMinDepth
// terms per sum, stay fp32: converting their operands costs more than bf16 saves. The
// choice depends on the shapes alone, and every element is one sum in a fixed order, so
// the bits do not depend on the thread count. The guard is the calling thread's and
// reaches the threads of heed's parallel regions (detail::ThreadContext). A CPU without
// AVX512_BF16 computes the same sums on a portable, slower path.
#pragma once

#include "heed/detail/header_begin.hpp"

#include "heed/core/error.hpp"
#include "heed/detail/parallel.hpp"
#include "heed/ops/precision.hpp"

namespace heed {

namespace detail {

/// The smallest product (m · n · k multiply-adds) and the shortest sum (k) that run in
/// bf16 under an AutocastGuard.
constexpr index_t kAutocastMinWork = index_t(1) << 16;
constexpr index_t kAutocastMinDepth = 16;

/// Whether a float product of m × n × k on the CPU runs in bf16 here.
inline bool autocast_bf16(index_t m, index_t n, index_t k) {
  return thread_context().bf16_products && k >= kAutocastMinDepth && m * n * k >= kAutocastMinWork;
}

}  // namespace detail

/// Sets the precision of float products for its scope (see above): bf16, or fp32 (heed's
/// default; a guard of fp32 turns an outer bf16 guard off). int8 is for decoding only
/// (translate --precision int8, PackedWeightsGuard) and throws ValueError.
class AutocastGuard {
 public:
  explicit AutocastGuard(Precision precision) : scope_(context_for(precision)) {}
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

  /// The precision of float products on this thread now.
  static Precision current() { return detail::thread_context().bf16_products ? Precision::bf16 : Precision::fp32; }

 private:
  static detail::ThreadContext context_for(Precision precision) {
    HEED_CHECK(precision != Precision::int8, ValueError,
               "AutocastGuard: products run in fp32 or bf16 for training; int8 is for decoding only (PredictOptions::"
               "precision, translate --precision int8)");
    detail::ThreadContext context = detail::thread_context();
    context.bf16_products = precision == Precision::bf16;
    return context;
  }

  detail::ThreadContextScope scope_;
};

}  // namespace heed

#include "heed/detail/header_end.hpp"
