// heed/attention/multi_head.hpp — multi-head attention (d2l 10.5), with grouped-query
// attention and a key/value cache for decoding one step at a time.
//
//   heed::MultiHeadAttention<float> attention(/*key_size=*/100, /*query_size=*/100,
//       /*value_size=*/100, /*num_hiddens=*/100, /*num_heads=*/5, /*dropout=*/0.5);
//   attention.eval();
//   auto out = attention(X, Y, Y, valid_lens);   // (2, 4, 100)
//
//   queries: (batch, num_queries, query_size)
//   keys:    (batch, num_keys, key_size)
//   values:  (batch, num_keys, value_size)
//   out:     (batch, num_queries, num_hiddens)
//   attention_weights(): (batch, num_heads, num_queries, num_keys)
//
// Each head attends with DotProductAttention over num_hiddens / num_heads features.
// d2l folds the heads into the batch, (batch·num_heads, steps, head_dim) — that is
// what transpose_qkv / transpose_output below compute, for code translated from d2l —
// while the module keeps them as a dimension of their own, (batch, num_heads, steps,
// head_dim): masks then broadcast over heads instead of being repeated per head.
//
// Masks are the AttentionMask forms of masked_softmax, given per batch element as for
// 3-D attention: valid_lens (batch) or (batch, num_queries), a boolean or additive
// mask (batch, num_queries, num_keys) or anything broadcasting to it, the causal rule;
// 4-D masks with a heads dim pass through as they are.
//
// With num_kv_heads < num_heads (grouped-query attention), W_k and W_v project to
// num_kv_heads heads, each shared by num_heads / num_kv_heads query heads.
//
// Projections are split from attending, so that a decoder can keep the projected keys
// and values of the steps already decoded (KVCache) and attend to them again without
// recomputing them: forward(q, k, v, mask) is attend(q, project_kv(k, v), mask).
#pragma once

#include "heed/detail/header_begin.hpp"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "heed/attention/dot_product.hpp"
#include "heed/nn/linear.hpp"
#include "heed/ops/shape.hpp"

namespace heed {

/// (batch, steps, num_heads·head_dim) -> (batch, num_heads, steps, head_dim).
template <typename T>
Tensor<T> split_heads(const Tensor<T>& X, index_t num_heads) {
  HEED_CHECK(X.dim() == 3 && num_heads > 0 && X.shape()[2] % num_heads == 0, ShapeError,
             "split_heads: X must be (batch, steps, features) with features divisible by num_heads = ", num_heads,
             ", got ", to_string(X.shape()));
  const Shape& s = X.shape();
  return X.reshape({s[0], s[1], num_heads, s[2] / num_heads}).permute({0, 2, 1, 3});
}

/// (batch, num_heads, steps, head_dim) -> (batch, steps, num_heads·head_dim).
template <typename T>
Tensor<T> merge_heads(const Tensor<T>& X) {
  HEED_CHECK(X.dim() == 4, ShapeError, "merge_heads: X must be (batch, num_heads, steps, head_dim), got ",
             to_string(X.shape()));
  const Shape& s = X.shape();
  return X.permute({0, 2, 1, 3}).reshape({s[0], s[2], s[1] * s[3]});
}

/// d2l's transpose_qkv: (batch, steps, num_hiddens) -> (batch·num_heads, steps, num_hiddens / num_heads).
template <typename T>
Tensor<T> transpose_qkv(const Tensor<T>& X, index_t num_heads) {
  const Tensor<T> heads = split_heads(X, num_heads);
  const Shape& s = heads.shape();
  return heads.reshape({s[0] * s[1], s[2], s[3]});
}

/// d2l's transpose_output, the inverse of transpose_qkv:
/// (batch·num_heads, steps, head_dim) -> (batch, steps, num_heads·head_dim).
template <typename T>
Tensor<T> transpose_output(const Tensor<T>& X, index_t num_heads) {
  HEED_CHECK(X.dim() == 3 && num_heads > 0 && X.shape()[0] % num_heads == 0, ShapeError,
             "transpose_output: X must be (batch·num_heads, steps, head_dim) with num_heads = ", num_heads,
             " dividing its first dim, got ", to_string(X.shape()));
  const Shape& s = X.shape();
  return merge_heads(X.reshape({s[0] / num_heads, num_heads, s[1], s[2]}));
}

/// Projected keys and values of the steps attended to so far, per head. The tensors keep
/// room for more steps (capacity() ≥ num_steps()), so that decoding's append writes the
/// new step alone: appending by cat copied every step before it, on every step, and that
/// copy (and the fresh memory it faulted in) was a third of MarianMT's beam search.
/// Copies of a cache share its tensors until one of them appends (it then writes to a
/// copy of its own); the capacity past num_steps() holds nothing meaningful.
template <typename T>
struct KVCache {
  Tensor<T> keys;    // (batch, num_kv_heads, capacity, head_dim): steps [0, num_steps()) in use
  Tensor<T> values;  // (batch, num_kv_heads, capacity, head_dim)

