// heed/seq2seq/loss.hpp — d2l's MaskedSoftmaxCELoss, where d2l's seq2seq code has it.
//
// The loss is an op: masked_softmax_ce_loss, masked_linear_ce_loss and the
// MaskedSoftmaxCELoss class live in heed/ops/masked_cross_entropy.hpp; this header
// includes it, so that code including heed/seq2seq/loss.hpp keeps compiling.
#pragma once

#include "heed/ops/masked_cross_entropy.hpp"
