// heed/ops/kernel_list.hpp — the device kernels, declared once.
//
// Each entry is X(name, (parameters), (arguments)): a kernel returning void, its
// parameters with T the element type, and the same names as a call's arguments. Every
// place that spells the kernels expands these lists instead of repeating them:
//
//   heed/ops/kernels.hpp    DeviceKernels<T>'s pure virtuals (what the ops call)
//   heed/cuda/runtime.hpp   heed::cuda's function templates (what nvcc compiles)
//   src/cuda/backend.cpp    DeviceKernels<T> implemented by forwarding to those
//   src/cuda/*.cu           the explicit instantiations of each family's kernels
//   src/cuda/emulated.cpp   the same, for the host emulation (every family)
//
// So a new kernel is an entry here, its definition in its family's .cu file, and its
// host loop in src/cuda/emulated.cpp. One list per family: each .cu file instantiates
// its own. Pointers are the device's; index_t is std::int64_t where it expands.
//
// This header needs nothing but heed/ops/vocabulary.hpp: nvcc compiles it.
#pragma once

#include <cstdint>

#include "heed/ops/vocabulary.hpp"

// ---- matrix products (src/cuda/blas.cu) ---------------------------------------------------

#define HEED_KERNELS_BLAS(X, T)                                                                                      \
  /* For each of `batches` products: C = op(A) · op(B), row-major, op(A) m × k, op(B) k × n, op transposing the   \
     stored matrix when asked; matrix i of each operand starts i · stride elements after the first (stride 0 reuses \
     one matrix). bf16_products (float): the operands rounded to bf16 and summed in fp32, C fp32, as an              \
     AutocastGuard's products (heed/ops/autocast.hpp); else the math mode's (heed::cuda::set_math_mode). */          \
  X(gemm_strided_batched,                                                                                            \
    (int device, bool trans_a, bool trans_b, index_t m, index_t n, index_t k, const T* a, index_t stride_a,          \
     const T* b, index_t stride_b, T* c, index_t stride_c, index_t batches, bool bf16_products),                     \
    (device, trans_a, trans_b, m, n, k, a, stride_a, b, stride_b, c, stride_c, batches, bf16_products))

// ---- element-wise (src/cuda/elementwise.cu) -----------------------------------------------

#define HEED_KERNELS_ELEMENTWISE(X, T)                                                                                    \
  /* out (contiguous, `a_shape.sizes`) = a op b, each read through its broadcast strides. */                              \
  X(binary,                                                                                                               \
    (int device, BinaryOp op, T* out, const T* a, const StridedShape& a_shape, const T* b,                                \
     const StridedShape& b_shape),                                                                                        \
    (device, op, out, a, a_shape, b, b_shape))                                                                            \
  /* out[i] = x[strided_offset(i)]: out is contiguous with `src.sizes`, x read through `src.strides` (permute, slice,     \
     repeat, expand). Not heed::gather, the op that reads by an index tensor. */                                          \
  X(copy_strided, (int device, T* out, const T* x, const StridedShape& src), (device, out, x, src))                       \
  /* dx[strided_offset(i)] = g[i], the adjoint of copy_strided where no two i share a position (permute, slice): dx's     \
     other elements are left as they are. */                                                                              \
  X(copy_into_strided, (int device, T* dx, const T* g, const StridedShape& dst), (device, dx, g, dst))                    \
  /* Dropout's mask and output, element for element what heed/ops/dropout.hpp computes on the CPU for the same key        \
     (mix of the generator's draw), threshold (p · 2³²) and scale (1 / (1 − p)): mask = 0 or scale, out = x · mask. \
     `shape.sizes` are x's; the rule is heed/detail/rules.hpp's. */                                                       \
  X(dropout,                                                                                                              \
    (int device, T* out, T* mask, const T* x, const StridedShape& shape, std::uint64_t key, std::uint32_t threshold,      \
     T scale),                                                                                                            \
    (device, out, mask, x, shape, key, threshold, scale))                                                                 \
  /* out = op(x), n elements, by heed/detail/rules.hpp's rule for op. */                                                  \
  X(unary, (int device, UnaryOp op, T* out, const T* x, index_t n), (device, op, out, x, n))                              \
  /* dx = g · op'(x), from `saved`: the op's result y for exp, sqrt, tanh, sigmoid and relu, its input x for the         \
     others (what heed's CPU ops keep for backward). */                                                                   \
  X(unary_backward, (int device, UnaryOp op, T* dx, const T* g, const T* saved, index_t n),                               \
    (device, op, dx, g, saved, n))                                                                                        \
  /* out = alpha · x + beta, n elements (copies, negation, scalar arithmetic); out may be x. */                          \
  X(affine, (int device, T* out, const T* x, index_t n, T alpha, T beta), (device, out, x, n, alpha, beta))               \
  /* dst += alpha · src, n elements. */                                                                                  \
  X(axpy, (int device, T* dst, const T* src, index_t n, T alpha), (device, dst, src, n, alpha))                           \
  /* out (contiguous, n_out elements) = the sum of g over the dims it was broadcast along: g has `out_strides.sizes`      \
     (contiguous); `out_strides.strides` gives, for each of g's dims, the stride into out (0 for a summed dim). Each      \
     output is summed in one fixed order, so results do not depend on the launch. */                                      \
  X(sum_to, (int device, T* out, index_t n_out, const T* g, const StridedShape& out_strides),                             \
    (device, out, n_out, g, out_strides))                                                                                 \
  /* p, m, v updated in place by one Adam step, in PyTorch's order of operations (heed/optim/adam.hpp); g is the          \
     gradient, n elements each. */                                                                                        \
  X(adam_step, (int device, T* p, T* m, T* v, const T* g, index_t n, const AdamStep& step),                               \
    (device, p, m, v, g, n, step))                                                                                        \
  /* *total += Σ x², accumulated in double (clip_grad_norm), on the device. */                                          \
  X(sum_of_squares, (int device, double* total, const T* x, index_t n), (device, total, x, n))                            \
  /* x *= max_norm / √(*sum_of_squares) when that norm exceeds max_norm, decided on the device (clip_grad_norm          \
     without reading the norm back). */                                                                                   \
  X(clip_by_norm, (int device, T* x, index_t n, const double* sum_of_squares, double max_norm),                           \
    (device, x, n, sum_of_squares, max_norm))

