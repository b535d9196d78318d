// d2l's NMT data pipeline (heed/seq2seq/data.hpp) and the built-in corpus
// (heed/seq2seq/corpus.hpp), against d2l's own functions run by
// tests/data/make_nmt_golden.py.
#include "seq2seq_data_common.hpp"

#include <limits>

// ---- preprocess_nmt, tokenize_nmt ------------------------------------------------

TEST_CASE("preprocess_nmt lowercases as Python's str.lower() over its documented coverage", "[data]") {
  const IndexTensor table = golden().tensor<std::int64_t>("lower.table");
  REQUIRE(table.size(0) > 500);
  for (index_t i = 0; i < table.size(0); ++i) {
    const auto cp = static_cast<char32_t>(table.at({i, 0}));
    std::string expected = utf8(static_cast<char32_t>(table.at({i, 1})));
    if (table.at({i, 2}) >= 0) expected += utf8(static_cast<char32_t>(table.at({i, 2})));
    INFO("U+" << std::hex << static_cast<std::uint32_t>(cp));
    CHECK(heed::preprocess_nmt(utf8(cp)) == expected);
  }
  // Beyond the coverage code points stay as they are (str.lower() gives U+0561 here).
  CHECK(heed::preprocess_nmt(utf8(0x531)) == utf8(0x531));
}

TEST_CASE("preprocess_nmt matches d2l on the handcrafted text", "[data]") {
  CHECK(heed::preprocess_nmt(text("hand.raw")) == text("hand.text"));

  // Spaces go before , . ! ? unless a space precedes, across tabs and line ends too.
  CHECK(heed::preprocess_nmt("Go.\tVa\u202F!") == "go .\tva !");
  CHECK(heed::preprocess_nmt("Hi.\tSalut\u00A0!") == "hi .\tsalut !");
  CHECK(heed::preprocess_nmt("Stop...") == "stop . . .");
  CHECK(heed::preprocess_nmt(".x") == ".x");
  CHECK(heed::preprocess_nmt("a\n.\t,") == "a\n .\t ,");
  CHECK(heed::preprocess_nmt("a ,b") == "a ,b");
  CHECK(heed::preprocess_nmt("ÇA VA ?") == "ça va ?");
  CHECK(heed::preprocess_nmt("ΟΔΟΣ. Σ") == "οδος . σ");  // final sigma
  CHECK(heed::preprocess_nmt("") == "");

  CHECK_ERROR(heed::ValueError, "preprocess_nmt: invalid UTF-8 at byte 3: truncated sequence",
              heed::preprocess_nmt("ab\xC3"));
  CHECK_ERROR(heed::ValueError, "unexpected continuation byte", heed::preprocess_nmt("\x80"));
}

TEST_CASE("tokenize_nmt matches d2l on the handcrafted text", "[data]") {
  const heed::NmtTokens tokens = heed::tokenize_nmt(text("hand.text"));
  CHECK(joined(tokens.source) == lines("hand.source"));
  CHECK(joined(tokens.target) == lines("hand.target"));
  CHECK(static_cast<index_t>(tokens.source.size()) == ints("hand.num_pairs").at(0));
  CHECK(static_cast<index_t>(heed::tokenize_nmt(text("hand.text"), 3).source.size()) == ints("hand.num_pairs3").at(0));

  // Empty tokens are kept, as Python's split(' ').
  const heed::NmtTokens spaced = heed::tokenize_nmt(" a  b\t.\n");
  CHECK(spaced.source == std::vector<std::vector<std::string>>{{"", "a", "", "b"}});
  CHECK(spaced.target == std::vector<std::vector<std::string>>{{"."}});
}

TEST_CASE("tokenize_nmt keeps d2l's num_examples quirk, counts pairs only and reads the first two columns", "[data]") {
  std::string many;
  for (int i = 0; i < 1000; ++i) many += "a" + std::to_string(i) + "\tb\n";
  // d2l breaks at i > num_examples: 600 examples give 601 pairs; 0 or none gives all.
  CHECK(heed::tokenize_nmt(many, 600).source.size() == 601);
  CHECK(heed::tokenize_nmt(many, 600).source.back() == std::vector<std::string>{"a600"});
  CHECK(heed::tokenize_nmt(many, 1).source.size() == 2);
  CHECK(heed::tokenize_nmt(many, 0).source.size() == 1000);
  CHECK(heed::tokenize_nmt(many).source.size() == 1000);
  // Blank lines and lines without a tab are not examples, wherever they are.
  CHECK(heed::tokenize_nmt("\n\nno tab\na\tb\n\nc\td\ne\tf\n", 1).source ==
        std::vector<std::vector<std::string>>{{"a"}, {"c"}});

  const heed::NmtTokens tokens = heed::tokenize_nmt("go .\tva !\tCC-BY 2.0\nno tab\n\nhi .\tsalut !");
  CHECK(tokens.source == std::vector<std::vector<std::string>>{{"go", "."}, {"hi", "."}});
  CHECK(tokens.target == std::vector<std::vector<std::string>>{{"va", "!"}, {"salut", "!"}});
}

