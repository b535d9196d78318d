// Golden reference tensors for the tests, read from the text files under tests/data/
// that the scripts there (make_attention_golden.py, …) write by running d2l's PyTorch code.
//
//   const heed_test::Golden golden("attention_golden.txt");
//   auto x = golden.tensor<float>("ms1.X");                     // float64 on file, read as float
//   auto lens = golden.tensor<std::int64_t>("ms1.valid_lens");
//
// File format, one tensor per line; blank lines and lines starting with '#' are skipped:
//
//   <name> <dtype> <rank> <dim0> ... <dimN-1> : <v0> <v1> ...
//
// dtype is float64 or int64, rank 0 to 6, values row-major. Any malformed line throws
// std::runtime_error naming the file and the line number.
#pragma once

#include <heed/heed.hpp>

#include "check.hpp"

#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#ifndef HEED_TEST_DATA_DIR
#error "HEED_TEST_DATA_DIR must be defined as a string literal: the directory holding the golden files (tests/data)"
#endif

namespace heed_test {

class Golden {
 public:
  /// Reads HEED_TEST_DATA_DIR "/" file_name (an absolute file_name is read as it is).
  explicit Golden(const std::string& file_name) {
    path_ =
        std::filesystem::path(file_name).is_absolute() ? file_name : std::string(HEED_TEST_DATA_DIR) + "/" + file_name;
    std::ifstream in(path_);
    if (!in) throw std::runtime_error("Golden: cannot open " + path_);
    std::string line;
    for (std::size_t number = 1; std::getline(in, line); ++number) parse_line(line, number);
    if (in.bad()) throw std::runtime_error("Golden: error reading " + path_);
  }

  /// The file read, as a path.
  const std::string& path() const { return path_; }

  bool has(const std::string& name) const { return entries_.count(name) != 0; }

  /// The tensor `name`, converted to T (float, double or std::int64_t). float64 values read
  /// as int64 must be whole numbers. An unknown name throws std::runtime_error naming it.
  template <typename T>
  heed::Tensor<T> tensor(const std::string& name) const {
    static_assert(std::is_same_v<T, float> || std::is_same_v<T, double> || std::is_same_v<T, std::int64_t>,
                  "Golden::tensor<T>: T must be float, double or std::int64_t");
    const auto it = entries_.find(name);
    if (it == entries_.end()) throw std::runtime_error("Golden: no tensor named '" + name + "' in " + path_);
    const Entry& e = it->second;
    std::vector<T> values;
    values.reserve(e.is_int ? e.ints.size() : e.reals.size());
    if (e.is_int) {
      for (std::int64_t v : e.ints) values.push_back(static_cast<T>(v));
    } else {
      for (double v : e.reals) {
        if constexpr (std::is_same_v<T, std::int64_t>) {
          if (!(std::isfinite(v) && std::trunc(v) == v))
            throw std::runtime_error("Golden: tensor '" + name + "' in " + path_ +
                                     " holds a value that is not a whole number, read as int64");
        }
        values.push_back(static_cast<T>(v));
      }
    }
    return heed::Tensor<T>(values, e.shape);
  }

  /// Every tensor name, in file order.
  std::vector<std::string> names() const { return order_; }

 private:
  struct Entry {
    bool is_int = false;
    heed::Shape shape;
    std::vector<double> reals;
    std::vector<std::int64_t> ints;
  };

  [[noreturn]] void fail(std::size_t number, const std::string& what) const {
    throw std::runtime_error("Golden: " + path_ + ", line " + std::to_string(number) + ": " + what);
  }

  std::int64_t parse_int(const std::string& token, std::size_t number, const char* what) const {
    errno = 0;
    char* end = nullptr;
    const long long v = std::strtoll(token.c_str(), &end, 10);
    if (token.empty() || *end != '\0' || errno == ERANGE) fail(number, std::string("bad ") + what + " '" + token + "'");
    return static_cast<std::int64_t>(v);
  }

  double parse_real(const std::string& token, std::size_t number) const {
    char* end = nullptr;
    const double v = std::strtod(token.c_str(), &end);
    if (token.empty() || *end != '\0') fail(number, "bad float64 value '" + token + "'");
    return v;
  }

