// heed/ops/linear_cross_entropy.hpp — a Linear layer and the softmax cross entropy of
// its output, fused, so that the (rows, classes) logits never exist whole.
//
//   x: (..., in_features)  weight: (classes, in_features)  bias: (classes) or undefined
//   labels: (...)  int64 class indices in [0, classes)
//   linear_cross_entropy(x, weight, bias, labels, reduction)
//     == cross_entropy(linear(x, weight, bias), labels, reduction)   (to rounding)
//
//   auto loss = heed::linear_cross_entropy(features, net.dense.weight, net.dense.bias, y);
//
// Why: a translation model's last layer maps every target position onto the
// vocabulary. At the realistic size (1,536 positions × 9,807 words) the logits and
// their gradient are 57 MiB each, the two largest tensors of a training step. Here the
// classes are cut into tiles of kClassTile and the rows into blocks of kRowTile. When a
// gradient is wanted, each row block's logits (kRowTile × classes, 5 MiB at the
// realistic size) are computed, folded into each row's max and Σ exp, turned into the
// gradient of the loss for an upstream gradient of ones and multiplied into dW, db and
// dx, before the next block: three products per tile, the unfused path's count. The
// backward hands these out, scaled when its upstream gradient is uniform (sum or mean of
// the loss), and otherwise computes the logits again, tile by tile. Without a gradient
// the forward keeps only a tile at a time. The masked loss of heed/ops/masked_cross_entropy.hpp
// computes only the rows that count, where the unfused path computes the padding too.
//
// The tiles are shared among a fixed number of groups (kClassGroups), each summing its
// part of dx in tile order; the parts are added in group order. So the bits depend on the
// shapes only, not on the thread count. They differ from the unfused path's in the last
// places: the Σ exp runs tile by tile (each tile's sum rescaled to the row's max, as in
// flash attention), and dx sums over the classes in another order.
//
// On a device backend the op is linear followed by cross_entropy, unfused.
#pragma once

#include "heed/detail/header_begin.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <utility>
#include <vector>

#include "heed/ops/autocast.hpp"
#include "heed/ops/bf16_gemm.hpp"
#include "heed/ops/cross_entropy.hpp"
#include "heed/ops/linear.hpp"

namespace heed {
namespace detail {

constexpr index_t kClassTile = 256;  // logits of 128 rows × 256 classes: 128 KiB in float
constexpr index_t kRowTile = 128;
constexpr index_t kClassGroups = 8;  // enough for 8 threads; fixed, for the bits

/// The rows of x that count (all, or the prefixes of a masked loss), gathered, with the
/// weight and bias, and how the class tiles are shared out. Built by the forward and
/// kept for the backward with the per-row statistics.
template <typename T>
struct FusedLinearCE {
  Tensor<T> x;                       // (rows, in): the rows that count, contiguous
  bool gathered = false;             // whether x holds only some of the input's rows
  std::vector<index_t> row_of;       // then: where each row of x sits in the input
  std::vector<std::int64_t> labels;  // of the rows that count
  Tensor<T> weight, bias;            // (classes, in), (classes) or undefined
  index_t rows = 0, in = 0, classes = 0;
  T label_smoothing = 0;  // ε of heed/ops/cross_entropy.hpp
  std::vector<T> stats;   // per row: its max logit and log Σ exp(logit − max)

  /// Under a bf16 AutocastGuard, x and the weight converted and packed once per pass
  /// for the tiles' products, which bf16_gemm would convert again in each of them
  /// (rows / kRowTile times the weight, twice): at the realistic model's shapes that
  /// conversion, mostly reading the weight from memory, was about 30 % of the op's time.
  /// The products have bf16_gemm's bits. Held only while a pass runs; empty otherwise.
  struct Bf16Operands {
    Bf16Rows x;                         // the logits' op(a): x's rows
    std::vector<Bf16PackedB> weight_t;  // the logits' op(b) per class tile: its rows of W, transposed
    std::vector<Bf16PackedB> weight;    // dx's op(b) per class tile: its rows of W
    std::vector<Bf16PackedB> x_blocks;  // dW's op(b) per row block: its rows of x
  } bf16;

