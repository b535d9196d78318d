// Fuzz target: d2l's translation-data pipeline (heed/seq2seq/data.hpp) on a fra.txt-format
// file of the input's bytes: read_data_nmt strict and lenient, preprocess_nmt and
// tokenize_nmt on the raw bytes, load_data_nmt on the file and load_data_nmt_text on what
// the lenient read kept, and one epoch of its batches. A heed::Error is the expected
// answer to a malformed file; the properties checked besides are the header's promises:
// a lenient read never throws and equals a successful strict one, and the text it
// returns (valid UTF-8, a tab on every line) always loads. At most 21 sentence pairs are
// used, so that one input stays fast.
#include "fuzz_common.hpp"

#include <heed/core/error.hpp>
#include <heed/seq2seq/data.hpp>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace {

constexpr std::size_t kExamples = 20;
constexpr heed::index_t kBatch = 4, kSteps = 6;

// Every index a batch holds names a token of its vocabulary; every valid length fits.
void check_batch(const heed::IndexTensor& tokens, const heed::IndexTensor& valid_len, const heed::Vocab& vocab) {
  if (tokens.dim() != 2 || tokens.size(1) != kSteps || valid_len.dim() != 1 || valid_len.size(0) != tokens.size(0))
    heed_fuzz::fail("load_data_nmt: a batch has the wrong shape");
  for (heed::index_t i = 0; i < tokens.numel(); ++i)
    if (tokens.data()[i] < 0 || tokens.data()[i] >= vocab.size()) heed_fuzz::fail("load_data_nmt: index out of range");
  for (heed::index_t i = 0; i < valid_len.numel(); ++i)
    if (valid_len.data()[i] < 0 || valid_len.data()[i] > kSteps)
      heed_fuzz::fail("load_data_nmt: valid length out of range");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const heed_fuzz::InputFile input("nmt", ".txt");
  const std::string& path = input.write(data, size);
  const std::string raw(reinterpret_cast<const char*>(data), size);

  try {
    (void)heed::tokenize_nmt(heed::preprocess_nmt(raw), kExamples);
  } catch (const heed::Error&) {
  }
  (void)heed::tokenize_nmt(raw, kExamples);  // any bytes split: nothing to throw

  std::optional<std::string> strict;
  try {
    strict = heed::read_data_nmt(path);
  } catch (const heed::Error&) {
  }
  std::size_t skipped = 0;
  heed::ReadNmtOptions options;
  options.skip_malformed = true;
  options.skipped_lines = &skipped;
  std::string lenient;
  try {
    lenient = heed::read_data_nmt(path, options);
  } catch (const heed::Error& e) {
    heed_fuzz::fail(std::string("read_data_nmt with skip_malformed threw: ") + e.what());
  }
  if (strict && (*strict != lenient || skipped != 0))
    heed_fuzz::fail("read_data_nmt: the strict and the lenient read of a valid file differ");

  try {
    (void)heed::load_data_nmt(path, kBatch, kSteps, kExamples);
  } catch (const heed::Error&) {
  }
  if (lenient.empty()) return 0;

  try {
    heed::NmtData nmt = heed::load_data_nmt_text(lenient, kBatch, kSteps, kExamples, /*seed=*/1);
    heed::index_t examples = 0;
    for (const heed::NmtBatch& batch : nmt.data_iter) {
      check_batch(batch.X, batch.X_valid_len, nmt.src_vocab);
      check_batch(batch.Y, batch.Y_valid_len, nmt.tgt_vocab);
      examples += batch.X.size(0);
    }
    if (examples != nmt.data_iter.num_examples()) heed_fuzz::fail("load_data_nmt: the batches lose examples");
  } catch (const heed::Error& e) {
    heed_fuzz::fail(std::string("load_data_nmt_text refused what read_data_nmt returned: ") + e.what());
  }
  return 0;
}
