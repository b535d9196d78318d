// heed/cuda/runtime.hpp — the compiled part of the CUDA backend, as plain C++.
//
// heed is header-only on the CPU. CUDA kernels must be compiled by nvcc, and heed's
// ops are templates compiled by the user's C++ compiler, so the backend is split: the
// kernels, cuBLAS calls, streams and the device allocator live in a small static
// library built from src/cuda/*.cu (CMake target heed::cuda, which also defines
// HEED_WITH_CUDA for every translation unit that links it, so that each one registers
// the backend: heed/core/backend.hpp). The ops reach these functions only through the
// backend's kernel table (heed/ops/kernels.hpp, implemented in src/cuda/backend.cpp);
// users call the ones below the kernels' (the allocator's figures, the math mode).
// Nothing here needs a CUDA header, so a user's .cpp files stay plain C++.
//
// The kernels' entry points are templates defined for T = float and double (fill also
// for std::int64_t and bool), each instantiated by the backend (src/cuda/instantiate.hpp).
//
// Every function runs on the device's one stream (created on first use) and returns
// without waiting, except the copies to the host, which wait for their data. Failures
// of the CUDA runtime or of cuBLAS throw heed::CudaError naming the call and the code.
#pragma once

#include <cstddef>
#include <cstdint>

#include "heed/ops/vocabulary.hpp"

