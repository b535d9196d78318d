// The data tests (d2l's NMT pipeline, Vocab, the held-out split, TensorDataset and
// DataLoader), compiled as one translation unit.
// Each translation unit instantiates heed's templates anew, so the small test files of
// a family compile together: tests/CMakeLists.txt lists this file, not them. Their
// shared helpers are in seq2seq_data_common.hpp.

#include "test_data_loader.cpp"
#include "test_held_out.cpp"
#include "test_seq2seq_data.cpp"
#include "test_vocab.cpp"