// ---- layer norm (src/cuda/layer_norm.cu) --------------------------------------------------

#define HEED_KERNELS_LAYER_NORM(X, T)                                                                                  \
  /* Normalises each of `rows` rows of n elements: out = (x − mean) · rstd · weight + bias (weight and bias may be \
     null), keeping each row's mean and rstd = 1 / √(var + eps). */                                                  \
  X(layer_norm_forward,                                                                                                \
    (int device, T* out, T* mean, T* rstd, const T* x, const T* weight, const T* bias, index_t rows, index_t n,        \
     double eps),                                                                                                      \
    (device, out, mean, rstd, x, weight, bias, rows, n, eps))                                                          \
  /* The gradients of layer_norm_forward; each of dx, dweight, dbias may be null (not wanted), weight may be null      \
     (none). */                                                                                                        \
  X(layer_norm_backward,                                                                                               \
    (int device, T* dx, T* dweight, T* dbias, const T* g, const T* x, const T* mean, const T* rstd, const T* weight,   \
     index_t rows, index_t n),                                                                                         \
    (device, dx, dweight, dbias, g, x, mean, rstd, weight, rows, n))

// ---- embedding (src/cuda/embedding.cu) ----------------------------------------------------

#define HEED_KERNELS_EMBEDDING(X, T)                                                                                  \
  /* out[i] = weight[indices[i]], rows of dim; an index out of range gives a row of NaN (the device cannot throw). */ \
  X(embedding_forward,                                                                                                \
    (int device, T* out, const T* weight, const std::int64_t* indices, index_t count, index_t num_embeddings,         \
     index_t dim),                                                                                                    \
    (device, out, weight, indices, count, num_embeddings, dim))                                                       \
  /* dweight[v] = Σ over i with indices[i] = v of g[i], summed in the order of i. */                                 \
  X(embedding_backward,                                                                                               \
    (int device, T* dweight, const T* g, const std::int64_t* indices, index_t count, index_t num_embeddings,          \
     index_t dim),                                                                                                    \
    (device, dweight, g, indices, count, num_embeddings, dim))

// ---- cross-entropy (src/cuda/cross_entropy.cu) --------------------------------------------

#define HEED_KERNELS_CROSS_ENTROPY(X, T)                                                                                 \
  /* loss[r] = logsumexp(x_r) − x_r[label] (0 for rows that do not count), stats[2r..] = (max, log Σ exp(x − max)). \
     A label out of range gives NaN (the device cannot throw). */                                                        \
  X(cross_entropy_forward, (int device, T* loss, T* stats, const T* x, const CrossEntropyRows& rows),                    \
    (device, loss, stats, x, rows))                                                                                      \
  /* dx_r = (softmax(x_r) − onehot(label_r)) · g[r / g_stride] / divisor, 0 for rows that do not count. */            \
  X(cross_entropy_backward,                                                                                              \
    (int device, T* dx, const T* x, const T* stats, const CrossEntropyRows& rows, const T* g, index_t g_stride,          \
     T divisor),                                                                                                         \
    (device, dx, x, stats, rows, g, g_stride, divisor))

