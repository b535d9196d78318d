// heed/viz/svg.hpp — a small writer of standalone SVG documents.
//
//   heed::Svg svg(200, 100);
//   svg.rect(10, 10, 50, 30, {{"fill", "#fcbba1"}}).text(10, 60, "a < b", {{"font-size", "10"}});
//   svg.save("box.svg");   // written to a temporary file, fsynced, renamed over box.svg
//
// Elements are appended in order; open()/close() nest them (groups, clip paths,
// gradients). Attribute values and text are XML-escaped, coordinates are printed with
// at most 2 decimals, independently of the global locale. Every problem (a non-finite
// coordinate, an unbalanced close(), a failed write) throws heed::ValueError.
#pragma once

#include <cmath>
#include <cstdint>
#include <iomanip>
#include <locale>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "heed/core/error.hpp"
#include "heed/detail/files.hpp"
#include "heed/detail/inline.hpp"

namespace heed {
namespace detail {

/// A coordinate rounded to 2 decimals with trailing zeros dropped: 12, 12.5, -0.25.
/// Integer arithmetic keeps it exact and free of the locale's decimal separator.
inline std::string svg_number(double v) {
  HEED_CHECK(std::isfinite(v) && std::fabs(v) < 1e15, ValueError, "Svg: coordinate ", v,
             " is not finite or out of range");
  std::int64_t n = std::llround(v * 100);
  std::string out = n < 0 ? "-" : "";
  if (n < 0) n = -n;
  out += std::to_string(n / 100);
  if (const int frac = static_cast<int>(n % 100); frac != 0) {
    out += '.';
    out += static_cast<char>('0' + frac / 10);
    if (frac % 10 != 0) out += static_cast<char>('0' + frac % 10);
  }
  return out;
}

/// A label value: `precision` significant digits (%g style), or `decimals` fixed
/// decimals when decimals >= 0; always with '.' whatever the global locale says.
inline std::string format_number(double v, int precision, int decimals = -1) {
  std::ostringstream out;
  out.imbue(std::locale::classic());
  if (v == 0) v = 0;  // no "-0"
  if (decimals >= 0)
    out << std::fixed << std::setprecision(decimals) << v;
  else
    out << std::setprecision(precision) << v;
  return out.str();
}

/// The transform that stands a y-axis label upright, rotated about (x, y).
/// (Built by appending: GCC 12's -Wrestrict misfires on "literal" + std::string&&.)
inline std::string rotate_minus_90(double x, double y) {
  std::string transform = "rotate(-90 ";
  return transform.append(svg_number(x)).append(" ").append(svg_number(y)).append(")");
}

/// Escapes the five XML special characters. Control characters other than tab and
/// newlines are dropped: XML 1.0 forbids them even as character references.
inline std::string xml_escape(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&apos;";
        break;
      default:
        if (static_cast<unsigned char>(c) >= 0x20 || c == '\t' || c == '\n' || c == '\r') out += c;
    }
  }
  return out;
}

/// Approximate rendered width of `s` in a sans-serif font of `font_size` px (UTF-8
/// aware): the layouts use it to reserve room for labels.
inline double text_width(const std::string& s, double font_size) {
  double chars = 0;
  for (char c : s) chars += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return chars * 0.6 * font_size;
}

}  // namespace detail

/// An SVG document of a fixed size in px, built element by element.
class Svg {
 public:
  /// Attribute name/value pairs, written in this order; values are escaped.
  using Attrs = std::vector<std::pair<std::string, std::string>>;

  Svg(double width, double height) : width_(width), height_(height) {
    HEED_CHECK(std::isfinite(width) && std::isfinite(height) && width > 0 && height > 0, ValueError,
               "Svg: size must be positive and finite, got ", width, " x ", height);
  }

  double width() const { return width_; }
  double height() const { return height_; }

