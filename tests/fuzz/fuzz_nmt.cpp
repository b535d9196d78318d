// Fuzz target: d2l's translation-data pipeline (heed/seq2seq/data.hpp) on a fra.txt-format
// file of the input's bytes: read_data_nmt strict and lenient, preprocess_nmt and
// tokenize_nmt on the raw bytes, load_data_nmt on the file and load_data_nmt_text on what
// the lenient read kept, and one epoch of its batches. A heed::Error is the expected
// answer to a malformed file; the properties checked besides are the header's promises:
// a lenient read never throws and equals a successful strict one, and the text it
// returns (valid UTF-8, a tab on every line) always loads. At most 21 sentence pairs are
// used, so that one input stays fast. The same bytes are read as a vocabulary shortlist
// (heed/seq2seq/shortlist.hpp) too: refused with an Error, or giving sorted ids of the
// vocabulary that a save and a reload keep; and the shortlist built from the bytes'
// pairs keeps its candidates through its file.
#include "fuzz_common.hpp"

#include <heed/core/error.hpp>
#include <heed/seq2seq/data.hpp>
#include <heed/seq2seq/shortlist.hpp>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

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

// `list`'s candidates for the pairs' sources are sorted ids of `vocab`, and those of
// the list saved and read back are the same.
void check_shortlist(const heed::Shortlist& list, const heed::NmtTokens& pairs, const heed::Vocab& vocab) {
  static const heed_fuzz::InputFile saved("shortlist", ".txt");
  const std::vector<heed::index_t> ids = list.candidates(pairs.source, vocab);
  for (std::size_t i = 0; i < ids.size(); ++i)
    if (ids[i] < 0 || ids[i] >= vocab.size() || (i > 0 && ids[i] <= ids[i - 1]))
      heed_fuzz::fail("Shortlist::candidates: not sorted ids of the vocabulary");
  list.save(saved.path());
  if (heed::Shortlist::load(saved.path()).candidates(pairs.source, vocab) != ids)
    heed_fuzz::fail("Shortlist: a saved list read back has other candidates");
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
  const heed::NmtTokens pairs = heed::tokenize_nmt(raw, kExamples);  // any bytes split: nothing to throw
  const heed::Vocab vocab(pairs.target, 0, {"<pad>", "<bos>", "<eos>"});
  try {
    check_shortlist(heed::Shortlist::build(pairs), pairs, vocab);
  } catch (const heed::Error& e) {
    heed_fuzz::fail(std::string("a shortlist built from pairs did not save and load: ") + e.what());
  }
  std::optional<heed::Shortlist> loaded;
  try {
    loaded = heed::Shortlist::load(path);
  } catch (const heed::Error&) {
  }
  if (loaded) check_shortlist(*loaded, pairs, vocab);

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
