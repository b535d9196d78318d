// heed::compiled: Tensor<double> with every member, its factories, printing and
// gradcheck on a std::function. See heed/compiled.hpp; this file must be built with
// HEED_COMPILED and HEED_COMPILED_DOUBLE (heed/compiled.hpp's declarations).
#include <heed/compiled.hpp>

namespace heed {

HEED_COMPILED_CORE_FLOATING(, double)
HEED_COMPILED_CORE_ANY(, double)

}  // namespace heed
