// heed/seq2seq/train.hpp — d2l's train_seq2seq (9.7.4): teacher forcing, Adam, the
// masked cross-entropy, gradient clipping at norm 1.
//
//   auto data = heed::load_data_nmt("fra.txt", /*batch_size=*/64, /*num_steps=*/10, 600);
//   auto result = heed::train_seq2seq<float>(*net, data.data_iter, /*lr=*/0.005, /*num_epochs=*/200,
//                                            data.tgt_vocab);
//   // result.losses: the loss per token of each epoch; result.tokens_per_second
//
// Each batch: the decoder reads <bos> followed by the target minus its last token and
// learns to predict the target; the loss of each sequence is d2l's (the mean over its
// steps of the masked cross-entropy), and the epoch's reported loss is the summed loss
// over the number of target tokens, as d2l's Animator plots it. The loop reports
// nothing itself: TrainOptions::on_epoch gets each epoch's figures, and
// heed/seq2seq/progress.hpp has the observers d2l's Animator stands for (a progress
// report, the loss curve as SVG and CSV).
//
// Padding is most of a batch at d2l's sizes (fra.txt's first 600 pairs: 4 of 10 steps
// are real), so each batch is cut after its longest sequence (TrainOptions::trim_padding)
// where that changes nothing: the source when the encoder says so, the target when the
// decoder says so (a static `ignores_padding`). The Transformer's do: its attention
// masks the padding, its decoder is causal, the loss skips the padded steps, and an
// element's dropout mask depends on its coordinates, not on the extent of its tensor.
// d2l's GRU encoder does not (its final state runs through the padding), nor does the
// Bahdanau decoder (its dropouts draw once per step, so fewer steps would shift the
// random stream of the batches after). Losses and gradients are the same as without
// cutting, dropout included (tested).
//
// For a decoder whose output layer is exposed (features() and dense: both of heed's),
// that layer and the loss run as one op, masked_linear_ce_loss, which never holds the
// (batch, steps, vocab) logits nor their gradient and computes the valid steps only: at
// the realistic size (compare_scale.py) that is 115 MiB less at the peak and a faster
// step (bench_linear_ce). The loss is the same to rounding; TrainOptions::fuse_output_loss
// = false takes the unfused path.
//
// TrainOptions::lr_schedule (heed/optim/lr_schedule.hpp), when set, gives the rate of
// every optimiser step, counted from 1 over all epochs, in place of the constant lr.
// TrainOptions::accumulation_steps = k sums the gradients of k batches before each
// clipping and update (the last of an epoch may take fewer): the loss is summed over
// sequences, so the update is that of one batch of their rows, to rounding, at a k-th
// of the memory.
//
// TrainOptions::micro_batches = k splits each batch into k parts by rows, each its own
// forward and backward on its own thread, the gradients summed in part order before
// clipping and the optimiser's step (heed/optim/micro_batches.hpp): 2 threads train
// the realistic Transformer ~1.9× as fast as 1 with k = 2, against ~1.35× with ops
// split across threads. The parts' losses and gradients are those of the whole batch
// to rounding, but their dropout masks are drawn apart, so k changes the bits; the
// thread count never does. Each part is cut after its own longest sequence, and where
// the batch is cut (the Transformer), its rows are first sorted by length and the
// parts cut to even cost (detail::length_balanced_split): less padding and no thread
// waiting for the other, 6.5 % faster at 1 and 2 threads on the realistic workload.
//
// TrainOptions::communicator, when it has several ranks (heed/dist/mpi.hpp: the
// processes of mpiexec), trains data-parallel (heed/dist/data_parallel.hpp): every rank
// runs this function with the same net, loader and options; rank 0's parameters are
// broadcast after the initialisation (every rank must have built the same model, and
// been given the same options, loader state and default generator: what this function
// sees of them is compared, dist::check_same_settings, and the first difference named
// on every rank); each batch is split into ranks × micro_batches parts,
// rank r running parts [r·k, (r+1)·k); the gradients are summed across the ranks, in
// rank order, before clipping, so every rank takes the same step. With micro_batches = 1
// the parameters are the bits of one process with micro_batches = ranks (tested for
// N = 2 and 3). on_epoch is called on rank 0 only; the reported losses are the ranks'
// sums. An exception on one rank ends every rank with its message
// (Communicator::abort): the others would wait for it forever. docs/distributed.md.
//
// TrainOptions::ema_decay > 0 keeps an exponential moving average of the parameters
// (Marian's exponential smoothing, heed/optim/ema.hpp), updated after every optimiser
// step, in fp32 beside the parameters; training never reads it, so the parameters' bits
// are those of a run without it. A run an epoch at a time carries it in TrainOptions::ema.
//
// The options and results are in heed/seq2seq/train_options.hpp, a batch's preparation
// in train_batch.hpp, what data-parallel ranks compare in train_settings.hpp.
#pragma once

