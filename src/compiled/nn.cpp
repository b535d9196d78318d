// heed::compiled_float: the nn, attention, transformer and Nadaraya-Watson modules
// for float (nn_double.cpp: double).
// See heed/compiled.hpp; this file must be built with HEED_COMPILED
// (heed/compiled.hpp's declarations).
#include <heed/compiled.hpp>

namespace heed {

HEED_COMPILED_NN(, float)
HEED_COMPILED_ATTENTION(, float)
HEED_COMPILED_TRANSFORMER(, float)

}  // namespace heed
