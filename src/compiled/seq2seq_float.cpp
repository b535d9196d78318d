// heed::compiled: seq2seq for float (both encoder-decoders, training,
// prediction), optimisers, printing, heatmaps, checkpoints. See
// heed/compiled.hpp; this file must be built with HEED_COMPILED
// (heed/compiled.hpp's declarations).
#include <heed/compiled.hpp>

namespace heed {

HEED_COMPILED_SEQ2SEQ(, float)
HEED_COMPILED_OPTIM(, float)
#if defined(HEED_COMPILED_CHECKPOINTS)
HEED_COMPILED_IO(, float)
#endif

}  // namespace heed
