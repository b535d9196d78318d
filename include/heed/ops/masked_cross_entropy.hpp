// heed/ops/masked_cross_entropy.hpp — d2l's MaskedSoftmaxCELoss (d2l 9.7.3): the softmax cross
// entropy of a batch of padded sequences, counting only each sequence's valid steps.
//
//   pred:      (batch, num_steps, vocab_size)   the decoder's logits
//   label:     (batch, num_steps)               int64 token indices
//   valid_len: (batch)                          int64, how many steps of each sequence count
//   loss(pred, label, valid_len): (batch)       per sequence: Σ_{t < valid_len} CE(pred_bt, label_bt) / num_steps
//
//   heed::MaskedSoftmaxCELoss loss;
//   auto l = loss(Y_hat, Y, Y_valid_len);   // as d2l's train_seq2seq
//   l.sum().backward();
//
// d2l computes the cross entropy at every step, then multiplies the padded ones by 0
// and takes the mean over num_steps (dividing by num_steps, not by valid_len). heed
// computes only the valid steps: the values and gradients are the same (padded steps
// get gradient exactly 0), as long as the padded logits are finite — d2l's 0 · inf is
// NaN where heed's is 0. As in PyTorch, every label, padded ones included, must be a
// valid index. A valid_len at or above num_steps counts every step; a negative one is
// refused.
//
// mean_steps, when given, is the divisor instead of num_steps: the steps of the batch
// before its padding was cut off (train_seq2seq), so that the loss stays d2l's.
// label_smoothing smooths each step's target as cross_entropy's (heed/ops/cross_entropy.hpp)
// and PyTorch's nn.CrossEntropyLoss(label_smoothing=ε).
#pragma once

#include "heed/detail/header_begin.hpp"

#include <utility>
#include <vector>

#include "heed/ops/cross_entropy.hpp"
#include "heed/ops/linear_cross_entropy.hpp"
#include "heed/ops/sequence_mask.hpp"

