// heed/core/tensor.hpp — Tensor<T>: an n-d array (rank 0–6) with reverse-mode autograd.
//
// A Tensor is a handle, as in PyTorch: copying it shares the data and the place in the
// autograd graph; clone() copies the data. Storage is contiguous and row-major;
// reshape() returns a view of the same storage, every other shape op a new tensor.
// Arithmetic runs through Eigen::Map over the storage (see array()).
//
//   heed::Tensor<float> w = heed::randn<float>({3, 1}, gen).requires_grad_();
//   auto loss = (heed::matmul(x, w) - y).pow(2).mean();
//   loss.backward();                 // w.grad() now holds d loss / d w
//
// T is float or double for anything differentiable; Tensor<std::int64_t> holds indices
// (argmax, index_select) and Tensor<bool> masks (comparisons).
//
// Methods that wrap an op (x.sum(1), x.reshape({2, -1}), …) are declared here and
// defined in the op's header under heed/ops/, as Eigen does for its modules;
// heed/heed.hpp brings them all in.
#pragma once

#include "heed/detail/header_begin.hpp"

#include <Eigen/Core>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "heed/core/error.hpp"
#include "heed/core/shape.hpp"
#include "heed/core/storage.hpp"

namespace heed {

template <typename T>
class Tensor;
template <typename T>
struct ValuesIndices;  // heed/ops/reduce.hpp

namespace autograd {
template <typename T>
struct Node;
}  // namespace autograd

namespace detail {

template <typename T>
struct TensorImpl;
struct TensorAccess;

}  // namespace detail

template <typename T>
class Tensor {
  static_assert(std::is_arithmetic_v<T>, "heed::Tensor<T> needs an arithmetic T");

 public:
  using value_type = T;
  using ArrayMap = Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>, Eigen::Aligned64>;
  using ConstArrayMap = Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>, Eigen::Aligned64>;
  using MatrixMap = Eigen::Map<Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>;
  using ConstMatrixMap = Eigen::Map<const Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>;

  /// An undefined tensor (no data): stands for "absent", e.g. no valid_lens.
  Tensor() = default;

  /// A tensor holding `values` (row-major) with the given shape.
  Tensor(const std::vector<T>& values, const Shape& shape);

  /// A tensor of the given shape whose elements are not initialised (torch.empty).
  static Tensor empty(const Shape& shape);

  // ---- shape and data -------------------------------------------------------------
  bool defined() const { return impl_ != nullptr; }
  const Shape& shape() const { return impl().shape; }
  int dim() const { return shape().rank(); }
  /// Size of dim d (negative counts from the end).
  index_t size(int d) const;
  index_t numel() const { return shape().numel(); }
  static constexpr const char* dtype() { return detail::dtype_name<T>(); }

  /// Where the data lives (the CPU unless moved with to(device)).
  Device device() const { return impl().storage->device(); }
  bool is_cuda() const { return device().is_cuda(); }
  bool is_cpu() const { return device().is_cpu(); }

  /// The elements in host memory. A tensor on a CUDA device throws DeviceError: host
  /// code reading it means an op without a CUDA implementation, which heed refuses
  /// rather than copying through the host behind the user's back.
  T* data() { return host_data(); }
  const T* data() const { return host_data(); }

  /// All elements as a 1-D Eigen array (a view; writes go to the tensor's storage).
  ArrayMap array() { return ArrayMap(data(), numel()); }
  ConstArrayMap array() const { return ConstArrayMap(data(), numel()); }
  /// The elements as a rows × cols row-major Eigen matrix view; rows·cols must be numel().
  MatrixMap matrix(index_t rows, index_t cols);
  ConstMatrixMap matrix(index_t rows, index_t cols) const;

  /// Element access by full index: x.at({i, j}). Negative indices count from the end.
  T& at(std::initializer_list<index_t> index) { return data()[offset_of(index)]; }
  const T& at(std::initializer_list<index_t> index) const { return data()[offset_of(index)]; }
  /// The only element of a one-element tensor (copied to the host from a device).
  T item() const;
  /// A copy of all elements, row-major (copied to the host from a device).
  std::vector<T> to_vector() const;

  /// True when both handles refer to the same tensor (not merely equal values).
  bool is_same(const Tensor& other) const { return impl_ == other.impl_; }
  /// True when both tensors view the same storage (a tensor and its reshape).
  bool shares_storage(const Tensor& other) const;

