// heed/seq2seq/train_options.hpp — what train_seq2seq (heed/seq2seq/train.hpp) is told
// and what it reports: TrainOptions (the knobs; where a resumed run starts is a
// TrainState, heed/io/training_checkpoint.hpp), EpochStats for each epoch's observers,
// TrainResult.
#pragma once

#include "heed/detail/header_begin.hpp"

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "heed/core/generator.hpp"
#include "heed/core/shape.hpp"
#include "heed/detail/deprecated.hpp"
#include "heed/dist/communicator.hpp"
#include "heed/ops/precision.hpp"
#include "heed/optim/ema.hpp"
#include "heed/optim/lr_schedule.hpp"

namespace heed {

struct EpochStats {
  index_t epoch = 0;  // 1-based
  index_t num_epochs = 0;
  double loss = 0.0;  // summed sequence losses / target tokens, as d2l reports it
  double tokens_per_second = 0.0;
  double elapsed_seconds = 0.0;  // since training started
  index_t epochs_before = 0;     // of a resumed run, the epochs done before it (elapsed_seconds has none of them)
};

HEED_IGNORE_DEPRECATED_BEGIN  // the struct, or its copies warn in every program (detail/deprecated.hpp)
struct TrainOptions {
  double grad_clip = 1.0;                 // d2l's grad_clipping(net, 1); 0 turns clipping off
  bool xavier_init = true;                // d2l's net.apply(xavier_init_weights)
  Generator* generator = nullptr;         // for the initialisation; default_generator() when null
  bool trim_padding = true;               // cut each batch after its longest sequence (see above)
  bool fuse_output_loss = true;           // the decoder's output layer and the loss in one (see above)
  index_t micro_batches = 1;              // parts of each batch run on parallel threads (see above)
  std::optional<LrSchedule> lr_schedule;  // the rate of step 1, 2, ... over all epochs; `lr` when unset
  index_t accumulation_steps = 1;         // batches whose gradients are summed into one update (see above)
  double label_smoothing = 0.0;           // ε of the loss's targets, as nn.CrossEntropyLoss(label_smoothing=ε)
  index_t max_steps =
      0;  // stop once the TrainState's steps_done + this run's updates reach it, mid-epoch if so; 0: off
  double max_seconds = 0.0;  // stop after the update at which this run has trained this long, mid-epoch if so; 0: off
  // The products' precision (heed/ops/autocast.hpp): fp32, or bf16 — mixed precision as
  // torch.autocast's: bf16 operands, fp32 sums, parameters, gradients and Adam. bf16
  // trains a float net, on the CPU or a device (cuBLAS's bf16 tensor-core products);
  // int8 is for decoding only.
  Precision precision = Precision::fp32;
  // Marian's exponential smoothing (heed/optim/ema.hpp): after each update, ema = ema_decay·ema +
  // (1 − ema_decay)·param, in fp32; training never reads it. 0: off; e.g. 0.9999. The average
  // lives in *ema when given (started from the parameters after the initialisation unless
  // it has been: a caller running an epoch at a time, or resuming, keeps it there), else
  // in TrainResult::ema, started afresh.
  double ema_decay = 0.0;
  ExponentialMovingAverage* ema = nullptr;
  std::function<void(const EpochStats&)> on_epoch;  // called after each epoch (heed/seq2seq/progress.hpp); rank 0 only
  dist::Communicator* communicator = nullptr;       // data-parallel over its ranks when it has several (see above)

  // Old spellings, honoured, for one release. Where a resumed run starts is
  // train_seq2seq's TrainState argument, not a knob: the first three are its old
  // spelling, read by the overload without one.
  [[deprecated("use train_seq2seq's TrainState argument: TrainState::epochs_done")]] detail::DeprecatedValue<index_t>
      epochs_done;
  [[deprecated("use train_seq2seq's TrainState argument: TrainState::steps_done")]] detail::DeprecatedValue<index_t>
      steps_done;
  [[deprecated(
      "use train_seq2seq's TrainState argument: TrainState::epoch_batches_done")]] detail::DeprecatedValue<index_t>
      skip_batches;
  /// Before 0.2 (where it was on by default): a progress line per epoch on stderr.
  [[deprecated(
      "attach heed::ProgressReport (heed/seq2seq/progress.hpp) through on_epoch")]] detail::DeprecatedValue<bool>
      progress;
};
HEED_IGNORE_DEPRECATED_END

namespace detail {
/// What the deprecated TrainOptions::progress reports: heed::ProgressReport on stderr
/// (defined in heed/seq2seq/progress.hpp, which the end of this header includes).
inline void report_progress_on_stderr(const EpochStats& stats);
}  // namespace detail

struct TrainResult {
  std::vector<double> losses;  // per epoch
  double seconds = 0.0;
  index_t tokens = 0;  // target tokens processed in all epochs
  index_t steps = 0;   // optimiser updates in all epochs (batches / accumulation_steps, rounded up per epoch)
  double tokens_per_second = 0.0;
  double communication_seconds = 0.0;  // data-parallel: summing the gradients across ranks (DataParallel)
  double wait_seconds = 0.0;           // data-parallel: waiting for the slowest rank before each sum
  std::size_t elements_summed = 0;     // data-parallel: gradient elements summed across ranks (rows with bits)
  // Where max_steps or max_seconds stopped the run: the last epoch's batches trained
  // (skipped ones included), fewer than its batches when it stopped mid-epoch (then its
  // loss is of those batches, and on_epoch is not called for it).
  index_t epoch_batches = 0;
  bool stopped_mid_epoch = false;
  bool out_of_time = false;      // max_seconds stopped it (on any rank: the ranks stop together)
  ExponentialMovingAverage ema;  // the weights' moving average, when ema_decay > 0 and TrainOptions::ema is null
};

}  // namespace heed

#include "heed/detail/header_end.hpp"
