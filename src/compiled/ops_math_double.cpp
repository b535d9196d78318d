// heed::compiled: arithmetic, math, reductions, products and softmax for
// double. See heed/compiled.hpp; this file must be built with HEED_COMPILED
// (heed/compiled.hpp's declarations).
#include <heed/compiled.hpp>

namespace heed {

HEED_COMPILED_OPS_MATH(, double)

}  // namespace heed
