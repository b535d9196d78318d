// The viz layer: SVG writer, colour maps, d2l's show_heatmaps and plot. Documents are
// checked with a small XML parser below: well-formed, then queried by element and class.
#include "check.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <locale>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

using Catch::Matchers::Contains;
namespace fs = std::filesystem;

namespace {

// ---- a minimal XML reader: enough to prove well-formedness and query the result ----

struct Node {
  std::string name;
  std::map<std::string, std::string> attrs;  // values decoded
  std::string text;                          // the decoded text directly inside
};

bool is_name_char(char c, bool first) {
  return std::isalpha(static_cast<unsigned char>(c)) || c == '_' || c == ':' ||
         (!first && (std::isdigit(static_cast<unsigned char>(c)) || c == '-' || c == '.'));
}

// Decodes s, whose entities must be the five predefined ones or numeric references;
// raw '<' is refused. Appends an error to `error` otherwise.
std::string decode(const std::string& s, std::string& error) {
  static const std::map<std::string, char> kEntities = {
      {"amp", '&'}, {"lt", '<'}, {"gt", '>'}, {"quot", '"'}, {"apos", '\''}};
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '<') error += "raw '<' in text or attribute; ";
    if (s[i] != '&') {
      out += s[i];
      continue;
    }
    const std::size_t end = s.find(';', i);
    if (end == std::string::npos) {
      error += "unterminated entity; ";
      return out;
    }
    const std::string name = s.substr(i + 1, end - i - 1);
    if (kEntities.count(name)) {
      out += kEntities.at(name);
    } else if (name.size() > 1 && name[0] == '#' &&
               name.find_first_not_of(name[1] == 'x' ? "0123456789abcdefABCDEF" : "0123456789",
                                      name[1] == 'x' ? 2 : 1) == std::string::npos) {
      out += '?';  // numeric references are valid; their value does not matter here
    } else {
      error += "bad entity &" + name + "; ";
    }
    i = end;
  }
  return out;
}

// Parses doc into elements in document order; `error` is empty iff it is well-formed
// XML with exactly one root, an <svg> with the SVG namespace.
std::vector<Node> parse(const std::string& doc, std::string& error) {
  std::vector<Node> nodes;
  std::vector<std::size_t> stack;  // indices into nodes of the open elements
  int roots = 0;
  std::size_t i = 0;
  while (i < doc.size() && error.empty()) {
    if (doc[i] != '<') {
      const std::size_t end = std::min(doc.find('<', i), doc.size());
      const std::string text = decode(doc.substr(i, end - i), error);
      if (stack.empty() && text.find_first_not_of(" \t\r\n") != std::string::npos) error += "text outside the root; ";
      if (!stack.empty()) nodes[stack.back()].text += text;
      i = end;
      continue;
    }
    const bool closing = i + 1 < doc.size() && doc[i + 1] == '/';
    std::size_t j = i + (closing ? 2 : 1);
    const std::size_t name_start = j;
    while (j < doc.size() && is_name_char(doc[j], j == name_start)) ++j;
    const std::string name = doc.substr(name_start, j - name_start);
    if (name.empty()) {
      error += "bad tag name at " + std::to_string(i) + "; ";
      break;
    }
    if (closing) {
      if (stack.empty() || nodes[stack.back()].name != name) error += "mismatched </" + name + ">; ";
      if (!stack.empty()) stack.pop_back();
      if (j >= doc.size() || doc[j] != '>') error += "bad closing tag </" + name + ">; ";
      i = j + 1;
      continue;
    }
    Node node{name, {}, {}};
    bool self_closing = false;
    while (error.empty()) {
      const std::size_t before = j;
      while (j < doc.size() && std::isspace(static_cast<unsigned char>(doc[j]))) ++j;
      if (j >= doc.size()) {
        error += "unterminated <" + name + ">; ";
      } else if (doc[j] == '>' || doc.compare(j, 2, "/>") == 0) {
        self_closing = doc[j] == '/';
        j += self_closing ? 2 : 1;
        break;
      } else {
        const std::size_t attr_start = j;
        while (j < doc.size() && is_name_char(doc[j], j == attr_start)) ++j;
        const std::string attr = doc.substr(attr_start, j - attr_start);
        if (attr.empty() || j == before || j + 1 >= doc.size() || doc[j] != '=' ||
            (doc[j + 1] != '"' && doc[j + 1] != '\'')) {
          error += "bad or unquoted attribute in <" + name + ">; ";
          break;
        }
        const char quote = doc[j + 1];
        const std::size_t end = doc.find(quote, j + 2);
        if (end == std::string::npos) {
          error += "unterminated attribute value; ";
          break;
        }
        if (node.attrs.count(attr)) error += "duplicate attribute " + attr + "; ";
        node.attrs[attr] = decode(doc.substr(j + 2, end - j - 2), error);
        j = end + 1;
      }
    }
    if (stack.empty() && ++roots > 1) error += "more than one root; ";
    nodes.push_back(node);
    if (!self_closing) stack.push_back(nodes.size() - 1);
    i = j;
  }
  if (!stack.empty()) error += "unclosed <" + nodes[stack.back()].name + ">; ";
  if (error.empty() && (nodes.empty() || nodes[0].name != "svg" || roots != 1 ||
                        nodes[0].attrs["xmlns"] != "http://www.w3.org/2000/svg"))
    error += "the root is not one <svg xmlns=\"http://www.w3.org/2000/svg\">; ";
  return nodes;
}

