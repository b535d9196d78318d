// heed/ops/elementwise.hpp — element-by-element math with NumPy broadcasting.
//
//   auto y = heed::tanh(x * w + b);        // b of shape (C) broadcasts over (B, C)
//   auto mask = x > 0.5f;                  // Tensor<bool>
//   auto z = heed::where(mask, x, heed::zeros_like(x));
//   auto both = mask & (x < 0.9f);         // logical_and; also | ^ ~ on masks
//
// Binary ops broadcast like PyTorch (shapes aligned at the right, each size equal or
// 1); their backward sums the gradient back to each input's shape. Comparisons and
// logical ops give Tensor<bool> and are not differentiable. Large same-shape work is
// split across OpenMP threads when the user's build enables OpenMP.
#pragma once

#include "heed/detail/header_begin.hpp"

#include <cmath>
#include <limits>
#include <optional>
#include <string>

#include "heed/autograd/node.hpp"
#include "heed/core/factory.hpp"
#include "heed/detail/parallel.hpp"
#include "heed/detail/rules.hpp"
#include "heed/ops/broadcast.hpp"
#include "heed/ops/device.hpp"
#include "heed/ops/elementwise_map.hpp"

namespace heed {

// ---- binary arithmetic ------------------------------------------------------------------

template <typename T>
Tensor<T> add(const Tensor<T>& a, const Tensor<T>& b) {
  detail::check_defined(a, "add", "a");
  detail::check_defined(b, "add", "b");
  Tensor<T> out = detail::arithmetic(a, b, "add", BinaryOp::add, [](const auto& x, const auto& y) { return x + y; });
  if (autograd::needs_grad(a, b))
    autograd::record(out, "AddBackward", {a, b}, [sa = a.shape(), sb = b.shape()](const Tensor<T>& g) {
      return autograd::Grads<T>{detail::sum_to(g, sa), detail::sum_to(g, sb)};
    });
  return out;
}

template <typename T>
Tensor<T> sub(const Tensor<T>& a, const Tensor<T>& b) {
  detail::check_defined(a, "sub", "a");
  detail::check_defined(b, "sub", "b");
  Tensor<T> out = detail::arithmetic(a, b, "sub", BinaryOp::sub, [](const auto& x, const auto& y) { return x - y; });
  if (autograd::needs_grad(a, b))
    autograd::record(out, "SubBackward", {a, b}, [sa = a.shape(), sb = b.shape()](const Tensor<T>& g) {
      return autograd::Grads<T>{detail::sum_to(g, sa), neg(detail::sum_to(g, sb))};
    });
  return out;
}

template <typename T>
Tensor<T> mul(const Tensor<T>& a, const Tensor<T>& b) {
  detail::check_defined(a, "mul", "a");
  detail::check_defined(b, "mul", "b");
  Tensor<T> out = detail::arithmetic(a, b, "mul", BinaryOp::mul, [](const auto& x, const auto& y) { return x * y; });
  if (autograd::needs_grad(a, b)) {
    // out = a · b:  da = g · b,  db = g · a
    const bool need_a = a.requires_grad(), need_b = b.requires_grad();
    autograd::SavedTensor<T> saved_a, saved_b;
    if (need_b) saved_a = autograd::save(a);
    if (need_a) saved_b = autograd::save(b);
    autograd::record(out, "MulBackward", {a, b},
                     [need_a, need_b, saved_a, saved_b, sa = a.shape(), sb = b.shape()](const Tensor<T>& g) {
                       autograd::Grads<T> grads(2);
                       if (need_a) grads[0] = detail::sum_to(mul(g, saved_b.get()), sa);
                       if (need_b) grads[1] = detail::sum_to(mul(g, saved_a.get()), sb);
                       return grads;
                     });
  }
  return out;
}

template <typename T>
Tensor<T> div(const Tensor<T>& a, const Tensor<T>& b) {
  detail::check_defined(a, "div", "a");
  detail::check_defined(b, "div", "b");
  Tensor<T> out = detail::arithmetic(a, b, "div", BinaryOp::div, [](const auto& x, const auto& y) { return x / y; });
  if (autograd::needs_grad(a, b)) {
    // out = a / b:  da = g / b,  db = -g · a / b² = -g · out / b
    const bool need_a = a.requires_grad(), need_b = b.requires_grad();
    autograd::record(out, "DivBackward", {a, b},
                     [need_a, need_b, saved_b = autograd::save(b), saved_out = autograd::save(out), sa = a.shape(),
                      sb = b.shape()](const Tensor<T>& g) {
                       autograd::Grads<T> grads(2);
                       const Tensor<T> g_over_b = div(g, saved_b.get());
                       if (need_a) grads[0] = detail::sum_to(g_over_b, sa);
                       if (need_b) grads[1] = neg(detail::sum_to(mul(g_over_b, saved_out.get()), sb));
                       return grads;
                     });
  }
  return out;
}

/// Elementwise a^b with broadcasting.
template <typename T>
Tensor<T> pow(const Tensor<T>& a, const Tensor<T>& b) {
  detail::check_defined(a, "pow", "a");
  detail::check_defined(b, "pow", "b");
  Tensor<T> out = detail::broadcast_map<T>(a, b, "pow", [](const auto& x, const auto& y) { return x.pow(y); });
  if (autograd::needs_grad(a, b)) {
    // out = a^b:  da = g · b · a^(b-1),  db = g · out · ln a
    const bool need_a = a.requires_grad(), need_b = b.requires_grad();
    autograd::record(out, "PowBackward", {a, b},
                     [need_a, need_b, saved_a = autograd::save(a), saved_b = autograd::save(b),
                      saved_out = autograd::save(out)](const Tensor<T>& g) {
                       const Tensor<T>&x = saved_a.get(), &y = saved_b.get();
                       autograd::Grads<T> grads(2);
                       if (need_a) grads[0] = detail::sum_to(mul(g, mul(y, pow(x, add(y, T(-1))))), x.shape());
                       if (need_b) grads[1] = detail::sum_to(mul(g, mul(saved_out.get(), log(x))), y.shape());
                       return grads;
                     });
  }
  return out;
}

// ---- tensor–scalar arithmetic ------------------------------------------------------------

template <typename T>
Tensor<T> add(const Tensor<T>& x, T s) {
  detail::check_defined(x, "add", "x");
  Tensor<T> out = detail::scalar_map(x, T(1), s, [s](const auto& a) { return a + s; });
  if (autograd::needs_grad(x))
    autograd::record(out, "AddBackward", {x}, [](const Tensor<T>& g) { return autograd::Grads<T>{g}; });
  return out;
}

template <typename T>
Tensor<T> mul(const Tensor<T>& x, T s) {
  detail::check_defined(x, "mul", "x");
  Tensor<T> out = detail::scalar_map(x, s, T(0), [s](const auto& a) { return a * s; });
  if (autograd::needs_grad(x))
    autograd::record(out, "MulBackward", {x}, [s](const Tensor<T>& g) { return autograd::Grads<T>{mul(g, s)}; });
  return out;
}

/// x^p for a scalar exponent.
template <typename T>
Tensor<T> pow(const Tensor<T>& x, T p) {
  detail::check_defined(x, "pow", "x");
  Tensor<T> out = detail::zip_map<T>([p](const auto& a) { return a.pow(p); }, x);
  if (autograd::needs_grad(x))
    autograd::record(out, "PowBackward", {x}, [p, saved = autograd::save(x)](const Tensor<T>& g) {
      // d x^p = p · x^(p-1) dx
      return autograd::Grads<T>{detail::zip_map<T>(
          [p](const auto& gg, const auto& xx) { return gg * p * xx.pow(p - T(1)); }, g, saved.get())};
    });
  return out;
}

// ---- unary ----------------------------------------------------------------------------------

template <typename T>
Tensor<T> neg(const Tensor<T>& x) {
  detail::check_defined(x, "neg", "x");
  Tensor<T> out = detail::scalar_map(x, T(-1), T(0), [](const auto& a) { return -a; });
  if (autograd::needs_grad(x))
    autograd::record(out, "NegBackward", {x}, [](const Tensor<T>& g) { return autograd::Grads<T>{neg(g)}; });
  return out;
}

template <typename T>
Tensor<T> exp(const Tensor<T>& x) {
  detail::check_defined(x, "exp", "x");
  return detail::unary_op(
      x, "ExpBackward", UnaryOp::exp, detail::BackwardReads::output, [](const auto& a) { return a.exp(); },
      [](const auto& g, const auto& y) { return g * y; }, [](T* y, index_t n) { detail::flush_exp_underflow(y, n); });
}

template <typename T>
Tensor<T> log(const Tensor<T>& x) {
  detail::check_defined(x, "log", "x");
  return detail::unary_op(
      x, "LogBackward", UnaryOp::log, detail::BackwardReads::input, [](const auto& a) { return a.log(); },
      [](const auto& g, const auto& x_) { return g / x_; });
}

template <typename T>
Tensor<T> sqrt(const Tensor<T>& x) {
  detail::check_defined(x, "sqrt", "x");
  return detail::unary_op(
      x, "SqrtBackward", UnaryOp::sqrt, detail::BackwardReads::output, [](const auto& a) { return a.sqrt(); },
      [](const auto& g, const auto& y) { return g / (T(2) * y); });
}

template <typename T>
Tensor<T> tanh(const Tensor<T>& x) {
  detail::check_defined(x, "tanh", "x");
  return detail::unary_op(
      x, "TanhBackward", UnaryOp::tanh, detail::BackwardReads::output, [](const auto& a) { return a.tanh(); },
      [](const auto& g, const auto& y) { return g * (T(1) - y.square()); });
}

template <typename T>
Tensor<T> sigmoid(const Tensor<T>& x) {
  detail::check_defined(x, "sigmoid", "x");
  // 1 / (1 + e^-x), written so that neither branch overflows.
  return detail::unary_op(
      x, "SigmoidBackward", UnaryOp::sigmoid, detail::BackwardReads::output,
      [](const auto& a) { return (T(0.5) * a).tanh() * T(0.5) + T(0.5); },
      [](const auto& g, const auto& y) { return g * y * (T(1) - y); });
}

template <typename T>
Tensor<T> relu(const Tensor<T>& x) {
  detail::check_defined(x, "relu", "x");
  return detail::unary_op(
      x, "ReluBackward", UnaryOp::relu, detail::BackwardReads::output, [](const auto& a) { return a.max(T(0)); },
      [](const auto& g, const auto& y) { return (y > T(0)).select(g, T(0)); });
}

/// GELU with the exact Gaussian CDF, PyTorch's default: x · Φ(x), Φ(x) = (1 + erf(x/√2)) / 2.
/// Element by element with the kernels' rule (heed/detail/rules.hpp): erf has no
/// vectorised form, so Eigen would evaluate any expression holding it one element at a time.
template <typename T>
Tensor<T> gelu(const Tensor<T>& x) {
  detail::check_defined(x, "gelu", "x");
  return detail::unary_op(
      x, "GeluBackward", UnaryOp::gelu, detail::BackwardReads::input,
      [](const auto& a) { return a.unaryExpr([](T v) { return detail::gelu_value(v); }); },
      [](const auto& g, const auto& x_) {
        return g.binaryExpr(x_, [](T gv, T xv) { return detail::gelu_grad(gv, xv); });
      });
}

/// SiLU, x · sigmoid(x), as PyTorch's F.silu (MarianMT's "swish"). A vectorised Eigen
/// expression on the CPU (sigmoid through tanh, as sigmoid's); heed/detail/rules.hpp's
/// silu_value and silu_grad on a device.
template <typename T>
Tensor<T> silu(const Tensor<T>& x) {
  detail::check_defined(x, "silu", "x");
  return detail::unary_op(
      x, "SiluBackward", UnaryOp::silu, detail::BackwardReads::input,
      [](const auto& a) { return a * ((T(0.5) * a).tanh() * T(0.5) + T(0.5)); },
      [](const auto& g, const auto& x_) {
        // d/dx x·s(x) = s(x) · (1 + x · (1 − s(x)))
        const auto s = (T(0.5) * x_).tanh() * T(0.5) + T(0.5);
        return g * (s * (T(1) + x_ * (T(1) - s)));
      });
}

/// Softplus as PyTorch's F.softplus with its defaults (beta = 1, threshold = 20):
/// log(1 + e^x), and x itself where x > 20. On a device, heed/detail/rules.hpp's
/// softplus_value and softplus_grad.
template <typename T>
Tensor<T> softplus(const Tensor<T>& x) {
  detail::check_defined(x, "softplus", "x");
  return detail::unary_op(
      x, "SoftplusBackward", UnaryOp::softplus, detail::BackwardReads::input,
      [](const auto& a) { return (a > T(20)).select(a, a.exp().log1p()); },
      [](const auto& g, const auto& x_) {
        // d/dx log(1 + e^x) = e^x / (1 + e^x), 1 where x > 20 (PyTorch's softplus_backward)
        const auto z = x_.exp();
        return (x_ > T(20)).select(g, g * (z / (z + T(1))));
      });
}

template <typename T>
Tensor<T> abs(const Tensor<T>& x) {
  detail::check_defined(x, "abs", "x");
  return detail::unary_op(
      x, "AbsBackward", UnaryOp::abs, detail::BackwardReads::input, [](const auto& a) { return a.abs(); },
      [](const auto& g, const auto& x_) { return g * x_.sign(); });
}

template <typename T>
Tensor<T> sin(const Tensor<T>& x) {
  detail::check_defined(x, "sin", "x");
  return detail::unary_op(
      x, "SinBackward", UnaryOp::sin, detail::BackwardReads::input, [](const auto& a) { return a.sin(); },
      [](const auto& g, const auto& x_) { return g * x_.cos(); });
}

template <typename T>
Tensor<T> cos(const Tensor<T>& x) {
  detail::check_defined(x, "cos", "x");
  return detail::unary_op(
      x, "CosBackward", UnaryOp::cos, detail::BackwardReads::input, [](const auto& a) { return a.cos(); },
      [](const auto& g, const auto& x_) { return -g * x_.sin(); });
}

/// Elements below min set to min and above max to max (to max everywhere when
/// min > max, as torch.clamp); either bound may be std::nullopt. NaN stays NaN. The
/// gradient passes where min ≤ x ≤ max, as PyTorch's.
template <typename T>
Tensor<T> clamp(const Tensor<T>& x, std::optional<double> min, std::optional<double> max = std::nullopt) {
  detail::check_defined(x, "clamp", "x");
  detail::check_floating<T>("clamp");
  HEED_CHECK(min || max, ValueError, "clamp: at least one of min and max must be given");
  HEED_CHECK(!(min && std::isnan(*min)) && !(max && std::isnan(*max)), ValueError, "clamp: a NaN bound (min ",
             min ? std::to_string(*min) : "none", ", max ", max ? std::to_string(*max) : "none", ")");
  const T lo = min ? static_cast<T>(*min) : -std::numeric_limits<T>::infinity();
  const T hi = max ? static_cast<T>(*max) : std::numeric_limits<T>::infinity();
  if (!x.is_cpu()) {
    Tensor<T> out = detail::make_tensor<T>(x.shape(), x.device());
    detail::kernels_for(x, "clamp")
        .clamp(x.device().index(), detail::device_data(out), detail::device_data(x), x.numel(), lo, hi);
    if (autograd::needs_grad(x))
      autograd::record(out, "ClampBackward", {x}, [x = x.detach(), lo, hi](const Tensor<T>& g) {
        Tensor<T> dx = detail::make_tensor<T>(x.shape(), x.device());
        detail::kernels_for(x, "clamp backward")
            .clamp_backward(x.device().index(), detail::device_data(dx), detail::device_data(g), detail::device_data(x),
                            x.numel(), lo, hi);
        return autograd::Grads<T>{dx};
      });
    return out;
  }
  // heed/detail/rules.hpp's clamp_value and clamp_grad, as Eigen expressions.
  Tensor<T> out = detail::zip_map<T>(
      [lo, hi](const auto& a) { return ((a < lo).select(lo, a) > hi).select(hi, (a < lo).select(lo, a)); }, x);
  if (autograd::needs_grad(x))
    autograd::record(out, "ClampBackward", {x}, [x = x.detach(), lo, hi](const Tensor<T>& g) {
      return autograd::Grads<T>{detail::zip_map<T>(
          [lo, hi](const auto& g_, const auto& x_) { return (x_ >= lo && x_ <= hi).select(g_, T(0)); }, g, x)};
    });
  return out;
}

/// A differentiable copy.
template <typename T>
Tensor<T> clone(const Tensor<T>& x) {
  detail::check_defined(x, "clone", "x");
  Tensor<T> out = detail::copy_of(x);
  if (autograd::needs_grad(x))
    autograd::record(out, "CloneBackward", {x}, [](const Tensor<T>& g) { return autograd::Grads<T>{g}; });
  return out;
}

// ---- comparisons (masks) ---------------------------------------------------------------------

namespace detail {

/// A rank-0 tensor holding s on `device`.
template <typename T>
Tensor<T> scalar_on(Device device, T s) {
  if (device.is_cpu()) return Tensor<T>(std::vector<T>{s}, Shape{});
  Tensor<T> out = make_tensor<T>(Shape{}, device);
  device_fill(device, device_data(out), 1, s);
  return out;
}

/// The mask a op b on the operands' device (a CUDA device: its kernels for T), the two
/// broadcast together.
template <typename T>
Tensor<bool> compare_on_device(const Tensor<T>& a, const Tensor<T>& b, const char* name, CompareOp op) {
  const Shape shape = a.shape() == b.shape() ? a.shape() : broadcast_shapes(a.shape(), b.shape(), name);
  Tensor<bool> out = make_tensor<bool>(shape, a.device());
  kernels_for(a, name).compare(a.device().index(), op, device_data(out), device_data(a),
                               broadcast_view(a.shape(), shape), device_data(b), broadcast_view(b.shape(), shape));
  return out;
}

}  // namespace detail

#define HEED_DEFINE_COMPARISON(name, op, code)                                                                      \
  template <typename T>                                                                                             \
  Tensor<bool> name(const Tensor<T>& a, const Tensor<T>& b) {                                                       \
    detail::check_defined(a, #name, "a");                                                                           \
    detail::check_defined(b, #name, "b");                                                                           \
    if (detail::on_device(#name, a, b)) return detail::compare_on_device(a, b, #name, CompareOp::code);             \
    return detail::broadcast_map<bool>(a, b, #name, [](const auto& x, const auto& y) { return x op y; });           \
  }                                                                                                                 \
  template <typename T>                                                                                             \
  Tensor<bool> name(const Tensor<T>& a, T s) {                                                                      \
    detail::check_defined(a, #name, "a");                                                                           \
    if (!a.is_cpu()) return detail::compare_on_device(a, detail::scalar_on(a.device(), s), #name, CompareOp::code); \
    return detail::zip_map<bool>([s](const auto& x) { return x op s; }, a);                                         \
  }
HEED_DEFINE_COMPARISON(eq, ==, eq)
HEED_DEFINE_COMPARISON(ne, !=, ne)
HEED_DEFINE_COMPARISON(lt, <, lt)
HEED_DEFINE_COMPARISON(le, <=, le)
HEED_DEFINE_COMPARISON(gt, >, gt)
HEED_DEFINE_COMPARISON(ge, >=, ge)
#undef HEED_DEFINE_COMPARISON

// ---- logical ops (masks) ---------------------------------------------------------------------

// As torch.logical_*: any element type, nonzero read as true (NaN included), a
// Tensor<bool> out, the two operands broadcast together; not differentiable. On bool
// masks, ~ & | ^ are the same ops, as PyTorch's operators on bool tensors.

/// True where x is zero (false for a bool mask's true).
template <typename T>
Tensor<bool> logical_not(const Tensor<T>& x) {
  detail::check_defined(x, "logical_not", "x");
  if (!x.is_cpu())
    return detail::compare_on_device(x, detail::scalar_on(x.device(), T(0)), "logical_not", CompareOp::eq);
  return detail::zip_map<bool>([](const auto& a) { return a == T(0); }, x);
}

namespace detail {

/// f(p, q) with p, q the masks a != 0 and b != 0, broadcast together; `op` names the caller.
template <typename T, typename F>
Tensor<bool> logical(const Tensor<T>& a, const Tensor<T>& b, const char* op, CompareOp code, F f) {
  check_defined(a, op, "a");
  check_defined(b, op, "b");
  if (on_device(op, a, b)) return compare_on_device(a, b, op, code);
  return broadcast_map<bool>(a, b, op, [f](const auto& x, const auto& y) { return f(x != T(0), y != T(0)); });
}

}  // namespace detail

template <typename T>
Tensor<bool> logical_and(const Tensor<T>& a, const Tensor<T>& b) {
  return detail::logical(a, b, "logical_and", CompareOp::logical_and,
                         [](const auto& p, const auto& q) { return p && q; });
}

template <typename T>
Tensor<bool> logical_or(const Tensor<T>& a, const Tensor<T>& b) {
  return detail::logical(a, b, "logical_or", CompareOp::logical_or,
                         [](const auto& p, const auto& q) { return p || q; });
}

/// True where exactly one of a and b is nonzero.
template <typename T>
Tensor<bool> logical_xor(const Tensor<T>& a, const Tensor<T>& b) {
  return detail::logical(a, b, "logical_xor", CompareOp::logical_xor,
                         [](const auto& p, const auto& q) { return p != q; });
}

/// cond ? a : b elementwise, all three broadcast together. Differentiable in a and b.
template <typename T>
Tensor<T> where(const Tensor<bool>& cond, const Tensor<T>& a, const Tensor<T>& b) {
  detail::check_defined(cond, "where", "cond");
  detail::check_defined(a, "where", "a");
  detail::check_defined(b, "where", "b");
  const Shape shape =
      detail::broadcast_shapes(detail::broadcast_shapes(cond.shape(), a.shape(), "where"), b.shape(), "where");
  Tensor<T> out;
  Tensor<bool> c = cond;  // as broadcast to shape on the CPU, where backward reads it too
  if (detail::on_device("where", cond, a, b)) {
    using detail::broadcast_view;
    using detail::device_data;
    out = detail::make_tensor<T>(shape, a.device());
    detail::kernels_for(a, "where")
        .where(a.device().index(), device_data(out), device_data(cond), broadcast_view(cond.shape(), shape),
               device_data(a), broadcast_view(a.shape(), shape), device_data(b), broadcast_view(b.shape(), shape));
  } else {
    c = detail::broadcast_to(cond, shape);
    out = detail::zip_map<T>([](const auto& m, const auto& x, const auto& y) { return m.select(x, y); }, c,
                             detail::broadcast_to(a, shape), detail::broadcast_to(b, shape));
  }
  if (autograd::needs_grad(a, b))
    autograd::record(out, "WhereBackward", {a, b}, [c, sa = a.shape(), sb = b.shape()](const Tensor<T>& g) {
      const Tensor<T> zero = detail::scalar_on(g.device(), T(0));
      return autograd::Grads<T>{detail::sum_to(where(c, g, zero), sa), detail::sum_to(where(c, zero, g), sb)};
    });
  return out;
}

/// x with `value` wherever mask (broadcast to x's shape) is true.
template <typename T>
Tensor<T> masked_fill(const Tensor<T>& x, const Tensor<bool>& mask, T value) {
  detail::check_defined(x, "masked_fill", "x");
  detail::check_defined(mask, "masked_fill", "mask");
  HEED_CHECK(detail::broadcasts_to(mask.shape(), x.shape()), ShapeError, "masked_fill: mask of shape ",
             to_string(mask.shape()), " does not broadcast to ", to_string(x.shape()));
  return where(mask, detail::scalar_on(x.device(), value), x);
}

// ---- operators --------------------------------------------------------------------------------

// clang-format off
template <typename T> Tensor<T> operator+(const Tensor<T>& a, const Tensor<T>& b) { return add(a, b); }
template <typename T> Tensor<T> operator-(const Tensor<T>& a, const Tensor<T>& b) { return sub(a, b); }
template <typename T> Tensor<T> operator*(const Tensor<T>& a, const Tensor<T>& b) { return mul(a, b); }
template <typename T> Tensor<T> operator/(const Tensor<T>& a, const Tensor<T>& b) { return div(a, b); }
template <typename T> Tensor<T> operator-(const Tensor<T>& x) { return neg(x); }
// clang-format on

// Scalars take the tensor's element type, so `x * 2.0` works on a Tensor<float> too.
// clang-format off
template <typename T> Tensor<T> operator+(const Tensor<T>& x, double s) { return add(x, static_cast<T>(s)); }
template <typename T> Tensor<T> operator+(double s, const Tensor<T>& x) { return add(x, static_cast<T>(s)); }
template <typename T> Tensor<T> operator-(const Tensor<T>& x, double s) { return add(x, static_cast<T>(-s)); }
template <typename T> Tensor<T> operator-(double s, const Tensor<T>& x) { return add(neg(x), static_cast<T>(s)); }
template <typename T> Tensor<T> operator*(const Tensor<T>& x, double s) { return mul(x, static_cast<T>(s)); }
template <typename T> Tensor<T> operator*(double s, const Tensor<T>& x) { return mul(x, static_cast<T>(s)); }
template <typename T> Tensor<T> operator/(const Tensor<T>& x, double s) { return mul(x, static_cast<T>(1.0 / s)); }
template <typename T> Tensor<T> operator/(double s, const Tensor<T>& x) { return mul(pow(x, T(-1)), static_cast<T>(s)); }
// clang-format on

// clang-format off
template <typename T> Tensor<bool> operator==(const Tensor<T>& a, const Tensor<T>& b) { return eq(a, b); }
template <typename T> Tensor<bool> operator!=(const Tensor<T>& a, const Tensor<T>& b) { return ne(a, b); }
template <typename T> Tensor<bool> operator<(const Tensor<T>& a, const Tensor<T>& b) { return lt(a, b); }
template <typename T> Tensor<bool> operator<=(const Tensor<T>& a, const Tensor<T>& b) { return le(a, b); }
template <typename T> Tensor<bool> operator>(const Tensor<T>& a, const Tensor<T>& b) { return gt(a, b); }
template <typename T> Tensor<bool> operator>=(const Tensor<T>& a, const Tensor<T>& b) { return ge(a, b); }
template <typename T> Tensor<bool> operator==(const Tensor<T>& a, double s) { return eq(a, static_cast<T>(s)); }
template <typename T> Tensor<bool> operator!=(const Tensor<T>& a, double s) { return ne(a, static_cast<T>(s)); }
template <typename T> Tensor<bool> operator<(const Tensor<T>& a, double s) { return lt(a, static_cast<T>(s)); }
template <typename T> Tensor<bool> operator<=(const Tensor<T>& a, double s) { return le(a, static_cast<T>(s)); }
template <typename T> Tensor<bool> operator>(const Tensor<T>& a, double s) { return gt(a, static_cast<T>(s)); }
template <typename T> Tensor<bool> operator>=(const Tensor<T>& a, double s) { return ge(a, static_cast<T>(s)); }
// clang-format on

// On masks only: on other element types PyTorch's ~ & | ^ are bitwise, which heed has not.
inline Tensor<bool> operator~(const Tensor<bool>& x) { return logical_not(x); }
inline Tensor<bool> operator&(const Tensor<bool>& a, const Tensor<bool>& b) { return logical_and(a, b); }
inline Tensor<bool> operator|(const Tensor<bool>& a, const Tensor<bool>& b) { return logical_or(a, b); }
inline Tensor<bool> operator^(const Tensor<bool>& a, const Tensor<bool>& b) { return logical_xor(a, b); }

// ---- Tensor methods defined here -----------------------------------------------------------

// clang-format off
template <typename T> Tensor<T> Tensor<T>::neg() const { return heed::neg(*this); }
template <typename T> Tensor<T> Tensor<T>::exp() const { return heed::exp(*this); }
template <typename T> Tensor<T> Tensor<T>::log() const { return heed::log(*this); }
template <typename T> Tensor<T> Tensor<T>::sqrt() const { return heed::sqrt(*this); }
template <typename T> Tensor<T> Tensor<T>::tanh() const { return heed::tanh(*this); }
template <typename T> Tensor<T> Tensor<T>::sigmoid() const { return heed::sigmoid(*this); }
template <typename T> Tensor<T> Tensor<T>::relu() const { return heed::relu(*this); }
template <typename T> Tensor<T> Tensor<T>::gelu() const { return heed::gelu(*this); }
template <typename T> Tensor<T> Tensor<T>::silu() const { return heed::silu(*this); }
template <typename T> Tensor<T> Tensor<T>::softplus() const { return heed::softplus(*this); }
template <typename T> Tensor<T> Tensor<T>::abs() const { return heed::abs(*this); }
template <typename T> Tensor<T> Tensor<T>::sin() const { return heed::sin(*this); }
template <typename T> Tensor<T> Tensor<T>::cos() const { return heed::cos(*this); }
template <typename T> Tensor<T> Tensor<T>::pow(T exponent) const { return heed::pow(*this, exponent); }
template <typename T> Tensor<T> Tensor<T>::pow(const Tensor& exponent) const { return heed::pow(*this, exponent); }
template <typename T> Tensor<T> Tensor<T>::clone() const { return heed::clone(*this); }
template <typename T> Tensor<T> Tensor<T>::clamp(std::optional<double> min, std::optional<double> max) const { return heed::clamp(*this, min, max); }
// clang-format on

namespace detail {
template <typename T>
void check_in_place(const Tensor<T>& x, const char* op) {
  HEED_CHECK(!(autograd::GradMode::is_enabled() && x.requires_grad()), AutogradError, op,
             ": in-place update of a tensor that requires grad; do it under heed::NoGradGuard");
  heed::detail::impl(x).storage->bump_version();
}
}  // namespace detail

template <typename T>
Tensor<T>& Tensor<T>::fill_(T value) {
  detail::check_in_place(*this, "fill_");
  if (!is_cpu()) {
    detail::device_fill(device(), detail::device_data(*this), numel(), value);
    return *this;
  }
  array().setConstant(value);
  return *this;
}

template <typename T>
Tensor<T>& Tensor<T>::copy_(const Tensor& src) {
  detail::check_defined(src, "copy_", "src");
  HEED_CHECK(detail::broadcasts_to(src.shape(), shape()), ShapeError, "copy_: source of shape ", to_string(src.shape()),
             " does not broadcast to ", to_string(shape()));
  detail::check_in_place(*this, "copy_");  // after the shape check: a refused update bumps no version
  if (src.device() != device()) {          // from another device: broadcast there, then copy across
    detail::copy_between_devices(*this, detail::broadcast_to(src, shape()));
    return *this;
  }
  if (!is_cpu()) {
    const Tensor<T> full = detail::broadcast_to(src, shape());
    detail::device_copy(device(), detail::device_data(*this), detail::device_data(full),
                        static_cast<std::size_t>(numel()) * sizeof(T));
    return *this;
  }
  array() = detail::broadcast_to(src, shape()).array();
  return *this;
}

namespace detail {

/// y[0 : n) += alpha · x[0 : n) on the CPU, in parallel ranges: elementwise, so the bits
/// do not depend on the thread count. add_ and backward's gradient sums (add_into).
template <typename T>
void add_scaled_on_host(T* y, const T* x, index_t n, T alpha) {
  parallel_for(n, kParallelGrain, [&](index_t begin, index_t end) {
    VecMap<T>(y + begin, end - begin) += alpha * ConstVecMap<T>(x + begin, end - begin);
  });
}

}  // namespace detail

template <typename T>
Tensor<T>& Tensor<T>::add_(const Tensor& other, T alpha) {
  detail::check_defined(other, "add_", "other");
  HEED_CHECK(detail::broadcasts_to(other.shape(), shape()), ShapeError, "add_: operand of shape ",
             to_string(other.shape()), " does not broadcast to ", to_string(shape()));
  detail::check_in_place(*this, "add_");  // after the shape check: a refused update bumps no version
  if (detail::on_device("add_", *this, other)) {
    detail::kernels_for(*this, "add_")
        .axpy(device().index(), detail::device_data(*this), detail::device_data(detail::broadcast_to(other, shape())),
              numel(), alpha);
    return *this;
  }
  const Tensor full = detail::broadcast_to(other, shape());
  detail::add_scaled_on_host(data(), full.data(), numel(), alpha);
  return *this;
}

template <typename T>
Tensor<T>& Tensor<T>::mul_(T factor) {
  detail::check_in_place(*this, "mul_");
  if (!is_cpu()) {
    detail::kernels_for(*this, "mul_")
        .affine(device().index(), detail::device_data(*this), detail::device_data(*this), numel(), factor, T(0));
    return *this;
  }
  array() *= factor;
  return *this;
}

}  // namespace heed

#include "heed/detail/header_end.hpp"
