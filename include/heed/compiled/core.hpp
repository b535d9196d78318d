// heed/compiled/core.hpp — the instantiations heed::compiled holds for the core
// and autograd layers: Tensor<float> and Tensor<double> (every member, those
// defined in the op headers and autograd/engine.hpp included), the members of
// Tensor<std::int64_t> and Tensor<bool> that every element type has, the
// factories and gradcheck on a std::function.
//
// Each list is a macro of (EXT, T): heed/compiled.hpp expands it with EXT =
// extern, an explicit instantiation declaration, in every translation unit
// built with HEED_COMPILED; src/compiled/*.cpp expand the same list with EXT
// empty, the definitions. One list for both, so the two cannot drift apart.
// Declarations change no definition: translation units with and without
// HEED_COMPILED can be linked together.
#pragma once

#include <functional>
#include <ostream>
#include <vector>

#include "heed/autograd/gradcheck.hpp"
#include "heed/core/factory.hpp"
#include "heed/core/tensor.hpp"
#include "heed/io/print.hpp"
#include "heed/ops/device.hpp"
#include "heed/ops/shape.hpp"

// The class (every member defined where heed/heed.hpp has been included) and
// the factories, for float and double.
#define HEED_COMPILED_CORE_FLOATING(EXT, T)                                                                    \
  EXT template class Tensor<T>;                                                                                \
  EXT template Tensor<T> arange<T>(double, double, double);                                                    \
  EXT template Tensor<T> arange<T>(double);                                                                    \
  EXT template Tensor<T> eye<T>(index_t, index_t);                                                             \
  EXT template Tensor<T> uniform<T>(const Shape &, T, T, Generator &);                                         \
  EXT template Tensor<T> rand<T>(const Shape &, Generator &);                                                  \
  EXT template Tensor<T> normal<T>(T, T, const Shape &, Generator &);                                          \
  EXT template Tensor<T> randn<T>(const Shape &, Generator &);                                                 \
  EXT template GradcheckResult gradcheck<T, const std::function<Tensor<T>(const std::vector<Tensor<T>> &)> &>( \
      const std::function<Tensor<T>(const std::vector<Tensor<T>> &)> &, const std::vector<Tensor<T>> &,        \
      const GradcheckOptions &);

// The factories every element type has (float, double, std::int64_t, bool).
#define HEED_COMPILED_CORE_ANY(EXT, T)                                                \
  EXT template Tensor<T> full<T>(const Shape &, T, Device);                           \
  EXT template Tensor<T> zeros<T>(const Shape &, Device);                             \
  EXT template Tensor<T> ones<T>(const Shape &, Device);                              \
  EXT template Tensor<T> zeros_like<T>(const Tensor<T> &);                            \
  EXT template Tensor<T> ones_like<T>(const Tensor<T> &);                             \
  EXT template Tensor<T> full_like<T>(const Tensor<T> &, T);                          \
  EXT template Tensor<T> scalar_tensor<T>(T);                                         \
  EXT template Tensor<T> tensor<T>(const NestedList<T> &);                            \
  EXT template Tensor<T> detail::make_tensor<T>(const Shape &, Device, const char *); \
  EXT template std::ostream &operator<< <T>(std::ostream &, const Tensor<T> &);

// Tensor<std::int64_t> and Tensor<bool>: the members every element type has
// (the class as a whole has the differentiable ones too, which only compile for
// float and double).
#define HEED_COMPILED_CORE_INDEX(EXT, T)                                 \
  EXT template Tensor<T>::Tensor(const std::vector<T> &, const Shape &); \
  EXT template Tensor<T> Tensor<T>::empty(const Shape &);                \
  EXT template index_t Tensor<T>::size(int) const;                       \
  EXT template T Tensor<T>::item() const;                                \
  EXT template std::vector<T> Tensor<T>::to_vector() const;              \
  EXT template bool Tensor<T>::shares_storage(const Tensor<T> &) const;  \
  EXT template bool Tensor<T>::requires_grad() const;                    \
  EXT template Tensor<T> &Tensor<T>::requires_grad_(bool);               \
  EXT template bool Tensor<T>::is_leaf() const;                          \
  EXT template Tensor<T> Tensor<T>::detach() const;                      \
  EXT template Tensor<T> Tensor<T>::reshape(const Shape &) const;        \
  EXT template Tensor<T> Tensor<T>::to(Device) const;
