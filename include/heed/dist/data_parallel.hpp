// heed/dist/data_parallel.hpp — one model trained by N processes, each on its shard of
// every batch, the gradients summed across them before the update.
//
//   heed::dist::DataParallel<float> parallel(world, net);  // every rank, the same net
//   parallel.broadcast_parameters();                       // same model? then rank 0's values
//   for (const auto& batch : loader) {                     // every rank, the same batches
//     optimizer.zero_grad();
//     const index_t parts = parallel.global_parts(rows, 1);
//     double loss = parallel.accumulate(heed::dist::even_bounds(rows, parts), 1,
//                                       [&](index_t begin, index_t end) { ...; l.backward(); return l.item(); });
//     parallel.allreduce_gradients();                      // sums in rank order, bucketed
//     heed::clip_grad_norm_(params, 1.0);                  // after the sum: the same on every rank
//     optimizer.step();                                    // the same step everywhere
//   }
//
// What makes N ranks give the bits of one process (train_seq2seq's equivalence tests):
// - every rank splits each global batch the same way into parts (even_bounds, or
//   length_balanced_split), k per rank: rank r runs parts [r·k, (r+1)·k) and no others;
// - each part draws its dropout masks from a generator seeded by one draw of the default
//   generator (the same on every rank) and the part's global index, as
//   accumulate_micro_batches seeds part i in one process;
// - allreduce_gradients sends each parameter's gradient in a fixed order through one
//   flat buffer of `bucket_elements` elements at a time, and the Communicator adds the
//   ranks' values in rank order. Only rows (runs of the last dim) with a bit set on some
//   rank are sent: the others are +0 everywhere, their own sum. With one part per rank, that is the order in which one
//   process adds its parts (heed/optim/micro_batches.hpp), so the sums are the same bits;
//   with k > 1 parts per rank, each rank adds its own k first, which is the same sum to
//   rounding.
// A single-row batch has a single part: rank 0 runs it with its default generator, and
// that generator's state then goes to the other ranks, which drew nothing.
#pragma once

#include "heed/detail/header_begin.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <exception>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "heed/core/generator.hpp"
#include "heed/core/tensor.hpp"
#include "heed/dist/communicator.hpp"
#include "heed/nn/module.hpp"
#include "heed/optim/micro_batches.hpp"

namespace heed {
namespace dist {

/// Part i of `parts` even parts of `rows` rows holds rows [rows·i/parts, rows·(i+1)/parts):
/// accumulate_micro_batches' split, as bounds.
inline std::vector<index_t> even_bounds(index_t rows, index_t parts) {
  return heed::detail::even_micro_batch_bounds(rows, parts, "even_bounds");
}

template <typename T>
class DataParallel {
 public:
  using Named = std::vector<std::pair<std::string, Tensor<T>>>;
  /// 256 KiB of floats: packed, sent and unpacked while it stays in the caches; few
  /// enough sums (65 for the realistic Transformer) that their latency does not count.
  static constexpr std::size_t kDefaultBucketElements = std::size_t(1) << 16;

  /// The parameters (and buffers, which are broadcast but not reduced) of the model
  /// every rank trains, in the same order on every rank.
  DataParallel(Communicator& communicator, Named parameters, Named buffers = {},
               std::size_t bucket_elements = kDefaultBucketElements)
      : comm_(communicator),
        parameters_(std::move(parameters)),
        buffers_(std::move(buffers)),
        bucket_elements_(bucket_elements) {
    HEED_CHECK(bucket_elements_ >= 1, ValueError, "DataParallel: bucket_elements must be >= 1");
    first_row_.push_back(0);
    for (std::size_t i = 0; i < parameters_.size(); ++i) {
      const index_t numel = parameters_[i].second.defined() ? parameters_[i].second.numel() : 0;
      const std::size_t length = row_length(i);
      first_row_.push_back(first_row_.back() + (length > 0 ? static_cast<std::size_t>(numel) / length : 0));
    }
    for (const Named* list : {&parameters_, &buffers_})
      for (const auto& [name, tensor] : *list)
        HEED_CHECK(tensor.defined() && tensor.is_cpu(), DeviceError, "DataParallel: ", name, " is ",
                   tensor.defined() ? "on " + to_string(tensor.device()) : std::string("undefined"),
                   ": the communicators sum host memory (a GPU one, NCCL, would take device memory)");
  }
  /// A module's parameters and buffers.
  template <typename M, typename = decltype(std::declval<const M&>().named_buffers())>
  DataParallel(Communicator& communicator, const M& module, std::size_t bucket_elements = kDefaultBucketElements)
      : DataParallel(communicator, module.named_parameters(), module.named_buffers(), bucket_elements) {}

  DataParallel(const DataParallel&) = delete;
  DataParallel& operator=(const DataParallel&) = delete;

  Communicator& communicator() const { return comm_; }
  int rank() const { return comm_.rank(); }
  int size() const { return comm_.size(); }

