// heed::compiled_float: Tensor<T> with every member (for float; the common ones
// for std::int64_t and bool), the factories, printing and gradcheck on a
// std::function (core_double.cpp: the same for double). See heed/compiled.hpp; this file must be built with
// HEED_COMPILED (heed/compiled.hpp's declarations).
#include <heed/compiled.hpp>

namespace heed {

HEED_COMPILED_CORE_FLOATING(, float)
HEED_COMPILED_CORE_ANY(, float)
HEED_COMPILED_CORE_ANY(, std::int64_t)
HEED_COMPILED_CORE_ANY(, bool)
HEED_COMPILED_CORE_INDEX(, std::int64_t)
HEED_COMPILED_CORE_INDEX(, bool)

}  // namespace heed