#include "heed/detail/header_begin.hpp"

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <numeric>
#include <optional>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include "heed/detail/deprecated.hpp"
#include "heed/dist/communicator.hpp"
#include "heed/dist/data_parallel.hpp"
#include "heed/dist/settings.hpp"
#include "heed/io/training_checkpoint.hpp"
#include "heed/nn/init.hpp"
#include "heed/ops/autocast.hpp"
#include "heed/ops/reduce.hpp"
#include "heed/ops/shape.hpp"
#include "heed/optim/adam.hpp"
#include "heed/optim/clip.hpp"
#include "heed/optim/lr_schedule.hpp"
#include "heed/optim/micro_batches.hpp"
#include "heed/seq2seq/data.hpp"
#include "heed/seq2seq/loss.hpp"
#include "heed/seq2seq/train_batch.hpp"
#include "heed/seq2seq/train_options.hpp"
#include "heed/seq2seq/train_settings.hpp"

namespace heed {

/// Trains `net` (an EncoderDecoder) on the batches of `data_iter` (anything whose
/// iteration yields batches with X, X_valid_len, Y, Y_valid_len, as NmtDataLoader) with
/// the caller's Adam over net.parameters(), on the device the net is on: each batch is
/// moved there and each loss read back. The optimizer's learning rate is the constant
/// one (TrainOptions::lr_schedule, when set, overrides it at every step).
///
/// Resuming: `resume` says where the run starts (a fresh one: TrainState{}). A run of
/// num_epochs epochs gives the same bits as one of e epochs, the state saved
/// (save_training_checkpoint with the loader's generator and the default generator,
/// which dropout draws from: TrainState::to_metadata), then a run of num_epochs − e
/// epochs in a new net and optimizer loaded from it (load_training_checkpoint, the
/// generators' states set back), with options.xavier_init = false, resume.epochs_done =
/// e and resume.steps_done = the first run's TrainResult::steps. Tested. A run stopped by
/// max_steps or max_seconds in mid-epoch goes on the same way from the loader's generator as it was
/// before that epoch began, with epochs_done = the epochs before it and
/// epoch_batches_done = its TrainResult::epoch_batches: the epoch's order is drawn again
/// and its first batches passed over. Tested too. resume's generator states and
/// best_metric are the caller's to set back; only its counts are read here.
template <typename T, typename Net, typename Loader>
TrainResult train_seq2seq(Net& net, Loader& data_iter, Adam<T>& optimizer, index_t num_epochs, const Vocab& tgt_vocab,
                          const TrainOptions& options, const TrainState& resume) {
  HEED_CHECK(num_epochs >= 0, ValueError, "train_seq2seq: num_epochs must be >= 0, got ", num_epochs);
  HEED_CHECK(resume.epochs_done >= 0 && resume.steps_done >= 0, ValueError,
             "train_seq2seq: epochs_done and steps_done must be >= 0, got ", resume.epochs_done, " and ",
             resume.steps_done);
  HEED_CHECK(options.micro_batches >= 1, ValueError, "train_seq2seq: micro_batches must be >= 1, got ",
             options.micro_batches);
  HEED_CHECK(options.accumulation_steps >= 1, ValueError, "train_seq2seq: accumulation_steps must be >= 1, got ",
             options.accumulation_steps);
  HEED_CHECK(options.grad_clip >= 0.0, ValueError, "train_seq2seq: grad_clip must be >= 0, got ", options.grad_clip);
  HEED_CHECK(options.max_steps >= 0 && resume.epoch_batches_done >= 0, ValueError,
             "train_seq2seq: max_steps and skip_batches must be >= 0, got ", options.max_steps, " and ",
             resume.epoch_batches_done);
  HEED_CHECK(options.max_seconds >= 0.0, ValueError, "train_seq2seq: max_seconds must be >= 0, got ",
             options.max_seconds);
  HEED_CHECK(options.ema_decay >= 0.0 && options.ema_decay < 1.0, ValueError,
             "train_seq2seq: ema_decay must be in [0, 1), got ", options.ema_decay);
  detail::check_label_smoothing(options.label_smoothing, "train_seq2seq");
  detail::check_not_converted(net, "train_seq2seq");
  HEED_CHECK(options.precision != Precision::int8, ValueError,
             "train_seq2seq: precision int8 is for decoding only; training takes fp32 or bf16");
  HEED_CHECK(tgt_vocab.contains(tgt_vocab.special_tokens().bos), ValueError,
             "train_seq2seq: the target vocabulary has no start token ", tgt_vocab.special_tokens().bos);
  // Training runs where the net is (net.to(device) first): each batch goes there, and
  // each step's loss comes back, nothing else.
  const Device device = net.device();
  HEED_CHECK(options.precision == Precision::fp32 || (std::is_same_v<T, float>), ValueError,
             "train_seq2seq: precision ", to_string(options.precision), " trains a float net, the net is double");
  if (options.xavier_init) {
    net.to(Device::cpu());  // the initialisers write on the host: once, before training
    init::xavier_init_weights(net, options.generator ? *options.generator : default_generator());
    net.to(device);
  }
  const std::vector<Tensor<T>> params = net.parameters();
  HEED_CHECK(
      optimizer.params().size() == params.size() &&
          std::equal(params.begin(), params.end(), optimizer.params().begin(),
                     [](const Tensor<T>& a, const Tensor<T>& b) { return &detail::impl(a) == &detail::impl(b); }),
      ValueError, "train_seq2seq: the optimizer's ", optimizer.params().size(), " parameters are not the net's ",
      params.size());
  const MaskedSoftmaxCELoss loss(options.label_smoothing);
  net.train();
  const index_t bos = tgt_vocab.bos_index();
  // Data-parallel: the same model everywhere (rank 0's values), each rank its parts of
  // every batch, the gradients summed across ranks before clipping.
  std::optional<dist::DataParallel<T>> parallel;
  if (options.communicator && options.communicator->size() > 1) {
    HEED_CHECK(device.is_cpu(), DeviceError, "train_seq2seq: data-parallel training runs on the CPU, the net is on ",
               device);
    parallel.emplace(*options.communicator, net);
    parallel->broadcast_parameters();
    dist::check_same_settings(
        *options.communicator,
        detail::data_parallel_settings(num_epochs, options, resume, optimizer, tgt_vocab, data_iter), "train_seq2seq");
  }
  const index_t ranks = parallel ? parallel->size() : 1;
  const bool trim_source = options.trim_padding && detail::ignores_padding<typename Net::EncoderType>::value;
  const bool trim_target = options.trim_padding && detail::ignores_padding<typename Net::DecoderType>::value;
  const AutocastGuard autocast(options.precision);  // the micro-batches' threads take it too
  const auto start = std::chrono::steady_clock::now();
  auto seconds_since = [](std::chrono::steady_clock::time_point t) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
  };
  TrainResult result;
  // The weights' moving average, from the parameters as training starts (after the
  // initialisation and, data-parallel, rank 0's broadcast) unless the caller's has begun.
  ExponentialMovingAverage* ema = options.ema_decay > 0.0 ? (options.ema ? options.ema : &result.ema) : nullptr;
  if (ema && !ema->started()) ema->start(params);
  const auto update = [&] {
    if (parallel) parallel->allreduce_gradients();
    if (options.grad_clip > 0.0) clip_grad_norm_(params, options.grad_clip);  // the norm is not read back
    ++result.steps;
    if (options.lr_schedule) optimizer.set_lr((*options.lr_schedule)(resume.steps_done + result.steps));
    optimizer.step();
    if (ema) ema->update(params, options.ema_decay);
  };
  // After an update: whether max_steps or max_seconds ends the run (a run makes one
  // update at least). The ranks' clocks differ, so they stop together when any of them
  // is out of time.
  const auto reached_limit = [&] {
    if (options.max_seconds > 0.0 && !result.out_of_time && result.steps > 0) {
      double out_of_time = seconds_since(start) >= options.max_seconds ? 1.0 : 0.0;
      if (parallel) out_of_time = parallel->allreduce(out_of_time);
      result.out_of_time = out_of_time > 0.0;
    }
    return result.out_of_time || (options.max_steps > 0 && resume.steps_done + result.steps >= options.max_steps);
  };
  const auto train_epochs = [&] {
    for (index_t epoch = resume.epochs_done + 1; epoch <= resume.epochs_done + num_epochs; ++epoch) {
      if (reached_limit()) break;
      const auto epoch_start = std::chrono::steady_clock::now();
      double loss_sum = 0.0;
      index_t num_tokens = 0;
      index_t accumulated = 0;  // batches whose gradients wait for the next update
      index_t batches = 0;      // of this epoch, skipped ones included
      const index_t skip = epoch == resume.epochs_done + 1 ? resume.epoch_batches_done : 0;
      bool stopped = false;
      auto next = data_iter.begin();  // begin() before end(): it draws the epoch's batches
      const auto last = data_iter.end();
      for (; next != last; ++next) {
        const auto& loaded = *next;
        if (batches++ < skip) continue;  // trained before the run was stopped
        if (accumulated == 0) optimizer.zero_grad();
        const index_t batch_rows = loaded.X.shape()[0], parts = std::min(options.micro_batches * ranks, batch_rows);
        NmtBatch batch{loaded.X, loaded.X_valid_len, loaded.Y, loaded.Y_valid_len};
        std::vector<index_t> bounds;  // the parts' rows when sorted; empty: even parts in the batch's order
        if (parts > 1 && (trim_source || trim_target)) {
          // Parts of rows of like lengths, each cut after its own longest: less padding, even parts.
          const detail::MicroBatchSplit split =
              detail::length_balanced_split(batch.X_valid_len, batch.Y_valid_len, parts, batch.X.shape()[1],
                                            batch.Y.shape()[1], trim_source, trim_target);
          for (IndexTensor* t : {&batch.X, &batch.X_valid_len, &batch.Y, &batch.Y_valid_len})
            *t = index_select(*t, 0, split.order);
          bounds = split.bounds;
        }
        // Rows [begin, end) of the batch: forward, loss and backward; the loss comes back.
        const auto step = [&](index_t begin, index_t end) {
          const auto rows = [&](const IndexTensor& t) { return t.narrow(0, begin, end - begin); };
          const IndexTensor X_valid_len = rows(batch.X_valid_len), Y_valid_len = rows(batch.Y_valid_len);
          const IndexTensor X = trim_source ? detail::trim_padding(rows(batch.X), X_valid_len) : rows(batch.X);
          const IndexTensor Y = trim_target ? detail::trim_padding(rows(batch.Y), Y_valid_len) : rows(batch.Y);
          const IndexTensor dec_input = detail::shift_right(Y, bos);
          Tensor<T> l;
          if constexpr (detail::has_output_features<typename Net::DecoderType>::value) {
            if (options.fuse_output_loss) {
              const Tensor<T> H = net.features(X.to(device), dec_input.to(device), X_valid_len.to(device));
              const auto& dense = net.decoder().dense;
              l = sum(masked_linear_ce_loss(H, dense.weight, dense.bias, Y.to(device), Y_valid_len.to(device),
                                            batch.Y.shape()[1], options.label_smoothing));
            }
          }
          if (!l.defined()) {
            const Tensor<T> Y_hat = net(X.to(device), dec_input.to(device), X_valid_len.to(device));
            l = sum(loss(Y_hat, Y.to(device), Y_valid_len.to(device), batch.Y.shape()[1]));
          }
          l.backward();
          return l.item();
        };
        if (bounds.empty()) bounds = detail::even_micro_batch_bounds(batch_rows, parts, "train_seq2seq");
        loss_sum += parallel ? parallel->accumulate(bounds, options.micro_batches, step)
                             : accumulate_micro_batches<T>(bounds, step, device.is_cpu());
        for (index_t i = 0; i < batch.Y_valid_len.numel(); ++i) num_tokens += batch.Y_valid_len.data()[i];
        if (++accumulated == options.accumulation_steps) {
          update();
          accumulated = 0;
          if (reached_limit()) {
            stopped = ++next != last;  // stopped after the epoch's last batch is the epoch done
            break;
          }
        }
      }
      if (accumulated > 0) update();  // the epoch's last batches, fewer than accumulation_steps
      if (parallel) loss_sum = parallel->allreduce(loss_sum);  // each rank summed its parts'
      result.epoch_batches = batches;
      result.stopped_mid_epoch = stopped;
      EpochStats stats;
      stats.epoch = epoch;
      stats.num_epochs = resume.epochs_done + num_epochs;
      stats.epochs_before = resume.epochs_done;
      stats.loss = num_tokens > 0 ? loss_sum / static_cast<double>(num_tokens) : 0.0;
      stats.tokens_per_second = static_cast<double>(num_tokens) / std::max(seconds_since(epoch_start), 1e-9);
      stats.elapsed_seconds = seconds_since(start);
      result.losses.push_back(stats.loss);
      result.tokens += num_tokens;
      if (stopped) break;  // mid-epoch: no epoch's figures to report
      if (!parallel || parallel->rank() == 0) {
        if (options.on_epoch) options.on_epoch(stats);
        HEED_IGNORE_DEPRECATED_BEGIN
        if (options.progress) detail::report_progress_on_stderr(stats);
        HEED_IGNORE_DEPRECATED_END
      }
    }
  };
  if (parallel)
    parallel->run_or_abort(train_epochs, "train_seq2seq");
  else
    train_epochs();
  if (parallel) {
    result.communication_seconds = parallel->communication_seconds();
    result.wait_seconds = parallel->wait_seconds();
    result.elements_summed = parallel->elements_summed();
  }
  result.seconds = seconds_since(start);
  result.tokens_per_second = static_cast<double>(result.tokens) / std::max(result.seconds, 1e-9);
  return result;
}