// The elements of a well-formed document (fails the test otherwise).
std::vector<Node> parse_ok(const std::string& doc) {
  std::string error;
  auto nodes = parse(doc, error);
  INFO(doc.substr(0, 2000));
  REQUIRE(error == "");
  return nodes;
}

std::vector<Node> with_class(const std::vector<Node>& nodes, const std::string& cls) {
  std::vector<Node> out;
  for (const Node& n : nodes)
    if (n.attrs.count("class") && n.attrs.at("class") == cls) out.push_back(n);
  return out;
}

std::vector<std::string> texts(const std::vector<Node>& nodes) {
  std::vector<std::string> out;
  for (const Node& n : nodes) out.push_back(n.text);
  return out;
}

template <typename T>
heed::Tensor<T> ramp(const heed::Shape& shape) {
  std::vector<T> v(static_cast<std::size_t>(shape.numel()));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<T>(std::sin(0.7 * static_cast<double>(i)));
  return heed::Tensor<T>(v, shape);
}

// A fresh empty directory, removed at scope exit.
struct TempDir {
  fs::path path;
  TempDir() {
    path = fs::temp_directory_path() / ("heed_viz_" + std::to_string(std::random_device{}()));
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
  std::vector<std::string> entries() const {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(path)) out.push_back(e.path().filename().string());
    return out;
  }
};

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

// ---- the XML checker itself --------------------------------------------------------

TEST_CASE("the test's XML checker refuses malformed documents", "[viz]") {
  const std::string head = "<svg xmlns=\"http://www.w3.org/2000/svg\">";
  for (const std::string& bad :
       {head + "<g></svg>", head + "</g></svg>", head + "<rect x=1/></svg>", head + "<text>a & b</text></svg>",
        head + "<text>&nbsp;</text></svg>", head + "</svg><svg xmlns=\"http://www.w3.org/2000/svg\"></svg>",
        std::string("<svg></svg>"), head + "<rect x=\"1\" x=\"2\"/></svg>", head}) {
    std::string error;
    parse(bad, error);
    INFO(bad);
    CHECK(error != "");
  }
  std::string error;
  const auto nodes = parse(head + "<g a='1'><text>x &lt; y &#38; z</text></g></svg>", error);
  CHECK(error == "");
  REQUIRE(nodes.size() == 3);
  CHECK(nodes[2].text == "x < y ? z");
}

// ---- Svg -----------------------------------------------------------------------------

TEST_CASE("Svg escapes text and attributes and prints compact numbers", "[viz]") {
  heed::Svg svg(120.5, 80);
  svg.open("g", {{"data-note", "\"q\" & 'k' <x>"}})
      .rect(1.004, 2.5, 10, -0.25)
      .text(3, 4, "a < b & c > \"d\" 'e'")
      .close();
  const std::string doc = svg.str();
  const auto nodes = parse_ok(doc);
  CHECK(nodes[0].attrs.at("width") == "120.5");
  CHECK(nodes[0].attrs.at("viewBox") == "0 0 120.5 80");
  CHECK(nodes[1].attrs.at("data-note") == "\"q\" & 'k' <x>");
  CHECK(nodes[2].attrs.at("x") == "1");
  CHECK(nodes[2].attrs.at("y") == "2.5");
  CHECK(nodes[2].attrs.at("height") == "-0.25");
  CHECK(nodes[3].text == "a < b & c > \"d\" 'e'");
  CHECK_THAT(doc, Contains("a &lt; b &amp; c &gt; &quot;d&quot; &apos;e&apos;"));
  CHECK(heed::detail::svg_number(-0.001) == "0");
  CHECK(heed::detail::svg_number(1234567.891) == "1234567.89");
  CHECK(heed::detail::svg_number(-7.1) == "-7.1");
}

TEST_CASE("numbers keep a decimal point whatever the global locale", "[viz]") {
  struct Comma : std::numpunct<char> {
    char do_decimal_point() const override { return ','; }
  };
  const std::locale previous = std::locale::global(std::locale(std::locale::classic(), new Comma));
  std::ostringstream probe;
  probe << 0.5;
  const std::string probed = probe.str();
  const std::string fixed = heed::detail::format_number(0.25, 0, 2), general = heed::detail::format_number(0.125, 3);
  const std::string coordinate = heed::detail::svg_number(2.5);
  std::locale::global(previous);
  CHECK(probed == "0,5");  // the global locale did change
  CHECK(fixed == "0.25");
  CHECK(general == "0.125");
  CHECK(coordinate == "2.5");
}