  KVCache() = default;
  /// A cache of every step of `k` and `v`, (batch, num_kv_heads, steps, head_dim).
  KVCache(Tensor<T> k, Tensor<T> v)
      : keys(std::move(k)), values(std::move(v)), steps_(keys.defined() ? keys.shape()[2] : 0) {
    HEED_CHECK(keys.defined() == values.defined() &&
                   (!keys.defined() || (keys.dim() == 4 && values.dim() == 4 && keys.shape()[0] == values.shape()[0] &&
                                        keys.shape()[1] == values.shape()[1] && keys.shape()[2] == values.shape()[2])),
               ShapeError, "KVCache: keys and values must both be (batch, num_kv_heads, steps, head_dim), got ",
               keys.defined() ? to_string(keys.shape()) : std::string("(none)"), " and ",
               values.defined() ? to_string(values.shape()) : std::string("(none)"));
  }

  bool empty() const { return !keys.defined(); }
  index_t num_steps() const { return empty() ? 0 : steps_; }
  index_t capacity() const { return empty() ? 0 : keys.shape()[2]; }

  /// The steps in use as tensors of their own, (batch, num_kv_heads, num_steps(), head_dim).
  KVCache used() const {
    if (empty() || steps_ == capacity()) return *this;
    return KVCache(narrow(keys, 2, 0, steps_), narrow(values, 2, 0, steps_));
  }

  /// Appends the steps of `more` after those already cached.
  void append(const KVCache& more) {
    HEED_CHECK(!more.empty(), ValueError, "KVCache::append: nothing to append (an empty cache)");
    if (empty()) {
      *this = more.used();
      writer_.reset();
      return;
    }
    const Shape &s = keys.shape(), &m = more.keys.shape();
    HEED_CHECK(m[0] == s[0] && m[1] == s[1] && m[3] == s[3] && more.values.shape()[3] == values.shape()[3], ShapeError,
               "KVCache::append: keys ", to_string(m), " do not fit the cache's ", to_string(s));
    const index_t n = more.num_steps();
    if (autograd::needs_grad(keys, values, more.keys, more.values) || !keys.is_cpu() || !more.keys.is_cpu()) {
      const KVCache all = used(), add = more.used();  // recorded for autograd, or on a device: as cat does
      *this = KVCache(cat({all.keys, add.keys}, 2), cat({all.values, add.values}, 2));
      return;
    }
    if (steps_ + n > capacity() || !writer_ || writer_.use_count() > 1) grow(std::max(steps_ + n, 2 * capacity()));
    copy_steps(more.keys, more.capacity(), 0, keys, steps_, n);
    copy_steps(more.values, more.capacity(), 0, values, steps_, n);
    steps_ += n;
  }

  /// Room for `steps` steps in all (appends up to them write in place), where the cache
  /// appends in place at all: on the CPU, with nothing recorded for autograd.
  void reserve(index_t steps) {
    HEED_CHECK(steps >= 0, ValueError, "KVCache::reserve: steps must be >= 0, got ", steps);
    if (!empty() && steps > capacity() && keys.is_cpu() && !autograd::needs_grad(keys, values)) grow(steps);
  }