  /// Checks that every rank built the same model (the same parameter and buffer names
  /// and shapes, in the same order), and throws ValueError on every rank, naming the
  /// first that differs, if not; then every rank's values become rank 0's.
  void broadcast_parameters() {
    std::vector<std::string> mine;
    for (const Named* list : {&parameters_, &buffers_})
      for (const auto& [name, tensor] : *list) mine.push_back(name + " " + to_string(tensor.shape()));
    std::string joined;
    for (const std::string& entry : mine) joined += entry + '\n';
    comm_.broadcast(joined, 0);
    std::vector<std::string> root;
    std::istringstream lines(joined);
    for (std::string line; std::getline(lines, line);) root.push_back(line);
    // Each rank's first difference from rank 0 (1-based; 0: none) in its own slot.
    std::vector<double> first_difference(static_cast<std::size_t>(size()), 0.0);
    const std::size_t common = std::min(mine.size(), root.size());
    std::size_t at = 0;
    while (at < common && mine[at] == root[at]) ++at;
    if (at < common || mine.size() != root.size())
      first_difference[static_cast<std::size_t>(rank())] = static_cast<double>(at + 1);
    comm_.allreduce_sum(first_difference.data(), first_difference.size());
    for (int r = 1; r < size(); ++r) {
      const auto index = static_cast<std::size_t>(first_difference[static_cast<std::size_t>(r)]);
      if (index == 0) continue;
      // Rank r tells the others what it has there.
      std::string theirs = r == rank() ? (index - 1 < mine.size() ? "'" + mine[index - 1] + "'" : "nothing") : "";
      comm_.broadcast(theirs, r);
      const std::string ours = index - 1 < root.size() ? "'" + root[index - 1] + "'" : "nothing";
      throw ValueError(heed::detail::concat("DataParallel: the ranks built different models: at parameter or buffer ",
                                            index - 1, ", rank 0 has ", ours, " and rank ", r, " has ", theirs,
                                            " (every rank must build the same model)"));
    }
    for (const Named* list : {&parameters_, &buffers_})
      for (const auto& [name, tensor] : *list) {
        Tensor<T> t = tensor;
        comm_.broadcast(t.data(), static_cast<std::size_t>(t.numel()), 0);
        heed::detail::impl(t).storage->bump_version();
      }
  }

  /// The parts a global batch of `rows` rows is split into: parts_per_rank on each rank,
  /// fewer when the batch has fewer rows (then the last ranks run none).
  index_t global_parts(index_t rows, index_t parts_per_rank) const {
    HEED_CHECK(rows >= 1 && parts_per_rank >= 1, ValueError, "DataParallel::global_parts: rows (", rows,
               ") and parts_per_rank (", parts_per_rank, ") must be >= 1");
    return std::min(rows, parts_per_rank * static_cast<index_t>(size()));
  }

  /// Runs this rank's parts of a global batch split at `bounds` (global_parts(rows,
  /// parts_per_rank) parts): step(begin, end) on each, as accumulate_micro_batches does,
  /// their gradients added into the parameters' .grad() in part order. Returns the sum
  /// of this rank's steps' values; allreduce_gradients and allreduce then give the
  /// global sums.
  template <typename Step>
  double accumulate(const std::vector<index_t>& bounds, index_t parts_per_rank, Step&& step, bool on_cpu = true) {
    heed::detail::check_micro_batch_bounds(bounds, "DataParallel::accumulate");
    const auto parts = static_cast<index_t>(bounds.size() - 1);
    HEED_CHECK(parts_per_rank >= 1 && parts <= parts_per_rank * size(), ValueError, "DataParallel::accumulate: ", parts,
               " parts cannot go ", parts_per_rank, " to each of ", size(), " ranks");
    const index_t first = std::min(parts, parts_per_rank * rank()), last = std::min(parts, first + parts_per_rank);
    const double value = heed::detail::accumulate_parts<T>(bounds, first, last, std::forward<Step>(step), on_cpu);
    if (parts == 1 && size() > 1) {  // rank 0 drew from its default generator; the others did not
      std::string state = default_generator().get_state();
      comm_.broadcast(state, 0);
      default_generator().set_state(state);
    }
    return value;
  }