// ---- truncate_pad, build_array_nmt -----------------------------------------------

TEST_CASE("truncate_pad and build_array_nmt match d2l", "[data]") {
  CHECK(heed::truncate_pad({5, 6, 7}, 5, 1) == ints("truncate_pad.short"));
  CHECK(heed::truncate_pad({5, 6, 7}, 3, 1) == ints("truncate_pad.exact"));
  CHECK(heed::truncate_pad({5, 6, 7, 8, 9}, 2, 0) == ints("truncate_pad.long"));
  CHECK(heed::truncate_pad({}, 3, 4) == ints("truncate_pad.empty"));
  CHECK(heed::truncate_pad({5}, 0, 1).empty());
  CHECK_ERROR(heed::ValueError, "truncate_pad: num_steps must be >= 0, got -1", heed::truncate_pad({5}, -1, 1));
  // A length no memory holds is refused before the line is resized (it asked for 8 TB).
  CHECK_ERROR(heed::OutOfMemoryError, "truncate_pad: 1099511627776 × 8 bytes (num_steps of token ids) is more than",
              heed::truncate_pad({5}, index_t(1) << 40, 1));
  CHECK_ERROR(heed::ValueError, "truncate_pad: 9223372036854775807 * 8 overflows int64",
              heed::truncate_pad({5}, std::numeric_limits<index_t>::max(), 1));

  const heed::NmtTokens tokens = heed::tokenize_nmt(text("hand.text"));
  const std::vector<std::string> reserved{"<pad>", "<bos>", "<eos>"};
  const heed::Vocab src_vocab(tokens.source, 2, reserved), tgt_vocab(tokens.target, 2, reserved);
  check_array(heed::build_array_nmt(tokens.source, src_vocab, 4), "hand.src");
  check_array(heed::build_array_nmt(tokens.target, tgt_vocab, 4), "hand.tgt");
  check_array(heed::build_array_nmt(tokens.source, src_vocab, 8), "hand.src8");

  // By hand: <pad> = 1, <eos> = 3 ("a" = 4); "b" is unknown (0).
  const heed::Vocab vocab({{"a", "a"}}, 0, reserved);
  const heed::NmtArray small = heed::build_array_nmt({{"a"}, {"a", "b", "a", "a"}, {}}, vocab, 3);
  CHECK(small.array.to_vector() == std::vector<index_t>{4, 3, 1, 4, 0, 4, 3, 1, 1});
  CHECK(small.valid_len.to_vector() == std::vector<index_t>{2, 3, 1});

  CHECK_ERROR(heed::ValueError, "build_array_nmt: num_steps must be positive, got 0",
              heed::build_array_nmt(tokens.source, src_vocab, 0));
  CHECK_ERROR(heed::ValueError, "needs the reserved tokens <pad> and <eos>",
              heed::build_array_nmt(tokens.source, heed::Vocab(tokens.source), 4));
}

// ---- d2l's data: fra.txt ---------------------------------------------------------

TEST_CASE("the pipeline matches d2l on the first 600 examples of fra.txt", "[data]") {
  const std::string path = fra_txt();
  if (path.empty()) return;
  // d2l reads the whole file; reading only the 601 pairs tokenize_nmt uses is the same.
  for (const std::optional<std::size_t> max_pairs : {std::optional<std::size_t>(), std::optional<std::size_t>(601)}) {
    INFO("max_pairs " << (max_pairs ? std::to_string(*max_pairs) : "none"));
    heed::ReadNmtOptions options;
    options.max_pairs = max_pairs;
    check_pipeline(heed::read_data_nmt(path, options), 600, 10, "fra");
  }
  check_pipeline(heed::read_data_nmt(path), std::nullopt, 10, "fra_all");

  // d2l's load_data_nmt(batch_size=64, num_steps=10) and its four test sentences.
  const heed::NmtData data = heed::load_data_nmt(path, 64, 10);
  CHECK(data.data_iter.num_examples() == 601);
  CHECK(data.data_iter.num_batches() == 10);
  CHECK(data.src_vocab.size() == ints("fra.src_vocab.size").at(0));
  CHECK(data.tgt_vocab.size() == ints("fra.tgt_vocab.size").at(0));
  std::vector<index_t> src, tgt;
  for (const char* english : {"go .", "i lost .", "he's calm .", "i'm home ."})
    for (index_t i : data.src_vocab[heed::detail::split(english, ' ')]) src.push_back(i);
  for (const char* french : {"va !", "j'ai perdu .", "il est calme .", "je suis chez moi ."})
    for (index_t i : data.tgt_vocab[heed::detail::split(french, ' ')]) tgt.push_back(i);
  CHECK(src == ints("fra.d2l_src_idx"));
  CHECK(tgt == ints("fra.d2l_tgt_idx"));
  CHECK(std::count(src.begin(), src.end(), 0) == 0);  // no <unk> among them
  CHECK(std::count(tgt.begin(), tgt.end(), 0) == 0);
}

