// heed/viz/plot.hpp — line and scatter plots to SVG, as d2l.plot draws them.
//
//   heed::Plot plot;                                    // d2l's figsize (3.5, 2.5) inches
//   plot.scatter(x_train, y_train, "samples")
//       .line(x_test, y_truth, "Truth")
//       .line(x_test, y_hat, "Pred", "m--")
//       .xlabel("x").ylabel("y").xlim(0, 5).ylim(-1, 5);
//   plot.save("nadaraya_watson.svg");
//
// Series take std::vector<double>, 1-D tensors or columns (n, 1). A style is matplotlib's format
// string without markers: an optional colour letter (b g r c m y k w) and a line style
// ("-", "--", "-.", ":"); without a letter a series takes the next colour of
// matplotlib's tab10 cycle. Limits default to the data range plus 5% on each side;
// ticks are 1, 2 or 5 × 10^k apart; grid lines at the ticks (d2l's axes.grid()); a
// legend of the labelled series, placed in the corner that hides fewest points, as
// matplotlib's loc="best" does. Whatever lies outside the limits is clipped.
#pragma once

#include "heed/detail/header_begin.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "heed/core/error.hpp"
#include "heed/core/shape.hpp"
#include "heed/core/tensor.hpp"
#include "heed/viz/svg.hpp"

namespace heed {
namespace detail {

/// Multiples of a step of 1, 2 or 5 × 10^k in [lo, hi], the smallest step that gives at
/// most max_count + 1 ticks. Returns the ticks and the step.
inline std::pair<std::vector<double>, double> nice_ticks(double lo, double hi, int max_count) {
  const double raw = (hi - lo) / std::max(max_count, 1);
  const double decade = std::pow(10.0, std::floor(std::log10(raw)));
  double step = 10 * decade;
  for (double m : {1.0, 2.0, 5.0})
    if (m * decade >= raw * (1 - 1e-9)) {
      step = m * decade;
      break;
    }
  std::vector<double> ticks;
  // k · step, not a running sum, so 0.1 · 3 prints as 0.3 and zero is exactly zero;
  // the count bound ends the loop where k + 1 == k (limits far from zero, close together).
  const double first = std::ceil(lo / step - 1e-9), last = std::floor(hi / step + 1e-9);
  for (int i = 0; first + i <= last && i <= max_count + 1; ++i) {
    const double k = first + i;
    ticks.push_back(k == 0 ? 0.0 : std::clamp(k * step, lo, hi));
  }
  return {ticks, step};
}

/// Tick labels with as many decimals as the step needs ("0.0", "0.5", "1.0", as
/// matplotlib prints them); %g style for steps or values too small or large for that.
inline std::vector<std::string> tick_labels(const std::vector<double>& ticks, double step) {
  const int decimals = std::max(0, -static_cast<int>(std::floor(std::log10(step) + 1e-9)));
  double largest = 0;
  for (double t : ticks) largest = std::max(largest, std::fabs(t));
  std::vector<std::string> labels;
  for (double t : ticks)
    labels.push_back(decimals <= 5 && largest < 1e6 ? format_number(t, 0, decimals) : format_number(t, 6));
  return labels;
}

/// Liang–Barsky: clips segment a→b to the box [x0, x1] × [y0, y1]; false when none of it
/// is inside. An endpoint inside the box is left bit-for-bit as it was.
inline bool clip_segment(std::pair<double, double>& a, std::pair<double, double>& b, double x0, double y0, double x1,
                         double y1) {
  const double dx = b.first - a.first, dy = b.second - a.second;
  const double p[4] = {-dx, dx, -dy, dy};
  const double q[4] = {a.first - x0, x1 - a.first, a.second - y0, y1 - a.second};
  double t0 = 0, t1 = 1;
  for (int i = 0; i < 4; ++i) {
    if (p[i] == 0) {
      if (q[i] < 0) return false;
    } else if (p[i] < 0) {
      t0 = std::max(t0, q[i] / p[i]);
    } else {
      t1 = std::min(t1, q[i] / p[i]);
    }
  }
  if (t0 > t1) return false;
  const auto start = a;
  if (t0 > 0) a = {start.first + t0 * dx, start.second + t0 * dy};
  if (t1 < 1) b = {start.first + t1 * dx, start.second + t1 * dy};
  return true;
}

}  // namespace detail

class Plot {
 public:
  /// A line through (xs[i], ys[i]) in order; style as in the header comment.
  Plot& line(const std::vector<double>& xs, const std::vector<double>& ys, const std::string& label = "",
             const std::string& style = "-") {
    add(xs, ys, label, style, false);
    return *this;
  }
  template <typename T>
  Plot& line(const Tensor<T>& xs, const Tensor<T>& ys, const std::string& label = "", const std::string& style = "-") {
    const std::vector<double> x = to_values(xs, "line", "xs");
    return line(x, to_values(ys, "line", "ys"), label, style);
  }