/// train_seq2seq from where TrainOptions' deprecated epochs_done, steps_done and
/// skip_batches say (a fresh run unless they are set).
template <typename T, typename Net, typename Loader>
TrainResult train_seq2seq(Net& net, Loader& data_iter, Adam<T>& optimizer, index_t num_epochs, const Vocab& tgt_vocab,
                          const TrainOptions& options = {}) {
  TrainState resume;
  HEED_IGNORE_DEPRECATED_BEGIN
  resume.epochs_done = options.epochs_done;
  resume.steps_done = options.steps_done;
  resume.epoch_batches_done = options.skip_batches;
  HEED_IGNORE_DEPRECATED_END
  return train_seq2seq<T>(net, data_iter, optimizer, num_epochs, tgt_vocab, options, resume);
}

/// train_seq2seq with d2l's optimizer: Adam over net.parameters() at rate lr. The type
/// is the model's unless given (train_seq2seq<float>(...)).
template <typename T = void, typename Net, typename Loader>
TrainResult train_seq2seq(Net& net, Loader& data_iter, double lr, index_t num_epochs, const Vocab& tgt_vocab,
                          const TrainOptions& options = {}) {
  using U = detail::model_type_or<T, Net>;
  HEED_CHECK(lr > 0.0, ValueError, "train_seq2seq: lr must be positive, got ", lr);
  Adam<U> optimizer(net.parameters(), lr);
  return train_seq2seq<U>(net, data_iter, optimizer, num_epochs, tgt_vocab, options);
}

}  // namespace heed

#include "heed/seq2seq/progress.hpp"  // detail::report_progress_on_stderr's definition

#include "heed/detail/header_end.hpp"
