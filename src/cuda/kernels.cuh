// src/cuda/kernels.cuh — the arithmetic of the backend's kernels, per element or per
// row, shared by the CUDA kernels (src/cuda/*.cu) and by the host emulation
// (src/cuda/emulated.cpp) that runs heed's CUDA code paths in CI, where there is no
// GPU: index arithmetic, broadcasting, masks and the cuBLAS argument mapping are then
// tested on every run, and only the launch and the warp reductions need a GPU.
#pragma once

#include <math.h>  // exp, log, … for float and double in the global namespace, as on the device

#include <cmath>
#include <cstdint>

#include "heed/cuda/runtime.hpp"
#include "heed/detail/rules.hpp"

#define HEED_HD HEED_HOST_DEVICE

namespace heed::cuda::kernels {

/// The offset of flat element i (row-major over shape.sizes) through shape.strides.
HEED_HD inline index_t strided_offset(index_t i, const StridedShape& shape) {
  return heed::detail::strided_offset(i, shape.rank, shape.sizes, shape.strides);
}

inline bool is_contiguous(const StridedShape& shape) {
  index_t expected = 1;
  for (int d = shape.rank - 1; d >= 0; --d) {
    if (shape.sizes[d] != 1 && shape.strides[d] != expected) return false;
    expected *= shape.sizes[d];
  }
  return true;
}

inline index_t numel(const StridedShape& shape) {
  index_t n = 1;
  for (int d = 0; d < shape.rank; ++d) n *= shape.sizes[d];
  return n;
}

// Every switch over an op enum names every value and has no default: the build's
// -Werror=switch then refuses an op added without its case. Past the switch is only a
// corrupt code, which gives NaN rather than another op's value.

template <typename T>
HEED_HD inline T apply(BinaryOp op, T x, T y) {
  switch (op) {
    case BinaryOp::add:
      return x + y;
    case BinaryOp::sub:
      return x - y;
    case BinaryOp::mul:
      return x * y;
    case BinaryOp::div:
      return x / y;
  }
  return T(NAN);
}

/// x op y: a comparison, or a logical op of x != 0 and y != 0.
template <typename T>
HEED_HD inline bool compare(CompareOp op, T x, T y) {
  switch (op) {
    case CompareOp::eq:
      return x == y;
    case CompareOp::ne:
      return x != y;
    case CompareOp::lt:
      return x < y;
    case CompareOp::le:
      return x <= y;
    case CompareOp::gt:
      return x > y;
    case CompareOp::ge:
      return x >= y;
    case CompareOp::logical_and:
      return x != T(0) && y != T(0);
    case CompareOp::logical_or:
      return x != T(0) || y != T(0);
    case CompareOp::logical_xor:
      return (x != T(0)) != (y != T(0));
  }
  return false;
}

/// Element o = (outer, inner) of extreme_along: the first index of the extreme over size.
template <typename T>
HEED_HD inline void extreme_one(index_t o, T* values, std::int64_t* indices, const T* x, index_t size, index_t inner,
                                bool largest) {
  const T* p = x + (o / inner) * size * inner + o % inner;
  index_t best = 0;
  for (index_t k = 1; k < size; ++k)
    if (heed::detail::beats(p[k * inner], p[best * inner], largest)) best = k;
  values[o] = p[best * inner];
  indices[o] = best;
}

/// op(x), by heed/detail/rules.hpp's rule.
template <typename T>
HEED_HD inline T unary_forward(UnaryOp op, T x) {
  namespace rules = heed::detail;
  switch (op) {
    case UnaryOp::exp:
      return rules::exp_value(x);
    case UnaryOp::log:
      return rules::log_value(x);
    case UnaryOp::sqrt:
      return rules::sqrt_value(x);
    case UnaryOp::tanh:
      return rules::tanh_value(x);
    case UnaryOp::sigmoid:
      return rules::sigmoid_value(x);
    case UnaryOp::relu:
      return rules::relu_value(x);
    case UnaryOp::gelu:
      return rules::gelu_value(x);
    case UnaryOp::abs:
      return rules::abs_value(x);
    case UnaryOp::sin:
      return rules::sin_value(x);
    case UnaryOp::cos:
      return rules::cos_value(x);
    case UnaryOp::silu:
      return rules::silu_value(x);
    case UnaryOp::softplus:
      return rules::softplus_value(x);
  }
  return T(NAN);
}

/// g · op'(x), with `saved` the op's result or input as heed/ops/kernel_list.hpp says.
template <typename T>
HEED_HD inline T unary_grad(UnaryOp op, T g, T saved) {
  namespace rules = heed::detail;
  switch (op) {
    case UnaryOp::exp:
      return rules::exp_grad(g, saved);
    case UnaryOp::log:
      return rules::log_grad(g, saved);
    case UnaryOp::sqrt:
      return rules::sqrt_grad(g, saved);
    case UnaryOp::tanh:
      return rules::tanh_grad(g, saved);
    case UnaryOp::sigmoid:
      return rules::sigmoid_grad(g, saved);
    case UnaryOp::relu:
      return rules::relu_grad(g, saved);
    case UnaryOp::gelu:
      return rules::gelu_grad(g, saved);
    case UnaryOp::abs:
      return rules::abs_grad(g, saved);
    case UnaryOp::sin:
      return rules::sin_grad(g, saved);
    case UnaryOp::cos:
      return rules::cos_grad(g, saved);
    case UnaryOp::silu:
      return rules::silu_grad(g, saved);
    case UnaryOp::softplus:
      return rules::softplus_grad(g, saved);
  }
  return T(NAN);
}

/// Whether dropout zeroes element i of a tensor of shape.sizes, for the call's key: the
/// CPU's rule (heed/detail/rules.hpp), from the flat index.
HEED_HD inline bool dropout_drops(index_t i, const StridedShape& shape, std::uint64_t key, std::uint32_t threshold) {
  const index_t row_length = shape.rank == 0 ? 1 : shape.sizes[shape.rank - 1];
  const index_t j = i % row_length;
  index_t row = i / row_length;
  // The row's coordinates, outermost first, each mixed into the key in turn.
  index_t coords[kMaxKernelRank];
  for (int d = shape.rank - 2; d >= 0; --d) {
    coords[d] = row % shape.sizes[d];
    row /= shape.sizes[d];
  }
  for (int d = 0; d + 1 < shape.rank; ++d) key = heed::detail::dropout_rekey(key, coords[d]);
  return heed::detail::dropout_drops(heed::detail::dropout_row_seed(key), j, threshold);
}

/// sum_to split into g's kept dims (which index the output, row-major) and its summed
/// dims (what adds into one output), each with its strides into g.
struct SumPlan {
  StridedShape kept, summed;
  index_t summed_count = 1;
};

/// The plan for runtime.hpp's sum_to(out_strides): a dim of g is summed where its
/// stride into the output is 0 and its size is not 1.
inline SumPlan make_sum_plan(const StridedShape& out_strides) {
  SumPlan plan;
  index_t g_strides[kMaxKernelRank] = {};
  index_t g_stride = 1;
  for (int d = out_strides.rank - 1; d >= 0; --d) {
    g_strides[d] = g_stride;
    g_stride *= out_strides.sizes[d];
  }
  for (int d = 0; d < out_strides.rank; ++d) {
    const bool summed = out_strides.strides[d] == 0 && out_strides.sizes[d] != 1;
    StridedShape& part = summed ? plan.summed : plan.kept;
    part.sizes[part.rank] = out_strides.sizes[d];
    part.strides[part.rank] = g_strides[d];
    ++part.rank;
    if (summed) plan.summed_count *= out_strides.sizes[d];
  }
  return plan;
}

/// Output o of sum_to: its elements of g added in one fixed order.
template <typename T>
HEED_HD inline T sum_one(index_t o, const T* g, const SumPlan& plan) {
  const index_t base = strided_offset(o, plan.kept);
  T total = 0;
  for (index_t s = 0; s < plan.summed_count; ++s) total += g[base + strided_offset(s, plan.summed)];
  return total;
}

/// One row of masked_softmax: where its masks are, and how many of its keys a valid
/// length or the causal rule leaves visible (a prefix).
template <typename T>
struct SoftmaxRow {
  index_t limit;
  const bool* allowed;
  index_t allowed_stride;
  const T* additive;
  index_t additive_stride;