TEST_CASE("Svg refuses unbalanced elements, bad sizes and non-finite coordinates", "[viz]") {
  heed::Svg svg(10, 10);
  CHECK_ERROR(heed::ValueError, "Svg: close()", svg.close());
  svg.open("g");
  CHECK_ERROR(heed::ValueError, "<g> was never closed", svg.str());
  CHECK_ERROR(heed::ValueError, "Svg: size", heed::Svg(0, 10));
  CHECK_ERROR(heed::ValueError, "Svg: coordinate", heed::Svg(5, 5).line(0, 0, std::nan(""), 1));
}

TEST_CASE("Svg::save writes atomically and reports the path on failure", "[viz]") {
  TempDir dir;
  heed::Svg svg(20, 10);
  svg.rect(0, 0, 20, 10, {{"fill", "#fff5f0"}}).text(2, 8, "<&>");
  const fs::path file = dir.path / "picture.svg";

  SECTION("the file reads back as str() and no temporary is left") {
    svg.save(file.string());
    CHECK(read_file(file) == svg.str());
    CHECK(dir.entries() == std::vector<std::string>{"picture.svg"});
    heed::Svg other(5, 5);  // replaces an existing file
    other.save(file.string());
    CHECK(read_file(file) == other.str());
    CHECK(dir.entries() == std::vector<std::string>{"picture.svg"});
  }
  SECTION("a missing directory throws naming the path and leaves nothing") {
    const fs::path missing = dir.path / "no_such_dir" / "picture.svg";
    CHECK_ERROR(heed::ValueError, missing.string(), svg.save(missing.string()));
    CHECK_ERROR(heed::ValueError, "Svg::save", svg.save(missing.string()));
    CHECK_ERROR(heed::ValueError, "No such file or directory", svg.save(missing.string()));
    CHECK_ERROR(heed::ValueError, "Svg::save: " + missing.string() + ": cannot create the temporary file '",
                svg.save(missing.string()));
    CHECK(dir.entries().empty());
  }
  SECTION("a directory in the way of the file throws and removes the temporary") {
    fs::create_directory(file);
    CHECK_ERROR(heed::ValueError, "Svg::save: " + file.string() + ": cannot rename '" + file.string() + ".tmp-",
                svg.save(file.string()));
    CHECK(dir.entries() == std::vector<std::string>{"picture.svg"});
    CHECK(fs::is_directory(file));
  }
}

#if !defined(_WIN32)
TEST_CASE("Svg::save removes what killed saves to its target left behind, and nothing else", "[viz]") {
  TempDir dir;
  const fs::path file = dir.path / "picture.svg";
  const std::string dead = std::to_string(std::numeric_limits<int>::max() - 1);  // past any pid_max
  const auto write = [&](const std::string& name, const std::string& text) {
    std::ofstream(dir.path / name, std::ios::binary) << text;
  };
  write("picture.svg", "<svg>the old picture</svg>\n");
  write("picture.svg.tmp-" + dead + "-0", "<svg><rect");  // a save killed halfway
  // Another target's, and names heed's saves do not make.
  const std::vector<std::string> kept = {"other.svg.tmp-" + dead + "-0", "picture.svg.tmp-" + dead + "-0.bak",
                                         "picture.svg." + dead + ".tmp"};
  for (const std::string& name : kept) write(name, "keep");

  heed::Svg svg(30, 20);
  svg.circle(15, 10, 5, {{"fill", "#67000d"}});
  svg.save(file.string());
  CHECK(read_file(file) == svg.str());
  std::vector<std::string> expected = kept;
  expected.push_back("picture.svg");
  std::sort(expected.begin(), expected.end());
  std::vector<std::string> entries = dir.entries();
  std::sort(entries.begin(), entries.end());
  CHECK(entries == expected);
  for (const std::string& name : kept) CHECK(read_file(dir.path / name) == "keep");
}
#endif

// ---- colour maps ---------------------------------------------------------------------