  /// Keeps the batch rows `index` (1-D, repeats allowed), in that order: beam search's
  /// reorder of the cache to the surviving beams.
  void reorder(const Tensor<std::int64_t>& index) {
    if (empty()) return;
    HEED_CHECK(index.defined() && index.dim() == 1, ShapeError, "KVCache::reorder: index must be 1-D, got ",
               index.defined() ? to_string(index.shape()) : std::string("(none)"));
    const index_t batch = keys.shape()[0];
    // An index on a device is read there (index_select: a row out of range is NaN).
    for (index_t i = 0; index.is_cpu() && i < index.numel(); ++i)
      HEED_CHECK(index.data()[i] >= 0 && index.data()[i] < batch, IndexError, "KVCache::reorder: index ",
                 index.data()[i], " out of range for a batch of ", batch);
    if (autograd::needs_grad(keys, values) || !keys.is_cpu()) {
      const KVCache all = used();
      const Tensor<std::int64_t> rows = index.to(keys.device());  // the decoding loop's is on the CPU
      *this = KVCache(index_select(all.keys, 0, rows), index_select(all.values, 0, rows));
      return;
    }
    const index_t rows = index.numel();
    if (rows > 0 && rows <= batch && writer_ && writer_.use_count() == 1) {
      // Rows of this batch, in another order (beam search) or fewer of them (sentences
      // that ended): only the rows that change are written, in place, their sources saved
      // first where they change too, and fewer rows are the first ones, the same storage. New
      // tensors for fewer rows were fresh memory to fault in at every step a sentence
      // ended, and a copy of every row (4 % of the recipe's beam search, one thread).
      std::vector<std::uint8_t> changed(static_cast<std::size_t>(rows)), source(static_cast<std::size_t>(batch));
      for (index_t r = 0; r < rows; ++r)
        if (index.data()[r] != r) changed[static_cast<std::size_t>(r)] = source[index.data()[r]] = 1;
      reorder_in_place(keys, index.data(), changed, source);
      reorder_in_place(values, index.data(), changed, source);
      if (rows < batch) {
        Shape k = keys.shape(), v = values.shape();
        k[0] = v[0] = rows;
        keys = detail::alias(keys, k);
        values = detail::alias(values, v);
      }
      return;
    }
    keys = select_rows(keys, index);
    values = select_rows(values, index);
    writer_ = std::make_shared<int>();
  }

  void clear() { *this = KVCache(); }

 private:
  /// New tensors of `capacity` steps holding the steps in use, written by this cache alone.
  void grow(index_t capacity) {
    Shape k = keys.shape(), v = values.shape();
    k[2] = v[2] = capacity;
    Tensor<T> new_keys = detail::make_tensor<T>(k, Device::cpu(), "KVCache"),
              new_values = detail::make_tensor<T>(v, Device::cpu(), "KVCache");
    copy_steps(keys, this->capacity(), 0, new_keys, 0, steps_);
    copy_steps(values, this->capacity(), 0, new_values, 0, steps_);
    keys = new_keys;
    values = new_values;
    writer_ = std::make_shared<int>();
  }
  /// Steps [from, from + n) of each (row, head) of `src` (capacity src_capacity) to steps
  /// [to, to + n) of `dst`; both (batch, heads, capacity, features).
  static void copy_steps(const Tensor<T>& src, index_t src_capacity, index_t from, Tensor<T>& dst, index_t to,
                         index_t n) {
    const index_t blocks = dst.shape()[0] * dst.shape()[1], features = dst.shape()[3], dst_capacity = dst.shape()[2];
    for (index_t b = 0; b < blocks; ++b)
      std::copy_n(src.data() + (b * src_capacity + from) * features, n * features,
                  dst.data() + (b * dst_capacity + to) * features);
  }
  /// The rows `index` of x (batch, heads, capacity, features), their steps in use.
  Tensor<T> select_rows(const Tensor<T>& x, const Tensor<std::int64_t>& index) const {
    Shape shape = x.shape();
    shape[0] = index.numel();
    Tensor<T> out = detail::make_tensor<T>(shape, Device::cpu(), "KVCache");
    const index_t heads = shape[1], capacity = shape[2], features = shape[3];
    for (index_t r = 0; r < shape[0]; ++r)
      for (index_t h = 0; h < heads; ++h)
        std::copy_n(x.data() + ((index.data()[r] * heads + h) * capacity) * features, steps_ * features,
                    out.data() + ((r * heads + h) * capacity) * features);
    return out;
  }

  /// x's rows r = index[r] where changed[r] (r < changed.size() ≤ x's rows), in place;
  /// rows that are both changed and a source are copied aside first.
  void reorder_in_place(Tensor<T>& x, const std::int64_t* index, const std::vector<std::uint8_t>& changed,
                        const std::vector<std::uint8_t>& source) const {
    const index_t rows = static_cast<index_t>(changed.size()), heads = x.shape()[1],
                  block = x.shape()[2] * x.shape()[3], used = steps_ * x.shape()[3];
    T* data = x.data();
    thread_local std::vector<T> saved;
    std::vector<index_t> slot(static_cast<std::size_t>(x.shape()[0]), -1);  // rows past `rows` are never written
    index_t count = 0;
    for (index_t r = 0; r < rows; ++r)
      if (changed[static_cast<std::size_t>(r)] && source[static_cast<std::size_t>(r)]) slot[r] = count++;
    saved.resize(static_cast<std::size_t>(count * heads * used));
    for (index_t r = 0; r < rows; ++r)
      if (slot[r] >= 0)
        for (index_t h = 0; h < heads; ++h)
          std::copy_n(data + (r * heads + h) * block, used, saved.data() + (slot[r] * heads + h) * used);
    for (index_t r = 0; r < rows; ++r) {
      if (!changed[static_cast<std::size_t>(r)]) continue;
      const index_t from = index[r];
      for (index_t h = 0; h < heads; ++h)
        std::copy_n(
            slot[from] >= 0 ? saved.data() + (slot[from] * heads + h) * used : data + (from * heads + h) * block, used,
            data + (r * heads + h) * block);
    }
  }

