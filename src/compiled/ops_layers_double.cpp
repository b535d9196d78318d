// heed::compiled: attention and the layers' ops for double.
// See heed/compiled.hpp; this file must be built with HEED_COMPILED
// and HEED_COMPILED_DOUBLE (heed/compiled.hpp's declarations).
#include <heed/compiled.hpp>

namespace heed {

HEED_COMPILED_OPS_LAYERS(, double)

}  // namespace heed
