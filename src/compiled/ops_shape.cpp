// heed::compiled_float: shape ops and comparisons for float, std::int64_t and bool
// (ops_math_double.cpp: double).
// See heed/compiled.hpp; this file must be built with HEED_COMPILED
// (heed/compiled.hpp's declarations).
#include <heed/compiled.hpp>

namespace heed {

HEED_COMPILED_OPS_ANY(, float)
HEED_COMPILED_OPS_ANY(, std::int64_t)
HEED_COMPILED_OPS_ANY(, bool)

}  // namespace heed
