// d2l's Vocab (heed/seq2seq/vocab.hpp): its order, d2l's vocabularies, and
// from_idx_to_token.
#include "seq2seq_data_common.hpp"

// ---- Vocab -----------------------------------------------------------------------

TEST_CASE("Vocab orders tokens as d2l: reserved first, then by frequency, ties by first occurrence", "[data]") {
  const std::vector<std::vector<std::string>> corpus{{"b", "a", "c", "a"}, {"d", "c", "a", "e"}};
  // a: 3, c: 2, then b, d, e once each in order of first occurrence.
  const heed::Vocab all(corpus);
  CHECK(all.idx_to_token() == std::vector<std::string>{"<unk>", "a", "c", "b", "d", "e"});
  CHECK(all.token_freqs() ==
        std::vector<std::pair<std::string, index_t>>{{"a", 3}, {"c", 2}, {"b", 1}, {"d", 1}, {"e", 1}});

  const heed::Vocab vocab(corpus, /*min_freq=*/2, {"<pad>", "<eos>"});
  CHECK(vocab.size() == 5);
  CHECK(vocab.idx_to_token() == std::vector<std::string>{"<unk>", "<pad>", "<eos>", "a", "c"});
  CHECK(vocab.token_freqs().size() == 5);  // d2l keeps every count
  CHECK(vocab["a"] == 3);
  CHECK(vocab["b"] == 0);  // below min_freq: unknown
  CHECK(vocab["zzz"] == heed::Vocab::unk());
  CHECK(vocab[std::vector<std::string>{"c", "b", "<eos>"}] == std::vector<index_t>{4, 0, 2});
  CHECK(vocab[{"c", "a"}] == std::vector<index_t>{4, 3});
  CHECK(vocab.to_tokens(4) == "c");
  CHECK(vocab.to_tokens(std::vector<index_t>{3, 0, 1}) == std::vector<std::string>{"a", "<unk>", "<pad>"});
  CHECK(vocab.contains("<pad>"));
  CHECK_FALSE(vocab.contains("b"));

  const heed::Vocab empty;
  CHECK(empty.size() == 1);
  CHECK(empty.to_tokens(0) == "<unk>");

  CHECK_ERROR(heed::IndexError, "Vocab::to_tokens: index 5 out of range for a vocabulary of 5 tokens",
              vocab.to_tokens(5));
  CHECK_ERROR(heed::IndexError, "index -1", vocab.to_tokens(-1));
  CHECK_ERROR(heed::IndexError, "index 9", vocab.to_tokens(std::vector<index_t>{1, 9}));
  CHECK_ERROR(heed::ValueError, "Vocab: min_freq must be >= 0, got -1", heed::Vocab(corpus, -1));
  CHECK_ERROR(heed::ValueError, "reserved token '<pad>' appears twice", heed::Vocab(corpus, 0, {"<pad>", "<pad>"}));
  CHECK_ERROR(heed::ValueError, "reserved token '<unk>'", heed::Vocab(corpus, 0, {"<unk>"}));
}

TEST_CASE("Vocab matches d2l on the handcrafted text", "[data]") {
  const heed::NmtTokens tokens = heed::tokenize_nmt(text("hand.text"));
  const std::vector<std::string> reserved{"<pad>", "<bos>", "<eos>"};
  const heed::Vocab src_vocab(tokens.source, 2, reserved), tgt_vocab(tokens.target, 2, reserved);
  check_vocab(src_vocab, "hand.src_vocab");
  check_vocab(tgt_vocab, "hand.tgt_vocab");
  check_vocab(heed::Vocab(tokens.source), "hand.vocab0");
  // Corpus tokens that are also reserved keep the reserved index.
  check_vocab(heed::Vocab(tokens.source, 1, {"<pad>", ".", "go"}), "hand.vocab_res");
  CHECK(src_vocab[lines("hand.queries")] == ints("hand.query_idx"));
}

TEST_CASE("Vocab::from_idx_to_token rebuilds a vocabulary with the same indices", "[data]") {
  const heed::Vocab vocab({{"go", "."}, {"i", "lost", "."}, {"go", "!"}}, 0, {"<pad>", "<bos>", "<eos>"});
  const heed::Vocab copy = heed::Vocab::from_idx_to_token(vocab.idx_to_token());
  CHECK(copy.idx_to_token() == vocab.idx_to_token());
  for (const auto& token : vocab.idx_to_token()) CHECK(copy[token] == vocab[token]);
  CHECK(copy["never seen"] == 0);
  CHECK(copy.token_freqs().empty());
  CHECK_ERROR(heed::ValueError, "Vocab::from_idx_to_token: the first token must be <unk>, got 'go'",
              heed::Vocab::from_idx_to_token({"go", "<unk>"}));
  CHECK_ERROR(heed::ValueError, "Vocab::from_idx_to_token: token 'go' appears twice",
              heed::Vocab::from_idx_to_token({"<unk>", "go", "go"}));
}
