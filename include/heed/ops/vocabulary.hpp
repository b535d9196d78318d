// heed/ops/vocabulary.hpp — the words heed's ops and device kernels share.
//
// An op on a device that is not the CPU describes its work to the backend in these
// terms (heed/ops/kernels.hpp): which arithmetic, which operand layout, which rows
// count. They belong to the ops, not to a backend; this header needs nothing but
// <cstdint>, so that nvcc compiles it into the CUDA backend's kernels as it is.
#pragma once

#include <cstdint>

namespace heed {

constexpr int kMaxKernelRank = 16;  // shape ops split dims: repeat doubles the rank

/// Extents with the strides that read (or write) an operand through them: an operand
/// broadcast to the extents (stride 0 where broadcast), or a strided view such as a
/// permutation. Innermost last.
struct StridedShape {
  int rank = 0;
  std::int64_t sizes[kMaxKernelRank] = {};
  std::int64_t strides[kMaxKernelRank] = {};
};

enum class BinaryOp { add, sub, mul, div };
/// A comparison, or a logical op of x != 0 and y != 0 (heed/ops/elementwise.hpp).
enum class CompareOp { eq, ne, lt, le, gt, ge, logical_and, logical_or, logical_xor };
enum class UnaryOp { exp, log, sqrt, tanh, sigmoid, relu, gelu, abs, sin, cos, silu, softplus };

/// The constants of one Adam step, in PyTorch's order of operations (heed/optim/adam.hpp).
struct AdamStep {
  double beta1, beta2, weight_decay, step_size, sqrt_bias_correction2, eps;
};

/// Which rows of a cross-entropy count: all when lens is null, else row r when
/// r % steps < lens[r / steps] (d2l's masked loss over (batch, steps) rows).
struct CrossEntropyRows {
  std::int64_t rows = 0, classes = 0, steps = 1;
  const std::int64_t* lens = nullptr;
  const std::int64_t* labels = nullptr;
  double label_smoothing = 0;  // ε of heed/ops/cross_entropy.hpp
};

/// How valid_lens index the rows of the scores: one per batch, per (batch, query), or
/// per row.
enum class LensForm : int { none, per_batch, per_query, per_row };

/// One fused attention call (heed/ops/scaled_dot_product_attention.hpp on a device):
/// queries (batch, heads, num_queries, d), keys (batch, kv_heads, num_keys, d), values
/// (batch, kv_heads, num_keys, value_dim), heads = kv_heads = 1 for 3-D operands
/// (four_d false); query head h reads kv head h / (heads / kv_heads). Dropout on the
/// weights: the call's key rekeyed by each row's coordinates (b, [h,] q), as dropout()
/// keys the weights' rows, then the hash of each key j against threshold.
struct AttentionShape {
  std::int64_t batch = 0, heads = 1, kv_heads = 1, num_queries = 0, num_keys = 0, d = 0, value_dim = 0;
  bool four_d = false;
  bool dropout = false;
  std::uint32_t threshold = 0;
  double keep_scale = 1.0;
  std::uint64_t key = 0;
};

/// Everything masked_softmax needs to know per row, read on the device. Scores are
/// (batch, heads, num_queries, num_keys) with heads = 1 for 3-D scores.
template <typename T>
struct SoftmaxMask {
  LensForm lens_form = LensForm::none;
  const std::int64_t* valid_lens = nullptr;  // on the device
  bool causal = false;
  const bool* allowed = nullptr;  // broadcast to the scores through allowed_strides
  std::int64_t allowed_strides[4] = {};
  const T* additive = nullptr;  // broadcast to the scores through additive_strides
  std::int64_t additive_strides[4] = {};
};

}  // namespace heed