// ---- read_data_nmt ---------------------------------------------------------------

namespace {

/// Every source sentence of one epoch, in batch order (the same seed shuffles alike).
std::vector<std::vector<std::int64_t>> epoch_sources(heed::NmtData& data) {
  std::vector<std::vector<std::int64_t>> rows;
  for (const heed::NmtBatch& batch : data.data_iter)
    for (index_t r = 0; r < batch.X.size(0); ++r) {
      const std::int64_t* row = batch.X.data() + r * batch.X.size(1);
      rows.emplace_back(row, row + batch.X.size(1));
    }
  return rows;
}

}  // namespace

TEST_CASE("read_data_nmt reads fra.txt's format", "[data]") {
  SECTION("pairs, CRLF, extra columns, empty lines, no final newline") {
    const TempFile file(
        "Go.\tVa !\r\n"
        "Hi.\tSalut !\tCC-BY 2.0 (France) Attribution: tatoeba.org #538123 (CM) & #509819 (Aiji)\n"
        "\n"
        "Run!\tCours\xE2\x80\xAF!\r\n"
        "Who?\tQui ?");
    CHECK(heed::read_data_nmt(file.path()) == "Go.\tVa !\nHi.\tSalut !\nRun!\tCours\xE2\x80\xAF!\nWho?\tQui ?\n");
  }
  SECTION("an empty file holds no pairs") { CHECK(heed::read_data_nmt(TempFile("").path()).empty()); }
  SECTION("a missing file or a directory") {
    const std::string missing = (std::filesystem::temp_directory_path() / "heed_no_such_file_fra.txt").string();
    CHECK_ERROR(heed::FileError, "read_data_nmt: cannot open " + missing + ": No such file or directory",
                heed::read_data_nmt(missing));
    const std::string dir = std::filesystem::temp_directory_path().string();
    CHECK_ERROR(heed::FileError, dir + " is a directory", heed::read_data_nmt(dir));
  }
  SECTION("a FIFO with no writer is refused at once instead of blocking the reader") {
    const std::string fifo = (std::filesystem::temp_directory_path() /
                              ("heed_test_fifo_" + std::to_string(reinterpret_cast<std::uintptr_t>(&fifo))))
                                 .string();
    std::filesystem::remove(fifo);
    REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
    CHECK_ERROR(heed::FileError, "read_data_nmt: " + fifo + " is a FIFO (named pipe), not a regular file",
                heed::read_data_nmt(fifo));
    CHECK_ERROR(heed::FileError, fifo + " is a FIFO", heed::load_data_nmt(fifo, 2, 4));
    std::filesystem::remove(fifo);
  }
  SECTION("a line without a tab names the file and the line") {
    const TempFile file("Go.\tVa !\nHi.\tSalut !\nRun! Cours !\nWho?\tQui ?\n");
    CHECK_ERROR(heed::FileError, file.path() + ":3: no tab", heed::read_data_nmt(file.path()));

    heed::ReadNmtOptions options;
    options.max_pairs = 2;  // the bad line is not read
    CHECK(heed::read_data_nmt(file.path(), options) == "Go.\tVa !\nHi.\tSalut !\n");
  }
  SECTION("invalid UTF-8") {
    const std::vector<std::pair<std::string, std::string>> cases{
        {"\x80", "byte 4: unexpected continuation byte"}, {"\xF8\x88\x80\x80\x80", "byte 4: invalid lead byte"},
        {"\xC3", "byte 4: truncated sequence"},           {"\xC3(", "byte 4: truncated sequence"},
        {"\xE2\x82", "byte 4: truncated sequence"},       {"\xC0\xAF", "byte 4: overlong encoding"},
        {"\xE0\x80\xAF", "byte 4: overlong encoding"},    {"\xF0\x80\x80\xAF", "byte 4: overlong encoding"},
        {"\xED\xA0\x80", "byte 4: surrogate code point"}, {"\xF4\x90\x80\x80", "byte 4: code point above U+10FFFF"},
    };
    for (const auto& [bytes, what] : cases) {
      INFO(what);
      const TempFile file("Go.\tVa !\nHi." + bytes + "\tSalut !\n");
      CHECK_ERROR(heed::FileError, file.path() + ":2: invalid UTF-8 at " + what, heed::read_data_nmt(file.path()));
    }
    // The largest code point and the ones around the surrogates are fine.
    const TempFile fine("a\xF4\x8F\xBF\xBF\xED\x9F\xBF\xEE\x80\x80\tb\n");
    CHECK(heed::read_data_nmt(fine.path()) == "a\xF4\x8F\xBF\xBF\xED\x9F\xBF\xEE\x80\x80\tb\n");
  }
  SECTION("blank lines count nowhere: load_data_nmt reads what load_data_nmt_text reads") {
    std::string raw;
    for (int i = 0; i < 12; ++i) raw += "\n\r\nw" + std::to_string(i % 3) + " .\tm" + std::to_string(i % 3) + " .\n";
    const TempFile file(raw);
    for (const std::size_t n : {std::size_t(1), std::size_t(4), std::size_t(20)}) {
      INFO(n << " examples");
      heed::ReadNmtOptions options;
      options.max_pairs = n + 1;
      CHECK(heed::read_data_nmt(file.path(), options) ==
            heed::read_data_nmt(file.path()).substr(0, std::min<std::size_t>(n + 1, 12) * 10));
      heed::NmtData from_file = heed::load_data_nmt(file.path(), 2, 4, n, 7);
      heed::NmtData from_text = heed::load_data_nmt_text(heed::read_data_nmt(file.path()), 2, 4, n, 7);
      heed::NmtData from_raw = heed::load_data_nmt_text(raw, 2, 4, n, 7);
      const index_t expected = static_cast<index_t>(std::min<std::size_t>(n + 1, 12));
      CHECK(from_file.data_iter.num_examples() == expected);
      CHECK(from_text.data_iter.num_examples() == expected);
      CHECK(from_raw.data_iter.num_examples() == expected);
      const auto first_epoch = epoch_sources(from_text);  // each loop over a loader is a new epoch
      CHECK(epoch_sources(from_file) == first_epoch);
      CHECK(epoch_sources(from_raw) == first_epoch);
    }
  }
  SECTION("skip_malformed skips and counts bad lines") {
    const TempFile file("Go.\tVa !\nno tab\nHi.\tSalut !\nbad \xFF\tbyte\nWho?\tQui ?\n");
    std::size_t skipped = 99;
    heed::ReadNmtOptions options;
    options.skip_malformed = true;
    options.skipped_lines = &skipped;
    CHECK(heed::read_data_nmt(file.path(), options) == "Go.\tVa !\nHi.\tSalut !\nWho?\tQui ?\n");
    CHECK(skipped == 2);
  }
}

