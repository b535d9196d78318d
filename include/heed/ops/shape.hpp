// heed/ops/shape.hpp — ops that move elements without arithmetic.
//
//   x: (2, 3, 4)
//   x.reshape({6, -1})       -> (6, 4), a view of x's storage
//   x.permute({2, 0, 1})     -> (4, 2, 3), a contiguous copy
//   x.narrow(1, 1, 2)        -> (2, 2, 4)       x.select(0, 1)    -> (3, 4)
//   heed::cat({x, x}, 0)     -> (4, 3, 4)       heed::stack({x, x}, 1) -> (2, 2, 3, 4)
//   x.repeat({1, 2, 1})      -> (2, 6, 4)       x.repeat_interleave(2, 0) -> (4, 3, 4)
//
//   x.split(2, 1)            -> (2, 2, 4), (2, 1, 4)    x.chunk(2, 0)     -> (1, 3, 4) twice
//   heed::slice_scatter(x, src, 2, 0, 4, 2)  -> x with x[:, :, 0:4:2] = src
//
// Everything but reshape (and its spellings view, flatten, squeeze, unsqueeze)
// returns a new contiguous tensor, as DESIGN.md decides; all are differentiable.
#pragma once

#include "heed/detail/header_begin.hpp"

#include <algorithm>
#include <array>
#include <initializer_list>
#include <numeric>
#include <vector>

#include "heed/ops/elementwise.hpp"
#include "heed/ops/strided_copy.hpp"

namespace heed {

// ---- views ----------------------------------------------------------------------------------

template <typename T>
Tensor<T> reshape(const Tensor<T>& x, const std::vector<index_t>& shape) {
  detail::check_defined(x, "reshape", "x");
  return detail::view_as_shape(x, detail::infer_shape(shape, x.numel(), x.shape(), "reshape"));
}

template <typename T>
Tensor<T> flatten(const Tensor<T>& x, int start_dim = 0, int end_dim = -1) {
  detail::check_defined(x, "flatten", "x");
  if (x.dim() == 0) return detail::view_as_shape(x, Shape{1});
  start_dim = detail::normalize_dim(start_dim, x.dim(), "flatten");
  end_dim = detail::normalize_dim(end_dim, x.dim(), "flatten");
  HEED_CHECK(start_dim <= end_dim, ValueError, "flatten: start_dim ", start_dim, " after end_dim ", end_dim);
  Shape shape;
  for (int d = 0; d < x.dim(); ++d) {
    if (d > start_dim && d <= end_dim)
      shape[-1] *= x.shape()[d];
    else
      shape.push_back(x.shape()[d]);
  }
  return detail::view_as_shape(x, shape);
}

template <typename T>
Tensor<T> unsqueeze(const Tensor<T>& x, int dim) {
  detail::check_defined(x, "unsqueeze", "x");
  HEED_CHECK(dim >= -x.dim() - 1 && dim <= x.dim(), IndexError, "unsqueeze: dim ", dim,
             " out of range for a tensor of rank ", x.dim(), " (expected ", -x.dim() - 1, " to ", x.dim(), ")");
  Shape shape = x.shape();
  shape.insert(dim < 0 ? dim + x.dim() + 1 : dim, 1);
  return detail::view_as_shape(x, shape);
}

/// Removes every size-1 dim.
template <typename T>
Tensor<T> squeeze(const Tensor<T>& x) {
  detail::check_defined(x, "squeeze", "x");
  Shape shape;
  for (index_t size : x.shape())
    if (size != 1) shape.push_back(size);
  return detail::view_as_shape(x, shape);
}

/// Removes dim if its size is 1 (otherwise returns x unchanged, as PyTorch does).
template <typename T>
Tensor<T> squeeze(const Tensor<T>& x, int dim) {
  detail::check_defined(x, "squeeze", "x");
  dim = detail::normalize_dim(dim, x.dim(), "squeeze");
  if (x.dim() == 0 || x.shape()[dim] != 1) return x;
  Shape shape = x.shape();
  shape.erase(dim);
  return detail::view_as_shape(x, shape);
}

// ---- copies -------------------------------------------------------------------------------

template <typename T>
Tensor<T> permute(const Tensor<T>& x, const std::vector<int>& dims) {
  detail::check_defined(x, "permute", "x");
  HEED_CHECK(static_cast<int>(dims.size()) == x.dim(), ShapeError, "permute: ", dims.size(),
             " dims given for a tensor of shape ", to_string(x.shape()));
  std::vector<bool> seen(dims.size(), false);
  const auto strides = x.shape().strides();
  std::vector<index_t> sizes, src_strides;
  Shape shape;
  for (int d : dims) {
    const int nd = detail::normalize_dim(d, x.dim(), "permute");
    HEED_CHECK(!seen[nd], ValueError, "permute: dim ", d, " repeated");
    seen[nd] = true;
    shape.push_back(x.shape()[nd]);
    sizes.push_back(x.shape()[nd]);
    src_strides.push_back(strides[nd]);
  }
  return detail::strided_op(x, "PermuteBackward", 0, sizes, src_strides, shape);
}

template <typename T>
Tensor<T> transpose(const Tensor<T>& x, int dim0, int dim1) {
  detail::check_defined(x, "transpose", "x");
  dim0 = detail::normalize_dim(dim0, x.dim(), "transpose");
  dim1 = detail::normalize_dim(dim1, x.dim(), "transpose");
  std::vector<int> dims(static_cast<std::size_t>(x.dim()));
  std::iota(dims.begin(), dims.end(), 0);
  if (x.dim() > 0) std::swap(dims[dim0], dims[dim1]);
  return permute(x, dims);
}

namespace detail {

/// Where slice(x, dim, start, end, step) reads in x: Python's bounds, clamped and
/// counted from the end when negative, resolved into the result's shape and the
/// strided view of x (sizes, strides, offset) that slice gathers and slice_scatter
/// writes.
struct SliceView {
  Shape shape;
  std::vector<index_t> sizes, strides;
  index_t start = 0, end = 0, offset = 0;

