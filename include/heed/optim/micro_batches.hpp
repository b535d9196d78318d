// heed/optim/micro_batches.hpp — one training step's batch as several micro-batches,
// run on parallel threads, their gradients summed in a fixed order.
//
//   // step(begin, end): forward and backward over rows [begin, end) of the batch,
//   // returning that part's loss.
//   double loss = heed::accumulate_micro_batches<float>(rows, /*parts=*/2, step);
//   clip_grad_norm_(params, 1.0);
//   optimizer.step();
//
// Threads inside one op stop paying where a step is many small ops (a few hundred
// rows of 128 features): two threads gave the realistic Transformer 1.34× one. Whole
// micro-batches on separate threads keep each thread busy for a whole forward and
// backward instead. The split is fixed by `parts`, never by the thread count, so the
// bits are the same on any number of threads:
// - part i holds rows [rows·i/parts, rows·(i+1)/parts);
// - each part's backward adds its leaves' gradients into its own LeafGradients
//   (heed/autograd/engine.hpp), and the sums are added into the leaves' .grad() in
//   part order, as if the parts had run one after another, each summed apart first;
// - each part draws its random numbers (dropout) from its own generator, seeded from
//   one draw of the caller's default generator and the part's index, installed as the
//   default generator of the thread that runs it;
// - what modules keep for inspection (attention weights) comes from part 0: the other
//   parts' threads keep nothing (detail::keeps_forward_records).
// A module given a generator of its own (Dropout(p, &gen)) would draw from it on every
// thread at once: train with the default generator. Within a part, ops run on that
// part's thread alone (OpenMP does not nest), so more parts than threads gain nothing;
// on a device (on_cpu = false) the parts run one after another. parts = 1 calls
// step(0, rows) directly: no draw, the same bits as without this.
#pragma once

#include "heed/detail/header_begin.hpp"

#include <algorithm>
#include <cstdint>
#include <exception>
#include <unordered_map>
#include <utility>
#include <vector>

#include "heed/autograd/engine.hpp"
#include "heed/autograd/node.hpp"
#include "heed/core/generator.hpp"
#include "heed/detail/parallel.hpp"
#include "heed/nn/module.hpp"