  // ---- autograd -------------------------------------------------------------------
  /// True for a leaf marked with requires_grad_() and for every result computed from one.
  bool requires_grad() const;
  /// Marks a leaf as needing a gradient. Only floating-point leaves can.
  Tensor& requires_grad_(bool requires_grad = true);
  /// True for a tensor not produced by a recorded op.
  bool is_leaf() const;
  /// The gradient accumulated by backward() (undefined before the first backward).
  Tensor grad() const;
  /// Forgets the accumulated gradient (PyTorch's zero_grad(set_to_none=True)).
  void zero_grad();
  /// Name of the op that produced this tensor, empty for a leaf: PyTorch's grad_fn name
  /// without its overload number ("MulBackward" for MulBackward0, "BmmBackward" for a
  /// batched product's BmmBackward0), or heed's own for a fused op ("MaskedSoftmaxBackward").
  std::string grad_fn_name() const;
  /// Back-propagates from this tensor: without an argument it must hold one element;
  /// otherwise `gradient` (same shape) is d loss / d this. Frees the graph unless
  /// retain_graph. Defined in heed/autograd/engine.hpp.
  void backward(const Tensor& gradient = Tensor(), bool retain_graph = false) const;
  /// Same data, cut from the graph.
  Tensor detach() const;
  /// A copy of the data; differentiable (the copy's gradient flows back to this).
  Tensor clone() const;

  // ---- in-place updates (optimisers, initialisers) ---------------------------------
  // They bypass autograd; refused on a tensor that requires grad while grad mode is on
  // (wrap them in NoGradGuard). Defined in heed/ops/elementwise.hpp.
  Tensor& fill_(T value);
  Tensor& zero_() { return fill_(T(0)); }
  Tensor& copy_(const Tensor& src);
  Tensor& add_(const Tensor& other, T alpha = T(1));
  Tensor& sub_(const Tensor& other, T alpha = T(1)) { return add_(other, -alpha); }
  Tensor& mul_(T factor);

  // ---- conversions -------------------------------------------------------------------
  /// Converts the element type (not recorded by autograd), on the tensor's device. A
  /// device tensor converts on the host (copied there and back): rare, and so checked
  /// as on the CPU.
  template <typename U>
  Tensor<U> to() const;
  /// A copy on `device`, or this tensor itself when already there (as in PyTorch);
  /// differentiable: the gradient flows back to this tensor's device. Defined in
  /// heed/ops/device.hpp.
  Tensor to(Device device) const;

  // ---- ops as methods (each defined in its header under heed/ops/) ------------------
  Tensor reshape(const Shape& shape) const;  // one dim may be -1
  Tensor reshape(std::initializer_list<index_t> shape) const;
  Tensor view(std::initializer_list<index_t> shape) const { return reshape(shape); }
  Tensor flatten(int start_dim = 0, int end_dim = -1) const;
  Tensor permute(const std::vector<int>& dims) const;
  Tensor transpose(int dim0, int dim1) const;
  Tensor unsqueeze(int dim) const;
  Tensor squeeze() const;
  Tensor squeeze(int dim) const;
  Tensor narrow(int dim, index_t start, index_t length) const;
  Tensor slice(int dim, index_t start, index_t end, index_t step = 1) const;
  Tensor select(int dim, index_t index) const;
  Tensor index_select(int dim, const Tensor<std::int64_t>& index) const;
  Tensor repeat(const std::vector<index_t>& repeats) const;
  Tensor repeat_interleave(index_t repeats, int dim) const;
  Tensor repeat_interleave(index_t repeats) const;  // of the flattened tensor
  Tensor expand(const Shape& shape) const;
  /// The slice at index along dim 0: PyTorch's x[i].
  Tensor operator[](index_t index) const;
  /// PyTorch's x.t(): a 2-D tensor transposed, a 0-D or 1-D one as it is. (x.T cannot
  /// be spelt in C++, where T is the element type; x.mT() swaps the last two dims.)
  Tensor t() const;
  Tensor mT() const;
  std::vector<Tensor> split(index_t split_size, int dim = 0) const;
  std::vector<Tensor> split(const std::vector<index_t>& split_sizes, int dim = 0) const;
  std::vector<Tensor> chunk(index_t chunks, int dim = 0) const;
  Tensor gather(int dim, const Tensor<std::int64_t>& index) const;
  Tensor scatter_add(int dim, const Tensor<std::int64_t>& index, const Tensor& src) const;
  Tensor masked_select(const Tensor<bool>& mask) const;