// ---- NmtDataLoader ---------------------------------------------------------------

namespace {

/// n examples whose every entry identifies the example: src row i = {i, i, i}, its
/// valid length i + 1000, tgt row i = {-i, -i}, its valid length i + 2000.
heed::NmtDataLoader numbered_loader(index_t n, index_t batch_size, std::uint64_t seed, bool shuffle = true) {
  std::vector<index_t> src, src_len, tgt, tgt_len;
  for (index_t i = 0; i < n; ++i) {
    src.insert(src.end(), {i, i, i});
    src_len.push_back(i + 1000);
    tgt.insert(tgt.end(), {-i, -i});
    tgt_len.push_back(i + 2000);
  }
  return heed::NmtDataLoader(IndexTensor(src, {n, 3}), IndexTensor(src_len, {n}), IndexTensor(tgt, {n, 2}),
                             IndexTensor(tgt_len, {n}), batch_size, seed, shuffle);
}

/// One epoch's batches as the X[:, 0] of their rows.
std::vector<std::vector<index_t>> epoch_rows(heed::NmtDataLoader& loader) {
  std::vector<std::vector<index_t>> batches;
  for (const heed::NmtBatch& batch : loader) {
    batches.emplace_back();
    for (index_t r = 0; r < batch.X.size(0); ++r) batches.back().push_back(batch.X.at({r, 0}));
  }
  return batches;
}

/// One epoch: the example numbers in batch order, checking that each batch holds whole
/// examples, and the batch sizes.
std::vector<index_t> epoch(heed::NmtDataLoader& loader, std::vector<index_t>* sizes = nullptr) {
  std::vector<index_t> seen;
  for (const heed::NmtBatch& batch : loader) {
    const index_t b = batch.X.size(0);
    REQUIRE(batch.X.shape() == heed::Shape({b, 3}));
    REQUIRE(batch.X_valid_len.shape() == heed::Shape({b}));
    REQUIRE(batch.Y.shape() == heed::Shape({b, 2}));
    REQUIRE(batch.Y_valid_len.shape() == heed::Shape({b}));
    for (index_t r = 0; r < b; ++r) {
      const index_t i = batch.X.at({r, 0});
      CHECK(batch.X.at({r, 2}) == i);
      CHECK(batch.X_valid_len.at({r}) == i + 1000);
      CHECK(batch.Y.at({r, 1}) == -i);
      CHECK(batch.Y_valid_len.at({r}) == i + 2000);
      seen.push_back(i);
    }
    if (sizes) sizes->push_back(b);
  }
  return seen;
}

}  // namespace