namespace heed::cuda {

using index_t = std::int64_t;
// The ops' vocabulary (heed/ops/vocabulary.hpp), by the names the kernels use.
using heed::AdamStep;
using heed::BinaryOp;
using heed::CrossEntropyRows;
using heed::LensForm;
using heed::SoftmaxMask;
using heed::StridedShape;
using heed::UnaryOp;
constexpr int kMaxRank = kMaxKernelRank;

// ---- the backend ----------------------------------------------------------------------------

/// Registers this library's backend for Device::cuda() (heed/core/backend.hpp) once;
/// every file compiled as part of a target linking heed::cuda calls it at start-up.
bool register_backend() noexcept;
/// "CUDA", or "CUDA (emulated on the host)" for the emulation that CI runs.
const char* backend_name();

// ---- devices, memory, copies ------------------------------------------------------------

/// CUDA devices usable by this process; 0 without a driver or a GPU (never throws).
int device_count();
/// Waits for everything queued on the device's stream.
void synchronize(int device);

/// At least `bytes` of device memory from the caching allocator: freed blocks of the
/// same size class are reused, so a training loop calls cudaMalloc only while its peak
/// grows. Never managed memory.
void* allocate(int device, std::size_t bytes);
/// Returns a block from allocate() to the cache. Later work on the device's stream is
/// ordered after earlier work, so the block is reusable at once.
void release(int device, void* ptr, std::size_t bytes) noexcept;
/// Frees the idle cached blocks of every device (cudaFree).
void empty_cache();
/// Bytes held by live tensors, and bytes cached idle, on a device.
std::size_t allocated_bytes(int device);
std::size_t cached_bytes(int device);
/// cudaMalloc calls made so far on a device (a test checks the steady state makes none).
std::size_t malloc_count(int device);

void copy_to_device(int device, void* dst, const void* src, std::size_t bytes);
/// Waits for the device's stream, then for the copy.
void copy_to_host(int device, void* dst, const void* src, std::size_t bytes);
void copy_on_device(int device, void* dst, const void* src, std::size_t bytes);

// ---- matrix products ---------------------------------------------------------------------

/// How float products run on the tensor cores. float32: exact IEEE float products.
/// tf32: inputs rounded to TF32 (10-bit mantissa), relative error about 1e-3.
/// bf16: inputs rounded to bfloat16 (7-bit mantissa), relative error about 1e-2.
/// Double products are always exact.
enum class MathMode { float32, tf32, bf16 };
void set_math_mode(MathMode mode);
MathMode math_mode();

/// For each of `batches` products: C = op(A) · op(B), row-major, op(A) m × k, op(B)
/// k × n, op transposing the stored matrix when asked; matrix i of each operand starts
/// i · stride elements after the first (stride 0 reuses one matrix).
template <typename T>
void gemm_strided_batched(int device, bool trans_a, bool trans_b, index_t m, index_t n, index_t k, const T* a,
                          index_t stride_a, const T* b, index_t stride_b, T* c, index_t stride_c, index_t batches);

// ---- element-wise ---------------------------------------------------------------------------

template <typename T>
void fill(int device, T* out, index_t n, T value);

/// out (contiguous, `a_shape.sizes`) = a op b, each read through its broadcast strides.
template <typename T>
void binary(int device, BinaryOp op, T* out, const T* a, const StridedShape& a_shape, const T* b,
            const StridedShape& b_shape);

/// out[i] = x[strided_offset(i)]: out is contiguous with `src.sizes`, x read through
/// `src.strides` (permute, slice, repeat, expand).
template <typename T>
void gather(int device, T* out, const T* x, const StridedShape& src);
/// dx[strided_offset(i)] = g[i], the adjoint of gather where no two i share a position
/// (permute, slice): dx's other elements are left as they are.
template <typename T>
void scatter(int device, T* dx, const T* g, const StridedShape& dst);

/// Dropout's mask and output, element for element what heed/ops/dropout.hpp computes
/// on the CPU for the same key (mix of the generator's draw), threshold (p · 2³²) and
/// scale (1 / (1 − p)): mask = 0 or scale, out = x · mask. `shape.sizes` are x's.
template <typename T>
void dropout(int device, T* out, T* mask, const T* x, const StridedShape& shape, std::uint64_t key,
             std::uint32_t threshold, T scale);

/// out = op(x), n elements.
template <typename T>
void unary(int device, UnaryOp op, T* out, const T* x, index_t n);
/// dx = g · op'(x), from `saved`: the op's result y for exp, sqrt, tanh, sigmoid and
/// relu, its input x for the others (what heed's CPU ops keep for backward).
template <typename T>
void unary_backward(int device, UnaryOp op, T* dx, const T* g, const T* saved, index_t n);

/// out = alpha · x + beta, n elements (copies, negation, scalar arithmetic); out may be x.
template <typename T>
void affine(int device, T* out, const T* x, index_t n, T alpha, T beta);

/// dst += alpha · src, n elements.
template <typename T>
void axpy(int device, T* dst, const T* src, index_t n, T alpha);

/// out (contiguous, n_out elements) = the sum of g over the dims it was broadcast
/// along: g has `g_shape.sizes` (contiguous); `out_strides.strides` gives, for each of
/// g's dims, the stride into out (0 for a summed dim). Each output is summed in one
/// fixed order, so results do not depend on the launch.
template <typename T>
void sum_to(int device, T* out, index_t n_out, const T* g, const StridedShape& out_strides);

/// p, m, v updated in place by one Adam step, in PyTorch's order of operations (see
/// heed/optim/adam.hpp); g is the gradient, n elements each.
template <typename T>
void adam_step(int device, T* p, T* m, T* v, const T* g, index_t n, const AdamStep& step);

/// Σ x², accumulated in double (clip_grad_norm), added into *total on the device.
template <typename T>
void sum_of_squares(int device, double* total, const T* x, index_t n);

/// x *= max_norm / √(*sum_of_squares) when that norm exceeds max_norm, decided on the
/// device (clip_grad_norm without reading the norm back).
template <typename T>
void clip_by_norm(int device, T* x, index_t n, const double* sum_of_squares, double max_norm);

// ---- rows: layer norm, embedding, cross-entropy --------------------------------------------

/// Normalises each of `rows` rows of n elements: out = (x − mean) · rstd · weight + bias
/// (weight and bias may be null), keeping each row's mean and rstd = 1 / √(var + eps).
template <typename T>
void layer_norm_forward(int device, T* out, T* mean, T* rstd, const T* x, const T* weight, const T* bias, index_t rows,
                        index_t n, double eps);
/// The gradients of layer_norm_forward; each of dx, dweight, dbias may be null (not
/// wanted), weight may be null (none).
template <typename T>
void layer_norm_backward(int device, T* dx, T* dweight, T* dbias, const T* g, const T* x, const T* mean, const T* rstd,
                         const T* weight, index_t rows, index_t n);

/// out[i] = weight[indices[i]], rows of dim; an index out of range gives a row of NaN
/// (the device cannot throw).
template <typename T>
void embedding_forward(int device, T* out, const T* weight, const std::int64_t* indices, index_t count,
                       index_t num_embeddings, index_t dim);
/// dweight[v] = Σ over i with indices[i] = v of g[i], summed in the order of i.
template <typename T>
void embedding_backward(int device, T* dweight, const T* g, const std::int64_t* indices, index_t count,
                        index_t num_embeddings, index_t dim);

/// loss[r] = logsumexp(x_r) − x_r[label] (0 for rows that do not count), stats[2r..] =
/// (max, log Σ exp(x − max)). A label out of range gives NaN (the device cannot throw).
template <typename T>
void cross_entropy_forward(int device, T* loss, T* stats, const T* x, const CrossEntropyRows& rows);
/// dx_r = (softmax(x_r) − onehot(label_r)) · g[r / g_stride] / divisor, 0 for rows that
/// do not count.
template <typename T>
void cross_entropy_backward(int device, T* dx, const T* x, const T* stats, const CrossEntropyRows& rows, const T* g,
                            index_t g_stride, T divisor);

// ---- softmax ---------------------------------------------------------------------------

template <typename T>
void masked_softmax_forward(int device, T* out, const T* scores, index_t batch, index_t heads, index_t num_queries,
                            index_t num_keys, const SoftmaxMask<T>& mask);

/// grad_in = y · (grad_out − Σ grad_out · y) along rows of length `cols`.
template <typename T>
void softmax_backward(int device, T* grad_in, const T* grad_out, const T* y, index_t rows, index_t cols);

}  // namespace heed::cuda
