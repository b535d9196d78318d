// heed::compiled: heed's non-template functions (the data pipeline, Vocab, BLEU, the
// built-in corpus, safetensors files, SVG, progress reports), compiled here once; a file
// built with HEED_COMPILED sees only their declarations. See heed/detail/inline.hpp.
#define HEED_COMPILED_NON_TEMPLATES
#include <heed/compiled.hpp>