  /// Packs bf16's operands when this thread's products of depth `in` run in bf16 and
  /// the engine can take them packed (float, AVX512_BF16, in ≤ kBf16Depth); weight's
  /// for dx (`for_x`), x_blocks for dW (`for_weight`).
  void pack_bf16(bool for_x, bool for_weight) {
    bf16 = {};
    if constexpr (std::is_same_v<T, float>) {
      if (rows == 0 || !thread_context().bf16_products || !Bf16PackedB::available(in)) return;
      const index_t num_tiles = tiles(), blocks = (rows + kRowTile - 1) / kRowTile;
      bf16.x = Bf16Rows(x.data(), rows, in);
      bf16.weight_t.resize(static_cast<std::size_t>(num_tiles));
      if (for_x) bf16.weight.resize(static_cast<std::size_t>(num_tiles));
      if (for_weight) bf16.x_blocks.resize(static_cast<std::size_t>(blocks));
      parallel_tasks(num_tiles + blocks, (classes + rows) * in * 8, [&](index_t task) {
        if (task < num_tiles) {
          const index_t c0 = task * kClassTile, width = std::min(kClassTile, classes - c0);
          const float* w = weight.data() + c0 * in;
          bf16.weight_t[static_cast<std::size_t>(task)] = Bf16PackedB(w, true, in, width);
          if (for_x) bf16.weight[static_cast<std::size_t>(task)] = Bf16PackedB(w, false, width, in);
        } else if (for_weight) {
          const index_t r0 = (task - num_tiles) * kRowTile;
          bf16.x_blocks[static_cast<std::size_t>(task - num_tiles)] =
              Bf16PackedB(x.data() + r0 * in, false, std::min(kRowTile, rows - r0), in);
        }
      });
    } else {
      (void)for_x, (void)for_weight;
    }
  }
  void release_bf16() { bf16 = {}; }
  /// Whether an m × n × k product of the op runs from bf16's operands (as gemm would in bf16).
  bool packed_product(index_t m, index_t n, index_t k) const {
    return !bf16.weight_t.empty() && autocast_bf16(m, n, k);
  }
  /// bf16's packed operand i of `operands`, or null when not packed.
  static const Bf16PackedB* packed(const std::vector<Bf16PackedB>& operands, index_t i) {
    return operands.empty() ? nullptr : &operands[static_cast<std::size_t>(i)];
  }

  /// c = op(a) · op(b), or c + that when `add` (through `scratch`: gemm_add_in_scope),
  /// from `packed` (op(b) packed) where bf16's products run packed.
  void product(const T* a, bool trans_a, const T* b, bool trans_b, const Bf16PackedB* packed_b, T* c, index_t m,
               index_t n, index_t k, bool add, T* scratch) const {
    if constexpr (std::is_same_v<T, float>)
      if (packed_b && packed_product(m, n, k)) return packed_b->multiply(a, trans_a, m, 0, n, c, n, nullptr, add);
    if (add)
      gemm_add_in_scope(a, trans_a, b, trans_b, c, m, n, k, scratch);
    else
      gemm_in_scope(a, trans_a, b, trans_b, c, m, n, k);
  }

  /// What the tiles of the forward leave for each row: per tile and row, the tile's max
  /// and Σ exp(logit − that max) (`partial`) and, when smoothed, the tile's Σ logits
  /// (`sums`); per row, the label's logit (`target`).
  struct Partials {
    std::vector<T> partial, sums, target;
    explicit Partials(const FusedLinearCE& ce)
        : partial(static_cast<std::size_t>(ce.tiles() * ce.rows * 2)),
          sums(static_cast<std::size_t>(ce.label_smoothing != T(0) ? ce.tiles() * ce.rows : 0)),
          target(static_cast<std::size_t>(ce.rows)) {}
  };

  index_t tiles() const { return (classes + kClassTile - 1) / kClassTile; }
  index_t groups() const { return std::min(tiles(), kClassGroups); }
  // Group g takes tiles [first_tile(g), first_tile(g + 1)).
  index_t first_tile(index_t g) const { return tiles() * g / groups(); }

