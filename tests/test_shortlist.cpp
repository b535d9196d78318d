// The vocabulary shortlist (heed/seq2seq/shortlist.hpp): building it from pairs, its file,
// and predict_seq2seq scoring only its candidates.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "seq2seq_common.hpp"

namespace {

/// A file under the system's temporary directory, removed at the end of the scope.
class ShortlistFile {
 public:
  explicit ShortlistFile(const std::string& text = "") {
    static int counter = 0;
    path_ = (std::filesystem::temp_directory_path() /
             ("heed_test_shortlist-" + std::to_string(heed::detail::current_pid()) + "-" + std::to_string(counter++)))
                .string();
    if (!text.empty()) std::ofstream(path_, std::ios::binary) << text;
  }
  ~ShortlistFile() {
    std::error_code error;
    std::filesystem::remove(path_, error);
  }
  ShortlistFile(const ShortlistFile&) = delete;
  ShortlistFile& operator=(const ShortlistFile&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

using Words = std::vector<std::string>;

}  // namespace

TEST_CASE("Shortlist::build keeps the frequent target words and each source word's best by Dice",
          "[seq2seq][shortlist]") {
  heed::NmtTokens pairs;
  pairs.source = {{"the", "cat"}, {"the", "dog"}, {"a", "cat"}, {"the", "cat", "sleeps"}};
  pairs.target = {{"le", "chat"}, {"le", "chien"}, {"un", "chat"}, {"le", "chat", "dort", "", "x\vy"}};
  heed::ShortlistOptions options;
  options.frequent = 2;
  options.per_source = 2;
  const heed::Shortlist list = heed::Shortlist::build(pairs, options);
  // le 3 times, chat 3: the tie goes to the first in byte order; the empty token and the
  // one with white space are left out.
  CHECK(list.always() == Words{"chat", "le"});
  // cat: with chat in 3 of its 3 sentences (Dice 2·3/(3+3) = 1), le 2 (2·2/6), un 1 (2/4),
  // dort 1 (2/4): chat, then le.
  CHECK(list.targets_of("cat") == Words{"chat", "le"});
  // dog: chien 1 (2/2 = 1), le 1 (2/4).
  CHECK(list.targets_of("dog") == Words{"chien", "le"});
  // sleeps: dort 1 (2/2), then chat (2/4) and le (2/4) tie: chat first.
  CHECK(list.targets_of("sleeps") == Words{"dort", "chat"});
  CHECK(list.targets_of("horse").empty());
  CHECK(list.size() == 5);  // the, cat, dog, a, sleeps

  options.frequent = 0;
  options.per_source = 0;
  const heed::Shortlist none = heed::Shortlist::build(pairs, options);
  CHECK(none.always().empty());
  CHECK(none.size() == 0);

  heed::NmtTokens uneven = pairs;
  uneven.target.pop_back();
  CHECK_THROWS_AS(heed::Shortlist::build(uneven), heed::ValueError);
  options.frequent = -1;
  CHECK_THROWS_WITH(heed::Shortlist::build(pairs, options), Catch::Contains("frequent and per_source must be >= 0"));
}

TEST_CASE("Shortlist files: CTranslate2's vocabulary map, saved atomically and read back", "[seq2seq][shortlist]") {
  heed::NmtTokens pairs;
  pairs.source = {{"the", "cat"}, {"the", "dog"}};
  pairs.target = {{"le", "chat"}, {"le", "chien"}};
  const heed::Shortlist list = heed::Shortlist::build(pairs);
  ShortlistFile file;
  list.save(file.path());
  CHECK(read_all(file.path()) == "\tle chat chien\ncat\tchat le\ndog\tchien le\nthe\tle chat chien\n");
  const heed::Shortlist back = heed::Shortlist::load(file.path());
  CHECK(back.always() == list.always());
  for (const std::string word : {"the", "cat", "dog"}) CHECK(back.targets_of(word) == list.targets_of(word));
  ShortlistFile again;
  back.save(again.path());
  CHECK(read_all(again.path()) == read_all(file.path()));

  // N-grams, CRLF line ends and blank lines as CTranslate2's files may have them.
  ShortlistFile map("the cat\tchat\r\n\nhe\til\n\tun\n");
  const heed::Shortlist ngrams = heed::Shortlist::load(map.path());
  CHECK(ngrams.targets_of("the cat") == Words{"chat"});
  CHECK(ngrams.always() == Words{"un"});

  struct Bad {
    std::string text, message;
  };
  const std::vector<Bad> bad = {
      {"cat chat\n", "line 1: no tab"},
      {"cat\tchat\ncat\tle\n", "line 2: the n-gram 'cat' again"},
      {"\tle\n\tun\n", "line 2: a second line of the tokens always kept"},
      {"the  cat\tle\n", "line 1: an empty token"},
      {" cat\tle\n", "an empty token"},
      {"a b c d e f g h i j k l m n o p q\tle\n", "an n-gram of 17 tokens (at most 16)"},
  };
  for (const Bad& b : bad) {
    INFO(b.text);
    ShortlistFile f(b.text);
    CHECK_THROWS_AS(heed::Shortlist::load(f.path()), heed::FileError);
    CHECK_THROWS_WITH(heed::Shortlist::load(f.path()), Catch::Contains(f.path()) && Catch::Contains(b.message));
  }
  ShortlistFile missing;
  CHECK_THROWS_WITH(heed::Shortlist::load(missing.path()), Catch::Contains(missing.path()));
  CHECK_THROWS_AS(heed::Shortlist::load(std::filesystem::temp_directory_path().string()), heed::FileError);
}

TEST_CASE("Shortlist::candidates: the always-kept tokens, the source n-grams', <eos>, <unk> and the extra ones",
          "[seq2seq][shortlist]") {
  ShortlistFile map("\tle\nthe cat\tchat\ncat\tfélin\ndog\tchien inconnu\n");
  const heed::Shortlist list = heed::Shortlist::load(map.path());
  const heed::Vocab vocab({{"le", "chat", "félin", "chien", "un", "il"}}, 0, {"<pad>", "<bos>", "<eos>"});
  const auto ids = [&](const Words& words) {
    std::vector<index_t> out = vocab[words];
    std::sort(out.begin(), out.end());
    return out;
  };
  // "inconnu" is not in the vocabulary: <unk>, kept anyway.
  CHECK(list.candidates({{"the", "cat"}}, vocab) == ids({"<unk>", "<eos>", "le", "chat", "félin"}));
  CHECK(list.candidates({{"a", "cat"}}, vocab) == ids({"<unk>", "<eos>", "le", "félin"}));
  CHECK(list.candidates({{"a", "cat"}, {"dog"}}, vocab) == ids({"<unk>", "<eos>", "le", "félin", "chien"}));
  CHECK(list.candidates({{"a", "cat"}}, vocab, {vocab["il"]}) == ids({"<unk>", "<eos>", "le", "félin", "il"}));
  CHECK(list.candidates({}, vocab) == ids({"<unk>", "<eos>", "le"}));
  CHECK_THROWS_AS(list.candidates({}, vocab, {vocab.size()}), heed::IndexError);
}

TEMPLATE_TEST_CASE("predict_seq2seq with a shortlist scores only its candidates", "[seq2seq][shortlist]",
                   BahdanauNet<float>, TransformerNet<float>) {
  using Net = TestType;
  heed::NmtData data = small_corpus(80);
  heed::Generator gen(21);
  const std::unique_ptr<Net> net = small_net<Net>(data, gen);
  heed::TrainOptions train;
  train.generator = &gen;
  heed::train_seq2seq<float>(*net, data.data_iter, 0.005, 40, data.tgt_vocab, train);
  const std::vector<std::string> sentences = {"go .", "i'm home .", "he's calm .", "i lost .", "wait ."};
  std::vector<Words> tokens;
  for (const std::string& s : sentences) tokens.push_back(heed::detail::split(s, ' '));
  heed::PredictOptions options;
  options.save_attention_weights = false;
  const auto full = heed::predict_seq2seq<float>(*net, sentences, data.src_vocab, data.tgt_vocab, 10, options);

  SECTION("a shortlist of the whole vocabulary changes nothing") {
    ShortlistFile map("\t" + [&] {
      std::string all;
      for (index_t v = 0; v < data.tgt_vocab.size(); ++v) all += (v ? " " : "") + data.tgt_vocab.to_tokens(v);
      return all;
    }() + "\n");
    heed::PredictOptions with = options;
    with.shortlist = std::make_shared<const heed::Shortlist>(heed::Shortlist::load(map.path()));
    for (const index_t beam : {1, 3}) {
      options.beam_size = with.beam_size = beam;
      const auto a = heed::predict_seq2seq<float>(*net, sentences, data.src_vocab, data.tgt_vocab, 10, options);
      const auto b = heed::predict_seq2seq<float>(*net, sentences, data.src_vocab, data.tgt_vocab, 10, with);
      for (std::size_t i = 0; i < sentences.size(); ++i) {
        CHECK(b[i].tokens == a[i].tokens);
        CHECK(b[i].log_prob == a[i].log_prob);
      }
    }
  }

  SECTION("a short list: greedy takes the best kept token, normalised over the kept ones") {
    // Few words: the translations of the whole vocabulary have others.
    ShortlistFile map("\t.\nhome\tmaison chez\ncalm\tcalme\n");
    heed::PredictOptions with = options;
    with.shortlist = std::make_shared<const heed::Shortlist>(heed::Shortlist::load(map.path()));
    const std::vector<index_t> kept = with.shortlist->candidates(tokens, data.tgt_vocab);
    REQUIRE(kept.size() < static_cast<std::size_t>(data.tgt_vocab.size()) / 2);
    // Forbidding every other token gives the same greedy tokens with log P over the whole
    // vocabulary: lower than the shortlist's, normalised over fewer tokens.
    heed::PredictOptions forbidding = options;
    for (index_t v = 0; v < data.tgt_vocab.size(); ++v)
      if (!std::binary_search(kept.begin(), kept.end(), v)) forbidding.forbidden_tokens.push_back(v);
    const auto got = heed::predict_seq2seq<float>(*net, sentences, data.src_vocab, data.tgt_vocab, 10, with);
    const auto reference =
        heed::predict_seq2seq<float>(*net, sentences, data.src_vocab, data.tgt_vocab, 10, forbidding);
    bool changed = false;
    for (std::size_t i = 0; i < sentences.size(); ++i) {
      INFO(sentences[i] << " => " << got[i].text << " (whole vocabulary: " << full[i].text << ")");
      CHECK(got[i].tokens == reference[i].tokens);
      CHECK(got[i].log_prob >= reference[i].log_prob);
      CHECK(got[i].log_prob <= 0.0);
      for (const index_t t : got[i].tokens) CHECK(std::binary_search(kept.begin(), kept.end(), t));
      changed = changed || got[i].tokens != full[i].tokens;
    }
    CHECK(changed);

    // The candidates are the call's: micro_batches and threads change nothing.
    for (const index_t parts : {2, 5}) {
      heed::PredictOptions split = with;
      split.micro_batches = parts;
      const auto again = heed::predict_seq2seq<float>(*net, sentences, data.src_vocab, data.tgt_vocab, 10, split);
      for (std::size_t i = 0; i < sentences.size(); ++i) {
        CHECK(again[i].tokens == got[i].tokens);
        CHECK(again[i].log_prob == got[i].log_prob);
      }
    }

    // Beam search and sampling stay inside the list too.
    heed::PredictOptions beam = with;
    beam.beam_size = 3;
    beam.n_best = 3;
    for (const auto& t : heed::predict_seq2seq<float>(*net, sentences, data.src_vocab, data.tgt_vocab, 10, beam))
      for (const auto& h : t.n_best)
        for (const index_t token : h.tokens) CHECK(std::binary_search(kept.begin(), kept.end(), token));
    heed::PredictOptions sample = with;
    sample.sample = true;
    sample.beam_size = 2;
    heed::Generator draws(5);
    sample.generator = &draws;
    for (const auto& t : heed::predict_seq2seq<float>(*net, sentences, data.src_vocab, data.tgt_vocab, 10, sample))
      for (const auto& h : t.n_best)
        for (const index_t token : h.tokens) CHECK(std::binary_search(kept.begin(), kept.end(), token));

    // A target prefix's tokens are candidates, even when the list has none of them.
    heed::PredictOptions prefixed = with;
    const std::string forced = data.tgt_vocab.to_tokens(full[2].tokens.front());
    prefixed.target_prefix = std::vector<Words>(sentences.size(), Words{"<unk>", forced});
    for (const auto& t : heed::predict_seq2seq<float>(*net, sentences, data.src_vocab, data.tgt_vocab, 10, prefixed)) {
      REQUIRE(t.tokens.size() >= 2);
      CHECK(t.tokens[0] == data.tgt_vocab.unk_index());
      CHECK(t.tokens[1] == data.tgt_vocab[forced]);
    }
  }
}

TEST_CASE("predict_seq2seq with a shortlist in bf16 and int8, from converted and fp32 weights",
          "[seq2seq][shortlist]") {
  heed::NmtData data = small_corpus(80);
  heed::Generator gen(23);
  const std::unique_ptr<TransformerNet<float>> net = small_net<TransformerNet<float>>(data, gen);
  const std::vector<std::string> sentences = {"go .", "i'm home .", "he's calm .", "i lost ."};
  std::vector<Words> tokens;
  for (const std::string& s : sentences) tokens.push_back(heed::detail::split(s, ' '));
  std::string all = "\t";
  for (index_t v = 0; v < data.tgt_vocab.size(); ++v) all += (v ? " " : "") + data.tgt_vocab.to_tokens(v);
  ShortlistFile whole(all + "\n"), some("\tva . je suis\ngo\tva allez\n");
  heed::PredictOptions options;
  options.save_attention_weights = false;
  options.beam_size = 2;
  for (const heed::Precision precision : {heed::Precision::bf16, heed::Precision::int8}) {
    INFO(heed::to_string(precision));
    options.precision = precision;
    heed::PredictOptions with = options;
    with.shortlist = std::make_shared<const heed::Shortlist>(heed::Shortlist::load(whole.path()));
    // The gathered rows in the guard's precision are the whole weight's rows in it.
    const auto a = heed::predict_seq2seq<float>(*net, sentences, data.src_vocab, data.tgt_vocab, 10, options);
    const auto b = heed::predict_seq2seq<float>(*net, sentences, data.src_vocab, data.tgt_vocab, 10, with);
    for (std::size_t i = 0; i < sentences.size(); ++i) {
      CHECK(b[i].tokens == a[i].tokens);
      CHECK(b[i].log_prob == a[i].log_prob);
    }
    // A converted net (its embeddings too): its stored rows gathered, the whole list
    // giving the bits of no list, a short one only its candidates.
    heed::Generator copy_gen(23);
    const auto converted = small_net<TransformerNet<float>>(data, copy_gen);
    converted->load_state_dict(net->state_dict());
    heed::convert_weights_(*converted, precision);
    const auto c = heed::predict_seq2seq<float>(*converted, sentences, data.src_vocab, data.tgt_vocab, 10, options);
    const auto d = heed::predict_seq2seq<float>(*converted, sentences, data.src_vocab, data.tgt_vocab, 10, with);
    heed::PredictOptions short_list = options;
    short_list.shortlist = std::make_shared<const heed::Shortlist>(heed::Shortlist::load(some.path()));
    const auto e = heed::predict_seq2seq<float>(*converted, sentences, data.src_vocab, data.tgt_vocab, 10, short_list);
    const std::vector<index_t> kept = short_list.shortlist->candidates(tokens, data.tgt_vocab);
    for (std::size_t i = 0; i < sentences.size(); ++i) {
      CHECK(d[i].tokens == c[i].tokens);
      CHECK(d[i].log_prob == c[i].log_prob);
      for (const index_t t : e[i].tokens) CHECK(std::binary_search(kept.begin(), kept.end(), t));
    }
  }
}
