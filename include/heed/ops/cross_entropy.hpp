// heed/ops/cross_entropy.hpp — softmax cross entropy over the last dim, fused, as
// PyTorch's F.cross_entropy but with the classes on the LAST dim.
//
//   logits: (..., num_classes)   labels: (...), int64 class indices in [0, num_classes)
//   cross_entropy(logits, labels, Reduction::none): (...)  one loss per row
//   cross_entropy(logits, labels)                  : ()    their mean (the default)
//   cross_entropy(logits, labels, Reduction::sum)  : ()    their sum
//
//   auto loss = heed::cross_entropy(net(X), y);   // y: (batch), net(X): (batch, classes)
//
// PyTorch puts the classes on dim 1 (d2l permutes (B, T, V) to (B, V, T) for that);
// heed keeps them last, where they are contiguous, so d2l's
// `F.cross_entropy(pred.permute(0, 2, 1), label)` is `cross_entropy(pred, label)`.
//
// One primitive, not log_softmax + gather: each row is read twice in the forward (its
// max, then Σ exp) and once in the backward, and only two numbers per row (its max and
// log Σ exp) are kept for backward besides the logits themselves:
//   loss_r = log_sum_r − (x_r[y_r] − max_r),  log_sum_r = log Σ_c exp(x_rc − max_r)
//   d loss_r / d x_rc = softmax(x_r)_c − [c = y_r] = exp(x_rc − max_r − log_sum_r) − [c = y_r]
// (x − max first, as PyTorch's log_softmax: with logits near 1000, x − (max + log_sum)
// in float would round the log-sum-exp to 6e-5 and the probabilities with it.)
// The mean over zero rows is NaN (0/0), as in PyTorch.
//
// label_smoothing = ε in [0, 1], as PyTorch's: the target is (1 − ε) · one_hot(y) +
// ε / classes, so that
//   loss_r = log_sum_r − (1 − ε)(x_r[y_r] − max_r) − ε (mean_c x_rc − max_r)
//   d loss_r / d x_rc = softmax(x_r)_c − (1 − ε) [c = y_r] − ε / classes
// (ε = 0 runs the formulas above, bit for bit).
#pragma once

#include "heed/detail/header_begin.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "heed/ops/reduce.hpp"

namespace heed {

namespace detail {

/// "(1, 2)": the multi-index of flat position i in shape s, for error messages.
inline std::string position_string(index_t i, const Shape& s) {
  std::vector<index_t> index(static_cast<std::size_t>(s.rank()));
  for (int d = s.rank() - 1; d >= 0; --d) {
    index[static_cast<std::size_t>(d)] = s[d] > 0 ? i % s[d] : 0;
    i = s[d] > 0 ? i / s[d] : 0;
  }
  std::string out = "(";
  for (std::size_t d = 0; d < index.size(); ++d) out += (d ? ", " : "") + std::to_string(index[d]);
  return out + ")";
}

/// Every label is a class index: label_r in [0, classes).
inline void check_labels(const IndexTensor& labels, index_t classes, const char* op) {
  const std::int64_t* y = labels.data();
  for (index_t i = 0; i < labels.numel(); ++i)
    HEED_CHECK(y[i] >= 0 && y[i] < classes, IndexError, op, ": label ", y[i], " at position ",
               position_string(i, labels.shape()), " of labels ", to_string(labels.shape()), " is out of range for ",
               classes, " classes");
}

/// The rows of a cross entropy and which of them count: rows come in groups of
/// `steps` (one per sequence), and only the first lens[g] rows of group g are computed;
/// the others get loss 0 and gradient 0. No lens: every row counts.
struct CrossEntropyRows {
  index_t rows = 0, classes = 0, steps = 1;
  std::vector<index_t> lens;
  double label_smoothing = 0;  // ε (see the top of this file)

