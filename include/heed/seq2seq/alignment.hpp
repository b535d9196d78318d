// heed/seq2seq/alignment.hpp — word alignments read off the encoder-decoder attention.
//
//   auto t = heed::predict_seq2seq(*net, "he's calm .", src_vocab, tgt_vocab, 10);
//   auto links = heed::align(t.cross_attention);          // averaged over layers and heads
//   std::cout << heed::pharaoh(links);                    // "0-0 1-1 2-2 3-3"
//   // and heed::alignment_table(source_tokens, target_tokens, links): "il → he's" per line
//
// Each output token is linked to the source position it attends to most (argmax of the
// weights), for one layer and head or for their mean. The text form is the Pharaoh
// format of word-alignment tools ("i-j": source i, target j, 0-based).
#pragma once

#include "heed/detail/header_begin.hpp"

#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "heed/ops/reduce.hpp"
#include "heed/ops/shape.hpp"

namespace heed {

/// One link per output step: (source position, target position).
using Alignment = std::vector<std::pair<index_t, index_t>>;

/// cross_attention: (num_layers, num_heads, target steps, source steps); layer and head
/// pick one (negative indices count from the end); -1 with average = true takes the mean.
template <typename T>
Alignment align(const Tensor<T>& cross_attention, index_t layer = -1, index_t head = -1, bool average = true) {
  HEED_CHECK(cross_attention.defined() && cross_attention.dim() == 4, ShapeError,
             "align: cross_attention must be (num_layers, num_heads, target steps, source steps), got ",
             cross_attention.defined() ? to_string(cross_attention.shape()) : std::string("undefined"));
  const index_t layers = cross_attention.shape()[0], heads = cross_attention.shape()[1];
  Tensor<T> weights;
  if (average && layer == -1 && head == -1) {
    weights = mean(mean(cross_attention, 0), 0);
  } else {
    const index_t l = layer < 0 ? layer + layers : layer, h = head < 0 ? head + heads : head;
    HEED_CHECK(l >= 0 && l < layers && h >= 0 && h < heads, IndexError, "align: layer ", layer, " and head ", head,
               " out of range for ", layers, " layers and ", heads, " heads");
    weights = select(select(cross_attention, 0, l), 0, h);
  }
  const IndexTensor best = argmax(weights, 1);
  Alignment links;
  for (index_t j = 0; j < best.numel(); ++j) links.emplace_back(best.data()[j], j);
  return links;
}

/// "0-0 1-1 2-2": source-target pairs, as word-alignment tools write them.
inline std::string pharaoh(const Alignment& links) {
  std::ostringstream out;
  for (std::size_t i = 0; i < links.size(); ++i) out << (i ? " " : "") << links[i].first << '-' << links[i].second;
  return out.str();
}

/// One line per target token: "il → he's"; links to positions outside the lists show "?".
inline std::string alignment_table(const std::vector<std::string>& source_tokens,
                                   const std::vector<std::string>& target_tokens, const Alignment& links) {
  auto at = [](const std::vector<std::string>& tokens, index_t i) {
    return i >= 0 && i < static_cast<index_t>(tokens.size()) ? tokens[static_cast<std::size_t>(i)] : std::string("?");
  };
  std::ostringstream out;
  for (const auto& [src, tgt] : links) out << at(target_tokens, tgt) << " → " << at(source_tokens, src) << '\n';
  return out.str();
}

}  // namespace heed

#include "heed/detail/header_end.hpp"