TEST_CASE("Reds and Blues match matplotlib's ColorBrewer anchors", "[viz]") {
  const auto reds = heed::colormap("Reds");
  const auto blues = heed::colormap("Blues");
  const std::vector<std::string> reds_anchors = {"#fff5f0", "#fee0d2", "#fcbba1", "#fc9272", "#fb6a4a",
                                                 "#ef3b2c", "#cb181d", "#a50f15", "#67000d"};
  const std::vector<std::string> blues_anchors = {"#f7fbff", "#deebf7", "#c6dbef", "#9ecae1", "#6baed6",
                                                  "#4292c6", "#2171b5", "#08519c", "#08306b"};
  for (std::size_t k = 0; k < 9; ++k) {
    INFO("anchor " << k);
    CHECK(reds(static_cast<double>(k) / 8) == reds_anchors[k]);
    CHECK(blues(static_cast<double>(k) / 8) == blues_anchors[k]);
  }
  CHECK(reds.num_anchors() == 9);
  // Halfway between two anchors, each channel the rounded mean: (255+254)/2, (245+224)/2, (240+210)/2.
  CHECK(reds(1.0 / 16) == "#ffebe1");
  CHECK(blues(15.0 / 16) == "#084184");  // (8+8)/2, (0x51+0x30)/2, (0x9c+0x6b)/2
  CHECK(reds(-3) == "#fff5f0");          // clamped, as matplotlib clamps
  CHECK(reds(7) == "#67000d");
  const auto viridis = heed::colormap("viridis");
  CHECK(viridis(0) == "#440154");
  CHECK(viridis(1) == "#fde725");
  CHECK(viridis(5.0 / 9) == "#1f9e89");
}

TEST_CASE("colormap names the known maps for an unknown name, and refuses NaN", "[viz]") {
  CHECK_ERROR(heed::ValueError, "colormap: unknown name 'Redz' (known: Blues, Reds, viridis)", heed::colormap("Redz"));
  CHECK_ERROR(heed::ValueError, "NaN", heed::colormap("Reds")(std::nan("")));
}

// ---- show_heatmaps -------------------------------------------------------------------

TEMPLATE_TEST_CASE("show_heatmaps draws one cell per weight on one shared colour scale", "[viz]", float, double) {
  auto m = ramp<TestType>({2, 3, 4, 5});
  m.data()[37] = TestType(2);   // the maximum
  m.data()[90] = TestType(-2);  // the minimum
  const std::string doc = heed::show_heatmaps(m, "Keys", "Queries").str();
  const auto nodes = parse_ok(doc);
  const auto cells = with_class(nodes, "cell");
  REQUIRE(cells.size() == 2 * 3 * 4 * 5);
  for (const Node& c : cells) CHECK(c.name == "rect");
  // Cells come in row-major order of the tensor.
  CHECK(cells[37].attrs.at("fill") == "#67000d");
  CHECK(cells[90].attrs.at("fill") == "#fff5f0");
  CHECK(cells[37].attrs.at("fill") == heed::colormap("Reds")(1));
  CHECK(cells[90].attrs.at("fill") == heed::colormap("Reds")(0));
  // Labels as d2l: x under each of the 3 bottom panels, y left of each of the 2 rows.
  CHECK(texts(with_class(nodes, "xlabel")) == std::vector<std::string>(3, "Keys"));
  CHECK(texts(with_class(nodes, "ylabel")) == std::vector<std::string>(2, "Queries"));
  CHECK(with_class(nodes, "title").empty());
  // One colour bar, labelled at min, middle and max.
  CHECK(with_class(nodes, "colorbar").size() == 1);
  CHECK(texts(with_class(nodes, "colorbar-tick")) == std::vector<std::string>{"-2", "0", "2"});
  // d2l's default figsize (2.5, 2.5) at 100 px per inch.
  CHECK(nodes[0].attrs.at("width") == "250");
  CHECK(nodes[0].attrs.at("height") == "250");
}

TEST_CASE("show_heatmaps puts titles over every panel and escapes labels", "[viz]") {
  const auto m = ramp<float>({2, 2, 3, 3});
  const auto svg = heed::show_heatmaps(m, "keys <&>", "\"queries\"", {"Head 1", "Head <2>"}, {5, 4}, "Blues");
  const std::string doc = svg.str();
  const auto nodes = parse_ok(doc);
  CHECK(texts(with_class(nodes, "title")) == std::vector<std::string>{"Head 1", "Head <2>", "Head 1", "Head <2>"});
  CHECK(texts(with_class(nodes, "xlabel")) == std::vector<std::string>(2, "keys <&>"));
  CHECK(texts(with_class(nodes, "ylabel")) == std::vector<std::string>(2, "\"queries\""));
  CHECK_THAT(doc, Contains("keys &lt;&amp;&gt;"));
  CHECK_THAT(doc, !Contains("<&>"));
  CHECK(svg.width() == 500);
  CHECK(svg.height() == 400);
  // Blues: the extremes get its end colours.
  const auto cells = with_class(nodes, "cell");
  std::vector<std::string> fills;
  for (const Node& c : cells) fills.push_back(c.attrs.at("fill"));
  CHECK(std::count(fills.begin(), fills.end(), "#f7fbff") >= 1);
  CHECK(std::count(fills.begin(), fills.end(), "#08306b") >= 1);
}

