// heed/compiled/ops.hpp — the instantiations heed::compiled holds for the ops
// layer (heed/ops/*.hpp): every differentiable op for float and double, the
// shape ops and comparisons for the index and mask types too. See
// heed/compiled/core.hpp for the (EXT, T) list macros.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <vector>

#include "heed/ops/attention_gru.hpp"
#include "heed/ops/broadcast.hpp"
#include "heed/ops/cross_entropy.hpp"
#include "heed/ops/dropout.hpp"
#include "heed/ops/elementwise.hpp"
#include "heed/ops/embedding.hpp"
#include "heed/ops/gather.hpp"
#include "heed/ops/gru.hpp"
#include "heed/ops/layer_norm.hpp"
#include "heed/ops/linear.hpp"
#include "heed/ops/linear_cross_entropy.hpp"
#include "heed/ops/loss.hpp"
#include "heed/ops/masked_softmax.hpp"
#include "heed/ops/matmul.hpp"
#include "heed/ops/reduce.hpp"
#include "heed/ops/scaled_dot_product_attention.hpp"
#include "heed/ops/sequence_mask.hpp"
#include "heed/ops/shape.hpp"
#include "heed/ops/softmax.hpp"
#include "heed/ops/sort.hpp"

// Arithmetic, math, reductions, products and softmax (two lists, so that the
// library builds them in parallel).
#define HEED_COMPILED_OPS_MATH(EXT, T)                                                         \
  EXT template Tensor<T> add<T>(const Tensor<T> &, const Tensor<T> &);                         \
  EXT template Tensor<T> sub<T>(const Tensor<T> &, const Tensor<T> &);                         \
  EXT template Tensor<T> mul<T>(const Tensor<T> &, const Tensor<T> &);                         \
  EXT template Tensor<T> div<T>(const Tensor<T> &, const Tensor<T> &);                         \
  EXT template Tensor<T> pow<T>(const Tensor<T> &, const Tensor<T> &);                         \
  EXT template Tensor<T> add<T>(const Tensor<T> &, T);                                         \
  EXT template Tensor<T> mul<T>(const Tensor<T> &, T);                                         \
  EXT template Tensor<T> pow<T>(const Tensor<T> &, T);                                         \
  EXT template Tensor<T> neg<T>(const Tensor<T> &);                                            \
  EXT template Tensor<T> exp<T>(const Tensor<T> &);                                            \
  EXT template Tensor<T> log<T>(const Tensor<T> &);                                            \
  EXT template Tensor<T> sqrt<T>(const Tensor<T> &);                                           \
  EXT template Tensor<T> tanh<T>(const Tensor<T> &);                                           \
  EXT template Tensor<T> sigmoid<T>(const Tensor<T> &);                                        \
  EXT template Tensor<T> relu<T>(const Tensor<T> &);                                           \
  EXT template Tensor<T> gelu<T>(const Tensor<T> &);                                           \
  EXT template Tensor<T> silu<T>(const Tensor<T> &);                                           \
  EXT template Tensor<T> softplus<T>(const Tensor<T> &);                                       \
  EXT template Tensor<T> abs<T>(const Tensor<T> &);                                            \
  EXT template Tensor<T> sin<T>(const Tensor<T> &);                                            \
  EXT template Tensor<T> cos<T>(const Tensor<T> &);                                            \
  EXT template Tensor<T> clone<T>(const Tensor<T> &);                                          \
  EXT template Tensor<T> where<T>(const Tensor<bool> &, const Tensor<T> &, const Tensor<T> &); \
  EXT template Tensor<T> masked_fill<T>(const Tensor<T> &, const Tensor<bool> &, T);           \
  EXT template Tensor<T> detail::broadcast_to<T>(const Tensor<T> &, const Shape &);            \
  EXT template Tensor<T> detail::sum_to<T>(const Tensor<T> &, const Shape &);                  \
  EXT template Tensor<T> sum<T>(const Tensor<T> &);                                            \
  EXT template Tensor<T> sum<T>(const Tensor<T> &, int, bool);                                 \
  EXT template Tensor<T> mean<T>(const Tensor<T> &);                                           \
  EXT template Tensor<T> mean<T>(const Tensor<T> &, int, bool);                                \
  EXT template Tensor<T> max<T>(const Tensor<T> &);                                            \
  EXT template Tensor<T> max<T>(const Tensor<T> &, int, bool);                                 \
  EXT template Tensor<std::int64_t> argmax<T>(const Tensor<T> &, int, bool);                   \
  EXT template Tensor<T> matmul<T>(const Tensor<T> &, const Tensor<T> &);                      \
  EXT template Tensor<T> matmul<T>(const Tensor<T> &, const Tensor<T> &, bool, bool);          \
  EXT template Tensor<T> bmm<T>(const Tensor<T> &, const Tensor<T> &);                         \
  EXT template Tensor<T> softmax<T>(const Tensor<T> &, int);                                   \
  EXT template Tensor<T> log_softmax<T>(const Tensor<T> &, int);                               \
  HEED_COMPILED_OPS_PYTORCH(EXT, T)