  /// out (block_rows × width) = the logits of rows [r0, r0 + block_rows) and classes
  /// [c0, c0 + width); on the calling thread.
  void logits(index_t r0, index_t block_rows, index_t c0, index_t width, T* out) const {
    if constexpr (std::is_same_v<T, float>)
      if (packed_product(block_rows, width, in))
        return bf16.weight_t[static_cast<std::size_t>(c0 / kClassTile)].multiply_rows(
            bf16.x.row(r0), block_rows, 0, width, out, width, bias.defined() ? bias.data() + c0 : nullptr);
    gemm_in_scope(x.data() + r0 * in, false, weight.data() + c0 * in, true, out, block_rows, width, in,
                  bias.defined() ? bias.data() + c0 : nullptr);
  }

  /// Folds a tile's logits of rows [r0, r0 + block_rows) into `p` (see Partials).
  void tile_stats(const T* tile, index_t t, index_t r0, index_t block_rows, index_t c0, index_t width,
                  Partials& parts) const {
    for (index_t i = 0; i < block_rows; ++i) {
      const ConstVecMap<T> row(tile + i * width, width);
      const T max = row.maxCoeff();
      T* p = parts.partial.data() + (t * rows + r0 + i) * 2;
      p[0] = max;
      // A tile all −inf adds nothing (not the NaN of −inf − −inf).
      p[1] = max == -std::numeric_limits<T>::infinity() ? T(0) : (row.array() - max).exp().sum();
      if (!parts.sums.empty()) parts.sums[static_cast<std::size_t>(t * rows + r0 + i)] = row.sum();
      const std::int64_t y = labels[static_cast<std::size_t>(r0 + i)];
      if (y >= c0 && y < c0 + width) parts.target[static_cast<std::size_t>(r0 + i)] = row[y - c0];
    }
  }

  /// Rows [r0, r1): their stats from the tiles' partials, and their losses (log Σ exp −
  /// the label's logit, both relative to the row's max, smoothed as cross_entropy).
  void row_stats(index_t r0, index_t r1, const Partials& parts, std::vector<T>& loss) {
    const index_t num_tiles = tiles();
    const std::vector<T>& partial = parts.partial;
    for (index_t r = r0; r < r1; ++r) {
      T max = partial[static_cast<std::size_t>(r * 2)];
      for (index_t t = 1; t < num_tiles; ++t)
        max = std::max(max, partial[static_cast<std::size_t>((t * rows + r) * 2)]);
      T sum = 0;
      for (index_t t = 0; t < num_tiles; ++t) {
        const T* p = partial.data() + (t * rows + r) * 2;
        sum += p[1] * std::exp(p[0] - max);
      }
      const T log_sum = std::log(sum);
      stats[static_cast<std::size_t>(r * 2)] = max;
      stats[static_cast<std::size_t>(r * 2 + 1)] = log_sum;
      T row_sum = 0;
      if (!parts.sums.empty())
        for (index_t t = 0; t < num_tiles; ++t) row_sum += parts.sums[static_cast<std::size_t>(t * rows + r)];
      loss[static_cast<std::size_t>(r)] =
          log_sum - smoothed_target(parts.target[static_cast<std::size_t>(r)], row_sum, max, classes, label_smoothing);
    }
  }

  /// Fills stats and returns the loss of each row.
  std::vector<T> forward() {
    const index_t num_groups = groups();
    Partials parts(*this);
    pack_bf16(false, false);
    // Heed's buffers, aligned alike in every run: where Eigen's vectorised loops start
    // depends on the alignment, and with it the last bits of exp. Their size depends on
    // no batch's row count, so that every step reuses the same cached buffer (sized by
    // the rows, each batch of a new size allocated afresh: 10 buffers of 5.9-6.6 MB).
    Tensor<T> buffers = make_tensor<T>(Shape{num_groups * kRowTile * kClassTile});
    parallel_tasks(num_groups, rows * classes * in, [&](index_t g) {
      const SerialGemmScope serial(true);
      T* tile = buffers.data() + g * kRowTile * kClassTile;
      for (index_t t = first_tile(g); t < first_tile(g + 1); ++t) {
        const index_t c0 = t * kClassTile, width = std::min(kClassTile, classes - c0);
        for (index_t r0 = 0; r0 < rows; r0 += kRowTile) {
          const index_t block_rows = std::min(kRowTile, rows - r0);
          logits(r0, block_rows, c0, width, tile);
          tile_stats(tile, t, r0, block_rows, c0, width, parts);
        }
      }
    });
    release_bf16();
    stats.resize(static_cast<std::size_t>(rows * 2));
    std::vector<T> loss(static_cast<std::size_t>(rows));
    row_stats(0, rows, parts, loss);
    return loss;
  }

