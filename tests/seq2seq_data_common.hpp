// Shared by the NMT data tests (unity_seq2seq_data.cpp): golden values from d2l's own
// functions (tests/data/make_nmt_golden.py), fra.txt texts and temporary files.
#pragma once

#include <heed/seq2seq/corpus.hpp>
#include <heed/seq2seq/data.hpp>

#include "check.hpp"
#include "golden.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

using heed::index_t;
using heed::IndexTensor;

namespace {

const heed_test::Golden& golden() {
  static const heed_test::Golden file("nmt_golden.txt");
  return file;
}

std::vector<index_t> ints(const std::string& name) { return golden().tensor<std::int64_t>(name).to_vector(); }

/// A golden string: the int64 tensor of its UTF-8 bytes.
std::string text(const std::string& name) {
  std::string out;
  for (index_t byte : ints(name)) out += static_cast<char>(byte);
  return out;
}

/// A golden list of strings, stored joined by '\n'.
std::vector<std::string> lines(const std::string& name) { return heed::detail::split(text(name), '\n'); }

std::string join(const std::vector<std::string>& parts, char sep) {
  std::string out;
  for (std::size_t i = 0; i < parts.size(); ++i) out += (i ? std::string(1, sep) : "") + parts[i];
  return out;
}

/// Token sequences as golden stores them: tokens joined by ' ', one sequence a line.
std::vector<std::string> joined(const std::vector<std::vector<std::string>>& sequences) {
  std::vector<std::string> out;
  for (const auto& tokens : sequences) out.push_back(join(tokens, ' '));
  return out;
}

/// The vocabulary matches golden's `name`: size, then idx_to_token and token_freqs as far
/// as golden stores them.
void check_vocab(const heed::Vocab& vocab, const std::string& name) {
  INFO("vocabulary " << name);
  CHECK(vocab.size() == ints(name + ".size").at(0));
  const auto idx_to_token = lines(name + ".idx_to_token");
  REQUIRE(static_cast<index_t>(idx_to_token.size()) <= vocab.size());
  for (std::size_t i = 0; i < idx_to_token.size(); ++i) {
    CHECK(vocab.idx_to_token()[i] == idx_to_token[i]);
    CHECK(vocab[idx_to_token[i]] == static_cast<index_t>(i));
  }
  const auto tokens = lines(name + ".freq_tokens");
  const auto freqs = ints(name + ".freqs");
  REQUIRE(tokens.size() == freqs.size());
  REQUIRE(tokens.size() <= vocab.token_freqs().size());
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    CHECK(vocab.token_freqs()[i].first == tokens[i]);
    CHECK(vocab.token_freqs()[i].second == freqs[i]);
  }
}

/// build_array_nmt's output matches golden's `name`: shape, the rows stored, the
/// position-weighted checksum of the whole array and the valid lengths.
void check_array(const heed::NmtArray& got, const std::string& name) {
  INFO("array " << name);
  const auto shape = ints(name + ".shape");
  REQUIRE(got.array.shape() == heed::Shape({shape[0], shape[1]}));
  REQUIRE(got.valid_len.shape() == heed::Shape({shape[0]}));
  const IndexTensor rows = golden().tensor<std::int64_t>(name + ".array");
  CHECK(std::equal(rows.data(), rows.data() + rows.numel(), got.array.data()));
  std::int64_t checksum = 0;
  for (index_t i = 0; i < got.array.numel(); ++i) checksum += got.array.data()[i] * (i + 1);
  CHECK(checksum == ints(name + ".checksum").at(0));
  const auto valid_len = ints(name + ".valid_len");
  const auto got_len = got.valid_len.to_vector();
  CHECK(std::equal(valid_len.begin(), valid_len.end(), got_len.begin()));
  std::int64_t sum = 0;
  for (index_t v : got_len) sum += v;
  CHECK(sum == ints(name + ".valid_len_sum").at(0));
}

/// The first part of d2l's load_data_nmt (up to the arrays) on text read from a file,
/// checked against golden's `case`.
void check_pipeline(const std::string& raw, std::optional<std::size_t> num_examples, index_t num_steps,
                    const std::string& c) {
  const heed::NmtTokens tokens = heed::tokenize_nmt(heed::preprocess_nmt(raw), num_examples);
  CHECK(static_cast<index_t>(tokens.source.size()) == ints(c + ".num_pairs").at(0));
  const std::vector<std::string> reserved{"<pad>", "<bos>", "<eos>"};
  const heed::Vocab src_vocab(tokens.source, 2, reserved), tgt_vocab(tokens.target, 2, reserved);
  check_vocab(src_vocab, c + ".src_vocab");
  check_vocab(tgt_vocab, c + ".tgt_vocab");
  check_array(heed::build_array_nmt(tokens.source, src_vocab, num_steps), c + ".src");
  check_array(heed::build_array_nmt(tokens.target, tgt_vocab, num_steps), c + ".tgt");
}

/// ../shared/data/fra-eng/fra.txt beside the checkout, or "" (with a warning) without it.
std::string fra_txt() {
  const std::string path = HEED_TEST_DATA_DIR "/../../../shared/data/fra-eng/fra.txt";
  if (std::filesystem::exists(path)) return path;
  WARN("skipped: " << path << " is absent");
  return "";
}

/// A file under the temporary directory holding `contents`, removed at scope exit.
class TempFile {
 public:
  explicit TempFile(const std::string& contents) {
    static int counter = 0;
    path_ = (std::filesystem::temp_directory_path() /
             ("heed_test_nmt_" + std::to_string(reinterpret_cast<std::uintptr_t>(this)) + "_" +
              std::to_string(counter++) + ".txt"))
                .string();
    std::ofstream(path_, std::ios::binary) << contents;
  }
  ~TempFile() { std::remove(path_.c_str()); }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

std::string utf8(char32_t cp) {
  std::string out;
  heed::detail::append_utf8(out, cp);
  return out;
}

}  // namespace
