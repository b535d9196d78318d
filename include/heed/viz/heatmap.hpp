// heed/viz/heatmap.hpp — d2l's show_heatmaps: a grid of attention-weight pictures.
//
//   // attention_weights: (num_queries, num_keys), one picture
//   heed::show_heatmaps(attention_weights.reshape({1, 1, 10, 10}), "Keys", "Queries").save("attention.svg");
//
//   // (num_layers, num_heads, num_queries, num_keys): a row per layer, a column per head
//   heed::show_heatmaps(weights, "Key positions", "Query positions", {"Head 1", "Head 2", "Head 3", "Head 4"},
//                       {7, 3.5});
//
//   // the tokens on the axes, a name per row of the grid; weights: (2, 2, 6, 4)
//   heed::HeatmapOptions options;
//   options.xlabel = "Keys (source)";
//   options.ylabel = "Queries (output)";
//   options.xticklabels = {"i'm", "home", ".", "<eos>"};
//   options.yticklabels = {"je", "suis", "chez", "moi", ".", "<eos>"};
//   options.titles = {"head 1", "head 2"};
//   options.row_titles = {"layer 1", "layer 2"};
//   heed::show_heatmaps(weights, options).save("cross.svg");
//
// As d2l: panel (i, j) shows matrices[i][j] with query q as row q and key k as column
// k; the x label sits under every bottom-row panel, the y label left of every
// left-column panel, titles[j] (when given) above every panel of column j, and one
// colour bar, shrunk to 0.6 of the grid's height, on the right. Beyond d2l (matplotlib
// users write these by hand): row_titles[i] left of row i, and tick labels at every key
// and query instead of integer positions. Each cell is a <rect class="cell">; ticks are
// <text class="xtick"> and "ytick", row titles "row-title". figsize is in inches at 100
// px per inch, enlarged when the grid would not otherwise fit with cells of at least 2
// px (7.5 px with tick labels, for a 6 px font).
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

/// show_heatmaps' labels and looks, each optional. Tick labels name what the positions
/// hold (the tokens of a sentence): every key and every query gets its own, none skipped.
struct HeatmapOptions {
  std::string xlabel, ylabel;                   // under each bottom panel / left of each left panel
  std::vector<std::string> titles;              // empty, or one per column of the grid, above its panels ("head 1")
  std::vector<std::string> row_titles;          // empty, or one per row of the grid, left of it ("layer 1")
  std::vector<std::string> xticklabels;         // empty (integer positions), or one per key
  std::vector<std::string> yticklabels;         // empty (integer positions), or one per query
  std::pair<double, double> figsize{2.5, 2.5};  // (width, height) in inches, at 100 px per inch
  std::string cmap = "Reds";                    // a colormap() name
};