// The rest of PyTorch's reductions, sorting, indexing and losses.
#define HEED_COMPILED_OPS_PYTORCH(EXT, T)                                                                        \
  EXT template Tensor<T> sum<T>(const Tensor<T> &, const std::vector<int> &, bool);                              \
  EXT template Tensor<T> mean<T>(const Tensor<T> &, const std::vector<int> &, bool);                             \
  EXT template Tensor<T> var<T>(const Tensor<T> &, const std::vector<int> &, bool, double);                      \
  EXT template Tensor<T> std<T>(const Tensor<T> &, const std::vector<int> &, bool, double);                      \
  EXT template Tensor<T> prod<T>(const Tensor<T> &, int, bool);                                                  \
  EXT template Tensor<T> prod<T>(const Tensor<T> &);                                                             \
  EXT template Tensor<T> min<T>(const Tensor<T> &);                                                              \
  EXT template ValuesIndices<T> max_with_indices<T>(const Tensor<T> &, int, bool);                               \
  EXT template ValuesIndices<T> min_with_indices<T>(const Tensor<T> &, int, bool);                               \
  EXT template Tensor<std::int64_t> argmin<T>(const Tensor<T> &, int, bool);                                     \
  EXT template Tensor<T> clamp<T>(const Tensor<T> &, std::optional<double>, std::optional<double>);              \
  EXT template ValuesIndices<T> sort<T>(const Tensor<T> &, int, bool);                                           \
  EXT template ValuesIndices<T> topk<T>(const Tensor<T> &, index_t, int, bool);                                  \
  EXT template Tensor<T> gather<T>(const Tensor<T> &, int, const IndexTensor &);                                 \
  EXT template Tensor<T> scatter_add<T>(const Tensor<T> &, int, const IndexTensor &, const Tensor<T> &);         \
  EXT template Tensor<T> masked_select<T>(const Tensor<T> &, const Tensor<bool> &);                              \
  EXT template Tensor<T> slice_scatter<T>(const Tensor<T> &, const Tensor<T> &, int, index_t, index_t, index_t); \
  EXT template Tensor<T> mse_loss<T>(const Tensor<T> &, const Tensor<T> &, Reduction);                           \
  EXT template Tensor<T> l1_loss<T>(const Tensor<T> &, const Tensor<T> &, Reduction);

// Attention and the layers' ops.
#define HEED_COMPILED_OPS_LAYERS(EXT, T)                                                                            \
  EXT template class AttentionMask<T>;                                                                              \
  EXT template Tensor<T> masked_softmax<T>(const Tensor<T> &, const AttentionMask<T> &);                            \
  EXT template Tensor<T> scaled_dot_product_attention<T>(const Tensor<T> &, const Tensor<T> &, const Tensor<T> &,   \
                                                         const AttentionMask<T> &, double, Generator &);            \
  EXT template Tensor<T> sequence_mask<T>(const Tensor<T> &, const IndexTensor &, double);                          \
  EXT template Tensor<T> cross_entropy<T>(const Tensor<T> &, const IndexTensor &, Reduction, double);               \
  EXT template Tensor<T> dropout<T>(const Tensor<T> &, double, bool, Generator &);                                  \
  EXT template Tensor<T> embedding<T>(const Tensor<T> &, const IndexTensor &);                                      \
  EXT template Tensor<T> gru_layer<T>(const Tensor<T> &, const Tensor<T> &, const Tensor<T> &, const Tensor<T> &);  \
  EXT template AttentionGruOutput<T> attention_gru<T>(const Tensor<T> &, const Tensor<T> &, const Tensor<T> &,      \
                                                      const Tensor<T> &, const IndexTensor &,                       \
                                                      const AttentionGruWeights<T> &, const AttentionGruOptions &); \
  EXT template Tensor<T> layer_norm<T>(const Tensor<T> &, const Shape &, const Tensor<T> &, const Tensor<T> &,      \
                                       double);                                                                     \
  EXT template Tensor<T> linear<T>(const Tensor<T> &, const Tensor<T> &, const Tensor<T> &);                        \
  EXT template Tensor<T> linear_cross_entropy<T>(const Tensor<T> &, const Tensor<T> &, const Tensor<T> &,           \
                                                 const IndexTensor &, Reduction, double);