  Tensor sum() const;
  Tensor sum(int dim, bool keepdim = false) const;
  Tensor sum(const std::vector<int>& dims, bool keepdim = false) const;
  Tensor mean() const;
  Tensor mean(int dim, bool keepdim = false) const;
  Tensor mean(const std::vector<int>& dims, bool keepdim = false) const;
  Tensor var() const;  // with Bessel's correction (correction = 1), as torch.var
  Tensor var(int dim, bool keepdim = false, double correction = 1.0) const;
  Tensor var(const std::vector<int>& dims, bool keepdim = false, double correction = 1.0) const;
  Tensor std() const;
  Tensor std(int dim, bool keepdim = false, double correction = 1.0) const;
  Tensor std(const std::vector<int>& dims, bool keepdim = false, double correction = 1.0) const;
  Tensor prod() const;
  Tensor prod(int dim, bool keepdim = false) const;
  Tensor max() const;
  Tensor max(int dim, bool keepdim = false) const;
  Tensor min() const;
  Tensor min(int dim, bool keepdim = false) const;
  Tensor<std::int64_t> argmax() const;
  Tensor<std::int64_t> argmax(int dim, bool keepdim = false) const;
  Tensor<std::int64_t> argmin() const;
  Tensor<std::int64_t> argmin(int dim, bool keepdim = false) const;
  ValuesIndices<T> sort(int dim = -1, bool descending = false) const;
  Tensor<std::int64_t> argsort(int dim = -1, bool descending = false) const;
  ValuesIndices<T> topk(index_t k, int dim = -1, bool largest = true) const;

  Tensor neg() const;
  Tensor exp() const;
  Tensor log() const;
  Tensor sqrt() const;
  Tensor tanh() const;
  Tensor sigmoid() const;
  Tensor relu() const;
  Tensor gelu() const;
  Tensor silu() const;
  Tensor softplus() const;
  Tensor abs() const;
  Tensor sin() const;
  Tensor cos() const;
  /// Elements below min set to min, above max to max; either bound may be left out.
  Tensor clamp(std::optional<double> min, std::optional<double> max = std::nullopt) const;
  Tensor clamp_min(double min) const { return clamp(min, std::nullopt); }
  Tensor clamp_max(double max) const { return clamp(std::nullopt, max); }
  Tensor pow(T exponent) const;
  Tensor pow(const Tensor& exponent) const;
  Tensor softmax(int dim) const;
  Tensor log_softmax(int dim) const;
  Tensor matmul(const Tensor& other) const;

  /// How many handles share this tensor (0 when undefined): autograd reuses a gradient
  /// buffer in place only when nothing else can see it.
  long use_count() const { return impl_.use_count(); }

 private:
  friend struct detail::TensorAccess;  // ops and autograd reach the impl through it

  explicit Tensor(std::shared_ptr<detail::TensorImpl<T>> impl) : impl_(std::move(impl)) {}
  detail::TensorImpl<T>& impl() const {
    HEED_CHECK(impl_ != nullptr, ValueError, "Tensor: use of an undefined tensor");
    return *impl_;
  }
  index_t offset_of(std::initializer_list<index_t> index) const;
  bool covers(index_t rows, index_t cols) const;
  T* host_data() const;

  std::shared_ptr<detail::TensorImpl<T>> impl_;
};

using Tensorf = Tensor<float>;
using Tensord = Tensor<double>;
using IndexTensor = Tensor<std::int64_t>;
using BoolTensor = Tensor<bool>;

namespace detail {

/// Drops one reference to a graph node. When it was the last, the nodes upstream are
/// freed by this loop, not by recursion: each would otherwise be freed one stack frame
/// deeper, and a long chain (a loss summed over many steps) would overflow the stack.
/// The one teardown of the graph, for a tensor's node (~TensorImpl) and a node's
/// inputs (~Node).
template <typename Node>
void release_graph(std::shared_ptr<Node>&& node) {
  thread_local std::vector<std::shared_ptr<Node>>* deferred = nullptr;
  if (deferred != nullptr) {  // inside an outer release: its loop drops the node
    deferred->push_back(std::move(node));
    return;
  }
  std::vector<std::shared_ptr<Node>> nodes{std::move(node)};
  deferred = &nodes;
  while (!nodes.empty()) {
    std::shared_ptr<Node> next = std::move(nodes.back());
    nodes.pop_back();
    next.reset();  // may push the nodes of inputs that die with it
  }
  deferred = nullptr;
}

template <typename T>
struct TensorImpl {
  std::shared_ptr<Storage<T>> storage;
  Shape shape;
  bool requires_grad = false;                  // set on leaves only
  std::shared_ptr<autograd::Node<T>> grad_fn;  // the op that produced this tensor
  Tensor<T> grad;                              // accumulated by backward(), leaves only