  /// Every parameter's .grad() becomes the sum over the ranks of theirs, added in rank
  /// order (a rank without a gradient for it counts as zeros; a parameter no rank has a
  /// gradient for keeps none, so that the optimiser passes it over as in one process).
  void allreduce_gradients() {
    if (size() == 1) return;  // the gradients are the sums
    const auto seconds_since = [](std::chrono::steady_clock::time_point t) {
      return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
    };
    // One small sum first (where this rank also waits for the slowest): for each
    // parameter, whether it has a gradient here, then for each of its rows (runs of its
    // last dim), whether any element has a bit set. A row that is +0 on every rank sums
    // to itself and stays out of the buffer: most of an embedding's gradient is such rows
    // (the tokens the batch lacks), half of the realistic Transformer's parameters.
    const auto waiting = std::chrono::steady_clock::now();
    const std::size_t count = parameters_.size();
    flags_.assign(count + first_row_.back(), T(0));
    for (std::size_t i = 0; i < count; ++i) {
      const Tensor<T>& grad = heed::detail::impl(parameters_[i].second).grad;
      if (!grad.defined()) continue;
      HEED_CHECK(grad.is_cpu(), DeviceError, "DataParallel::allreduce_gradients: the gradient of ",
                 parameters_[i].first, " is on ", grad.device());
      flags_[i] = T(1);
      const std::size_t rows = first_row_[i + 1] - first_row_[i], length = row_length(i);
      for (std::size_t r = 0; r < rows; ++r)
        flags_[count + first_row_[i] + r] = any_bit_set(grad.data() + r * length, length) ? T(1) : T(0);
    }
    comm_.allreduce_sum(flags_.data(), flags_.size());
    wait_seconds_ += seconds_since(waiting);
    const auto started = std::chrono::steady_clock::now();
    // The runs of rows some rank has bits in, in parameter and row order.
    std::vector<std::pair<T*, std::size_t>> runs;
    for (std::size_t i = 0; i < count; ++i) {
      if (flags_[i] == T(0)) continue;  // no rank has a gradient: it keeps none
      Tensor<T>& grad = heed::detail::impl(parameters_[i].second).grad;
      if (!grad.defined()) grad = zeros_like(parameters_[i].second);
      heed::detail::impl(grad).storage->bump_version();
      const std::size_t rows = first_row_[i + 1] - first_row_[i], length = row_length(i);
      for (std::size_t r = 0; r < rows; ++r) {
        if (flags_[count + first_row_[i] + r] == T(0)) continue;
        T* row = grad.data() + r * length;
        if (!runs.empty() && runs.back().first + runs.back().second == row)
          runs.back().second += length;
        else
          runs.emplace_back(row, length);
      }
    }
    // The runs as one flat buffer, a bucket at a time: packed, summed, unpacked.
    bucket_.resize(bucket_elements_);
    std::size_t filled = 0;
    std::vector<std::pair<T*, std::size_t>> pieces;  // where each piece of the bucket goes back
    const auto sum_bucket = [&] {
      comm_.allreduce_sum(bucket_.data(), filled);
      const T* from = bucket_.data();
      for (const auto& [to, n] : pieces) {
        std::copy(from, from + n, to);
        from += n;
      }
      pieces.clear();
      filled = 0;
    };
    for (auto [data, left] : runs)
      while (left > 0) {
        const std::size_t n = std::min(left, bucket_elements_ - filled);
        std::copy(data, data + n, bucket_.data() + filled);
        pieces.emplace_back(data, n);
        filled += n, data += n, left -= n;
        if (filled == bucket_elements_) sum_bucket();
      }
    if (filled > 0) sum_bucket();
    communication_seconds_ += seconds_since(started);
    for (const auto& run : runs) elements_summed_ += run.second;
  }

  /// The sum of `value` over the ranks (in rank order).
  double allreduce(double value) {
    comm_.allreduce_sum(&value, 1);
    return value;
  }

  /// Seconds allreduce_gradients has spent so far packing, summing and unpacking the
  /// gradients (communication_seconds), and before that waiting for the slowest rank to
  /// reach it (wait_seconds: imbalance between the ranks' parts, not communication).
  double communication_seconds() const { return communication_seconds_; }
  double wait_seconds() const { return wait_seconds_; }
  /// Gradient elements allreduce_gradients has summed so far (the rows with bits).
  std::size_t elements_summed() const { return elements_summed_; }

  /// Runs f() and returns what it returns. An exception from it ends every rank's
  /// process with its message (Communicator::abort), since the other ranks would wait
  /// for this one in their next sum forever; on a single rank it is rethrown.
  template <typename F>
  decltype(auto) run_or_abort(F&& f, const char* what) {
    if (size() == 1) return f();
    std::string message;
    try {
      return f();
    } catch (const std::exception& e) {
      message = std::string(what) + ": " + e.what();
    } catch (...) {
      message = std::string(what) + ": an exception that is not a std::exception";
    }
    comm_.abort(message);
    std::abort();  // not reached: Communicator::abort does not return (compilers do not trust a virtual's [[noreturn]])
  }

 private:
  /// A parameter's rows are the runs of its last dim (a vector is one row).
  std::size_t row_length(std::size_t i) const {
    const Tensor<T>& p = parameters_[i].second;
    if (!p.defined() || p.numel() == 0) return 0;
    return static_cast<std::size_t>(p.dim() >= 2 ? p.shape()[p.dim() - 1] : p.numel());
  }
  /// Whether any of x[0, n) has a bit set (-0 and NaN included).
  static bool any_bit_set(const T* x, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i)
      if (x[i] != T(0) || std::signbit(x[i])) return true;
    return false;
  }

  Communicator& comm_;
  Named parameters_, buffers_;
  std::size_t bucket_elements_;
  std::vector<std::size_t> first_row_;  // parameter i's rows are flags first_row_[i] to first_row_[i + 1] - 1
  std::vector<T> bucket_, flags_;
  double communication_seconds_ = 0.0, wait_seconds_ = 0.0;
  std::size_t elements_summed_ = 0;
};

}  // namespace dist
}  // namespace heed

#include "heed/detail/header_end.hpp"
