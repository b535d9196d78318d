// One table of heed's ops, in the manner of ggml's test-backend-ops and PyTorch's
// OpInfo: each entry names an op, the cases to run it on (input shapes, several per
// op, with 0-sized and broadcast shapes where the op allows them, and the integer
// arguments and index tensors it reads), how its inputs are drawn, the op itself as a
// generic lambda (run in float and in double), a reference (naive loops in double, or
// a composition of simpler ops) and tolerances. tests/test_op_table.cpp runs every
// entry in every mode: forward against the reference, gradcheck in double, float
// against double, each device against the CPU, 1 thread against 3.
//
// Adding an op is adding one entry to table() below:
//
//   entry("exp", op([](const auto& x, const Case&) { return heed::exp(x[0]); }), unary_cases())
//       .reference(unary_ref([](double v) { return std::exp(v); }))
//       .large({Case{{Shape{3, 32768}}}}),
#pragma once

#include <catch2/catch.hpp>
#include <heed/heed.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace heed_test::op_table {

using heed::index_t;
using heed::IndexTensor;
using heed::Shape;
using heed::Tensor;
using heed::Tensord;

template <typename T>
using Inputs = std::vector<Tensor<T>>;

/// What the CUDA backend does with the op: runs forward and backward; runs forward only
/// (backward throws DeviceError); has no implementation (forward throws DeviceError);
/// or, for an empty input of an op without one, returns an empty tensor on the CPU
/// (the op never reads the input). entry: as the case's entry says.
enum class DeviceSupport { full, forward_only, none, empty_on_cpu, entry };

/// One way to run an op: the shapes of its floating-point inputs, the integers it
/// reads (dims, sizes, flags; their meaning is the entry's), an index tensor (indices,
/// labels, valid lengths or a 0/1 mask), a floating-point scalar, and, where a case
/// differs from its entry, what the CUDA backend does with it.
struct Case {
  std::vector<Shape> shapes;
  std::vector<std::int64_t> args = {};
  IndexTensor index = {};
  double scalar = 0.0;
  DeviceSupport device = DeviceSupport::entry;
};

/// How an input's values are drawn: uniform in [low, high), then, with
/// away_from_zero, every other one negated (so |x| >= low > 0), or with integers,
/// rounded (so that comparisons see ties).
struct Domain {
  double low = -1.0, high = 1.0;
  bool away_from_zero = false, integers = false;
};

template <typename T>
using Fn = std::function<Tensor<T>(const Inputs<T>&, const Case&)>;
using Reference = std::function<Tensord(const Inputs<double>&, const Case&)>;
/// Checks (with Catch assertions) what a reference cannot say: dropout's output.
using Property = std::function<void(const Inputs<double>&, const Case&, const Tensord&)>;

struct Op {
  Fn<float> f;
  Fn<double> d;
  template <typename T>
  const Fn<T>& get() const {
    if constexpr (std::is_same_v<T, float>)
      return f;
    else
      return d;
  }
};

/// The op as one generic lambda (const Inputs<T>&, const Case&) -> Tensor<T>.
template <typename F>
Op op(F f) {
  return Op{Fn<float>(f), Fn<double>(f)};
}

struct Entry {
  std::string name;
  Op fn;
  std::vector<Case> cases;
  std::vector<Domain> domains = {Domain{}};  // per input; the last one repeats
  Reference ref;
  Property prop;
  double tol = 1e-12;       // double against the reference, relative to the largest value
  double float_tol = 2e-5;  // float against double, likewise
  heed::GradcheckOptions grad = {};
  bool differentiable = true;
  DeviceSupport device = DeviceSupport::full;
  std::vector<Case> large_cases = {};  // big enough to split across threads; threads mode only

  Entry&& reference(Reference r) && { return ref = std::move(r), std::move(*this); }
  Entry&& property(Property p) && { return prop = std::move(p), std::move(*this); }
  Entry&& inputs(std::vector<Domain> d) && { return domains = std::move(d), std::move(*this); }
  Entry&& tolerance(double t) && { return tol = t, std::move(*this); }
  Entry&& float_tolerance(double t) && { return float_tol = t, std::move(*this); }
  Entry&& gradcheck(double atol, double rtol) && {
    grad.atol = atol, grad.rtol = rtol;
    return std::move(*this);
  }
  Entry&& not_differentiable() && { return differentiable = false, std::move(*this); }
  Entry&& on_device(DeviceSupport s) && { return device = s, std::move(*this); }
  Entry&& large(std::vector<Case> c) && { return large_cases = std::move(c), std::move(*this); }

  const Domain& domain(std::size_t input) const { return domains[std::min(input, domains.size() - 1)]; }
};

inline Entry entry(std::string name, Op fn, std::vector<Case> cases) {
  Entry e;
  e.name = std::move(name);
  e.fn = std::move(fn);
  e.cases = std::move(cases);
  return e;
}

// ---- inputs ------------------------------------------------------------------------------

/// The inputs of one case, drawn in double and rounded to float, so that the float and
/// double runs see the same values.
inline Inputs<double> make_inputs(const Entry& e, const Case& c, std::uint64_t seed) {
  Inputs<double> inputs;
  for (std::size_t i = 0; i < c.shapes.size(); ++i) {
    const Domain& d = e.domain(i);
    heed::Generator gen(seed * 1000 + i);
    std::vector<double> v = heed::uniform<double>(c.shapes[i], d.low, d.high, gen).to_vector();
    for (std::size_t j = 0; j < v.size(); ++j) {
      if (d.integers) v[j] = std::round(v[j]);
      if (d.away_from_zero && j % 2 == 1) v[j] = -v[j];
      v[j] = static_cast<double>(static_cast<float>(v[j]));
    }
    inputs.emplace_back(v, c.shapes[i]);
  }
  return inputs;
}

template <typename T>
Inputs<T> cast_inputs(const Inputs<double>& in) {
  Inputs<T> out;
  for (const Tensord& x : in) out.push_back(x.to<T>());
  return out;
}

