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
#include "heed/ops/reduce.hpp"
#include "heed/ops/shape.hpp"
#include "heed/optim/adam.hpp"
#include "heed/optim/clip.hpp"
#include "heed/optim/lr_schedule.hpp"
#include "heed/optim/micro_batches.hpp"
#include "heed/seq2seq/data.hpp"
#include "heed/seq2seq/loss.hpp"

namespace heed {

struct EpochStats {
  index_t epoch = 0;  // 1-based
  index_t num_epochs = 0;
  double loss = 0.0;  // summed sequence losses / target tokens, as d2l reports it
  double tokens_per_second = 0.0;
  double elapsed_seconds = 0.0;  // since training started
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
  // Where max_steps stopped the run: the last epoch's batches trained (skipped ones
  // included), fewer than its batches when it stopped mid-epoch (then its loss is of
  // those batches, and on_epoch is not called for it).
  index_t epoch_batches = 0;
  bool stopped_mid_epoch = false;
};

namespace detail {

/// d2l's teacher forcing: cat([<bos>], Y[:, :-1]) along the steps.
inline IndexTensor shift_right(const IndexTensor& Y, index_t bos) {
  const index_t batch = Y.shape()[0], num_steps = Y.shape()[1];
  IndexTensor dec_input = make_tensor<std::int64_t>(Y.shape());
  for (index_t b = 0; b < batch; ++b) {
    dec_input.data()[b * num_steps] = bos;
    std::copy(Y.data() + b * num_steps, Y.data() + (b + 1) * num_steps - 1, dec_input.data() + b * num_steps + 1);
  }
  return dec_input;
}

/// X (batch, steps) cut after the longest of valid_lens (one step at least).
inline IndexTensor trim_padding(const IndexTensor& X, const IndexTensor& valid_lens) {
  const index_t longest = std::max<index_t>(max(valid_lens).item(), 1);
  return longest >= X.shape()[1] ? X : X.narrow(1, 0, longest);
}

/// How a batch's rows go to micro-batches when each part is cut after its own longest
/// sequence: sorted by length (stably), so that short rows run together and pad less,
/// and cut where the costliest part costs least. A part's cost is the positions it
/// runs, rows × (longest source + longest target), plus its target tokens, which the
/// fused output layer runs alone; a side that is not cut costs its full width.
struct MicroBatchSplit {
  IndexTensor order;            // the batch's rows in the parts' order
  std::vector<index_t> bounds;  // part i holds order[bounds[i]], ..., order[bounds[i + 1] - 1]
};

inline MicroBatchSplit length_balanced_split(const IndexTensor& X_valid_len, const IndexTensor& Y_valid_len,
                                             index_t parts, index_t source_width, index_t target_width, bool cut_source,
                                             bool cut_target) {
  const index_t rows = X_valid_len.numel();
  HEED_CHECK(Y_valid_len.numel() == rows && parts >= 1 && parts <= rows, ValueError, "length_balanced_split: ", rows,
             " and ", Y_valid_len.numel(), " valid lengths cannot make ", parts, " parts");
  // trim_padding keeps one step at least
  const auto source = [&](index_t r) {
    return cut_source ? std::max<index_t>(X_valid_len.data()[r], 1) : source_width;
  };
  const auto target = [&](index_t r) {
    return cut_target ? std::max<index_t>(Y_valid_len.data()[r], 1) : target_width;
  };
  std::vector<index_t> order(static_cast<std::size_t>(rows));
  std::iota(order.begin(), order.end(), index_t(0));
  std::stable_sort(order.begin(), order.end(),
                   [&](index_t a, index_t b) { return source(a) + target(a) < source(b) + target(b); });
  // Greedy packing under a cost bound is optimal for contiguous parts whose cost grows
  // with their extent; the least bound that packs into `parts` is found by bisection.
  // A part stops early when each part after it needs a row of its own.
  const auto pack = [&](index_t bound, std::vector<index_t>* bounds) {
    index_t begin = 0, count = 0;
    while (begin < rows) {
      index_t end = begin, longest_source = 0, longest_target = 0, tokens = 0;
      while (end < rows && rows - end > parts - count - 1) {
        const index_t r = order[static_cast<std::size_t>(end)];
        const index_t s = std::max(longest_source, source(r)), t = std::max(longest_target, target(r));
        if (end > begin && (end + 1 - begin) * (s + t) + tokens + Y_valid_len.data()[r] > bound) break;
        longest_source = s, longest_target = t, tokens += Y_valid_len.data()[r], ++end;
      }
      if (bounds) bounds->push_back(begin);
      begin = end, ++count;
    }
    if (bounds) bounds->push_back(rows);
    return count;
  };
  index_t low = 0, high = 0;  // bisection on the bound: packs into `parts` at `high`
  for (index_t r = 0; r < rows; ++r) high += source_width + target_width + Y_valid_len.data()[r];
  while (low < high) {
    const index_t middle = low + (high - low) / 2;
    if (pack(middle, nullptr) <= parts)
      high = middle;
    else
      low = middle + 1;
  }
  MicroBatchSplit split;
  pack(high, &split.bounds);
  split.order = make_tensor<std::int64_t>(Shape{rows});
  std::copy(order.begin(), order.end(), split.order.data());
  return split;
}

/// Whether cutting the padding off a module's input changes nothing at the valid steps
/// (Part::ignores_padding; false when it does not say).
template <typename Part, typename = void>
struct ignores_padding : std::false_type {};
template <typename Part>
struct ignores_padding<Part, std::void_t<decltype(Part::ignores_padding)>> : std::bool_constant<Part::ignores_padding> {
};

/// Whether a decoder gives the input of its output layer (features) and that layer
/// (dense), so that train_seq2seq can run them with the loss as masked_linear_ce_loss.
template <typename Decoder, typename = void>
struct has_output_features : std::false_type {};
template <typename Decoder>
struct has_output_features<Decoder, std::void_t<decltype(&Decoder::features), decltype(&Decoder::dense)>>
    : std::true_type {};

/// FNV-1a of a batch's index tensors, continuing from `hash`: what ranks compare of the
/// data they train on.
template <typename Batch>
std::uint64_t batch_fingerprint(const Batch& batch, std::uint64_t hash = dist::kFnv1aOffset) {
  for (const IndexTensor* t : {&batch.X, &batch.X_valid_len, &batch.Y, &batch.Y_valid_len})
    hash = dist::fnv1a(t->data(), static_cast<std::size_t>(t->numel()) * sizeof(std::int64_t), hash);
  return hash;
}

/// What data-parallel ranks compare before training (dist::check_same_settings): ranks
/// told other epochs, steps or splits, or whose loaders or dropout generators would draw
/// other batches or masks, would still sum their gradients without an error. Each rank
/// gives what it can see here (the loader's when it shows it).
template <typename T, typename Loader>
std::map<std::string, std::string> data_parallel_settings(index_t num_epochs, const TrainOptions& options,
                                                          const TrainState& resume, const Adam<T>& optimizer,
                                                          const Vocab& tgt_vocab, const Loader& data_iter) {
  const auto text = [](double x) {
    std::ostringstream out;
    out.precision(17);
    out << x;
    return out.str();
  };
  const auto fingerprint = [](std::uint64_t hash) {
    std::ostringstream out;
    out << "FNV-1a " << std::hex << hash;
    return out.str();
  };
  const auto hash_text = [](const std::string& s) { return dist::fnv1a(s.data(), s.size()); };
  std::map<std::string, std::string> settings = {
      {"num_epochs", std::to_string(num_epochs)},
      {"micro_batches", std::to_string(options.micro_batches)},
      {"accumulation_steps", std::to_string(options.accumulation_steps)},
      {"epochs_done", std::to_string(resume.epochs_done)},
      {"steps_done", std::to_string(resume.steps_done)},
      {"skip_batches", std::to_string(resume.epoch_batches_done)},
      {"max_steps", std::to_string(options.max_steps)},
      {"grad_clip", text(options.grad_clip)},
      {"label_smoothing", text(options.label_smoothing)},
      {"trim_padding", options.trim_padding ? "true" : "false"},
      {"fuse_output_loss", options.fuse_output_loss ? "true" : "false"},
      {"lr", text(optimizer.lr())},
      {"lr_schedule", options.lr_schedule ? options.lr_schedule->name() + " " + text(options.lr_schedule->lr()) + " " +
                                                std::to_string(options.lr_schedule->warmup_steps()) + " " +
                                                std::to_string(options.lr_schedule->total_steps()) + " " +
                                                text(options.lr_schedule->min_lr())
                                          : std::string("none")},
      {"the target vocabulary's size", std::to_string(tgt_vocab.size())},
      {"the default generator (dropout)", fingerprint(hash_text(default_generator().get_state()))}};
  const auto batches = [](const auto& l) -> decltype(index_t(l.num_batches())) { return l.num_batches(); };
  const auto examples = [](const auto& l) -> decltype(index_t(l.num_examples())) { return l.num_examples(); };
  const auto state = [](const auto& l) -> decltype(std::string(l.generator().get_state())) {
    return l.generator().get_state();
  };
  const auto first = [](const auto& l) -> decltype(IndexTensor(l.batch(index_t(0)).X)) { return l.batch(0).X; };
  if constexpr (std::is_invocable_v<decltype(batches), const Loader&>)
    settings["the loader's batches"] = std::to_string(batches(data_iter));
  if constexpr (std::is_invocable_v<decltype(examples), const Loader&>)
    settings["the loader's examples"] = std::to_string(examples(data_iter));
  if constexpr (std::is_invocable_v<decltype(state), const Loader&>)
    settings["the loader's generator"] = fingerprint(hash_text(state(data_iter)));
  if constexpr (std::is_invocable_v<decltype(first), const Loader&> &&
                std::is_invocable_v<decltype(batches), const Loader&>) {
    if (batches(data_iter) > 0) {  // the current epoch's first batch, read without drawing the next epoch
      settings["the loader's first batch"] = fingerprint(batch_fingerprint(data_iter.batch(0)));
    }
  }
  return settings;
}

}  // namespace detail

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
/// max_steps in mid-epoch goes on the same way from the loader's generator as it was
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
  detail::check_label_smoothing(options.label_smoothing, "train_seq2seq");
  HEED_CHECK(tgt_vocab.contains("<bos>"), ValueError, "train_seq2seq: the target vocabulary has no <bos> token");
  // Training runs where the net is (net.to(device) first): each batch goes there, and
  // each step's loss comes back, nothing else.
  const Device device = net.device();
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
  const index_t bos = tgt_vocab["<bos>"];
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
  const auto start = std::chrono::steady_clock::now();
  auto seconds_since = [](std::chrono::steady_clock::time_point t) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
  };
  TrainResult result;
  const auto update = [&] {
    if (parallel) parallel->allreduce_gradients();
    if (options.grad_clip > 0.0) clip_grad_norm_(params, options.grad_clip);  // the norm is not read back
    ++result.steps;
    if (options.lr_schedule) optimizer.set_lr((*options.lr_schedule)(resume.steps_done + result.steps));
    optimizer.step();
  };
  const auto reached_max_steps = [&] {
    return options.max_steps > 0 && resume.steps_done + result.steps >= options.max_steps;
  };
  const auto train_epochs = [&] {
    for (index_t epoch = resume.epochs_done + 1; epoch <= resume.epochs_done + num_epochs; ++epoch) {
      if (reached_max_steps()) break;
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
          if (reached_max_steps()) {
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