namespace heed {

/// MaskedSoftmaxCELoss as a function: see the top of this file.
template <typename T>
Tensor<T> masked_softmax_ce_loss(const Tensor<T>& pred, const IndexTensor& label, const IndexTensor& valid_len,
                                 index_t mean_steps = 0, double label_smoothing = 0.0) {
  detail::check_floating<T>("MaskedSoftmaxCELoss");
  detail::check_defined(pred, "MaskedSoftmaxCELoss", "pred");
  detail::check_label_smoothing(label_smoothing, "MaskedSoftmaxCELoss");
  HEED_CHECK(label.defined(), ValueError, "MaskedSoftmaxCELoss: label is undefined");
  HEED_CHECK(pred.dim() == 3, ShapeError, "MaskedSoftmaxCELoss: pred must be (batch, num_steps, vocab_size), got ",
             to_string(pred.shape()));
  const index_t batch = pred.shape()[0], num_steps = pred.shape()[1];
  HEED_CHECK(label.shape() == (Shape{batch, num_steps}), ShapeError, "MaskedSoftmaxCELoss: label of shape ",
             to_string(label.shape()), " does not match pred of shape ", to_string(pred.shape()),
             "; expected label of shape (", batch, ", ", num_steps, ")");
  HEED_CHECK(mean_steps == 0 || mean_steps >= num_steps, ValueError, "MaskedSoftmaxCELoss: mean_steps = ", mean_steps,
             " is fewer than pred's ", num_steps, " steps");
  const T steps = static_cast<T>(mean_steps > 0 ? mean_steps : num_steps);
  detail::CrossEntropyRows rows;
  rows.rows = batch * num_steps;
  rows.classes = pred.shape()[2];
  rows.steps = num_steps;
  rows.label_smoothing = label_smoothing;
  heed::CrossEntropyRows device_rows;
  Tensor<T> out, stats;
  if (detail::on_device("MaskedSoftmaxCELoss", pred, label, valid_len)) {
    HEED_CHECK(valid_len.shape() == Shape{batch}, ShapeError, "MaskedSoftmaxCELoss: valid_len of shape ",
               to_string(valid_len.shape()), " does not match a batch of ", batch, " sequences; expected (", batch,
               ")");
    const detail::DeviceCrossEntropy<T> ce(pred, label, Shape{batch, num_steps}, num_steps, valid_len, label_smoothing);
    device_rows = ce.rows;
    stats = ce.stats;
    out = mul(detail::alias(detail::sum_to(ce.losses, Shape{batch, 1}), Shape{batch}), T(1) / steps);
  } else {
    rows.lens = detail::sequence_lens(valid_len, batch, num_steps, "MaskedSoftmaxCELoss");
    detail::check_labels(label, rows.classes, "MaskedSoftmaxCELoss");
    stats = detail::make_tensor<T>(Shape{rows.rows, 2});
    std::vector<T> losses(static_cast<std::size_t>(rows.rows));
    detail::cross_entropy_forward(pred.data(), label.data(), rows, stats.data(), losses.data());
    // (unweighted_loss * weights).mean(dim=1): the padded steps are 0 in the sum.
    out = detail::make_tensor<T>(Shape{batch});
    for (index_t b = 0; b < batch; ++b) {
      T total = 0;
      for (index_t t = 0; t < num_steps; ++t) total += losses[static_cast<std::size_t>(b * num_steps + t)];
      out.data()[b] = total / steps;
    }
  }
  // Step t of sequence b gets g[b] / steps.
  detail::record_cross_entropy(out, "MaskedSoftmaxCELossBackward", pred, label, valid_len, std::move(rows), device_rows,
                               stats, num_steps, steps);
  return out;
}

/// masked_softmax_ce_loss(linear(hidden, weight, bias), label, valid_len, mean_steps,
/// label_smoothing) without ever holding the logits (heed/ops/linear_cross_entropy.hpp): the decoder's
/// output layer and the loss in one, over the valid steps only. train_seq2seq takes this
/// path for decoders that expose their output layer (see EncoderDecoder::features).
///   hidden: (batch, num_steps, in_features)  weight: (vocab_size, in_features)
template <typename T>
Tensor<T> masked_linear_ce_loss(const Tensor<T>& hidden, const Tensor<T>& weight, const Tensor<T>& bias,
                                const IndexTensor& label, const IndexTensor& valid_len, index_t mean_steps = 0,
                                double label_smoothing = 0.0) {
  constexpr const char* op = "masked_linear_ce_loss";
  detail::check_label_smoothing(label_smoothing, op);
  HEED_CHECK(hidden.defined() && hidden.dim() == 3, ShapeError, op,
             ": hidden must be (batch, num_steps, in_features), got ",
             hidden.defined() ? to_string(hidden.shape()) : std::string("undefined"));
  if (detail::on_device(op, hidden, weight, bias, label, valid_len))
    return masked_softmax_ce_loss(linear(hidden, weight, bias), label, valid_len, mean_steps, label_smoothing);
  const index_t batch = hidden.shape()[0], num_steps = hidden.shape()[1];
  detail::check_linear_ce(op, hidden, weight, bias, label, Shape{batch, num_steps});
  HEED_CHECK(mean_steps == 0 || mean_steps >= num_steps, ValueError, op, ": mean_steps = ", mean_steps,
             " is fewer than hidden's ", num_steps, " steps");
  detail::CrossEntropyRows rows;
  rows.rows = batch * num_steps;
  rows.steps = num_steps;
  rows.lens = detail::sequence_lens(valid_len, batch, num_steps, op);
  rows.label_smoothing = label_smoothing;
  const T steps = static_cast<T>(mean_steps > 0 ? mean_steps : num_steps);
  return detail::fused_linear_ce(
      "MaskedLinearCELossBackward", hidden, weight, bias, label, rows, Shape{batch},
      [&](const std::vector<T>& losses, const std::vector<index_t>& row_of) {
        // Σ over each sequence's valid steps / steps, as masked_softmax_ce_loss.
        Tensor<T> out = detail::make_tensor<T>(Shape{batch});
        std::vector<T> total(static_cast<std::size_t>(batch), T(0));
        for (std::size_t i = 0; i < row_of.size(); ++i)
          total[static_cast<std::size_t>(row_of[i] / num_steps)] += losses[i];
        for (index_t b = 0; b < batch; ++b) out.data()[b] = total[static_cast<std::size_t>(b)] / steps;
        return out;
      },
      [num_steps, steps](const Tensor<T>& g, index_t r) { return g.data()[r / num_steps] / steps; });
}

/// The softmax cross-entropy loss with masks, spelled as d2l's class:
///   heed::MaskedSoftmaxCELoss loss;  auto l = loss(pred, label, valid_len);  // l: (batch)
///   heed::MaskedSoftmaxCELoss smoothed(0.1);  // as nn.CrossEntropyLoss(label_smoothing=0.1)
class MaskedSoftmaxCELoss {
 public:
  explicit MaskedSoftmaxCELoss(double label_smoothing = 0.0) : label_smoothing_(label_smoothing) {
    detail::check_label_smoothing(label_smoothing, "MaskedSoftmaxCELoss");
  }
  double label_smoothing() const { return label_smoothing_; }

  // pred: (batch, num_steps, vocab_size)  label: (batch, num_steps)  valid_len: (batch)
  template <typename T>
  Tensor<T> forward(const Tensor<T>& pred, const IndexTensor& label, const IndexTensor& valid_len,
                    index_t mean_steps = 0) const {
    return masked_softmax_ce_loss(pred, label, valid_len, mean_steps, label_smoothing_);
  }
  template <typename T>
  Tensor<T> operator()(const Tensor<T>& pred, const IndexTensor& label, const IndexTensor& valid_len,
                       index_t mean_steps = 0) const {
    return forward(pred, label, valid_len, mean_steps);
  }

 private:
  double label_smoothing_;
};

}  // namespace heed

#include "heed/detail/header_end.hpp"
