// The references of the op table (tests/op_table.hpp): naive loops in double, and the
// helpers the entries share.
#pragma once

#include "op_table.hpp"

namespace heed_test::op_table {

// ---- references: index arithmetic in double ------------------------------------------------

using Index = std::vector<index_t>;

inline Index unravel(index_t flat, const Shape& s) {
  Index idx(static_cast<std::size_t>(s.rank()));
  for (int d = s.rank() - 1; d >= 0; --d) {
    idx[static_cast<std::size_t>(d)] = flat % s[d];
    flat /= s[d];
  }
  return idx;
}

inline index_t ravel(const Index& idx, const Shape& s) {
  index_t flat = 0;
  for (int d = 0; d < s.rank(); ++d) flat = flat * s[d] + idx[static_cast<std::size_t>(d)];
  return flat;
}

inline double at(const Tensord& x, const Index& idx) { return x.data()[ravel(idx, x.shape())]; }

/// The element of x that lands at idx when x is broadcast to a shape of rank idx.size().
inline double at_broadcast(const Tensord& x, const Index& idx) {
  const std::size_t offset = idx.size() - static_cast<std::size_t>(x.dim());
  index_t flat = 0;
  for (int d = 0; d < x.dim(); ++d)
    flat = flat * x.shape()[d] + (x.shape()[d] == 1 ? 0 : idx[offset + static_cast<std::size_t>(d)]);
  return x.data()[flat];
}

inline Shape broadcast(const Shape& a, const Shape& b) {
  const int rank = std::max(a.rank(), b.rank());
  Shape out;
  for (int d = rank; d >= 1; --d) {
    const index_t sa = d <= a.rank() ? a[-d] : 1, sb = d <= b.rank() ? b[-d] : 1;
    out.push_back(sa == 1 ? sb : sa);
  }
  return out;
}

/// A tensor of shape s whose element at idx is f(idx).
inline Tensord generate(const Shape& s, const std::function<double(const Index&)>& f) {
  std::vector<double> v(static_cast<std::size_t>(s.numel()));
  for (index_t i = 0; i < s.numel(); ++i) v[static_cast<std::size_t>(i)] = f(unravel(i, s));
  return Tensord(v, s);
}

inline int norm_dim(std::int64_t dim, int rank) { return static_cast<int>(dim < 0 ? dim + rank : dim); }

inline Reference unary_ref(std::function<double(double)> f) {
  return [f](const Inputs<double>& x, const Case&) {
    return generate(x[0].shape(), [&](const Index& i) { return f(at(x[0], i)); });
  };
}

/// f(x, case.scalar) element by element.
inline Reference scalar_ref(std::function<double(double, double)> f) {
  return [f](const Inputs<double>& x, const Case& c) {
    return generate(x[0].shape(), [&](const Index& i) { return f(at(x[0], i), c.scalar); });
  };
}

inline Reference binary_ref(std::function<double(double, double)> f) {
  return [f](const Inputs<double>& x, const Case&) {
    return generate(broadcast(x[0].shape(), x[1].shape()),
                    [&](const Index& i) { return f(at_broadcast(x[0], i), at_broadcast(x[1], i)); });
  };
}

enum class Reduce { sum, mean, max, argmax, min, argmin, prod };

/// Over everything (no args) or over dim args[0], keeping it when args[1]; argmax and
/// argmin give the first extreme's index (flat over everything).
inline Reference reduce_ref(Reduce kind) {
  return [kind](const Inputs<double>& in, const Case& c) {
    const Tensord& x = in[0];
    auto combine = [kind](const std::vector<double>& v) {
      const bool largest = kind == Reduce::max || kind == Reduce::argmax;
      const bool smallest = kind == Reduce::min || kind == Reduce::argmin;
      const double inf = std::numeric_limits<double>::infinity();
      double acc = largest ? -inf : smallest ? inf : kind == Reduce::prod ? 1.0 : 0.0;
      std::size_t best = 0;
      for (std::size_t k = 0; k < v.size(); ++k) {
        if (kind == Reduce::sum || kind == Reduce::mean) acc += v[k];
        if (kind == Reduce::prod) acc *= v[k];
        if ((largest && v[k] > acc) || (smallest && v[k] < acc)) acc = v[k], best = k;
      }
      if (kind == Reduce::mean) acc /= static_cast<double>(v.size());
      return kind == Reduce::argmax || kind == Reduce::argmin ? static_cast<double>(best) : acc;
    };
    if (c.args.empty()) return generate(Shape{}, [&](const Index&) { return combine(x.to_vector()); });
    if (x.dim() == 0) return generate(Shape{}, [&](const Index&) { return combine(x.to_vector()); });
    const int dim = norm_dim(c.args[0], x.dim());
    const bool keepdim = c.args.size() > 1 && c.args[1] != 0;
    Shape kept = x.shape();
    kept[dim] = 1;
    const Tensord r = generate(kept, [&](const Index& i) {
      std::vector<double> v;
      Index j = i;
      for (index_t k = 0; k < x.shape()[dim]; ++k) j[static_cast<std::size_t>(dim)] = k, v.push_back(at(x, j));
      return combine(v);
    });
    if (keepdim) return r;
    Shape dropped = x.shape();
    dropped.erase(dim);
    return Tensord(r.to_vector(), dropped);
  };
}

/// Over the dims args[1], args[2], … (every dim when there are none), keeping them as
/// size 1 when args[0]: f(the values of each group, the case).
inline Reference reduce_dims_ref(std::function<double(const std::vector<double>&, const Case&)> f) {
  return [f](const Inputs<double>& in, const Case& c) {
    const Tensord& x = in[0];
    std::vector<bool> reduced(static_cast<std::size_t>(x.dim()), c.args.size() < 2);
    for (std::size_t k = 1; k < c.args.size() && x.dim() > 0; ++k)
      reduced[static_cast<std::size_t>(norm_dim(c.args[k], x.dim()))] = true;
    Shape kept, dropped;
    for (int d = 0; d < x.dim(); ++d) {
      kept.push_back(reduced[static_cast<std::size_t>(d)] ? 1 : x.shape()[d]);
      if (!reduced[static_cast<std::size_t>(d)]) dropped.push_back(x.shape()[d]);
    }
    std::vector<std::vector<double>> groups(static_cast<std::size_t>(kept.numel()));
    for (index_t i = 0; i < x.numel(); ++i) {
      Index j = unravel(i, x.shape());
      for (std::size_t d = 0; d < j.size(); ++d)
        if (reduced[d]) j[d] = 0;
      groups[static_cast<std::size_t>(ravel(j, kept))].push_back(x.data()[i]);
    }
    std::vector<double> out;
    for (const std::vector<double>& g : groups) out.push_back(f(g, c));
    return Tensord(out, !c.args.empty() && c.args[0] != 0 ? kept : dropped);
  };
}

/// Σ (v − mean)² / max(0, n − correction).
inline double variance(const std::vector<double>& v, double correction) {
  double mean = 0, squares = 0;
  for (double e : v) mean += e;
  mean /= static_cast<double>(v.size());
  for (double e : v) squares += (e - mean) * (e - mean);
  return squares / std::max(0.0, static_cast<double>(v.size()) - correction);
}

/// Each lane of x along dim sorted (stably: ties keep their order), its first k
/// elements, or their indices.
inline Tensord sorted_ref(const Tensord& x, int dim, index_t k, bool descending, bool indices) {
  const index_t n = x.dim() ? x.shape()[dim] : 1;
  Shape s = x.shape();
  if (x.dim()) s[dim] = k;
  return generate(s, [&](const Index& i) {
    Index j = i;
    auto value = [&](index_t at_k) {
      if (x.dim()) j[static_cast<std::size_t>(dim)] = at_k;
      return at(x, j);
    };
    std::vector<index_t> order(static_cast<std::size_t>(n));
    for (index_t m = 0; m < n; ++m) order[static_cast<std::size_t>(m)] = m;
    std::stable_sort(order.begin(), order.end(), [&](index_t a, index_t b) {
      const double va = value(a), vb = value(b);
      return descending ? va > vb : va < vb;
    });
    const index_t picked = order[static_cast<std::size_t>(x.dim() ? i[static_cast<std::size_t>(dim)] : 0)];
    return indices ? static_cast<double>(picked) : value(picked);
  });
}

/// softmax or log_softmax over dim args[0], the plain way.
inline Reference softmax_ref(bool log) {
  return [log](const Inputs<double>& in, const Case& c) {
    const Tensord& x = in[0];
    const int dim = norm_dim(c.args[0], x.dim());
    return generate(x.shape(), [&](const Index& i) {
      if (x.dim() == 0) return log ? 0.0 : 1.0;
      Index j = i;
      double max = -std::numeric_limits<double>::infinity(), total = 0;
      for (index_t k = 0; k < x.shape()[dim]; ++k) j[static_cast<std::size_t>(dim)] = k, max = std::max(max, at(x, j));
      for (index_t k = 0; k < x.shape()[dim]; ++k)
        j[static_cast<std::size_t>(dim)] = k, total += std::exp(at(x, j) - max);
      const double shifted = at(x, i) - max;
      return log ? shifted - std::log(total) : std::exp(shifted) / total;
    });
  };
}

/// matmul's rules by loops: 1-D operands gain and lose a dim of 1, batch dims
/// broadcast; args {transpose_a, transpose_b} swap an operand's last two dims.
inline Tensord naive_matmul(const Tensord& a, const Tensord& b, bool ta = false, bool tb = false) {
  Shape sa = a.shape(), sb = b.shape();
  if (a.dim() == 1) sa = Shape{1, sa[0]};
  if (b.dim() == 1) sb = Shape{sb[0], 1};
  const index_t n = ta ? sa[-1] : sa[-2], k = ta ? sa[-2] : sa[-1], m = tb ? sb[-2] : sb[-1];
  Shape ba, bb;
  for (int d = 0; d < sa.rank() - 2; ++d) ba.push_back(sa[d]);
  for (int d = 0; d < sb.rank() - 2; ++d) bb.push_back(sb[d]);
  const Shape batch = broadcast(ba, bb);
  Shape out = batch;
  out.push_back(n);
  out.push_back(m);
  const Tensord a2(a.to_vector(), sa), b2(b.to_vector(), sb);
  Tensord r = generate(out, [&](const Index& i) {
    const std::size_t nb = static_cast<std::size_t>(batch.rank());
    Index ia(i.begin(), i.begin() + static_cast<std::ptrdiff_t>(nb)), ib = ia;
    ia.resize(nb + 2);
    ib.resize(nb + 2);
    double s = 0;
    for (index_t l = 0; l < k; ++l) {
      ia[nb] = ta ? l : i[nb], ia[nb + 1] = ta ? i[nb] : l;
      ib[nb] = tb ? i[nb + 1] : l, ib[nb + 1] = tb ? l : i[nb + 1];
      s += at_broadcast(a2, ia) * at_broadcast(b2, ib);
    }
    return s;
  });
  Shape final_shape = batch;
  if (a.dim() > 1) final_shape.push_back(n);
  if (b.dim() > 1) final_shape.push_back(m);
  return Tensord(r.to_vector(), final_shape);
}

inline Reference matmul_ref() {
  return [](const Inputs<double>& x, const Case& c) {
    const bool ta = !c.args.empty() && c.args[0] != 0, tb = c.args.size() > 1 && c.args[1] != 0;
    return naive_matmul(x[0], x[1], ta, tb);
  };
}

/// x Wᵀ + b over the last dim of x.
inline Tensord linear_ref(const Inputs<double>& x, const Case&) {
  Shape out = x[0].shape();
  out[-1] = x[1].shape()[0];
  return generate(out, [&](const Index& i) {
    Index j = i;
    const index_t o = i.back();
    double s = x.size() > 2 ? x[2].data()[o] : 0.0;
    for (index_t l = 0; l < x[1].shape()[1]; ++l) j.back() = l, s += at(x[0], j) * at(x[1], {o, l});
    return s;
  });
}

/// Softmax over the last dim where key j is visible to query q when j < the row's
/// valid length (index: (batch), (batch, queries) or (batch, heads, queries)) and, with
/// causal, j <= q + keys − queries; a row with nothing visible is zeros.
inline Tensord naive_masked_softmax(const Tensord& x, const IndexTensor& lens, bool causal) {
  const Shape& s = x.shape();
  const index_t nq = s[-2], nk = s[-1];
  return generate(s, [&](const Index& i) {
    const index_t q = i[i.size() - 2];
    index_t limit = nk;
    if (lens.defined()) {
      index_t len = 0;
      if (lens.dim() == 1) len = lens.data()[i[0]];
      if (lens.dim() == 2) len = lens.data()[i[0] * nq + q];
      if (lens.dim() == 3) len = lens.data()[(i[0] * s[1] + i[1]) * nq + q];
      limit = std::min(limit, len);
    }
    if (causal) limit = std::min(limit, q + nk - nq + 1);
    if (i.back() >= limit) return 0.0;
    Index j = i;
    double max = -std::numeric_limits<double>::infinity(), total = 0;
    for (index_t k = 0; k < limit; ++k) j.back() = k, max = std::max(max, at(x, j));
    for (index_t k = 0; k < limit; ++k) j.back() = k, total += std::exp(at(x, j) - max);
    return std::exp(at(x, i) - max) / total;
  });
}

/// Each row of numel(normalized_shape) elements (the last args[0] dims) normalised by
/// its mean and biased variance (plus eps, the scalar or 1e-5), then scaled by the
/// weight and shifted by the bias if given (x[1] and x[2], or x[1] the bias if args[1]).
inline Tensord layer_norm_ref(const Inputs<double>& x, const Case& c) {
  const index_t n = tail(x[0].shape(), c.args[0]).numel();
  const double eps = c.scalar > 0 ? c.scalar : 1e-5;
  const bool bias_only = c.args.size() > 1 && c.args[1] != 0;
  const Tensord weight = x.size() > 1 && !bias_only ? x[1] : Tensord();
  const Tensord bias = bias_only ? x[1] : x.size() > 2 ? x[2] : Tensord();
  const std::vector<double> v = x[0].to_vector();
  std::vector<double> out(v.size());
  for (std::size_t r = 0; r * static_cast<std::size_t>(n) < v.size(); ++r) {
    const double* row = v.data() + r * static_cast<std::size_t>(n);
    double mean = 0, var = 0;
    for (index_t j = 0; j < n; ++j) mean += row[j];
    mean /= static_cast<double>(n);
    for (index_t j = 0; j < n; ++j) var += (row[j] - mean) * (row[j] - mean);
    var /= static_cast<double>(n);
    for (index_t j = 0; j < n; ++j) {
      double y = (row[j] - mean) / std::sqrt(var + eps);
      if (weight.defined()) y *= weight.data()[j];
      if (bias.defined()) y += bias.data()[j];
      out[r * static_cast<std::size_t>(n) + static_cast<std::size_t>(j)] = y;
    }
  }
  return Tensord(out, x[0].shape());
}

/// PyTorch's GRU equations, step by step: inputs gi (S, B, 3H), h0 (B, H), W_hh (3H, H), b_hh (3H).
inline Tensord gru_ref(const Inputs<double>& x, const Case&) {
  const index_t S = x[0].shape()[0], B = x[0].shape()[1], H = x[1].shape()[1];
  auto sigmoid = [](double v) { return 1.0 / (1.0 + std::exp(-v)); };
  std::vector<double> h = x[1].to_vector(), out;
  for (index_t t = 0; t < S; ++t) {
    std::vector<double> next(h.size());
    for (index_t b = 0; b < B; ++b)
      for (index_t u = 0; u < H; ++u) {
        double gh[3];
        for (index_t g = 0; g < 3; ++g) {
          gh[g] = x[3].data()[g * H + u];
          for (index_t l = 0; l < H; ++l) gh[g] += x[2].data()[(g * H + u) * H + l] * h[b * H + l];
        }
        auto gi = [&](index_t g) { return x[0].data()[(t * B + b) * 3 * H + g * H + u]; };
        const double r = sigmoid(gi(0) + gh[0]), z = sigmoid(gi(1) + gh[1]);
        const double nn = std::tanh(gi(2) + r * gh[2]);
        next[static_cast<std::size_t>(b * H + u)] = (1 - z) * nn + z * h[static_cast<std::size_t>(b * H + u)];
      }
    h = next;
    out.insert(out.end(), h.begin(), h.end());
  }
  return Tensord(out, Shape{S, B, H});
}

/// −log softmax(x)[label] per row of the last dim, reduced as args[0]: 0 none, 1 mean, 2 sum.
inline Tensord cross_entropy_ref(const Inputs<double>& x, const Case& c) {
  const index_t classes = x[0].shape()[-1];
  Shape rows = x[0].shape();
  rows.erase(rows.rank() - 1);
  const Tensord losses = generate(rows, [&](const Index& i) {
    const index_t r = ravel(i, rows);
    const double* row = x[0].data() + r * classes;
    double max = -std::numeric_limits<double>::infinity(), total = 0;
    for (index_t k = 0; k < classes; ++k) max = std::max(max, row[k]);
    for (index_t k = 0; k < classes; ++k) total += std::exp(row[k] - max);
    return std::log(total) + max - row[c.index.data()[r]];
  });
  if (c.args[0] == 0) return losses;
  double total = 0;
  for (double v : losses.to_vector()) total += v;
  return Tensord({c.args[0] == 1 ? total / static_cast<double>(rows.numel()) : total}, Shape{});
}

/// The classic path: masked_softmax(Q Kᵀ / √d, lens, causal) then dropout (args[1] %,
/// generator seeded args[2]) then V, with kv heads repeated for grouped queries.
inline Tensord attention_ref(const Inputs<double>& x, const Case& c) {
  Tensord k = x[1], v = x[2];
  if (x[0].dim() == 4 && k.shape()[1] != x[0].shape()[1]) {
    const index_t group = x[0].shape()[1] / k.shape()[1];
    k = k.repeat_interleave(group, 1);
    v = v.repeat_interleave(group, 1);
  }
  const double d = static_cast<double>(x[0].shape()[-1]);
  Tensord scores = naive_matmul(x[0], k, false, true);
  scores = scores * (d > 0 ? 1.0 / std::sqrt(d) : 1.0);
  Tensord weights = naive_masked_softmax(scores, c.index, c.args[0] != 0);
  const double p = static_cast<double>(c.args[1]) / 100.0;
  if (p > 0) {
    heed::Generator draws(static_cast<std::uint64_t>(c.args[2]));
    weights = heed::dropout(weights, p, true, draws);
  }
  return naive_matmul(weights, v);
}

/// Rows of x (B, T, ...) at steps >= index[b] set to scalar.
inline Tensord sequence_mask_ref(const Inputs<double>& x, const Case& c) {
  return generate(x[0].shape(), [&](const Index& i) { return i[1] < c.index.data()[i[0]] ? at(x[0], i) : c.scalar; });
}

// ---- references of shape ops -----------------------------------------------------------------

/// x's elements in order under another shape.
inline Tensord same_data(const Tensord& x, const Shape& s) { return Tensord(x.to_vector(), s); }

/// Python's slice bounds: negative counts from the end, then clamped to [0, size].
inline index_t clamp_bound(index_t i, index_t size) {
  return std::min(std::max(i < 0 ? i + size : i, index_t(0)), size);
}

inline Tensord slice_ref(const Tensord& x, int dim, index_t start, index_t end, index_t step) {
  const index_t size = x.shape()[dim];
  std::vector<index_t> picked;
  for (index_t i = clamp_bound(start, size); i < clamp_bound(end, size); i += step) picked.push_back(i);
  Shape s = x.shape();
  s[dim] = static_cast<index_t>(picked.size());
  return generate(s, [&](const Index& i) {
    Index j = i;
    j[static_cast<std::size_t>(dim)] = picked[static_cast<std::size_t>(i[static_cast<std::size_t>(dim)])];
    return at(x, j);
  });
}

inline Tensord permute_ref(const Tensord& x, const std::vector<int>& dims) {
  Shape s;
  for (int d : dims) s.push_back(x.shape()[d]);
  return generate(s, [&](const Index& i) {
    Index j(i.size());
    for (std::size_t d = 0; d < dims.size(); ++d) j[static_cast<std::size_t>(dims[d])] = i[d];
    return at(x, j);
  });
}

/// The tensors joined along dim (stack: each with a new dim of 1 there first).
inline Tensord cat_ref(const Inputs<double>& x, int dim) {
  Shape s = x[0].shape();
  s[dim] = 0;
  for (const Tensord& t : x) s[dim] += t.shape()[dim];
  return generate(s, [&](const Index& i) {
    Index j = i;
    for (const Tensord& t : x) {
      if (j[static_cast<std::size_t>(dim)] < t.shape()[dim]) return at(t, j);
      j[static_cast<std::size_t>(dim)] -= t.shape()[dim];
    }
    return std::numeric_limits<double>::quiet_NaN();
  });
}

/// torch.split's pieces of a dim of n: of `size` each, the last one shorter; one empty
/// piece when n = 0.
inline std::vector<index_t> even_pieces(index_t n, index_t size) {
  std::vector<index_t> sizes;
  for (index_t start = 0; start < n; start += size) sizes.push_back(std::min(size, n - start));
  return n == 0 ? std::vector<index_t>{0} : sizes;
}

/// The piece `which` (negative counts from the end) of x split along dim into `sizes`.
inline Tensord piece_ref(const Tensord& x, int dim, const std::vector<index_t>& sizes, std::int64_t which) {
  const std::size_t k = static_cast<std::size_t>(which < 0 ? which + static_cast<std::int64_t>(sizes.size()) : which);
  index_t start = 0;
  for (std::size_t p = 0; p < k; ++p) start += sizes[p];
  return slice_ref(x, dim, start, start + sizes.at(k), 1);
}

// ---- the table ---------------------------------------------------------------------------------

template <typename T>
T scalar_as(const Inputs<T>&, double s) {
  return static_cast<T>(s);
}

/// A mask or index result as 0/1 or index values of the inputs' type.
template <typename T, typename U>
Tensor<T> as_values(const Tensor<U>& x, const Tensor<T>&) {
  return x.template to<T>();
}

inline IndexTensor ints(const std::vector<std::int64_t>& values, const Shape& shape) {
  return IndexTensor(values, shape);
}

/// 0, 1, …, classes − 1, 0, 1, … in shape s.
inline IndexTensor cycle(const Shape& s, std::int64_t classes) {
  std::vector<std::int64_t> v(static_cast<std::size_t>(s.numel()));
  for (std::size_t i = 0; i < v.size(); ++i)
    v[i] = static_cast<std::int64_t>(i * 7 % static_cast<std::size_t>(classes));
  return IndexTensor(v, s);
}

/// Rank 0, empty, and two more shapes; `empty` says what the device does with the empty one.
inline std::vector<Case> unary_cases(double scalar = 0.0, DeviceSupport empty = DeviceSupport::entry) {
  return {Case{{Shape{}}, {}, {}, scalar}, Case{{Shape{0}}, {}, {}, scalar, empty}, Case{{Shape{2, 3}}, {}, {}, scalar},
          Case{{Shape{3, 1, 4}}, {}, {}, scalar}};
}

/// Same shapes, broadcast both ways, a rank-0 operand and 0-sized ones.
inline std::vector<Case> binary_cases() {
  return {Case{{Shape{2, 3}, Shape{2, 3}}}, Case{{Shape{2, 3}, Shape{3}}},       Case{{Shape{3}, Shape{2, 3}}},
          Case{{Shape{2, 1}, Shape{1, 3}}}, Case{{Shape{4, 1, 3}, Shape{2, 1}}}, Case{{Shape{2, 3}, Shape{}}},
          Case{{Shape{}, Shape{}}},         Case{{Shape{0, 3}, Shape{3}}},       Case{{Shape{2, 0}, Shape{2, 1}}}};
}

inline std::vector<Case> large_unary() { return {Case{{Shape{3, 32768}}, {}, {}, 0.5}}; }
inline std::vector<Case> large_binary() { return {Case{{Shape{3, 32768}, Shape{3, 32768}}}}; }

const Domain positive{0.3, 2.0};
const Domain away{0.2, 1.0, true};
const Domain whole{-2.0, 2.0, false, true};

/// An elementwise entry: f on the op's one input, ref on each value.
template <typename F>
Entry unary(std::string name, F f, double (*ref)(double)) {
  return entry(std::move(name), op([f](const auto& x, const Case&) { return f(x[0]); }), unary_cases())
      .reference(unary_ref(ref))
      .large(large_unary())
      .on_device_also({Case{{Shape{3, 50}}}});
}

/// A broadcasting binary entry: f on the op's two inputs, ref on each pair of values.
template <typename F>
Entry binary(std::string name, F f, double (*ref)(double, double)) {
  return entry(std::move(name), op([f](const auto& x, const Case&) { return f(x[0], x[1]); }), binary_cases())
      .reference(binary_ref(ref))
      .large(large_binary())
      .on_device_also({Case{{Shape{2, 3, 4}, Shape{2, 3, 4}}}, Case{{Shape{}, Shape{2, 2}}},
                       Case{{Shape{5, 1, 1, 2}, Shape{1, 3, 2, 1}}}});
}

/// dropout with p > 0 (args {p in %, training, seed}): each output is 0 or x / (1 − p),
/// the same seed gives the same bits, and the gradient is the mask times the scale.
inline void dropout_property(const Inputs<double>& x, const Case& c, const Tensord& out) {
  const double p = static_cast<double>(c.args[0]) / 100.0, scale = p < 1 ? 1 / (1 - p) : 0.0;
  REQUIRE(out.shape() == x[0].shape());
  const std::vector<double> in = x[0].to_vector(), y = out.to_vector();
  std::size_t dropped = 0;
  for (std::size_t i = 0; i < y.size(); ++i) {
    INFO("element " << i);
    dropped += y[i] == 0.0;
    CHECK((y[i] == 0.0 || y[i] == Approx(in[i] * scale).epsilon(1e-14)));
  }
  if (y.size() >= 20) {  // 30 % or 50 % of at least 20: some dropped, some kept
    CHECK(dropped > 0);
    CHECK(dropped < y.size());
  }
  if (p == 1.0) CHECK(dropped == y.size());
  // The same seed gives the same mask.
  heed::Generator again(static_cast<std::uint64_t>(c.args[2]));
  CHECK(heed::dropout(x[0], p, true, again).to_vector() == y);
  // Backward: the gradient is g where kept (times the scale), 0 where dropped.
  Tensord leaf = x[0].detach().clone().requires_grad_();
  heed::Generator draws(static_cast<std::uint64_t>(c.args[2]));
  const Tensord z = heed::dropout(leaf, p, true, draws);
  heed::Generator projection(5);
  const Tensord g = heed::randn<double>(z.shape(), projection);
  z.backward(g);
  REQUIRE(leaf.grad().defined());
  const std::vector<double> grad = leaf.grad().to_vector(), gv = g.to_vector();
  for (std::size_t i = 0; i < grad.size(); ++i) {
    INFO("gradient element " << i);
    CHECK(grad[i] == Approx(y[i] == 0.0 ? 0.0 : gv[i] * scale).epsilon(1e-14));
  }
}

}  // namespace heed_test::op_table
