// heed/ops/attention_gru.hpp — the loop of d2l's Bahdanau decoder (10.4) as one op: at
// every step, additive attention over the encoder outputs, queried by the last GRU
// layer's state, then a stack of GRU layers whose first one reads context ⊕ embedding.
//
//   embedded:       (num_steps, batch, embed_size)
//   state:          (num_layers, batch, H)        each layer's state before the first step
//   values:         (batch, num_keys, value_size) the encoder outputs
//   projected_keys: (batch, num_keys, A)          W_k(keys), once per sequence
//   valid_lens:     (batch), or undefined: every key visible
//   weights: W_q (A, H) and w_v (1, A), additive attention's, without bias; per layer l
//            weight_ih (3H, in_l), weight_hh (3H, H), bias_ih and bias_hh (3H), where
//            in_0 = value_size + embed_size and in_l = H above
//   attention_gru(...).outputs: (num_steps, batch, H), the last layer's state after each step
//                     .state:   (num_layers, batch, H), each layer's state after the last step
//                     .attention_weights: (num_steps, batch, num_keys), before dropout,
//                                cut from the graph; undefined unless asked for
//
// Why one op: at d2l's sizes (batch 64, 32 hidden units, 10 keys) a step of the decoder
// was some twenty graph nodes of a few thousand multiply-adds each, and each weight's
// gradient was formed and added up step by step. Here backward runs through time inside
// the node and forms each weight's gradient with one product over all steps, as
// gru_layer does for W_hh. Forward computes what the ops it replaces computed (linear,
// tanh, masked_softmax, dropout, bmm, cat, gru_layer), in the same order, and draws the
// same dropout masks from the same generators; results agree with theirs to rounding
// (its products read the weights transposed once, see StepWeight).
#pragma once

#include "heed/detail/header_begin.hpp"

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "heed/core/generator.hpp"
#include "heed/ops/dropout.hpp"
#include "heed/ops/gru.hpp"
#include "heed/ops/masked_softmax.hpp"
#include "heed/ops/shape.hpp"

namespace heed {

template <typename T>
struct AttentionGruWeights {
  Tensor<T> W_q, w_v;  // NOLINT(readability-identifier-naming): d2l's parameter names
  std::vector<Tensor<T>> weight_ih, weight_hh, bias_ih, bias_hh;  // one per layer
};

struct AttentionGruOptions {
  double attention_dropout = 0.0;  // on the attention weights, when attention_training
  bool attention_training = false;
  Generator* attention_generator = nullptr;  // default_generator() when null
  double dropout = 0.0;                      // on each layer's output but the last, when training
  bool training = false;
  bool keep_attention_weights = false;
};

template <typename T>
struct AttentionGruOutput {
  Tensor<T> outputs;            // (num_steps, batch, H)
  Tensor<T> state;              // (num_layers, batch, H)
  Tensor<T> attention_weights;  // (num_steps, batch, num_keys), or undefined
};

namespace detail {

/// A dropout as heed::dropout draws it: one key per call from `gen`, the mask a hash of
/// the key and each element's coordinates in `shape`.
struct DropoutDraw {
  bool active = false;
  double p = 0.0;
  std::uint32_t threshold = 0;

  DropoutDraw(double probability, bool training) : active(training && probability > 0.0), p(probability) {
    HEED_CHECK(probability >= 0.0 && probability <= 1.0, ValueError,
               "attention_gru: dropout probability must be in [0, 1], got ", probability);
    if (active) threshold = dropout_threshold(probability);
  }
  template <typename T>
  T scale() const {
    return dropout_scale<T>(p);
  }
  template <typename T>
  void apply(T* out, std::uint8_t* kept, const T* in, const Shape& shape, Generator& gen) const {
    dropout_rows(out, kept, in, shape, dropout_mix(gen.next_u64()), threshold, scale<T>());
  }
};

/// Each GRU layer's inputs and states at every step, as forward writes them and
/// backward reads them.
template <typename T>
struct GruStackSteps {
  index_t BH = 0, x0_step = 0;         // B · H, and B · in_0
  bool dropped = false;                // dropout between layers is on
  Tensor<T> x0;                        // layer 0's inputs, context ⊕ embedding (S, B, in_0)
  std::vector<Tensor<T>> x_above, hs;  // dropout(h of the layer below) where dropped; states; (S, B, H)

