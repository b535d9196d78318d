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
#include <memory>

#include "heed/ops/broadcast.hpp"
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

/// A weight that x·Wᵀ products read at every step of one call: read in place inside a
/// PackedWeightsGuard, else transposed once, since OpenBLAS's small kernels compute x·W
/// faster than x·Wᵀ (32×96×32: 5,330 cycles against 7,900; 32×96×64: 9,700 against
/// 14,500; the copy costs one product's worth at most).
template <typename T>
struct StepWeight {
  std::shared_ptr<const PackedWeight<T>> packed;
  Tensor<T> transposed;  // (in_features, out_features)

  StepWeight(const Tensor<T>& weight, bool records) : packed(packed_weight_for(weight, records)) {
    if (packed) return;
    const index_t n = weight.shape()[0], k = weight.shape()[1];
    transposed = make_tensor<T>(Shape{k, n});
    transposed.matrix(k, n) = weight.matrix(n, k).transpose();
  }
};

/// out (rows, n) = x (rows, k) · weightᵀ + bias (if defined), as linear() computes it:
/// x W_ihᵀ + b_ih, h W_hhᵀ + b_hh.
template <typename T>
void affine_rows(const T* x, index_t rows, const Tensor<T>& weight, const Tensor<T>& bias, const StepWeight<T>& step,
                 T* out) {
  const index_t n = weight.shape()[0], k = weight.shape()[1];
  if (step.packed) {
    step.packed->apply(x, rows, bias.defined() ? bias.data() : nullptr, out);
    return;
  }
  gemm(x, false, step.transposed.data(), false, out, rows, n, k, bias.defined() ? bias.data() : nullptr);
}

/// One GRU step for B rows: from gi = x W_ihᵀ + b_ih and gh = h W_hhᵀ + b_hh (B, 3H
/// each), the gates r | z | n | W_hn h + b_hn (B, 4H), what backward reads, and h' (B, H).
template <typename T>
void gru_cell_forward(const T* gi, const T* gh, const T* h_prev, T* gates, T* h_next, index_t B, index_t H) {
  const Eigen::OuterStride<> s3(3 * H), s4(4 * H), s1(H);
  GateMap<T> r(gates, B, H, s4), z(gates + H, B, H, s4), n(gates + 2 * H, B, H, s4), hn(gates + 3 * H, B, H, s4);
  r = sigmoid_of<T>(ConstGateMap<T>(gi, B, H, s3) + ConstGateMap<T>(gh, B, H, s3));
  z = sigmoid_of<T>(ConstGateMap<T>(gi + H, B, H, s3) + ConstGateMap<T>(gh + H, B, H, s3));
  hn = ConstGateMap<T>(gh + 2 * H, B, H, s3);
  n = (ConstGateMap<T>(gi + 2 * H, B, H, s3) + r * hn).tanh();
  GateMap<T>(h_next, B, H, s1) = n + z * (ConstGateMap<T>(h_prev, B, H, s1) - n);
}

/// gru_cell_forward's backward, given dh = d loss / d h': the gradients of the gates'
/// pre-activations, dgi (B, 3H) and dgh = d(W_hh h + b_hh) (B, 3H), and the part of
/// d loss / d h that does not go through W_hh, dh ⊙ z (B, H).
template <typename T>
void gru_cell_backward(const T* gates, const T* h_prev, const T* dh, T* dgi, T* dgh, T* dh_direct, index_t B,
                       index_t H) {
  const Eigen::OuterStride<> s3(3 * H), s4(4 * H), s1(H);
  ConstGateMap<T> r(gates, B, H, s4), z(gates + H, B, H, s4), n(gates + 2 * H, B, H, s4), hn(gates + 3 * H, B, H, s4),
      dh_t(dh, B, H, s1);
  GateMap<T> dr_pre(dgi, B, H, s3), dz_pre(dgi + H, B, H, s3), dn_pre(dgi + 2 * H, B, H, s3);
  // forward: h' = n + z ⊙ (h − n)
  dn_pre = dh_t * (T(1) - z) * (T(1) - n.square());
  dz_pre = dh_t * (ConstGateMap<T>(h_prev, B, H, s1) - n) * z * (T(1) - z);
  // forward: n = tanh(gi_n + r ⊙ hn)
  dr_pre = dn_pre * hn * r * (T(1) - r);
  GateMap<T>(dgh, B, H, s3) = dr_pre;
  GateMap<T>(dgh + H, B, H, s3) = dz_pre;
  GateMap<T>(dgh + 2 * H, B, H, s3) = dn_pre * r;
  GateMap<T>(dh_direct, B, H, s1) = dh_t * z;
}

