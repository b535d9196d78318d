// heed::compiled: shape ops and comparisons for every element type.
// See heed/compiled.hpp; this file must be built with HEED_COMPILED
// (heed/compiled.hpp's declarations).
#include <heed/compiled.hpp>

namespace heed {

HEED_COMPILED_OPS_ANY(, float)
HEED_COMPILED_OPS_ANY(, double)
HEED_COMPILED_OPS_ANY(, std::int64_t)
HEED_COMPILED_OPS_ANY(, bool)

}  // namespace heed
