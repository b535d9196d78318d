// heed/viz/colormap.hpp — matplotlib's sequential colour maps, as "#rrggbb" strings.
//
//   auto reds = heed::colormap("Reds");
//   reds(0.0) == "#fff5f0"; reds(0.5) == "#fb6a4a"; reds(1.0) == "#67000d"
//
// Each map is piecewise linear between evenly spaced anchors: "Reds" and "Blues" take
// the 9-class ColorBrewer anchors that matplotlib's _cm.py uses, "viridis" the 10
// colours matplotlib gives at linspace(0, 1, 10). matplotlib then quantises to a
// 256-entry table; this does not, so it agrees within one table step (and exactly at
// the anchors of Reds and Blues).
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "heed/core/error.hpp"

namespace heed {

class Colormap {
 public:
  using Rgb = std::array<std::uint8_t, 3>;

  /// At least two anchors, the first for t = 0 and the last for t = 1.
  Colormap(std::string name, std::vector<Rgb> anchors) : name_(std::move(name)), anchors_(std::move(anchors)) {
    HEED_CHECK(anchors_.size() >= 2, ValueError, "Colormap: '", name_, "' needs at least 2 anchors, got ",
               anchors_.size());
  }

  const std::string& name() const { return name_; }
  /// Number of anchors; the map is linear between t = k / (num_anchors() - 1).
  std::size_t num_anchors() const { return anchors_.size(); }

  /// The colour at t, clamped to [0, 1], as matplotlib clamps out-of-range data.
  Rgb rgb(double t) const {
    HEED_CHECK(!std::isnan(t), ValueError, "Colormap: '", name_, "' got NaN");
    const double x = std::fmin(std::fmax(t, 0.0), 1.0) * static_cast<double>(anchors_.size() - 1);
    const std::size_t i = std::min(static_cast<std::size_t>(x), anchors_.size() - 2);
    const double f = x - static_cast<double>(i);
    Rgb out{};
    for (int c = 0; c < 3; ++c)
      out[c] = static_cast<std::uint8_t>(std::lround(anchors_[i][c] + f * (anchors_[i + 1][c] - anchors_[i][c])));
    return out;
  }

  /// The colour at t as "#rrggbb" (lower case).
  std::string operator()(double t) const {
    static constexpr char kHex[] = "0123456789abcdef";
    std::string out = "#";
    for (std::uint8_t v : rgb(t)) {
      out += kHex[v >> 4];
      out += kHex[v & 15];
    }
    return out;
  }

 private:
  std::string name_;
  std::vector<Rgb> anchors_;
};

/// Names colormap() knows, in alphabetical order.
inline std::vector<std::string> colormap_names() { return {"Blues", "Reds", "viridis"}; }

/// The named map; unknown names throw ValueError listing the known ones.
inline Colormap colormap(const std::string& name) {
  if (name == "Reds")
    return Colormap(name, {{{0xff, 0xf5, 0xf0}},
                           {{0xfe, 0xe0, 0xd2}},
                           {{0xfc, 0xbb, 0xa1}},
                           {{0xfc, 0x92, 0x72}},
                           {{0xfb, 0x6a, 0x4a}},
                           {{0xef, 0x3b, 0x2c}},
                           {{0xcb, 0x18, 0x1d}},
                           {{0xa5, 0x0f, 0x15}},
                           {{0x67, 0x00, 0x0d}}});
  if (name == "Blues")
    return Colormap(name, {{{0xf7, 0xfb, 0xff}},
                           {{0xde, 0xeb, 0xf7}},
                           {{0xc6, 0xdb, 0xef}},
                           {{0x9e, 0xca, 0xe1}},
                           {{0x6b, 0xae, 0xd6}},
                           {{0x42, 0x92, 0xc6}},
                           {{0x21, 0x71, 0xb5}},
                           {{0x08, 0x51, 0x9c}},
                           {{0x08, 0x30, 0x6b}}});
  if (name == "viridis")
    return Colormap(name, {{{0x44, 0x01, 0x54}},
                           {{0x48, 0x28, 0x78}},
                           {{0x3e, 0x49, 0x89}},
                           {{0x31, 0x68, 0x8e}},
                           {{0x26, 0x82, 0x8e}},
                           {{0x1f, 0x9e, 0x89}},
                           {{0x35, 0xb7, 0x79}},
                           {{0x6e, 0xce, 0x58}},
                           {{0xb5, 0xde, 0x2b}},
                           {{0xfd, 0xe7, 0x25}}});
  std::string known;
  for (const std::string& n : colormap_names()) known += (known.empty() ? "" : ", ") + n;
  throw ValueError("colormap: unknown name '" + name + "' (known: " + known + ")");
}

}  // namespace heed