  /// A dot at each (xs[i], ys[i]).
  Plot& scatter(const std::vector<double>& xs, const std::vector<double>& ys, const std::string& label = "") {
    add(xs, ys, label, "", true);
    return *this;
  }
  template <typename T>
  Plot& scatter(const Tensor<T>& xs, const Tensor<T>& ys, const std::string& label = "") {
    const std::vector<double> x = to_values(xs, "scatter", "xs");
    return scatter(x, to_values(ys, "scatter", "ys"), label);
  }

  Plot& xlabel(const std::string& text) { return set(xlabel_, text); }
  Plot& ylabel(const std::string& text) { return set(ylabel_, text); }
  Plot& title(const std::string& text) { return set(title_, text); }
  Plot& xlim(double lo, double hi) { return set_limits(xlim_, lo, hi, "xlim"); }
  Plot& ylim(double lo, double hi) { return set_limits(ylim_, lo, hi, "ylim"); }
  /// Figure size in inches, at 100 px per inch (enlarged if the labels would not fit).
  Plot& figsize(double width, double height) {
    HEED_CHECK(std::isfinite(width) && std::isfinite(height) && width > 0 && height > 0, ValueError,
               "plot: figsize must be positive, got (", width, ", ", height, ")");
    figsize_ = {width, height};
    return *this;
  }

  Svg render() const;
  void save(const std::string& path) const { render().save(path); }

 private:
  struct Series {
    std::vector<double> xs, ys;
    std::string label, color, dash;  // dash: an SVG stroke-dasharray, empty when solid
    bool scatter;
  };
  using Limits = std::pair<double, double>;

  template <typename T>
  static std::vector<double> to_values(const Tensor<T>& t, const char* kind, const char* name) {
    HEED_CHECK(t.defined(), ValueError, "plot: ", kind, " ", name, " is an undefined tensor");
    // A column (n, 1) is one series too, as matplotlib (and so d2l.plot) draws it.
    HEED_CHECK(t.dim() == 1 || (t.dim() == 2 && t.shape()[1] == 1), ShapeError, "plot: ", kind, " ", name,
               " must be 1-D or a column (n, 1), got shape ", to_string(t.shape()));
    std::vector<double> out(static_cast<std::size_t>(t.numel()));
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = static_cast<double>(t.data()[i]);
    return out;
  }

  Plot& set(std::string& field, const std::string& text) {
    field = text;
    return *this;
  }

  Plot& set_limits(Limits& field, double lo, double hi, const char* what) {
    HEED_CHECK(std::isfinite(lo) && std::isfinite(hi) && lo < hi, ValueError, "plot: ", what,
               " needs finite lo < hi, got (", lo, ", ", hi, ")");
    field = {lo, hi};
    return *this;
  }

