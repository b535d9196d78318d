// heed/optim/trainable.hpp — what every optimiser checks of the tensors it is given.
#pragma once

#include "heed/detail/header_begin.hpp"

#include <vector>

#include "heed/autograd/node.hpp"

namespace heed::detail {

/// Each parameter must be a leaf that requires grad: an optimiser updates it in place.
template <typename T>
void check_trainable(const std::vector<Tensor<T>>& params, const char* op) {
  // PyTorch's "optimizer got an empty parameter list": a module whose parameters were
  // never registered would otherwise train nothing, silently.
  HEED_CHECK(!params.empty(), ValueError, op,
             ": got an empty parameter list (were the module's parameters registered?)");
  for (std::size_t i = 0; i < params.size(); ++i)
    HEED_CHECK(params[i].defined() && params[i].is_leaf() && params[i].requires_grad(), ValueError, op, ": parameter ",
               i, " must be a leaf tensor that requires grad");
}

}  // namespace heed::detail

#include "heed/detail/header_end.hpp"