// Shape ops, comparisons and logical ops: float, double, std::int64_t and bool.
#define HEED_COMPILED_OPS_ANY(EXT, T)                                                           \
  EXT template Tensor<T> reshape<T>(const Tensor<T> &, const std::vector<index_t> &);           \
  EXT template Tensor<T> flatten<T>(const Tensor<T> &, int, int);                               \
  EXT template Tensor<T> unsqueeze<T>(const Tensor<T> &, int);                                  \
  EXT template Tensor<T> squeeze<T>(const Tensor<T> &);                                         \
  EXT template Tensor<T> squeeze<T>(const Tensor<T> &, int);                                    \
  EXT template Tensor<T> permute<T>(const Tensor<T> &, const std::vector<int> &);               \
  EXT template Tensor<T> transpose<T>(const Tensor<T> &, int, int);                             \
  EXT template Tensor<T> slice<T>(const Tensor<T> &, int, index_t, index_t, index_t);           \
  EXT template Tensor<T> narrow<T>(const Tensor<T> &, int, index_t, index_t);                   \
  EXT template Tensor<T> select<T>(const Tensor<T> &, int, index_t);                            \
  EXT template Tensor<T> repeat<T>(const Tensor<T> &, const std::vector<index_t> &);            \
  EXT template Tensor<T> repeat_interleave<T>(const Tensor<T> &, index_t, int);                 \
  EXT template Tensor<T> expand<T>(const Tensor<T> &, const Shape &);                           \
  EXT template Tensor<T> index_select<T>(const Tensor<T> &, int, const Tensor<std::int64_t> &); \
  EXT template Tensor<T> cat<T>(const std::vector<Tensor<T>> &, int);                           \
  EXT template Tensor<T> stack<T>(const std::vector<Tensor<T>> &, int);                         \
  EXT template Tensor<T> cat<T>(std::initializer_list<Tensor<T>>, int);                         \
  EXT template Tensor<T> stack<T>(std::initializer_list<Tensor<T>>, int);                       \
  EXT template Tensor<bool> eq<T>(const Tensor<T> &, const Tensor<T> &);                        \
  EXT template Tensor<bool> ne<T>(const Tensor<T> &, const Tensor<T> &);                        \
  EXT template Tensor<bool> lt<T>(const Tensor<T> &, const Tensor<T> &);                        \
  EXT template Tensor<bool> le<T>(const Tensor<T> &, const Tensor<T> &);                        \
  EXT template Tensor<bool> gt<T>(const Tensor<T> &, const Tensor<T> &);                        \
  EXT template Tensor<bool> ge<T>(const Tensor<T> &, const Tensor<T> &);                        \
  EXT template Tensor<bool> eq<T>(const Tensor<T> &, T);                                        \
  EXT template Tensor<bool> ne<T>(const Tensor<T> &, T);                                        \
  EXT template Tensor<bool> lt<T>(const Tensor<T> &, T);                                        \
  EXT template Tensor<bool> le<T>(const Tensor<T> &, T);                                        \
  EXT template Tensor<bool> gt<T>(const Tensor<T> &, T);                                        \
  EXT template Tensor<bool> ge<T>(const Tensor<T> &, T);                                        \
  EXT template Tensor<bool> logical_not<T>(const Tensor<T> &);                                  \
  EXT template Tensor<bool> logical_and<T>(const Tensor<T> &, const Tensor<T> &);               \
  EXT template Tensor<bool> logical_or<T>(const Tensor<T> &, const Tensor<T> &);                \
  EXT template Tensor<bool> logical_xor<T>(const Tensor<T> &, const Tensor<T> &);
