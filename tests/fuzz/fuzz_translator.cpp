// Fuzz target: heed::Translator::load (heed/seq2seq/translator.hpp, what translate --load
// and the resumed train_translator's translations rest on) on a file of the input's bytes,
// as a Transformer and as a Bahdanau model. The seeds are checkpoints of both kinds, of
// d2l's words and of SentencePiece pieces (models in the metadata). A heed::Error is the
// expected answer to a bad file; a load that succeeds must give a working translator: as
// many parameters as net_layout counts (the bound Translator::load checks before it
// builds the net), and one short sentence translated without an error.
#include "fuzz_common.hpp"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <heed/seq2seq/translator.hpp>

namespace {

void load_and_translate(const std::string& path, const std::string& model) {
  std::optional<heed::Translator> loaded;
  try {
    loaded.emplace(heed::Translator::load(path, model));
  } catch (const heed::Error&) {
    return;
  }
  const heed::NetLayout layout =
      heed::net_layout(loaded->config(), loaded->src_vocab().size(), loaded->tgt_vocab().size());
  if (static_cast<std::uint64_t>(loaded->num_parameters()) != layout.parameters)
    heed_fuzz::fail("net_layout counts " + std::to_string(layout.parameters) + " parameters, the net has " +
                    std::to_string(loaded->num_parameters()));
  heed::PredictOptions options;
  options.max_length = 4;  // a few steps: the target is the load, not the decoder's speed
  options.save_attention_weights = false;
  try {
    const auto translations = loaded->translate({"go ."}, options);
    if (translations.size() != 1) heed_fuzz::fail("one sentence gave " + std::to_string(translations.size()));
  } catch (const heed::Error& e) {
    heed_fuzz::fail(std::string("a translator Translator::load loaded cannot translate: ") + e.what());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const heed_fuzz::InputFile input("translator", ".safetensors");
  const std::string& path = input.write(data, size);
  load_and_translate(path, "transformer");
  load_and_translate(path, "bahdanau");
  return 0;
}