TEST_CASE("NmtDataLoader shuffles every epoch as d2l's DataLoader(shuffle=True)", "[data]") {
  heed::NmtDataLoader loader = numbered_loader(601, 64, 7);
  CHECK(loader.num_examples() == 601);
  CHECK(loader.batch_size() == 64);
  CHECK(loader.num_batches() == 10);

  std::vector<index_t> sizes;
  const std::vector<index_t> first = epoch(loader, &sizes);
  CHECK(sizes == std::vector<index_t>{64, 64, 64, 64, 64, 64, 64, 64, 64, 25});
  std::vector<index_t> sorted = first;
  std::sort(sorted.begin(), sorted.end());
  for (index_t i = 0; i < 601; ++i) REQUIRE(sorted[static_cast<std::size_t>(i)] == i);  // each example once
  CHECK(first == loader.order());

  const std::vector<index_t> second = epoch(loader);
  CHECK(second != first);  // a fresh permutation each epoch
  CHECK(std::is_permutation(second.begin(), second.end(), first.begin()));

  // The same seed gives the same epochs; another seed others; set_seed restarts.
  heed::NmtDataLoader same = numbered_loader(601, 64, 7);
  CHECK(epoch(same) == first);
  CHECK(epoch(same) == second);
  heed::NmtDataLoader other = numbered_loader(601, 64, 8);
  CHECK(epoch(other) != first);
  other.set_seed(7);
  CHECK(epoch(other) == first);

  // Without shuffling, in order; a batch larger than the data set gives one batch.
  heed::NmtDataLoader ordered = numbered_loader(5, 2, 7, /*shuffle=*/false);
  std::vector<index_t> ordered_sizes;
  CHECK(epoch(ordered, &ordered_sizes) == std::vector<index_t>{0, 1, 2, 3, 4});
  CHECK(ordered_sizes == std::vector<index_t>{2, 2, 1});
  heed::NmtDataLoader one = numbered_loader(5, 100, 7);
  CHECK(one.num_batches() == 1);
  CHECK(epoch(one).size() == 5);
}