  /// Where backward puts its results while it runs: the gradients asked for (defined
  /// when asked), and the per-group parts of dx (for rows [dx_row0, dx_row0 + dx_rows))
  /// with each group's scratch for one tile.
  struct Backward {
    autograd::Grads<T> grads{3};
    Tensor<T> dx_parts;  // (groups, dx_rows, in), summed in group order into grads[0]
    index_t dx_rows = 0, dx_row0 = 0;
    Tensor<T> scratch;  // per group: a tile's dW and dx products when heed's small kernel takes them
  };

  /// dx_rows: rows (every part over all rows) or kRowTile (one row block at a time).
  Backward start_backward(bool need_x, bool need_weight, bool need_bias, const Shape& x_shape, index_t dx_rows) const {
    Backward b;
    if (need_x) {
      b.grads[0] = make_tensor<T>(x_shape);
      if (gathered) std::fill_n(b.grads[0].data(), x_shape.numel(), T(0));
    }
    if (need_weight) b.grads[1] = rows > 0 ? make_tensor<T>(weight.shape()) : zeros<T>(weight.shape());
    if (need_bias) b.grads[2] = rows > 0 ? make_tensor<T>(bias.shape()) : zeros<T>(bias.shape());
    // Aligned buffers whatever the rows, as in forward.
    b.dx_rows = dx_rows;
    b.dx_parts = make_tensor<T>(Shape{need_x ? groups() * dx_rows * in : 0});
    b.scratch = make_tensor<T>(Shape{groups() * (kClassTile + kRowTile) * in});
    return b;
  }

  /// Turns a tile's logits (rows [r0, r0 + block_rows), classes [c0, c0 + width), in
  /// `tile`) into d loss / d logit = coef · (softmax − target), in place, and
  /// multiplies it into db, dW and group g's dx while it is in cache. The row blocks of a
  /// tile come in order, and so do the tiles of a group for a row block.
  void tile_backward(T* tile, index_t g, index_t t, index_t r0, index_t block_rows, const std::vector<T>& coef,
                     Backward& b) const {
    const index_t c0 = t * kClassTile, width = std::min(kClassTile, classes - c0);
    for (index_t i = 0; i < block_rows; ++i) {
      const index_t r = r0 + i;
      const T k = coef[static_cast<std::size_t>(r)];
      const T* s = stats.data() + r * 2;
      VecMap<T> row(tile + i * width, width);
      row = ((row.array() - s[0]) - s[1]).exp() * k;
      subtract_target(row, labels[static_cast<std::size_t>(r)] - c0, k, label_smoothing, classes);
    }
    const auto d_logits = Eigen::Map<const RowMajorMatrix<T>>(tile, block_rows, width);
    if (b.grads[2].defined()) {
      auto db = VecMap<T>(b.grads[2].data() + c0, width);
      if (r0 == 0)
        db = d_logits.colwise().sum().transpose().array();
      else
        db += d_logits.colwise().sum().transpose().array();
    }
    T* dw_block = b.scratch.data() + g * (kClassTile + kRowTile) * in;
    T* dx_block = dw_block + kClassTile * in;
    if (b.grads[1].defined()) {  // dW[c0 : c0 + width] = Σ over the row blocks of d_logitsᵀ x
      product(tile, true, x.data() + r0 * in, false, packed(bf16.x_blocks, r0 / kRowTile), b.grads[1].data() + c0 * in,
              width, in, block_rows, r0 != 0, dw_block);
    }
    if (b.grads[0].defined()) {  // group g's dx over the rows of the block += d_logits W[c0 : c0 + width]
      T* out = b.dx_parts.data() + (g * b.dx_rows + r0 - b.dx_row0) * in;
      product(tile, false, weight.data() + c0 * in, false, packed(bf16.weight, t), out, block_rows, in, width,
              t != first_tile(g), dx_block);
    }
  }

