// heed/compiled.hpp — explicit instantiation declarations for what
// heed::compiled holds.
//
// heed/heed.hpp includes this header when HEED_COMPILED is defined, which
// linking the CMake target heed::compiled (the static library heed_compiled)
// does; a file that includes heed's headers one by one, without heed.hpp, does
// not see it (the translator's headers include heed.hpp for that reason). Each declaration
// (`extern template ...`) tells the compiler that the library defines that
// instantiation, so a translation unit using heed compiles only its own code
// instead of every op, module and training loop it touches. The larger
// non-template functions (the data pipeline, Vocab, BLEU, the built-in corpus,
// safetensors files, SVG, progress reports) are declared only, and the library's
// src/compiled/non_templates.cpp compiles them once (heed/detail/inline.hpp):
// examples/translate.cpp builds in 16 s instead of 93. The headers keep every
// template definition, so a template the library lacks is compiled in the file as
// before. Give every file of a program the same HEED_COMPILED (the CMake target
// does): a file without it compiles those non-template functions inline, and one
// function both inline and in the library is, formally, two definitions (in
// practice the linker keeps one; tests/test_header_only.cpp links that way).
//
// Two libraries: heed::compiled_float instantiates for float (and std::int64_t and
// bool, where an op takes them), and heed::compiled adds double (it defines
// HEED_COMPILED_DOUBLE; heed's tests link it). A program of floats links
// heed::compiled_float and builds two fifths less of the library (heed's examples do);
// double templates are then compiled in its own files, as header-only.
//
// What the library instantiates (see the lists under
// heed/compiled/): Tensor<T> (the members every type has for std::int64_t and
// bool), the factories, printing and gradcheck on a std::function; every op
// (the shape ops and comparisons also for std::int64_t and bool); the nn,
// attention, transformer and Nadaraya-Watson modules; the Bahdanau and
// Transformer encoder-decoders with train_seq2seq and predict_seq2seq on
// NmtDataLoader; Adam, SGD, gradient clipping, heatmaps; and, when built with
// nlohmann/json (HEED_COMPILED_CHECKPOINTS), the checkpoint functions.
//
// The library must be compiled with the flags of the programs it is linked to,
// above all the same -march: Eigen's vectorisation and alignment depend on the
// instruction set, and an inline function compiled both ways is one symbol with
// two meanings. The CMake target passes its -march on to the programs that link
// it.
#pragma once

#include "heed/heed.hpp"

#include "heed/compiled/core.hpp"
#include "heed/compiled/nn.hpp"
#include "heed/compiled/ops.hpp"
#include "heed/compiled/seq2seq.hpp"

#if defined(HEED_COMPILED_CHECKPOINTS)
#include "heed/io/safetensors.hpp"
#include "heed/io/training_checkpoint.hpp"
#endif

namespace heed {

HEED_COMPILED_CORE_FLOATING(extern, float)
HEED_COMPILED_CORE_ANY(extern, float)
HEED_COMPILED_CORE_ANY(extern, std::int64_t)
HEED_COMPILED_CORE_ANY(extern, bool)
HEED_COMPILED_CORE_INDEX(extern, std::int64_t)
HEED_COMPILED_CORE_INDEX(extern, bool)
HEED_COMPILED_OPS_MATH(extern, float)
HEED_COMPILED_OPS_LAYERS(extern, float)
HEED_COMPILED_OPS_ANY(extern, float)
HEED_COMPILED_OPS_ANY(extern, std::int64_t)
HEED_COMPILED_OPS_ANY(extern, bool)
HEED_COMPILED_NN(extern, float)
HEED_COMPILED_ATTENTION(extern, float)
HEED_COMPILED_TRANSFORMER(extern, float)
HEED_COMPILED_SEQ2SEQ(extern, float)
HEED_COMPILED_OPTIM(extern, float)
#if defined(HEED_COMPILED_CHECKPOINTS)
HEED_COMPILED_IO(extern, float)
#endif

// double: heed::compiled (HEED_COMPILED_DOUBLE) has it, heed::compiled_float not.
#if defined(HEED_COMPILED_DOUBLE)
HEED_COMPILED_CORE_FLOATING(extern, double)
HEED_COMPILED_CORE_ANY(extern, double)
HEED_COMPILED_OPS_MATH(extern, double)
HEED_COMPILED_OPS_LAYERS(extern, double)
HEED_COMPILED_OPS_ANY(extern, double)
HEED_COMPILED_NN(extern, double)
HEED_COMPILED_ATTENTION(extern, double)
HEED_COMPILED_TRANSFORMER(extern, double)
HEED_COMPILED_SEQ2SEQ(extern, double)
HEED_COMPILED_OPTIM(extern, double)
#if defined(HEED_COMPILED_CHECKPOINTS)
HEED_COMPILED_IO(extern, double)
#endif
#endif

}  // namespace heed
