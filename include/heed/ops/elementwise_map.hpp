// heed/ops/elementwise_map.hpp — the loops heed's element-wise ops are made of
// (heed/ops/elementwise.hpp): same-shape and broadcast maps, the arithmetic of two
// tensors on the CPU or a device, a tensor and a scalar, and a differentiable unary op
// from its forward expression and its backward.
#pragma once

#include "heed/detail/header_begin.hpp"

#include <cmath>
#include <limits>

#include "heed/autograd/node.hpp"
#include "heed/core/factory.hpp"
#include "heed/detail/parallel.hpp"
#include "heed/detail/rules.hpp"
#include "heed/ops/broadcast.hpp"
#include "heed/ops/device.hpp"

namespace heed {
namespace detail {

/// out[i] = f(xs[i]...) for same-shape tensors, as one Eigen expression per chunk.
template <typename R, typename F, typename T, typename... Ts>
Tensor<R> zip_map(F&& f, const Tensor<T>& first, const Tensor<Ts>&... rest) {
  Tensor<R> out = make_tensor<R>(first.shape());
  R* o = out.data();
  parallel_for(first.numel(), kParallelGrain, [&](index_t begin, index_t end) {
    const index_t n = end - begin;
    VecMap<R>(o + begin, n) = f(ConstVecMap<T>(first.data() + begin, n), ConstVecMap<Ts>(rest.data() + begin, n)...);
  });
  return out;
}

/// out = f(a, b) with a and b broadcast to a common shape. f gets Eigen array
/// expressions of one run each (a constant where that operand is broadcast).
template <typename R, typename T, typename F>
Tensor<R> broadcast_map(const Tensor<T>& a, const Tensor<T>& b, const char* op, F&& f) {
  if (a.shape() == b.shape()) return zip_map<R>(f, a, b);
  const Shape shape = broadcast_shapes(a.shape(), b.shape(), op);
  Tensor<R> out = make_tensor<R>(shape);
  const auto out_strides = shape.strides();
  const auto a_strides = broadcast_strides(a.shape(), shape), b_strides = broadcast_strides(b.shape(), shape);
  StridedLoop<3> loop;
  // `d < Shape::kMaxRank` is always true; it tells GCC 12 at -O3 -march=native so, which
  // otherwise warns (-Warray-bounds) of reads past the rank-6 arrays.
  for (int d = 0; d < shape.rank() && d < Shape::kMaxRank; ++d)
    loop.add_dim(shape[d], {out_strides[d], a_strides[d], b_strides[d]});
  loop.coalesce();
  using Constant = Eigen::Array<T, Eigen::Dynamic, 1>;
  R* o = out.data();
  const T* pa = a.data();
  const T* pb = b.data();
  // After coalescing, the innermost stride of out is 1 and of a and b is 1 or 0.
  loop.for_each_run([&](const std::array<index_t, 3>& off, index_t n, const std::array<index_t, 3>& st) {
    VecMap<R> dst(o + off[0], n);
    if (st[1] != 0 && st[2] != 0)
      dst = f(ConstVecMap<T>(pa + off[1], n), ConstVecMap<T>(pb + off[2], n));
    else if (st[1] != 0)
      dst = f(ConstVecMap<T>(pa + off[1], n), Constant::Constant(n, pb[off[2]]));
    else if (st[2] != 0)
      dst = f(Constant::Constant(n, pa[off[1]]), ConstVecMap<T>(pb + off[2], n));
    else
      dst = f(Constant::Constant(n, pa[off[1]]), Constant::Constant(n, pb[off[2]]));
  });
  return out;
}

/// a op b with broadcasting, on the operands' device: f on the CPU, `op`'s kernel on
/// a CUDA device.
template <typename T, typename F>
Tensor<T> arithmetic(const Tensor<T>& a, const Tensor<T>& b, const char* name, BinaryOp op, F&& f) {
  if (on_device(name, a, b)) {
    const Shape shape = a.shape() == b.shape() ? a.shape() : broadcast_shapes(a.shape(), b.shape(), name);
    Tensor<T> out = make_tensor<T>(shape, a.device());
    kernels_for(a, name).binary(a.device().index(), op, device_data(out), device_data(a),
                                broadcast_view(a.shape(), shape), device_data(b), broadcast_view(b.shape(), shape));
    return out;
  }
  return broadcast_map<T>(a, b, name, std::forward<F>(f));
}

/// alpha · x + beta, on x's device: f(x's elements) on the CPU.
template <typename T, typename F>
Tensor<T> scalar_map(const Tensor<T>& x, T alpha, T beta, F&& f) {
  if (!x.is_cpu()) {
    Tensor<T> out = make_tensor<T>(x.shape(), x.device());
    kernels_for(x, "scalar arithmetic")
        .affine(x.device().index(), device_data(out), device_data(x), x.numel(), alpha, beta);
    return out;
  }
  return zip_map<T>(std::forward<F>(f), x);
}

template <typename T>
void check_floating(const char* op) {
  static_assert(std::is_floating_point_v<T>, "this heed op needs a floating-point tensor");
  (void)op;
}

}  // namespace detail

namespace detail {

/// What a unary op's backward reads besides the incoming gradient: its input x or its
/// result y. Only that one is kept alive for backward (ReLU keeps y, as PyTorch does,
/// which the next layer holds anyway).
enum class BackwardReads { input, output };

/// Sets the n results of exp at v that are below the smallest normal number to 0, as
/// exp(−inf) is. Eigen's vectorised exp returns one subnormal constant (5.6e-309 in
/// double, 2.9e-39 in float) for every argument below about −709 (−87 in float), −inf
/// included, and its scalar tail returns 0, so without this exp(−inf) would be a
/// subnormal or 0 depending on the element's position and the ISA, and a −inf softmax
/// score would weigh 0 or not (0 · inf in backward: NaN against ±inf). A plain loop,
/// which compilers vectorise.
template <typename T>
void flush_exp_underflow(T* v, index_t n) {
  for (index_t j = 0; j < n; ++j) v[j] = v[j] < std::numeric_limits<T>::min() ? T(0) : v[j];
}

/// What a unary op does to its CPU result after the forward expression: nothing.
struct NoFinish {
  template <typename T>
  void operator()(T*, index_t) const {}
};

/// Defines a differentiable unary op: forward is an Eigen expression of x, finish
/// post-processes the CPU result in place, backward maps (g, x or y) to dx.
template <typename T, typename Forward, typename Backward, typename Finish = NoFinish>
Tensor<T> unary_op(const Tensor<T>& x, const char* name, UnaryOp code, BackwardReads reads, Forward forward,
                   Backward backward, Finish finish = {}) {
  check_floating<T>(name);
  const bool on_cpu = x.is_cpu();
  Tensor<T> out;
  if (on_cpu) {
    out = zip_map<T>(forward, x);
    finish(out.data(), out.numel());
  } else {
    out = make_tensor<T>(x.shape(), x.device());
    kernels_for(x, name).unary(x.device().index(), code, device_data(out), device_data(x), x.numel());
  }
  if (autograd::needs_grad(x))
    autograd::record(
        out, name, {x},
        [on_cpu, code, backward, saved = autograd::save(reads == BackwardReads::input ? x : out)](const Tensor<T>& g) {
          const Tensor<T>& s = saved.get();
          if (on_cpu) return autograd::Grads<T>{zip_map<T>(backward, g, s)};
          Tensor<T> dx = make_tensor<T>(g.shape(), g.device());
          kernels_for(g, "unary backward")
              .unary_backward(g.device().index(), code, device_data(dx), device_data(g), device_data(s), g.numel());
          return autograd::Grads<T>{dx};
        });
  return out;
}

}  // namespace detail

}  // namespace heed

#include "heed/detail/header_end.hpp"
