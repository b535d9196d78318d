// heed/io/print.hpp — `std::cout << x` prints as PyTorch's repr does.
//
//   tensor([[0.1000, 0.2000],
//           [0.3000, 0.4000]], requires_grad=True)
//
// Same rules as torch/_tensor_str.py with its default options (precision 4, at most
// 1000 elements before summarising with "...", 3 edge items, 80 columns): whole-valued
// floats print as "1.", scientific notation when the magnitudes span more than 1000×.
// A float64 tensor ends with ", dtype=float64"; a recorded result with its grad_fn; a
// tensor on a CUDA device is copied to the host to print, with ", device='cuda:0'" first.
#pragma once

#include "heed/detail/header_begin.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ostream>
#include <string>
#include <vector>

#include "heed/autograd/node.hpp"
#include "heed/ops/device.hpp"

namespace heed {
namespace detail {

struct PrintOptions {
  int precision = 4;
  index_t threshold = 1000;
  index_t edge_items = 3;
  int line_width = 80;
};

template <typename T>
class ElementFormatter {
 public:
  ElementFormatter(const std::vector<T>& shown, const PrintOptions& options) : precision_(options.precision) {
    if constexpr (std::is_floating_point_v<T>) {
      std::vector<double> finite;
      for (T v : shown)
        if (std::isfinite(v) && v != T(0)) finite.push_back(std::fabs(static_cast<double>(v)));
      // As PyTorch, only nonzero finite values set the width ("tensor([1., inf])"), and
      // with none at all it stays 1.
      if (finite.empty()) return;
      for (T v : shown)
        if (std::isfinite(v) && v != std::ceil(v)) int_mode_ = false;
      const double lo = *std::min_element(finite.begin(), finite.end());
      const double hi = *std::max_element(finite.begin(), finite.end());
      sci_mode_ = hi / lo > 1000.0 || hi > 1e8 || (!int_mode_ && lo < 1e-4);
      for (T v : shown)
        if (std::isfinite(v) && v != T(0)) width_ = std::max(width_, static_cast<int>(render(v).size()));
      if (int_mode_ && !sci_mode_) width_ = std::max(width_, 2);
    } else {
      for (T v : shown) width_ = std::max(width_, static_cast<int>(render(v).size()));
    }
  }

  int width() const { return width_; }

  std::string render(T v) const {
    if constexpr (std::is_same_v<T, bool>) {
      return v ? "True" : "False";
    } else if constexpr (std::is_floating_point_v<T>) {
      if (std::isnan(v)) return "nan";
      if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
      char buf[64];
      if (sci_mode_)
        std::snprintf(buf, sizeof buf, "%.*e", precision_, static_cast<double>(v));
      else if (int_mode_)
        std::snprintf(buf, sizeof buf, "%.0f.", static_cast<double>(v));
      else
        std::snprintf(buf, sizeof buf, "%.*f", precision_, static_cast<double>(v));
      return buf;
    } else {
      return std::to_string(v);
    }
  }

  std::string format(T v) const {
    std::string s = render(v);
    return std::string(static_cast<std::size_t>(std::max(0, width_ - static_cast<int>(s.size()))), ' ') + s;
  }