  index_t steps_ = 0;
  std::shared_ptr<int> writer_;  // shared with copies: a cache writes in place only when it holds it alone
};

template <typename T>
class MultiHeadAttention : public Module<T> {
 public:
  /// num_kv_heads = 0 means num_heads (plain multi-head attention).
  MultiHeadAttention(index_t key_size, index_t query_size, index_t value_size, index_t num_hiddens, index_t num_heads,
                     double dropout, bool bias = false, index_t num_kv_heads = 0, Generator& gen = default_generator())
      : Module<T>("MultiHeadAttention"),
        num_heads_(checked_heads(num_hiddens, num_heads)),
        num_kv_heads_(checked_kv_heads(num_heads, num_kv_heads)),
        head_dim_(num_hiddens / num_heads),
        attention(dropout),
        W_q(query_size, num_hiddens, bias, gen),
        W_k(key_size, num_kv_heads_ * head_dim_, bias, gen),
        W_v(value_size, num_kv_heads_ * head_dim_, bias, gen),
        W_o(num_hiddens, num_hiddens, bias, gen) {
    this->register_module("attention", attention);
    this->register_module("W_q", W_q);
    this->register_module("W_k", W_k);
    this->register_module("W_v", W_v);
    this->register_module("W_o", W_o);
  }

  Tensor<T> forward(const Tensor<T>& queries, const Tensor<T>& keys, const Tensor<T>& values,
                    const AttentionMask<T>& mask = {}) {
    check_input(keys, W_k, "keys");
    check_input(values, W_v, "values");
    HEED_CHECK(keys.shape()[0] == values.shape()[0] && keys.shape()[1] == values.shape()[1], ShapeError,
               "MultiHeadAttention: keys ", to_string(keys.shape()), " and values ", to_string(values.shape()),
               " differ in batch or steps");
    return attend(queries, project_kv(keys, values), mask);
  }
  Tensor<T> operator()(const Tensor<T>& queries, const Tensor<T>& keys, const Tensor<T>& values,
                       const AttentionMask<T>& mask = {}) {
    return forward(queries, keys, values, mask);
  }

  /// Keys and values projected and split into heads, ready for attend() or a cache.
  // keys: (batch, num_keys, key_size), values: (batch, num_keys, value_size)
  KVCache<T> project_kv(const Tensor<T>& keys, const Tensor<T>& values) const {
    check_input(keys, W_k, "keys");
    check_input(values, W_v, "values");
    return {split_heads(W_k(keys), num_kv_heads_), split_heads(W_v(values), num_kv_heads_)};
  }