/// The case's index tensor on the device of the op's first input (for device runs).
template <typename T>
IndexTensor index_on(const Case& c, const Inputs<T>& x) {
  return c.index.defined() ? c.index.to(x[0].device()) : c.index;
}

inline Shape shape_of(const std::vector<std::int64_t>& sizes, std::size_t from = 0) {
  Shape s;
  for (std::size_t i = from; i < sizes.size(); ++i) s.push_back(sizes[i]);
  return s;
}

/// The last k dims of s.
inline Shape tail(const Shape& s, std::int64_t k) {
  Shape out;
  for (int d = s.rank() - static_cast<int>(k); d < s.rank(); ++d) out.push_back(s[d]);
  return out;
}

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

enum class Reduce { sum, mean, max, argmax };

/// Over everything (no args) or over dim args[0], keeping it when args[1].
inline Reference reduce_ref(Reduce kind) {
  return [kind](const Inputs<double>& in, const Case& c) {
    const Tensord& x = in[0];
    auto combine = [kind](const std::vector<double>& v) {
      double acc = kind == Reduce::max || kind == Reduce::argmax ? -std::numeric_limits<double>::infinity() : 0.0;
      std::size_t best = 0;
      for (std::size_t k = 0; k < v.size(); ++k) {
        if (kind == Reduce::sum || kind == Reduce::mean) acc += v[k];
        if ((kind == Reduce::max || kind == Reduce::argmax) && v[k] > acc) acc = v[k], best = k;
      }
      if (kind == Reduce::mean) acc /= static_cast<double>(v.size());
      return kind == Reduce::argmax ? static_cast<double>(best) : acc;
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
      .large(large_unary());
}

/// A broadcasting binary entry: f on the op's two inputs, ref on each pair of values.
template <typename F>
Entry binary(std::string name, F f, double (*ref)(double, double)) {
  return entry(std::move(name), op([f](const auto& x, const Case&) { return f(x[0], x[1]); }), binary_cases())
      .reference(binary_ref(ref))
      .large(large_binary());
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

inline std::vector<Entry> make_table() {
  using DS = DeviceSupport;
  std::vector<Entry> t;
  // ---- elementwise: binary, with broadcasting
  t.push_back(binary(
      "add", [](const auto& a, const auto& b) { return heed::add(a, b); }, [](double a, double b) { return a + b; }));
  t.push_back(binary(
      "sub", [](const auto& a, const auto& b) { return heed::sub(a, b); }, [](double a, double b) { return a - b; }));
  t.push_back(binary(
      "mul", [](const auto& a, const auto& b) { return heed::mul(a, b); }, [](double a, double b) { return a * b; }));
  t.push_back(
      binary(
          "div", [](const auto& a, const auto& b) { return heed::div(a, b); }, [](double a, double b) { return a / b; })
          .inputs({Domain{}, positive}));
  t.push_back(binary(
                  "pow", [](const auto& a, const auto& b) { return heed::pow(a, b); },
                  [](double a, double b) { return std::pow(a, b); })
                  .inputs({positive, Domain{}})
                  .on_device(DS::none));
  // ---- elementwise: with a scalar
  t.push_back(entry("add_scalar",
                    op([](const auto& x, const Case& c) { return heed::add(x[0], scalar_as(x, c.scalar)); }),
                    unary_cases(2.5))
                  .reference(scalar_ref([](double v, double s) { return v + s; })));
  t.push_back(entry("mul_scalar",
                    op([](const auto& x, const Case& c) { return heed::mul(x[0], scalar_as(x, c.scalar)); }),
                    unary_cases(-1.5))
                  .reference(scalar_ref([](double v, double s) { return v * s; }))
                  .large(large_unary()));
  t.push_back(entry("rsub_scalar", op([](const auto& x, const Case& c) { return c.scalar - x[0]; }), unary_cases(2.0))
                  .reference(scalar_ref([](double v, double s) { return s - v; })));
  t.push_back(entry("div_scalar", op([](const auto& x, const Case& c) { return x[0] / c.scalar; }), unary_cases(4.0))
                  .reference(scalar_ref([](double v, double s) { return v / s; })));
  t.push_back(entry("rdiv_scalar", op([](const auto& x, const Case& c) { return c.scalar / x[0]; }),
                    unary_cases(3.0, DS::empty_on_cpu))
                  .reference(scalar_ref([](double v, double s) { return s / v; }))
                  .inputs({positive})
                  .on_device(DS::none));
  {
    std::vector<Case> cases = unary_cases(3.0, DS::empty_on_cpu);
    cases.push_back(Case{{Shape{2, 3}}, {}, {}, -0.5});
    cases.push_back(Case{{Shape{2, 3}}, {}, {}, 0.5});
    t.push_back(
        entry("pow_scalar", op([](const auto& x, const Case& c) { return x[0].pow(scalar_as(x, c.scalar)); }), cases)
            .reference(scalar_ref([](double v, double s) { return std::pow(v, s); }))
            .inputs({positive})
            .on_device(DS::none));
  }
  // ---- elementwise: unary
  t.push_back(unary(
      "neg", [](const auto& x) { return heed::neg(x); }, [](double v) { return -v; }));
  t.push_back(unary(
      "exp", [](const auto& x) { return heed::exp(x); }, [](double v) { return std::exp(v); }));
  t.push_back(unary(
                  "log", [](const auto& x) { return heed::log(x); }, [](double v) { return std::log(v); })
                  .inputs({positive}));
  t.push_back(unary(
                  "sqrt", [](const auto& x) { return heed::sqrt(x); }, [](double v) { return std::sqrt(v); })
                  .inputs({positive}));
  t.push_back(unary(
                  "tanh", [](const auto& x) { return heed::tanh(x); }, [](double v) { return std::tanh(v); })
                  .inputs({Domain{-2, 2}}));
  t.push_back(
      unary(
          "sigmoid", [](const auto& x) { return heed::sigmoid(x); }, [](double v) { return 1 / (1 + std::exp(-v)); })
          .inputs({Domain{-3, 3}}));
  t.push_back(unary(
                  "relu", [](const auto& x) { return heed::relu(x); }, [](double v) { return v > 0 ? v : 0.0; })
                  .inputs({away}));
  t.push_back(unary(
                  "gelu", [](const auto& x) { return heed::gelu(x); },
                  [](double v) { return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0))); })
                  .inputs({Domain{-3, 3}}));
  t.push_back(unary(
                  "abs", [](const auto& x) { return heed::abs(x); }, [](double v) { return std::abs(v); })
                  .inputs({away}));
  t.push_back(unary(
                  "sin", [](const auto& x) { return heed::sin(x); }, [](double v) { return std::sin(v); })
                  .inputs({Domain{-3, 3}}));
  t.push_back(unary(
                  "cos", [](const auto& x) { return heed::cos(x); }, [](double v) { return std::cos(v); })
                  .inputs({Domain{-3, 3}}));
  t.push_back(unary(
      "clone", [](const auto& x) { return heed::clone(x); }, [](double v) { return v; }));
  // ---- elementwise: comparisons (not differentiable) and selection
  t.push_back(binary(
                  "eq", [](const auto& a, const auto& b) { return as_values(heed::eq(a, b), a); },
                  [](double a, double b) { return a == b ? 1.0 : 0.0; })
                  .inputs({whole})
                  .not_differentiable()
                  .on_device(DS::none));
  t.push_back(binary(
                  "ne", [](const auto& a, const auto& b) { return as_values(heed::ne(a, b), a); },
                  [](double a, double b) { return a != b ? 1.0 : 0.0; })
                  .inputs({whole})
                  .not_differentiable()
                  .on_device(DS::none));
  t.push_back(binary(
                  "lt", [](const auto& a, const auto& b) { return as_values(heed::lt(a, b), a); },
                  [](double a, double b) { return a < b ? 1.0 : 0.0; })
                  .inputs({whole})
                  .not_differentiable()
                  .on_device(DS::none));
  t.push_back(binary(
                  "le", [](const auto& a, const auto& b) { return as_values(heed::le(a, b), a); },
                  [](double a, double b) { return a <= b ? 1.0 : 0.0; })
                  .inputs({whole})
                  .not_differentiable()
                  .on_device(DS::none));
  t.push_back(binary(
                  "gt", [](const auto& a, const auto& b) { return as_values(heed::gt(a, b), a); },
                  [](double a, double b) { return a > b ? 1.0 : 0.0; })
                  .inputs({whole})
                  .not_differentiable()
                  .on_device(DS::none));
  t.push_back(binary(
                  "ge", [](const auto& a, const auto& b) { return as_values(heed::ge(a, b), a); },
                  [](double a, double b) { return a >= b ? 1.0 : 0.0; })
                  .inputs({whole})
                  .not_differentiable()
                  .on_device(DS::none));
  t.push_back(entry("gt_scalar", op([](const auto& x, const Case& c) { return as_values(x[0] > c.scalar, x[0]); }),
                    unary_cases(0.0, DS::empty_on_cpu))
                  .reference(scalar_ref([](double v, double s) { return v > s ? 1.0 : 0.0; }))
                  .inputs({whole})
                  .not_differentiable()
                  .on_device(DS::none));
  {
    // index: the condition as 0/1, broadcast with a and b.
    const std::vector<Case> cases = {
        Case{{Shape{2, 3}, Shape{2, 3}}, {}, ints({1, 0, 1, 0, 0, 1}, {2, 3})},
        Case{{Shape{2, 1}, Shape{}}, {}, ints({1, 0, 1}, {3})},
        Case{{Shape{3}, Shape{2, 3}}, {}, ints({0, 1}, {2, 1})},
        Case{{Shape{0, 3}, Shape{3}}, {}, ints({}, {0, 3}), 0.0, DS::empty_on_cpu},
    };
    t.push_back(entry("where", op([](const auto& x, const Case& c) {
                        return heed::where(heed::ne(index_on(c, x), std::int64_t(0)), x[0], x[1]);
                      }),
                      cases)
                    .reference([](const Inputs<double>& x, const Case& c) {
                      const Tensord cond = c.index.to<double>();
                      return generate(
                          broadcast(broadcast(cond.shape(), x[0].shape()), x[1].shape()), [&](const Index& i) {
                            return at_broadcast(cond, i) != 0 ? at_broadcast(x[0], i) : at_broadcast(x[1], i);
                          });
                    })
                    .on_device(DS::none));
    const std::vector<Case> fill_cases = {
        Case{{Shape{2, 3}}, {}, ints({1, 0, 1, 0, 0, 1}, {2, 3}), -5.0},
        Case{{Shape{2, 3}}, {}, ints({1, 0, 1}, {3}), 0.0},
        Case{{Shape{2, 3}}, {}, ints({0, 1}, {2, 1}), 7.0},
        Case{{Shape{0, 3}}, {}, ints({1, 0, 1}, {3}), 1.0},
    };
    t.push_back(
        entry("masked_fill", op([](const auto& x, const Case& c) {
                return heed::masked_fill(x[0], heed::ne(index_on(c, x), std::int64_t(0)), scalar_as(x, c.scalar));
              }),
              fill_cases)
            .reference([](const Inputs<double>& x, const Case& c) {
              const Tensord cond = c.index.to<double>();
              return generate(x[0].shape(),
                              [&](const Index& i) { return at_broadcast(cond, i) != 0 ? c.scalar : at(x[0], i); });
            })
            .on_device(DS::none));
  }
  t.push_back(
      entry("sequence_mask",
            op([](const auto& x, const Case& c) { return heed::sequence_mask(x[0], index_on(c, x), c.scalar); }),
            {Case{{Shape{2, 4}}, {}, ints({1, 3}, {2}), 0.0}, Case{{Shape{3, 4, 2}}, {}, ints({0, 2, 5}, {3}), -1.0},
             Case{{Shape{0, 3}}, {}, ints({}, {0}), 0.0, DS::empty_on_cpu}})
          .reference(sequence_mask_ref)
          .on_device(DS::none));
  // ---- reductions: args {} over everything, {dim, keepdim} over one dim
  {
    const std::vector<Case> cases = {Case{{Shape{2, 3, 4}}},
                                     Case{{Shape{2, 3, 4}}, {0, 0}},
                                     Case{{Shape{2, 3, 4}}, {1, 1}},
                                     Case{{Shape{2, 3, 4}}, {-1, 0}},
                                     Case{{Shape{2, 3, 4}}, {-1, 1}},
                                     Case{{Shape{2, 1, 3}}, {1, 0}},
                                     Case{{Shape{}}},
                                     Case{{Shape{}}, {0, 0}},
                                     Case{{Shape{0, 3}}, {1, 0}}};
    std::vector<Case> sum_cases = cases;
    sum_cases.push_back(Case{{Shape{0, 3}}});
    sum_cases.push_back(Case{{Shape{0, 3}}, {0, 1}});
    t.push_back(entry("sum", op([](const auto& x, const Case& c) {
                        return c.args.empty() ? heed::sum(x[0])
                                              : heed::sum(x[0], static_cast<int>(c.args[0]), c.args[1] != 0);
                      }),
                      sum_cases)
                    .reference(reduce_ref(Reduce::sum))
                    .large({Case{{Shape{300, 400}}, {0, 0}}}));
    t.push_back(entry("mean", op([](const auto& x, const Case& c) {
                        return c.args.empty() ? heed::mean(x[0])
                                              : heed::mean(x[0], static_cast<int>(c.args[0]), c.args[1] != 0);
                      }),
                      cases)
                    .reference(reduce_ref(Reduce::mean)));
    t.push_back(entry("max", op([](const auto& x, const Case& c) {
                        return c.args.empty() ? heed::max(x[0])
                                              : heed::max(x[0], static_cast<int>(c.args[0]), c.args[1] != 0);
                      }),
                      cases)
                    .reference(reduce_ref(Reduce::max))
                    .on_device(DS::none));
    std::vector<Case> argmax_cases;
    for (const Case& c : cases)
      if (!c.args.empty()) argmax_cases.push_back(c);
    t.push_back(entry("argmax", op([](const auto& x, const Case& c) {
                        return as_values(heed::argmax(x[0], static_cast<int>(c.args[0]), c.args[1] != 0), x[0]);
                      }),
                      argmax_cases)
                    .reference(reduce_ref(Reduce::argmax))
                    .not_differentiable()
                    .on_device(DS::none));
  }
  // ---- matrix products: args {transpose_a, transpose_b} where given
  t.push_back(entry("matmul", op([](const auto& x, const Case& c) {
                      return c.args.empty() ? heed::matmul(x[0], x[1])
                                            : heed::matmul(x[0], x[1], c.args[0] != 0, c.args[1] != 0);
                    }),
                    {Case{{Shape{4}, Shape{4}}}, Case{{Shape{3}, Shape{3, 4}}}, Case{{Shape{2, 3}, Shape{3}}},
                     Case{{Shape{2, 3}, Shape{3, 4}}}, Case{{Shape{2, 2, 3}, Shape{3, 4}}},
                     Case{{Shape{2, 2, 3}, Shape{2, 3, 2}}}, Case{{Shape{2, 1, 2, 3}, Shape{3, 3, 2}}},
                     Case{{Shape{2, 3}, Shape{2, 3, 2}}}, Case{{Shape{3}, Shape{2, 3, 2}}},
                     Case{{Shape{2, 2, 3}, Shape{3}}}, Case{{Shape{0, 3}, Shape{3, 4}}},
                     Case{{Shape{2, 0}, Shape{0, 4}}}, Case{{Shape{2, 3, 2}, Shape{3, 4}}, {1, 0}},
                     Case{{Shape{2, 3}, Shape{4, 3}}, {0, 1}}, Case{{Shape{2, 3, 2}, Shape{2, 4, 3}}, {1, 1}}})
                  .reference(matmul_ref())
                  .large({Case{{Shape{256, 256}, Shape{256, 256}}}}));
  t.push_back(entry("bmm", op([](const auto& x, const Case&) { return heed::bmm(x[0], x[1]); }),
                    {Case{{Shape{2, 2, 3}, Shape{2, 3, 4}}}, Case{{Shape{1, 1, 1}, Shape{1, 1, 1}}},
                     Case{{Shape{0, 2, 3}, Shape{0, 3, 4}}}, Case{{Shape{2, 0, 3}, Shape{2, 3, 4}}}})
                  .reference(matmul_ref())
                  .large({Case{{Shape{16, 64, 64}, Shape{16, 64, 64}}}}));
  t.push_back(entry("linear", op([](const auto& x, const Case&) {
                      return x.size() > 2 ? heed::linear(x[0], x[1], x[2]) : heed::linear(x[0], x[1]);
                    }),
                    {Case{{Shape{2, 3, 4}, Shape{5, 4}, Shape{5}}}, Case{{Shape{4}, Shape{2, 4}, Shape{2}}},
                     Case{{Shape{3, 4}, Shape{5, 4}}}, Case{{Shape{0, 4}, Shape{5, 4}, Shape{5}}}})
                  .reference(linear_ref));
  // ---- softmax family: args {dim}
  {
    const std::vector<Case> cases = {Case{{Shape{2, 3, 4}}, {0}},
                                     Case{{Shape{2, 3, 4}}, {1}},
                                     Case{{Shape{2, 3, 4}}, {2}},
                                     Case{{Shape{2, 3, 4}}, {-1}},
                                     Case{{Shape{5}}, {0}},
                                     Case{{Shape{}}, {0}},
                                     Case{{Shape{0, 3}}, {1}, {}, 0.0, DS::empty_on_cpu}};
    t.push_back(entry("softmax",
                      op([](const auto& x, const Case& c) { return heed::softmax(x[0], static_cast<int>(c.args[0])); }),
                      cases)
                    .reference(softmax_ref(false))
                    .inputs({Domain{-2, 2}})
                    .on_device(DS::none)
                    .large({Case{{Shape{1600, 64}}, {-1}}, Case{{Shape{64, 1600}}, {0}}}));
    t.push_back(entry("log_softmax", op([](const auto& x, const Case& c) {
                        return heed::log_softmax(x[0], static_cast<int>(c.args[0]));
                      }),
                      cases)
                    .reference(softmax_ref(true))
                    .inputs({Domain{-2, 2}})
                    .on_device(DS::none)
                    .large({Case{{Shape{1600, 64}}, {-1}}}));
  }
  // index: valid lengths (none, (batch), (batch, queries) or (batch, heads, queries)); args {causal}
  t.push_back(entry("masked_softmax", op([](const auto& x, const Case& c) {
                      using T = typename std::decay_t<decltype(x[0])>::value_type;
                      heed::AttentionMask<T> mask;
                      if (c.index.defined()) mask.with_valid_lens(index_on(c, x));
                      mask.with_causal(!c.args.empty() && c.args[0] != 0);
                      return heed::masked_softmax(x[0], mask);
                    }),
                    {Case{{Shape{2, 3, 5}}}, Case{{Shape{2, 3, 5}}, {}, ints({2, 5}, {2})},
                     Case{{Shape{2, 3, 5}}, {}, ints({1, 0, 3, 5, 2, 4}, {2, 3})},
                     Case{{Shape{2, 2, 3, 4}}, {}, ints({3, 1}, {2})},
                     Case{{Shape{2, 2, 3, 4}}, {}, ints({1, 2, 3, 4, 0, 2}, {2, 3})},
                     Case{{Shape{2, 2, 3, 4}}, {}, ints({1, 2, 3, 4, 0, 2, 3, 3, 1, 4, 4, 2}, {2, 2, 3})},
                     Case{{Shape{2, 3, 5}}, {1}}, Case{{Shape{1, 4, 4}}, {1}, ints({3}, {1})},
                     Case{{Shape{0, 3, 4}}, {}, ints({}, {0})}, Case{{Shape{2, 3, 0}}}})
                  .reference([](const Inputs<double>& x, const Case& c) {
                    return naive_masked_softmax(x[0], c.index, !c.args.empty() && c.args[0] != 0);
                  })
                  .inputs({Domain{-2, 2}})
                  .large({Case{{Shape{4, 400, 64}}, {}, ints({10, 64, 33, 0}, {4})}}));
  // args {normalized dims, 1 when the second input is the bias}; inputs x, then weight
  // and bias if given; scalar: eps if not 0
  t.push_back(
      entry("layer_norm", op([](const auto& x, const Case& c) {
              using X = std::decay_t<decltype(x[0])>;
              const bool bias_only = c.args.size() > 1 && c.args[1] != 0;
              const X weight = x.size() > 1 && !bias_only ? x[1] : X();
              const X bias = bias_only ? x[1] : x.size() > 2 ? x[2] : X();
              return heed::layer_norm(x[0], tail(x[0].shape(), c.args[0]), weight, bias,
                                      c.scalar > 0 ? c.scalar : 1e-5);
            }),
            {Case{{Shape{2, 3, 4}, Shape{4}, Shape{4}}, {1}}, Case{{Shape{2, 3, 4}, Shape{3, 4}, Shape{3, 4}}, {2}},
             Case{{Shape{3, 4}}, {1}}, Case{{Shape{3, 4}}, {2}}, Case{{Shape{3, 4}, Shape{4}}, {1}},
             Case{{Shape{4}, Shape{4}, Shape{4}}, {1}}, Case{{Shape{0, 4}, Shape{4}, Shape{4}}, {1}},
             Case{{Shape{3, 4}, Shape{3, 4}, Shape{3, 4}}, {2}}, Case{{Shape{3, 4}, Shape{4}}, {1, 1}},
             Case{{Shape{3, 4}, Shape{4}, Shape{4}}, {1}, {}, 0.5}})
          .reference(layer_norm_ref)
          .inputs({Domain{-2, 2}, Domain{0.5, 1.5}, Domain{}})
          .tolerance(1e-10)
          .large({Case{{Shape{1600, 64}, Shape{64}, Shape{64}}, {1}}}));
  // ---- dropout: args {p in %, training, seed of the generator}
  const auto dropout_op = op([](const auto& x, const Case& c) {
    heed::Generator draws(static_cast<std::uint64_t>(c.args[2]));
    return heed::dropout(x[0], static_cast<double>(c.args[0]) / 100.0, c.args[1] != 0, draws);
  });
  t.push_back(entry("dropout_p0", dropout_op,
                    {Case{{Shape{2, 3}}, {0, 1, 7}}, Case{{Shape{2, 3}}, {50, 0, 7}}, Case{{Shape{}}, {0, 1, 7}},
                     Case{{Shape{0, 3}}, {0, 1, 7}}})
                  .reference([](const Inputs<double>& x, const Case&) { return x[0]; }));
  t.push_back(
      entry("dropout", dropout_op,
            {Case{{Shape{2, 3, 4}}, {30, 1, 17}}, Case{{Shape{7}}, {50, 1, 18}}, Case{{Shape{}}, {50, 1, 19}},
             Case{{Shape{0, 3}}, {30, 1, 20}}, Case{{Shape{3, 40}}, {30, 1, 21}}, Case{{Shape{2, 5}}, {100, 1, 22}}})
          .inputs({away})
          .property(dropout_property));
  // ---- lookups, recurrences, losses, attention
  t.push_back(
      entry("embedding", op([](const auto& x, const Case& c) { return heed::embedding(x[0], index_on(c, x)); }),
            {Case{{Shape{5, 3}}, {}, ints({4, 0, 4, 2, 4, 1, 0, 0}, {2, 2, 2})}, Case{{Shape{4, 3}}, {}, ints({2}, {})},
             Case{{Shape{4, 3}}, {}, ints({}, {0})}, Case{{Shape{4, 0}}, {}, ints({1, 3}, {2})}})
          .reference([](const Inputs<double>& x, const Case& c) {
            Shape s = c.index.shape();
            s.push_back(x[0].shape()[1]);
            return generate(s, [&](const Index& i) {
              return at(x[0], {c.index.data()[ravel(Index(i.begin(), i.end() - 1), c.index.shape())], i.back()});
            });
          }));
  t.push_back(entry("gru_layer", op([](const auto& x, const Case&) { return heed::gru_layer(x[0], x[1], x[2], x[3]); }),
                    {Case{{Shape{3, 2, 6}, Shape{2, 2}, Shape{6, 2}, Shape{6}}},
                     Case{{Shape{1, 1, 3}, Shape{1, 1}, Shape{3, 1}, Shape{3}}},
                     Case{{Shape{2, 0, 6}, Shape{0, 2}, Shape{6, 2}, Shape{6}}}})
                  .reference(gru_ref)
                  .tolerance(1e-10)
                  .on_device(DS::none));
  // index: labels; args {reduction: 0 none, 1 mean, 2 sum}
  {
    const IndexTensor labels = ints({1, 0, 4, 4, 2, 3}, {2, 3});
    t.push_back(
        entry("cross_entropy", op([](const auto& x, const Case& c) {
                const heed::Reduction r[] = {heed::Reduction::none, heed::Reduction::mean, heed::Reduction::sum};
                return heed::cross_entropy(x[0], index_on(c, x), r[c.args[0]]);
              }),
              {Case{{Shape{2, 3, 5}}, {0}, labels}, Case{{Shape{2, 3, 5}}, {1}, labels},
               Case{{Shape{2, 3, 5}}, {2}, labels}, Case{{Shape{4}}, {0}, ints({3}, {})},
               Case{{Shape{4}}, {1}, ints({3}, {})}, Case{{Shape{0, 5}}, {0}, ints({}, {0})},
               Case{{Shape{0, 5}}, {2}, ints({}, {0})}})
            .reference(cross_entropy_ref)
            .inputs({Domain{-2, 2}})
            .large({Case{{Shape{1600, 64}}, {1}, cycle(Shape{1600}, 64)}}));
  }
  // index: valid lengths; args {causal, dropout in %, seed of the generator}. No CUDA
  // implementation but for no queries or no keys, which take the classic path.
  t.push_back(
      entry(
          "scaled_dot_product_attention", op([](const auto& x, const Case& c) {
            using T = typename std::decay_t<decltype(x[0])>::value_type;
            heed::AttentionMask<T> mask;
            if (c.index.defined()) mask.with_valid_lens(index_on(c, x));
            mask.with_causal(c.args[0] != 0);
            heed::Generator draws(static_cast<std::uint64_t>(c.args[2]));
            return heed::scaled_dot_product_attention(x[0], x[1], x[2], mask, static_cast<double>(c.args[1]) / 100.0,
                                                      draws);
          }),
          {Case{{Shape{2, 3, 4}, Shape{2, 5, 4}, Shape{2, 5, 3}}, {0, 0, 0}, ints({2, 5}, {2})},
           Case{{Shape{2, 3, 4}, Shape{2, 5, 4}, Shape{2, 5, 3}}, {0, 0, 0}, ints({0, 3}, {2})},
           Case{{Shape{2, 2, 3, 4}, Shape{2, 2, 5, 4}, Shape{2, 2, 5, 3}}, {0, 0, 0}, ints({1, 2, 3, 4, 5, 2}, {2, 3})},
           Case{{Shape{2, 4, 4}, Shape{2, 4, 4}, Shape{2, 4, 2}}, {1, 0, 0}},
           Case{{Shape{1, 4, 3, 4}, Shape{1, 2, 5, 4}, Shape{1, 2, 5, 3}}, {0, 0, 0}},
           Case{{Shape{2, 3, 4}, Shape{2, 5, 4}, Shape{2, 5, 3}}, {0, 30, 9}, ints({4, 5}, {2})},
           Case{{Shape{2, 0, 4}, Shape{2, 5, 4}, Shape{2, 5, 3}}, {0, 0, 0}, {}, 0.0, DS::full},
           Case{{Shape{2, 3, 4}, Shape{2, 0, 4}, Shape{2, 0, 3}}, {0, 0, 0}, {}, 0.0, DS::full}})
          .reference(attention_ref)
          .tolerance(1e-10)
          .inputs({Domain{-2, 2}})
          .on_device(DS::none)
          .large({Case{{Shape{3, 2, 70, 8}, Shape{3, 2, 70, 8}, Shape{3, 2, 70, 8}}, {1, 10, 3}}}));
  // ---- shape ops: views
  t.push_back(entry("reshape", op([](const auto& x, const Case& c) { return heed::reshape(x[0], c.args); }),
                    {Case{{Shape{2, 3, 4}}, {4, -1}}, Case{{Shape{2, 3, 4}}, {24}}, Case{{Shape{}}, {1, 1}},
                     Case{{Shape{0, 3}}, {3, 0}}, Case{{Shape{2, 3}}, {-1}}})
                  .reference([](const Inputs<double>& x, const Case& c) {
                    index_t known = 1;
                    for (std::int64_t a : c.args)
                      if (a >= 0) known *= a;
                    Shape s;
                    for (std::int64_t a : c.args) s.push_back(a >= 0 ? a : x[0].numel() / known);
                    return same_data(x[0], s);
                  }));
  t.push_back(entry("flatten", op([](const auto& x, const Case& c) {
                      return heed::flatten(x[0], static_cast<int>(c.args[0]), static_cast<int>(c.args[1]));
                    }),
                    {Case{{Shape{2, 3, 4}}, {0, -1}}, Case{{Shape{2, 3, 4}}, {1, -1}}, Case{{Shape{2, 3, 4}}, {0, 1}},
                     Case{{Shape{}}, {0, -1}}, Case{{Shape{0, 3}}, {0, -1}}})
                  .reference([](const Inputs<double>& x, const Case& c) {
                    if (x[0].dim() == 0) return same_data(x[0], Shape{1});
                    const int start = norm_dim(c.args[0], x[0].dim()), end = norm_dim(c.args[1], x[0].dim());
                    Shape s;
                    for (int d = 0; d < x[0].dim(); ++d) {
                      if (d > start && d <= end)
                        s[-1] *= x[0].shape()[d];
                      else
                        s.push_back(x[0].shape()[d]);
                    }
                    return same_data(x[0], s);
                  }));
  t.push_back(entry("unsqueeze",
                    op([](const auto& x, const Case& c) { return heed::unsqueeze(x[0], static_cast<int>(c.args[0])); }),
                    {Case{{Shape{2, 3}}, {0}}, Case{{Shape{2, 3}}, {-1}}, Case{{Shape{2, 3}}, {1}},
                     Case{{Shape{}}, {0}}, Case{{Shape{0}}, {1}}})
                  .reference([](const Inputs<double>& x, const Case& c) {
                    Shape s = x[0].shape();
                    s.insert(c.args[0] < 0 ? static_cast<int>(c.args[0]) + x[0].dim() + 1 : static_cast<int>(c.args[0]),
                             1);
                    return same_data(x[0], s);
                  }));
  t.push_back(entry("squeeze", op([](const auto& x, const Case& c) {
                      return c.args.empty() ? heed::squeeze(x[0]) : heed::squeeze(x[0], static_cast<int>(c.args[0]));
                    }),
                    {Case{{Shape{2, 1, 3, 1}}}, Case{{Shape{2, 1, 3}}, {1}}, Case{{Shape{2, 3}}, {0}}, Case{{Shape{}}},
                     Case{{Shape{0, 1}}, {1}}})
                  .reference([](const Inputs<double>& x, const Case& c) {
                    Shape s;
                    for (int d = 0; d < x[0].dim(); ++d) {
                      const bool drop =
                          x[0].shape()[d] == 1 && (c.args.empty() || norm_dim(c.args[0], x[0].dim()) == d);
                      if (!drop) s.push_back(x[0].shape()[d]);
                    }
                    return same_data(x[0], s);
                  }));
  // ---- shape ops: copies
  t.push_back(entry("permute", op([](const auto& x, const Case& c) {
                      return heed::permute(x[0], std::vector<int>(c.args.begin(), c.args.end()));
                    }),
                    {Case{{Shape{2, 3, 4}}, {2, 0, 1}}, Case{{Shape{2, 3, 4, 5}}, {0, 2, 1, 3}}, Case{{Shape{}}, {}},
                     Case{{Shape{0, 3}}, {1, 0}}})
                  .reference([](const Inputs<double>& x, const Case& c) {
                    return permute_ref(x[0], std::vector<int>(c.args.begin(), c.args.end()));
                  }));
  t.push_back(entry("transpose", op([](const auto& x, const Case& c) {
                      return heed::transpose(x[0], static_cast<int>(c.args[0]), static_cast<int>(c.args[1]));
                    }),
                    {Case{{Shape{4, 6}}, {0, 1}}, Case{{Shape{2, 3, 4}}, {-1, -2}}, Case{{Shape{2, 3, 4}}, {0, 2}},
                     Case{{Shape{3}}, {0, 0}}, Case{{Shape{0, 2}}, {0, 1}}})
                  .reference([](const Inputs<double>& x, const Case& c) {
                    std::vector<int> dims(static_cast<std::size_t>(x[0].dim()));
                    for (std::size_t d = 0; d < dims.size(); ++d) dims[d] = static_cast<int>(d);
                    std::swap(dims[static_cast<std::size_t>(norm_dim(c.args[0], x[0].dim()))],
                              dims[static_cast<std::size_t>(norm_dim(c.args[1], x[0].dim()))]);
                    return permute_ref(x[0], dims);
                  }));
  // args {dim, start, end, step}
  t.push_back(entry("slice", op([](const auto& x, const Case& c) {
                      return heed::slice(x[0], static_cast<int>(c.args[0]), c.args[1], c.args[2], c.args[3]);
                    }),
                    {Case{{Shape{2, 3, 4}}, {2, 0, 4, 2}}, Case{{Shape{2, 3, 4}}, {1, -2, 100, 1}},
                     Case{{Shape{2, 3, 4}}, {2, 1, 4, 3}}, Case{{Shape{2, 3, 4}}, {0, 1, 1, 1}},
                     Case{{Shape{9, 4}}, {0, 1, 8, 3}}, Case{{Shape{0, 4}}, {1, 1, 3, 1}}})
                  .reference([](const Inputs<double>& x, const Case& c) {
                    return slice_ref(x[0], norm_dim(c.args[0], x[0].dim()), c.args[1], c.args[2], c.args[3]);
                  }));
  // args {dim, start, length}
  t.push_back(entry("narrow", op([](const auto& x, const Case& c) {
                      return heed::narrow(x[0], static_cast<int>(c.args[0]), c.args[1], c.args[2]);
                    }),
                    {Case{{Shape{2, 3, 4}}, {2, 1, 2}}, Case{{Shape{2, 3, 4}}, {0, -1, 1}},
                     Case{{Shape{2, 3, 4}}, {1, 0, 0}}, Case{{Shape{4, 6, 3}}, {1, 2, 3}}})
                  .reference([](const Inputs<double>& x, const Case& c) {
                    const int dim = norm_dim(c.args[0], x[0].dim());
                    const index_t start = c.args[1] < 0 ? c.args[1] + x[0].shape()[dim] : c.args[1];
                    return slice_ref(x[0], dim, start, start + c.args[2], 1);
                  }));
  // args {dim, index}
  t.push_back(entry("select", op([](const auto& x, const Case& c) {
                      return heed::select(x[0], static_cast<int>(c.args[0]), c.args[1]);
                    }),
                    {Case{{Shape{2, 3, 4}}, {1, 2}}, Case{{Shape{2, 3, 4}}, {-1, -1}}, Case{{Shape{3}}, {0, 1}},
                     Case{{Shape{2, 0}}, {0, 1}}})
                  .reference([](const Inputs<double>& x, const Case& c) {
                    const int dim = norm_dim(c.args[0], x[0].dim());
                    const index_t i = c.args[1] < 0 ? c.args[1] + x[0].shape()[dim] : c.args[1];
                    Shape s = x[0].shape();
                    s.erase(dim);
                    return same_data(slice_ref(x[0], dim, i, i + 1, 1), s);
                  }));
  // Backward on the device adds into one element from several threads, which heed does
  // not do: forward only, but where nothing is repeated.
  t.push_back(entry("repeat", op([](const auto& x, const Case& c) { return heed::repeat(x[0], c.args); }),
                    {Case{{Shape{2, 3}}, {2, 2}}, Case{{Shape{2, 3}}, {2, 1, 3}}, Case{{Shape{}}, {3}},
                     Case{{Shape{3, 1}}, {1, 4}}, Case{{Shape{2, 3}}, {1, 1}, {}, 0.0, DS::full},
                     Case{{Shape{2, 3}}, {0, 1}, {}, 0.0, DS::full}})
                  .reference([](const Inputs<double>& x, const Case& c) {
                    const std::size_t extra = c.args.size() - static_cast<std::size_t>(x[0].dim());
                    Shape s;
                    for (std::size_t d = 0; d < c.args.size(); ++d)
                      s.push_back(c.args[d] * (d < extra ? 1 : x[0].shape()[static_cast<int>(d - extra)]));
                    return generate(s, [&](const Index& i) {
                      Index j;
                      for (std::size_t d = extra; d < i.size(); ++d)
                        j.push_back(i[d] % x[0].shape()[static_cast<int>(d - extra)]);
                      return at(x[0], j);
                    });
                  })
                  .on_device(DS::forward_only));
  // args {repeats, dim}
  t.push_back(entry("repeat_interleave", op([](const auto& x, const Case& c) {
                      return heed::repeat_interleave(x[0], c.args[0], static_cast<int>(c.args[1]));
                    }),
                    {Case{{Shape{2, 3}}, {2, 0}}, Case{{Shape{2, 3}}, {3, -1}}, Case{{Shape{}}, {2, 0}},
                     Case{{Shape{2, 3}}, {1, 0}, {}, 0.0, DS::full}, Case{{Shape{2, 3}}, {0, 1}, {}, 0.0, DS::full}})
                  .reference([](const Inputs<double>& x, const Case& c) {
                    const Tensord flat = x[0].dim() == 0 ? same_data(x[0], Shape{1}) : x[0];
                    const int dim = norm_dim(c.args[1], flat.dim());
                    Shape s = flat.shape();
                    s[dim] *= c.args[0];
                    return generate(s, [&](const Index& i) {
                      Index j = i;
                      j[static_cast<std::size_t>(dim)] /= c.args[0];
                      return at(flat, j);
                    });
                  })
                  .on_device(DS::forward_only));
  // args: the shape to expand to
  t.push_back(entry("expand", op([](const auto& x, const Case& c) { return heed::expand(x[0], shape_of(c.args)); }),
                    {Case{{Shape{3, 1}}, {2, 3, 4}}, Case{{Shape{3}}, {2, 3}}, Case{{Shape{}}, {2, 2}},
                     Case{{Shape{2, 3}}, {2, 3}, {}, 0.0, DS::full}, Case{{Shape{1}}, {0}, {}, 0.0, DS::full}})
                  .reference([](const Inputs<double>& x, const Case& c) {
                    return generate(shape_of(c.args), [&](const Index& i) { return at_broadcast(x[0], i); });
                  })
                  .on_device(DS::forward_only));
  // args {dim}; index: the positions picked
  t.push_back(
      entry("index_select", op([](const auto& x, const Case& c) {
              return heed::index_select(x[0], static_cast<int>(c.args[0]), index_on(c, x));
            }),
            {Case{{Shape{2, 3}}, {1}, ints({2, 0, 2, 2}, {4})}, Case{{Shape{2, 3}}, {0}, ints({1, 1}, {2})},
             Case{{Shape{2, 3}}, {1}, ints({}, {0}), 0.0, DS::empty_on_cpu}, Case{{Shape{4}}, {0}, ints({3, 0}, {2})}})
          .reference([](const Inputs<double>& x, const Case& c) {
            const int dim = norm_dim(c.args[0], x[0].dim());
            Shape s = x[0].shape();
            s[dim] = c.index.numel();
            return generate(s, [&](const Index& i) {
              Index j = i;
              j[static_cast<std::size_t>(dim)] = c.index.data()[i[static_cast<std::size_t>(dim)]];
              return at(x[0], j);
            });
          })
          .on_device(DS::none));
  // args {dim}; every input joined
  t.push_back(
      entry("cat", op([](const auto& x, const Case& c) { return heed::cat(x, static_cast<int>(c.args[0])); }),
            {Case{{Shape{2, 3}, Shape{2, 1}, Shape{2, 4}}, {1}}, Case{{Shape{2, 3}, Shape{1, 3}}, {0}},
             Case{{Shape{2, 3}, Shape{0, 3}}, {0}}, Case{{Shape{2, 3}}, {-1}}})
          .reference([](const Inputs<double>& x, const Case& c) { return cat_ref(x, norm_dim(c.args[0], x[0].dim())); })
          .on_device(DS::none));
  t.push_back(entry("stack",
                    op([](const auto& x, const Case& c) { return heed::stack(x, static_cast<int>(c.args[0])); }),
                    {Case{{Shape{2, 3}, Shape{2, 3}}, {1}}, Case{{Shape{2, 3}, Shape{2, 3}, Shape{2, 3}}, {-1}},
                     Case{{Shape{}, Shape{}}, {0}}, Case{{Shape{0, 3}, Shape{0, 3}}, {0}}})
                  .reference([](const Inputs<double>& x, const Case& c) {
                    const int dim = norm_dim(c.args[0], x[0].dim() + 1);
                    Inputs<double> parts;
                    for (const Tensord& p : x) {
                      Shape s = p.shape();
                      s.insert(dim, 1);
                      parts.push_back(same_data(p, s));
                    }
                    return cat_ref(parts, dim);
                  })
                  .on_device(DS::none));
  return t;
}

/// The table, built once.
inline const std::vector<Entry>& table() {
  static const std::vector<Entry> entries = make_table();
  return entries;
}

}  // namespace heed_test::op_table