  void add(const std::vector<double>& xs, const std::vector<double>& ys, const std::string& label,
           const std::string& style, bool scatter) {
    const std::string what = std::string(scatter ? "scatter" : "line") + (label.empty() ? "" : " '" + label + "'");
    HEED_CHECK(xs.size() == ys.size(), ShapeError, "plot: ", what, ": xs has ", xs.size(), " values, ys has ",
               ys.size());
    HEED_CHECK(!xs.empty(), ValueError, "plot: ", what, " has no points");
    for (std::size_t i = 0; i < xs.size(); ++i)
      HEED_CHECK(std::isfinite(xs[i]) && std::isfinite(ys[i]), ValueError, "plot: ", what, ": non-finite value ",
                 std::isfinite(xs[i]) ? ys[i] : xs[i], " at ", std::isfinite(xs[i]) ? "ys[" : "xs[", i, "]");
    // matplotlib's single-letter colours; a series given one leaves the cycle alone.
    static const std::pair<char, const char*> kLetters[] = {{'b', "#0000ff"}, {'g', "#008000"}, {'r', "#ff0000"},
                                                            {'c', "#00bfbf"}, {'m', "#bf00bf"}, {'y', "#bfbf00"},
                                                            {'k', "#000000"}, {'w', "#ffffff"}};
    static const char* const kTab10[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                         "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};
    std::string color, rest = style;
    for (const auto& [letter, hex] : kLetters)
      if (!rest.empty() && rest[0] == letter) color = hex;
    if (!color.empty()) rest.erase(0, 1);
    // matplotlib's dash patterns, scaled by its line width 1.5 as it does.
    std::string dash;
    if (rest == "--")
      dash = "5.55,2.4";
    else if (rest == "-.")
      dash = "9.6,2.4,1.5,2.4";
    else if (rest == ":")
      dash = "1.5,2.48";
    else
      HEED_CHECK(rest.empty() || rest == "-", ValueError, "plot: ", what, ": unknown style '", style,
                 "' (an optional colour letter of bgrcmykw, then -, --, -. or :)");
    if (color.empty()) color = kTab10[next_color_++ % 10];
    series_.push_back({xs, ys, label, color, dash, scatter});
  }

  Limits auto_limits(bool x) const {
    if (series_.empty()) return {0, 1};  // matplotlib's empty axes
    double lo = std::numeric_limits<double>::infinity(), hi = -lo;
    for (const Series& s : series_) {
      const std::vector<double>& v = x ? s.xs : s.ys;
      const auto [min, max] = std::minmax_element(v.begin(), v.end());
      lo = std::min(lo, *min);
      hi = std::max(hi, *max);
    }
    if (lo == hi) return {lo - std::max(0.05 * std::fabs(lo), 0.5), hi + std::max(0.05 * std::fabs(hi), 0.5)};
    return {lo - 0.05 * (hi - lo), hi + 0.05 * (hi - lo)};
  }

  std::vector<Series> series_;
  std::string xlabel_, ylabel_, title_;
  Limits xlim_{0, 0}, ylim_{0, 0};  // lo == hi: from the data
  std::pair<double, double> figsize_{3.5, 2.5};
  std::size_t next_color_ = 0;
};

inline Svg Plot::render() const {
  constexpr double kLabel = 11, kTick = 9, kTickLen = 3.5, kPad = 3, kRadius = 3, kLineWidth = 1.5;
  const Limits xl = xlim_.first < xlim_.second ? xlim_ : auto_limits(true);
  const Limits yl = ylim_.first < ylim_.second ? ylim_ : auto_limits(false);

  // ---- layout (px): the y ticks depend only on the height, the left margin on their labels ----
  const double top = 8 + (title_.empty() ? 0 : kLabel + 8);
  const double bottom = kTickLen + kPad + kTick + 4 + (xlabel_.empty() ? 0 : kLabel + 6) + 4;
  const double height = std::max(100 * figsize_.second, top + bottom + 40);
  const double area_h = height - top - bottom;
  const auto [yticks, ystep] = detail::nice_ticks(yl.first, yl.second, std::clamp(static_cast<int>(area_h / 30), 3, 9));
  const std::vector<std::string> ylabels = detail::tick_labels(yticks, ystep);
  double ytick_w = 0;
  for (const std::string& s : ylabels) ytick_w = std::max(ytick_w, detail::text_width(s, kTick));
  const double left = 6 + (ylabel_.empty() ? 0 : kLabel + 6) + ytick_w + kPad + kTickLen;
  const double right = 16;  // room for half of the last x tick label
  const double width = std::max(100 * figsize_.first, left + right + 60);
  const double area_w = width - left - right;
  const auto [xticks, xstep] = detail::nice_ticks(xl.first, xl.second, std::clamp(static_cast<int>(area_w / 50), 3, 9));
  const std::vector<std::string> xlabels = detail::tick_labels(xticks, xstep);

  // Data → px. Normalised coordinates are bounded so that far-off points stay finite;
  // 1e9 plot widths away, the bound changes nothing that shows.
  auto px = [&](double x) { return left + area_w * std::clamp((x - xl.first) / (xl.second - xl.first), -1e9, 1e9); };
  auto py = [&](double y) {
    return top + area_h * (1 - std::clamp((y - yl.first) / (yl.second - yl.first), -1e9, 1e9));
  };

  Svg svg(width, height);
  svg.rect(0, 0, width, height, {{"fill", "#ffffff"}});
  svg.open("g", {{"font-family", "DejaVu Sans, Arial, sans-serif"}, {"font-size", detail::svg_number(kLabel)}});
  const Svg::Attrs grid = {{"class", "grid"}, {"stroke", "#b0b0b0"}, {"stroke-width", "0.8"}};
  const Svg::Attrs tick = {{"stroke", "#000000"}, {"stroke-width", "0.8"}};
  const std::string tick_size = detail::svg_number(kTick);
  for (std::size_t i = 0; i < xticks.size(); ++i) {
    const double x = px(xticks[i]);
    svg.line(x, top, x, top + area_h, grid).line(x, top + area_h, x, top + area_h + kTickLen, tick);
    svg.text(x, top + area_h + kTickLen + kPad + kTick * 0.8, xlabels[i],
             {{"class", "xtick"}, {"text-anchor", "middle"}, {"font-size", tick_size}});
  }
  for (std::size_t i = 0; i < yticks.size(); ++i) {
    const double y = py(yticks[i]);
    svg.line(left, y, left + area_w, y, grid).line(left - kTickLen, y, left, y, tick);
    svg.text(left - kTickLen - kPad, y + kTick * 0.35, ylabels[i],
             {{"class", "ytick"}, {"text-anchor", "end"}, {"font-size", tick_size}});
  }

  // ---- series, clipped to the plot area. Lines are cut at a box a little larger
  // than the area, so the clip path only trims line ends, and far-off points never
  // reach the file; a line that leaves and re-enters becomes several polylines ----
  svg.clip_rect("heed-plot-area", left, top, area_w, area_h);
  svg.open("g", {{"clip-path", "url(#heed-plot-area)"}});
  const double bx0 = left - 10, by0 = top - 10, bx1 = left + area_w + 10, by1 = top + area_h + 10;
  std::vector<std::pair<double, double>> shown;  // points inside the area, for the legend's placement
  for (const Series& s : series_) {
    std::vector<std::pair<double, double>> points;
    for (std::size_t i = 0; i < s.xs.size(); ++i) points.emplace_back(px(s.xs[i]), py(s.ys[i]));
    for (const auto& [x, y] : points)
      if (x >= left && x <= left + area_w && y >= top && y <= top + area_h) shown.emplace_back(x, y);
    if (s.scatter) {
      for (const auto& [x, y] : points)
        if (x >= bx0 && x <= bx1 && y >= by0 && y <= by1)
          svg.circle(x, y, kRadius, {{"class", "point"}, {"fill", s.color}});
      continue;
    }
    std::vector<std::vector<std::pair<double, double>>> runs;
    for (std::size_t i = 0; i + 1 < points.size(); ++i) {
      auto a = points[i], b = points[i + 1];
      if (!detail::clip_segment(a, b, bx0, by0, bx1, by1)) continue;
      if (runs.empty() || runs.back().back() != a) runs.push_back({a});
      runs.back().push_back(b);
    }
    Svg::Attrs style = {{"class", "series"},
                        {"fill", "none"},
                        {"stroke", s.color},
                        {"stroke-width", detail::svg_number(kLineWidth)},
                        {"stroke-linejoin", "round"}};
    if (!s.dash.empty()) style.emplace_back("stroke-dasharray", s.dash);
    for (const auto& run : runs) svg.polyline(run, style);
  }
  svg.close();
  svg.rect(left, top, area_w, area_h, {{"fill", "none"}, {"stroke", "#000000"}, {"stroke-width", "0.8"}});

  // ---- labels and title ----
  if (!xlabel_.empty())
    svg.text(left + area_w / 2, top + area_h + kTickLen + kPad + kTick + 4 + kLabel * 0.8, xlabel_,
             {{"class", "xlabel"}, {"text-anchor", "middle"}});
  if (!ylabel_.empty()) {
    // Rotated a quarter turn, the glyphs hang left of x, up to one font size.
    const double x = left - kTickLen - kPad - ytick_w - 6, y = top + area_h / 2;
    svg.text(x, y, ylabel_,
             {{"class", "ylabel"}, {"text-anchor", "middle"}, {"transform", detail::rotate_minus_90(x, y)}});
  }
  if (!title_.empty()) svg.text(left + area_w / 2, top - 8, title_, {{"class", "title"}, {"text-anchor", "middle"}});

  // ---- legend: in the corner, of upper right, upper left, lower left and lower right
  // (matplotlib's order), that covers fewest points ----
  std::vector<const Series*> entries;
  for (const Series& s : series_)
    if (!s.label.empty()) entries.push_back(&s);
  if (!entries.empty()) {
    constexpr double kRow = kLabel + 5, kSample = 20, kMargin = 6;
    double text_w = 0;
    for (const Series* s : entries) text_w = std::max(text_w, detail::text_width(s->label, kLabel));
    const double w = 8 + kSample + 6 + text_w + 8, h = 6 + kRow * static_cast<double>(entries.size()) + 2;
    const double xs[2] = {left + area_w - kMargin - w, left + kMargin};
    const double ys[2] = {top + kMargin, top + area_h - kMargin - h};
    double best_x = xs[0], best_y = ys[0];
    std::size_t best = std::numeric_limits<std::size_t>::max();
    for (const auto& [cx, cy] : {std::pair{0, 0}, std::pair{1, 0}, std::pair{1, 1}, std::pair{0, 1}}) {
      const double x = xs[cx], y = ys[cy];
      const auto covered = static_cast<std::size_t>(std::count_if(shown.begin(), shown.end(), [&](const auto& p) {
        return p.first >= x && p.first <= x + w && p.second >= y && p.second <= y + h;
      }));
      if (covered < best) {
        best = covered;
        best_x = x;
        best_y = y;
      }
    }
    svg.open("g", {{"class", "legend"}});
    svg.rect(best_x, best_y, w, h,
             {{"fill", "#ffffff"}, {"fill-opacity", "0.8"}, {"stroke", "#cccccc"}, {"stroke-width", "0.8"}});
    for (std::size_t i = 0; i < entries.size(); ++i) {
      const Series& s = *entries[i];
      const double y = best_y + 6 + kRow * (static_cast<double>(i) + 0.5);
      if (s.scatter) {
        svg.circle(best_x + 8 + kSample / 2, y, kRadius, {{"fill", s.color}});
      } else {
        Svg::Attrs style = {{"stroke", s.color}, {"stroke-width", detail::svg_number(kLineWidth)}};
        if (!s.dash.empty()) style.emplace_back("stroke-dasharray", s.dash);
        svg.line(best_x + 8, y, best_x + 8 + kSample, y, style);
      }
      svg.text(best_x + 8 + kSample + 6, y + kLabel * 0.35, s.label, {{"class", "legend-label"}});
    }
    svg.close();
  }
  svg.close();
  return svg;
}

}  // namespace heed

#include "heed/detail/header_end.hpp"
