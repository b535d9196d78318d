// heed/attention/positional_encoding.hpp — sinusoidal positional encoding (d2l 10.6.3).
//
//   heed::PositionalEncoding<float> pos_encoding(/*num_hiddens=*/32, /*dropout=*/0);
//   auto Y = pos_encoding(X);              // X: (batch, num_steps, 32) -> X + P[:num_steps]
//   auto Z = pos_encoding(X_step, /*offset=*/7);   // a step decoded at position 7
//
//   P[i, 2j]   = sin(i / 10000^(2j / num_hiddens))
//   P[i, 2j+1] = cos(i / 10000^(2j / num_hiddens))
//
// PositionalLayout::concatenated puts the same sines in columns [0, h) and the cosines
// in [h, num_hiddens), h = ceil(num_hiddens / 2), as MarianMT's (and fairseq's) tables:
//   P[i, j] = sin(i / 10000^(2j / num_hiddens)),  P[i, h + j] = cos(i / 10000^(2j / num_hiddens))
//
// P is computed once for max_len positions, in double (PositionalTable::float32 gives
// d2l's table, computed in float32 as its PyTorch code does). `offset` is the position of X's
// first step: a decoder fed one token at a time passes the number of steps decoded so
// far (d2l adds P[0] to every step in that case, so its incremental decoder disagrees
// with its full-sequence pass). A sequence reaching past max_len is an error.
#pragma once

#include "heed/detail/header_begin.hpp"

#include <cmath>
#include <string>

#include "heed/nn/dropout.hpp"
#include "heed/ops/shape.hpp"

namespace heed {

/// How PositionalEncoding computes its table: in double, rounded to the model's type
/// (heed's), or in float32 arithmetic as d2l's PyTorch code does, whose float64 runs add
/// that float32 table.
enum class PositionalTable { double_precision, float32 };

/// Where the table's sines and cosines sit: alternating (d2l's), or all sines then all
/// cosines (MarianMT's).
enum class PositionalLayout { interleaved, concatenated };

template <typename T>
class PositionalEncoding : public Module<T> {
 public:
  PositionalEncoding(index_t num_hiddens, double dropout, index_t max_len = 1000,
                     PositionalTable table = PositionalTable::double_precision,
                     PositionalLayout layout = PositionalLayout::interleaved)
      : Module<T>("PositionalEncoding"), dropout_(dropout) {
    HEED_CHECK(num_hiddens > 0 && max_len > 0, ValueError,
               "PositionalEncoding: num_hiddens and max_len must be positive, got ", num_hiddens, " and ", max_len);
    P = detail::make_tensor<T>(Shape{1, max_len, num_hiddens}, Device::cpu(), "PositionalEncoding");
    T* out = P.data();  // row by row: no i * num_hiddens, which GCC -O3 flags for huge constant sizes
    for (index_t i = 0; i < max_len; ++i)
      for (index_t c = 0; c < num_hiddens; ++c)
        *out++ = static_cast<T>(entry(i, column(c, num_hiddens, layout), num_hiddens, table));

    this->register_module("dropout", dropout_);
    this->register_buffer("P", P);
  }

  // X: (batch, num_steps, num_hiddens) -> same shape; X's steps sit at positions
  // offset, offset + 1, ...
  Tensor<T> forward(const Tensor<T>& X, index_t offset = 0) const {
    HEED_CHECK(X.dim() == 3 && X.shape()[2] == num_hiddens(), ShapeError,
               "PositionalEncoding: X must be (batch, num_steps, ", num_hiddens(), "), got ", to_string(X.shape()));
    const index_t num_steps = X.shape()[1];
    HEED_CHECK(offset >= 0, ValueError, "PositionalEncoding: offset must not be negative, got ", offset);
    // Subtracting from max_len, not adding to offset: an offset near INT64_MAX must not overflow.
    HEED_CHECK(offset <= max_len() - num_steps, ValueError, "PositionalEncoding: ", num_steps, " steps from position ",
               offset, " of X ", to_string(X.shape()), " reach past max_len = ", max_len());
    return dropout_(X + P.narrow(1, offset, num_steps));
  }
  Tensor<T> operator()(const Tensor<T>& X, index_t offset = 0) const { return forward(X, offset); }

  index_t num_hiddens() const { return P.shape()[2]; }
  index_t max_len() const { return P.shape()[1]; }

  Tensor<T> P;  // (1, max_len, num_hiddens), not learnable

 private:
  /// The interleaved column whose value concatenated column c holds: sines (even
  /// columns) first, then cosines (odd ones).
  static index_t column(index_t c, index_t num_hiddens, PositionalLayout layout) {
    if (layout == PositionalLayout::interleaved) return c;
    const index_t sines = (num_hiddens + 1) / 2;
    return c < sines ? 2 * c : 2 * (c - sines) + 1;
  }
  /// P[i, c] of the interleaved table. d2l's float32 table divides i by 10000^(2j / num_hiddens) and takes the
  /// sine or cosine, each step rounded to float32.
  static double entry(index_t i, index_t c, index_t num_hiddens, PositionalTable table) {
    if (table == PositionalTable::float32) {
      const float angle =
          static_cast<float>(i) / std::pow(10000.0f, static_cast<float>(c - c % 2) / static_cast<float>(num_hiddens));
      return c % 2 == 0 ? std::sin(angle) : std::cos(angle);
    }
    const double angle =
        static_cast<double>(i) / std::pow(10000.0, static_cast<double>(c - c % 2) / static_cast<double>(num_hiddens));
    return c % 2 == 0 ? std::sin(angle) : std::cos(angle);
  }

  Dropout<T> dropout_;
};

}  // namespace heed

#include "heed/detail/header_end.hpp"