TEST_CASE("show_heatmaps labels integer ticks within each axis", "[viz]") {
  const auto nodes = parse_ok(heed::show_heatmaps(ramp<double>({1, 1, 10, 10}), "Keys", "Queries").str());
  const auto xt = texts(with_class(nodes, "xtick")), yt = texts(with_class(nodes, "ytick"));
  REQUIRE(xt.size() >= 2);
  REQUIRE(yt.size() >= 2);
  CHECK(xt[0] == "0");
  CHECK(yt[0] == "0");
  for (const auto& t : xt) CHECK(std::stoi(t) < 10);
  CHECK(std::stoi(xt[1]) - std::stoi(xt[0]) == std::stoi(xt.back()) / static_cast<int>(xt.size() - 1));
}

TEST_CASE("show_heatmaps grows a figure too small for its grid, and handles constant input", "[viz]") {
  const auto svg = heed::show_heatmaps(heed::zeros({3, 4, 12, 12}), "k", "q", {}, {0.5, 0.5});
  const auto nodes = parse_ok(svg.str());
  CHECK(svg.width() > 4 * 12 * 2);
  CHECK(svg.height() > 3 * 12 * 2);
  const auto cells = with_class(nodes, "cell");
  REQUIRE(cells.size() == 3 * 4 * 12 * 12);
  for (const Node& c : cells) CHECK(c.attrs.at("fill") == "#fff5f0");
  CHECK(texts(with_class(nodes, "colorbar-tick")) == std::vector<std::string>{"0"});
}

TEST_CASE("show_heatmaps validates its arguments and names itself", "[viz]") {
  CHECK_ERROR(heed::ShapeError, "show_heatmaps: matrices must be 4-D",
              heed::show_heatmaps(heed::zeros({2, 3, 4}), "", ""));
  CHECK_ERROR(heed::ShapeError, "(2, 3, 4)", heed::show_heatmaps(heed::zeros({2, 3, 4}), "", ""));
  CHECK_ERROR(heed::ShapeError, "show_heatmaps: matrices has a zero-size dim: shape (1, 0, 2, 2)",
              heed::show_heatmaps(heed::zeros({1, 0, 2, 2}), "", ""));
  CHECK_ERROR(heed::ValueError, "show_heatmaps: 2 titles for 3 columns",
              heed::show_heatmaps(heed::zeros({1, 3, 2, 2}), "", "", {"a", "b"}));
  CHECK_ERROR(heed::ValueError, "show_heatmaps: figsize",
              heed::show_heatmaps(heed::zeros({1, 1, 2, 2}), "", "", {}, {0, 1}));
  CHECK_ERROR(heed::ValueError, "unknown name 'hot'",
              heed::show_heatmaps(heed::zeros({1, 1, 2, 2}), "", "", {}, {2.5, 2.5}, "hot"));
  CHECK_ERROR(heed::ValueError, "show_heatmaps: matrices is an undefined tensor",
              heed::show_heatmaps(heed::Tensorf(), "", ""));
  auto m = heed::zeros<double>({2, 2, 3, 4});
  m.at({1, 0, 2, 3}) = std::numeric_limits<double>::quiet_NaN();
  CHECK_ERROR(heed::ValueError, "show_heatmaps: non-finite value nan at index (1, 0, 2, 3)",
              heed::show_heatmaps(m, "", ""));
  m.at({1, 0, 2, 3}) = 0;
  m.at({0, 1, 0, 1}) = -std::numeric_limits<double>::infinity();
  CHECK_ERROR(heed::ValueError, "-inf at index (0, 1, 0, 1)", heed::show_heatmaps(m, "", ""));
}

