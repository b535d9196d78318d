// heed/detail/inline.hpp — where heed's non-template functions are compiled.
//
// Header-only (the default), a file compiles every heed function it calls, and the
// non-template ones are `inline`. Under HEED_COMPILED (linking heed::compiled defines it)
// a file sees only the declarations of the larger non-template functions (the data
// pipeline, Vocab, BLEU, the built-in corpus, safetensors files, SVG, progress reports)
// and links the library's one copy, which src/compiled/non_templates.cpp compiles with
// HEED_COMPILED_NON_TEMPLATES, as spdlog's compiled mode does with SPDLOG_INLINE. A
// header declares such a function where its documentation is and defines it, with
// HEED_INLINE, under `#if HEED_NON_TEMPLATE_DEFINITIONS` at its end.
//
// Checkpoints and safetensors files (nlohmann/json) are in the library only when it
// was built with them (HEED_COMPILED_CHECKPOINTS); otherwise every file compiles them:
// HEED_IO_INLINE and HEED_IO_DEFINITIONS.
#pragma once

#if defined(HEED_COMPILED_NON_TEMPLATES)
#define HEED_INLINE
#define HEED_NON_TEMPLATE_DEFINITIONS 1
#elif defined(HEED_COMPILED)
#define HEED_INLINE inline
#define HEED_NON_TEMPLATE_DEFINITIONS 0
#else
#define HEED_INLINE inline
#define HEED_NON_TEMPLATE_DEFINITIONS 1
#endif

#if defined(HEED_COMPILED) && !defined(HEED_COMPILED_CHECKPOINTS)
#define HEED_IO_INLINE inline
#define HEED_IO_DEFINITIONS 1
#else
#define HEED_IO_INLINE HEED_INLINE
#define HEED_IO_DEFINITIONS HEED_NON_TEMPLATE_DEFINITIONS
#endif