TEST_CASE("NmtDataLoader buckets by length within windows of batches and shuffles the batches", "[data]") {
  // 601 examples in batches of 64, windows of 3 batches (192 examples): the permutation
  // is the unbucketed loader's (the same first draws), each window of it sorted.
  heed::NmtDataLoader plain = numbered_loader(601, 64, 7), bucketed = numbered_loader(601, 64, 7);
  CHECK(bucketed.bucketing() == 0);
  bucketed.set_bucketing(3);
  CHECK(bucketed.bucketing() == 3);
  const std::vector<index_t> permutation = epoch(plain);
  std::vector<index_t> sizes;
  const std::vector<index_t> first = epoch(bucketed, &sizes);
  CHECK(std::is_permutation(first.begin(), first.end(), permutation.begin()));
  CHECK(bucketed.num_batches() == 10);
  CHECK(std::count(sizes.begin(), sizes.end(), 64) == 9);
  CHECK(std::count(sizes.begin(), sizes.end(), 25) == 1);
  // Expected batches: each window of the permutation sorted by length (here the example
  // number), cut into runs of 64.
  std::vector<std::vector<index_t>> expected;
  for (std::size_t w = 0; w < permutation.size(); w += 192) {
    std::vector<index_t> window(permutation.begin() + static_cast<std::ptrdiff_t>(w),
                                permutation.begin() + static_cast<std::ptrdiff_t>(std::min<std::size_t>(w + 192, 601)));
    std::sort(window.begin(), window.end());
    for (std::size_t b = 0; b < window.size(); b += 64)
      expected.emplace_back(window.begin() + static_cast<std::ptrdiff_t>(b),
                            window.begin() + static_cast<std::ptrdiff_t>(std::min(b + 64, window.size())));
  }
  std::vector<std::vector<index_t>> got;
  const auto& starts = bucketed.batch_starts();
  REQUIRE(starts.size() == 11);
  for (std::size_t b = 0; b + 1 < starts.size(); ++b)
    got.emplace_back(first.begin() + starts[b], first.begin() + starts[b + 1]);
  CHECK(got != expected);  // the batch order is shuffled...
  std::sort(got.begin(), got.end());
  std::sort(expected.begin(), expected.end());
  CHECK(got == expected);  // ...but the batches are the sorted windows'
  // Deterministic per seed, fresh each epoch.
  const std::vector<index_t> second = epoch(bucketed);
  CHECK(second != first);
  heed::NmtDataLoader same = numbered_loader(601, 64, 7);
  same.set_bucketing(3);
  CHECK(epoch(same) == first);
  CHECK(epoch(same) == second);
  // A window beyond the epoch sorts the whole epoch (and does not overflow).
  heed::NmtDataLoader huge = numbered_loader(601, 64, 7), whole = numbered_loader(601, 64, 7);
  huge.set_bucketing(std::numeric_limits<index_t>::max());
  whole.set_bucketing(10);
  CHECK(epoch(huge) == epoch(whole));
  // Without shuffling, each window is sorted in place.
  heed::NmtDataLoader ordered = numbered_loader(5, 2, 7, /*shuffle=*/false);
  ordered.set_bucketing(1);
  CHECK(epoch(ordered) == std::vector<index_t>{0, 1, 2, 3, 4});
  CHECK_ERROR(heed::ValueError, "NmtDataLoader::set_bucketing: window_batches must be >= 0, got -1",
              ordered.set_bucketing(-1));
}

TEST_CASE("length bucketing cuts the padded positions of the built-in corpus by more than half", "[data]") {
  heed::NmtData plain = heed::load_data_nmt_text(heed::builtin_fra_eng(), 32, 10, std::nullopt, 3);
  heed::NmtData bucketed = heed::load_data_nmt_text(heed::builtin_fra_eng(), 32, 10, std::nullopt, 3);
  bucketed.data_iter.set_bucketing(100);  // the whole epoch is one window
  const heed::PaddingStats before = heed::padding_of_next_epoch(plain.data_iter);
  const heed::PaddingStats after = heed::padding_of_next_epoch(bucketed.data_iter);
  INFO("padded positions: " << before.padded << " shuffled, " << after.padded << " bucketed, of " << before.real
                            << " real");
  CHECK(after.real == before.real);
  CHECK(before.padded > 0);
  CHECK(2 * after.padded <= before.padded);
  CHECK(before.fraction() == Approx(static_cast<double>(before.padded) / (before.padded + before.real)));
  // Drawn on a copy: the loader's own next epoch is still its first.
  heed::NmtData fresh = heed::load_data_nmt_text(heed::builtin_fra_eng(), 32, 10, std::nullopt, 3);
  plain.data_iter.begin();
  fresh.data_iter.begin();
  CHECK(plain.data_iter.order() == fresh.data_iter.order());
  CHECK(heed::padding_of_next_epoch(heed::NmtDataLoader(IndexTensor::empty({0, 2}), IndexTensor::empty({0}),
                                                        IndexTensor::empty({0, 2}), IndexTensor::empty({0}), 4))
            .fraction() == 0.0);
}