  void parse_line(const std::string& line, std::size_t number) {
    std::istringstream tokens(line);
    std::string name;
    if (!(tokens >> name) || name[0] == '#') return;  // blank line or comment
    if (entries_.count(name)) fail(number, "tensor '" + name + "' appears twice");

    Entry e;
    std::string dtype;
    if (!(tokens >> dtype)) fail(number, "missing dtype after '" + name + "'");
    if (dtype != "float64" && dtype != "int64") fail(number, "unknown dtype '" + dtype + "' (float64 or int64)");
    e.is_int = dtype == "int64";

    std::string token;
    if (!(tokens >> token)) fail(number, "missing rank");
    const std::int64_t rank = parse_int(token, number, "rank");
    if (rank < 0 || rank > heed::Shape::kMaxRank) fail(number, "rank " + token + " outside 0 to 6");
    for (std::int64_t d = 0; d < rank; ++d) {
      if (!(tokens >> token)) fail(number, "missing dim " + std::to_string(d) + " of rank " + std::to_string(rank));
      const std::int64_t size = parse_int(token, number, "dim");
      if (size < 0) fail(number, "negative dim " + token);
      e.shape.push_back(size);
    }
    if (!(tokens >> token) || token != ":") fail(number, "expected ':' after the " + std::to_string(rank) + " dims");

    std::int64_t count = 0;
    while (tokens >> token) {
      if (e.is_int)
        e.ints.push_back(parse_int(token, number, "int64 value"));
      else
        e.reals.push_back(parse_real(token, number));
      ++count;
    }
    if (count != e.shape.numel())
      fail(number, std::to_string(count) + " values for shape " + heed::to_string(e.shape) + " (" +
                       std::to_string(e.shape.numel()) + " expected)");

    order_.push_back(name);
    entries_.emplace(std::move(name), std::move(e));
  }

  std::string path_;
  std::map<std::string, Entry> entries_;
  std::vector<std::string> order_;
};

/// Golden values match in float to 1e-5 and in double to 1e-10 (the scripts round every
/// input and weight to float32 values, so both read the same numbers).
template <typename T>
double tolerance() {
  return std::is_same_v<T, float> ? 1e-5 : 1e-10;
}

/// The golden tensor `name` as a leaf that requires grad.
template <typename T>
heed::Tensor<T> leaf(const Golden& golden, const std::string& name) {
  return golden.tensor<T>(name).requires_grad_();
}

/// Copies the golden `<prefix>.<name>` into each of the module's parameters.
template <typename T>
void load_parameters(const Golden& golden, heed::Module<T>& module, const std::string& prefix) {
  heed::NoGradGuard no_grad;
  for (auto& [name, p] : module.named_parameters()) p.copy_(golden.tensor<T>(prefix + "." + name));
}

/// Every parameter's gradient equals the golden `<prefix>.grad.<name>`.
template <typename T>
void check_parameter_grads(const Golden& golden, const heed::Module<T>& module, const std::string& prefix) {
  for (auto& [name, p] : module.named_parameters()) {
    INFO("gradient of " << name);
    check_close(p.grad(), golden.tensor<T>(prefix + ".grad." + name), tolerance<T>());
  }
}

/// Runs `attention` on the golden case's inputs (`<c>.queries`, `.keys`, `.values`,
/// `.valid_lens`) and checks the output, the attention weights and the gradients of the
/// inputs and parameters against d2l's.
template <typename T, typename Attention>
void check_golden_attention(const Golden& golden, Attention& attention, const std::string& c) {
  INFO("case " << c);
  heed::Tensor<T> q = leaf<T>(golden, c + ".queries"), k = leaf<T>(golden, c + ".keys"),
                  v = leaf<T>(golden, c + ".values");
  const heed::Tensor<T> out = attention(q, k, v, golden.tensor<std::int64_t>(c + ".valid_lens"));
  check_close(out, golden.tensor<T>(c + ".output"), tolerance<T>());
  check_close(attention.attention_weights(), golden.tensor<T>(c + ".attention_weights"), tolerance<T>());
  out.backward(golden.tensor<T>(c + ".R"));
  check_close(q.grad(), golden.tensor<T>(c + ".grad.queries"), tolerance<T>());
  check_close(k.grad(), golden.tensor<T>(c + ".grad.keys"), tolerance<T>());
  check_close(v.grad(), golden.tensor<T>(c + ".grad.values"), tolerance<T>());
  check_parameter_grads(golden, attention, c);
}

}  // namespace heed_test