  SliceView(const Shape& from, int& dim, index_t first, index_t last, index_t step, const char* op) {
    dim = normalize_dim(dim, from.rank(), op);
    HEED_CHECK(from.rank() > 0, IndexError, op, ": cannot slice a rank-0 tensor");
    HEED_CHECK(step > 0, ValueError, op, ": step must be positive, got ", step);
    const index_t size = from[dim];
    auto clamp = [size](index_t i) { return std::min(std::max(i < 0 ? i + size : i, index_t(0)), size); };
    start = clamp(first);
    end = std::max(clamp(last), start);
    shape = from;
    // ceil((end - start) / step), written so that a step near INT64_MAX cannot overflow.
    shape[dim] = end == start ? 0 : (end - start - 1) / step + 1;
    const auto x_strides = from.strides();
    sizes.assign(shape.begin(), shape.end());
    strides.assign(x_strides.begin(), x_strides.begin() + from.rank());
    // With two or more elements step < size, so the product stays inside x; with one the
    // stride is never used.
    if (shape[dim] > 1) strides[static_cast<std::size_t>(dim)] *= step;
    // An empty slice touches nothing: offset 0 keeps the pointer inside x's buffer.
    offset = shape.numel() == 0 ? 0 : start * x_strides[dim];
  }
};

}  // namespace detail

/// Elements start, start+step, … below end along dim. Bounds are clamped and negative
/// ones count from the end, as in Python slicing; step must be positive.
template <typename T>
Tensor<T> slice(const Tensor<T>& x, int dim, index_t start, index_t end, index_t step = 1) {
  detail::check_defined(x, "slice", "x");
  const detail::SliceView view(x.shape(), dim, start, end, step, "slice");
  return detail::strided_op(x, "SliceBackward", view.offset, view.sizes, view.strides, view.shape);
}

/// length elements from start along dim; the range must lie inside the tensor.
template <typename T>
Tensor<T> narrow(const Tensor<T>& x, int dim, index_t start, index_t length) {
  detail::check_defined(x, "narrow", "x");
  dim = detail::normalize_dim(dim, x.dim(), "narrow");
  HEED_CHECK(x.dim() > 0, IndexError, "narrow: cannot narrow a rank-0 tensor");
  const index_t size = x.shape()[dim];
  HEED_CHECK(start >= -size && start <= size, IndexError, "narrow: start ", start, " out of range for dim ", dim,
             " of size ", size);
  if (start < 0) start += size;
  HEED_CHECK(length >= 0 && length <= size - start, IndexError, "narrow: start ", start, " + length ", length,
             " exceeds dim ", dim, " of size ", size, " (shape ", to_string(x.shape()), ")");
  return slice(x, dim, start, start + length);
}

/// The slice at `index` along dim, with that dim removed.
template <typename T>
Tensor<T> select(const Tensor<T>& x, int dim, index_t index) {
  detail::check_defined(x, "select", "x");
  dim = detail::normalize_dim(dim, x.dim(), "select");
  HEED_CHECK(x.dim() > 0, IndexError, "select: cannot select from a rank-0 tensor");
  const index_t size = x.shape()[dim];
  HEED_CHECK(index >= -size && index < size, IndexError, "select: index ", index, " out of range for dim ", dim,
             " of size ", size);
  return squeeze(narrow(x, dim, index < 0 ? index + size : index, 1), dim);
}

/// Pieces of split_size along dim (the last one shorter where the size does not divide),
/// as torch.split: views of x's values, each differentiable.
template <typename T>
std::vector<Tensor<T>> split(const Tensor<T>& x, index_t split_size, int dim = 0) {
  detail::check_defined(x, "split", "x");
  dim = detail::normalize_dim(dim, x.dim(), "split");
  HEED_CHECK(x.dim() > 0, IndexError, "split: cannot split a rank-0 tensor");
  const index_t size = x.shape()[dim];
  HEED_CHECK(split_size > 0 || (split_size == 0 && size == 0), ValueError, "split: split_size must be positive, got ",
             split_size, " for dim ", dim, " of shape ", to_string(x.shape()));
  std::vector<Tensor<T>> pieces;
  if (size == 0) return {narrow(x, dim, 0, 0)};
  for (index_t start = 0; start < size; start += std::min(split_size, size - start))
    pieces.push_back(narrow(x, dim, start, std::min(split_size, size - start)));
  return pieces;
}

/// Pieces of the given sizes along dim, which must add up to its size (torch.split).
template <typename T>
std::vector<Tensor<T>> split(const Tensor<T>& x, const std::vector<index_t>& split_sizes, int dim = 0) {
  detail::check_defined(x, "split", "x");
  dim = detail::normalize_dim(dim, x.dim(), "split");
  HEED_CHECK(x.dim() > 0, IndexError, "split: cannot split a rank-0 tensor");
  index_t total = 0;
  for (index_t n : split_sizes) {
    HEED_CHECK(n >= 0, ValueError, "split: negative size ", n, " among the split sizes");
    total = detail::checked_add(total, n, "split", " (the split sizes)");
  }
  HEED_CHECK(total == x.shape()[dim], ValueError, "split: the split sizes add up to ", total, ", but dim ", dim,
             " of shape ", to_string(x.shape()), " has size ", x.shape()[dim]);
  std::vector<Tensor<T>> pieces;
  index_t start = 0;
  for (index_t n : split_sizes) {
    pieces.push_back(narrow(x, dim, start, n));
    start += n;
  }
  return pieces;
}

/// At most `chunks` pieces of ⌈size / chunks⌉ along dim (fewer when they run out), as
/// torch.chunk.
template <typename T>
std::vector<Tensor<T>> chunk(const Tensor<T>& x, index_t chunks, int dim = 0) {
  detail::check_defined(x, "chunk", "x");
  HEED_CHECK(chunks > 0, ValueError, "chunk: the number of chunks must be positive, got ", chunks);
  dim = detail::normalize_dim(dim, x.dim(), "chunk");
  HEED_CHECK(x.dim() > 0, IndexError, "chunk: cannot chunk a rank-0 tensor");
  const index_t size = x.shape()[dim];
  if (size == 0) {  // torch.chunk gives `chunks` empty pieces: as many handles must fit
    detail::check_fits_in_memory(chunks, sizeof(Tensor<T>), "chunk", " (empty pieces of dim ", dim, " of shape ",
                                 detail::ShapeText{x.shape()}, ")");
    return std::vector<Tensor<T>>(static_cast<std::size_t>(chunks), narrow(x, dim, 0, 0));
  }
  return split(x, size / chunks + (size % chunks != 0), dim);
}

/// x with the slice slice(x, dim, start, end, step) replaced by src: PyTorch's
/// slice_scatter, the differentiable form of x[..., start:end:step] = src.
template <typename T>
Tensor<T> slice_scatter(const Tensor<T>& x, const Tensor<T>& src, int dim, index_t start, index_t end,
                        index_t step = 1) {
  detail::check_defined(x, "slice_scatter", "x");
  detail::check_defined(src, "slice_scatter", "src");
  const detail::SliceView view(x.shape(), dim, start, end, step, "slice_scatter");
  HEED_CHECK(src.device() == x.device(), DeviceError, "slice_scatter: src is on ", to_string(src.device()),
             " and x on ", to_string(x.device()));
  HEED_CHECK(src.shape() == view.shape, ShapeError, "slice_scatter: src of shape ", to_string(src.shape()),
             " does not fit the slice ", view.start, ":", view.end, ":", step, " of dim ", dim, " of shape ",
             to_string(x.shape()), ", of shape ", to_string(view.shape));
  const int rank = x.dim();
  // A slice's positions are all different, so the device's scatter (one store per
  // element) writes it.
  const auto place = [view, rank](Tensor<T> into, const Tensor<T>& values) {
    if (values.numel() == 0) return into;
    if (!into.is_cpu()) {
      detail::kernels_for(into, "slice_scatter")
          .copy_into_strided(into.device().index(), detail::device_data(into) + view.offset,
                             detail::device_data(values),
                             detail::strided_view(view.sizes.data(), view.strides.data(), rank));
      return into;
    }
    std::array<index_t, detail::kMaxLoopDims> src_strides{};
    for (index_t d = rank - 1, stride = 1; d >= 0; --d) {
      src_strides[static_cast<std::size_t>(d)] = stride;
      stride *= view.sizes[static_cast<std::size_t>(d)];
    }
    detail::strided_copy(into.data() + view.offset, view.strides.data(), values.data(), src_strides.data(),
                         view.sizes.data(), rank);
    return into;
  };
  Tensor<T> out = place(detail::copy_of(x), src);
  if (autograd::needs_grad(x, src))
    autograd::record(out, "SliceScatterBackward", {x, src}, [view, rank, place](const Tensor<T>& g) {
      Tensor<T> zeros = detail::make_tensor<T>(view.shape, g.device());
      if (g.is_cpu())
        zeros.array().setZero();
      else
        detail::device_fill(g.device(), detail::device_data(zeros), zeros.numel(), T(0));
      return autograd::Grads<T>{
          place(detail::copy_of(g), zeros),
          detail::gather_strided(g, view.offset, view.sizes.data(), view.strides.data(), rank, view.shape)};
    });
  return out;
}

/// x with the slice at index along dim replaced by src (PyTorch's select_scatter,
/// x[i] = src for dim 0).
template <typename T>
Tensor<T> select_scatter(const Tensor<T>& x, const Tensor<T>& src, int dim, index_t index) {
  detail::check_defined(x, "select_scatter", "x");
  detail::check_defined(src, "select_scatter", "src");
  dim = detail::normalize_dim(dim, x.dim(), "select_scatter");
  HEED_CHECK(x.dim() > 0, IndexError, "select_scatter: cannot select from a rank-0 tensor");
  const index_t size = x.shape()[dim];
  HEED_CHECK(index >= -size && index < size, IndexError, "select_scatter: index ", index, " out of range for dim ", dim,
             " of size ", size);
  Shape slice_shape = x.shape();
  slice_shape.erase(dim);
  HEED_CHECK(src.shape() == slice_shape, ShapeError, "select_scatter: src of shape ", to_string(src.shape()),
             " does not fit the slice at index ", index, " of dim ", dim, " of shape ", to_string(x.shape()),
             ", of shape ", to_string(slice_shape));
  if (index < 0) index += size;
  return slice_scatter(x, unsqueeze(src, dim), dim, index, index + 1);
}

/// Tiles x: repeats[d] copies along each dim (extra leading repeats add dims).
template <typename T>
Tensor<T> repeat(const Tensor<T>& x, const std::vector<index_t>& repeats) {
  detail::check_defined(x, "repeat", "x");
  const int rank = static_cast<int>(repeats.size());
  HEED_CHECK(rank >= x.dim(), ShapeError, "repeat: ", repeats.size(), " repeats for a tensor of shape ",
             to_string(x.shape()), " (need at least one per dim)");
  HEED_CHECK(rank <= Shape::kMaxRank, ShapeError, "repeat: rank ", rank, " above the maximum ", Shape::kMaxRank);
  // The output, seen as (r0, s0, r1, s1, …): a stride-0 dim in front of each source dim.
  const auto strides = x.shape().strides();
  std::vector<index_t> sizes, src_strides;
  Shape shape;
  for (int d = 0; d < rank; ++d) {
    const int sd = d - (rank - x.dim());
    const index_t size = sd >= 0 ? x.shape()[sd] : 1;
    HEED_CHECK(repeats[d] >= 0, ValueError, "repeat: negative repeat count ", repeats[d]);
    shape.push_back(detail::checked_mul(repeats[d], size, "repeat", " (", repeats[d], " repeats of dim ", sd,
                                        " of shape ", detail::ShapeText{x.shape()}, ")"));
    sizes.insert(sizes.end(), {repeats[d], size});
    src_strides.insert(src_strides.end(), {0, sd >= 0 ? strides[sd] : 0});
  }
  (void)shape.numel("repeat");
  return detail::strided_op(x, "RepeatBackward", 0, sizes, src_strides, shape);
}

/// Repeats each element `repeats` times along dim: [a, b] -> [a, a, b, b].
template <typename T>
Tensor<T> repeat_interleave(const Tensor<T>& x, index_t repeats, int dim) {
  detail::check_defined(x, "repeat_interleave", "x");
  dim = detail::normalize_dim(dim, x.dim(), "repeat_interleave");
  HEED_CHECK(repeats >= 0, ValueError, "repeat_interleave: negative repeat count ", repeats);
  if (x.dim() == 0) return repeat_interleave(flatten(x), repeats, 0);
  const auto strides = x.shape().strides();
  std::vector<index_t> sizes(x.shape().begin(), x.shape().end()),
      src_strides(strides.begin(), strides.begin() + x.dim());
  sizes.insert(sizes.begin() + dim + 1, repeats);
  src_strides.insert(src_strides.begin() + dim + 1, 0);
  Shape shape = x.shape();
  shape[dim] = detail::checked_mul(shape[dim], repeats, "repeat_interleave", " (dim ", dim, " of shape ",
                                   detail::ShapeText{x.shape()}, ")");
  (void)shape.numel("repeat_interleave");
  return detail::strided_op(x, "RepeatInterleaveBackward", 0, sizes, src_strides, shape);
}

/// Repeats each element of the flattened x `repeats` times, as torch.repeat_interleave
/// without a dim.
template <typename T>
Tensor<T> repeat_interleave(const Tensor<T>& x, index_t repeats) {
  detail::check_defined(x, "repeat_interleave", "x");
  return repeat_interleave(flatten(x), repeats, 0);
}

/// Broadcasts x to `shape` (a copy; sizes of 1 stretch, leading dims are added).
template <typename T>
Tensor<T> expand(const Tensor<T>& x, const Shape& shape) {
  detail::check_defined(x, "expand", "x");
  HEED_CHECK(detail::broadcasts_to(x.shape(), shape), ShapeError, "expand: shape ", to_string(x.shape()),
             " cannot be expanded to ", to_string(shape));
  (void)shape.numel("expand");
  const auto strides = detail::broadcast_strides(x.shape(), shape);
  return detail::strided_op(x, "ExpandBackward", 0, std::vector<index_t>(shape.begin(), shape.end()),
                            std::vector<index_t>(strides.begin(), strides.begin() + shape.rank()), shape);
}

namespace detail {

/// A contiguous (a, b, inner) tensor as a contiguous (b, a, inner) one, of shape `to`.
template <typename T>
Tensor<T> swap_leading(const Tensor<T>& t, index_t a, index_t b, index_t inner, const Shape& to) {
  const index_t sizes[] = {b, a, inner}, strides[] = {inner, b * inner, 1};
  return gather_strided(t, 0, sizes, strides, 3, to);
}

/// index_select on a device, by the embedding kernels: x seen as (outer, size, inner)
/// is a table of `size` rows of outer · inner (after a strided copy, unless outer is 1),
/// whose rows are picked (an index out of range gives a row of NaN: the device cannot
/// throw) and put back as (outer, n, inner). Backward adds each picked row's gradient
/// into its row in the order of the index, as on the CPU.
template <typename T>
Tensor<T> index_select_on_device(const Tensor<T>& x, const IndexTensor& index, const DimSplit& s, const Shape& shape) {
  const index_t n = index.numel(), row = s.outer * s.inner;
  Tensor<T> out = make_tensor<T>(shape, x.device());
  if (out.numel() == 0) return out;
  const Tensor<T> table = s.outer == 1 ? x : swap_leading(x, s.outer, s.size, s.inner, Shape{s.size, row});
  Tensor<T> picked = s.outer == 1 ? out : make_tensor<T>(Shape{n, row}, x.device());
  kernels_for(x, "index_select")
      .embedding_forward(x.device().index(), device_data(picked), device_data(table), device_data(index), n, s.size,
                         row);
  return s.outer == 1 ? out : swap_leading(picked, n, s.outer, s.inner, shape);
}

template <typename T>
Tensor<T> index_select_backward_on_device(const Tensor<T>& g, const IndexTensor& index, const DimSplit& s,
                                          const Shape& x_shape) {
  const index_t n = index.numel(), row = s.outer * s.inner;
  Tensor<T> dx = make_tensor<T>(s.outer == 1 ? x_shape : Shape{s.size, row}, g.device());
  if (dx.numel() == 0) return make_tensor<T>(x_shape, g.device());
  const Tensor<T> rows = s.outer == 1 ? g : swap_leading(g, s.outer, n, s.inner, Shape{n, row});
  kernels_for(g, "index_select backward")
      .embedding_backward(g.device().index(), device_data(dx), device_data(rows), device_data(index), n, s.size, row);
  return s.outer == 1 ? dx : swap_leading(dx, s.size, s.outer, s.inner, x_shape);
}

}  // namespace detail

/// Rows of x along dim picked by a 1-D index tensor (repeats allowed). On a device the
/// index is read there: an index out of range gives NaN, as embedding's does.
template <typename T>
Tensor<T> index_select(const Tensor<T>& x, int dim, const Tensor<std::int64_t>& index) {
  detail::check_defined(x, "index_select", "x");
  detail::check_defined(index, "index_select", "index");
  dim = detail::normalize_dim(dim, x.dim(), "index_select");
  HEED_CHECK(index.dim() <= 1, ShapeError, "index_select: index must be 1-D, got shape ", to_string(index.shape()));
  HEED_CHECK(x.dim() > 0 || index.numel() == 1, ShapeError,
             "index_select: a rank-0 x takes an index of one value, got ", index.numel());
  const bool on_device = detail::on_device("index_select", x, index);
  const index_t size = x.dim() ? x.shape()[dim] : 1;
  for (index_t i = 0; !on_device && i < index.numel(); ++i)
    HEED_CHECK(index.data()[i] >= 0 && index.data()[i] < size, IndexError, "index_select: index ", index.data()[i],
               " out of range for dim ", dim, " of size ", size);
  const detail::DimSplit s(x.shape(), dim);
  Shape shape = x.shape();
  if (x.dim()) shape[dim] = index.numel();
  Tensor<T> out;
  if (on_device) {
    out = detail::index_select_on_device(x, index, s, shape);
  } else {
    out = detail::make_tensor<T>(shape, Device::cpu(), "index_select");
    const index_t n = index.numel();
    for (index_t o = 0; o < s.outer; ++o)
      for (index_t k = 0; k < n; ++k)
        std::copy_n(x.data() + (o * s.size + index.data()[k]) * s.inner, s.inner, out.data() + (o * n + k) * s.inner);
  }
  if (autograd::needs_grad(x))
    autograd::record(out, "IndexSelectBackward", {x}, [s, shape = x.shape(), index](const auto& g) {
      if (!g.is_cpu()) return autograd::Grads<T>{detail::index_select_backward_on_device(g, index, s, shape)};
      Tensor<T> dx = detail::make_tensor<T>(shape);
      dx.array().setZero();
      const index_t count = index.numel();
      for (index_t o = 0; o < s.outer; ++o)
        for (index_t k = 0; k < count; ++k)
          detail::VecMap<T>(dx.data() + (o * s.size + index.data()[k]) * s.inner, s.inner) +=
              detail::ConstVecMap<T>(g.data() + (o * count + k) * s.inner, s.inner);
      return autograd::Grads<T>{dx};
    });
  return out;
}

/// Joins tensors of equal shape except along dim.
template <typename T>
Tensor<T> cat(const std::vector<Tensor<T>>& tensors, int dim = 0) {
  HEED_CHECK(!tensors.empty(), ValueError, "cat: expected a non-empty list of tensors");
  for (std::size_t i = 0; i < tensors.size(); ++i)
    HEED_CHECK(tensors[i].defined(), ValueError, "cat: tensor ", i, " is an undefined tensor");
  const Shape& first = tensors[0].shape();
  HEED_CHECK(first.rank() > 0, ShapeError, "cat: rank-0 tensors cannot be concatenated (stack them instead)");
  dim = detail::normalize_dim(dim, first.rank(), "cat");
  Shape shape = first;
  shape[dim] = 0;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const Shape& s = tensors[i].shape();
    bool fits = s.rank() == first.rank();
    for (int d = 0; fits && d < s.rank(); ++d) fits = d == dim || s[d] == first[d];
    HEED_CHECK(fits, ShapeError, "cat: tensor ", i, " has shape ", to_string(s), ", expected ", to_string(first),
               " except at dim ", dim);
    shape[dim] = detail::checked_add(shape[dim], s[dim], "cat", " (the sizes of dim ", dim, ")");
  }
  const Device device = tensors[0].device();
  for (std::size_t i = 1; i < tensors.size(); ++i)
    HEED_CHECK(tensors[i].device() == device, DeviceError, "cat: tensor ", i, " of shape ",
               to_string(tensors[i].shape()), " is on ", to_string(tensors[i].device()), ", tensor 0 on ",
               to_string(device));
  Tensor<T> out = detail::make_tensor<T>(shape, device, "cat");
  const detail::DimSplit outer(shape, dim);
  index_t offset = 0;  // along dim, in units of inner rows
  for (const Tensor<T>& t : tensors) {
    const index_t rows = t.shape()[dim] * outer.inner;
    if (rows * outer.outer == 0) continue;
    if (device.is_cpu()) {
      for (index_t o = 0; o < outer.outer; ++o)
        std::copy_n(t.data() + o * rows, rows, out.data() + o * outer.size * outer.inner + offset);
    } else {  // t's (outer, rows) block into out's columns [offset, offset + rows) of each outer row
      const index_t sizes[] = {outer.outer, rows}, strides[] = {outer.size * outer.inner, 1};
      detail::kernels_for(out, "cat")
          .copy_into_strided(device.index(), detail::device_data(out) + offset, detail::device_data(t),
                             detail::strided_view(sizes, strides, 2));
    }
    offset += rows;
  }
  bool any_grad = false;
  for (const Tensor<T>& t : tensors) any_grad = any_grad || autograd::needs_grad(t);
  if (any_grad) {
    std::vector<index_t> sizes;
    for (const Tensor<T>& t : tensors) sizes.push_back(t.shape()[dim]);
    autograd::record(out, "CatBackward", tensors, [dim, sizes](const auto& g) {
      autograd::Grads<T> grads;
      index_t start = 0;
      for (index_t size : sizes) {
        grads.push_back(narrow(g, dim, start, size));
        start += size;
      }
      return grads;
    });
  }
  return out;
}