  TensorImpl(std::shared_ptr<Storage<T>> s, const Shape& sh) : storage(std::move(s)), shape(sh) {}

  ~TensorImpl() {
    if (grad_fn != nullptr) release_graph(std::move(grad_fn));
  }
};

/// What ops and autograd may see of a tensor besides its public API: the impl, and a
/// tensor made from one. Not for users.
struct TensorAccess {
  template <typename T>
  static TensorImpl<T>& impl(const Tensor<T>& x) {
    return x.impl();
  }
  template <typename T>
  static Tensor<T> wrap(std::shared_ptr<TensorImpl<T>> impl) {
    return Tensor<T>(std::move(impl));
  }
};

template <typename T>
TensorImpl<T>& impl(const Tensor<T>& x) {
  return TensorAccess::impl(x);
}

/// A fresh tensor with uninitialised storage. A shape too large for memory is a
/// ValueError, memory the system refuses an OutOfMemoryError, both naming `op`.
template <typename T>
Tensor<T> make_tensor(const Shape& shape, Device device = Device::cpu(), const char* op = "Tensor") {
  try {
    return TensorAccess::wrap(std::make_shared<TensorImpl<T>>(std::make_shared<Storage<T>>(shape, device, op), shape));
  } catch (const std::bad_alloc&) {  // the small bookkeeping allocations
    // Possibly before Storage checked the size: counted, not multiplied out.
    throw OutOfMemoryError(concat(op, ": out of memory creating a tensor of shape ", to_string(shape), " of ",
                                  dtype_name<T>(), " (", shape.numel(op), " elements of ", sizeof(T), " bytes)"));
  }
}

/// Whether converting every value of a floating type to the integer type U is defined
/// (finite and within U's range); the flat index of the first that is not, or -1.
template <typename U, typename T>
index_t first_unconvertible(const T* values, index_t count) {
  // The conversion truncates, so v must lie in (min - 1, max + 1). Those bounds are
  // powers of two (exact as doubles) minus one; NaN fails every comparison.
  const double high = std::ldexp(1.0, std::numeric_limits<U>::digits);  // max + 1
  const double low = std::is_signed_v<U> ? -high : 0.0;                 // min
  const double below = low - 1.0;  // rounds to low for int64, where v >= low is the same set
  const bool below_exact = below != low;
  const auto fits = [&](T v) {
    const double d = static_cast<double>(v);
    return (below_exact ? d > below : d >= low) && d < high;
  };
  bool all_fit = true;
  for (index_t i = 0; i < count; ++i) all_fit &= fits(values[i]);  // no early exit: vectorises
  if (all_fit) return -1;
  for (index_t i = 0; i < count; ++i)
    if (!fits(values[i])) return i;
  return -1;
}

/// The buffer of a tensor on any device: for ops that dispatch on the device.
template <typename T>
T* device_data(const Tensor<T>& x) {
  return heed::detail::impl(x).storage->data();
}

/// The op that last checked its arguments (check_defined) on this thread, for
/// fail_host_read's message; one pointer store per op.
inline const char*& last_op_checked() {
  static thread_local const char* op = nullptr;
  return op;
}

/// Refuses an undefined tensor (a default-constructed Tensor) given as argument `name`
/// of `op`: ValueError "matmul: b is an undefined tensor", where reading it would only say
/// "Tensor: use of an undefined tensor", naming neither.
template <typename T>
void check_defined(const Tensor<T>& x, const char* op, const char* name) {
  last_op_checked() = op;
  if (!x.defined()) throw ValueError(concat(op, ": ", name, " is an undefined tensor"));
}

/// The device shared by the defined tensors among `xs`; DeviceError naming `op` and
/// every operand's shape and device when they differ.
template <typename T, typename... Ts>
Device common_device(const char* op, const Tensor<T>& first, const Tensor<Ts>&... rest) {
  const Device device = first.device();
  const bool same = ((!rest.defined() || rest.device() == device) && ...);
  if (!same) {
    std::string operands = to_string(first.shape()) + " on " + to_string(device);
    ((operands += rest.defined() ? ", " + to_string(rest.shape()) + " on " + to_string(rest.device()) : ""), ...);
    throw DeviceError(concat(op, ": operands on different devices: ", operands));
  }
  return device;
}

/// Whether the tensors' common device is not the CPU: the branch an op takes to call
/// its device kernel (heed/ops/kernels.hpp).
template <typename T, typename... Ts>
bool on_device(const char* op, const Tensor<T>& first, const Tensor<Ts>&... rest) {
  return !common_device(op, first, rest...).is_cpu();
}

/// A tensor sharing `src`'s storage under another shape of the same numel, or of fewer
/// elements: src's first ones (no graph).
template <typename T>
Tensor<T> alias(const Tensor<T>& src, const Shape& shape) {
  return TensorAccess::wrap(std::make_shared<TensorImpl<T>>(heed::detail::impl(src).storage, shape));
}

}  // namespace detail

// ---- definitions ------------------------------------------------------------------

template <typename T>
Tensor<T>::Tensor(const std::vector<T>& values, const Shape& shape) {
  HEED_CHECK(static_cast<index_t>(values.size()) == shape.numel("Tensor"), ShapeError, "Tensor: ", values.size(),
             " values do not fill shape ", to_string(shape), " (", shape.numel(), " elements)");
  *this = detail::make_tensor<T>(shape);
  std::copy(values.begin(), values.end(), data());
}

template <typename T>
Tensor<T> Tensor<T>::empty(const Shape& shape) {
  return detail::make_tensor<T>(shape, Device::cpu(), "empty");
}

template <typename T>
index_t Tensor<T>::size(int d) const {
  HEED_CHECK(d >= -dim() && d < dim(), IndexError, "size: dim ", d, " out of range for shape ", to_string(shape()));
  return shape()[d];
}

template <typename T>
typename Tensor<T>::MatrixMap Tensor<T>::matrix(index_t rows, index_t cols) {
  HEED_CHECK(covers(rows, cols), ShapeError, "matrix: ", rows, " x ", cols, " does not cover shape ",
             to_string(shape()));
  return MatrixMap(data(), rows, cols);
}

template <typename T>
typename Tensor<T>::ConstMatrixMap Tensor<T>::matrix(index_t rows, index_t cols) const {
  HEED_CHECK(covers(rows, cols), ShapeError, "matrix: ", rows, " x ", cols, " does not cover shape ",
             to_string(shape()));
  return ConstMatrixMap(data(), rows, cols);
}

template <typename T>
bool Tensor<T>::covers(index_t rows, index_t cols) const {
  index_t product;
  return rows >= 0 && cols >= 0 && !__builtin_mul_overflow(rows, cols, &product) && product == numel();
}

template <typename T>
index_t Tensor<T>::offset_of(std::initializer_list<index_t> index) const {
  const Shape& s = shape();
  HEED_CHECK(static_cast<int>(index.size()) == s.rank(), IndexError, "at: ", index.size(),
             " indices for a tensor of shape ", to_string(s));
  index_t offset = 0;
  int d = 0;
  for (index_t i : index) {
    HEED_CHECK(i >= -s[d] && i < s[d], IndexError, "at: index ", i, " out of range for dim ", d, " of size ", s[d],
               " (shape ", to_string(s), ")");
    offset = offset * s[d] + (i < 0 ? i + s[d] : i);
    ++d;
  }
  return offset;
}

namespace detail {

/// host_data's error, out of line: the check is all that stays in that accessor. It
/// names the last op that checked its arguments on this thread: the op that read, or
/// the one before the host code that did.
[[noreturn]] __attribute__((cold, noinline)) inline void fail_host_read(const Shape& shape, Device device) {
  const char* op = last_op_checked();
  throw DeviceError(concat("the tensor of shape ", to_string(shape), " is on ", to_string(device),
                           " and host code read its data (in or after ", op ? op : "no op",
                           ", the last op to check its arguments on this thread): the op has no implementation on ",
                           to_string(device), " (move its inputs with .to(heed::Device::cpu()) to run it on the CPU)"));
}

}  // namespace detail

template <typename T>
inline T* Tensor<T>::host_data() const {
  detail::Storage<T>& storage = *impl().storage;
  if (!storage.device().is_cpu()) detail::fail_host_read(shape(), storage.device());
  return storage.data();
}

template <typename T>
T Tensor<T>::item() const {
  HEED_CHECK(numel() == 1, ValueError, "item: needs a tensor with one element, got shape ", to_string(shape()));
  if (!is_cpu()) {
    T value;
    detail::backend_of(device()).copy_to_host(device().index(), &value, detail::device_data(*this), sizeof(T));
    return value;
  }
  return data()[0];
}

template <typename T>
std::vector<T> Tensor<T>::to_vector() const {
  if (!is_cpu()) {
    const auto n = static_cast<std::size_t>(numel());
    std::unique_ptr<T[]> host(new T[n]);  // not a vector: std::vector<bool> has no buffer
    if (n > 0)
      detail::backend_of(device()).copy_to_host(device().index(), host.get(), detail::device_data(*this),
                                                n * sizeof(T));
    return std::vector<T>(host.get(), host.get() + n);
  }
  return std::vector<T>(data(), data() + numel());
}

template <typename T>
bool Tensor<T>::shares_storage(const Tensor& other) const {
  return defined() && other.defined() && impl_->storage == other.impl_->storage;
}

template <typename T>
bool Tensor<T>::requires_grad() const {
  return impl_ != nullptr && (impl_->requires_grad || impl_->grad_fn != nullptr);
}

template <typename T>
Tensor<T>& Tensor<T>::requires_grad_(bool requires_grad) {
  HEED_CHECK(std::is_floating_point_v<T> || !requires_grad, AutogradError,
             "requires_grad_: only floating-point tensors can require gradients, not ", dtype());
  HEED_CHECK(impl().grad_fn == nullptr, AutogradError,
             "requires_grad_: only leaves can be marked; this tensor comes from ", grad_fn_name(),
             " (detach() it first)");
  impl_->requires_grad = requires_grad;
  return *this;
}

template <typename T>
bool Tensor<T>::is_leaf() const {
  return impl().grad_fn == nullptr;
}

template <typename T>
Tensor<T> Tensor<T>::grad() const {
  return impl().grad;
}

template <typename T>
void Tensor<T>::zero_grad() {
  impl().grad = Tensor<T>();
}

template <typename T>
Tensor<T> Tensor<T>::detach() const {
  return detail::alias(*this, shape());
}

template <typename T>
template <typename U>
Tensor<U> Tensor<T>::to() const {
  if (!is_cpu()) {
    Tensor<T> host = detail::make_tensor<T>(shape(), Device::cpu(), "to");
    if (numel() > 0)
      detail::backend_of(device()).copy_to_host(device().index(), host.data(), detail::device_data(*this),
                                                static_cast<std::size_t>(numel()) * sizeof(T));
    const Tensor<U> converted = host.template to<U>();
    Tensor<U> out = detail::make_tensor<U>(shape(), device(), "to");
    if (numel() > 0)
      detail::backend_of(device()).copy_to_device(device().index(), detail::device_data(out), converted.data(),
                                                  static_cast<std::size_t>(numel()) * sizeof(U));
    return out;
  }
  // A floating value outside an integer type's range (NaN, inf, 1e30 to int64) has no
  // defined conversion; a bool takes any value (nonzero is true).
  if constexpr (std::is_floating_point_v<T> && std::is_integral_v<U> && !std::is_same_v<U, bool>) {
    const index_t bad = detail::first_unconvertible<U>(data(), numel());
    HEED_CHECK(bad < 0, ValueError, "to: ", data()[bad], " at flat index ", bad, " of shape ", to_string(shape()),
               " does not fit in ", detail::dtype_name<U>());
  }
  Tensor<U> out = detail::make_tensor<U>(shape(), Device::cpu(), "to");
  out.array() = array().template cast<U>();
  return out;
}

}  // namespace heed

#include "heed/detail/header_end.hpp"