  HEED_HD SoftmaxRow(index_t r, index_t heads, index_t num_queries, index_t num_keys, const SoftmaxMask<T>& mask) {
    const index_t q = r % num_queries, h = (r / num_queries) % heads, b = r / (num_queries * heads);
    limit = num_keys;
    if (mask.lens_form != LensForm::none) {
      const index_t len = mask.lens_form == LensForm::per_batch   ? mask.valid_lens[b]
                          : mask.lens_form == LensForm::per_query ? mask.valid_lens[b * num_queries + q]
                                                                  : mask.valid_lens[r];
      limit = heed::detail::valid_limit(len, num_keys);
    }
    if (mask.causal) {
      const index_t visible = heed::detail::causal_limit(q, num_queries, num_keys);
      limit = visible < limit ? visible : limit;
    }
    const index_t* s = mask.allowed_strides;
    allowed = mask.allowed == nullptr ? nullptr : mask.allowed + b * s[0] + h * s[1] + q * s[2];
    allowed_stride = s[3];
    const index_t* t = mask.additive_strides;
    additive = mask.additive == nullptr ? nullptr : mask.additive + b * t[0] + h * t[1] + q * t[2];
    additive_stride = t[3];
  }

  /// Key j's score after the masks, from x_j already loaded: -inf when masked, else
  /// x_j + additive. The mask loads do not wait on each other (no test between them), so
  /// a kernel that applies this to several keys in turn keeps their loads in flight.
  HEED_HD T apply(T x_j, index_t j) const {
    const bool visible = j < limit;
    const bool kept = !visible || allowed == nullptr || allowed[j * allowed_stride];
    const T added = visible && additive != nullptr ? additive[j * additive_stride] : T(0);
    if (!visible || !kept) return -INFINITY;
    return additive == nullptr ? x_j : x_j + added;
  }

