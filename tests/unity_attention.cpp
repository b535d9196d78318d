// The attention tests (masked softmax, the scoring modules, the fused path, the switches
// to d2l's exact numbers), compiled as one translation unit.
// Each translation unit instantiates heed's templates anew, so the small test files of
// a family compile together: tests/CMakeLists.txt lists this file, not them. Their
// shared helpers are in attention_common.hpp.

#include "test_attention.cpp"
#include "test_d2l_switches.cpp"
#include "test_fused_attention.cpp"
#include "test_masked_softmax.cpp"