/// Joins tensors of equal shape along a new dim.
template <typename T>
Tensor<T> stack(const std::vector<Tensor<T>>& tensors, int dim = 0) {
  HEED_CHECK(!tensors.empty(), ValueError, "stack: expected a non-empty list of tensors");
  for (std::size_t i = 0; i < tensors.size(); ++i)
    HEED_CHECK(tensors[i].defined(), ValueError, "stack: tensor ", i, " is an undefined tensor");
  for (std::size_t i = 1; i < tensors.size(); ++i)
    HEED_CHECK(tensors[i].shape() == tensors[0].shape(), ShapeError, "stack: tensor ", i, " has shape ",
               to_string(tensors[i].shape()), ", expected ", to_string(tensors[0].shape()));
  const int rank = tensors[0].dim() + 1;
  HEED_CHECK(dim >= -rank && dim < rank, IndexError, "stack: dim ", dim, " out of range for the result's rank ", rank);
  std::vector<Tensor<T>> expanded;
  for (const Tensor<T>& t : tensors) expanded.push_back(unsqueeze(t, dim));
  return cat(expanded, dim < 0 ? dim + rank : dim);
}

/// cat and stack of a braced list, heed::cat({a, b}, 1): a std::vector parameter cannot
/// deduce T from braces.
template <typename T>
Tensor<T> cat(std::initializer_list<Tensor<T>> tensors, int dim = 0) {
  return cat(std::vector<Tensor<T>>(tensors), dim);
}
template <typename T>
Tensor<T> stack(std::initializer_list<Tensor<T>> tensors, int dim = 0) {
  return stack(std::vector<Tensor<T>>(tensors), dim);
}