  bool counts(index_t r) const { return lens.empty() || r % steps < lens[static_cast<std::size_t>(r / steps)]; }
};

/// label_smoothing within [0, 1], as PyTorch requires.
inline void check_label_smoothing(double label_smoothing, const char* op) {
  HEED_CHECK(label_smoothing >= 0.0 && label_smoothing <= 1.0, ValueError, op, ": label_smoothing = ", label_smoothing,
             " is outside [0, 1]");
}

/// The part of a row's loss taken from its logits, relative to the row's max:
/// (1 − ε)(x_y − max) + ε (mean x − max); x_y − max alone when ε = 0.
template <typename T>
T smoothed_target(T label_logit, T row_sum, T max, index_t classes, T eps) {
  if (eps == T(0)) return label_logit - max;
  return (T(1) - eps) * (label_logit - max) + eps * (row_sum / static_cast<T>(classes) - max);
}

/// Fills loss[r] and stats[2r], stats[2r + 1] (the row's max and log Σ exp(x − max))
/// for each row of x (rows × classes); uncounted rows get 0 (their stats never read).
template <typename T>
void cross_entropy_forward(const T* x, const std::int64_t* y, const CrossEntropyRows& rows, T* stats, T* loss) {
  const index_t c = rows.classes;
  const T eps = static_cast<T>(rows.label_smoothing);
  parallel_for(rows.rows, kParallelGrain / std::max<index_t>(c, 1) + 1, [&](index_t begin, index_t end) {
    for (index_t r = begin; r < end; ++r) {
      if (!rows.counts(r)) {
        stats[2 * r] = stats[2 * r + 1] = loss[r] = T(0);
        continue;
      }
      const ConstVecMap<T> row(x + r * c, c);
      const T max = row.maxCoeff();  // subtracted so that exp cannot overflow
      const T log_sum = std::log((row - max).exp().sum());
      stats[2 * r] = max;
      stats[2 * r + 1] = log_sum;
      loss[r] = log_sum - smoothed_target(x[r * c + y[r]], eps == T(0) ? T(0) : row.sum(), max, c, eps);
    }
  });
}

/// row −= k · target, for a row (or a part of one) of a cross entropy over `classes`:
/// k at the label; (1 − ε) k there and ε k / classes everywhere when smoothed. `label`
/// is the label's place in `row`, outside [0, row.size()) when the label is not in it.
template <typename T, typename Row>
void subtract_target(Row&& row, std::int64_t label, T k, T eps, index_t classes) {
  if (eps != T(0)) row -= k * eps / static_cast<T>(classes);
  if (label >= 0 && label < row.size()) row[label] -= eps == T(0) ? k : (T(1) - eps) * k;
}

/// d loss / d x for loss rows whose upstream gradient is coef(r):
///   dx_r = coef(r) · (exp(x_r − max_r − log_sum_r) − target_r); 0 for uncounted rows,
/// target_r = one_hot(y_r), smoothed by ε.
template <typename T, typename Coef>
Tensor<T> cross_entropy_backward(const Tensor<T>& logits, const IndexTensor& labels, const Tensor<T>& stats,
                                 const CrossEntropyRows& rows, Coef&& coef) {
  Tensor<T> dx = make_tensor<T>(logits.shape());
  const index_t c = rows.classes;
  const T eps = static_cast<T>(rows.label_smoothing);
  const T* x = logits.data();
  const T* st = stats.data();
  const std::int64_t* y = labels.data();
  T* d = dx.data();
  parallel_for(rows.rows, kParallelGrain / std::max<index_t>(c, 1) + 1, [&](index_t begin, index_t end) {
    for (index_t r = begin; r < end; ++r) {
      VecMap<T> out(d + r * c, c);
      if (!rows.counts(r)) {
        out.setZero();
        continue;
      }
      const T k = coef(r);
      out = ((ConstVecMap<T>(x + r * c, c) - st[2 * r]) - st[2 * r + 1]).exp() * k;
      subtract_target(out, y[r], k, eps, c);
    }
  });
  return dx;
}

/// The forward of a cross-entropy of rows on a device backend: per-row losses (0 where a
/// row does not count), the stats and rows its backward (record_cross_entropy) reads.
/// Labels (and lengths) are read there, so a label out of range is not reported as on
/// the CPU: its loss is NaN.
template <typename T>
struct DeviceCrossEntropy {
  Tensor<T> losses, stats;
  heed::CrossEntropyRows rows;

