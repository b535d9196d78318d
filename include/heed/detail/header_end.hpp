// heed/detail/header_end.hpp — closes a public header; see header_begin.hpp.
// No #pragma once.
#if defined(HEED_OUTERMOST_LEVEL) && __INCLUDE_LEVEL__ == HEED_OUTERMOST_LEVEL
#undef HEED_OUTERMOST_LEVEL
#include "heed/detail/tensor_methods.hpp"
#endif