// ---- softmax (src/cuda/softmax.cu) --------------------------------------------------------

#define HEED_KERNELS_SOFTMAX(X, T)                                                                                   \
  /* Softmax of each row of (batch, heads, num_queries, num_keys) scores under `mask` (heed/ops/masked_softmax.hpp); \
     a row with no visible key is 0. */                                                                              \
  X(masked_softmax_forward,                                                                                          \
    (int device, T* out, const T* scores, index_t batch, index_t heads, index_t num_queries, index_t num_keys,       \
     const SoftmaxMask<T>& mask),                                                                                    \
    (device, out, scores, batch, heads, num_queries, num_keys, mask))                                                \
  /* grad_in = y · (grad_out − Σ grad_out · y) along rows of length `cols`. */                                  \
  X(softmax_backward, (int device, T* grad_in, const T* grad_out, const T* y, index_t rows, index_t cols),           \
    (device, grad_in, grad_out, y, rows, cols))

// ---- fused attention (src/cuda/attention.cu) ------------------------------------------------

#define HEED_KERNELS_ATTENTION(X, T)                                                                                    \
  /* softmax(Q Kᵀ, mask) V for queries already scaled by 1/√d, a row of scores at a time and never stored: out      \
     (batch, heads, num_queries, value_dim) and each row's log Σ exp, lse (−inf for a row with no visible key, whose \
     output is 0). */                                                                                                   \
  X(attention_forward,                                                                                                  \
    (int device, T* out, T* lse, const T* queries, const T* keys, const T* values, const AttentionShape& shape,         \
     const SoftmaxMask<T>& mask),                                                                                       \
    (device, out, lse, queries, keys, values, shape, mask))                                                             \
  /* Its backward from d_out, the weights recomputed from lse: d_queries (of the scaled queries), d_keys, d_values,     \
     and each row's D = Σ d_out ∘ out into row_d. */                                                                 \
  X(attention_backward,                                                                                                 \
    (int device, T* d_queries, T* d_keys, T* d_values, T* row_d, const T* queries, const T* keys, const T* values,      \
     const T* out, const T* lse, const T* d_out, const AttentionShape& shape, const SoftmaxMask<T>& mask),              \
    (device, d_queries, d_keys, d_values, row_d, queries, keys, values, out, lse, d_out, shape, mask))

// ---- comparisons and what they select (src/cuda/compare.cu) -----------------------------

#define HEED_KERNELS_COMPARE(X, T)                                                                                     \
  /* out (bool, contiguous, `a_shape.sizes`) = a op b, each read through its broadcast strides. */                     \
  X(compare,                                                                                                           \
    (int device, CompareOp op, bool* out, const T* a, const StridedShape& a_shape, const T* b,                         \
     const StridedShape& b_shape),                                                                                     \
    (device, op, out, a, a_shape, b, b_shape))                                                                         \
  /* out (contiguous, `cond_shape.sizes`) = cond ? a : b, each read through its broadcast strides. */                  \
  X(where,                                                                                                             \
    (int device, T* out, const bool* cond, const StridedShape& cond_shape, const T* a, const StridedShape& a_shape,    \
     const T* b, const StridedShape& b_shape),                                                                         \
    (device, out, cond, cond_shape, a, a_shape, b, b_shape))                                                           \
  /* out = min(max(x, lo), hi), and its backward dx = g where lo ≤ x ≤ hi, else 0 (heed/detail/rules.hpp). */      \
  X(clamp, (int device, T* out, const T* x, index_t n, T lo, T hi), (device, out, x, n, lo, hi))                       \
  X(clamp_backward, (int device, T* dx, const T* g, const T* x, index_t n, T lo, T hi), (device, dx, g, x, n, lo, hi)) \
  /* For x as (outer, size, inner): the extreme over `size` of each (outer, inner) (max, or min with !largest; NaN     \
     wins) and the index of its first occurrence. */                                                                   \
  X(extreme_along,                                                                                                     \
    (int device, T* values, std::int64_t* indices, const T* x, index_t outer, index_t size, index_t inner,             \
     bool largest),                                                                                                    \
    (device, values, indices, x, outer, size, inner, largest))                                                         \
  /* Its backward: dx (outer, size, inner), zero on entry, gets g (outer, inner) at each index. */                     \
  X(scatter_along,                                                                                                     \
    (int device, T* dx, const T* g, const std::int64_t* indices, index_t outer, index_t size, index_t inner),          \
    (device, dx, g, indices, outer, size, inner))

