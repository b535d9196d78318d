// The Tensor<T> tests, compiled as one translation unit.
// Each translation unit instantiates heed's templates anew, so the small test files of
// a family compile together: tests/CMakeLists.txt lists this file, not them. Their
// shared helpers are in tensor_common.hpp.

#include "test_tensor.cpp"
#include "test_tensor_factory.cpp"
#include "test_tensor_shape.cpp"
