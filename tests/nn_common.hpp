// Shared by the tests of heed/nn (unity_nn.cpp): includes, a double leaf, one gradcheck
// instantiation, and the small modules that the Module tests register.
#pragma once

#include "check.hpp"

#include <heed/nn/activation.hpp>
#include <heed/nn/embedding.hpp>
#include <heed/nn/layer_norm.hpp>
#include <heed/nn/module_list.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

using Catch::Matchers::Contains;
using heed::index_t;
using heed::Tensord;
using heed::Tensorf;
using heed_test::check_close;
using heed_test::check_values;
using heed_test::leaf;

namespace {

using Inputs = std::vector<Tensord>;
using Fn = std::function<Tensord(const Inputs&)>;

std::vector<std::string> names_of(const heed::Module<float>::Named<Tensorf>& named) {
  std::vector<std::string> names;
  for (const auto& entry : named) names.push_back(entry.first);
  return names;
}

/// A module whose registration functions are public, to test them one by one.
class Open : public heed::Module<float> {
 public:
  Open() : heed::Module<float>("Open") {}
  using heed::Module<float>::register_buffer;
  using heed::Module<float>::register_module;
  using heed::Module<float>::register_parameter;
};

class Inner : public heed::Module<float> {
 public:
  explicit Inner(heed::Generator& gen) : heed::Module<float>("Inner"), fc(3, 2, true, gen) {
    register_module("fc", fc);
    register_buffer("running", running);
  }
  heed::Linear<float> fc;
  Tensorf running = heed::zeros<float>({2});
};

/// Own parameter and buffer, two children (one nested) and a dropout.
class Net : public heed::Module<float> {
 public:
  explicit Net(heed::Generator& gen) : heed::Module<float>("Net"), fc(4, 3, true, gen), inner(gen) {
    register_module("fc", fc);
    register_parameter("scale", scale);
    register_module("inner", inner);
    register_module("drop", drop);
    register_buffer("table", table);
  }
  heed::Linear<float> fc;
  Inner inner;
  heed::Dropout<float> drop{0.25};
  Tensorf scale = heed::ones<float>({3});
  Tensorf table = heed::arange<float>(6.0).reshape({2, 3});
};

}  // namespace
