// heed/ops/gemm.hpp — the CPU's matrix product, c = op(a) · op(b) on row-major
// buffers, under every op that multiplies matrices (matmul, linear, the GRU's gates).
//
// Four kernels: heed's own for products with few columns and a short inner dim
// (heed/ops/small_gemm.hpp: attention per head, thin layers; gemm_uses_small), heed's
// own fp32 GEMM on a CPU with AVX-512 (heed/ops/fp32_gemm.hpp; gemm_uses_fp32), Eigen's
// GEMM (always there: the portable path) and, when heed is built with
// HEED_WITH_OPENBLAS (CMake option of that name; it defines the macro and links
// OpenBLAS), OpenBLAS's cblas_sgemm / cblas_dgemm for the products where
// bench_gemm_shapes measures it faster than Eigen on one thread (gemm_uses_blas).
// Threads are heed's in every case: fp32_gemm shares its packed operand among them and
// its bits do not depend on their number; for Eigen and OpenBLAS a large product is cut
// into panels whose edges depend only on its sizes, and each panel is computed by one
// thread, so neither do theirs (the bits do depend on the kernel: the kernels agree to
// rounding, not bit for bit). Under an AutocastGuard of bf16
// (heed/ops/autocast.hpp) float products large enough go to heed/ops/bf16_gemm.hpp.
#pragma once

#include "heed/detail/header_begin.hpp"

#include <algorithm>
#include <limits>
#include <type_traits>

#ifdef HEED_WITH_OPENBLAS
#include <cblas.h>
#endif

#include "heed/detail/parallel.hpp"
#include "heed/ops/autocast.hpp"
#include "heed/ops/bf16_gemm.hpp"
#include "heed/ops/cpu_features.hpp"
#include "heed/ops/fp32_gemm.hpp"
#include "heed/ops/kernels.hpp"
#include "heed/ops/small_gemm.hpp"

namespace heed {
namespace detail {

template <typename T>
using RowMajorMatrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

/// Products (c (m × n) = op(a) · op(b), row-major; op(a) is m × k, op(b) is k × n) run
/// on the calling thread below this many multiply-adds: at d2l's translation sizes (a
/// few million) the hand-off costs more than it saves (training took 1.4× longer on 2
/// threads than on 1 when Eigen split every product of 50k multiply-adds or more).
constexpr index_t kParallelGemmWork = index_t(1) << 24;

/// Products with fewer rows, or fewer columns, than these stay with Eigen when OpenBLAS
/// is built in (see gemm_uses_blas).
constexpr index_t kBlasMinRows = 10;
constexpr index_t kBlasMinCols = 8;

/// Makes Eigen's products in its scope single-threaded (the OpenMP setting is per
/// thread, so other threads are not affected).
class SerialGemmScope {
 public:
  explicit SerialGemmScope(bool serial) {
#ifdef _OPENMP
    if (serial && !omp_in_parallel()) saved_ = omp_get_max_threads(), omp_set_num_threads(1);
#else
    (void)serial;
#endif
  }
  ~SerialGemmScope() {
#ifdef _OPENMP
    if (saved_ > 0) omp_set_num_threads(saved_);
#endif
  }
  SerialGemmScope(const SerialGemmScope&) = delete;
  SerialGemmScope& operator=(const SerialGemmScope&) = delete;