/// Renders matrices, shape (num_rows, num_cols, num_queries, num_keys), as d2l's
/// show_heatmaps does, with the labels of `options`. Tick labels are drawn at every
/// column (x, keys; turned a quarter when one is wider than a cell) and every row (y,
/// queries), in a font scaled to the cell (9 px at most, 6 px at least: the cells grow to
/// keep them apart); row titles stand upright left of the y labels. Throws ValueError for
/// a list whose length is not the count it labels.
template <typename T>
Svg show_heatmaps(const Tensor<T>& matrices, const HeatmapOptions& options) {
  HEED_CHECK(matrices.defined(), ValueError, "show_heatmaps: matrices is an undefined tensor");
  const Shape& shape = matrices.shape();
  HEED_CHECK(shape.rank() == 4, ShapeError,
             "show_heatmaps: matrices must be 4-D (num_rows, num_cols, num_queries, num_keys), got shape ",
             to_string(shape));
  HEED_CHECK(shape.numel() > 0, ShapeError, "show_heatmaps: matrices has a zero-size dim: shape ", to_string(shape));
  const index_t nr = shape[0], nc = shape[1], nq = shape[2], nk = shape[3];
  const auto& titles = options.titles;
  const auto& row_titles = options.row_titles;
  const auto& xticklabels = options.xticklabels;
  const auto& yticklabels = options.yticklabels;
  HEED_CHECK(titles.empty() || static_cast<index_t>(titles.size()) == nc, ValueError, "show_heatmaps: ", titles.size(),
             " titles for ", nc, " columns (shape ", to_string(shape), "); give none or one per column");
  HEED_CHECK(row_titles.empty() || static_cast<index_t>(row_titles.size()) == nr, ValueError,
             "show_heatmaps: ", row_titles.size(), " row titles for ", nr, " rows (shape ", to_string(shape),
             "); give none or one per row");
  HEED_CHECK(xticklabels.empty() || static_cast<index_t>(xticklabels.size()) == nk, ValueError,
             "show_heatmaps: ", xticklabels.size(), " x tick labels for ", nk, " keys (shape ", to_string(shape),
             "); give none or one per key");
  HEED_CHECK(yticklabels.empty() || static_cast<index_t>(yticklabels.size()) == nq, ValueError,
             "show_heatmaps: ", yticklabels.size(), " y tick labels for ", nq, " queries (shape ", to_string(shape),
             "); give none or one per query");
  const auto figsize = options.figsize;
  HEED_CHECK(std::isfinite(figsize.first) && std::isfinite(figsize.second) && figsize.first > 0 && figsize.second > 0,
             ValueError, "show_heatmaps: figsize must be positive, got (", figsize.first, ", ", figsize.second, ")");
  const Colormap colors = colormap(options.cmap);

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
  constexpr double kLabel = 11, kTick = 9, kMinTick = 6, kTickLen = 3, kPad = 3, kGapX = 10, kBarGap = 15,
                   kBarWidth = 12;
  const bool xnamed = !xticklabels.empty(), ynamed = !yticklabels.empty();
  const auto widest = [](const std::vector<std::string>& labels, double font) {
    double w = 0;
    for (const std::string& s : labels) w = std::max(w, detail::text_width(s, font));
    return w;
  };
  const double title_h = titles.empty() ? 0 : kLabel + 6;
  const double row_title_w = row_titles.empty() ? 0 : kLabel + 6;
  const std::vector<double> bar_values =
      vmax > vmin ? std::vector<double>{vmin, (vmin + vmax) / 2, vmax} : std::vector<double>{vmin};
  double bar_label_w = 0;
  for (double v : bar_values)
    bar_label_w = std::max(bar_label_w, detail::text_width(detail::format_number(v, 3), kTick));

  // The named ticks' font follows the cell, and the margins follow the font: two passes
  // settle both (without names, the first pass is the layout).
  double name_font = kTick, ytick_w = 0, xtick_h = 0, left = 0, bottom = 0, cell = 0;
  bool rotated = false;
  const double right = kBarGap + kBarWidth + kTickLen + kPad + bar_label_w + 6;
  const double top = 8 + title_h, gap_y = 8 + title_h;
  double width = 100 * figsize.first, height = 100 * figsize.second;
  const auto margins = [&] {
    ytick_w = ynamed ? widest(yticklabels, name_font) : detail::text_width(std::to_string(nq - 1), kTick);
    xtick_h = rotated ? widest(xticklabels, name_font) : xnamed ? name_font : kTick;
    left = 4 + row_title_w + kLabel + 4 + ytick_w + kPad + kTickLen;
    bottom = kTickLen + kPad + xtick_h + 5 + kLabel + 6;
  };
  for (int pass = 0; pass < 2; ++pass) {
    margins();
    const double fit_w = (width - left - right - static_cast<double>(nc - 1) * kGapX) / static_cast<double>(nc * nk);
    const double fit_h = (height - top - bottom - static_cast<double>(nr - 1) * gap_y) / static_cast<double>(nr * nq);
    cell = std::max({std::min(fit_w, fit_h), 2.0, 20.0 / static_cast<double>(std::min(nq, nk))});
    if (xnamed || ynamed) cell = std::max(cell, kMinTick / 0.8);  // named ticks 6 px at least, 1/5 cell apart
    name_font = std::clamp(cell * 0.8, kMinTick, kTick);
    rotated = xnamed && widest(xticklabels, name_font) > cell - 1;
  }
  margins();
  const double panel_w = cell * static_cast<double>(nk), panel_h = cell * static_cast<double>(nq);
  const double grid_w = panel_w * static_cast<double>(nc) + static_cast<double>(nc - 1) * kGapX;
  const double grid_h = panel_h * static_cast<double>(nr) + static_cast<double>(nr - 1) * gap_y;
  width = std::max(width, left + grid_w + right);
  height = std::max(height, top + grid_h + bottom);
  // Square cells (imshow's equal aspect) leave slack in one direction: centre the grid.
  const double x0 = left + (width - left - right - grid_w) / 2, y0 = top + (height - top - bottom - grid_h) / 2;

  // Ticks: every position when named, else integers as matplotlib's locator spaces them.
  const auto all_positions = [](index_t n) {
    std::vector<index_t> out;
    for (index_t i = 0; i < n; ++i) out.push_back(i);
    return out;
  };
  const auto xticks = xnamed ? all_positions(nk) : detail::integer_ticks(nk, static_cast<index_t>(panel_w / 25));
  const auto yticks = ynamed ? all_positions(nq) : detail::integer_ticks(nq, static_cast<index_t>(panel_h / 18));
  const std::string xfont = detail::svg_number(xnamed ? name_font : kTick);
  const std::string yfont = detail::svg_number(ynamed ? name_font : kTick);
  const double yfont_px = ynamed ? name_font : kTick;

  Svg svg(width, height);
  svg.rect(0, 0, width, height, {{"fill", "#ffffff"}});
  svg.open("g", {{"font-family", "DejaVu Sans, Arial, sans-serif"}, {"font-size", detail::svg_number(kLabel)}});
  const Svg::Attrs tick_line = {{"stroke", "#000000"}, {"stroke-width", "0.8"}};
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
          const double x = px + (static_cast<double>(k) + 0.5) * cell, y = py + panel_h + kTickLen + kPad;
          svg.line(x, py + panel_h, x, py + panel_h + kTickLen, tick_line);
          const std::string label = xnamed ? xticklabels[static_cast<std::size_t>(k)] : std::to_string(k);
          if (rotated) {
            // Read upwards, ending under the column; the glyphs hang left of the baseline.
            const double bx = x + name_font * 0.35;
            svg.text(bx, y, label,
                     {{"class", "xtick"},
                      {"text-anchor", "end"},
                      {"font-size", xfont},
                      {"transform", detail::rotate_minus_90(bx, y)}});
          } else {
            svg.text(x, y + (xnamed ? name_font : kTick) * 0.8, label,
                     {{"class", "xtick"}, {"text-anchor", "middle"}, {"font-size", xfont}});
          }
        }
        svg.text(px + panel_w / 2, py + panel_h + kTickLen + kPad + xtick_h + 5 + kLabel * 0.8, options.xlabel,
                 {{"class", "xlabel"}, {"text-anchor", "middle"}});
      }
      if (j == 0) {
        for (index_t q : yticks) {
          const double y = py + (static_cast<double>(q) + 0.5) * cell;
          svg.line(px - kTickLen, y, px, y, tick_line);
          const std::string label = ynamed ? yticklabels[static_cast<std::size_t>(q)] : std::to_string(q);
          svg.text(px - kTickLen - kPad, y + yfont_px * 0.35, label,
                   {{"class", "ytick"}, {"text-anchor", "end"}, {"font-size", yfont}});
        }
        // Rotated a quarter turn, the glyphs hang left of x, up to one font size.
        const double x = px - kTickLen - kPad - ytick_w - 4, y = py + panel_h / 2;
        svg.text(x, y, options.ylabel,
                 {{"class", "ylabel"}, {"text-anchor", "middle"}, {"transform", detail::rotate_minus_90(x, y)}});
        if (!row_titles.empty()) {
          const double rx = x - kLabel - 6;
          svg.text(rx, y, row_titles[static_cast<std::size_t>(i)],
                   {{"class", "row-title"},
                    {"text-anchor", "middle"},
                    {"font-weight", "bold"},
                    {"transform", detail::rotate_minus_90(rx, y)}});
        }
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

/// d2l's signature: show_heatmaps(matrices, xlabel, ylabel, titles, figsize, cmap), with
/// integer ticks. titles is empty or has num_cols entries; figsize is (width, height) in
/// inches; cmap is a colormap() name.
template <typename T>
Svg show_heatmaps(const Tensor<T>& matrices, const std::string& xlabel, const std::string& ylabel,
                  const std::vector<std::string>& titles = {}, std::pair<double, double> figsize = {2.5, 2.5},
                  const std::string& cmap = "Reds") {
  HeatmapOptions options;
  options.xlabel = xlabel;
  options.ylabel = ylabel;
  options.titles = titles;
  options.figsize = figsize;
  options.cmap = cmap;
  return show_heatmaps(matrices, options);
}

}  // namespace heed

#include "heed/detail/header_end.hpp"