/// gru_layer on a device: each step's h W_hhᵀ + b_hh by the device's GEMM, then the cell's
/// kernel; backward through time the same way, with dW_hh one product over all steps at
/// the end, as on the CPU. The checks are gru_layer's.
template <typename T>
Tensor<T> gru_layer_on_device(Device device, const Tensor<T>& gi, const Tensor<T>& h0, const Tensor<T>& weight_hh,
                              const Tensor<T>& bias_hh) {
  const index_t S = gi.shape()[0], B = gi.shape()[1], H = weight_hh.shape()[1];
  DeviceKernels<T>& kernels = kernels_for<T>(device, "gru_layer");
  Tensor<T> out = make_tensor<T>(Shape{S, B, H}, device);
  Tensor<T> gates = make_tensor<T>(Shape{S, B, 4 * H}, device);  // r | z | n | W_hn h + b_hn per step and row
  if (B > 0) {
    Tensor<T> gh = make_tensor<T>(Shape{B, 3 * H}, device);
    for (index_t t = 0; t < S; ++t) {
      const T* h_prev = t == 0 ? device_data(h0) : device_data(out) + (t - 1) * B * H;
      gemm_on(device, h_prev, false, device_data(weight_hh), true, device_data(gh), B, 3 * H, H, device_data(bias_hh));
      kernels.gru_cell_forward(device.index(), device_data(gates) + t * B * 4 * H, device_data(out) + t * B * H,
                               device_data(gi) + t * B * 3 * H, device_data(gh), h_prev, B, H);
    }
  }
  if (!autograd::needs_grad(gi, h0, weight_hh, bias_hh)) return out;
  autograd::record(
      out, "GruLayerBackward", {gi, h0, weight_hh, bias_hh},
      [device, S, B, H, gates, saved_out = autograd::save(out), saved_h0 = autograd::save(h0),
       saved_w = autograd::save(weight_hh),
       need = std::array<bool, 4>{gi.requires_grad(), h0.requires_grad(), weight_hh.requires_grad(),
                                  bias_hh.requires_grad()}](const Tensor<T>& g) {
        DeviceKernels<T>& on = kernels_for<T>(device, "gru_layer backward");
        const T* outputs = device_data(saved_out.get());
        const T* initial = device_data(saved_h0.get());
        Tensor<T> dgi = make_tensor<T>(Shape{S, B, 3 * H}, device);
        Tensor<T> dgh = make_tensor<T>(Shape{S, B, 3 * H}, device);
        Tensor<T> dh = make_tensor<T>(Shape{B, H}, device);
        Tensor<T> dh_direct = make_tensor<T>(Shape{B, H}, device);
        device_fill(device, device_data(dh), B * H, T(0));
        for (index_t t = S - 1; t >= 0 && B > 0; --t) {
          const T* h_prev = t == 0 ? initial : outputs + (t - 1) * B * H;
          T* dgh_t = device_data(dgh) + t * B * 3 * H;
          on.axpy(device.index(), device_data(dh), device_data(g) + t * B * H, B * H, T(1));
          on.gru_cell_backward(device.index(), device_data(dgi) + t * B * 3 * H, dgh_t, device_data(dh_direct),
                               device_data(gates) + t * B * 4 * H, h_prev, device_data(dh), B, H);
          // dh_prev = dh ⊙ z + dgh W_hh
          gemm_on(device, dgh_t, false, device_data(saved_w.get()), false, device_data(dh), B, H, 3 * H);
          on.axpy(device.index(), device_data(dh), device_data(dh_direct), B * H, T(1));
        }
        autograd::Grads<T> grads(4);
        if (need[0]) grads[0] = dgi;
        if (need[1]) grads[1] = dh;
        if (need[2]) {
          // dW_hh = Σ_t dgh_tᵀ h_{t−1}: the previous states of all steps side by side.
          Tensor<T> h_prev = make_tensor<T>(Shape{S, B, H}, device);
          device_copy(device, device_data(h_prev), initial, static_cast<std::size_t>(B * H) * sizeof(T));
          device_copy(device, device_data(h_prev) + B * H, outputs,
                      static_cast<std::size_t>((S - 1) * B * H) * sizeof(T));
          grads[2] = make_tensor<T>(Shape{3 * H, H}, device);
          if (S * B > 0)
            gemm_on(device, device_data(dgh), true, device_data(h_prev), false, device_data(grads[2]), 3 * H, H, S * B);
          else
            device_fill(device, device_data(grads[2]), 3 * H * H, T(0));
        }
        if (need[3]) grads[3] = sum_to(dgh, Shape{3 * H});
        return grads;
      });
  return out;
}

}  // namespace detail