  /// Layer l's input at every step, (S, B, in_l) in a row.
  const T* inputs(std::size_t l) const { return l == 0 ? x0.data() : (dropped ? x_above[l] : hs[l - 1]).data(); }
  const T* input(std::size_t l, index_t t) const { return inputs(l) + t * (l == 0 ? x0_step : BH); }
  /// Layer l's state before step t; `initial` is the (L, B, H) state before the first.
  const T* previous(const T* initial, std::size_t l, index_t t) const {
    return t == 0 ? initial + static_cast<index_t>(l) * BH : hs[l].data() + (t - 1) * BH;
  }
};

/// The previous states of one layer at every step, side by side: state, then its
/// outputs but the last (num_steps, batch, H).
template <typename T>
Tensor<T> previous_states(const T* first, const T* outputs, index_t S, index_t BH) {
  Tensor<T> h_prev = make_tensor<T>(Shape{S, BH});
  std::copy(first, first + BH, h_prev.data());
  std::copy(outputs, outputs + (S - 1) * BH, h_prev.data() + BH);
  return h_prev;
}

/// The backward of one query's additive attention over its K keys, given d loss / d
/// context (V): accumulates into dvalue (K, V) and dkey (K, A); writes d scores (K) and
/// d(W_q q) (A). `kept` is null without dropout; dpre is scratch (K, A).
template <typename T>
void additive_attention_row_backward(const T* dcontext, const T* weight, const T* kept_weight, const std::uint8_t* kept,
                                     T scale, const T* value, const T* feature, const T* w_v, index_t K, index_t V,
                                     index_t A, T* dvalue, T* dkey, T* dscore, T* dquery, T* dpre) {
  using Matrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  using Array = Eigen::Array<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  using Vector = Eigen::Matrix<T, Eigen::Dynamic, 1>;
  using RowVector = Eigen::Matrix<T, 1, Eigen::Dynamic>;
  const Eigen::Map<const Vector> dc(dcontext, V);
  Eigen::Map<Vector> ds(dscore, K);
  // context = Σ_k kept_weight_k value_k
  ds.noalias() = Eigen::Map<const Matrix>(value, K, V) * dc;
  Eigen::Map<Matrix>(dvalue, K, V).noalias() += Eigen::Map<const Vector>(kept_weight, K) * dc.transpose();
  if (kept)
    for (index_t k = 0; k < K; ++k) ds[k] *= kept[k] ? scale : T(0);
  // softmax: ds = y ⊙ (dy − Σ dy ⊙ y); masked keys have y = 0.
  const Eigen::Map<const Vector> y(weight, K);
  const T inner = ds.dot(y);
  ds = (y.array() * (ds.array() - inner)).matrix();
  // scores = tanh(features_pre) w_v
  Eigen::Map<Array> d(dpre, K, A);
  d.matrix().noalias() = ds * Eigen::Map<const RowVector>(w_v, A);
  d *= T(1) - Eigen::Map<const Array>(feature, K, A).square();
  Eigen::Map<Array>(dkey, K, A) += d;
  Eigen::Map<RowVector>(dquery, A) = d.matrix().colwise().sum();
}

}  // namespace detail

template <typename T>
AttentionGruOutput<T> attention_gru(const Tensor<T>& embedded, const Tensor<T>& state, const Tensor<T>& values,
                                    const Tensor<T>& projected_keys, const IndexTensor& valid_lens,
                                    const AttentionGruWeights<T>& weights, const AttentionGruOptions& options = {}) {
  detail::check_defined(embedded, "attention_gru", "embedded");
  detail::check_defined(state, "attention_gru", "state");
  detail::check_defined(values, "attention_gru", "values");
  detail::check_defined(projected_keys, "attention_gru", "projected_keys");
  detail::check_floating<T>("attention_gru");
  const auto layers = weights.weight_ih.size();
  HEED_CHECK(layers > 0 && weights.weight_hh.size() == layers && weights.bias_ih.size() == layers &&
                 weights.bias_hh.size() == layers,
             ValueError, "attention_gru: every layer needs weight_ih, weight_hh, bias_ih and bias_hh, got ",
             weights.weight_ih.size(), ", ", weights.weight_hh.size(), ", ", weights.bias_ih.size(), " and ",
             weights.bias_hh.size());
  HEED_CHECK(embedded.dim() == 3 && embedded.shape()[0] > 0 && state.dim() == 3 && values.dim() == 3 &&
                 projected_keys.dim() == 3,
             ShapeError,
             "attention_gru: expected embedded (num_steps >= 1, batch, embed_size), state (num_layers, batch, H), "
             "values (batch, num_keys, value_size) and projected_keys (batch, num_keys, A), got ",
             to_string(embedded.shape()), ", ", to_string(state.shape()), ", ", to_string(values.shape()), " and ",
             to_string(projected_keys.shape()));
  const index_t S = embedded.shape()[0], B = embedded.shape()[1], E = embedded.shape()[2];
  const auto L = static_cast<index_t>(layers);
  const index_t H = state.shape()[2], K = values.shape()[1], V = values.shape()[2], A = projected_keys.shape()[2];
  HEED_CHECK(state.shape() == (Shape{L, B, H}) && values.shape()[0] == B && projected_keys.shape()[0] == B &&
                 projected_keys.shape()[1] == K && H > 0 && K > 0,
             ShapeError, "attention_gru: state must be (num_layers = ", L, ", batch = ", B,
             ", H), values (batch, num_keys >= 1, value_size) and projected_keys (batch, num_keys, A); got state ",
             to_string(state.shape()), ", values ", to_string(values.shape()), ", projected_keys ",
             to_string(projected_keys.shape()));
  HEED_CHECK(weights.W_q.shape() == (Shape{A, H}) && weights.w_v.shape() == (Shape{1, A}), ShapeError,
             "attention_gru: W_q must be (A, H) = (", A, ", ", H, ") and w_v (1, A) = (1, ", A, "), got ",
             to_string(weights.W_q.shape()), " and ", to_string(weights.w_v.shape()));
  for (std::size_t l = 0; l < layers; ++l) {
    const index_t in = l == 0 ? V + E : H;
    HEED_CHECK(weights.weight_ih[l].shape() == (Shape{3 * H, in}) &&
                   weights.weight_hh[l].shape() == (Shape{3 * H, H}) && weights.bias_ih[l].shape() == Shape{3 * H} &&
                   weights.bias_hh[l].shape() == Shape{3 * H},
               ShapeError, "attention_gru: layer ", l, " must have weight_ih (", 3 * H, ", ", in, "), weight_hh (",
               3 * H, ", ", H, ") and biases (", 3 * H, "), got ", to_string(weights.weight_ih[l].shape()), ", ",
               to_string(weights.weight_hh[l].shape()), ", ", to_string(weights.bias_ih[l].shape()), " and ",
               to_string(weights.bias_hh[l].shape()));
  }
  std::vector<Tensor<T>> inputs{embedded, state, values, projected_keys, weights.W_q, weights.w_v};
  for (std::size_t l = 0; l < layers; ++l)
    for (const auto* w : {&weights.weight_ih, &weights.weight_hh, &weights.bias_ih, &weights.bias_hh})
      inputs.push_back((*w)[l]);
  for (const Tensor<T>& t : inputs)
    HEED_CHECK(t.is_cpu(), DeviceError, "attention_gru: runs on the CPU; got a tensor of shape ", to_string(t.shape()),
               " on ", to_string(t.device()));
  // Valid lengths checked and clamped as masked_softmax does, one per row of (B, 1, K).
  const std::vector<index_t> limits = detail::row_limits(AttentionMask<T>(valid_lens), Shape{B, 1, K});
  const detail::DropoutDraw attention_drop(options.attention_dropout, options.attention_training);
  const detail::DropoutDraw layer_drop(options.dropout, options.training);
  Generator& attention_gen = options.attention_generator ? *options.attention_generator : default_generator();

  bool records = false;
  for (const Tensor<T>& t : inputs) records = records || autograd::needs_grad(t);
  using detail::make_tensor;
  const index_t in0 = V + E, BH = B * H;
  // Rows 0 .. S−1: the last layer's state after each step; S .. S+L−1: each layer's last.
  Tensor<T> out = make_tensor<T>(Shape{S + L, B, H});
  // What backward reads, per step: each layer's input, gates and state, the attention
  // features tanh(W_q q + W_k k), its weights before and after dropout, the masks.
  detail::GruStackSteps<T> steps;
  steps.BH = BH, steps.x0_step = B * in0, steps.dropped = layer_drop.active;
  steps.x0 = make_tensor<T>(Shape{S, B, in0});
  steps.x_above.resize(layers), steps.hs.resize(layers);
  std::vector<Tensor<T>> gates(layers);
  for (std::size_t l = 0; l < layers; ++l) {
    gates[l] = make_tensor<T>(Shape{S, B, 4 * H});
    // The last layer's states are out's first rows (a handle without out's graph node,
    // which backward keeps).
    steps.hs[l] = l + 1 == layers ? out.detach() : make_tensor<T>(Shape{S, B, H});
    if (l > 0 && layer_drop.active) steps.x_above[l] = make_tensor<T>(Shape{S, B, H});
  }
  Tensor<std::uint8_t> layer_kept =
      layer_drop.active && L > 1 ? make_tensor<std::uint8_t>(Shape{L - 1, S, B, H}) : Tensor<std::uint8_t>();
  Tensor<T> features = make_tensor<T>(Shape{S, B, K, A});
  Tensor<T> attention = make_tensor<T>(Shape{S, B, K});
  Tensor<T> dropped = attention_drop.active ? make_tensor<T>(Shape{S, B, K}) : attention;
  Tensor<std::uint8_t> attention_kept =
      attention_drop.active ? make_tensor<std::uint8_t>(Shape{S, B, K}) : Tensor<std::uint8_t>();
  Tensor<T> query_proj = make_tensor<T>(Shape{B, A}), scores = make_tensor<T>(Shape{B, K});
  Tensor<T> gi = make_tensor<T>(Shape{B, 3 * H}), gh = make_tensor<T>(Shape{B, 3 * H});

  // Each weight read in place (inside a PackedWeightsGuard) or transposed once for all steps.
  const detail::StepWeight<T> step_q(weights.W_q, records), step_v(weights.w_v, records);
  std::vector<detail::StepWeight<T>> step_ih, step_hh;
  for (std::size_t l = 0; l < layers; ++l) {
    step_ih.emplace_back(weights.weight_ih[l], records);
    step_hh.emplace_back(weights.weight_hh[l], records);
  }
  const Tensor<T> no_bias;
  const T* keys = projected_keys.data();

  for (index_t t = 0; t < S; ++t) {
    // scores = w_vᵀ tanh(W_q q + W_k k), as linear, tanh and linear compute them.
    detail::affine_rows(steps.previous(state.data(), layers - 1, t), B, weights.W_q, no_bias, step_q,
                        query_proj.data());
    T* feature = features.data() + t * B * K * A;
    using RowArray = Eigen::Array<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
    for (index_t b = 0; b < B; ++b)
      Eigen::Map<RowArray>(feature + b * K * A, K, A) =
          Eigen::Map<const RowArray>(keys + b * K * A, K, A).rowwise() +
          Eigen::Map<const Eigen::Array<T, 1, Eigen::Dynamic>>(query_proj.data() + b * A, A);
    detail::parallel_for(B * K * A, detail::kParallelGrain, [&](index_t begin, index_t end) {
      detail::VecMap<T> f(feature + begin, end - begin);
      f = f.tanh();
    });
    detail::affine_rows(feature, B * K, weights.w_v, no_bias, step_v, scores.data());
    T* weight = attention.data() + t * B * K;
    for (index_t b = 0; b < B; ++b) {
      const index_t limit = limits.empty() ? K : limits[static_cast<std::size_t>(b)];
      detail::VecMap<T> row(weight + b * K, K);
      row.tail(K - limit).setZero();
      detail::softmax_prefix(detail::ConstVecMap<T>(scores.data() + b * K, limit), row.head(limit));
    }
    if (attention_drop.active)
      attention_drop.apply(dropped.data() + t * B * K, attention_kept.data() + t * B * K, weight, Shape{B, 1, K},
                           attention_gen);
    // x0 = context ⊕ embedding: bmm's per-row products, then cat.
    T* x = steps.x0.data() + t * B * in0;
    {
      const detail::SerialGemmScope serial(true);
      detail::parallel_for(B, (index_t(1) << 18) / std::max<index_t>(K * V, 1) + 1, [&](index_t begin, index_t end) {
        for (index_t b = begin; b < end; ++b) {
          detail::gemm_in_scope(dropped.data() + (t * B + b) * K, false, values.data() + b * K * V, false, x + b * in0,
                                1, V, K);
          std::copy_n(embedded.data() + (t * B + b) * E, E, x + b * in0 + V);
        }
      });
    }
    for (std::size_t l = 0; l < layers; ++l) {
      detail::affine_rows(steps.input(l, t), B, weights.weight_ih[l], weights.bias_ih[l], step_ih[l], gi.data());
      detail::affine_rows(steps.previous(state.data(), l, t), B, weights.weight_hh[l], weights.bias_hh[l], step_hh[l],
                          gh.data());
      T* h = steps.hs[l].data() + t * BH;
      detail::gru_cell_forward(gi.data(), gh.data(), steps.previous(state.data(), l, t),
                               gates[l].data() + t * B * 4 * H, h, B, H);
      if (l + 1 < layers && layer_drop.active)
        layer_drop.apply(steps.x_above[l + 1].data() + t * BH,
                         layer_kept.data() + (static_cast<index_t>(l) * S + t) * BH, h, Shape{1, B, H},
                         default_generator());
    }
  }
  for (std::size_t l = 0; l < layers; ++l)
    std::copy_n(steps.hs[l].data() + (S - 1) * BH, BH, out.data() + (S + static_cast<index_t>(l)) * BH);

  AttentionGruOutput<T> result;
  if (options.keep_attention_weights) result.attention_weights = attention.clone();
  if (records) {
    std::vector<bool> need;
    for (const Tensor<T>& t : inputs) need.push_back(t.requires_grad());
    std::vector<autograd::SavedTensor<T>> saved_ih, saved_hh;
    for (std::size_t l = 0; l < layers; ++l) {
      saved_ih.push_back(autograd::save(weights.weight_ih[l]));
      saved_hh.push_back(autograd::save(weights.weight_hh[l]));
    }
    autograd::record(
        out, "AttentionGruBackward", inputs,
        [=, saved_state = autograd::save(state), saved_values = autograd::save(values),
         saved_W_q = autograd::save(weights.W_q), saved_w_v = autograd::save(weights.w_v),
         saved_ih = std::move(saved_ih), saved_hh = std::move(saved_hh)](const Tensor<T>& g) {
          // g: (S + L, B, H), the gradient of every step's output and of each layer's last state
          const T* state0 = saved_state.get().data();
          const T* value = saved_values.get().data();
          const T* W_q = saved_W_q.get().data();
          const T* w_v = saved_w_v.get().data();
          // dh: (L, B, H), d loss / d each layer's state at the step being undone.
          Tensor<T> dh = make_tensor<T>(Shape{L, B, H});
          std::copy_n(g.data() + S * BH, L * BH, dh.data());
          std::vector<Tensor<T>> dgi(layers), dgh(layers);  // d(x W_ihᵀ + b_ih), d(h W_hhᵀ + b_hh)
          for (std::size_t l = 0; l < layers; ++l) {
            dgi[l] = make_tensor<T>(Shape{S, B, 3 * H});
            dgh[l] = make_tensor<T>(Shape{S, B, 3 * H});
          }
          Tensor<T> dembedded = make_tensor<T>(Shape{S, B, E});
          Tensor<T> dquery_proj = make_tensor<T>(Shape{S, B, A});  // d(W_q q)
          Tensor<T> dscores = make_tensor<T>(Shape{S, B, K});
          Tensor<T> dkeys = zeros<T>({B, K, A}), dvalues = zeros<T>({B, K, V});
          Tensor<T> dx = make_tensor<T>(Shape{B, std::max(in0, H)}), dh_direct = make_tensor<T>(Shape{B, H});
          const T attention_scale = attention_drop.scale<T>(), layer_scale = layer_drop.scale<T>();
          using Vec = Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>>;
          using ConstVec = Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>>;
          for (index_t t = S - 1; t >= 0; --t) {
            Vec(dh.data() + (L - 1) * BH, BH) += ConstVec(g.data() + t * BH, BH);
            for (auto l = layers; l-- > 0;) {
              const auto li = static_cast<index_t>(l);
              const index_t in = l == 0 ? in0 : H;
              T* dh_l = dh.data() + li * BH;
              T* dgi_t = dgi[l].data() + t * B * 3 * H;
              T* dgh_t = dgh[l].data() + t * B * 3 * H;
              detail::gru_cell_backward(gates[l].data() + t * B * 4 * H, steps.previous(state0, l, t), dh_l, dgi_t,
                                        dgh_t, dh_direct.data(), B, H);
              // d h_{t−1} = dh ⊙ z + dgh W_hh;  d x_t = dgi W_ih
              detail::gemm(dgh_t, false, saved_hh[l].get().data(), false, dh_l, B, H, 3 * H);
              Vec(dh_l, BH) += ConstVec(dh_direct.data(), BH);
              detail::gemm(dgi_t, false, saved_ih[l].get().data(), false, dx.data(), B, in, 3 * H);
              if (l > 0) {  // x_t = dropout(h_t of the layer below)
                T* below = dh.data() + (li - 1) * BH;
                if (layer_drop.active) {
                  const std::uint8_t* kept = layer_kept.data() + ((li - 1) * S + t) * BH;
                  const T* dxs = dx.data();
                  for (index_t i = 0; i < BH; ++i) below[i] += dxs[i] * (kept[i] ? layer_scale : T(0));
                } else {
                  Vec(below, BH) += ConstVec(dx.data(), BH);
                }
              }
            }
            // x0_t = context ⊕ embedding; context = dropout(weights) · values.
            {
              const T* dxs = dx.data();
              const T *weight = attention.data(), *kept_weight = dropped.data(), *feature = features.data();
              const std::uint8_t* kept = attention_drop.active ? attention_kept.data() : nullptr;
              T *demb = dembedded.data(), *dvalue = dvalues.data(), *dkey = dkeys.data(), *ds = dscores.data(),
                *dq = dquery_proj.data();
              detail::parallel_for(
                  B, detail::kParallelGrain / std::max<index_t>(K * (A + V), 1) + 1, [&](index_t begin, index_t end) {
                    std::vector<T> dpre(static_cast<std::size_t>(K * A));
                    for (index_t b = begin; b < end; ++b) {
                      const index_t row = t * B + b;
                      std::copy_n(dxs + b * in0 + V, E, demb + row * E);
                      detail::additive_attention_row_backward(
                          dxs + b * in0, weight + row * K, kept_weight + row * K, kept ? kept + row * K : nullptr,
                          attention_scale, value + b * K * V, feature + row * K * A, w_v, K, V, A, dvalue + b * K * V,
                          dkey + b * K * A, ds + row * K, dq + row * A, dpre.data());
                    }
                  });
            }
            // The query was the last layer's state before this step.
            detail::gemm(dquery_proj.data() + t * B * A, false, W_q, false, dx.data(), B, H, A);
            Vec(dh.data() + (L - 1) * BH, BH) += ConstVec(dx.data(), BH);
          }

          autograd::Grads<T> grads(need.size());
          if (need[0]) grads[0] = dembedded;
          if (need[1]) grads[1] = dh;
          if (need[2]) grads[2] = dvalues;
          if (need[3]) grads[3] = dkeys;
          const auto weight_grad = [&](const T* d, index_t n, const T* x, index_t in) {  // Σ_rows dᵀ x
            Tensor<T> grad = make_tensor<T>(Shape{n, in});
            detail::gemm(d, true, x, false, grad.data(), n, in, S * B);
            return grad;
          };
          const auto bias_grad = [&](const Tensor<T>& d, index_t n) {
            Tensor<T> grad = make_tensor<T>(Shape{n});
            detail::sum_rows(d.data(), S * B, n, grad.data());
            return grad;
          };
          const Tensor<T> last_previous =
              detail::previous_states(state0 + (L - 1) * BH, steps.hs[layers - 1].data(), S, BH);  // every query
          if (need[4]) grads[4] = weight_grad(dquery_proj.data(), A, last_previous.data(), H);
          if (need[5]) {
            grads[5] = make_tensor<T>(Shape{1, A});
            detail::gemm(dscores.data(), false, features.data(), false, grads[5].data(), 1, A, S * B * K);
          }
          for (std::size_t l = 0; l < layers; ++l) {
            const std::size_t at = 6 + 4 * l;
            const index_t in = l == 0 ? in0 : H;
            if (need[at]) grads[at] = weight_grad(dgi[l].data(), 3 * H, steps.inputs(l), in);
            if (need[at + 1])
              grads[at + 1] = weight_grad(
                  dgh[l].data(), 3 * H,
                  detail::previous_states(state0 + static_cast<index_t>(l) * BH, steps.hs[l].data(), S, BH).data(), H);
            if (need[at + 2]) grads[at + 2] = bias_grad(dgi[l], 3 * H);
            if (need[at + 3]) grads[at + 3] = bias_grad(dgh[l], 3 * H);
          }
          return grads;
        });
  }
  result.outputs = narrow(out, 0, 0, S);
  result.state = narrow(out, 0, S, L);
  return result;
}

}  // namespace heed

#include "heed/detail/header_end.hpp"
