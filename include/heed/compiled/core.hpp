// heed/compiled/core.hpp — the instantiations heed::compiled holds for the core and
// autograd layers: Tensor<float> and Tensor<double> (every member, those defined in the
// op headers and autograd/engine.hpp included) and the factories.
//
// Each list is a macro of (EXT, T): heed/compiled.hpp expands it with EXT = extern, an
// explicit instantiation declaration, in every translation unit built with HEED_COMPILED;
// src/compiled/*.cpp expand the same list with EXT empty, the definitions. One list for
// both, so the two cannot drift apart. Declarations change no definition: translation
// units with and without HEED_COMPILED can be linked together.
#pragma once

#include "heed/core/factory.hpp"
#include "heed/core/tensor.hpp"

// The class (every member defined where heed/heed.hpp has been included) and the
// factories, for float and double.
#define HEED_COMPILED_CORE_FLOATING(EXT, T)                                                    \
  EXT template class Tensor<T>;                                                                \
  EXT template Tensor<T> arange<T>(double, double, double);                                    \
  EXT template Tensor<T> arange<T>(double);                                                    \
  EXT template Tensor<T> eye<T>(index_t, index_t);                                             \
  EXT template Tensor<T> uniform<T>(const Shape&, T, T, Generator&);                           \
  EXT template Tensor<T> rand<T>(const Shape&, Generator&);                                    \
  EXT template Tensor<T> normal<T>(T, T, const Shape&, Generator&);                            \
  EXT template Tensor<T> randn<T>(const Shape&, Generator&);

// The factories every element type has (float, double, std::int64_t, bool).
#define HEED_COMPILED_CORE_ANY(EXT, T)                            \
  EXT template Tensor<T> full<T>(const Shape&, T, Device);        \
  EXT template Tensor<T> zeros<T>(const Shape&, Device);          \
  EXT template Tensor<T> ones<T>(const Shape&, Device);           \
  EXT template Tensor<T> zeros_like<T>(const Tensor<T>&);         \
  EXT template Tensor<T> ones_like<T>(const Tensor<T>&);          \
  EXT template Tensor<T> full_like<T>(const Tensor<T>&, T);       \
  EXT template Tensor<T> scalar_tensor<T>(T);