 private:
  int precision_;
  int width_ = 1;
  bool int_mode_ = true;
  bool sci_mode_ = false;
};

/// The elements that will be shown (all, or the edges of each dim when summarising).
template <typename T>
void collect_shown(const T* data, const Shape& shape, int dim, bool summarize, const PrintOptions& options,
                   std::vector<T>& out) {
  if (dim == shape.rank()) {
    out.push_back(*data);
    return;
  }
  index_t stride = 1;
  for (int d = dim + 1; d < shape.rank(); ++d) stride *= shape[d];
  const index_t size = shape[dim];
  for (index_t i = 0; i < size; ++i) {
    if (summarize && size > 2 * options.edge_items && i == options.edge_items) i = size - options.edge_items;
    collect_shown(data + i * stride, shape, dim + 1, summarize, options, out);
  }
}

template <typename T>
std::string format_block(const T* data, const Shape& shape, int dim, int indent, bool summarize,
                         const ElementFormatter<T>& fmt, const PrintOptions& options) {
  const index_t size = shape[dim];
  const bool cut = summarize && size > 2 * options.edge_items;
  std::vector<std::string> items;
  index_t stride = 1;
  for (int d = dim + 1; d < shape.rank(); ++d) stride *= shape[d];
  for (index_t i = 0; i < size; ++i) {
    if (cut && i == options.edge_items) {
      items.push_back(dim + 1 == shape.rank() ? " ..." : "...");
      i = size - options.edge_items;
    }
    items.push_back(dim + 1 == shape.rank()
                        ? fmt.format(data[i])
                        : format_block(data + i * stride, shape, dim + 1, indent + 1, summarize, fmt, options));
  }
  std::string out = "[";
  if (dim + 1 == shape.rank()) {  // a row: wrap at the line width
    const int per_line = std::max(1, (options.line_width - indent) / (fmt.width() + 2));
    for (std::size_t i = 0; i < items.size(); ++i) {
      if (i > 0) out += i % static_cast<std::size_t>(per_line) == 0 ? ",\n" + std::string(indent + 1, ' ') : ", ";
      out += items[i];
    }
  } else {
    const std::string separator = "," + std::string(static_cast<std::size_t>(shape.rank() - dim - 1), '\n') +
                                  std::string(static_cast<std::size_t>(indent + 1), ' ');
    for (std::size_t i = 0; i < items.size(); ++i) out += (i ? separator : "") + items[i];
  }
  return out + "]";
}

}  // namespace detail

template <typename T>
std::ostream& operator<<(std::ostream& os, const Tensor<T>& x) {
  if (!x.defined()) return os << "tensor(undefined)";
  const detail::PrintOptions options;
  const Shape& shape = x.shape();
  const bool summarize = x.numel() > options.threshold;
  const Tensor<T> host = !x.is_cpu() ? x.detach().to(Device::cpu()) : x;  // the values, read on the host
  std::vector<T> shown;
  if (x.numel() > 0) detail::collect_shown(host.data(), shape, 0, summarize, options, shown);
  const detail::ElementFormatter<T> fmt(shown, options);

  std::string body;
  std::vector<std::string> suffixes;
  if (!x.is_cpu()) suffixes.push_back("device='" + to_string(x.device()) + "'");  // first, as in PyTorch
  if (x.numel() == 0) {
    body = "[]";
    if (shape.rank() != 1) suffixes.push_back("size=" + to_string(shape));
  } else if (shape.rank() == 0) {
    body = fmt.render(host.data()[0]);
  } else {
    body = detail::format_block(host.data(), shape, 0, 7, summarize, fmt, options);
  }
  // An empty tensor names any dtype but float32: no element shows int64 or bool.
  constexpr bool implied_dtype = std::is_same_v<T, bool> || std::is_same_v<T, std::int64_t>;
  if (!std::is_same_v<T, float> && (!implied_dtype || x.numel() == 0))
    suffixes.push_back(std::string("dtype=") + x.dtype());
  if (!x.is_leaf())
    suffixes.push_back("grad_fn=<" + x.grad_fn_name() + ">");
  else if (x.requires_grad())
    suffixes.push_back("requires_grad=True");
  // As torch's _add_suffixes, with its way of counting the last line: a suffix that
  // would pass the line width starts a new line, indented under "tensor(".
  std::string out = "tensor(" + body;
  const std::size_t newline = out.rfind('\n');
  std::size_t last_line = out.size() + 2 - (newline == std::string::npos ? 0 : newline + 1);
  const std::size_t indent = 7;
  for (const std::string& s : suffixes) {
    if (last_line + s.size() + 2 > static_cast<std::size_t>(options.line_width)) {
      out += ",\n" + std::string(indent, ' ') + s;
      last_line = indent + s.size();
    } else {
      out += ", " + s;
      last_line += s.size() + 2;
    }
  }
  return os << out << ")";
}

}  // namespace heed

#include "heed/detail/header_end.hpp"