// ---- Tensor methods defined here ---------------------------------------------------------------

template <typename T>
Tensor<T> Tensor<T>::reshape(const Shape& shape) const {
  return heed::reshape(*this, shape.to_vector());
}
template <typename T>
Tensor<T> Tensor<T>::reshape(std::initializer_list<index_t> shape) const {
  return heed::reshape(*this, std::vector<index_t>(shape));
}
// clang-format off
template <typename T> Tensor<T> Tensor<T>::flatten(int start_dim, int end_dim) const { return heed::flatten(*this, start_dim, end_dim); }
template <typename T> Tensor<T> Tensor<T>::permute(const std::vector<int>& dims) const { return heed::permute(*this, dims); }
template <typename T> Tensor<T> Tensor<T>::transpose(int dim0, int dim1) const { return heed::transpose(*this, dim0, dim1); }
template <typename T> Tensor<T> Tensor<T>::unsqueeze(int dim) const { return heed::unsqueeze(*this, dim); }
template <typename T> Tensor<T> Tensor<T>::squeeze() const { return heed::squeeze(*this); }
template <typename T> Tensor<T> Tensor<T>::squeeze(int dim) const { return heed::squeeze(*this, dim); }
template <typename T> Tensor<T> Tensor<T>::narrow(int dim, index_t start, index_t length) const { return heed::narrow(*this, dim, start, length); }
template <typename T> Tensor<T> Tensor<T>::slice(int dim, index_t start, index_t end, index_t step) const { return heed::slice(*this, dim, start, end, step); }
template <typename T> Tensor<T> Tensor<T>::select(int dim, index_t index) const { return heed::select(*this, dim, index); }
template <typename T> Tensor<T> Tensor<T>::index_select(int dim, const Tensor<std::int64_t>& index) const { return heed::index_select(*this, dim, index); }
template <typename T> Tensor<T> Tensor<T>::repeat(const std::vector<index_t>& repeats) const { return heed::repeat(*this, repeats); }
template <typename T> Tensor<T> Tensor<T>::repeat_interleave(index_t repeats, int dim) const { return heed::repeat_interleave(*this, repeats, dim); }
template <typename T> Tensor<T> Tensor<T>::repeat_interleave(index_t repeats) const { return heed::repeat_interleave(*this, repeats); }
template <typename T> Tensor<T> Tensor<T>::expand(const Shape& shape) const { return heed::expand(*this, shape); }
template <typename T> Tensor<T> Tensor<T>::operator[](index_t index) const { return heed::select(*this, 0, index); }
template <typename T> std::vector<Tensor<T>> Tensor<T>::split(index_t split_size, int dim) const { return heed::split(*this, split_size, dim); }
template <typename T> std::vector<Tensor<T>> Tensor<T>::split(const std::vector<index_t>& split_sizes, int dim) const { return heed::split(*this, split_sizes, dim); }
template <typename T> std::vector<Tensor<T>> Tensor<T>::chunk(index_t chunks, int dim) const { return heed::chunk(*this, chunks, dim); }
// clang-format on
template <typename T>
Tensor<T> Tensor<T>::t() const {
  detail::check_defined(*this, "t", "self");
  HEED_CHECK(dim() <= 2, ShapeError, "t: expects a tensor of at most 2 dims, got shape ", to_string(shape()),
             " (x.mT() swaps the last two dims, x.permute() any)");
  return dim() < 2 ? *this : heed::transpose(*this, 0, 1);
}
template <typename T>
Tensor<T> Tensor<T>::mT() const {
  detail::check_defined(*this, "mT", "self");
  HEED_CHECK(dim() >= 2, ShapeError, "mT: expects a tensor of at least 2 dims, got shape ", to_string(shape()));
  return heed::transpose(*this, -2, -1);
}
// clang-format off
// clang-format on

}  // namespace heed

#include "heed/detail/header_end.hpp"
