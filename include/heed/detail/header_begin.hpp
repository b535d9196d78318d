// heed/detail/header_begin.hpp and header_end.hpp — make every public header link-safe.
//
// Tensor declares methods that wrap ops (x.sum(), x.reshape(...), x.backward()) and
// the ops' headers define them, as Eigen does for its modules. So that a file including
// any one public header can call every method it sees, each header that shows Tensor
// opens with header_begin.hpp and closes with header_end.hpp; when the outermost heed
// header a file includes closes, header_end.hpp brings in the headers that define
// Tensor's methods (heed/detail/tensor_methods.hpp). Not before: while any heed header
// is still open, its definitions are incomplete, and the ops' headers need them.
//
// The outermost header is found by its include depth (__INCLUDE_LEVEL__, GCC and
// Clang). A compiler without it gets the methods from heed/heed.hpp only.
//
// No #pragma once: these two lines open and close every such header.
#if defined(__INCLUDE_LEVEL__) && !defined(HEED_OUTERMOST_LEVEL)
#if __INCLUDE_LEVEL__ == 1
#define HEED_OUTERMOST_LEVEL 1
#elif __INCLUDE_LEVEL__ == 2
#define HEED_OUTERMOST_LEVEL 2
#elif __INCLUDE_LEVEL__ == 3
#define HEED_OUTERMOST_LEVEL 3
#elif __INCLUDE_LEVEL__ == 4
#define HEED_OUTERMOST_LEVEL 4
#elif __INCLUDE_LEVEL__ == 5
#define HEED_OUTERMOST_LEVEL 5
#elif __INCLUDE_LEVEL__ == 6
#define HEED_OUTERMOST_LEVEL 6
#elif __INCLUDE_LEVEL__ == 7
#define HEED_OUTERMOST_LEVEL 7
#elif __INCLUDE_LEVEL__ == 8
#define HEED_OUTERMOST_LEVEL 8
#elif __INCLUDE_LEVEL__ == 9
#define HEED_OUTERMOST_LEVEL 9
#elif __INCLUDE_LEVEL__ == 10
#define HEED_OUTERMOST_LEVEL 10
#elif __INCLUDE_LEVEL__ == 11
#define HEED_OUTERMOST_LEVEL 11
#elif __INCLUDE_LEVEL__ == 12
#define HEED_OUTERMOST_LEVEL 12
#elif __INCLUDE_LEVEL__ == 13
#define HEED_OUTERMOST_LEVEL 13
#elif __INCLUDE_LEVEL__ == 14
#define HEED_OUTERMOST_LEVEL 14
#elif __INCLUDE_LEVEL__ == 15
#define HEED_OUTERMOST_LEVEL 15
#elif __INCLUDE_LEVEL__ == 16
#define HEED_OUTERMOST_LEVEL 16
#else
#error "heed: included more than 15 files deep; include heed before nesting that deep"
#endif
#endif