 private:
#ifdef _OPENMP
  int saved_ = 0;
#endif
};

/// c[r0 : r0 + rows, c0 : c0 + cols] = (op(a) · op(b)) over those rows and columns, by
/// Eigen's GEMM with whatever threading is in force; c is row-major with n columns.
/// Overwrites the block (Eigen fills it with zeros, then accumulates the product), or
/// with `accumulate` adds the product to it.
template <typename T>
void eigen_gemm(const T* a, bool trans_a, const T* b, bool trans_b, T* c, index_t m, index_t n, index_t k, index_t r0,
                index_t rows, index_t c0, index_t cols, bool accumulate = false) {
  using ConstMap = Eigen::Map<const RowMajorMatrix<T>>;
  auto out = Eigen::Map<RowMajorMatrix<T>>(c, m, n).block(r0, c0, rows, cols);
  if (k == 0) {
    if (!accumulate) out.setZero();
    return;
  }
  const auto product = [&](const auto& lhs, const auto& rhs) {
    if (accumulate)
      out.noalias() += lhs.middleRows(r0, rows) * rhs.middleCols(c0, cols);
    else
      out.noalias() = lhs.middleRows(r0, rows) * rhs.middleCols(c0, cols);
  };
  if (!trans_a && !trans_b)
    product(ConstMap(a, m, k), ConstMap(b, k, n));
  else if (trans_a && !trans_b)
    product(ConstMap(a, k, m).transpose(), ConstMap(b, k, n));
  else if (!trans_a && trans_b)
    product(ConstMap(a, m, k), ConstMap(b, n, k).transpose());
  else
    product(ConstMap(a, k, m).transpose(), ConstMap(b, n, k).transpose());
}

#ifdef HEED_WITH_OPENBLAS
/// OpenBLAS on one thread, set once: heed splits large products among its own threads
/// (gemm below), and OpenBLAS's pthreads would fight them for the cores. This sets
/// OpenBLAS's thread count for the whole process.
inline void openblas_single_threaded() {
  static const bool done = (openblas_set_num_threads(1), true);
  (void)done;
}

/// The block of eigen_gemm by OpenBLAS's cblas_?gemm (β = 0: the block is overwritten;
/// β = 1 with `accumulate`).
template <typename T>
void blas_gemm(const T* a, bool trans_a, const T* b, bool trans_b, T* c, index_t m, index_t n, index_t k, index_t r0,
               index_t rows, index_t c0, index_t cols, bool accumulate = false) {
  openblas_single_threaded();
  // Row-major op(a) rows r0.. and op(b) columns c0..: a stored (m, k), or (k, m) when
  // transposed; b stored (k, n), or (n, k) when transposed.
  const T* a0 = trans_a ? a + r0 : a + r0 * k;
  const T* b0 = trans_b ? b + c0 * k : b + c0;
  const auto lda = static_cast<blasint>(trans_a ? m : k), ldb = static_cast<blasint>(trans_b ? k : n);
  const CBLAS_TRANSPOSE ta = trans_a ? CblasTrans : CblasNoTrans, tb = trans_b ? CblasTrans : CblasNoTrans;
  const auto M = static_cast<blasint>(rows), N = static_cast<blasint>(cols), K = static_cast<blasint>(k);
  const T beta = accumulate ? T(1) : T(0);
  if constexpr (std::is_same_v<T, float>)
    cblas_sgemm(CblasRowMajor, ta, tb, M, N, K, 1.0f, a0, lda, b0, ldb, beta, c + r0 * n + c0, static_cast<blasint>(n));
  else
    cblas_dgemm(CblasRowMajor, ta, tb, M, N, K, 1.0, a0, lda, b0, ldb, beta, c + r0 * n + c0, static_cast<blasint>(n));
}
#endif

/// Whether OpenBLAS computes a product of m × n × k (row-major c = op(a) · op(b)): only
/// when heed is built with HEED_WITH_OPENBLAS, for float and double, with every
/// dimension within OpenBLAS's int, and where bench_gemm_shapes measures it faster than
/// Eigen on one thread (OpenBLAS 0.3.21's SkylakeX kernels against Eigen 3.4 with
/// -march=native, AMD Zen 4): at least kBlasMinRows rows and kBlasMinCols columns,
/// among the products heed's small kernel does not take (gemm_uses_small, asked first).
/// OpenBLAS wins from small products (12×12×32 a·bᵀ, the realistic model's attention
/// per head; 10×8×10 at 0.04 µs against Eigen's 0.16, before the small kernel took it)
/// to the largest (1536×128×9807: 162 GFLOP/s against 122), but loses the ones with few
/// rows (8×512×128: 49 GFLOP/s against 82; greedy decoding's vocabulary projection at 4
/// live rows, 4×9807×128: 33 against 43; 1×10×8: 0.11 µs against 0.04).
template <typename T>
constexpr bool gemm_uses_blas([[maybe_unused]] index_t m, [[maybe_unused]] index_t n, [[maybe_unused]] index_t k) {
#ifdef HEED_WITH_OPENBLAS
  constexpr bool blas_type = std::is_same_v<T, float> || std::is_same_v<T, double>;
  constexpr index_t int_max = std::numeric_limits<blasint>::max();
  return blas_type && m >= kBlasMinRows && n >= kBlasMinCols && m <= int_max && n <= int_max && k <= int_max;
#else
  return false;
#endif
}

/// Whether heed's small-product kernel computes a product of m × n × k (row-major
/// c = op(a) · op(b)): where it fits (n ≤ 32 floats or 16 doubles, k ≤ 128), except
/// - b transposed, k > 16 and fewer than 64 rows, where copying b's columns costs as
///   much as the product (16×16×128 a·bᵀ: 1.50 µs against OpenBLAS's 0.82; the d2l
///   Bahdanau model's 1×10×32 attention backward);
/// - when OpenBLAS is built in and takes the product (gemm_uses_blas), more than 2
///   vectors of columns (n > 16 floats), where OpenBLAS is as fast or faster: 12×32×12
///   took 0.24 µs against 0.16, 640×32×32 a·bᵀ 21.1 against 20.3.
/// Elsewhere it beats both at every shape bench_gemm_shapes runs.
template <typename T>
constexpr bool gemm_uses_small(index_t m, index_t n, index_t k, bool trans_b) {
  if (!small_gemm_fits<T>(n, k) || (trans_b && k > 16 && m < 64)) return false;
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>)
    if (n > 2 * SmallSimd<T>::lanes && gemm_uses_blas<T>(m, n, k)) return false;
  return true;
}

/// Products of at most this many multiply-adds that heed's small kernel fits stay with
/// it where fp32_gemm would take them: its tiles' set-up costs more there (10×8×10:
/// 31 GFLOP/s against 19; 1×32×12: 18 against 13); from 12×32×12 fp32_gemm is as fast
/// or faster (85 against 57; 640×32×32 a·bᵀ: 185 against 79).
constexpr index_t kFp32MinWork = 4096;

/// Whether heed's small kernel fuses its multiply-adds (a build for a CPU with FMA):
/// then each element is the FMA chain fp32_gemm computes, the same bits.
#ifdef __FMA__
constexpr bool kSmallGemmFuses = true;
#else
constexpr bool kSmallGemmFuses = false;
#endif

/// Whether heed's own fp32 GEMM (heed/ops/fp32_gemm.hpp) computes a product of
/// m × n × k: in float, on a CPU with AVX-512 (cpu_features(): forcing it off is how
/// the portable path is tested), except the smallest products of the small kernel when
/// that gives the same bits (kSmallGemmFuses): so that on such a CPU every float product
/// is one FMA chain per element, whatever the build's -march (a decoder's one-row
/// products and a scorer's whole-sequence ones agree bit for bit).
template <typename T>
bool gemm_uses_fp32([[maybe_unused]] index_t m, [[maybe_unused]] index_t n, [[maybe_unused]] index_t k) {
  if constexpr (std::is_same_v<T, float>)
    return HEED_X86_64 && cpu_features().avx512 &&
           (!kSmallGemmFuses || m * n * k > kFp32MinWork || !small_gemm_fits<T>(n, k));
  else
    return false;
}

enum class GemmKernel { small, fp32, blas, eigen };

/// The kernel that computes a product of m × n × k, whole or any panel of it: heed's
/// fp32 GEMM (gemm_uses_fp32), else heed's small kernel (gemm_uses_small; it only
/// overwrites), else OpenBLAS (gemm_uses_blas), else Eigen.
template <typename T>
GemmKernel gemm_kernel(index_t m, index_t n, index_t k, bool trans_b, bool accumulate = false) {
  if (gemm_uses_fp32<T>(m, n, k)) return GemmKernel::fp32;
  if (!accumulate && gemm_uses_small<T>(m, n, k, trans_b)) return GemmKernel::small;
  if (k > 0 && gemm_uses_blas<T>(m, n, k)) return GemmKernel::blas;
  return GemmKernel::eigen;
}

/// c[r0 : r0 + rows, c0 : c0 + cols] = (op(a) · op(b)) over those rows and columns, by
/// the kernel gemm_kernel picks for the whole product (m × n × k): so that every panel
/// of one product takes the same path. With `accumulate` the product is added to the
/// block (OpenBLAS's β = 1, Eigen's +=, fp32_gemm's chain from c); the small kernel
/// cannot, so callers that accumulate send its products elsewhere (gemm_add_in_scope).
/// With `bias` (n values, one per column of c) each row of the block gets
/// bias[c0 : c0 + cols] added: OpenBLAS and Eigen start from the bias and accumulate,
/// which saves a pass over the block against zeroing it (their β = 0) and adding the
/// bias after; the small kernel and fp32_gemm, which write each element once, add it
/// after. fp32_gemm shares the block among the threads when called outside a parallel
/// region.
template <typename T>
void gemm_block(const T* a, bool trans_a, const T* b, bool trans_b, T* c, index_t m, index_t n, index_t k, index_t r0,
                index_t rows, index_t c0, index_t cols, bool accumulate = false, const T* bias = nullptr) {
  const GemmKernel kernel = gemm_kernel<T>(m, n, k, trans_b, accumulate);
  if constexpr (std::is_same_v<T, float>)
    if (kernel == GemmKernel::fp32) {
      // op(a)'s rows r0.. and op(b)'s columns c0.. (see blas_gemm).
      fp32_gemm(trans_a ? a + r0 : a + r0 * k, trans_a ? m : k, trans_a, trans_b ? b + c0 * k : b + c0, trans_b ? k : n,
                trans_b, c + r0 * n + c0, n, rows, cols, k, accumulate, bias ? bias + c0 : nullptr);
      return;
    }
  using Block = Eigen::Map<RowMajorMatrix<T>, 0, Eigen::OuterStride<>>;
  const auto block = [&] { return Block(c + r0 * n + c0, rows, cols, Eigen::OuterStride<>(n)); };
  const auto bias_row = [&] { return Eigen::Map<const Eigen::Matrix<T, 1, Eigen::Dynamic>>(bias + c0, cols); };
  if (kernel == GemmKernel::small) {
    small_gemm(a, trans_a, b, trans_b, c, m, n, k, r0, rows, c0, cols);
    if (bias != nullptr) block().rowwise() += bias_row();
    return;
  }
  if (bias != nullptr) {
    if (accumulate)
      block().rowwise() += bias_row();
    else
      block().rowwise() = bias_row();
    accumulate = true;
  }
#ifdef HEED_WITH_OPENBLAS
  if (kernel == GemmKernel::blas) {
    blas_gemm(a, trans_a, b, trans_b, c, m, n, k, r0, rows, c0, cols, accumulate);
    return;
  }
#endif
  eigen_gemm(a, trans_a, b, trans_b, c, m, n, k, r0, rows, c0, cols, accumulate);
}

/// Under an AutocastGuard of bf16, a float product large enough (autocast_bf16) by
/// bf16_gemm: c = op(a) · op(b) (+ bias), or with `accumulate` c += that, and true;
/// false where the product stays in T, untouched.
template <typename T>
bool gemm_autocast(const T* a, bool trans_a, const T* b, bool trans_b, T* c, index_t m, index_t n, index_t k,
                   const T* bias, bool accumulate) {
  if constexpr (std::is_same_v<T, float>)
    if (autocast_bf16(m, n, k)) return bf16_gemm(a, trans_a, b, trans_b, c, m, n, k, bias, accumulate), true;
  return false;
}

/// c = op(a) · op(b) (+ bias, one value per column of c), with whatever threading is in
/// force (see gemm).
template <typename T>
void gemm_in_scope(const T* a, bool trans_a, const T* b, bool trans_b, T* c, index_t m, index_t n, index_t k,
                   const T* bias = nullptr) {
  if (gemm_autocast(a, trans_a, b, trans_b, c, m, n, k, bias, /*accumulate=*/false)) return;
  gemm_block(a, trans_a, b, trans_b, c, m, n, k, 0, m, 0, n, /*accumulate=*/false, bias);
}

/// c += op(a) · op(b) (m × n, row-major), with whatever threading is in force: OpenBLAS
/// with β = 1 or Eigen's +=, so neither zero-fills a block that a second pass then adds
/// in. Over one block of k the sum is c + (op(a) · op(b)) rounded once, the bits of
/// forming the product apart and adding it. heed's small kernel only overwrites, so the
/// products it takes go through `scratch` (m × n) and are added.
template <typename T>
void gemm_add_in_scope(const T* a, bool trans_a, const T* b, bool trans_b, T* c, index_t m, index_t n, index_t k,
                       T* scratch) {
  if (gemm_autocast(a, trans_a, b, trans_b, c, m, n, k, static_cast<const T*>(nullptr), /*accumulate=*/true)) return;
  if (gemm_kernel<T>(m, n, k, trans_b) == GemmKernel::small) {
    small_gemm(a, trans_a, b, trans_b, scratch, m, n, k, 0, m, 0, n);
    for (index_t i = 0; i < m * n; ++i) c[i] += scratch[i];
    return;
  }
  gemm_block(a, trans_a, b, trans_b, c, m, n, k, 0, m, 0, n, /*accumulate=*/true);
}

/// How a large product is cut: panels of at least 4M multiply-adds and 128 rows (or
/// columns), at most 12 (shared evenly by 1, 2, 3, 4 or 6 threads), edges at multiples
/// of 16. Measured against Eigen's threaded GEMM at the shapes the Transformer runs
/// (1536×8000×128 and its backward, 1024×2048×512, 1536×512×128): within ±10 % on one
/// thread and on two, where Eigen sometimes does not scale at all.
constexpr index_t kGemmPanelWork = index_t(1) << 22;
constexpr index_t kGemmPanelMin = 128;
constexpr index_t kGemmMaxPanels = 12;
constexpr index_t kGemmPanelAlign = 16;

/// OpenBLAS's panels are fewer and larger: a power of two up to 8, each at least 256
/// rows (or columns). Each panel packs the whole of the other operand again, and
/// OpenBLAS packs faster than Eigen but computes faster still, so at 128 rows a product
/// took up to 1.27× as long on one thread as whole (1024×512×2048 a·bᵀ in 8 panels:
/// 152 GFLOP/s against 193). At the Transformer's shapes (the d2l EncoderBlock's FFN
/// and projections, the realistic model's 1536-row products and vocabulary projection),
/// this rule took 0.955 of the time of Eigen's rule on one thread and 0.950 on two,
/// 0.82–1.06 per shape. Eigen keeps its rule: at 256 columns it falls off a cliff
/// (1024×2048×512 a·bᵀ in 8 panels: 55 GFLOP/s against 120 in 12).
constexpr index_t kBlasPanelMin = 256;
constexpr index_t kBlasMaxPanels = 8;

/// How many panels gemm cuts a product of m × n × k into (1: it runs whole, on the
/// calling thread, or in fp32_gemm, which shares it among the threads itself): a
/// function of the sizes and of the kernel that takes them alone, so the bits of a
/// result do not depend on the thread count.
template <typename T>
index_t gemm_panels(index_t m, index_t n, index_t k, bool trans_b) {
  const index_t work = m * n * k, extent = m >= n ? m : n;
  const GemmKernel kernel = gemm_kernel<T>(m, n, k, trans_b);
  if (work < kParallelGemmWork || kernel == GemmKernel::fp32) return 1;
  if (kernel == GemmKernel::blas) {
    const index_t most = std::min({work / kGemmPanelWork, extent / kBlasPanelMin, kBlasMaxPanels});
    index_t panels = 1;
    while (panels * 2 <= most) panels *= 2;
    return panels;
  }
  return std::max<index_t>(1, std::min({work / kGemmPanelWork, extent / kGemmPanelMin, kGemmMaxPanels}));
}

/// c = op(a) · op(b) (+ bias, n values: one per column of c, added to every row; see
/// gemm_block). Small products run on the calling thread. A large one is cut into
/// panels of rows (or of columns, when the product is wider than tall) whose edges
/// depend only on m, n and k (gemm_panels); the panels are handed out to the OpenMP
/// threads, each computed whole by one thread with Eigen (or OpenBLAS) kept serial
/// inside. Eigen's own threaded GEMM would be the alternative, but its blocking depends
/// on the thread count, and so would the bits of the result.
template <typename T>
void gemm(const T* a, bool trans_a, const T* b, bool trans_b, T* c, index_t m, index_t n, index_t k,
          const T* bias = nullptr) {
  if (gemm_autocast(a, trans_a, b, trans_b, c, m, n, k, bias, /*accumulate=*/false)) return;
  if (gemm_kernel<T>(m, n, k, trans_b) == GemmKernel::fp32)
    return gemm_block(a, trans_a, b, trans_b, c, m, n, k, 0, m, 0, n, /*accumulate=*/false, bias);
  index_t panels = gemm_panels<T>(m, n, k, trans_b);
  if (panels < 2) {
    const SerialGemmScope serial(true);
    gemm_in_scope(a, trans_a, b, trans_b, c, m, n, k, bias);
    return;
  }
  const bool by_rows = m >= n;
  const index_t extent = by_rows ? m : n;
  const index_t per_panel = ((extent + panels - 1) / panels + kGemmPanelAlign - 1) / kGemmPanelAlign * kGemmPanelAlign;
  panels = (extent + per_panel - 1) / per_panel;
  parallel_tasks(panels, m * n * k, [&](index_t panel) {
    const SerialGemmScope serial(true);  // no-op on a worker thread, which Eigen keeps serial itself
    const index_t first = panel * per_panel, size = std::min(per_panel, extent - first);
    if (by_rows)
      gemm_block(a, trans_a, b, trans_b, c, m, n, k, first, size, 0, n, /*accumulate=*/false, bias);
    else
      gemm_block(a, trans_a, b, trans_b, c, m, n, k, 0, m, first, size, /*accumulate=*/false, bias);
  });
}

/// out (cols) = the sum of g's rows (g: rows × cols, row-major), 1ᵀ · g: the gradient of
/// gemm's bias. The columns are cut into blocks of kSumRowsBlock, whose edges depend
/// only on cols, each summed whole by one thread (the bits do not depend on the thread
/// count). Row after row into sums that stay in L1: Eigen's colwise().sum() of a
/// row-major (1024, 2048) took 1.1–1.3 ms against 0.16 on one thread (0.08 against 0.05
/// at (1024, 512)).
constexpr index_t kSumRowsBlock = 256;

template <typename T>
void sum_rows(const T* g, index_t rows, index_t cols, T* out) {
  using Row = Eigen::Map<Eigen::Array<T, 1, Eigen::Dynamic>>;
  using ConstRow = Eigen::Map<const Eigen::Array<T, 1, Eigen::Dynamic>>;
  const index_t blocks = (cols + kSumRowsBlock - 1) / kSumRowsBlock;
  parallel_tasks(blocks, rows * cols, [&](index_t block) {
    const index_t c0 = block * kSumRowsBlock, width = std::min(kSumRowsBlock, cols - c0);
    Row sum(out + c0, width);  // the block's sums stay in L1 while the rows stream past
    sum.setZero();
    for (index_t r = 0; r < rows; ++r) sum += ConstRow(g + r * cols + c0, width);
  });
}

/// gemm on `device`: gemm above on the CPU, cuBLAS on a CUDA device (pointers into tensors
/// on that device; there the bias is added to the product's rows in place, after it, and
/// under an AutocastGuard of bf16 the same products as on the CPU take bf16 operands).
template <typename T>
void gemm_on(Device device, const T* a, bool trans_a, const T* b, bool trans_b, T* c, index_t m, index_t n, index_t k,
             const T* bias = nullptr) {
  if (!device.is_cpu()) {
    DeviceKernels<T>& kernels = kernels_for<T>(device, "matmul");
    kernels.gemm_strided_batched(device.index(), trans_a, trans_b, m, n, k, a, 0, b, 0, c, 0, 1,
                                 std::is_same_v<T, float> && autocast_bf16(m, n, k));
    if (bias != nullptr) {
      const StridedShape rows_of_c{2, {m, n}, {n, 1}}, bias_per_row{2, {m, n}, {0, 1}};
      kernels.binary(device.index(), BinaryOp::add, c, c, rows_of_c, bias, bias_per_row);
    }
    return;
  }
  gemm(a, trans_a, b, trans_b, c, m, n, k, bias);
}

}  // namespace detail
}  // namespace heed

#include "heed/detail/header_end.hpp"
