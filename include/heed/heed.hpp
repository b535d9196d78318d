// heed/heed.hpp — everything heed offers on the CPU, in one include.
//
//   #include <heed/heed.hpp>
//
//   heed::Generator gen(0);
//   auto w = heed::randn<float>({3, 1}, gen).requires_grad_();
//   auto x = heed::randn<float>({8, 3}, gen);
//   auto loss = heed::matmul(x, w).pow(2.f).mean();
//   loss.backward();
//   std::cout << w.grad() << "\n";
//
// Layers, each using only those before it: core (Tensor, Shape, errors, Generator),
// autograd (graph, backward, NoGradGuard, gradcheck), ops (differentiable math), io
// (printing).
#pragma once

#include "heed/core/error.hpp"
#include "heed/core/factory.hpp"
#include "heed/core/generator.hpp"
#include "heed/core/shape.hpp"
#include "heed/core/tensor.hpp"

#include "heed/autograd/engine.hpp"
#include "heed/autograd/gradcheck.hpp"
#include "heed/autograd/node.hpp"

#include "heed/ops/elementwise.hpp"
#include "heed/ops/matmul.hpp"
#include "heed/ops/reduce.hpp"
#include "heed/ops/shape.hpp"
#include "heed/ops/softmax.hpp"

#include "heed/io/print.hpp"