namespace heed {
namespace detail {

/// The seed of part `part`'s generator in a step whose draw was `key` (splitmix64's
/// finaliser: nearby parts get unrelated streams).
inline std::uint64_t micro_batch_seed(std::uint64_t key, index_t part) {
  std::uint64_t z = key + 0x9e3779b97f4a7c15ULL * (static_cast<std::uint64_t>(part) + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

/// For the run of one part: its generator as this thread's default, its sums as this
/// thread's LeafGradients, the caller's grad mode, and records kept by part 0 alone
/// (when the caller keeps them); all restored after.
template <typename T>
class MicroBatchScope {
 public:
  MicroBatchScope(Generator& part_generator, autograd::LeafGradients<T>& sums, bool grad_enabled, bool keep_records)
      : gradients_(sums),
        records_(keep_records),
        generator_(part_generator),
        saved_grad_mode_(autograd::GradMode::is_enabled()) {
    std::swap(default_generator(), generator_);
    autograd::GradMode::set_enabled(grad_enabled);
  }
  ~MicroBatchScope() {
    autograd::GradMode::set_enabled(saved_grad_mode_);
    std::swap(default_generator(), generator_);
  }
  MicroBatchScope(const MicroBatchScope&) = delete;
  MicroBatchScope& operator=(const MicroBatchScope&) = delete;

 private:
  autograd::LeafGradientsScope<T> gradients_;
  ForwardRecordsScope records_;
  Generator& generator_;  // the part's while it runs, then this thread's default until restored
  bool saved_grad_mode_;
};

/// Adds each part's sums into the leaves' .grad(), in part order: the first sum that
/// reaches a leaf without a gradient becomes it; the additions on the CPU run as one
/// parallel pass over fixed chunks (each element is added in part order by one thread).
template <typename T>
void add_micro_batch_gradients(std::vector<autograd::LeafGradients<T>>& parts) {
  struct Target {
    Tensor<T> leaf;
    std::vector<Tensor<T>> addends;  // in part order
  };
  std::vector<Target> targets;
  std::unordered_map<const TensorImpl<T>*, std::size_t> index;
  for (autograd::LeafGradients<T>& part : parts)
    part.for_each([&](const Tensor<T>& leaf, Tensor<T>& sum) {
      auto [it, added] = index.emplace(&impl(leaf), targets.size());
      if (added) targets.push_back({leaf, {}});
      targets[it->second].addends.push_back(std::move(sum));
    });
  for (autograd::LeafGradients<T>& part : parts) part.clear();
  std::vector<index_t> sizes;
  std::vector<const Target*> on_cpu;
  for (Target& target : targets) {
    Tensor<T>& grad = impl(target.leaf).grad;
    if (!grad.defined()) {
      grad = std::move(target.addends.front());
      target.addends.erase(target.addends.begin());
    }
    if (target.addends.empty()) continue;
    impl(grad).storage->bump_version();  // changed in place, as backward's own additions
    if (!grad.device().is_cpu()) {
      for (const Tensor<T>& g : target.addends) autograd::detail::add_into(grad, g);
      continue;
    }
    on_cpu.push_back(&target);
    sizes.push_back(grad.numel());
  }
  parallel_chunks(chunks_of(sizes), [&](std::size_t, const Chunk& chunk) {
    const Target& target = *on_cpu[chunk.item];
    T* out = impl(target.leaf).grad.data() + chunk.begin;
    const index_t n = chunk.end - chunk.begin;
    for (const Tensor<T>& g : target.addends) {
      const T* in = g.data() + chunk.begin;
      for (index_t i = 0; i < n; ++i) out[i] += in[i];
    }
  });
}

/// Part i of `parts` even parts of `rows` rows holds rows [rows·i/parts, rows·(i+1)/parts),
/// as bounds; `op` names the caller in errors.
inline std::vector<index_t> even_micro_batch_bounds(index_t rows, index_t parts, const char* op) {
  HEED_CHECK(parts >= 1, ValueError, op, ": parts must be >= 1, got ", parts);
  HEED_CHECK(rows >= parts, ValueError, op, ": ", rows, " rows cannot make ", parts, " non-empty parts");
  std::vector<index_t> bounds(static_cast<std::size_t>(parts) + 1);
  for (index_t part = 0; part <= parts; ++part) bounds[static_cast<std::size_t>(part)] = rows * part / parts;
  return bounds;
}

inline void check_micro_batch_bounds(const std::vector<index_t>& bounds, const char* op) {
  HEED_CHECK(bounds.size() >= 2 && bounds.front() == 0, ValueError, op,
             ": bounds must start at 0 and hold at least 2 values, got ", bounds.size(), " values");
  for (std::size_t i = 1; i < bounds.size(); ++i)
    HEED_CHECK(bounds[i] > bounds[i - 1], ValueError, op, ": part ", i - 1, " is empty (rows ", bounds[i - 1], " to ",
               bounds[i], ")");
}

/// Runs parts [first, last) of the parts the bounds make, as accumulate_micro_batches
/// runs them all: the same draw of the default generator whatever the range (none for
/// a single part), part i's generator seeded by its index i, records kept by part 0, the
/// sums added in part order. Data-parallel training (heed/dist/data_parallel.hpp) runs
/// each rank's range of one global split with it, so that every rank's default
/// generator stays in step and each part draws the masks it would in one process.
template <typename T, typename Step>
double accumulate_parts(const std::vector<index_t>& bounds, index_t first, index_t last, Step&& step, bool on_cpu) {
  const auto parts = static_cast<index_t>(bounds.size() - 1);
  if (parts == 1) return first == 0 && last == 1 ? static_cast<double>(step(index_t(0), bounds[1])) : 0.0;
  const std::uint64_t key = default_generator().next_u64();
  const index_t local = last - first;
  if (local <= 0) return 0.0;
  const bool grad_enabled = autograd::GradMode::is_enabled(), keep_records = keeps_forward_records();
  std::vector<autograd::LeafGradients<T>> sums(static_cast<std::size_t>(local));
  std::vector<double> values(static_cast<std::size_t>(local), 0.0);
  std::vector<std::exception_ptr> errors(static_cast<std::size_t>(local));
  const auto run_part = [&](index_t i) {
    const auto at = static_cast<std::size_t>(i);
    const index_t part = first + i;
    Generator part_generator(micro_batch_seed(key, part));
    try {
      MicroBatchScope<T> scope(part_generator, sums[at], grad_enabled, keep_records && part == 0);
      values[at] =
          static_cast<double>(step(bounds[static_cast<std::size_t>(part)], bounds[static_cast<std::size_t>(part) + 1]));
    } catch (...) {
      errors[at] = std::current_exception();
    }
  };
  // Each part is a whole forward and backward: always worth a thread of its own.
  if (on_cpu)
    parallel_tasks(local, kParallelTaskWork, run_part);
  else
    for (index_t i = 0; i < local; ++i) run_part(i);
  for (const std::exception_ptr& error : errors)
    if (error) std::rethrow_exception(error);
  add_micro_batch_gradients(sums);
  double total = 0.0;
  for (const double value : values) total += value;
  return total;
}

}  // namespace detail

/// accumulate_micro_batches (below) with the parts' rows given: part i holds rows
/// [bounds[i], bounds[i + 1]), bounds increasing strictly from 0 (the split a caller
/// balances by cost, e.g. detail::length_balanced_split).
template <typename T, typename Step>
double accumulate_micro_batches(const std::vector<index_t>& bounds, Step&& step, bool on_cpu = true) {
  detail::check_micro_batch_bounds(bounds, "accumulate_micro_batches");
  const auto parts = static_cast<index_t>(bounds.size() - 1);
  return detail::accumulate_parts<T>(bounds, 0, parts, std::forward<Step>(step), on_cpu);
}

/// Runs step(begin, end) for each of `parts` row ranges of a batch of `rows` rows, as
/// the top of this file says, and returns the sum of what the steps return, in part
/// order. Each step is one forward and backward; the leaves' gradients after are the
/// sums of the parts', added in part order. An exception from a step is rethrown here
/// (the first part's, when several threw) after every part has finished, and then no
/// gradient has been added.
template <typename T, typename Step>
double accumulate_micro_batches(index_t rows, index_t parts, Step&& step, bool on_cpu = true) {
  return accumulate_micro_batches<T>(detail::even_micro_batch_bounds(rows, parts, "accumulate_micro_batches"),
                                     std::forward<Step>(step), on_cpu);
}

}  // namespace heed

#include "heed/detail/header_end.hpp"
