// heed/seq2seq/train_batch.hpp — how train_seq2seq (heed/seq2seq/train.hpp) prepares a
// batch: d2l's teacher forcing, the padding cut after the longest sequence where the
// modules allow it, and the rows' split into micro-batches of even cost.
#pragma once

#include "heed/detail/header_begin.hpp"

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <type_traits>
#include <vector>

#include "heed/ops/reduce.hpp"
#include "heed/ops/shape.hpp"
#include "heed/seq2seq/decoder_state.hpp"

namespace heed {

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

}  // namespace detail

}  // namespace heed

#include "heed/detail/header_end.hpp"
