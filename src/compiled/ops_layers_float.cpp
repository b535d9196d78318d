// heed::compiled: attention and the layers' ops for float.
// See heed/compiled.hpp; this file must be built with HEED_COMPILED
// (heed/compiled.hpp's declarations).
#include <heed/compiled.hpp>

namespace heed {

HEED_COMPILED_OPS_LAYERS(, float)

}  // namespace heed