  /// dx of rows [r0, r1) (held by the parts) into grads[0], at the rows of the op's
  /// input, summed over the groups in order.
  void add_dx_parts(Backward& b, index_t r0, index_t r1) const {
    if (!b.grads[0].defined()) return;
    for (index_t r = r0; r < r1; ++r) {
      VecMap<T> dst(b.grads[0].data() + (gathered ? row_of[static_cast<std::size_t>(r)] : r) * in, in);
      const T* part = b.dx_parts.data() + (r - b.dx_row0) * in;
      dst = ConstVecMap<T>(part, in);
      for (index_t g = 1; g < groups(); ++g) dst += ConstVecMap<T>(part + g * b.dx_rows * in, in);
    }
  }

  /// The gradients of Σ_r coef[r] · loss_r with respect to x (in the op's input shape,
  /// `x_shape`, zero at rows that do not count), the weight and the bias, each only when
  /// asked; after forward, computing the logits again.
  autograd::Grads<T> backward(const std::vector<T>& coef, const Shape& x_shape, bool need_x, bool need_weight,
                              bool need_bias) {
    Backward b = start_backward(need_x, need_weight, need_bias, x_shape, rows);
    pack_bf16(need_x, need_weight);
    Tensor<T> buffers = make_tensor<T>(Shape{groups() * kRowTile * kClassTile});  // as in forward
    parallel_tasks(groups(), rows * classes * in, [&](index_t g) {
      const SerialGemmScope serial(true);
      T* tile = buffers.data() + g * kRowTile * kClassTile;
      for (index_t t = first_tile(g); t < first_tile(g + 1); ++t) {
        const index_t c0 = t * kClassTile, width = std::min(kClassTile, classes - c0);
        for (index_t r0 = 0; r0 < rows; r0 += kRowTile) {
          const index_t block_rows = std::min(kRowTile, rows - r0);
          logits(r0, block_rows, c0, width, tile);
          tile_backward(tile, g, t, r0, block_rows, coef, b);
        }
      }
    });
    release_bf16();
    add_dx_parts(b, 0, rows);
    return std::move(b.grads);
  }