  /// Attends with queries to keys and values already projected (by project_kv). The
  /// cache may hold fewer rows than there are queries' rows: each group of
  /// batch / cache rows consecutive query rows then shares one cache row (the beams of a
  /// sentence share its encoder's outputs: beam search keeps them once, not once per
  /// beam), the mask being none or valid lens per cache row. A group's queries attend
  /// as the queries of one row, which they are: no query sees another.
  // queries: (batch, num_queries, query_size) -> (batch, num_queries, num_hiddens)
  Tensor<T> attend(const Tensor<T>& queries, const KVCache<T>& kv, const AttentionMask<T>& mask = {}) {
    check_input(queries, W_q, "queries");
    const index_t batch = queries.shape()[0], num_queries = queries.shape()[1];
    const index_t kv_batch = kv.empty() || kv.keys.dim() != 4 ? -1 : kv.keys.shape()[0];
    HEED_CHECK(kv_batch >= 0 && (kv_batch == batch || (kv_batch > 0 && batch % kv_batch == 0)) &&
                   kv.keys.shape()[1] == num_kv_heads_ && kv.keys.shape()[3] == head_dim_ &&
                   kv.values.shape() == kv.keys.shape(),
               ShapeError, "MultiHeadAttention: projected keys ",
               kv.empty() ? std::string("(none)") : to_string(kv.keys.shape()), " and values ",
               kv.empty() ? std::string("(none)") : to_string(kv.values.shape()), " do not fit queries ",
               to_string(queries.shape()), " with ", num_kv_heads_, " key/value heads of ", head_dim_,
               " features (the cache's rows must divide the queries')");
    const index_t group = kv_batch == batch ? 1 : batch / kv_batch;
    HEED_CHECK(group == 1 || (!mask.is_causal() && !mask.allowed().defined() && !mask.additive_mask().defined() &&
                              (!mask.valid_lens().defined() || mask.valid_lens().dim() == 1)),
               ShapeError, "MultiHeadAttention: queries ", to_string(queries.shape()), " in groups of ", group,
               " per cache row take no mask or valid lens per cache row, not a causal, boolean, additive or "
               "per-query mask");
    // A group's rows side by side: one row of group · num_queries queries (a view).
    const Tensor<T> q = group == 1 ? queries : queries.reshape({kv_batch, group * num_queries, queries.shape()[2]});
    const Tensor<T> out = attention.forward_prefix(split_heads(W_q(q), num_heads_), kv.keys, kv.values, kv.num_steps(),
                                                   per_head(mask, kv_batch));
    const Tensor<T> merged = W_o(merge_heads(out));
    return group == 1 ? merged : merged.reshape({batch, num_queries, merged.shape()[2]});
  }

  /// The weights of the last forward, (batch, num_heads, num_queries, num_keys), cut
  /// from the graph; undefined when keeping them is off.
  const Tensor<T>& attention_weights() const { return attention.attention_weights(); }
  /// Whether forward keeps its weights (on by default); outputs are the same either way.
  void keep_attention_weights(bool keep) { attention.keep_attention_weights(keep); }
  bool keeps_attention_weights() const { return attention.keeps_attention_weights(); }

  index_t num_heads() const { return num_heads_; }
  index_t num_kv_heads() const { return num_kv_heads_; }
  index_t num_hiddens() const { return W_o.out_features(); }
  index_t head_dim() const { return head_dim_; }

 private:
  static index_t checked_heads(index_t num_hiddens, index_t num_heads) {
    HEED_CHECK(num_heads > 0 && num_hiddens > 0 && num_hiddens % num_heads == 0, ValueError,
               "MultiHeadAttention: num_hiddens = ", num_hiddens, " is not divisible by num_heads = ", num_heads);
    return num_heads;
  }
  static index_t checked_kv_heads(index_t num_heads, index_t num_kv_heads) {
    if (num_kv_heads == 0) return num_heads;
    HEED_CHECK(num_kv_heads > 0 && num_heads % num_kv_heads == 0, ValueError,
               "MultiHeadAttention: num_kv_heads = ", num_kv_heads, " does not divide num_heads = ", num_heads);
    return num_kv_heads;
  }
  void check_input(const Tensor<T>& x, const Linear<T>& projection, const char* what) const {
    HEED_CHECK(x.dim() == 3 && x.shape()[2] == projection.in_features(), ShapeError, "MultiHeadAttention: ", what,
               " must be (batch, steps, ", projection.in_features(), "), got ", to_string(x.shape()));
  }
  /// The mask as seen by (batch, heads, queries, keys) scores: per-batch masks gain a
  /// heads dim, so that they broadcast over heads rather than against them.
  static AttentionMask<T> per_head(const AttentionMask<T>& mask, index_t batch) {
    AttentionMask<T> out = mask;
    if (mask.valid_lens().defined()) {
      const Shape& s = mask.valid_lens().shape();
      HEED_CHECK(s.rank() >= 1 && s.rank() <= 2 && s[0] == batch, ShapeError,
                 "MultiHeadAttention: valid_lens must be (batch) or (batch, num_queries) with batch = ", batch,
                 ", got ", to_string(s));
    }
    if (mask.allowed().defined() && mask.allowed().dim() == 3) out.with_allowed(mask.allowed().unsqueeze(1));
    if (mask.additive_mask().defined() && mask.additive_mask().dim() == 3)
      out.with_additive(mask.additive_mask().unsqueeze(1));
    return out;
  }

  index_t num_heads_, num_kv_heads_, head_dim_;

 public:
  DotProductAttention<T> attention;
  Linear<T> W_q, W_k, W_v, W_o;
};

}  // namespace heed

#include "heed/detail/header_end.hpp"
