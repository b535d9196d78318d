// heed/seq2seq/train_settings.hpp — what data-parallel ranks of train_seq2seq
// (heed/seq2seq/train.hpp) compare before training (dist::check_same_settings), and the
// fingerprint of a batch they compare it by.
#pragma once

#include "heed/detail/header_begin.hpp"

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include "heed/core/generator.hpp"
#include "heed/dist/settings.hpp"
#include "heed/io/training_checkpoint.hpp"
#include "heed/seq2seq/train_options.hpp"
#include "heed/seq2seq/vocab.hpp"

namespace heed {

namespace detail {

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
      {"precision", to_string(options.precision)},
      {"accumulation_steps", std::to_string(options.accumulation_steps)},
      {"epochs_done", std::to_string(resume.epochs_done)},
      {"steps_done", std::to_string(resume.steps_done)},
      {"skip_batches", std::to_string(resume.epoch_batches_done)},
      {"max_steps", std::to_string(options.max_steps)},
      {"grad_clip", text(options.grad_clip)},
      {"label_smoothing", text(options.label_smoothing)},
      {"ema_decay", text(options.ema_decay)},
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

}  // namespace heed

#include "heed/detail/header_end.hpp"
