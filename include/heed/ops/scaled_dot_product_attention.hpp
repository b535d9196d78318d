// heed/ops/scaled_dot_product_attention.hpp — attention that never stores the scores.
//
//   auto out = heed::scaled_dot_product_attention(queries, keys, values, valid_lens);
//   auto out = heed::scaled_dot_product_attention(q, k, v, heed::AttentionMask<float>::causal(), 0.1, gen);
//
//   queries: (batch, [heads,] num_queries, d)
//   keys:    (batch, [kv_heads,] num_keys, d)         kv_heads divides heads
//   values:  (batch, [kv_heads,] num_keys, value_dim)
//   out:     (batch, [heads,] num_queries, value_dim)
//
// The same function as DotProductAttention's classic path, matmul(Q/√d, Kᵀ) →
// masked_softmax → dropout → matmul with V, with every AttentionMask form and the same
// dropout masks for the same generator (ops/dropout.hpp's hash of the weights'
// coordinates), but computed tile by tile so that the (batch, heads, num_queries,
// num_keys) weights never exist: memory grows with the sequence length, not its
// square (FlashAttention, Dao et al. 2022).
//
// Forward: for each tile of query rows, the key tiles in order; a running max and sum
// per row rescale the partial output whenever a larger score arrives, and the row's
// log-sum-exp is kept for backward. Key tiles past every row's valid length or causal
// limit are skipped, which the classic path cannot do.
// Backward: each tile's weights are recomputed from the log-sum-exp, P = exp(S − lse),
// and with D = rowsum(dO ∘ O), dS = P ∘ (dP − D); that holds with dropout too, since
// Σ_j P_ij M_ij (dO_i · v_j) = dO_i · O_i.
// NaN: which outputs and gradients are NaN is what the classic path gives. A NaN or
// +inf score a row can see makes the row's weights NaN before its limit (masked_softmax
// scales masked ones by 1/NaN too); its log-sum-exp is then NaN, so backward recomputes
// the same NaN weights. Masked scores, whatever they hold, are never read. Zero weights
// still multiply, as the classic path's matmuls do, so 0 · (NaN or inf) in queries,
// keys, values or the output's gradient is NaN where it is there: a tile past every
// row's limit is skipped only when what it would multiply is finite.
// Threads: forward tasks are (batch, kv head, tile of query rows), backward tasks
// (batch, kv head), because a kv head's key and value gradients sum over all its
// queries. A task runs whole on one thread, so any thread count gives the same bits.
//
// dropout is the probability p of PyTorch's F.scaled_dot_product_attention(dropout_p=):
// pass 0 outside training. The additive mask is a constant, as in masked_softmax.
// On a CUDA device it runs the backend's fused kernels (src/cuda/attention.cu: a row of
// scores at a time, the same masks and dropout); a backend without them, and d2l's
// uniform rows, take the classic path there, each query head reading its kv head
// through index_select, whose backward sums the heads that share one.
#pragma once

#include "heed/detail/header_begin.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <tuple>
#include <utility>
#include <vector>

#include "heed/detail/parallel.hpp"
#include "heed/ops/dropout.hpp"
#include "heed/ops/masked_softmax.hpp"
#include "heed/ops/matmul.hpp"
#include "heed/ops/shape.hpp"

namespace heed {
namespace detail {

/// Checks that queries, keys and values fit one attention call; `op` names the caller.
template <typename T>
void check_attention_inputs(const Tensor<T>& queries, const Tensor<T>& keys, const Tensor<T>& values, const char* op,
                            bool same_feature_size, bool grouped_heads = false) {
  const Shape &q = queries.shape(), &k = keys.shape(), &v = values.shape();
  HEED_CHECK((q.rank() == 3 || q.rank() == 4) && k.rank() == q.rank() && v.rank() == q.rank(), ShapeError, op,
             ": queries, keys and values must all be (batch, [heads,] steps, features), got ", to_string(q), ", ",
             to_string(k), " and ", to_string(v));
  HEED_CHECK(q[0] == k[0] && k[0] == v[0], ShapeError, op, ": batch sizes differ: queries ", to_string(q), ", keys ",
             to_string(k), ", values ", to_string(v));
  // 4-D: with grouped_heads, keys and values may have fewer heads than queries.
  HEED_CHECK(q.rank() == 3 || (k[1] == v[1] && (grouped_heads ? k[1] > 0 && q[1] % k[1] == 0 : q[1] == k[1])),
             ShapeError, op, ": keys and values need the same number of heads ", grouped_heads ? "dividing" : "as",
             " the queries': queries ", to_string(q), ", keys ", to_string(k), ", values ", to_string(v));
  HEED_CHECK(k[-2] == v[-2], ShapeError, op, ": keys ", to_string(k), " and values ", to_string(v),
             " have different numbers of steps");
  HEED_CHECK(!same_feature_size || q[-1] == k[-1], ShapeError, op, ": queries ", to_string(q), " and keys ",
             to_string(k), " have different feature sizes");
}

/// Query rows × keys of one score tile: 64 KiB of float scores stay in L2. Measured at
/// B 8, H 8, d 64, L 2048, 1-D valid_lens, 2 threads, fwd+bwd: 64 × 256 1.37 s, 128 × 256 1.40 s,
/// 64 × 512 1.56 s, and single-threaded at L 1024 the spread was within 20 %.
constexpr index_t kAttentionQueryTile = 64;
constexpr index_t kAttentionKeyTile = 256;

/// Everything a tile needs to know about one attention call. Score rows are numbered
/// as in the classic path's (batch, heads, num_queries, num_keys) weights:
/// r = (b·heads + h)·num_queries + q. The query heads sharing kv head g are rows
/// [(b·heads + g·group)·num_queries, +group·num_queries), contiguous in the queries.
template <typename T>
struct FusedAttention {
  index_t batch = 0, heads = 1, kv_heads = 1, group = 1, num_queries = 0, num_keys = 0, d = 0, value_dim = 0;
  index_t key_capacity = 0;  // steps from one (b, kv head)'s keys and values to the next's: num_keys or more
  T scale = T(1);
  std::vector<index_t> limits;  // per row: keys at or past it are masked; empty for none
  const bool* allowed = nullptr;
  MaskRows allowed_rows;
  const T* additive = nullptr;
  MaskRows additive_rows;
  bool dropout = false;
  std::uint32_t threshold = 0;
  T keep_scale = T(1);
  std::vector<std::uint32_t> row_seeds;  // per row, when dropout

