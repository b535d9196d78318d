// heed::compiled: the nn, attention and transformer modules for double. See
// heed/compiled.hpp; this file must be built with HEED_COMPILED and
// HEED_COMPILED_DOUBLE (heed/compiled.hpp's declarations).
#include <heed/compiled.hpp>

namespace heed {

HEED_COMPILED_NN(, double)
HEED_COMPILED_ATTENTION(, double)
HEED_COMPILED_TRANSFORMER(, double)

}  // namespace heed
