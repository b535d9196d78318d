// The GRU and sequence-to-sequence tests (models, training, prediction), compiled as one
// translation unit.
// Each translation unit instantiates heed's templates anew, so the small test files of
// a family compile together: tests/CMakeLists.txt lists this file, not them. Their
// shared helpers are in seq2seq_common.hpp.

#include "test_attention_gru.cpp"
#include "test_gru.cpp"
#include "test_predict.cpp"
#include "test_seq2seq_models.cpp"
#include "test_shortlist.cpp"
#include "test_train.cpp"
#include "test_translator.cpp"