TEST_CASE("show_heatmaps names every key and query with its token and every row of the grid", "[viz]") {
  heed::HeatmapOptions options;
  options.xlabel = "Keys";
  options.ylabel = "Queries";
  options.xticklabels = {"i'm", "home", ".", "<eos>"};
  options.yticklabels = {"je", "suis", "chez", "moi", ".", "<eos>"};
  options.titles = {"head 1", "head 2"};
  options.row_titles = {"layer 1", "layer 2"};
  options.figsize = {8, 6};
  const std::string doc = heed::show_heatmaps(ramp<float>({2, 2, 6, 4}), options).str();
  const auto nodes = parse_ok(doc);
  // x tick labels under each of the 2 bottom panels, y tick labels left of each of the 2 rows.
  std::vector<std::string> xt, yt;
  for (int panel = 0; panel < 2; ++panel) {
    xt.insert(xt.end(), options.xticklabels.begin(), options.xticklabels.end());
    yt.insert(yt.end(), options.yticklabels.begin(), options.yticklabels.end());
  }
  CHECK(texts(with_class(nodes, "xtick")) == xt);
  CHECK(texts(with_class(nodes, "ytick")) == yt);
  for (const Node& n : with_class(nodes, "xtick")) CHECK(n.name == "text");
  CHECK(texts(with_class(nodes, "row-title")) == std::vector<std::string>{"layer 1", "layer 2"});
  CHECK(texts(with_class(nodes, "title")) == std::vector<std::string>{"head 1", "head 2", "head 1", "head 2"});
  // Escaped in the document: the apostrophe and the angle brackets.
  CHECK_THAT(doc, Contains(">i&apos;m</text>"));
  CHECK_THAT(doc, Contains(">&lt;eos&gt;</text>"));
  CHECK_THAT(doc, Contains(">layer 1</text>"));
  CHECK_THAT(doc, !Contains("<eos>"));
  // Short tokens in wide cells read across: none turned.
  for (const Node& n : with_class(nodes, "xtick")) CHECK(n.attrs.count("transform") == 0);
  // Without names, the integer ticks and the figure are what d2l's call gives.
  heed::HeatmapOptions plain;
  plain.xlabel = "Keys", plain.ylabel = "Queries";
  CHECK(heed::show_heatmaps(ramp<float>({2, 3, 4, 5}), plain).str() ==
        heed::show_heatmaps(ramp<float>({2, 3, 4, 5}), "Keys", "Queries").str());
}

TEST_CASE("show_heatmaps keeps many long tick labels readable, none skipped", "[viz]") {
  // 40 keys and queries in a small figure: every label drawn, in a font of 6 px at least,
  // the long ones turned a quarter, the cells grown so that the rows stay apart.
  std::vector<std::string> labels;
  for (int i = 0; i < 40; ++i) labels.push_back("token" + std::to_string(i));
  heed::HeatmapOptions options;
  options.xticklabels = labels;
  options.yticklabels = labels;
  const auto svg = heed::show_heatmaps(ramp<double>({1, 1, 40, 40}), options);
  const auto nodes = parse_ok(svg.str());
  const auto xt = with_class(nodes, "xtick"), yt = with_class(nodes, "ytick");
  CHECK(texts(xt) == labels);
  CHECK(texts(yt) == labels);
  for (const Node& n : xt) {
    CHECK(std::stod(n.attrs.at("font-size")) >= 6);
    CHECK_THAT(n.attrs.at("transform"), Contains("rotate(-90"));
  }
  // Neighbouring rows are at least a font size apart.
  const double font = std::stod(yt[0].attrs.at("font-size"));
  CHECK(font >= 6);
  CHECK(std::stod(yt[1].attrs.at("y")) - std::stod(yt[0].attrs.at("y")) >= font);
  CHECK(svg.height() >= 40 * font);
}

TEST_CASE("show_heatmaps refuses label lists that do not match the matrices", "[viz]") {
  const auto m = heed::zeros<float>({2, 3, 4, 5});
  heed::HeatmapOptions options;
  options.xticklabels = {"a", "b", "c", "d"};
  CHECK_ERROR(heed::ValueError, "show_heatmaps: 4 x tick labels for 5 keys (shape (2, 3, 4, 5))",
              heed::show_heatmaps(m, options));
  options.xticklabels.clear();
  options.yticklabels = {"a", "b", "c", "d", "e"};
  CHECK_ERROR(heed::ValueError, "show_heatmaps: 5 y tick labels for 4 queries", heed::show_heatmaps(m, options));
  options.yticklabels.clear();
  options.row_titles = {"layer 1"};
  CHECK_ERROR(heed::ValueError, "show_heatmaps: 1 row titles for 2 rows", heed::show_heatmaps(m, options));
  options.row_titles.clear();
  options.titles = {"head 1"};
  CHECK_ERROR(heed::ValueError, "show_heatmaps: 1 titles for 3 columns", heed::show_heatmaps(m, options));
  options.titles.clear();
  options.cmap = "hot";
  CHECK_ERROR(heed::ValueError, "unknown name 'hot'", heed::show_heatmaps(m, options));
}

// ---- Plot ----------------------------------------------------------------------------