template <typename T>
Tensor<T> gru_layer(const Tensor<T>& gi, const Tensor<T>& h0, const Tensor<T>& weight_hh, const Tensor<T>& bias_hh) {
  detail::check_defined(gi, "gru_layer", "gi");
  detail::check_defined(h0, "gru_layer", "h0");
  detail::check_defined(weight_hh, "gru_layer", "weight_hh");
  detail::check_defined(bias_hh, "gru_layer", "bias_hh");
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
  if (detail::on_device("gru_layer", gi, h0, weight_hh, bias_hh))
    return detail::gru_layer_on_device(gi.device(), gi, h0, weight_hh, bias_hh);

  Tensor<T> out = detail::make_tensor<T>(Shape{S, B, H});
  // Per step and row: r | z | n | W_hn h + b_hn, what backward reads.
  Tensor<T> gates = detail::make_tensor<T>(Shape{S, B, 4 * H});
  Tensor<T> gh = detail::make_tensor<T>(Shape{B, 3 * H});
  const bool records = autograd::needs_grad(gi, h0, weight_hh, bias_hh);
  const detail::StepWeight<T> step_weight(weight_hh, records);
  for (index_t t = 0; t < S; ++t) {
    const T* h_prev = t == 0 ? h0.data() : out.data() + (t - 1) * B * H;
    detail::affine_rows(h_prev, B, weight_hh, bias_hh, step_weight, gh.data());
    detail::gru_cell_forward(gi.data() + t * B * 3 * H, gh.data(), h_prev, gates.data() + t * B * 4 * H,
                             out.data() + t * B * H, B, H);
  }

  if (records)
    autograd::record(
        out, "GruLayerBackward", {gi, h0, weight_hh, bias_hh},
        [S, B, H, gates, saved_out = autograd::save(out), saved_h0 = autograd::save(h0),
         saved_w = autograd::save(weight_hh),
         need = std::array<bool, 4>{gi.requires_grad(), h0.requires_grad(), weight_hh.requires_grad(),
                                    bias_hh.requires_grad()}](const Tensor<T>& g) {
          const Tensor<T>& outputs = saved_out.get();
          const Tensor<T>& initial = saved_h0.get();
          const Tensor<T>& w = saved_w.get();
          Tensor<T> dgi = detail::make_tensor<T>(Shape{S, B, 3 * H});  // d(gi) = d(pre-activations) of r, z, n
          Tensor<T> dgh = detail::make_tensor<T>(Shape{S, B, 3 * H});  // d(W_hh h + b_hh)
          Tensor<T> dh = detail::make_tensor<T>(Shape{B, H});
          dh.array().setZero();
          Eigen::Array<T, Eigen::Dynamic, 1> dh_direct(B * H);
          for (index_t t = S - 1; t >= 0; --t) {
            const T* h_prev = t == 0 ? initial.data() : outputs.data() + (t - 1) * B * H;
            Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>> dh_t(dh.data(), B * H);
            dh_t += Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>>(g.data() + t * B * H, B * H);
            T* dgh_t = dgh.data() + t * B * 3 * H;
            detail::gru_cell_backward(gates.data() + t * B * 4 * H, h_prev, dh.data(), dgi.data() + t * B * 3 * H,
                                      dgh_t, dh_direct.data(), B, H);
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
            std::copy(initial.data(), initial.data() + B * H, h_prev.data());
            std::copy(outputs.data(), outputs.data() + (S - 1) * B * H, h_prev.data() + B * H);
            grads[2] = detail::make_tensor<T>(Shape{3 * H, H});
            detail::gemm(dgh.data(), true, h_prev.data(), false, grads[2].data(), 3 * H, H, S * B);
          }
          if (need[3]) {
            grads[3] = detail::make_tensor<T>(Shape{3 * H});
            detail::sum_rows(dgh.data(), S * B, 3 * H, grads[3].data());
          }
          return grads;
        });
  return out;
}

}  // namespace heed

#include "heed/detail/header_end.hpp"