  /// An empty element: <tag a="v" …/>.
  Svg& element(const std::string& tag, const Attrs& attrs = {}) {
    write_tag(tag, attrs);
    body_ += "/>\n";
    return *this;
  }
  /// Opens <tag …>; the elements up to the matching close() go inside it.
  Svg& open(const std::string& tag, const Attrs& attrs = {}) {
    write_tag(tag, attrs);
    body_ += ">\n";
    open_.push_back(tag);
    return *this;
  }
  Svg& close() {
    HEED_CHECK(!open_.empty(), ValueError, "Svg: close() without an open element");
    body_ += "</" + open_.back() + ">\n";
    open_.pop_back();
    return *this;
  }

  Svg& rect(double x, double y, double w, double h, const Attrs& attrs = {}) {
    return element("rect", join({{"x", num(x)}, {"y", num(y)}, {"width", num(w)}, {"height", num(h)}}, attrs));
  }
  Svg& line(double x1, double y1, double x2, double y2, const Attrs& attrs = {}) {
    return element("line", join({{"x1", num(x1)}, {"y1", num(y1)}, {"x2", num(x2)}, {"y2", num(y2)}}, attrs));
  }
  Svg& polyline(const std::vector<std::pair<double, double>>& points, const Attrs& attrs = {}) {
    std::string p;
    for (const auto& [x, y] : points) {
      if (!p.empty()) p += ' ';
      p.append(num(x)).append(",").append(num(y));
    }
    return element("polyline", join({{"points", p}}, attrs));
  }
  Svg& circle(double cx, double cy, double r, const Attrs& attrs = {}) {
    return element("circle", join({{"cx", num(cx)}, {"cy", num(cy)}, {"r", num(r)}}, attrs));
  }
  /// <text> at (x, y), the baseline's start unless attrs set text-anchor.
  Svg& text(double x, double y, const std::string& content, const Attrs& attrs = {}) {
    write_tag("text", join({{"x", num(x)}, {"y", num(y)}}, attrs));
    body_.append(">").append(detail::xml_escape(content)).append("</text>\n");
    return *this;
  }
  /// Defines a rectangular clip path; elements refer to it by clip-path="url(#id)".
  Svg& clip_rect(const std::string& id, double x, double y, double w, double h) {
    return open("clipPath", {{"id", id}}).rect(x, y, w, h).close();
  }

  /// The whole document. Every open() must have been closed.
  std::string str() const;

  /// Writes str() to `path` atomically (see detail::save_atomically): into a temporary
  /// file beside it, renamed over `path` only once complete and on disk, so a reader never
  /// sees a half-written picture; also removes what killed saves to `path` left behind.
  void save(const std::string& path) const;

 private:
  static std::string num(double v) { return detail::svg_number(v); }

  static Attrs join(Attrs first, const Attrs& more) {
    first.insert(first.end(), more.begin(), more.end());
    return first;
  }

  void write_tag(const std::string& tag, const Attrs& attrs) {
    body_ += std::string(2 * (open_.size() + 1), ' ') + "<" + tag;
    for (const auto& [name, value] : attrs) body_ += " " + name + "=\"" + detail::xml_escape(value) + "\"";
  }

  double width_, height_;
  std::string body_;               // the elements inside <svg>, one per line
  std::vector<std::string> open_;  // tags opened and not yet closed, innermost last
};

#if HEED_NON_TEMPLATE_DEFINITIONS

HEED_INLINE std::string Svg::str() const {
  HEED_CHECK(open_.empty(), ValueError, "Svg: <", open_.empty() ? "" : open_.back(), "> was never closed");
  std::string doc = "<svg xmlns=\"http://www.w3.org/2000/svg\"";
  doc.append(" width=\"").append(num(width_)).append("\" height=\"").append(num(height_));
  doc.append("\" viewBox=\"0 0 ").append(num(width_)).append(" ").append(num(height_)).append("\">\n");
  return doc.append(body_).append("</svg>\n");
}

HEED_INLINE void Svg::save(const std::string& path) const {
  const std::string doc = str();
  try {
    detail::save_atomically("Svg::save", path,
                            [&doc](const detail::SaveSink& file) { file.write(doc.data(), doc.size()); });
  } catch (const FileError& error) {
    throw ValueError(error.what());  // Svg reports every problem as a ValueError
  }
}

#endif  // HEED_NON_TEMPLATE_DEFINITIONS

}  // namespace heed
