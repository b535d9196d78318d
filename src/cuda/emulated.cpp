// src/cuda/emulated.cpp — the CUDA backend's API (heed/cuda/runtime.hpp) run on the
// host, for testing without a GPU (CMake option HEED_CUDA_EMULATION).
//
// It emulates one device, "cuda:0", whose memory is host memory that heed treats as
// device memory: every op takes its CUDA code path (dispatch, device checks, the
// arguments each kernel gets), and each kernel here runs the per-element and per-row
// arithmetic the real kernels share with it (kernels.cuh), in plain loops. What it
// cannot check is what only a GPU does: launches, warp reductions, cuBLAS itself, and
// the TF32/bf16 math modes (products here are exact, but for a call's bf16_products,
// whose operands it rounds). cuBLAS's column-major call is emulated by a reference GEMM
// that reads its arguments as cuBLAS would.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <vector>

#include "caching_allocator.hpp"
#include "heed/core/error.hpp"
#include "instantiate.hpp"
#include "kernels.cuh"

namespace heed::cuda {
namespace {

detail::CachingAllocator& allocator() {
  static auto* instance = new detail::CachingAllocator;  // never destroyed, as on a GPU
  return *instance;
}

void check_device(int device, const char* call) {
  if (device != 0)
    throw CudaError(heed::detail::concat(call, " on cuda:", device,
                                         ": cudaErrorInvalidDevice (the emulation has one device, cuda:0)"));
}

std::atomic<MathMode> g_math_mode{MathMode::float32};

/// x rounded to the nearest bf16 (ties to even), as a float: NaN stays NaN.
float to_bf16(float x) {
  std::uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  if ((bits & 0x7FFFFFFFu) > 0x7F800000u) return x;
  bits = (bits + 0x7FFFu + ((bits >> 16) & 1u)) & 0xFFFF0000u;
  std::memcpy(&x, &bits, sizeof x);
  return x;
}
double to_bf16(double x) { return x; }  // bf16 products are float's

/// cublasGemmStridedBatchedEx's arithmetic for one product, column-major; with
/// bf16_products, of the operands rounded to bf16 (its CUBLAS_COMPUTE_32F_FAST_16BF).
template <typename T>
void reference_gemm(const kernels::ColumnMajorGemm& call, const T* first, const T* second, T* c, bool bf16_products) {
  for (index_t j = 0; j < call.cols; ++j)
    for (index_t i = 0; i < call.rows; ++i) {
      T sum = 0;
      for (index_t l = 0; l < call.inner; ++l) {
        T x = call.trans_first ? first[l + i * call.ld_first] : first[i + l * call.ld_first];
        T y = call.trans_second ? second[j + l * call.ld_second] : second[l + j * call.ld_second];
        if (bf16_products) x = to_bf16(x), y = to_bf16(y);
        sum += x * y;
      }
      c[i + j * call.ld_c] = sum;
    }
}

bool row_counts(const CrossEntropyRows& rows, index_t r) {
  return rows.lens == nullptr || r % rows.steps < rows.lens[r / rows.steps];
}

void host_free(void* p) { std::free(p); }

}  // namespace

const char* backend_name() { return "CUDA (emulated on the host)"; }

int device_count() { return 1; }

void synchronize(int device) { check_device(device, "cudaStreamSynchronize"); }

void* allocate(int device, std::size_t bytes) {
  check_device(device, "cudaMalloc");
  void* p = allocator().allocate(
      bytes, [](std::size_t size) { return std::aligned_alloc(64, (size + 63) / 64 * 64); }, host_free);
  if (p == nullptr)
    throw CudaError(heed::detail::concat("cudaMalloc (", bytes, " bytes) on cuda:0: cudaErrorMemoryAllocation"));
  return p;
}

void release(int, void* ptr, std::size_t) noexcept { allocator().release(ptr); }
void empty_cache() { allocator().free_idle(host_free); }
std::size_t allocated_bytes(int device) { return check_device(device, "allocated_bytes"), allocator().live_bytes(); }
std::size_t cached_bytes(int device) { return check_device(device, "cached_bytes"), allocator().idle_bytes(); }
std::size_t malloc_count(int device) { return check_device(device, "malloc_count"), allocator().mallocs(); }

void copy_to_device(int device, void* dst, const void* src, std::size_t bytes) {
  check_device(device, "cudaMemcpyAsync");
  std::memcpy(dst, src, bytes);
}
void copy_to_host(int device, void* dst, const void* src, std::size_t bytes) {
  check_device(device, "cudaMemcpyAsync");
  std::memcpy(dst, src, bytes);
}
void copy_on_device(int device, void* dst, const void* src, std::size_t bytes) {
  check_device(device, "cudaMemcpyAsync");
  std::memmove(dst, src, bytes);
}

void set_math_mode(MathMode mode) { g_math_mode = mode; }
MathMode math_mode() { return g_math_mode; }

template <typename T>
void gemm_strided_batched(int device, bool trans_a, bool trans_b, index_t m, index_t n, index_t k, const T* a,
                          index_t stride_a, const T* b, index_t stride_b, T* c, index_t stride_c, index_t batches,
                          bool bf16_products) {
  check_device(device, "cublasGemmStridedBatchedEx");
  const kernels::ColumnMajorGemm call = kernels::column_major_gemm(trans_a, trans_b, m, n, k);
  for (index_t i = 0; i < batches; ++i)
    reference_gemm(call, b + i * stride_b, a + i * stride_a, c + i * stride_c, bf16_products);
}

template <typename T>
void fill(int device, T* out, index_t n, T value) {
  check_device(device, "fill");
  std::fill(out, out + n, value);
}

template <typename T>
void binary(int device, BinaryOp op, T* out, const T* a, const StridedShape& a_shape, const T* b,
            const StridedShape& b_shape) {
  check_device(device, "binary");
  const index_t n = kernels::numel(a_shape);
  for (index_t i = 0; i < n; ++i)
    out[i] = kernels::apply(op, a[kernels::strided_offset(i, a_shape)], b[kernels::strided_offset(i, b_shape)]);
}

template <typename T>
void copy_strided(int device, T* out, const T* x, const StridedShape& src) {
  check_device(device, "copy_strided");
  const index_t n = kernels::numel(src);
  for (index_t i = 0; i < n; ++i) out[i] = x[kernels::strided_offset(i, src)];
}

template <typename T>
void copy_into_strided(int device, T* dx, const T* g, const StridedShape& dst) {
  check_device(device, "copy_into_strided");
  const index_t n = kernels::numel(dst);
  for (index_t i = 0; i < n; ++i) dx[kernels::strided_offset(i, dst)] = g[i];
}

template <typename T>
void unary(int device, UnaryOp op, T* out, const T* x, index_t n) {
  check_device(device, "unary");
  for (index_t i = 0; i < n; ++i) out[i] = kernels::unary_forward(op, x[i]);
}

template <typename T>
void unary_backward(int device, UnaryOp op, T* dx, const T* g, const T* saved, index_t n) {
  check_device(device, "unary_backward");
  for (index_t i = 0; i < n; ++i) dx[i] = kernels::unary_grad(op, g[i], saved[i]);
}

template <typename T>
void dropout(int device, T* out, T* mask, const T* x, const StridedShape& shape, std::uint64_t key,
             std::uint32_t threshold, T scale) {
  check_device(device, "dropout");
  const index_t n = kernels::numel(shape);
  for (index_t i = 0; i < n; ++i) {
    mask[i] = kernels::dropout_drops(i, shape, key, threshold) ? T(0) : scale;
    out[i] = x[i] * mask[i];
  }
}

template <typename T>
void adam_step(int device, T* p, T* m, T* v, const T* g, index_t n, const AdamStep& step) {
  check_device(device, "adam_step");
  const T beta1 = T(step.beta1), beta2 = T(step.beta2);
  const T one_minus_beta1 = T(1.0 - step.beta1), one_minus_beta2 = T(1.0 - step.beta2);
  const T weight_decay = T(step.weight_decay), minus_step_size = T(-step.step_size);
  const T sqrt_bc2 = T(step.sqrt_bias_correction2), eps = T(step.eps);
  for (index_t i = 0; i < n; ++i) {
    const T grad = step.weight_decay == 0.0 ? g[i] : g[i] + weight_decay * p[i];
    m[i] = m[i] * beta1 + one_minus_beta1 * grad;
    v[i] = v[i] * beta2 + (one_minus_beta2 * grad) * grad;
    p[i] += (minus_step_size * m[i]) / (std::sqrt(v[i]) / sqrt_bc2 + eps);
  }
}

template <typename T>
void sum_of_squares(int device, double* total, const T* x, index_t n) {
  check_device(device, "sum_of_squares");
  double sum = 0;
  for (index_t i = 0; i < n; ++i) sum += double(x[i]) * double(x[i]);
  *total += sum;
}

template <typename T>
void layer_norm_forward(int device, T* out, T* mean, T* rstd, const T* x, const T* weight, const T* bias, index_t rows,
                        index_t n, double eps) {
  check_device(device, "layer_norm_forward");
  for (index_t r = 0; r < rows; ++r) {
    const T* in = x + r * n;
    T sum = 0, squares = 0;
    for (index_t j = 0; j < n; ++j) sum += in[j];
    const T mu = sum / T(n);
    for (index_t j = 0; j < n; ++j) squares += (in[j] - mu) * (in[j] - mu);
    const T sigma_inv = T(1) / std::sqrt(squares / T(n) + T(eps));
    mean[r] = mu;
    rstd[r] = sigma_inv;
    for (index_t j = 0; j < n; ++j) {
      T y = (in[j] - mu) * sigma_inv;
      if (weight != nullptr) y *= weight[j];
      if (bias != nullptr) y += bias[j];
      out[r * n + j] = y;
    }
  }
}

template <typename T>
void layer_norm_backward(int device, T* dx, T* dweight, T* dbias, const T* g, const T* x, const T* mean, const T* rstd,
                         const T* weight, index_t rows, index_t n) {
  check_device(device, "layer_norm_backward");
  for (index_t r = 0; r < rows && dx != nullptr; ++r) {
    T sum_g = 0, sum_gx = 0;
    for (index_t j = 0; j < n; ++j) {
      const T g_hat = weight != nullptr ? g[r * n + j] * weight[j] : g[r * n + j];
      sum_g += g_hat;
      sum_gx += g_hat * ((x[r * n + j] - mean[r]) * rstd[r]);
    }
    for (index_t j = 0; j < n; ++j) {
      const T g_hat = weight != nullptr ? g[r * n + j] * weight[j] : g[r * n + j];
      dx[r * n + j] = rstd[r] * (g_hat - sum_g / T(n) - ((x[r * n + j] - mean[r]) * rstd[r]) * (sum_gx / T(n)));
    }
  }
  for (index_t j = 0; j < n && (dweight != nullptr || dbias != nullptr); ++j) {
    T dw = 0, db = 0;
    for (index_t r = 0; r < rows; ++r) {
      dw += g[r * n + j] * ((x[r * n + j] - mean[r]) * rstd[r]);
      db += g[r * n + j];
    }
    if (dweight != nullptr) dweight[j] = dw;
    if (dbias != nullptr) dbias[j] = db;
  }
}

template <typename T>
void embedding_forward(int device, T* out, const T* weight, const std::int64_t* indices, index_t count,
                       index_t num_embeddings, index_t dim) {
  check_device(device, "embedding_forward");
  for (index_t e = 0; e < count * dim; ++e) {
    const std::int64_t v = indices[e / dim];
    out[e] = v >= 0 && v < num_embeddings ? weight[v * dim + e % dim] : T(NAN);
  }
}

template <typename T>
void embedding_backward(int device, T* dweight, const T* g, const std::int64_t* indices, index_t count,
                        index_t num_embeddings, index_t dim) {
  check_device(device, "embedding_backward");
  for (index_t e = 0; e < num_embeddings * dim; ++e) {
    T total = 0;
    for (index_t i = 0; i < count; ++i)
      if (indices[i] == e / dim) total += g[i * dim + e % dim];
    dweight[e] = total;
  }
}

template <typename T>
void cross_entropy_forward(int device, T* loss, T* stats, const T* x, const CrossEntropyRows& rows) {
  check_device(device, "cross_entropy_forward");
  const index_t c = rows.classes;
  for (index_t r = 0; r < rows.rows; ++r) {
    if (!row_counts(rows, r)) {
      loss[r] = stats[2 * r] = stats[2 * r + 1] = T(0);
      continue;
    }
    const T* row = x + r * c;
    const T eps = T(rows.label_smoothing);
    T max = -INFINITY, sum = 0, row_sum = 0;
    for (index_t j = 0; j < c; ++j) max = std::max(max, row[j]);
    for (index_t j = 0; j < c; ++j) sum += std::exp(row[j] - max);
    for (index_t j = 0; j < c; ++j) row_sum += row[j];
    const std::int64_t label = rows.labels[r];
    stats[2 * r] = max;
    stats[2 * r + 1] = std::log(sum);
    // ε of heed/ops/cross_entropy.hpp: the target's share of the row's mean logit.
    // A label out of range reads nothing: its loss is NaN.
    const bool valid = label >= 0 && label < c;
    const T label_logit = valid ? row[label] : T(0);
    const T target =
        eps == T(0) ? label_logit - max : (T(1) - eps) * (label_logit - max) + eps * (row_sum / T(c) - max);
    loss[r] = valid ? stats[2 * r + 1] - target : T(NAN);
  }
}

template <typename T>
void cross_entropy_backward(int device, T* dx, const T* x, const T* stats, const CrossEntropyRows& rows, const T* g,
                            index_t g_stride, T divisor) {
  check_device(device, "cross_entropy_backward");
  const index_t c = rows.classes;
  for (index_t r = 0; r < rows.rows; ++r) {
    const bool counts = row_counts(rows, r);
    const T k = counts ? g[r / g_stride] / divisor : T(0);
    const T eps = T(rows.label_smoothing), spread = k * eps / T(c), at_label = (T(1) - eps) * k;
    for (index_t j = 0; j < c; ++j) {
      const T target =
          eps == T(0) ? (j == rows.labels[r] ? k : T(0)) : spread + (j == rows.labels[r] ? at_label : T(0));
      dx[r * c + j] = counts ? std::exp((x[r * c + j] - stats[2 * r]) - stats[2 * r + 1]) * k - target : T(0);
    }
  }
}

template <typename T>
void clip_by_norm(int device, T* x, index_t n, const double* sum_of_squares, double max_norm) {
  check_device(device, "clip_by_norm");
  const double norm = std::sqrt(*sum_of_squares);
  if (!(norm > max_norm)) return;
  const T scale = T(max_norm / norm);
  for (index_t i = 0; i < n; ++i) x[i] *= scale;
}

template <typename T>
void affine(int device, T* out, const T* x, index_t n, T alpha, T beta) {
  check_device(device, "affine");
  for (index_t i = 0; i < n; ++i) out[i] = alpha * x[i] + beta;
}

template <typename T>
void axpy(int device, T* dst, const T* src, index_t n, T alpha) {
  check_device(device, "axpy");
  for (index_t i = 0; i < n; ++i) dst[i] += alpha * src[i];
}

template <typename T>
void sum_to(int device, T* out, index_t n_out, const T* g, const StridedShape& out_strides) {
  check_device(device, "sum_to");
  if (kernels::numel(out_strides) == 0) {
    std::fill(out, out + n_out, T(0));
    return;
  }
  const kernels::SumPlan plan = kernels::make_sum_plan(out_strides);
  for (index_t o = 0; o < n_out; ++o) out[o] = kernels::sum_one(o, g, plan);
}

template <typename T>
void masked_softmax_forward(int device, T* out, const T* scores, index_t batch, index_t heads, index_t num_queries,
                            index_t num_keys, const SoftmaxMask<T>& mask) {
  check_device(device, "masked_softmax_forward");
  const index_t rows = batch * heads * num_queries;
  for (index_t r = 0; r < rows && num_keys > 0; ++r) {
    const kernels::SoftmaxRow<T> row(r, heads, num_queries, num_keys, mask);
    const T* x = scores + r * num_keys;
    T* y = out + r * num_keys;
    T max = -INFINITY;
    for (index_t j = 0; j < num_keys; ++j) max = std::max(max, row.score(x, j));
    T sum = 0;
    for (index_t j = 0; j < num_keys; ++j) {
      const T s = row.score(x, j);
      y[j] = s == -INFINITY ? T(0) : std::exp(s - max);
      sum += y[j];
    }
    const T scale = max == -INFINITY ? T(0) : T(1) / sum;
    for (index_t j = 0; j < num_keys; ++j) y[j] *= scale;
  }
}

template <typename T>
void softmax_backward(int device, T* grad_in, const T* grad_out, const T* y, index_t rows, index_t cols) {
  check_device(device, "softmax_backward");
  for (index_t r = 0; r < rows; ++r) {
    T dot = 0;
    for (index_t j = 0; j < cols; ++j) dot += grad_out[r * cols + j] * y[r * cols + j];
    for (index_t j = 0; j < cols; ++j) grad_in[r * cols + j] = y[r * cols + j] * (grad_out[r * cols + j] - dot);
  }
}

template <typename T>
void attention_forward(int device, T* out, T* lse, const T* queries, const T* keys, const T* values,
                       const AttentionShape& shape, const SoftmaxMask<T>& mask) {
  check_device(device, "attention_forward");
  for (index_t r = 0; r < shape.batch * shape.heads * shape.num_queries; ++r)
    kernels::attention_forward_row(r, out, lse, queries, keys, values, shape, mask);
}

template <typename T>
void attention_backward(int device, T* d_queries, T* d_keys, T* d_values, T* row_d, const T* queries, const T* keys,
                        const T* values, const T* out, const T* lse, const T* d_out, const AttentionShape& shape,
                        const SoftmaxMask<T>& mask) {
  check_device(device, "attention_backward");
  for (index_t r = 0; r < shape.batch * shape.heads * shape.num_queries; ++r)
    kernels::attention_backward_query_row(r, d_queries, row_d, queries, keys, values, out, lse, d_out, shape, mask);
  for (index_t kv = 0; kv < shape.batch * shape.kv_heads; ++kv)
    for (index_t j = 0; j < shape.num_keys; ++j)
      kernels::attention_backward_key_row(kv, j, d_keys, d_values, row_d, queries, keys, values, lse, d_out, shape,
                                          mask);
}

template <typename T>
void compare(int device, CompareOp op, bool* out, const T* a, const StridedShape& a_shape, const T* b,
             const StridedShape& b_shape) {
  check_device(device, "compare");
  for (index_t i = 0, n = kernels::numel(a_shape); i < n; ++i)
    out[i] = kernels::compare(op, a[kernels::strided_offset(i, a_shape)], b[kernels::strided_offset(i, b_shape)]);
}

template <typename T>
void where(int device, T* out, const bool* cond, const StridedShape& cond_shape, const T* a,
           const StridedShape& a_shape, const T* b, const StridedShape& b_shape) {
  check_device(device, "where");
  for (index_t i = 0, n = kernels::numel(cond_shape); i < n; ++i)
    out[i] = cond[kernels::strided_offset(i, cond_shape)] ? a[kernels::strided_offset(i, a_shape)]
                                                          : b[kernels::strided_offset(i, b_shape)];
}

template <typename T>
void clamp(int device, T* out, const T* x, index_t n, T lo, T hi) {
  check_device(device, "clamp");
  for (index_t i = 0; i < n; ++i) out[i] = heed::detail::clamp_value(x[i], lo, hi);
}

template <typename T>
void clamp_backward(int device, T* dx, const T* g, const T* x, index_t n, T lo, T hi) {
  check_device(device, "clamp_backward");
  for (index_t i = 0; i < n; ++i) dx[i] = heed::detail::clamp_grad(g[i], x[i], lo, hi);
}

template <typename T>
void extreme_along(int device, T* values, std::int64_t* indices, const T* x, index_t outer, index_t size, index_t inner,
                   bool largest) {
  check_device(device, "extreme_along");
  for (index_t o = 0; o < outer * inner; ++o) kernels::extreme_one(o, values, indices, x, size, inner, largest);
}

template <typename T>
void scatter_along(int device, T* dx, const T* g, const std::int64_t* indices, index_t outer, index_t size,
                   index_t inner) {
  check_device(device, "scatter_along");
  for (index_t o = 0; o < outer * inner; ++o) dx[((o / inner) * size + indices[o]) * inner + o % inner] = g[o];
}

template <typename T>
void gru_cell_forward(int device, T* gates, T* h_next, const T* gi, const T* gh, const T* h_prev, index_t B,
                      index_t H) {
  check_device(device, "gru_cell_forward");
  for (index_t e = 0; e < B * H; ++e) kernels::gru_cell_forward_one(e, gates, h_next, gi, gh, h_prev, H);
}

template <typename T>
void gru_cell_backward(int device, T* dgi, T* dgh, T* dh_direct, const T* gates, const T* h_prev, const T* dh,
                       index_t B, index_t H) {
  check_device(device, "gru_cell_backward");
  for (index_t e = 0; e < B * H; ++e) kernels::gru_cell_backward_one(e, dgi, dgh, dh_direct, gates, h_prev, dh, H);
}

template <typename T>
void sample_tokens(int device, T* log_probs, std::int64_t* tokens, std::int64_t* found, const T* logits, index_t rows,
                   index_t V, const std::int64_t* banned, index_t num_banned, const std::int64_t* eos_banned,
                   std::int64_t eos, double temperature, index_t top_k, const double* uniforms) {
  check_device(device, "sample_tokens");
  if (top_k < 0 || top_k > kDeviceTopTokens || !(temperature > 0.0))
    throw CudaError(heed::detail::concat("sample_tokens on cuda:0: top_k ", top_k, " is not in [0, ", kDeviceTopTokens,
                                         "] or temperature ", temperature, " is not positive"));
  std::vector<double> p(static_cast<std::size_t>(V)), values;
  for (index_t r = 0; r < rows; ++r) {
    const T* row = logits + r * V;
    T max = -INFINITY, kept_max = -INFINITY;
    for (index_t j = 0; j < V; ++j) max = row[j] > max ? row[j] : max;
    T sum = 0;
    for (index_t j = 0; j < V; ++j) sum += std::exp(row[j] - max);
    const T normaliser = max + std::log(sum);
    const auto allowed = [&](index_t j) {
      return kernels::choosable(row[j], j, banned, num_banned, eos_banned[r] != 0, eos);
    };
    index_t count = 0;
    for (index_t j = 0; j < V; ++j)
      if (allowed(j)) kept_max = row[j] > kept_max ? row[j] : kept_max, ++count;
    found[r] = 0;
    if (!(kept_max > T(-INFINITY))) continue;
    // heed/seq2seq/token_choice.hpp's sample_token, step for step.
    for (index_t j = 0; j < V; ++j)
      p[static_cast<std::size_t>(j)] =
          allowed(j) ? std::exp(static_cast<double>(row[j] - kept_max) / temperature) : 0.0;
    if (top_k > 0 && top_k < count) {
      values = p;
      std::nth_element(values.begin(), values.begin() + (top_k - 1), values.end(), std::greater<double>());
      const double threshold = values[static_cast<std::size_t>(top_k - 1)];
      for (double& q : p)
        if (q < threshold) q = 0.0;
    }
    double total = 0.0;
    for (const double q : p) total += q;
    const double u = uniforms[r] * total;
    double running = 0.0;
    index_t chosen = -1;
    for (index_t j = 0; j < V; ++j) {
      const double q = p[static_cast<std::size_t>(j)];
      if (q <= 0.0) continue;
      chosen = j;
      running += q;
      if (running > u) break;
    }
    log_probs[r] = row[chosen] - normaliser;
    tokens[r] = chosen;
    found[r] = 1;
  }
}

template <typename T>
void top_log_probs(int device, T* log_probs, std::int64_t* tokens, std::int64_t* found, const T* logits, index_t rows,
                   index_t V, index_t count, const std::int64_t* banned, index_t num_banned,
                   const std::int64_t* eos_banned, std::int64_t eos) {
  check_device(device, "top_log_probs");
  if (count < 0 || count > kDeviceTopTokens)
    throw CudaError(
        heed::detail::concat("top_log_probs on cuda:0: count ", count, " is not in [0, ", kDeviceTopTokens, "]"));
  for (index_t r = 0; r < rows; ++r) {
    const T* row = logits + r * V;
    T max = -INFINITY;
    for (index_t j = 0; j < V; ++j) max = row[j] > max ? row[j] : max;
    T sum = 0;
    for (index_t j = 0; j < V; ++j) sum += std::exp(row[j] - max);
    const T normaliser = max + std::log(sum);
    T* best = log_probs + r * count;
    std::int64_t* best_token = tokens + r * count;
    index_t n = 0;
    for (index_t j = 0; count > 0 && j < V; ++j)
      if (kernels::choosable(row[j], j, banned, num_banned, eos_banned[r] != 0, eos))
        kernels::keep_best(best, best_token, n, count, row[j] - normaliser, j);
    found[r] = n;
  }
}

HEED_CUDA_INSTANTIATE(HEED_DEVICE_KERNELS)
HEED_CUDA_INSTANTIATE_FILL(float)
HEED_CUDA_INSTANTIATE_FILL(double)
HEED_CUDA_INSTANTIATE_FILL(std::int64_t)
HEED_CUDA_INSTANTIATE_FILL(bool)

}  // namespace heed::cuda
