// heed/viz/heatmap.hpp — d2l's show_heatmaps: a grid of attention-weight pictures.
//
//   // attention_weights: (num_queries, num_keys), one picture
//   heed::show_heatmaps(attention_weights.reshape({1, 1, 10, 10}), "Keys", "Queries").save("attention.svg");
//
//   // (num_layers, num_heads, num_queries, num_keys): a row per layer, a column per head
//   heed::show_heatmaps(weights, "Key positions", "Query positions", {"Head 1", "Head 2", "Head 3", "Head 4"},
//                       {7, 3.5});
//
// As d2l: panel (i, j) shows matrices[i][j] with query q as row q and key k as column
// k; the x label sits under every bottom-row panel, the y label left of every
// left-column panel, titles[j] (when given) above every panel of column j, and one
// colour bar, shrunk to 0.6 of the grid's height, on the right. Each cell is a
// <rect class="cell">. figsize is in inches at 100 px per inch, enlarged when the
// grid would not otherwise fit with cells of at least 2 px.
#pragma once

#include "heed/detail/header_begin.hpp"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "heed/core/error.hpp"
#include "heed/core/shape.hpp"
#include "heed/core/tensor.hpp"
#include "heed/viz/colormap.hpp"
#include "heed/viz/svg.hpp"

namespace heed {
namespace detail {

/// Integer ticks 0, s, 2s, … below n, with s in 1, 2, 5, 10, 20, … the smallest step
/// that keeps the count within max_count (as matplotlib's locator picks on imshow).
inline std::vector<index_t> integer_ticks(index_t n, index_t max_count) {
  index_t step = 1;
  for (index_t decade = 1;; decade *= 10) {
    for (index_t m : {1, 2, 5}) {
      step = m * decade;
      if ((n + step - 1) / step <= std::max<index_t>(max_count, 1)) {
        std::vector<index_t> ticks;
        for (index_t t = 0; t < n; t += step) ticks.push_back(t);
        return ticks;
      }
    }
  }
}

}  // namespace detail

/// Renders matrices, shape (num_rows, num_cols, num_queries, num_keys), as d2l's
/// show_heatmaps does. titles is empty or has num_cols entries; figsize is (width,
/// height) in inches; cmap is a colormap() name.
template <typename T>
Svg show_heatmaps(const Tensor<T>& matrices, const std::string& xlabel, const std::string& ylabel,
                  const std::vector<std::string>& titles = {}, std::pair<double, double> figsize = {2.5, 2.5},
                  const std::string& cmap = "Reds") {
  HEED_CHECK(matrices.defined(), ValueError, "show_heatmaps: matrices is an undefined tensor");
  const Shape& shape = matrices.shape();
  HEED_CHECK(shape.rank() == 4, ShapeError,
             "show_heatmaps: matrices must be 4-D (num_rows, num_cols, num_queries, num_keys), got shape ",
             to_string(shape));
  HEED_CHECK(shape.numel() > 0, ShapeError, "show_heatmaps: matrices has a zero-size dim: shape ", to_string(shape));
  const index_t nr = shape[0], nc = shape[1], nq = shape[2], nk = shape[3];
  HEED_CHECK(titles.empty() || static_cast<index_t>(titles.size()) == nc, ValueError, "show_heatmaps: ", titles.size(),
             " titles for ", nc, " columns (shape ", to_string(shape), "); give none or one per column");
  HEED_CHECK(std::isfinite(figsize.first) && std::isfinite(figsize.second) && figsize.first > 0 && figsize.second > 0,
             ValueError, "show_heatmaps: figsize must be positive, got (", figsize.first, ", ", figsize.second, ")");
  const Colormap colors = colormap(cmap);

  std::vector<double> values(static_cast<std::size_t>(shape.numel()));
  const T* data = matrices.data();
  for (std::size_t i = 0; i < values.size(); ++i) {
    values[i] = static_cast<double>(data[i]);
    const auto at = static_cast<index_t>(i);
    HEED_CHECK(std::isfinite(values[i]), ValueError, "show_heatmaps: non-finite value ", values[i], " at index (",
               at / (nc * nq * nk), ", ", at / (nq * nk) % nc, ", ", at / nk % nq, ", ", at % nk, ")");
  }
  // d2l calls imshow per panel, each with its own colour scale, and draws the colour
  // bar of the last panel only. One scale over all panels keeps the single bar true
  // for every panel; a constant input maps to the lowest colour, as imshow does.
  const auto [lo_it, hi_it] = std::minmax_element(values.begin(), values.end());
  const double vmin = *lo_it, vmax = *hi_it;
  auto level = [&](double v) { return vmax > vmin ? (v - vmin) / (vmax - vmin) : 0.0; };

  // ---- layout (px); one font size for labels and titles, a smaller one for ticks ----
  constexpr double kLabel = 11, kTick = 9, kTickLen = 3, kPad = 3, kGapX = 10, kBarGap = 15, kBarWidth = 12;
  const double title_h = titles.empty() ? 0 : kLabel + 6;
  const double ytick_w = detail::text_width(std::to_string(nq - 1), kTick);
  const std::vector<double> bar_values =
      vmax > vmin ? std::vector<double>{vmin, (vmin + vmax) / 2, vmax} : std::vector<double>{vmin};
  double bar_label_w = 0;
  for (double v : bar_values)
    bar_label_w = std::max(bar_label_w, detail::text_width(detail::format_number(v, 3), kTick));

  const double left = 4 + kLabel + 4 + ytick_w + kPad + kTickLen;
  const double right = kBarGap + kBarWidth + kTickLen + kPad + bar_label_w + 6;
  const double top = 8 + title_h, bottom = kTickLen + kPad + kTick + 5 + kLabel + 6;
  const double gap_y = 8 + title_h;
  double width = 100 * figsize.first, height = 100 * figsize.second;
  const double fit_w = (width - left - right - static_cast<double>(nc - 1) * kGapX) / static_cast<double>(nc * nk);
  const double fit_h = (height - top - bottom - static_cast<double>(nr - 1) * gap_y) / static_cast<double>(nr * nq);
  const double cell = std::max({std::min(fit_w, fit_h), 2.0, 20.0 / static_cast<double>(std::min(nq, nk))});
  const double panel_w = cell * static_cast<double>(nk), panel_h = cell * static_cast<double>(nq);
  const double grid_w = panel_w * static_cast<double>(nc) + static_cast<double>(nc - 1) * kGapX;
  const double grid_h = panel_h * static_cast<double>(nr) + static_cast<double>(nr - 1) * gap_y;
  width = std::max(width, left + grid_w + right);
  height = std::max(height, top + grid_h + bottom);
  // Square cells (imshow's equal aspect) leave slack in one direction: centre the grid.
  const double x0 = left + (width - left - right - grid_w) / 2, y0 = top + (height - top - bottom - grid_h) / 2;

  Svg svg(width, height);
  svg.rect(0, 0, width, height, {{"fill", "#ffffff"}});
  svg.open("g", {{"font-family", "DejaVu Sans, Arial, sans-serif"}, {"font-size", detail::svg_number(kLabel)}});
  const Svg::Attrs tick_line = {{"stroke", "#000000"}, {"stroke-width", "0.8"}};
  const auto xticks = detail::integer_ticks(nk, static_cast<index_t>(panel_w / 25));
  const auto yticks = detail::integer_ticks(nq, static_cast<index_t>(panel_h / 18));
  for (index_t i = 0; i < nr; ++i) {
    for (index_t j = 0; j < nc; ++j) {
      const double px = x0 + static_cast<double>(j) * (panel_w + kGapX);
      const double py = y0 + static_cast<double>(i) * (panel_h + gap_y);
      // crispEdges: no anti-aliased seams between neighbouring cells.
      svg.open("g", {{"shape-rendering", "crispEdges"}});
      const double* panel = values.data() + (i * nc + j) * nq * nk;
      for (index_t q = 0; q < nq; ++q)
        for (index_t k = 0; k < nk; ++k)
          svg.rect(px + static_cast<double>(k) * cell, py + static_cast<double>(q) * cell, cell, cell,
                   {{"class", "cell"}, {"fill", colors(level(panel[q * nk + k]))}});
      svg.close();
      svg.rect(px, py, panel_w, panel_h, {{"fill", "none"}, {"stroke", "#000000"}, {"stroke-width", "0.8"}});
      if (!titles.empty())
        svg.text(px + panel_w / 2, py - 6, titles[static_cast<std::size_t>(j)],
                 {{"class", "title"}, {"text-anchor", "middle"}});
      if (i == nr - 1) {
        for (index_t k : xticks) {
          const double x = px + (static_cast<double>(k) + 0.5) * cell;
          svg.line(x, py + panel_h, x, py + panel_h + kTickLen, tick_line);
          svg.text(x, py + panel_h + kTickLen + kPad + kTick * 0.8, std::to_string(k),
                   {{"class", "xtick"}, {"text-anchor", "middle"}, {"font-size", detail::svg_number(kTick)}});
        }
        svg.text(px + panel_w / 2, py + panel_h + kTickLen + kPad + kTick + 5 + kLabel * 0.8, xlabel,
                 {{"class", "xlabel"}, {"text-anchor", "middle"}});
      }
      if (j == 0) {
        for (index_t q : yticks) {
          const double y = py + (static_cast<double>(q) + 0.5) * cell;
          svg.line(px - kTickLen, y, px, y, tick_line);
          svg.text(px - kTickLen - kPad, y + kTick * 0.35, std::to_string(q),
                   {{"class", "ytick"}, {"text-anchor", "end"}, {"font-size", detail::svg_number(kTick)}});
        }
        // Rotated a quarter turn, the glyphs hang left of x, up to one font size.
        const double x = px - kTickLen - kPad - ytick_w - 4, y = py + panel_h / 2;
        svg.text(x, y, ylabel,
                 {{"class", "ylabel"}, {"text-anchor", "middle"}, {"transform", detail::rotate_minus_90(x, y)}});
      }
    }
  }

  // ---- colour bar: a gradient through the map's anchors, which is exact for a
  // piecewise-linear map, with min, middle and max labelled ----
  const double bar_h = std::max(0.6 * grid_h, 30.0);
  const double bx = x0 + grid_w + kBarGap, by = y0 + (grid_h - bar_h) / 2;
  svg.open("defs").open("linearGradient",
                        {{"id", "heed-colorbar"}, {"x1", "0"}, {"y1", "1"}, {"x2", "0"}, {"y2", "0"}});
  const auto n = colors.num_anchors();
  for (std::size_t a = 0; a < n; ++a) {
    const double t = static_cast<double>(a) / static_cast<double>(n - 1);
    svg.element("stop", {{"offset", detail::svg_number(t)}, {"stop-color", colors(t)}});
  }
  svg.close().close();
  svg.rect(bx, by, kBarWidth, bar_h,
           {{"class", "colorbar"}, {"fill", "url(#heed-colorbar)"}, {"stroke", "#000000"}, {"stroke-width", "0.8"}});
  for (double v : bar_values) {
    const double y = by + bar_h * (1 - level(v));
    svg.line(bx + kBarWidth, y, bx + kBarWidth + kTickLen, y, tick_line);
    svg.text(bx + kBarWidth + kTickLen + kPad, y + kTick * 0.35, detail::format_number(v, 3),
             {{"class", "colorbar-tick"}, {"font-size", detail::svg_number(kTick)}});
  }
  svg.close();
  return svg;
}

}  // namespace heed

#include "heed/detail/header_end.hpp"
