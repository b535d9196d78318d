// heed/optim/lr_schedule.hpp — learning-rate schedules: the rate of each optimiser step.
//
//   const auto schedule = heed::LrSchedule::inverse_sqrt(/*lr=*/1e-3, /*warmup_steps=*/4000);
//   for (std::int64_t step = 1; ...; ++step) {
//     optimizer.set_lr(schedule(step));   // before the step's update
//     ...
//   }
//
// Every schedule but constant without warm-up starts with a linear warm-up, lr · step /
// warmup_steps, reaching lr at step warmup_steps; after it:
//   constant      lr;
//   inverse_sqrt  lr · √(warmup_steps / step), "Attention Is All You Need" (§5.3):
//                 Vaswani's d_model^−0.5 · min(step^−0.5, step · warmup^−1.5) is this
//                 schedule with lr = (d_model · warmup)^−0.5;
//   cosine        min_lr + (lr − min_lr) · (1 + cos(π · (step − warmup_steps) /
//                 (total_steps − warmup_steps))) / 2, then min_lr after total_steps
//                 (torch's CosineAnnealingLR over the steps after the warm-up).
// Steps count from 1, the optimiser's first update.
#pragma once

#include "heed/detail/header_begin.hpp"

#include <cmath>
#include <cstdint>
#include <string>

#include "heed/core/error.hpp"

namespace heed {

class LrSchedule {
 public:
  enum class Kind { constant, inverse_sqrt, cosine };

  static LrSchedule constant(double lr, std::int64_t warmup_steps = 0) {
    return LrSchedule(Kind::constant, lr, warmup_steps, 0, 0.0);
  }
  static LrSchedule inverse_sqrt(double lr, std::int64_t warmup_steps) {
    HEED_CHECK(warmup_steps >= 1, ValueError, "LrSchedule::inverse_sqrt: warmup_steps must be >= 1, got ",
               warmup_steps);
    return LrSchedule(Kind::inverse_sqrt, lr, warmup_steps, 0, 0.0);
  }
  static LrSchedule cosine(double lr, std::int64_t warmup_steps, std::int64_t total_steps, double min_lr = 0.0) {
    HEED_CHECK(total_steps > warmup_steps, ValueError, "LrSchedule::cosine: total_steps (", total_steps,
               ") must exceed warmup_steps (", warmup_steps, ")");
    HEED_CHECK(min_lr >= 0.0 && min_lr <= lr, ValueError, "LrSchedule::cosine: min_lr must be in [0, lr = ", lr,
               "], got ", min_lr);
    return LrSchedule(Kind::cosine, lr, warmup_steps, total_steps, min_lr);
  }

  /// The learning rate of step `step` (1-based).
  double operator()(std::int64_t step) const {
    HEED_CHECK(step >= 1, ValueError, "LrSchedule: step must be >= 1, got ", step);
    const auto s = static_cast<double>(step), warmup = static_cast<double>(warmup_steps_);
    if (step < warmup_steps_) return lr_ * s / warmup;
    switch (kind_) {
      case Kind::constant:
        return lr_;
      case Kind::inverse_sqrt:
        return lr_ * std::sqrt(warmup / s);
      case Kind::cosine: {
        if (step >= total_steps_) return min_lr_;
        const double progress = (s - warmup) / static_cast<double>(total_steps_ - warmup_steps_);
        return min_lr_ + (lr_ - min_lr_) * 0.5 * (1.0 + std::cos(3.14159265358979323846 * progress));
      }
    }
    return lr_;  // unreachable: every kind returns above
  }

  Kind kind() const { return kind_; }
  double lr() const { return lr_; }
  std::int64_t warmup_steps() const { return warmup_steps_; }
  std::int64_t total_steps() const { return total_steps_; }
  double min_lr() const { return min_lr_; }

  /// "constant", "inverse_sqrt" or "cosine".
  std::string name() const {
    return kind_ == Kind::constant ? "constant" : kind_ == Kind::inverse_sqrt ? "inverse_sqrt" : "cosine";
  }

 private:
  LrSchedule(Kind kind, double lr, std::int64_t warmup_steps, std::int64_t total_steps, double min_lr)
      : kind_(kind), lr_(lr), warmup_steps_(warmup_steps), total_steps_(total_steps), min_lr_(min_lr) {
    HEED_CHECK(std::isfinite(lr) && lr > 0.0, ValueError, "LrSchedule: lr must be positive and finite, got ", lr);
    HEED_CHECK(warmup_steps >= 0, ValueError, "LrSchedule: warmup_steps must be >= 0, got ", warmup_steps);
  }

  Kind kind_;
  double lr_;
  std::int64_t warmup_steps_, total_steps_;
  double min_lr_;
};

}  // namespace heed

#include "heed/detail/header_end.hpp"
