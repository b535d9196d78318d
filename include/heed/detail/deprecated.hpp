// heed/detail/deprecated.hpp — keeping an old public spelling for one release.
//
// A renamed function or type keeps its old name as a [[deprecated("use …")]] alias. A
// renamed member of an options struct stays a member, [[deprecated]], still honoured,
// last in the struct (aggregate initialisers keep their order), of type DeprecatedValue<V>
// (below) with no default member initializer: GCC evaluates one, and warns, wherever a
// temporary of the struct is made. The whole struct sits
// between HEED_IGNORE_DEPRECATED_BEGIN and _END, and so does heed's own read of it:
// otherwise every copy or default construction of the struct, in every user's
// program, would warn, not only the code that names the old member.
#pragma once

#include <type_traits>
#include <utility>

#define HEED_IGNORE_DEPRECATED_BEGIN \
  _Pragma("GCC diagnostic push") _Pragma("GCC diagnostic ignored \"-Wdeprecated-declarations\"")
#define HEED_IGNORE_DEPRECATED_END _Pragma("GCC diagnostic pop")

namespace heed::detail {

/// A deprecated member's value, V's default to start with, so that the member needs no
/// default member initializer (above); set and read as the plain member it stands for.
/// The default constructor is user-provided: GCC warns of a defaulted one wherever the
/// struct holding the member is value-initialised (`TrainOptions{}`).
template <typename V>
struct DeprecatedValue {
  V value;
  DeprecatedValue() : value() {}
  template <typename U, typename = std::enable_if_t<std::is_convertible_v<U&&, V> &&
                                                    !std::is_same_v<std::decay_t<U>, DeprecatedValue>>>
  DeprecatedValue(U&& v) : value(std::forward<U>(v)) {}  // NOLINT: implicit, as an assignment to the old member
  operator const V&() const { return value; }
};

}  // namespace heed::detail