  index_t block_rows() const { return group * num_queries; }
  /// The first score row of the (b, kv head) block.
  index_t block_row0(index_t b, index_t kv_head) const { return (b * heads + kv_head * group) * num_queries; }
  /// How many keys of row r from k0 on (at most nk) lie before its limit.
  index_t visible_prefix(index_t r, index_t k0, index_t nk) const {
    if (limits.empty()) return nk;
    return std::clamp<index_t>(limits[static_cast<std::size_t>(r)] - k0, 0, nk);
  }
  /// Past the last key any of rows [r0, r0 + n) may see.
  index_t keys_needed(index_t r0, index_t n) const {
    if (limits.empty()) return num_keys;
    index_t most = 0;
    for (index_t r = r0; r < r0 + n; ++r) most = std::max(most, limits[static_cast<std::size_t>(r)]);
    return most;
  }
};

template <typename T>
using TileMap = Eigen::Map<RowMajorMatrix<T>>;
/// Scratch for tiles, aligned as tensors are (Eigen's largest packet): Eigen peels a
/// reduction (a row's sum, max) from the first aligned element, so a buffer whose
/// alignment varied with the thread that allocated it would vary the sum's order, and
/// the bits with the thread count (seen with AVX-512).
template <typename T>
using TileBuffer = std::vector<T, Eigen::aligned_allocator<T>>;
template <typename T>
using ConstTileMap = Eigen::Map<const RowMajorMatrix<T>>;

/// Whether every element of x is finite: x − x is 0 there and NaN at a NaN or an
/// infinity. One vectorised sum; Eigen's allFinite() is ~100× slower.
template <typename Derived>
bool all_finite(const Eigen::DenseBase<Derived>& x) {
  return (x.derived().array() - x.derived().array()).sum() == 0;
}

/// Scores of rows [r0, r0 + S.rows()) against keys [k0, k0 + S.cols()) with the mask
/// applied: S holds Q Kᵀ/√d on entry and the masked scores on exit, −inf where a key
/// is not visible (past the row's limit, not allowed, or −inf with the additive mask).
/// With a boolean or additive mask, keep (S's size) says which keys are visible.
template <typename T>
void mask_scores(const FusedAttention<T>& a, index_t r0, index_t k0, TileMap<T>& S, std::uint8_t* keep) {
  constexpr T kMinusInf = -std::numeric_limits<T>::infinity();
  const index_t nk = S.cols();
  for (index_t i = 0; i < S.rows(); ++i) {
    const index_t r = r0 + i;
    const index_t visible = a.visible_prefix(r, k0, nk);
    T* row = S.row(i).data();
    std::fill(row + visible, row + nk, kMinusInf);
    if (a.allowed == nullptr && a.additive == nullptr) continue;
    const auto ri = static_cast<std::size_t>(r);
    const auto* allowed =
        a.allowed ? reinterpret_cast<const std::uint8_t*>(a.allowed + a.allowed_rows.offsets[ri]) : nullptr;
    const T* additive = a.additive ? a.additive + a.additive_rows.offsets[ri] : nullptr;
    const index_t allowed_stride = a.allowed_rows.key_stride, additive_stride = a.additive_rows.key_stride;
    std::uint8_t* row_keep = keep + i * nk;
    for (index_t j = 0; j < visible; ++j) {
      const T s = additive ? row[j] + additive[(k0 + j) * additive_stride] : row[j];
      const auto k =
          static_cast<std::uint8_t>((allowed == nullptr || allowed[(k0 + j) * allowed_stride] != 0) & (s != kMinusInf));
      row_keep[j] = k;
      row[j] = k ? s : kMinusInf;
    }
  }
}

/// row[j] = exp(row[j]) for j < n, every element vectorised: the rest past the last
/// whole packet goes through one padded packet, where Eigen's exp of a dynamic length
/// called the scalar expf for each (a decoding step's dozen keys: all of them).
template <typename T>
void exp_in_place(T* row, index_t n) {
  constexpr index_t kPacket = 64 / sizeof(T);
  using Packet = Eigen::Array<T, kPacket, 1>;
  const index_t whole = n / kPacket * kPacket;
  VecMap<T>(row, whole) = ConstVecMap<T>(row, whole).exp();
  if (whole == n) return;
  Packet rest = Packet::Zero();
  std::copy(row + whole, row + n, rest.data());
  rest = rest.exp();
  std::copy_n(rest.data(), n - whole, row + whole);
}

/// P = exp(S − shift) per row of masked scores from mask_scores, 0 where masked. Only
/// each row's visible prefix goes through exp, and with a boolean or additive mask the
/// masked keys go in as 0 and come out zeroed: Eigen's vectorised exp of −inf is a
/// subnormal (slow to produce, and not 0), and Eigen's select() is not vectorised.
template <typename T>
void exp_rows(const FusedAttention<T>& a, index_t r0, index_t k0, TileMap<T>& S, const T* shift,
              const std::uint8_t* keep) {
  const index_t nk = S.cols();
  const bool masked = a.allowed != nullptr || a.additive != nullptr;
  for (index_t i = 0; i < S.rows(); ++i) {
    const T s = shift[i];
    const index_t visible = s == -std::numeric_limits<T>::infinity() ? 0 : a.visible_prefix(r0 + i, k0, nk);
    T* row = S.row(i).data();
    std::fill(row + visible, row + nk, T(0));
    if (!masked) {
      VecMap<T>(row, visible) -= s;
      exp_in_place(row, visible);
      flush_exp_underflow(row, visible);  // a −inf score weighs 0, as in masked_softmax
      continue;
    }
    // A NaN row's masked weights are NaN too, as masked_softmax makes them.
    const T masked_weight = std::isnan(s) ? s : T(0);
    const std::uint8_t* row_keep = keep + i * nk;
    for (index_t j = 0; j < visible; ++j) row[j] = row_keep[j] ? row[j] - s : T(0);
    exp_in_place(row, visible);
    for (index_t j = 0; j < visible; ++j) row[j] = row_keep[j] ? row[j] : masked_weight;
  }
}

/// Whether a row of masked scores whose maxCoeff() is −inf holds a NaN that maxCoeff
/// dropped (it keeps a NaN only in first place), which would leave the row looking
/// fully masked. With a boolean or additive mask a visible key is never −inf, so any
/// visible key is a NaN (memchr over the keep bytes, null without such a mask);
/// without, only −inf scores lead here, and the visible prefix is searched.
template <typename T>
bool hides_nan(const FusedAttention<T>& a, index_t r, index_t k0, const T* row, index_t nk,
               const std::uint8_t* row_keep) {
  const index_t visible = a.visible_prefix(r, k0, nk);
  if (visible == 0) return false;
  if (row_keep != nullptr) return std::memchr(row_keep, 1, static_cast<std::size_t>(visible)) != nullptr;
  return std::any_of(row, row + visible, [](T s) { return std::isnan(s); });
}

/// Multiplies P by the dropout mask of rows [r0, …) and keys [k0, …): 0 or 1/(1 − p).
template <typename T>
void apply_dropout(const FusedAttention<T>& a, index_t r0, index_t k0, TileMap<T>& P) {
  for (index_t i = 0; i < P.rows(); ++i) {
    const std::uint32_t seed = a.row_seeds[static_cast<std::size_t>(r0 + i)];
    T* row = P.row(i).data();
    for (index_t j = 0; j < P.cols(); ++j) row[j] *= dropout_drops(seed, k0 + j, a.threshold) ? T(0) : a.keep_scale;
  }
}

/// out[c, c + Width) += Σ_j p[j] · V[j][c, c + Width) for each block of Width columns
/// from c on, the block kept in registers across V's nk rows (dv each), summed in j's
/// order; returns the first column left over.
template <int Width, typename T>
index_t add_weighted_columns(T* out, const T* p, const T* V, index_t nk, index_t dv, index_t c) {
  using Block = Eigen::Array<T, Width, 1>;
  for (; c + Width <= dv; c += Width) {
    Block acc = Eigen::Map<const Block>(out + c);
    for (index_t j = 0; j < nk; ++j) acc += p[j] * Eigen::Map<const Block>(V + j * dv + c);
    Eigen::Map<Block>(out + c) = acc;
  }
  return c;
}

/// out (dv) += Σ_j p[j] · V[j] over V's nk rows (dv each, contiguous), summed in j's order
/// for each column: one query's weighted values, a block of columns at a time kept in
/// registers across the rows (an axpy per row would store and reload out at every row).
/// Blocks of 64 columns are four 16-wide chains of multiply-adds side by side, where one
/// strip of 16 waited at every row for its previous sum.
template <typename T>
void add_weighted_rows(T* out, const T* p, const T* V, index_t nk, index_t dv) {
  index_t c = add_weighted_columns<64>(out, p, V, nk, dv, 0);
  c = add_weighted_columns<16>(out, p, V, nk, dv, c);
  for (; c < dv; ++c)
    for (index_t j = 0; j < nk; ++j) out[c] += p[j] * V[j * dv + c];
}

/// Forward of rows [r0, r0 + nq) of the (b, kv head) block into out and lse (unless null).
// Q: (nq, d) scaled queries, K: (num_keys, d), V: (num_keys, value_dim) of the kv head
template <typename T>
void fused_attention_forward_tile(const FusedAttention<T>& a, index_t r0, const ConstTileMap<T>& Q,
                                  const ConstTileMap<T>& K, const ConstTileMap<T>& V, TileMap<T> out, T* lse) {
  constexpr T kMinusInf = -std::numeric_limits<T>::infinity();
  const index_t nq = Q.rows();
  const bool masked = a.allowed != nullptr || a.additive != nullptr;
  // The thread's buffers, as large as this call's tiles: decoding calls this once per
  // (row, head) and step with one query (MarianMT's beam search, 1,024 calls a layer),
  // and allocating them there took attention from 7.3 % to 9.5 % of the decoding profile.
  thread_local TileBuffer<T> scores;
  thread_local std::vector<T> max, sum;
  thread_local std::vector<std::uint8_t> keep;
  scores.resize(static_cast<std::size_t>(nq * std::min(kAttentionKeyTile, a.num_keys)));
  max.assign(static_cast<std::size_t>(nq), kMinusInf);
  sum.assign(static_cast<std::size_t>(nq), T(0));
  keep.resize(masked ? scores.size() : 0);
  out.setZero();
  index_t keys = a.keys_needed(r0, nq);
  // The weights past `keys` are 0, but 0 · (NaN or inf) in V is NaN on the classic path.
  if (keys < a.num_keys && !all_finite(V.middleRows(keys, a.num_keys - keys))) keys = a.num_keys;
  for (index_t k0 = 0; k0 < keys; k0 += kAttentionKeyTile) {
    const index_t nk = std::min(kAttentionKeyTile, keys - k0);
    TileMap<T> S(scores.data(), nq, nk);
    // One query (a decoding step): dot products, and the weighted values summed a strip
    // at a time, where Eigen's GEMV spent more on its set-up than on a dozen keys' products.
    if (nq == 1)
      for (index_t j = 0; j < nk; ++j) S(0, j) = Q.row(0).dot(K.row(k0 + j));
    else
      S.noalias() = Q * K.middleRows(k0, nk).transpose();
    mask_scores(a, r0, k0, S, keep.data());
    // The running max per row; the partial sums and outputs scale by exp(old − new).
    // A NaN score beside a finite max makes the sum NaN through exp; a NaN or +inf max
    // makes alpha, the sum and the row NaN.
    for (index_t i = 0; i < nq; ++i) {
      const auto ii = static_cast<std::size_t>(i);
      T tile_max = S.row(i).maxCoeff();
      if (tile_max == kMinusInf &&
          hides_nan(a, r0 + i, k0, S.row(i).data(), nk, masked ? keep.data() + i * nk : nullptr))
        tile_max = std::numeric_limits<T>::quiet_NaN();
      const T new_max = std::isnan(tile_max) ? tile_max : std::max(max[ii], tile_max);
      if (new_max == kMinusInf) continue;  // nothing visible yet: the row stays 0
      // Before the first visible key a finite new max makes alpha 0, and the sum (0) and
      // the row (0, or NaN from 0 · a NaN or inf of V) stay as they are: the scalar exp
      // is spared (a decoding step's only tile).
      if (max[ii] != kMinusInf || std::isnan(new_max)) {
        const T alpha = std::exp(max[ii] - new_max);
        sum[ii] *= alpha;
        out.row(i) *= alpha;
      }
      max[ii] = new_max;
    }
    exp_rows(a, r0, k0, S, max.data(), keep.data());
    for (index_t i = 0; i < nq; ++i) sum[static_cast<std::size_t>(i)] += S.row(i).sum();
    if (a.dropout) apply_dropout(a, r0, k0, S);
    if (nq == 1)
      add_weighted_rows(out.data(), S.data(), V.row(k0).data(), nk, a.value_dim);
    else
      out.noalias() += S * V.middleRows(k0, nk);
  }
  for (index_t i = 0; i < nq; ++i) {
    const auto ii = static_cast<std::size_t>(i);
    // A row with no visible key keeps the 0 · V it summed (zeros, or NaN where V is not
    // finite), and lse −inf makes its weights 0 in backward. A NaN sum gives NaN out and lse.
    if (sum[ii] != T(0)) out.row(i) *= T(1) / sum[ii];
    if (lse) lse[i] = sum[ii] == T(0) ? kMinusInf : max[ii] + std::log(sum[ii]);
  }
}

/// Backward of the (b, kv head) block: dQ (scaled back by 1/√d by the caller), dK, dV.
// Q: (rows, d) scaled queries, dO and O: (rows, value_dim), K: (num_keys, d), V: (num_keys, value_dim)
template <typename T>
void fused_attention_backward_block(const FusedAttention<T>& a, index_t r0, const ConstTileMap<T>& Q,
                                    const ConstTileMap<T>& K, const ConstTileMap<T>& V, const ConstTileMap<T>& O,
                                    const ConstTileMap<T>& dO, const T* lse, TileMap<T> dQ, TileMap<T> dK,
                                    TileMap<T> dV) {
  const index_t rows = Q.rows();
  // D_i = dO_i · O_i: the row sums of dP ∘ P.
  const Eigen::Matrix<T, Eigen::Dynamic, 1> D = (dO.array() * O.array()).rowwise().sum();
  std::vector<index_t> keys_needed;  // per query tile
  for (index_t q0 = 0; q0 < rows; q0 += kAttentionQueryTile)
    keys_needed.push_back(a.keys_needed(r0 + q0, std::min(kAttentionQueryTile, rows - q0)));
  // A (query tile, key tile) pair past every row's limit has zero weights and is skipped
  // unless it would multiply something not finite, where the classic path's 0 · x is
  // NaN: queries, keys or values, or dO or O (D is finite exactly when both are).
  std::vector<std::uint8_t> finite_queries(keys_needed.size(), 1),
      finite_keys(static_cast<std::size_t>((a.num_keys + kAttentionKeyTile - 1) / kAttentionKeyTile), 1);
  if (*std::min_element(keys_needed.begin(), keys_needed.end()) < a.num_keys) {
    for (index_t q0 = 0, t = 0; q0 < rows; q0 += kAttentionQueryTile, ++t) {
      const index_t nq = std::min(kAttentionQueryTile, rows - q0);
      finite_queries[static_cast<std::size_t>(t)] = all_finite(D.segment(q0, nq)) && all_finite(Q.middleRows(q0, nq));
    }
    for (index_t k0 = 0, kt = 0; k0 < a.num_keys; k0 += kAttentionKeyTile, ++kt) {
      const index_t nk = std::min(kAttentionKeyTile, a.num_keys - k0);
      finite_keys[static_cast<std::size_t>(kt)] = all_finite(K.middleRows(k0, nk)) && all_finite(V.middleRows(k0, nk));
    }
  }
  const std::size_t tile =
      static_cast<std::size_t>(std::min(kAttentionQueryTile, rows) * std::min(kAttentionKeyTile, a.num_keys));
  TileBuffer<T> p_buffer(tile), dp_buffer(tile), pd_buffer(a.dropout ? tile : 0);
  std::vector<std::uint8_t> keep(a.allowed != nullptr || a.additive != nullptr ? tile : 0);
  dQ.setZero();
  dK.setZero();
  dV.setZero();
  for (index_t k0 = 0, kt = 0; k0 < a.num_keys; k0 += kAttentionKeyTile, ++kt) {
    const index_t nk = std::min(kAttentionKeyTile, a.num_keys - k0);
    const auto K_j = K.middleRows(k0, nk);
    const auto V_j = V.middleRows(k0, nk);
    auto dK_j = dK.middleRows(k0, nk);
    auto dV_j = dV.middleRows(k0, nk);
    for (index_t q0 = 0, t = 0; q0 < rows; q0 += kAttentionQueryTile, ++t) {
      const auto ti = static_cast<std::size_t>(t);
      if (k0 >= keys_needed[ti] && finite_queries[ti] && finite_keys[static_cast<std::size_t>(kt)]) continue;
      const index_t nq = std::min(kAttentionQueryTile, rows - q0);
      const auto Q_i = Q.middleRows(q0, nq);
      const auto dO_i = dO.middleRows(q0, nq);
      TileMap<T> P(p_buffer.data(), nq, nk), dP(dp_buffer.data(), nq, nk);
      P.noalias() = Q_i * K_j.transpose();
      mask_scores(a, r0 + q0, k0, P, keep.data());
      exp_rows(a, r0 + q0, k0, P, lse + q0, keep.data());
      dP.noalias() = dO_i * V_j.transpose();
      if (a.dropout) {
        TileMap<T> Pd(pd_buffer.data(), nq, nk);
        Pd = P;
        apply_dropout(a, r0 + q0, k0, Pd);
        dV_j.noalias() += Pd.transpose() * dO_i;
        apply_dropout(a, r0 + q0, k0, dP);
      } else {
        dV_j.noalias() += P.transpose() * dO_i;
      }
      // dS = P ∘ (dP − D), into dP.
      dP.array() = P.array() * (dP.array().colwise() - D.segment(q0, nq).array());
      dK_j.noalias() += dP.transpose() * Q_i;
      dQ.middleRows(q0, nq).noalias() += dP * K_j;
    }
  }
}

/// The output and the log-sum-exp of each score row, from the scaled queries; no
/// log-sum-exp (an undefined tensor) without `with_lse`, for inference.
template <typename T>
std::pair<Tensor<T>, Tensor<T>> fused_attention_forward(const FusedAttention<T>& a, const Tensor<T>& scaled_queries,
                                                        const Tensor<T>& keys, const Tensor<T>& values,
                                                        bool with_lse = true) {
  Shape out_shape = scaled_queries.shape(), lse_shape;
  out_shape[-1] = a.value_dim;
  for (int i = 0; i + 1 < out_shape.rank(); ++i) lse_shape.push_back(out_shape[i]);
  Tensor<T> out = make_tensor<T>(out_shape), lse = with_lse ? make_tensor<T>(lse_shape) : Tensor<T>();
  const T *Q = scaled_queries.data(), *K = keys.data(), *V = values.data();
  T *O = out.data(), *L = with_lse ? lse.data() : nullptr;
  const index_t rows = a.block_rows(), tiles = (rows + kAttentionQueryTile - 1) / kAttentionQueryTile;
  const index_t d = a.d, dv = a.value_dim, nk = a.num_keys;
  parallel_tasks(a.batch * a.kv_heads * tiles, a.batch * a.kv_heads * rows * nk * (d + dv), [&](index_t task) {
    const index_t block = task / tiles, q0 = (task % tiles) * kAttentionQueryTile;
    const index_t nq = std::min(kAttentionQueryTile, rows - q0);
    const index_t r = a.block_row0(block / a.kv_heads, block % a.kv_heads) + q0;
    const SerialGemmScope serial(true);
    fused_attention_forward_tile(
        a, r, ConstTileMap<T>(Q + r * d, nq, d), ConstTileMap<T>(K + block * a.key_capacity * d, nk, d),
        ConstTileMap<T>(V + block * a.key_capacity * dv, nk, dv), TileMap<T>(O + r * dv, nq, dv), L ? L + r : nullptr);
  });
  return {out, lse};
}

/// Gradients of queries, keys and values, from the scaled queries, keys, values, the
/// output and its gradient and the log-sum-exp of the forward.
template <typename T>
autograd::Grads<T> fused_attention_backward(const FusedAttention<T>& a, const Tensor<T>& scaled_queries,
                                            const Tensor<T>& keys, const Tensor<T>& values, const Tensor<T>& out,
                                            const Tensor<T>& lse, const Tensor<T>& grad) {
  HEED_CHECK(a.key_capacity == a.num_keys, ShapeError, "fused_attention_backward: keys with spare capacity");
  Tensor<T> dq = make_tensor<T>(scaled_queries.shape()), dk = make_tensor<T>(keys.shape()),
            dv = make_tensor<T>(values.shape());
  const index_t rows = a.block_rows(), d = a.d, vd = a.value_dim, nk = a.num_keys;
  const T *Q = scaled_queries.data(), *K = keys.data(), *V = values.data();
  const T *O = out.data(), *dO = grad.data(), *L = lse.data();
  T *dQ = dq.data(), *dK = dk.data(), *dV = dv.data();
  // Backward: about 2.5 times the forward's multiply-adds.
  parallel_tasks(a.batch * a.kv_heads, a.batch * a.kv_heads * rows * nk * (d + vd) * 5 / 2, [&](index_t block) {
    const index_t r = a.block_row0(block / a.kv_heads, block % a.kv_heads);
    const SerialGemmScope serial(true);
    fused_attention_backward_block(a, r, ConstTileMap<T>(Q + r * d, rows, d),
                                   ConstTileMap<T>(K + block * nk * d, nk, d),
                                   ConstTileMap<T>(V + block * nk * vd, nk, vd), ConstTileMap<T>(O + r * vd, rows, vd),
                                   ConstTileMap<T>(dO + r * vd, rows, vd), L + r, TileMap<T>(dQ + r * d, rows, d),
                                   TileMap<T>(dK + block * nk * d, nk, d), TileMap<T>(dV + block * nk * vd, nk, vd));
  });
  // S = (Q/√d) Kᵀ: dQ = dS K/√d, dK = dSᵀ (Q/√d).
  dq.array() *= a.scale;
  return {dq, dk, dv};
}

/// scaled_dot_product_attention on a device with the fused_attention capability: its
/// attention_forward / _backward kernels (src/cuda/attention.cu), the weights never in
/// memory, the same dropout masks as the CPU's for the same generator.
template <typename T>
Tensor<T> device_fused_attention(const Tensor<T>& queries, const Tensor<T>& keys, const Tensor<T>& values,
                                 const AttentionMask<T>& mask, double dropout, Generator& gen) {
  const Shape& q = queries.shape();
  const Device device = common_device("scaled_dot_product_attention", queries, keys, values, mask.valid_lens(),
                                      mask.allowed(), mask.additive_mask());
  AttentionShape s;
  s.four_d = q.rank() == 4;
  s.batch = q[0];
  s.heads = s.four_d ? q[1] : 1;
  s.kv_heads = s.four_d ? keys.shape()[1] : 1;
  s.num_queries = q[-2];
  s.num_keys = keys.shape()[-2];
  s.d = q[-1];
  s.value_dim = values.shape()[-1];
  if (dropout > 0.0) {  // one draw per call, as dropout() makes
    s.dropout = true;
    s.threshold = dropout_threshold(dropout);
    s.keep_scale = dropout < 1.0 ? 1.0 / (1.0 - dropout) : 0.0;
    s.key = dropout_mix(gen.next_u64());
  }
  const Shape scores =
      s.four_d ? Shape{s.batch, s.heads, s.num_queries, s.num_keys} : Shape{s.batch, s.num_queries, s.num_keys};
  const SoftmaxMask<T> rows = device_softmax_mask(mask, scores);
  const T scale = T(1) / static_cast<T>(std::sqrt(static_cast<double>(s.d)));
  Tensor<T> scaled_queries;
  {
    const NoGradGuard no_grad;  // the node recorded below differentiates the whole op
    scaled_queries = queries * scale;
  }
  Shape out_shape = q;
  out_shape[-1] = s.value_dim;
  Tensor<T> out = make_tensor<T>(out_shape, device);
  Tensor<T> lse = make_tensor<T>(Shape{s.batch * s.heads * s.num_queries}, device);
  kernels_for(queries, "scaled_dot_product_attention")
      .attention_forward(device.index(), device_data(out), device_data(lse), device_data(scaled_queries),
                         device_data(keys), device_data(values), s, rows);
  if (autograd::needs_grad(queries, keys, values))
    autograd::record(
        out, "ScaledDotProductAttentionBackward", {queries, keys, values},
        [s, rows, scale, lse, mask = AttentionMask<T>(mask),  // keeps alive the mask tensors rows points into
         saved_queries = autograd::save(scaled_queries), saved_keys = autograd::save(keys),
         saved_values = autograd::save(values), saved_out = autograd::save(out)](const Tensor<T>& grad) {
          (void)mask;
          const Tensor<T>& k = saved_keys.get();
          const Tensor<T>& v = saved_values.get();
          const Device on = grad.device();
          Tensor<T> dq = make_tensor<T>(saved_queries.get().shape(), on);
          Tensor<T> dk = make_tensor<T>(k.shape(), on);
          Tensor<T> dv = make_tensor<T>(v.shape(), on);
          Tensor<T> row_d = make_tensor<T>(lse.shape(), on);
          DeviceKernels<T>& kernels = kernels_for(grad, "scaled_dot_product_attention backward");
          kernels.attention_backward(on.index(), device_data(dq), device_data(dk), device_data(dv), device_data(row_d),
                                     device_data(saved_queries.get()), device_data(k), device_data(v),
                                     device_data(saved_out.get()), device_data(lse), device_data(grad), s, rows);
          // S = (Q/√d) Kᵀ: dQ = dS K/√d.
          kernels.affine(on.index(), device_data(dq), device_data(dq), dq.numel(), scale, T(0));
          return autograd::Grads<T>{dq, dk, dv};
        });
  return out;
}

/// The sizes, mask and dropout of one call, checked.
template <typename T>
FusedAttention<T> plan_fused_attention(const Tensor<T>& queries, const Tensor<T>& keys, const Tensor<T>& values,
                                       const AttentionMask<T>& mask, double dropout, Generator& gen,
                                       index_t num_keys = -1) {
  const Shape &q = queries.shape(), &k = keys.shape();
  FusedAttention<T> a;
  const bool four_d = q.rank() == 4;
  a.batch = q[0];
  a.heads = four_d ? q[1] : 1;
  a.kv_heads = four_d ? k[1] : 1;
  a.group = a.heads / a.kv_heads;
  a.num_queries = q[-2];
  a.key_capacity = k[-2];
  a.num_keys = num_keys < 0 ? k[-2] : num_keys;
  a.d = q[-1];
  a.value_dim = values.shape()[-1];
  a.scale = T(1) / static_cast<T>(std::sqrt(static_cast<double>(a.d)));
  Shape scores =
      four_d ? Shape{a.batch, a.heads, a.num_queries, a.num_keys} : Shape{a.batch, a.num_queries, a.num_keys};
  a.limits = row_limits(mask, scores);
  if (mask.allowed().defined()) {
    a.allowed_rows = mask_rows(mask.allowed().shape(), scores, "the boolean mask");
    a.allowed = mask.allowed().data();
  }
  if (mask.additive_mask().defined()) {
    a.additive_rows = mask_rows(mask.additive_mask().shape(), scores, "the additive mask");
    a.additive = mask.additive_mask().data();
  }
  if (dropout > 0.0) {
    // One draw per call, as dropout() makes; each row's seed as dropout() derives it
    // from the row's coordinates (b, [h,] q) in the weights.
    a.dropout = true;
    a.threshold = dropout_threshold(dropout);
    a.keep_scale = dropout < 1.0 ? static_cast<T>(1.0 / (1.0 - dropout)) : T(0);
    const std::uint64_t key = dropout_mix(gen.next_u64());
    a.row_seeds.reserve(static_cast<std::size_t>(a.batch * a.heads * a.num_queries));
    for (index_t b = 0; b < a.batch; ++b) {
      const std::uint64_t batch_key = dropout_rekey(key, b);
      for (index_t h = 0; h < a.heads; ++h) {
        const std::uint64_t head_key = four_d ? dropout_rekey(batch_key, h) : batch_key;
        for (index_t i = 0; i < a.num_queries; ++i) a.row_seeds.push_back(dropout_row_seed(dropout_rekey(head_key, i)));
      }
    }
  }
  return a;
}

/// scaled_dot_product_attention's output over the first num_keys (> 0) steps of keys and
/// values (batch, kv_heads, capacity, d): a KVCache with room to grow, read in place.
/// Inference only: no dropout, nothing recorded for autograd.
template <typename T>
Tensor<T> attend_to_prefix(const Tensor<T>& queries, const Tensor<T>& keys, const Tensor<T>& values, index_t num_keys,
                           const AttentionMask<T>& mask) {
  check_attention_inputs(queries, keys, values, "attend_to_prefix", true, true);
  HEED_CHECK(num_keys > 0 && num_keys <= keys.shape()[-2] && !mask.uniform_when_fully_masked(), ValueError,
             "attend_to_prefix: num_keys = ", num_keys, " outside (0, ", keys.shape()[-2], "]");
  Generator unused(0);
  const FusedAttention<T> a = plan_fused_attention(queries, keys, values, mask, 0.0, unused, num_keys);
  const NoGradGuard no_grad;
  return fused_attention_forward(a, queries * a.scale, keys, values, false).first;
}

}  // namespace detail

/// softmax(Q Kᵀ/√d, mask) V with dropout p on the weights, in memory linear in the
/// sequence length; see the top of this file.
template <typename T>
Tensor<T> scaled_dot_product_attention(const Tensor<T>& queries, const Tensor<T>& keys, const Tensor<T>& values,
                                       const detail::NonDeduced<AttentionMask<T>>& mask = {}, double dropout = 0.0,
                                       Generator& gen = default_generator()) {
  detail::check_defined(queries, "scaled_dot_product_attention", "queries");
  detail::check_defined(keys, "scaled_dot_product_attention", "keys");
  detail::check_defined(values, "scaled_dot_product_attention", "values");
  detail::check_floating<T>("scaled_dot_product_attention");
  detail::check_attention_inputs(queries, keys, values, "scaled_dot_product_attention", true, true);
  HEED_CHECK(dropout >= 0.0 && dropout <= 1.0, ValueError,
             "scaled_dot_product_attention: dropout probability must be in [0, 1], got ", dropout);
  const Shape& q = queries.shape();
  const index_t num_keys = keys.shape()[-2];
  const bool empty = q[-2] == 0 || num_keys == 0 || q[-1] == 0 || q[0] == 0;
  if (!queries.is_cpu() && !empty && !mask.uniform_when_fully_masked() &&
      supports(queries.device(), Capability::fused_attention))
    return detail::device_fused_attention(queries, keys, values, mask, dropout, gen);
  if (!queries.is_cpu() || q[-2] == 0 || num_keys == 0 || q[-1] == 0 || q[0] == 0 || mask.uniform_when_fully_masked()) {
    // Nothing to tile: the classic path gives the zeros of the right shape. d2l's
    // uniform rows are the classic path's too, and a device's (above).
    Tensor<T> k = keys, v = values;
    if (q.rank() == 4 && keys.shape()[1] != q[1] && q[1] > 0) {  // query head h reads kv head h / (heads / kv_heads)
      const index_t group = q[1] / keys.shape()[1];
      std::vector<std::int64_t> kv_head(static_cast<std::size_t>(q[1]));
      for (index_t h = 0; h < q[1]; ++h) kv_head[static_cast<std::size_t>(h)] = h / group;
      const IndexTensor index = IndexTensor(kv_head, Shape{q[1]}).to(keys.device());
      k = index_select(keys, 1, index);
      v = index_select(values, 1, index);
    }
    const T scale = q[-1] > 0 ? T(1) / static_cast<T>(std::sqrt(static_cast<double>(q[-1]))) : T(1);
    Tensor<T> weights = masked_softmax(matmul(queries * scale, k, false, true), mask);
    return matmul(heed::dropout(weights, dropout, dropout > 0.0, gen), v);
  }
  auto plan = std::make_shared<detail::FusedAttention<T>>(
      detail::plan_fused_attention(queries, keys, values, mask, dropout, gen));
  const detail::FusedAttention<T>& a = *plan;
  Tensor<T> scaled_queries, out, lse;
  {
    const NoGradGuard no_grad;           // the node recorded below differentiates the whole op
    scaled_queries = queries * a.scale;  // as the classic path scales them
  }
  const bool differentiable = autograd::needs_grad(queries, keys, values);
  std::tie(out, lse) = detail::fused_attention_forward(a, scaled_queries, keys, values, differentiable);

  if (differentiable)
    autograd::record(
        out, "ScaledDotProductAttentionBackward", {queries, keys, values},
        [plan, mask = AttentionMask<T>(mask),  // keeps alive the mask tensors plan points into
         saved_queries = autograd::save(scaled_queries), saved_keys = autograd::save(keys),
         saved_values = autograd::save(values), saved_out = autograd::save(out), lse](const Tensor<T>& grad) {
          (void)mask;
          return detail::fused_attention_backward(*plan, saved_queries.get(), saved_keys.get(), saved_values.get(),
                                                  saved_out.get(), lse, grad);
        });
  return out;
}

}  // namespace heed

#include "heed/detail/header_end.hpp"
