// heed/ops/gru.hpp — one GRU layer over a whole sequence, fused: the inner loop of
// torch.nn.GRU.
//
//   gi:        (num_steps, batch, 3H)  the input projections x W_ihᵀ + b_ih of every step,
//                                      computed by the caller in one GEMM
//   h0:        (batch, H)              the state before the first step
//   weight_hh: (3H, H)   bias_hh: (3H)
//   gru_layer(gi, h0, weight_hh, bias_hh): (num_steps, batch, H), the state after each step
//
// PyTorch's equations, with its gate order r, z, n in the 3H rows:
//   r = σ(gi_r + W_hr h + b_hr)        z = σ(gi_z + W_hz h + b_hz)
//   n = tanh(gi_n + r ⊙ (W_hn h + b_hn))
//   h' = (1 − z) ⊙ n + z ⊙ h
// The recurrence is one graph node, not a dozen per step: at d2l's sizes (batch 64,
// 32 hidden units) the cost of a step is bookkeeping, not arithmetic. Backward runs
// through time inside the node from the gates it saved (r, z, n and W_hn h + b_hn),
// and forms dW_hh with one GEMM over all steps at the end.
#pragma once

#include "heed/detail/header_begin.hpp"

#include <algorithm>
#include <array>

#include "heed/ops/matmul.hpp"
#include "heed/ops/packed_gemm.hpp"

