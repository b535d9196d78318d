// heed::compiled: seq2seq for double (both encoder-decoders, training,
// prediction), optimisers, printing, heatmaps, checkpoints. See
// heed/compiled.hpp; this file must be built with HEED_COMPILED
// and HEED_COMPILED_DOUBLE (heed/compiled.hpp's declarations).
#include <heed/compiled.hpp>

namespace heed {

HEED_COMPILED_SEQ2SEQ(, double)
HEED_COMPILED_OPTIM(, double)
#if defined(HEED_COMPILED_CHECKPOINTS)
HEED_COMPILED_IO(, double)
#endif

}  // namespace heed