// ---- the GRU cell (src/cuda/gru.cu) -------------------------------------------------------

#define HEED_KERNELS_GRU(X, T)                                                                                            \
  /* One GRU step of B rows (heed/ops/gru.hpp) from gi = x W_ihᵀ + b_ih and gh = h W_hhᵀ + b_hh (B, 3H, gates r | z | \
     n): the gates r | z | n | W_hn h + b_hn (B, 4H), what backward reads, and h' = n + z ⊙ (h − n) (B, H). */        \
  X(gru_cell_forward,                                                                                                     \
    (int device, T* gates, T* h_next, const T* gi, const T* gh, const T* h_prev, index_t B, index_t H),                   \
    (device, gates, h_next, gi, gh, h_prev, B, H))                                                                        \
  /* Its backward from dh = d loss / d h': d of the gates' pre-activations dgi (B, 3H), d(W_hh h + b_hh) dgh (B, 3H),     \
     and dh ⊙ z (B, H), the part of d loss / d h that does not go through W_hh. */                                      \
  X(gru_cell_backward,                                                                                                    \
    (int device, T* dgi, T* dgh, T* dh_direct, const T* gates, const T* h_prev, const T* dh, index_t B, index_t H),       \
    (device, dgi, dgh, dh_direct, gates, h_prev, dh, B, H))

// ---- decoding's token choice (src/cuda/token_choice.cu) -----------------------------------

namespace heed {
/// The most tokens top_log_probs chooses per row on a device (beam search's K + 1).
constexpr std::int64_t kDeviceTopTokens = 16;
}  // namespace heed

#define HEED_KERNELS_TOKEN_CHOICE(X, T)                                                                                  \
  /* For each of `rows` rows of V logits, heed/seq2seq/token_choice.hpp's top_log_probs: the `count` (<=                 \
     kDeviceTopTokens) most probable tokens, best first (ties: the lower token), with log P = logit − log Σ exp(row), \
     into row r · count of log_probs and tokens, and how many into found[r]. Never chosen: a −inf logit, the          \
     num_banned ids of `banned`, and `eos` where eos_banned[r] != 0. */                                                  \
  X(top_log_probs,                                                                                                       \
    (int device, T* log_probs, std::int64_t* tokens, std::int64_t* found, const T* logits, index_t rows, index_t V,      \
     index_t count, const std::int64_t* banned, index_t num_banned, const std::int64_t* eos_banned, std::int64_t eos),   \
    (device, log_probs, tokens, found, logits, rows, V, count, banned, num_banned, eos_banned, eos))                     \
  /* For each of `rows` rows, heed/seq2seq/token_choice.hpp's sample_token with the uniform draw uniforms[r]: over       \
     the tokens top_log_probs may choose, p_v ∝ exp((logit_v − max) / temperature) in double, only the top_k (0:     \
     all; <= kDeviceTopTokens) most probable kept (ties with the k-th too), and the token where the running sum of       \
     p in token order passes uniforms[r] · Σ p; its log P (logit − log Σ exp(row)) into log_probs[r], the token     \
     into tokens[r], found[r] = 1 (0, and nothing else written, where no token may be chosen). */                        \
  X(sample_tokens,                                                                                                       \
    (int device, T* log_probs, std::int64_t* tokens, std::int64_t* found, const T* logits, index_t rows, index_t V,      \
     const std::int64_t* banned, index_t num_banned, const std::int64_t* eos_banned, std::int64_t eos,                   \
     double temperature, index_t top_k, const double* uniforms),                                                         \
    (device, log_probs, tokens, found, logits, rows, V, banned, num_banned, eos_banned, eos, temperature, top_k,         \
     uniforms))

/// Every device kernel, every family.
#define HEED_DEVICE_KERNELS(X, T)  \
  HEED_KERNELS_BLAS(X, T)          \
  HEED_KERNELS_ELEMENTWISE(X, T)   \
  HEED_KERNELS_LAYER_NORM(X, T)    \
  HEED_KERNELS_EMBEDDING(X, T)     \
  HEED_KERNELS_CROSS_ENTROPY(X, T) \
  HEED_KERNELS_SOFTMAX(X, T)       \
  HEED_KERNELS_ATTENTION(X, T)     \
  HEED_KERNELS_COMPARE(X, T)       \
  HEED_KERNELS_GRU(X, T)           \
  HEED_KERNELS_TOKEN_CHOICE(X, T)
