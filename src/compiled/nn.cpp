// heed::compiled: the nn, attention, transformer and Nadaraya-Watson modules.
// See heed/compiled.hpp; this file must be built with HEED_COMPILED
// (heed/compiled.hpp's declarations).
#include <heed/compiled.hpp>

namespace heed {

HEED_COMPILED_NN(, float)
HEED_COMPILED_NN(, double)
HEED_COMPILED_ATTENTION(, float)
HEED_COMPILED_ATTENTION(, double)
HEED_COMPILED_TRANSFORMER(, float)
HEED_COMPILED_TRANSFORMER(, double)

}  // namespace heed