  /// Key j's score as loaded: x[j] within the visible prefix, -inf beyond it (no read).
  HEED_HD T load(const T* x, index_t j) const { return j < limit ? x[j] : T(-INFINITY); }

  /// Key j's masked score, or -inf when masked.
  HEED_HD T score(const T* x, index_t j) const { return apply(load(x, j), j); }
};

// ---- fused attention: a row of scores at a time (attention_forward / _backward) ----------

/// Where score row r = (b · heads + h) · num_queries + q reads its keys and values.
struct AttentionRow {
  index_t b, h, q, kv;  // kv: the (b, kv head) block of keys and values
  HEED_HD AttentionRow(index_t r, const AttentionShape& s)
      : b(r / (s.num_queries * s.heads)),
        h((r / s.num_queries) % s.heads),
        q(r % s.num_queries),
        kv(b * s.kv_heads + h / (s.heads / s.kv_heads)) {}
};

/// Row r's dropout seed, as dropout() derives it from the weights' coordinates.
HEED_HD inline std::uint32_t attention_row_seed(const AttentionShape& s, const AttentionRow& at) {
  std::uint64_t key = heed::detail::dropout_rekey(s.key, at.b);
  if (s.four_d) key = heed::detail::dropout_rekey(key, at.h);
  return heed::detail::dropout_row_seed(heed::detail::dropout_rekey(key, at.q));
}

/// What key j's weight is multiplied by after dropout: 0 or 1 / (1 − p), 1 without it.
template <typename T>
HEED_HD inline T attention_kept(const AttentionShape& s, std::uint32_t seed, index_t j) {
  if (!s.dropout) return T(1);
  return heed::detail::dropout_drops(seed, j, s.threshold) ? T(0) : T(s.keep_scale);
}

template <typename T>
HEED_HD inline T dot(const T* x, const T* y, index_t n) {
  T sum = 0;
  for (index_t c = 0; c < n; ++c) sum += x[c] * y[c];
  return sum;
}

/// Row r of attention_forward: one pass over its visible keys with a running max, the
/// partial output rescaled when a larger score arrives (FlashAttention's online softmax).
/// A masked key is not read: NaN or inf in its value does not reach the output, which
/// the CPU's 0 · value would make NaN.
template <typename T>
HEED_HD inline void attention_forward_row(index_t r, T* out, T* lse, const T* queries, const T* keys, const T* values,
                                          const AttentionShape& s, const SoftmaxMask<T>& mask) {
  const SoftmaxRow<T> row(r, s.heads, s.num_queries, s.num_keys, mask);
  const AttentionRow at(r, s);
  const T* q = queries + r * s.d;
  const T* k = keys + at.kv * s.num_keys * s.d;
  const T* v = values + at.kv * s.num_keys * s.value_dim;
  T* o = out + r * s.value_dim;
  for (index_t c = 0; c < s.value_dim; ++c) o[c] = T(0);
  const std::uint32_t seed = s.dropout ? attention_row_seed(s, at) : 0u;
  T max = T(-INFINITY), sum = T(0);
  for (index_t j = 0; j < row.limit; ++j) {
    const T x = row.apply(dot(q, k + j * s.d, s.d), j);
    if (x == T(-INFINITY)) continue;
    if (x > max) {  // rescale what is summed so far (nothing, the first time)
      const T shrink = exp(max - x);
      sum *= shrink;
      for (index_t c = 0; c < s.value_dim; ++c) o[c] *= shrink;
      max = x;
    }
    const T p = exp(x - max);  // NaN for a NaN score: the row is NaN, as on the CPU
    sum += p;
    const T w = p * attention_kept<T>(s, seed, j);
    for (index_t c = 0; c < s.value_dim; ++c) o[c] += w * v[j * s.value_dim + c];
  }
  if (sum == T(0)) {  // no visible key: weights 0, output 0
    lse[r] = T(-INFINITY);
    return;
  }
  const T inverse = T(1) / sum;
  for (index_t c = 0; c < s.value_dim; ++c) o[c] *= inverse;
  lse[r] = max + log(sum);
}

/// Query row r of attention_backward: D = Σ dO ∘ O, and dQ = Σ_j dS_j k_j with
/// P_j = exp(s_j − lse), dS_j = P_j (kept_j · dO · v_j − D).
template <typename T>
HEED_HD inline void attention_backward_query_row(index_t r, T* d_queries, T* row_d, const T* queries, const T* keys,
                                                 const T* values, const T* out, const T* lse, const T* d_out,
                                                 const AttentionShape& s, const SoftmaxMask<T>& mask) {
  const SoftmaxRow<T> row(r, s.heads, s.num_queries, s.num_keys, mask);
  const AttentionRow at(r, s);
  const T* q = queries + r * s.d;
  const T* k = keys + at.kv * s.num_keys * s.d;
  const T* v = values + at.kv * s.num_keys * s.value_dim;
  const T* g = d_out + r * s.value_dim;
  T* dq = d_queries + r * s.d;
  for (index_t c = 0; c < s.d; ++c) dq[c] = T(0);
  const T D = dot(g, out + r * s.value_dim, s.value_dim);
  row_d[r] = D;
  if (lse[r] == T(-INFINITY)) return;
  const std::uint32_t seed = s.dropout ? attention_row_seed(s, at) : 0u;
  for (index_t j = 0; j < row.limit; ++j) {
    const T x = row.apply(dot(q, k + j * s.d, s.d), j);
    if (x == T(-INFINITY)) continue;
    const T p = exp(x - lse[r]);
    const T ds = p * (attention_kept<T>(s, seed, j) * dot(g, v + j * s.value_dim, s.value_dim) - D);
    for (index_t c = 0; c < s.d; ++c) dq[c] += ds * k[j * s.d + c];
  }
}

/// Key j of the (b, kv head) block kv of attention_backward, after every query row's D
/// (row_d): dK_j = Σ_r dS_rj q_r and dV_j = Σ_r P_rj kept_rj dO_r over the query rows of
/// the heads that read this kv head, in row order.
template <typename T>
HEED_HD inline void attention_backward_key_row(index_t kv, index_t j, T* d_keys, T* d_values, const T* row_d,
                                               const T* queries, const T* keys, const T* values, const T* lse,
                                               const T* d_out, const AttentionShape& s, const SoftmaxMask<T>& mask) {
  const T* k = keys + (kv * s.num_keys + j) * s.d;
  const T* v = values + (kv * s.num_keys + j) * s.value_dim;
  T* dk = d_keys + (kv * s.num_keys + j) * s.d;
  T* dv = d_values + (kv * s.num_keys + j) * s.value_dim;
  for (index_t c = 0; c < s.d; ++c) dk[c] = T(0);
  for (index_t c = 0; c < s.value_dim; ++c) dv[c] = T(0);
  const index_t b = kv / s.kv_heads, group = s.heads / s.kv_heads, h0 = (kv % s.kv_heads) * group;
  for (index_t h = h0; h < h0 + group; ++h)
    for (index_t i = 0; i < s.num_queries; ++i) {
      const index_t r = (b * s.heads + h) * s.num_queries + i;
      const SoftmaxRow<T> row(r, s.heads, s.num_queries, s.num_keys, mask);
      if (j >= row.limit || lse[r] == T(-INFINITY)) continue;
      const T* q = queries + r * s.d;
      const T x = row.apply(dot(q, k, s.d), j);
      if (x == T(-INFINITY)) continue;
      const T* g = d_out + r * s.value_dim;
      const T p = exp(x - lse[r]);
      const T kept = s.dropout ? attention_kept<T>(s, attention_row_seed(s, AttentionRow(r, s)), j) : T(1);
      const T ds = p * (kept * dot(g, v, s.value_dim) - row_d[r]);
      for (index_t c = 0; c < s.value_dim; ++c) dv[c] += p * kept * g[c];
      for (index_t c = 0; c < s.d; ++c) dk[c] += ds * q[c];
    }
}

/// Decoding's token choice, per token j of a row (top_log_probs): whether it may be
/// chosen (not −inf, not banned, not eos where the row bans it).
template <typename T>
HEED_HD inline bool choosable(T logit, index_t j, const std::int64_t* banned, index_t num_banned, bool no_eos,
                              std::int64_t eos) {
  if (logit == T(-INFINITY) || (no_eos && j == eos)) return false;
  for (index_t b = 0; b < num_banned; ++b)
    if (banned[b] == j) return false;
  return true;
}

/// Offers token j with log P to the n (<= count) best kept so far, best first: a later
/// token only displaces those it beats, so a tie keeps the earlier one (the CPU's
/// top_log_probs, scanning tokens in order).
template <typename T>
HEED_HD inline void keep_best(T* best, std::int64_t* best_token, index_t& n, index_t count, T log_prob,
                              std::int64_t j) {
  if (n == count && !(log_prob > best[n - 1])) return;
  index_t at = n < count ? n++ : n - 1;
  for (; at > 0 && log_prob > best[at - 1]; --at) {
    best[at] = best[at - 1];
    best_token[at] = best_token[at - 1];
  }
  best[at] = log_prob;
  best_token[at] = j;
}

/// Element e = (b, j) of one GRU step (gru_cell_forward): writes its four gates and h'.
template <typename T>
HEED_HD inline void gru_cell_forward_one(index_t e, T* gates, T* h_next, const T* gi, const T* gh, const T* h_prev,
                                         index_t H) {
  namespace rules = heed::detail;
  const index_t b = e / H, j = e % H, in = b * 3 * H + j, g = b * 4 * H + j;
  const T r = rules::sigmoid_value(gi[in] + gh[in]);
  const T z = rules::sigmoid_value(gi[in + H] + gh[in + H]);
  const T hn = gh[in + 2 * H];
  const T n = rules::tanh_value(gi[in + 2 * H] + r * hn);
  gates[g] = r;
  gates[g + H] = z;
  gates[g + 2 * H] = n;
  gates[g + 3 * H] = hn;
  h_next[e] = n + z * (h_prev[e] - n);
}

/// Element e = (b, j) of gru_cell_backward, as heed/ops/gru.hpp's CPU loop computes it.
template <typename T>
HEED_HD inline void gru_cell_backward_one(index_t e, T* dgi, T* dgh, T* dh_direct, const T* gates, const T* h_prev,
                                          const T* dh, index_t H) {
  const index_t b = e / H, j = e % H, out = b * 3 * H + j, g = b * 4 * H + j;
  const T r = gates[g], z = gates[g + H], n = gates[g + 2 * H], hn = gates[g + 3 * H];
  // forward: h' = n + z ⊙ (h − n), n = tanh(gi_n + r ⊙ hn)
  const T dn_pre = dh[e] * (T(1) - z) * (T(1) - n * n);
  const T dz_pre = dh[e] * (h_prev[e] - n) * z * (T(1) - z);
  const T dr_pre = dn_pre * hn * r * (T(1) - r);
  dgi[out] = dgh[out] = dr_pre;
  dgi[out + H] = dgh[out + H] = dz_pre;
  dgi[out + 2 * H] = dn_pre;
  dgh[out + 2 * H] = dn_pre * r;
  dh_direct[e] = dh[e] * z;
}

/// A row-major product C = op(A) · op(B) (op(A) m × k, op(B) k × n) as the column-major
/// call cuBLAS takes. Read column-major, row-major C is Cᵀ (n × m), and Cᵀ = op(B)ᵀ ·
/// op(A)ᵀ: the call swaps the operands and keeps each one's layout, with no copy. A
/// row-major B that is not transposed (k × n) reads column-major as Bᵀ = op(B)ᵀ
/// itself (no op, leading dim n); a transposed one (stored n × k) reads as Bᵀ whose
/// transpose is wanted (op T, leading dim k). The same holds for A, with m for n.
struct ColumnMajorGemm {
  bool trans_first, trans_second;  // op of the first operand (B) and the second (A)
  index_t rows, cols, inner;       // of the column-major C: n, m, k
  index_t ld_first, ld_second, ld_c;
};

inline ColumnMajorGemm column_major_gemm(bool trans_a, bool trans_b, index_t m, index_t n, index_t k) {
  return ColumnMajorGemm{trans_b, trans_a, n, m, k, trans_b ? k : n, trans_a ? m : k, n};
}

}  // namespace heed::cuda::kernels
