// heed/detail/tensor_methods.hpp — the headers that define Tensor's methods declared in
// heed/core/tensor.hpp: included when the outermost heed header of a file closes
// (heed/detail/header_end.hpp), so that any public header alone links.
#pragma once

#include "heed/autograd/engine.hpp"
#include "heed/autograd/node.hpp"
#include "heed/ops/device.hpp"
#include "heed/ops/elementwise.hpp"
#include "heed/ops/gather.hpp"
#include "heed/ops/matmul.hpp"
#include "heed/ops/reduce.hpp"
#include "heed/ops/shape.hpp"
#include "heed/ops/softmax.hpp"
#include "heed/ops/sort.hpp"