namespace heed {
namespace detail {

template <typename T>
using GateArray = Eigen::Array<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
/// A (batch, H) block of a (batch, stride) row-major buffer: one gate of every row.
template <typename T>
using GateMap = Eigen::Map<GateArray<T>, 0, Eigen::OuterStride<>>;
template <typename T>
using ConstGateMap = Eigen::Map<const GateArray<T>, 0, Eigen::OuterStride<>>;

template <typename T, typename Expr>
auto sigmoid_of(const Expr& x) {
  return (T(0.5) * x).tanh() * T(0.5) + T(0.5);  // as heed::sigmoid: no overflow for large |x|
}

}  // namespace detail

template <typename T>
Tensor<T> gru_layer(const Tensor<T>& gi, const Tensor<T>& h0, const Tensor<T>& weight_hh, const Tensor<T>& bias_hh) {
  detail::check_floating<T>("gru_layer");
  HEED_CHECK(weight_hh.dim() == 2 && weight_hh.shape()[0] == 3 * weight_hh.shape()[1] && weight_hh.shape()[1] > 0,
             ShapeError, "gru_layer: weight_hh must be (3 * num_hiddens, num_hiddens), got ",
             to_string(weight_hh.shape()));
  const index_t H = weight_hh.shape()[1];
  HEED_CHECK(bias_hh.shape() == Shape{3 * H}, ShapeError, "gru_layer: bias_hh must be (", 3 * H, "), got ",
             to_string(bias_hh.shape()));
  HEED_CHECK(gi.dim() == 3 && gi.shape()[0] > 0 && gi.shape()[2] == 3 * H, ShapeError,
             "gru_layer: gi must be (num_steps >= 1, batch, ", 3 * H, "), got ", to_string(gi.shape()));
  const index_t S = gi.shape()[0], B = gi.shape()[1];
  HEED_CHECK(h0.shape() == (Shape{B, H}), ShapeError, "gru_layer: h0 must be (batch, num_hiddens) = (", B, ", ", H,
             "), got ", to_string(h0.shape()));

  using GateMap = detail::GateMap<T>;
  using ConstGateMap = detail::ConstGateMap<T>;
  const Eigen::OuterStride<> s3(3 * H), s4(4 * H), s1(H);
  Tensor<T> out = detail::make_tensor<T>(Shape{S, B, H});
  // Per step and row: r | z | n | W_hn h + b_hn, what backward reads.
  Tensor<T> gates = detail::make_tensor<T>(Shape{S, B, 4 * H});
  Tensor<T> gh = detail::make_tensor<T>(Shape{B, 3 * H});
  const bool records = autograd::needs_grad(gi, h0, weight_hh, bias_hh);
  const auto packed = detail::packed_weight_for(weight_hh, records);  // inside a PackedWeightsGuard
  for (index_t t = 0; t < S; ++t) {
    const T* h_prev = t == 0 ? h0.data() : out.data() + (t - 1) * B * H;
    if (packed) {
      packed->apply(h_prev, B, bias_hh.data(), gh.data());
    } else {
      detail::gemm(h_prev, false, weight_hh.data(), true, gh.data(), B, 3 * H, H);
      gh.matrix(B, 3 * H).rowwise() += bias_hh.matrix(1, 3 * H).row(0);
    }
    const T* gi_t = gi.data() + t * B * 3 * H;
    T* g = gates.data() + t * B * 4 * H;
    GateMap r(g, B, H, s4), z(g + H, B, H, s4), n(g + 2 * H, B, H, s4), hn(g + 3 * H, B, H, s4);
    r = detail::sigmoid_of<T>(ConstGateMap(gi_t, B, H, s3) + ConstGateMap(gh.data(), B, H, s3));
    z = detail::sigmoid_of<T>(ConstGateMap(gi_t + H, B, H, s3) + ConstGateMap(gh.data() + H, B, H, s3));
    hn = ConstGateMap(gh.data() + 2 * H, B, H, s3);
    n = (ConstGateMap(gi_t + 2 * H, B, H, s3) + r * hn).tanh();
    GateMap(out.data() + t * B * H, B, H, s1) = n + z * (ConstGateMap(h_prev, B, H, s1) - n);
  }

  if (records)
    autograd::record(
        out, "GruLayerBackward", {gi, h0, weight_hh, bias_hh},
        [S, B, H, gates, saved_out = autograd::save(out), saved_h0 = autograd::save(h0),
         saved_w = autograd::save(weight_hh),
         need = std::array<bool, 4>{gi.requires_grad(), h0.requires_grad(), weight_hh.requires_grad(),
                                    bias_hh.requires_grad()}](const Tensor<T>& g) {
          const Eigen::OuterStride<> s3(3 * H), s4(4 * H), s1(H);
          const Tensor<T>& outputs = saved_out.get();
          const Tensor<T>& h0 = saved_h0.get();
          const Tensor<T>& w = saved_w.get();
          Tensor<T> dgi = detail::make_tensor<T>(Shape{S, B, 3 * H});  // d(gi) = d(pre-activations) of r, z, n
          Tensor<T> dgh = detail::make_tensor<T>(Shape{S, B, 3 * H});  // d(W_hh h + b_hh)
          Tensor<T> dh = detail::make_tensor<T>(Shape{B, H});
          dh.array().setZero();
          Eigen::Array<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor> dh_direct(B, H);
          for (index_t t = S - 1; t >= 0; --t) {
            const T* h_prev = t == 0 ? h0.data() : outputs.data() + (t - 1) * B * H;
            const T* gt = gates.data() + t * B * 4 * H;
            ConstGateMap r(gt, B, H, s4), z(gt + H, B, H, s4), n(gt + 2 * H, B, H, s4), hn(gt + 3 * H, B, H, s4);
            GateMap dh_t(dh.data(), B, H, s1);
            dh_t += ConstGateMap(g.data() + t * B * H, B, H, s1);
            // forward: h' = n + z ⊙ (h − n)
            T* dgi_t = dgi.data() + t * B * 3 * H;
            T* dgh_t = dgh.data() + t * B * 3 * H;
            GateMap dr_pre(dgi_t, B, H, s3), dz_pre(dgi_t + H, B, H, s3), dn_pre(dgi_t + 2 * H, B, H, s3);
            dn_pre = dh_t * (T(1) - z) * (T(1) - n.square());
            dz_pre = dh_t * (ConstGateMap(h_prev, B, H, s1) - n) * z * (T(1) - z);
            // forward: n = tanh(gi_n + r ⊙ hn)
            dr_pre = dn_pre * hn * r * (T(1) - r);
            GateMap(dgh_t, B, H, s3) = dr_pre;
            GateMap(dgh_t + H, B, H, s3) = dz_pre;
            GateMap(dgh_t + 2 * H, B, H, s3) = dn_pre * r;
            dh_direct = dh_t * z;
            // dh_prev = dh ⊙ z + dgh W_hh
            detail::gemm(dgh_t, false, w.data(), false, dh.data(), B, H, 3 * H);
            dh_t += dh_direct;
          }
          autograd::Grads<T> grads(4);
          if (need[0]) grads[0] = dgi;
          if (need[1]) grads[1] = dh;
          if (need[2]) {
            // dW_hh = Σ_t dgh_tᵀ h_{t−1}: the previous states of all steps side by side.
            Tensor<T> h_prev = detail::make_tensor<T>(Shape{S, B, H});
            std::copy(h0.data(), h0.data() + B * H, h_prev.data());
            std::copy(outputs.data(), outputs.data() + (S - 1) * B * H, h_prev.data() + B * H);
            grads[2] = detail::make_tensor<T>(Shape{3 * H, H});
            detail::gemm(dgh.data(), true, h_prev.data(), false, grads[2].data(), 3 * H, H, S * B);
          }
          if (need[3]) {
            grads[3] = detail::make_tensor<T>(Shape{3 * H});
            grads[3].matrix(1, 3 * H) = dgh.matrix(S * B, 3 * H).colwise().sum();
          }
          return grads;
        });
  return out;
}

}  // namespace heed

#include "heed/detail/header_end.hpp"
