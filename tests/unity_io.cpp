// The safetensors and checkpoint tests, compiled as one translation unit.
// Each translation unit instantiates heed's templates anew, so the small test files of
// a family compile together: tests/CMakeLists.txt lists this file, not them. Their
// shared helpers are in io_common.hpp.

#include "test_average.cpp"
#include "test_base64.cpp"
#include "test_checkpoint.cpp"
#include "test_quantised_checkpoint.cpp"
#include "test_safetensors.cpp"