  DeviceCrossEntropy(const Tensor<T>& logits, const IndexTensor& labels, const Shape& rows_shape, index_t steps,
                     const IndexTensor& lens, double label_smoothing) {
    rows.rows = rows_shape.numel();
    rows.label_smoothing = label_smoothing;
    rows.classes = logits.shape()[-1];
    rows.steps = steps;
    rows.lens = lens.defined() ? device_data(lens) : nullptr;
    rows.labels = device_data(labels);
    losses = make_tensor<T>(rows_shape, logits.device());
    stats = make_tensor<T>(Shape{rows.rows, 2}, logits.device());
    kernels_for(logits, "cross_entropy")
        .cross_entropy_forward(logits.device().index(), device_data(losses), device_data(stats), device_data(logits),
                               rows);
  }
};

/// Records the one backward node of a cross-entropy on out, for loss rows whose upstream
/// gradient is coef(r) = g[r / g_stride] / divisor: the CPU's loop over `rows`, or on a
/// device the kernel over `device_rows` (labels and lens are kept alive with it, since
/// device_rows points into them).
template <typename T>
void record_cross_entropy(Tensor<T>& out, const char* name, const Tensor<T>& logits, const IndexTensor& labels,
                          const IndexTensor& lens, CrossEntropyRows rows, const heed::CrossEntropyRows& device_rows,
                          const Tensor<T>& stats, index_t g_stride, T divisor) {
  if (!autograd::needs_grad(logits)) return;
  g_stride = std::max<index_t>(g_stride, 1);
  autograd::record(out, name, {logits},
                   [saved = autograd::save(logits), labels, lens, stats, rows = std::move(rows), device_rows, g_stride,
                    divisor](const Tensor<T>& g) {
                     const Tensor<T>& x = saved.get();
                     if (!x.is_cpu()) {
                       Tensor<T> dx = make_tensor<T>(x.shape(), x.device());
                       kernels_for(x, "cross_entropy backward")
                           .cross_entropy_backward(x.device().index(), device_data(dx), device_data(x),
                                                   device_data(stats), device_rows, device_data(g), g_stride, divisor);
                       return autograd::Grads<T>{dx};
                     }
                     const T* gd = g.data();
                     const auto coef = [&](index_t r) { return gd[r / g_stride] / divisor; };
                     return autograd::Grads<T>{cross_entropy_backward(x, labels, stats, rows, coef)};
                   });
}

}  // namespace detail

/// Softmax cross entropy of `logits` (..., num_classes) against class indices `labels`
/// (...), reduced as asked, with the targets smoothed by label_smoothing. See the top of
/// this file.
template <typename T>
Tensor<T> cross_entropy(const Tensor<T>& logits, const IndexTensor& labels, Reduction reduction = Reduction::mean,
                        double label_smoothing = 0.0) {
  detail::check_defined(logits, "cross_entropy", "logits");
  detail::check_defined(labels, "cross_entropy", "labels");
  detail::check_floating<T>("cross_entropy");
  detail::check_label_smoothing(label_smoothing, "cross_entropy");
  HEED_CHECK(logits.dim() >= 1, ShapeError, "cross_entropy: logits must be (..., num_classes), got shape ",
             to_string(logits.shape()));
  const Shape rows_shape = detail::dropped_shape(logits.shape(), logits.dim() - 1);
  HEED_CHECK(labels.shape() == rows_shape, ShapeError, "cross_entropy: labels of shape ", to_string(labels.shape()),
             " do not match logits of shape ", to_string(logits.shape()), "; expected labels of shape ",
             to_string(rows_shape));
  const index_t count = rows_shape.numel();
  detail::CrossEntropyRows rows;
  rows.classes = logits.shape()[-1];
  rows.rows = count;
  rows.label_smoothing = label_smoothing;
  heed::CrossEntropyRows device_rows;
  Tensor<T> out, stats;
  if (detail::on_device("cross_entropy", logits, labels)) {
    const detail::DeviceCrossEntropy<T> ce(logits, labels, rows_shape, 1, IndexTensor(), label_smoothing);
    device_rows = ce.rows;
    stats = ce.stats;
    out = ce.losses;
    if (reduction != Reduction::none) {
      out = rows_shape == Shape{} ? detail::copy_of(out) : detail::sum_to(out, Shape{});
      if (reduction == Reduction::mean) out = mul(out, T(1) / static_cast<T>(count));
    }
  } else {
    detail::check_labels(labels, rows.classes, "cross_entropy");
    stats = detail::make_tensor<T>(Shape{rows.rows, 2});
    Tensor<T> losses = detail::make_tensor<T>(rows_shape);
    detail::cross_entropy_forward(logits.data(), labels.data(), rows, stats.data(), losses.data());
    out = losses;
    if (reduction != Reduction::none) {
      const T total = losses.array().sum();
      out = scalar_tensor<T>(reduction == Reduction::sum ? total : total / static_cast<T>(rows.rows));
    }
  }
  // Each row's gradient: g[r] unreduced, else g[0], divided by the count for the mean.
  detail::record_cross_entropy(out, "CrossEntropyBackward", logits, labels, IndexTensor(), std::move(rows), device_rows,
                               stats, reduction == Reduction::none ? 1 : count,
                               reduction == Reduction::mean ? static_cast<T>(count) : T(1));
  return out;
}

}  // namespace heed

#include "heed/detail/header_end.hpp"
