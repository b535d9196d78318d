// heed::compiled: arithmetic, math, reductions, products and softmax for
// double. See heed/compiled.hpp; this file must be built with HEED_COMPILED
// and HEED_COMPILED_DOUBLE (heed/compiled.hpp's declarations).
#include <heed/compiled.hpp>

namespace heed {

HEED_COMPILED_OPS_MATH(, double)
HEED_COMPILED_OPS_ANY(, double)  // the shape ops and comparisons (ops_shape.cpp's other types)

}  // namespace heed