  /// forward and backward(coef) in one pass over the logits: a block of rows has all its
  /// classes' logits computed (in parallel over the groups), its stats and losses formed,
  /// and then its gradient multiplied out (in parallel again) from the logits kept. One
  /// product fewer than forward + backward, the same bits: the same products on the same
  /// tiles, in the same order. Returns the losses; the gradients go to `grads`.
  std::vector<T> forward_backward(const std::vector<T>& coef, const Shape& x_shape, bool need_x, bool need_weight,
                                  bool need_bias, autograd::Grads<T>& grads) {
    Partials parts(*this);
    stats.resize(static_cast<std::size_t>(rows * 2));
    std::vector<T> loss(static_cast<std::size_t>(rows));
    Backward b = start_backward(need_x, need_weight, need_bias, x_shape, kRowTile);
    pack_bf16(need_x, need_weight);
    // A row block's logits, tile after tile: tile t at kRowTile · c0, so that every
    // tile starts as aligned as forward's.
    Tensor<T> block = make_tensor<T>(Shape{kRowTile * classes});
    for (index_t r0 = 0; r0 < rows; r0 += kRowTile) {
      const index_t block_rows = std::min(kRowTile, rows - r0);
      parallel_tasks(groups(), block_rows * classes * in, [&](index_t g) {
        const SerialGemmScope serial(true);
        for (index_t t = first_tile(g); t < first_tile(g + 1); ++t) {
          const index_t c0 = t * kClassTile, width = std::min(kClassTile, classes - c0);
          logits(r0, block_rows, c0, width, block.data() + kRowTile * c0);
          tile_stats(block.data() + kRowTile * c0, t, r0, block_rows, c0, width, parts);
        }
      });
      row_stats(r0, r0 + block_rows, parts, loss);
      b.dx_row0 = r0;
      parallel_tasks(groups(), block_rows * classes * in, [&](index_t g) {
        const SerialGemmScope serial(true);
        for (index_t t = first_tile(g); t < first_tile(g + 1); ++t)
          tile_backward(block.data() + kRowTile * t * kClassTile, g, t, r0, block_rows, coef, b);
      });
      add_dx_parts(b, r0, r0 + block_rows);
    }
    release_bf16();
    grads = std::move(b.grads);
    return loss;
  }
};

/// Checks x, weight and bias as linear does, and labels against x's leading dims.
template <typename T>
void check_linear_ce(const char* op, const Tensor<T>& x, const Tensor<T>& weight, const Tensor<T>& bias,
                     const IndexTensor& labels, const Shape& rows_shape) {
  check_floating<T>(op);
  HEED_CHECK(x.defined() && weight.defined(), ValueError, op, ": x and weight must be defined");
  HEED_CHECK(labels.defined(), ValueError, op, ": labels are undefined");
  HEED_CHECK(weight.dim() == 2, ShapeError, op, ": weight must be (classes, in_features), got ",
             to_string(weight.shape()));
  HEED_CHECK(x.dim() >= 1 && x.shape()[-1] == weight.shape()[1], ShapeError, op, ": input of shape ",
             to_string(x.shape()), " does not end in in_features = ", weight.shape()[1], " (weight ",
             to_string(weight.shape()), ")");
  HEED_CHECK(!bias.defined() || bias.shape() == Shape{weight.shape()[0]}, ShapeError, op, ": bias of shape ",
             to_string(bias.shape()), " does not match the weight's ", weight.shape()[0], " classes");
  HEED_CHECK(labels.shape() == rows_shape, ShapeError, op, ": labels of shape ", to_string(labels.shape()),
             " do not match input of shape ", to_string(x.shape()), "; expected labels of shape ",
             to_string(rows_shape));
  HEED_CHECK(weight.shape()[0] > 0, ShapeError, op, ": weight ", to_string(weight.shape()), " has no classes");
  check_labels(labels, weight.shape()[0], op);
}

/// The fused op over the rows of x that `counts` (all when lens is empty), whose output
/// (of out_shape) `reduce` makes from the rows' losses, recording a backward that gives
/// row r the coefficient coef(g, r) (g the upstream gradient).
template <typename T, typename Reduce, typename Coef>
Tensor<T> fused_linear_ce(const char* name, const Tensor<T>& x, const Tensor<T>& weight, const Tensor<T>& bias,
                          const IndexTensor& labels, const CrossEntropyRows& counted, const Shape& out_shape,
                          Reduce&& reduce, Coef&& coef) {
  FusedLinearCE<T> ce;
  ce.in = weight.shape()[1];
  ce.classes = weight.shape()[0];
  ce.label_smoothing = static_cast<T>(counted.label_smoothing);
  ce.weight = weight.detach();
  if (bias.defined()) ce.bias = bias.detach();
  const std::int64_t* y = labels.data();
  if (counted.lens.empty()) {
    ce.rows = counted.rows;
    ce.x = x.detach();
    ce.labels.assign(y, y + counted.rows);
  } else {
    ce.gathered = true;
    for (index_t r = 0; r < counted.rows; ++r)
      if (counted.counts(r)) ce.row_of.push_back(r);
    ce.rows = static_cast<index_t>(ce.row_of.size());
    ce.x = make_tensor<T>(Shape{ce.rows, ce.in});
    ce.labels.reserve(ce.row_of.size());
    for (index_t i = 0; i < ce.rows; ++i) {
      const index_t r = ce.row_of[static_cast<std::size_t>(i)];
      std::copy_n(x.data() + r * ce.in, ce.in, ce.x.data() + i * ce.in);
      ce.labels.push_back(y[r]);
    }
  }
  // The coefficient of each row of ce for an upstream gradient g.
  const auto coefficients = [coef](const FusedLinearCE<T>& fused, const Tensor<T>& g) {
    std::vector<T> k(static_cast<std::size_t>(fused.rows));
    for (index_t i = 0; i < fused.rows; ++i)
      k[static_cast<std::size_t>(i)] = coef(g, fused.gathered ? fused.row_of[static_cast<std::size_t>(i)] : i);
    return k;
  };
  const bool need_x = x.requires_grad(), need_w = weight.requires_grad(),
             need_b = bias.defined() && bias.requires_grad();
  // When a gradient is wanted, it is formed now for an upstream gradient of ones (the
  // usual loss.sum().backward()), while the logits are at hand; the backward scales it
  // if its upstream gradient is uniform, and computes the logits again otherwise.
  const bool eager = autograd::needs_grad(x, weight, bias);
  autograd::Grads<T> eager_grads;
  const std::vector<T> losses =
      eager ? ce.forward_backward(coefficients(ce, ones<T>(out_shape)), x.shape(), need_x, need_w, need_b, eager_grads)
            : ce.forward();
  Tensor<T> out = reduce(losses, ce.row_of);
  if (eager) {
    // The versions of x, weight and bias are checked when the backward runs, as for
    // every saved tensor: an in-place change in between is an error, not a wrong gradient.
    autograd::record(out, name, {x, weight, bias},
                     [ce = std::move(ce), eager_grads = std::move(eager_grads), saved_x = autograd::save(x),
                      saved_w = autograd::save(weight),
                      saved_b = bias.defined() ? autograd::save(bias) : autograd::SavedTensor<T>(), x_shape = x.shape(),
                      need_x, need_w, need_b, bias_defined = bias.defined(), coefficients](const Tensor<T>& g) mutable {
                       (void)saved_x.get(), (void)saved_w.get();
                       if (bias_defined) (void)saved_b.get();
                       const T* gd = g.data();
                       const bool uniform =
                           g.numel() > 0 && std::all_of(gd, gd + g.numel(), [&](T v) { return v == gd[0]; });
                       if (!uniform || eager_grads.empty())
                         return ce.backward(coefficients(ce, g), x_shape, need_x, need_w, need_b);
                       autograd::Grads<T> grads = std::move(eager_grads);
                       eager_grads.clear();  // a second backward (retain_graph) computes afresh
                       if (gd[0] != T(1))
                         for (Tensor<T>& grad : grads)
                           if (grad.defined()) VecMap<T>(grad.data(), grad.numel()) *= gd[0];
                       return grads;
                     });
  }
  return out;
}

}  // namespace detail

/// cross_entropy(linear(x, weight, bias), labels, reduction, label_smoothing) without the
/// logits: see the top of this file.
template <typename T>
Tensor<T> linear_cross_entropy(const Tensor<T>& x, const Tensor<T>& weight, const Tensor<T>& bias,
                               const IndexTensor& labels, Reduction reduction = Reduction::mean,
                               double label_smoothing = 0.0) {
  detail::check_defined(x, "linear_cross_entropy", "x");
  detail::check_defined(weight, "linear_cross_entropy", "weight");
  detail::check_defined(labels, "linear_cross_entropy", "labels");
  constexpr const char* op = "linear_cross_entropy";
  detail::check_label_smoothing(label_smoothing, op);
  HEED_CHECK(x.defined() && x.dim() >= 1, ShapeError, op, ": x must be (..., in_features), got shape ",
             x.defined() ? to_string(x.shape()) : std::string("undefined"));
  const Shape rows_shape = detail::dropped_shape(x.shape(), x.dim() - 1);
  if (detail::on_device(op, x, weight, bias))
    return cross_entropy(linear(x, weight, bias), labels, reduction, label_smoothing);
  detail::check_linear_ce(op, x, weight, bias, labels, rows_shape);
  detail::CrossEntropyRows rows;  // every row counts
  rows.rows = rows_shape.numel();
  rows.label_smoothing = label_smoothing;
  const T count = reduction == Reduction::mean ? static_cast<T>(rows.rows) : T(1);
  return detail::fused_linear_ce(
      "LinearCrossEntropyBackward", x, weight, bias, labels, rows, reduction == Reduction::none ? rows_shape : Shape{},
      [&](const std::vector<T>& losses, const std::vector<index_t>&) {
        if (reduction == Reduction::none) {
          Tensor<T> out = detail::make_tensor<T>(rows_shape);
          std::copy(losses.begin(), losses.end(), out.data());
          return out;
        }
        T total = 0;
        for (const T l : losses) total += l;
        return scalar_tensor<T>(total / count);
      },
      [reduction, count](const Tensor<T>& g, index_t r) {
        return reduction == Reduction::none ? g.data()[r] : g.data()[0] / count;
      });
}

}  // namespace heed

#include "heed/detail/header_end.hpp"
