// Shared by the Tensor<T> tests (unity_tensor.cpp).
#pragma once

#include <catch2/catch.hpp>
#include <heed/heed.hpp>

#include "check.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <future>
#include <limits>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace {

using heed::index_t;
using heed::Shape;
using heed_test::check_values;

template <typename T>
std::string repr(const heed::Tensor<T>& x) {
  std::ostringstream os;
  os << x;
  return os.str();
}

/// 0, 1, …, 23 as a (2, 3, 4) float tensor: element (i, j, k) is 12 i + 4 j + k.
heed::Tensor<float> iota234() { return heed::arange(24.f).reshape({2, 3, 4}); }

}  // namespace