TEST_CASE("NmtDataLoader cuts batches by tokens, each within max_tokens and as full as allowed", "[data]") {
  // 500 examples, sources of 1-10 steps (width 10), targets of 1-12 (width 12); X[i][0] = i.
  const index_t n = 500;
  std::vector<index_t> src, src_len, tgt, tgt_len;
  for (index_t i = 0; i < n; ++i) {
    src.insert(src.end(), 10, i);
    src_len.push_back(1 + (i * 7) % 10);
    tgt.insert(tgt.end(), 12, i);
    tgt_len.push_back(src_len.back() + i % 3);  // as in translation, target lengths follow the source's
  }
  const auto make = [&] {
    return heed::NmtDataLoader(IndexTensor(src, {n, 10}), IndexTensor(src_len, {n}), IndexTensor(tgt, {n, 12}),
                               IndexTensor(tgt_len, {n}), 32, 5);
  };
  const auto cost = [&](const std::vector<index_t>& rows) {
    index_t longest_source = 0, longest_target = 0;
    for (const index_t i : rows) {
      longest_source = std::max(longest_source, src_len[static_cast<std::size_t>(i)]);
      longest_target = std::max(longest_target, tgt_len[static_cast<std::size_t>(i)]);
    }
    return static_cast<index_t>(rows.size()) * (longest_source + longest_target);
  };
  for (const index_t bucket : {index_t(0), index_t(4)}) {
    for (const index_t max_tokens : {index_t(15), index_t(150), index_t(600)}) {
      INFO("bucket " << bucket << ", max_tokens " << max_tokens);
      heed::NmtDataLoader loader = make();
      loader.set_bucketing(bucket);
      loader.set_max_tokens(max_tokens);
      CHECK(loader.max_tokens() == max_tokens);
      const std::vector<std::vector<index_t>> batches = epoch_rows(loader);
      CHECK(static_cast<index_t>(batches.size()) == loader.num_batches());
      std::vector<index_t> seen;
      for (const auto& rows : batches) {
        seen.insert(seen.end(), rows.begin(), rows.end());
        CHECK(rows.size() <= 32);
        CHECK((rows.size() == 1 || cost(rows) <= max_tokens));
      }
      std::sort(seen.begin(), seen.end());
      for (index_t i = 0; i < n; ++i) REQUIRE(seen[static_cast<std::size_t>(i)] == i);  // each example once
      if (bucket == 0) {
        // In the epoch's order, each batch is as long as it can be: the next example would
        // pass max_tokens or batch_size.
        for (std::size_t b = 0; b + 1 < batches.size(); ++b) {
          std::vector<index_t> more = batches[b];
          more.push_back(batches[b + 1].front());
          CHECK((more.size() > 32 || cost(more) > max_tokens));
        }
      }
    }
  }
  // Sorted windows pad less; the same seed gives the same batches; 0 cuts by rows again.
  heed::NmtDataLoader shuffled = make(), bucketed = make(), same = make();
  for (heed::NmtDataLoader* l : {&shuffled, &bucketed, &same}) l->set_max_tokens(200);
  bucketed.set_bucketing(4);
  same.set_bucketing(4);
  CHECK(2 * heed::padding_of_next_epoch(bucketed).padded < heed::padding_of_next_epoch(shuffled).padded);
  CHECK(epoch_rows(bucketed) == epoch_rows(same));
  shuffled.set_max_tokens(0);
  CHECK(shuffled.num_batches() == 16);
  shuffled.begin();
  CHECK(shuffled.num_batches() == 16);
  CHECK_ERROR(heed::ValueError, "NmtDataLoader::set_max_tokens: max_tokens must be >= 0 (0: off), got -3",
              shuffled.set_max_tokens(-3));
}

TEST_CASE("NmtDataLoader checks its arguments", "[data]") {
  const IndexTensor a({1, 2, 3, 4}, {2, 2}), len({2, 2}, {2}), b({1, 2, 3}, {3, 1}), len3({1, 1, 1}, {3});
  CHECK_ERROR(heed::ValueError, "NmtDataLoader: batch_size must be positive, got 0",
              heed::NmtDataLoader(a, len, a, len, 0));
  CHECK_ERROR(heed::ShapeError, "got (2, 2), (2), (3, 1), (3)", heed::NmtDataLoader(a, len, b, len3, 2));
  CHECK_ERROR(heed::ShapeError, "NmtDataLoader: expected src (n, steps)", heed::NmtDataLoader(len, len, a, len, 2));
  heed::NmtDataLoader loader(a, len, a, len, 1);
  CHECK_ERROR(heed::IndexError, "NmtDataLoader::batch: index 2 out of range for 2 batches", loader.batch(2));
}

// ---- load_data_nmt and the built-in corpus ---------------------------------------

