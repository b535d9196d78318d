// heed/detail/deprecated.hpp — keeping an old public spelling for one release.
//
// A renamed function or type keeps its old name as a [[deprecated("use …")]] alias. A
// renamed member of an options struct stays a member, [[deprecated]], still honoured,
// last in the struct (aggregate initialisers keep their order), with no default member
// initializer (GCC evaluates one, and warns, wherever a temporary of the struct is made). The whole struct sits
// between HEED_IGNORE_DEPRECATED_BEGIN and _END, and so does heed's own read of it:
// otherwise every copy or default construction of the struct, in every user's
// program, would warn, not only the code that names the old member.
#pragma once

#define HEED_IGNORE_DEPRECATED_BEGIN \
  _Pragma("GCC diagnostic push") _Pragma("GCC diagnostic ignored \"-Wdeprecated-declarations\"")
#define HEED_IGNORE_DEPRECATED_END _Pragma("GCC diagnostic pop")