TEST_CASE("a plot with two labelled series has two polylines and a legend of both", "[viz]") {
  std::vector<double> x, y1, y2;
  for (int i = 0; i <= 50; ++i) {
    x.push_back(0.1 * i);
    y1.push_back(2 * std::sin(x.back()) + std::pow(x.back(), 0.8));
    y2.push_back(std::cos(x.back()));
  }
  heed::Plot plot;
  plot.line(x, y1, "Truth").line(x, y2, "Pred <&>", "m--").xlabel("x").ylabel("y").title("Nadaraya-Watson");
  const auto svg = plot.render();
  const auto nodes = parse_ok(svg.str());
  const auto lines = with_class(nodes, "series");
  REQUIRE(lines.size() == 2);
  CHECK(lines[0].name == "polyline");
  CHECK(lines[0].attrs.at("stroke") == "#1f77b4");  // tab10's first colour
  CHECK(lines[0].attrs.count("stroke-dasharray") == 0);
  CHECK(lines[1].attrs.at("stroke") == "#bf00bf");  // matplotlib's 'm'
  CHECK(lines[1].attrs.at("stroke-dasharray") == "5.55,2.4");
  CHECK(with_class(nodes, "legend").size() == 1);
  CHECK(texts(with_class(nodes, "legend-label")) == std::vector<std::string>{"Truth", "Pred <&>"});
  CHECK(texts(with_class(nodes, "xlabel")) == std::vector<std::string>{"x"});
  CHECK(texts(with_class(nodes, "ylabel")) == std::vector<std::string>{"y"});
  CHECK(texts(with_class(nodes, "title")) == std::vector<std::string>{"Nadaraya-Watson"});
  CHECK(svg.width() == 350);  // d2l's figsize (3.5, 2.5)
  CHECK(svg.height() == 250);
}

TEST_CASE("plot styles, colours, scatter and tensor series", "[viz]") {
  heed::Plot plot;
  const auto xs = heed::tensor<float>({0.f, 1.f, 2.f});
  plot.scatter(xs, xs * 2.f, "dots").line(xs, xs, "", "-.").line(xs, xs + 1.f, "", ":").line(xs, xs - 1.f, "", "k");
  const auto nodes = parse_ok(plot.render().str());
  const auto lines = with_class(nodes, "series");
  REQUIRE(lines.size() == 3);
  CHECK(lines[0].attrs.at("stroke") == "#ff7f0e");  // the scatter took the first colour
  CHECK(lines[0].attrs.at("stroke-dasharray") == "9.6,2.4,1.5,2.4");
  CHECK(lines[1].attrs.at("stroke") == "#2ca02c");
  CHECK(lines[1].attrs.at("stroke-dasharray") == "1.5,2.48");
  CHECK(lines[2].attrs.at("stroke") == "#000000");
  const auto points = with_class(nodes, "point");
  REQUIRE(points.size() == 3);
  CHECK(points[0].attrs.at("fill") == "#1f77b4");
  CHECK(texts(with_class(nodes, "legend-label")) == std::vector<std::string>{"dots"});
  CHECK(heed::Plot().line({1, 2}, {3, 4}).render().str().find("legend") == std::string::npos);
}

TEST_CASE("plot ticks are nice numbers within the limits", "[viz]") {
  const std::vector<std::pair<double, double>> limits = {{0, 1},     {-3.7, 12.2}, {1e-3, 2e-3}, {100, 1e5},
                                                         {-1, 5},    {0.1, 0.3},   {-50, -49.9}, {1e6, 3e7},
                                                         {2.5, 2.6}, {-1e-7, 1e-7}};
  for (const auto& [lo, hi] : limits) {
    for (const auto& figsize : {std::pair{3.5, 2.5}, std::pair{8.0, 6.0}, std::pair{1.0, 1.0}}) {
      heed::Plot plot;
      plot.line({lo, hi}, {lo, hi}).xlim(lo, hi).ylim(lo, hi).figsize(figsize.first, figsize.second);
      const auto nodes = parse_ok(plot.render().str());
      for (const char* axis : {"xtick", "ytick"}) {
        INFO(axis << " for limits " << lo << ", " << hi << ", figsize " << figsize.first);
        std::vector<double> ticks;
        for (const auto& t : texts(with_class(nodes, axis))) ticks.push_back(std::stod(t));
        REQUIRE(ticks.size() >= 2);
        CHECK(ticks.size() <= 10);  // matplotlib's locator: at most 9 intervals
        const double step = ticks[1] - ticks[0];
        const double mantissa = step / std::pow(10.0, std::floor(std::log10(step) + 1e-9));
        CHECK((mantissa == Approx(1) || mantissa == Approx(2) || mantissa == Approx(5)));
        const double tol = 1e-9 * (hi - lo);
        for (std::size_t i = 0; i < ticks.size(); ++i) {
          CHECK(ticks[i] >= lo - tol);
          CHECK(ticks[i] <= hi + tol);
          CHECK(ticks[i] / step == Approx(std::round(ticks[i] / step)).margin(1e-6));
          if (i > 0) CHECK(ticks[i] - ticks[i - 1] == Approx(step).epsilon(1e-6));
        }
        // The step is small enough to leave at least one whole interval between the limits.
        CHECK((hi - lo) / step >= 1);
      }
    }
  }
}