TEST_CASE("load_data_nmt_text prepares d2l's data from text in memory", "[data]") {
  const heed::NmtData data = heed::load_data_nmt_text(text("hand.raw"), 4, 4, std::nullopt, 1);
  check_vocab(data.src_vocab, "hand.src_vocab");
  check_vocab(data.tgt_vocab, "hand.tgt_vocab");
  CHECK(data.data_iter.num_examples() == ints("hand.num_pairs").at(0));
  CHECK(data.data_iter.batch_size() == 4);

  CHECK_ERROR(heed::ValueError, "load_data_nmt: batch_size must be positive, got 0",
              heed::load_data_nmt_text("a\tb\n", 0, 4));
  CHECK_ERROR(heed::ValueError, "load_data_nmt: num_steps must be positive, got -2",
              heed::load_data_nmt_text("a\tb\n", 2, -2));
  CHECK_ERROR(heed::ValueError, "load_data_nmt: the text holds no sentence pairs",
              heed::load_data_nmt_text("no tab\n", 2, 4));
  CHECK_ERROR(heed::FileError, "cannot open /nonexistent/fra.txt: No such file or directory",
              heed::load_data_nmt("/nonexistent/fra.txt", 2, 4));
  // An empty file, or one of blank lines, is named with the reason.
  const TempFile empty(""), blank("\n\n");
  CHECK_ERROR(heed::FileError, "load_data_nmt: " + empty.path() + " holds no sentence pairs (the file is empty)",
              heed::load_data_nmt(empty.path(), 2, 4));
  CHECK_ERROR(heed::FileError, "load_data_nmt: " + blank.path() + " holds no sentence pairs (only blank lines)",
              heed::load_data_nmt(blank.path(), 2, 4));
}

TEST_CASE("builtin_fra_eng is a deterministic fra.txt-format corpus holding d2l's test pairs", "[data]") {
  const std::string raw = heed::builtin_fra_eng();
  CHECK(heed::builtin_fra_eng() == raw);

  // It passes the file reader's checks unchanged.
  const TempFile file(raw);
  CHECK(heed::read_data_nmt(file.path()) == raw);

  const heed::NmtTokens tokens = heed::tokenize_nmt(heed::preprocess_nmt(raw));
  CHECK(tokens.source.size() >= 300);
  CHECK(tokens.source.size() <= 500);
  std::map<std::string, std::set<std::string>> translations;
  std::set<std::string> pairs;
  for (std::size_t i = 0; i < tokens.source.size(); ++i) {
    const std::string english = join(tokens.source[i], ' '), french = join(tokens.target[i], ' ');
    INFO(english << " -> " << french);
    CHECK(tokens.source[i].size() <= 8);
    CHECK(tokens.target[i].size() <= 8);
    CHECK(std::count(tokens.source[i].begin(), tokens.source[i].end(), "") == 0);
    CHECK(std::count(tokens.target[i].begin(), tokens.target[i].end(), "") == 0);
    CHECK(pairs.insert(english + "\t" + french).second);  // no pair twice
    translations[english].insert(french);
  }
  const auto has = [&](const std::string& english, const std::string& french) {
    INFO(english << " -> " << french);
    CHECK(translations[english].count(french) == 1);
  };
  // d2l's four test sentences.
  has("go .", "va !");
  has("i lost .", "j'ai perdu .");
  has("he's calm .", "il est calme .");
  has("i'm home .", "je suis chez moi .");
  // Agreement in gender and number, elision, negation, questions.
  has("she's happy .", "elle est heureuse .");
  has("we're tired .", "nous sommes fatigués .");
  has("they're ready .", "elles sont prêtes .");
  has("i'm not tired .", "je ne suis pas fatigué .");
  has("he's not busy .", "il n'est pas occupé .");
  has("are you tired ?", "es-tu fatigué ?");
  has("is she calm ?", "est-elle calme ?");
  has("he won .", "il a gagné .");
  has("we ate .", "nous avons mangé .");
  has("she left .", "elle est partie .");
  has("they came .", "ils sont venus .");
  has("he's home .", "il est chez lui .");
  CHECK(translations["i'm tired ."] == std::set<std::string>{"je suis fatigué .", "je suis fatiguée ."});

  // d2l's settings fit: no sentence truncated at num_steps = 10.
  heed::NmtData data = heed::load_data_nmt_text(raw, 64, 10);
  CHECK(data.data_iter.num_examples() == static_cast<index_t>(tokens.source.size()));
  for (const heed::NmtBatch& batch : data.data_iter) {
    for (index_t v : batch.X_valid_len.to_vector()) CHECK(v <= 9);
    for (index_t v : batch.Y_valid_len.to_vector()) CHECK(v <= 9);
  }
  for (const std::string token : {"go", "lost", "calm", "home", "."}) CHECK(data.src_vocab.contains(token));
  for (const std::string token : {"va", "!", "j'ai", "perdu", "il", "est", "calme", "je", "suis", "chez", "moi"})
    CHECK(data.tgt_vocab.contains(token));
}
