// The tests of heed/nn, the ops behind its modules (linear, dropout, transposed matmul)
// and SGD, compiled as one translation unit.
// Each translation unit instantiates heed's templates anew, so the small test files of
// a family compile together: tests/CMakeLists.txt lists this file, not them. Their
// shared helpers are in nn_common.hpp.

#include "test_activation.cpp"
#include "test_bf16_gemm.cpp"
#include "test_convert_weights.cpp"
#include "test_dropout.cpp"
#include "test_embedding.cpp"
#include "test_fp32_gemm.cpp"
#include "test_layer_norm.cpp"
#include "test_linear.cpp"
#include "test_matmul_transposed.cpp"
#include "test_module.cpp"
#include "test_module_list.cpp"
#include "test_quantized_gemm.cpp"
#include "test_sequential.cpp"
#include "test_sgd.cpp"