TEST_CASE("plot clips what lies outside the limits", "[viz]") {
  heed::Plot plot;
  // In, far out above, back in, then far out to the right.
  plot.line({0, 1, 2, 3, 4, 1e300}, {0, 1e12, 1, 2, 1.5, 1})
      .scatter({0.5, 50, 2}, {0.5, 0.5, -70})
      .xlim(0, 4)
      .ylim(0, 2);
  const auto svg = plot.render();
  const auto nodes = parse_ok(svg.str());
  const auto lines = with_class(nodes, "series");
  REQUIRE(lines.size() == 2);  // split where the line leaves the area and comes back
  CHECK(with_class(nodes, "point").size() == 1);
  // Every drawn vertex stays within 10 px of the clip rectangle, which trims the rest.
  std::size_t clip = 0;
  while (nodes[clip].name != "clipPath") ++clip;
  const auto& area = nodes[clip + 1].attrs;
  const double x0 = std::stod(area.at("x")), y0 = std::stod(area.at("y"));
  const double x1 = x0 + std::stod(area.at("width")), y1 = y0 + std::stod(area.at("height"));
  for (const Node& l : lines) {
    std::istringstream points(l.attrs.at("points"));
    std::string pair;
    while (points >> pair) {
      const double x = std::stod(pair.substr(0, pair.find(','))), y = std::stod(pair.substr(pair.find(',') + 1));
      CHECK(x >= x0 - 10.01);
      CHECK(x <= x1 + 10.01);
      CHECK(y >= y0 - 10.01);
      CHECK(y <= y1 + 10.01);
    }
  }
  bool clipped = false;
  for (const Node& n : nodes)
    clipped |= n.attrs.count("clip-path") && n.attrs.at("clip-path") == "url(#heed-plot-area)";
  CHECK(clipped);
}

TEST_CASE("plot validates its series and limits and names itself", "[viz]") {
  heed::Plot plot;
  CHECK_ERROR(heed::ShapeError, "plot: line 'a': xs has 3 values, ys has 4", plot.line({1, 2, 3}, {1, 2, 3, 4}, "a"));
  CHECK_ERROR(heed::ValueError, "plot: scatter has no points", plot.scatter({}, {}));
  CHECK_ERROR(heed::ValueError, "plot: line: non-finite value nan at ys[1]", plot.line({1, 2}, {0, std::nan("")}));
  CHECK_ERROR(heed::ValueError, "plot: line: non-finite value inf at xs[0]",
              plot.line({std::numeric_limits<double>::infinity(), 2}, {0, 1}));
  CHECK_ERROR(heed::ValueError, "plot: xlim needs finite lo < hi, got (1, 1)", plot.xlim(1, 1));
  CHECK_ERROR(heed::ValueError, "plot: ylim needs finite lo < hi, got (2, -1)", plot.ylim(2, -1));
  CHECK_ERROR(heed::ValueError, "plot: line: unknown style 'x-'", plot.line({1, 2}, {1, 2}, "", "x-"));
  CHECK_ERROR(heed::ValueError, "plot: figsize", plot.figsize(-1, 2));
  CHECK_ERROR(heed::ShapeError, "plot: line xs must be 1-D or a column (n, 1), got shape (2, 2)",
              plot.line(heed::zeros({2, 2}), heed::zeros({2, 2})));
  CHECK_ERROR(heed::ShapeError, "plot: scatter ys must be 1-D or a column (n, 1), got shape (1, 2)",
              plot.scatter(heed::zeros({2}), heed::zeros({1, 2})));
  // Nothing half-added: the plot is still empty and renders empty axes on (0, 1).
  const auto nodes = parse_ok(plot.render().str());
  CHECK(with_class(nodes, "series").empty());
  CHECK(texts(with_class(nodes, "xtick")).front() == "0.0");
  CHECK(texts(with_class(nodes, "xtick")).back() == "1.0");
}

TEST_CASE("plot takes a column (n, 1) as d2l.plot does, the same as its 1-D values", "[viz]") {
  const heed::Tensorf x = heed::arange<float>(0, 5, 1), y = x * x;
  heed::Plot rows, columns;
  rows.line(x, y, "f").scatter(x, y, "s");
  columns.line(x.reshape({5, 1}), y.reshape({5, 1}), "f").scatter(x.reshape({5, 1}), y, "s");
  CHECK(columns.render().str() == rows.render().str());
  const std::vector<float> xf = x.to_vector(), yf = y.to_vector();
  const std::vector<double> xd(xf.begin(), xf.end()), yd(yf.begin(), yf.end());
  heed::Plot vectors;
  vectors.line(xd, yd, "f").scatter(xd, yd, "s");
  CHECK(columns.render().str() == vectors.render().str());
}

TEST_CASE("Plot::save writes the rendered picture", "[viz]") {
  TempDir dir;
  heed::Plot plot;
  plot.line({0, 1}, {1, 0}, "down");
  const fs::path file = dir.path / "plot.svg";
  plot.save(file.string());
  CHECK(read_file(file) == plot.render().str());
  CHECK(dir.entries() == std::vector<std::string>{"plot.svg"});
}
