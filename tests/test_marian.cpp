// MarianMT directories (heed/seq2seq/marian.hpp, Translator::from_marian and
// save_marian) against tests/data/make_marian_golden.py: a tiny model in transformers'
// layout (F32 with the positional tables and a copy of the tied embedding, F16 without
// them), its tokens, encoder output, teacher-forced logits and greedy output computed in
// float64 by a PyTorch port written from modeling_marian.py's equations.
#include <heed/seq2seq/translator_training.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "check.hpp"
#include "golden.hpp"

namespace {

namespace fs = std::filesystem;

const std::string kData = HEED_TEST_DATA_DIR;

const heed_test::Golden& marian_golden() {
  static const heed_test::Golden golden("marian_golden.txt");
  return golden;
}

std::vector<std::string> marian_sentences() {
  std::ifstream in(kData + "/marian_tiny_sentences.txt");
  std::vector<std::string> out;
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) out.push_back(line);
  return out;
}

std::vector<std::int64_t> row(const heed::IndexTensor& t, heed::index_t i) {
  const heed::index_t n = t.shape()[1];
  return std::vector<std::int64_t>(t.data() + i * n, t.data() + (i + 1) * n);
}

/// Calls f(net) with a MarianMT translator's net.
template <typename F>
void with_net(heed::Translator& translator, F&& f) {
  translator.visit([&](auto& net) {
    if constexpr (std::is_same_v<std::decay_t<decltype(net)>, heed::MarianNet<float>>)
      f(net);
    else
      FAIL("not a Transformer");
  });
}

/// A fresh copy of a golden directory, to damage.
std::string copy_of(const std::string& name, const std::string& to) {
  const fs::path dst = fs::temp_directory_path() / ("heed_marian_" + to);
  fs::remove_all(dst);
  fs::copy(kData + "/" + name, dst);
  return dst.string();
}

void write_text(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

/// The golden checks of one directory: tokens, encoder output, logits, greedy tokens.
void check_against_golden(const std::string& dir) {
  const auto& golden = marian_golden();
  heed::Translator translator = heed::Translator::from_marian(dir);
  REQUIRE(translator.marian_config().has_value());
  const auto sentences = marian_sentences();
  const heed::IndexTensor src = golden.tensor<std::int64_t>("src_ids");
  const heed::IndexTensor lens = golden.tensor<std::int64_t>("src_lens");
  REQUIRE(static_cast<heed::index_t>(sentences.size()) == src.shape()[0]);

  // Tokens: the source.spm pieces through vocab.json, the language code kept, </s> added.
  for (std::size_t i = 0; i < sentences.size(); ++i) {
    std::vector<std::string> tokens = translator.tokenizers().sentence_tokens(sentences[i]);
    tokens.push_back(translator.src_vocab().special_tokens().eos);
    const std::vector<heed::index_t> ids = translator.src_vocab()[tokens];
    const std::vector<std::int64_t> expected = row(src, static_cast<heed::index_t>(i));
    CHECK(static_cast<std::int64_t>(ids.size()) == lens.data()[i]);
    CHECK(std::vector<std::int64_t>(ids.begin(), ids.end()) ==
          std::vector<std::int64_t>(expected.begin(), expected.begin() + lens.data()[i]));
  }

  with_net(translator, [&](auto& net) {
    heed::NoGradGuard no_grad;
    net.eval();
    const heed::Tensor<float> enc = net.encoder()(src, lens);
    const heed::Tensor<float> enc_expected = golden.tensor<float>("encoder_output");
    // Padded steps are not compared: their values depend on how padding is masked.
    REQUIRE(enc.shape() == enc_expected.shape());
    const heed::index_t S = enc.shape()[1], d = enc.shape()[2];
    for (heed::index_t b = 0; b < src.shape()[0]; ++b)
      for (heed::index_t k = 0; k < lens.data()[b] * d; ++k) {
        INFO("sentence " << b << ", element " << k);
        REQUIRE(enc.data()[b * S * d + k] == Approx(enc_expected.data()[b * S * d + k]).margin(1e-5));
      }
    auto state = net.decoder().init_state(enc, lens);
    const heed::Tensor<float> logits = net.decoder()(golden.tensor<std::int64_t>("tgt_ids"), state);
    heed_test::check_close(logits, golden.tensor<float>("logits"), 1e-5);
  });

  // Greedy decoding as generate(num_beams=1) with the model's max_length 20 and forced </s>.
  heed::PredictOptions options;
  options.beam_size = 1;
  options.save_attention_weights = false;
  const auto translations = translator.translate(sentences, options);
  const heed::IndexTensor greedy = golden.tensor<std::int64_t>("greedy");
  for (std::size_t i = 0; i < sentences.size(); ++i) {
    std::vector<std::int64_t> expected;
    for (const std::int64_t id : row(greedy, static_cast<heed::index_t>(i)))
      if (id >= 0 && id != 0) expected.push_back(id);  // without </s> and the padding
    const auto& tokens = translations[i].tokens;
    CHECK(std::vector<std::int64_t>(tokens.begin(), tokens.end()) == expected);
  }
}

}  // namespace

TEST_CASE("A MarianMT directory in F32 with its positional tables matches the PyTorch port", "[seq2seq][marian]") {
  check_against_golden(kData + "/marian_tiny");
}

TEST_CASE("A MarianMT directory in F16 without positional tables matches the PyTorch port", "[seq2seq][marian]") {
  check_against_golden(kData + "/marian_tiny_f16");
}

TEST_CASE("MarianMT's config is read as heed's Transformer options", "[seq2seq][marian]") {
  heed::Translator translator = heed::Translator::from_marian(kData + "/marian_tiny");
  const heed::MarianConfig& c = *translator.marian_config();
  CHECK(c.d_model == 16);
  CHECK(c.vocab_size == 54);
  CHECK(c.pad_token_id == 53);
  CHECK(c.decoder_start_token_id == 53);
  CHECK(c.eos_token_id == 0);
  CHECK(c.forced_eos_token_id == 0);
  CHECK(c.bad_words_ids == std::vector<heed::index_t>{53});
  CHECK(c.num_beams == 4);
  CHECK(c.max_length == 20);
  CHECK(c.activation == heed::Activation::silu);
  CHECK(translator.src_vocab().bos_index() == 53);
  CHECK(translator.src_vocab().eos_index() == 0);
  CHECK(translator.src_vocab().unk_index() == 1);
  CHECK(translator.src_vocab()["no-such-piece"] == 1);
  // One embedding table for the encoder, the decoder and the output layer.
  with_net(translator, [&](auto& net) {
    CHECK(net.encoder().embedding.weight.is_same(net.decoder().embedding.weight));
    CHECK(net.decoder().dense.weight.is_same(net.decoder().embedding.weight));
    CHECK(static_cast<std::uint64_t>(net.num_parameters()) == heed::marian_parameter_count(c));
  });
  // opus-mt-en-fr's sizes: transformers counts 74.67 M parameters (final_logits_bias in).
  heed::MarianConfig en_fr;
  en_fr.vocab_size = 59514;
  CHECK(heed::marian_parameter_count(en_fr) == 74669178u);
}

TEST_CASE("A tied weight is learnt once: its gradient sums both uses", "[seq2seq][marian]") {
  heed::Translator translator = heed::Translator::from_marian(kData + "/marian_tiny");
  with_net(translator, [](auto& net) {
    net.train();
    const auto before = net.parameters().size();
    std::size_t named = 0;
    for (const auto& [name, p] : net.named_parameters()) named += name == "encoder.embedding.weight" ? 1 : 0;
    CHECK(named == 1);
    CHECK(before == net.named_parameters().size());
    heed::IndexTensor src = heed::full<std::int64_t>({1, 3}, 9);
    heed::IndexTensor tgt = heed::full<std::int64_t>({1, 2}, 41);
    heed::IndexTensor lens = heed::full<std::int64_t>({1}, 3);
    net.zero_grad();
    const auto loss = net(src, tgt, lens).sum();
    loss.backward();
    const heed::Tensor<float>& table = net.encoder().embedding.weight;
    REQUIRE(table.grad().defined());
    // Row 9 is read by the encoder only; every row gets the output layer's gradient.
    CHECK(heed::abs(table.grad().select(0, 9)).sum().item() > 0.0f);
    CHECK(heed::abs(table.grad().select(0, 50)).sum().item() > 0.0f);
  });
}

TEST_CASE("save_marian writes a directory that loads back bit for bit, in F32 and F16", "[seq2seq][marian]") {
  heed::Translator translator = heed::Translator::from_marian(kData + "/marian_tiny");
  for (const std::string dtype : {"F32", "F16"}) {
    const fs::path out = fs::temp_directory_path() / ("heed_marian_saved_" + dtype);
    fs::remove_all(out);
    translator.save_marian(out.string(), dtype);
    for (const char* file : {"config.json", "generation_config.json", "model.safetensors", "source.spm", "target.spm",
                             "vocab.json", "tokenizer_config.json"})
      CHECK(fs::exists(out / file));
    heed::Translator back = heed::Translator::from_marian(out.string());
    const auto a = translator.visit([](auto& net) { return net.state_dict(); });
    const auto b = back.visit([](auto& net) { return net.state_dict(); });
    REQUIRE(a.size() == b.size());
    for (const auto& [name, tensor] : a) {
      INFO(name << " in " << dtype);
      CHECK(tensor.to_vector() == b.at(name).to_vector());  // the weights sit on a grid F16 holds
    }
    CHECK(back.marian_config()->bad_words_ids == translator.marian_config()->bad_words_ids);
    CHECK(back.src_vocab().idx_to_token() == translator.src_vocab().idx_to_token());
    CHECK(read_text((out / "source.spm").string()) == read_text(kData + "/marian_tiny/source.spm"));
  }
  heed::Translator d2l(heed::TranslatorConfig{}, heed::Vocab({{"a"}}, 0, {"<pad>", "<bos>", "<eos>"}),
                       heed::Vocab({{"b"}}, 0, {"<pad>", "<bos>", "<eos>"}));
  CHECK_THROWS_AS(d2l.save_marian((fs::temp_directory_path() / "heed_marian_d2l").string()), heed::ValueError);
  CHECK_THROWS_AS(translator.save((fs::temp_directory_path() / "heed_marian.safetensors").string()), heed::ValueError);
  CHECK_THROWS_AS(translator.save_marian((fs::temp_directory_path() / "heed_marian_x").string(), "F8"),
                  heed::ValueError);
}

TEST_CASE("Hostile MarianMT directories are refused with FileError naming the file", "[seq2seq][marian]") {
  const auto refused = [](const std::string& dir, const std::string& needle) {
    INFO(dir << ": " << needle);
    try {
      heed::Translator::from_marian(dir);
      FAIL("loaded");
    } catch (const heed::FileError& e) {
      CHECK_THAT(e.what(), Catch::Matchers::Contains(needle));
    }
  };
  refused((fs::temp_directory_path() / "heed_no_such_dir").string(), "not a model directory");
  {
    const std::string dir = copy_of("marian_tiny", "no_config");
    fs::remove(dir + "/config.json");
    refused(dir, "config.json: no such file");
  }
  {
    const std::string dir = copy_of("marian_tiny", "bin");
    fs::rename(dir + "/model.safetensors", dir + "/pytorch_model.bin");
    refused(dir, "has pytorch_model.bin but no model.safetensors");
  }
  {
    const std::string dir = copy_of("marian_tiny", "truncated");
    const std::string bytes = read_text(dir + "/model.safetensors");
    write_text(dir + "/model.safetensors", bytes.substr(0, bytes.size() / 2));
    refused(dir, "model.safetensors");
  }
  {
    const std::string dir = copy_of("marian_tiny", "hostile_header");
    write_text(dir + "/model.safetensors", std::string("\xff\xff\xff\xff\xff\xff\xff\x7f{}", 10));
    refused(dir, "model.safetensors");
  }
  const auto edit_config = [](const std::string& dir, const std::string& from, const std::string& to) {
    std::string text = read_text(dir + "/config.json");
    const auto at = text.find(from);
    REQUIRE(at != std::string::npos);
    write_text(dir + "/config.json", text.replace(at, from.size(), to));
  };
  {
    const std::string dir = copy_of("marian_tiny", "lying_config");
    edit_config(dir, "\"d_model\": 16", "\"d_model\": 32");
    refused(dir, "has shape (54, 16), but config.json's vocab_size and d_model give (54, 32)");
  }
  {
    const std::string dir = copy_of("marian_tiny", "lying_ffn");
    edit_config(dir, "\"encoder_ffn_dim\": 32", "\"encoder_ffn_dim\": 8");
    refused(dir, "fc1.weight' has shape (32, 16), but config.json's sizes give (8, 16)");
  }
  {
    const std::string dir = copy_of("marian_tiny", "pre_norm");
    edit_config(dir, "\"normalize_before\": false", "\"normalize_before\": true");
    refused(dir, "normalize_before: true is not supported");
  }
  {
    const std::string dir = copy_of("marian_tiny", "not_marian");
    edit_config(dir, "\"model_type\": \"marian\"", "\"model_type\": \"bart\"");
    refused(dir, "not 'marian'");
  }
  {
    const std::string dir = copy_of("marian_tiny", "huge");
    edit_config(dir, "\"vocab_size\": 54", "\"vocab_size\": 16000000");
    refused(dir, "");
  }
  {
    const std::string dir = copy_of("marian_tiny", "short_vocab");
    std::string text = read_text(dir + "/vocab.json");
    text.replace(text.find("\"<pad>\": 53"), 11, "\"<pad>\": 52");
    write_text(dir + "/vocab.json", text);
    refused(dir, "vocab.json: id 52 is given to two tokens");
  }
  {
    const std::string dir = copy_of("marian_tiny", "vocab_size");
    write_text(dir + "/vocab.json", "{\"</s>\": 0, \"<unk>\": 1, \"<pad>\": 2}");
    refused(dir, "vocab.json: has 3 tokens, but config.json's vocab_size is 54");
  }
  {
    const std::string dir = copy_of("marian_tiny", "not_utf8");
    std::string text = read_text(dir + "/vocab.json");
    text.replace(text.find("\"e\""), 3, "\"\xff\"");
    write_text(dir + "/vocab.json", text);
    refused(dir, "vocab.json: not valid JSON");
  }
  {
    const std::string dir = copy_of("marian_tiny", "spm");
    write_text(dir + "/source.spm", "not a model");
    refused(dir, "source.spm: not a SentencePiece model");
  }
}

TEST_CASE("The sinusoids of MarianMT: sines in the first half, cosines in the second", "[seq2seq][marian]") {
  heed::PositionalEncoding<double> pe(6, 0.0, 5, heed::PositionalTable::double_precision,
                                      heed::PositionalLayout::concatenated);
  for (heed::index_t i = 0; i < 5; ++i)
    for (heed::index_t j = 0; j < 3; ++j) {
      const double angle = static_cast<double>(i) / std::pow(10000.0, 2.0 * static_cast<double>(j) / 6.0);
      CHECK(pe.P.data()[i * 6 + j] == std::sin(angle));
      CHECK(pe.P.data()[i * 6 + 3 + j] == std::cos(angle));
    }
  const auto& golden = marian_golden();
  heed::PositionalEncoding<float> tiny(16, 0.0, 64, heed::PositionalTable::double_precision,
                                       heed::PositionalLayout::concatenated);
  const heed::Tensor<float> expected = golden.tensor<float>("positions");
  REQUIRE(expected.numel() == 64 * 16);
  for (heed::index_t k = 0; k < 64 * 16; ++k) {
    INFO("element " << k);
    CHECK(tiny.P.data()[k] == expected.data()[k]);
  }
}

TEST_CASE("Beam search of a MarianMT model gives transformers' beam-4 tokens and scores", "[seq2seq][marian]") {
  for (const char* dir : {"marian_tiny", "marian_tiny_f16"}) {
    heed::Translator translator = heed::Translator::from_marian(kData + "/" + dir);
    const auto sentences = marian_sentences();
    heed::PredictOptions options;
    options.beam_size = translator.marian_config()->num_beams;
    options.length_penalty = translator.marian_config()->length_penalty;
    options.save_attention_weights = false;
    const auto translations = translator.translate(sentences, options);
    const heed::IndexTensor beam = marian_golden().tensor<std::int64_t>("beam4");
    const heed::Tensor<double> scores = marian_golden().tensor<double>("beam4_scores");
    for (std::size_t i = 0; i < sentences.size(); ++i) {
      std::vector<std::int64_t> expected;
      for (const std::int64_t id : row(beam, static_cast<heed::index_t>(i)))
        if (id > 0) expected.push_back(id);
      const auto& tokens = translations[i].tokens;
      INFO(dir << ", sentence " << i);
      CHECK(std::vector<std::int64_t>(tokens.begin(), tokens.end()) == expected);
      CHECK(translations[i].score == Approx(scores.data()[i]).margin(1e-5));
    }
  }
}

TEST_CASE("A target prefix starts every hypothesis; greedy decoding streams its tokens", "[seq2seq][marian]") {
  heed::Translator translator = heed::Translator::from_marian(kData + "/marian_tiny");
  const auto sentences = marian_sentences();
  heed::PredictOptions options;
  options.save_attention_weights = false;
  const auto plain = translator.translate(sentences, options);
  // Forcing the greedy translation's own first two tokens changes nothing.
  for (std::size_t i = 0; i < sentences.size(); ++i) {
    const auto& tokens = plain[i].tokens;
    REQUIRE(tokens.size() >= 2);
    options.target_prefix.push_back(translator.tgt_vocab().to_tokens({tokens[0], tokens[1]}));
  }
  const auto same = translator.translate(sentences, options);
  for (std::size_t i = 0; i < sentences.size(); ++i) CHECK(same[i].tokens == plain[i].tokens);
  // Another prefix is obeyed, under beam search too.
  const std::vector<std::string> prefix = {"\xe2\x96\x81le", "s"};
  options.target_prefix.assign(sentences.size(), prefix);
  options.beam_size = 4;
  for (const auto& t : translator.translate(sentences, options)) {
    REQUIRE(t.tokens.size() >= 2);
    CHECK(translator.tgt_vocab().to_tokens({t.tokens[0], t.tokens[1]}) == prefix);
  }
  // Streaming: every token, in order, then the end.
  heed::PredictOptions stream;
  stream.save_attention_weights = false;
  std::vector<std::vector<heed::index_t>> seen(sentences.size());
  std::vector<int> ends(sentences.size(), 0);
  stream.on_token = [&](std::size_t sentence, heed::index_t token, bool last) {
    if (token != translator.tgt_vocab().eos_index()) seen[sentence].push_back(token);
    ends[sentence] += last ? 1 : 0;
  };
  translator.translate(sentences, stream);
  for (std::size_t i = 0; i < sentences.size(); ++i) {
    CHECK(seen[i] == plain[i].tokens);
    CHECK(ends[i] == 1);
  }
  stream.beam_size = 2;
  CHECK_THROWS_AS(translator.translate(sentences, stream), heed::ValueError);
  heed::PredictOptions wrong;
  wrong.target_prefix = {{"a"}};
  CHECK_THROWS_AS(translator.translate(sentences, wrong), heed::ValueError);
}

TEST_CASE("train_translator fine-tunes a MarianMT model, resumes it bit for bit and writes it back",
          "[seq2seq][marian]") {
  const fs::path dir = fs::temp_directory_path() / "heed_marian_finetune";
  fs::remove_all(dir);
  fs::create_directories(dir);
  // Cased pairs, read as written (the model's own tokens).
  const std::string pairs = (dir / "pairs.txt").string();
  write_text(pairs,
             "The cat sat on the mat.\tLe chat est assis sur le tapis.\n"
             "I like green tea.\tJ'aime le thé vert.\n"
             "Where is the big train station?\tOù est la grande gare ?\n"
             "She reads a book.\tElle lit un livre.\n"
             "Good morning.\tBonjour.\n"
             "The dog runs.\tLe chien court.\n");
  heed::TranslatorTrainOptions options;
  options.init_marian = kData + "/marian_tiny";
  options.train = pairs;
  options.num_examples = 0;
  options.batch_size = 2;
  options.lr = 0.01;
  options.epochs = 3;
  options.valid_fraction = 0.3;
  options.quiet = true;
  options.out = (dir / "straight").string();
  options.save_marian = (dir / "tuned").string();
  std::ostringstream log;
  const heed::TranslatorTrainReport report = heed::train_translator(options, log);
  INFO(log.str());
  CHECK(report.model == "marian");
  CHECK(report.parameters == 12054);
  REQUIRE(report.epoch_records.size() == 3);
  CHECK(report.epoch_records.back().loss < report.epoch_records.front().loss);
  CHECK(report.epoch_records.back().validated);
  CHECK(fs::exists(dir / "straight" / "best" / "model.safetensors"));
  CHECK(fs::exists(dir / "straight" / "valid.txt"));
  // The result loads, differs from the start, and keeps the tokenizer files.
  heed::Translator tuned = heed::Translator::from_marian((dir / "tuned").string());
  heed::Translator start = heed::Translator::from_marian(kData + "/marian_tiny");
  const auto tuned_state = tuned.visit([](auto& net) { return net.state_dict(); });
  const auto start_state = start.visit([](auto& net) { return net.state_dict(); });
  CHECK(tuned_state.at("encoder.embedding.weight").to_vector() !=
        start_state.at("encoder.embedding.weight").to_vector());
  CHECK(read_text((dir / "tuned" / "target.spm").string()) == read_text(kData + "/marian_tiny/target.spm"));
  // Two epochs, then a resume to three: the same weights as three straight.
  options.out = (dir / "resumed").string();
  options.save_marian = (dir / "resumed_model").string();
  options.epochs = 2;
  heed::train_translator(options, log);
  options.epochs = 3;
  options.resume = (dir / "resumed" / "last.safetensors").string();
  heed::train_translator(options, log);
  heed::Translator resumed = heed::Translator::from_marian((dir / "resumed_model").string());
  const auto resumed_state = resumed.visit([](auto& net) { return net.state_dict(); });
  for (const auto& [name, tensor] : tuned_state) {
    INFO(name);
    CHECK(tensor.to_vector() == resumed_state.at(name).to_vector());
  }
  // The moving average and the last epochs' average, as MarianMT directories.
  heed::TranslatorTrainOptions smoothed = options;
  smoothed.resume.clear();
  smoothed.save_marian.clear();
  smoothed.out = (dir / "smoothed").string();
  smoothed.ema = 0.5;
  smoothed.average_last = 2;
  const heed::TranslatorTrainReport smoothed_report = heed::train_translator(smoothed, log);
  CHECK(smoothed_report.ema_bleu >= 0.0);
  CHECK(smoothed_report.averaged_epochs == 2);
  CHECK(smoothed_report.averaged_bleu >= 0.0);
  heed::Translator ema = heed::Translator::from_marian((dir / "smoothed" / "ema").string());
  heed::Translator averaged = heed::Translator::from_marian((dir / "smoothed" / "averaged").string());
  const auto averaged_state = averaged.visit([](auto& net) { return net.state_dict(); });
  const auto ema_state = ema.visit([](auto& net) { return net.state_dict(); });
  // The directory holds the averaged checkpoint's weights; the mean of epochs 2 and 3.
  auto mean = heed::Translator::from_marian(kData + "/marian_tiny");
  const auto mean_state = mean.visit([&](auto& net) {
    heed::load_checkpoint(net, (dir / "smoothed" / "averaged.safetensors").string());
    return net.state_dict();
  });
  heed::Translator epoch2 = heed::Translator::from_marian(kData + "/marian_tiny");
  heed::Translator epoch3 = heed::Translator::from_marian(kData + "/marian_tiny");
  const auto epoch2_state = epoch2.visit([&](auto& net) {
    heed::load_checkpoint(net, (dir / "smoothed" / "epoch-2.safetensors").string());
    return net.state_dict();
  });
  const auto epoch3_state = epoch3.visit([&](auto& net) {
    heed::load_checkpoint(net, (dir / "smoothed" / "epoch-3.safetensors").string());
    return net.state_dict();
  });
  CHECK_FALSE(fs::exists(dir / "smoothed" / "epoch-1.safetensors"));
  for (const auto& [name, tensor] : averaged_state) {
    INFO(name);
    CHECK(tensor.to_vector() == mean_state.at(name).to_vector());
    const auto a = epoch2_state.at(name).to_vector(), b = epoch3_state.at(name).to_vector(), m = tensor.to_vector();
    for (std::size_t i = 0; i < m.size(); ++i)
      CHECK(m[i] == static_cast<float>((static_cast<double>(a[i]) + static_cast<double>(b[i])) / 2.0));
  }
  CHECK(ema_state.at("encoder.embedding.weight").to_vector() !=
        epoch3_state.at("encoder.embedding.weight").to_vector());
  CHECK(ema_state.at("encoder.embedding.weight").to_vector() != start_state.at("encoder.embedding.weight").to_vector());

  heed::TranslatorTrainOptions bad = options;
  bad.resume.clear();
  bad.sentencepiece = 8;
  CHECK_THROWS_AS(heed::train_translator(bad, log), heed::ValueError);
  bad = options;
  bad.resume.clear();
  bad.init_marian.clear();
  CHECK_THROWS_AS(heed::train_translator(bad, log), heed::ValueError);
}

namespace {

heed::MarianConfig config_of(const std::string& dir) {
  heed::MarianConfig c = heed::MarianConfig::from_json(read_text(dir + "/config.json"), dir + "/config.json");
  if (fs::exists(dir + "/generation_config.json"))
    c.read_generation_config(read_text(dir + "/generation_config.json"), dir + "/generation_config.json");
  return c;
}

/// Every parameter and positional table of a net, copied out.
std::map<std::string, std::vector<float>> values_of(heed::MarianNet<float>& net) {
  std::map<std::string, std::vector<float>> out;
  for (const auto& [name, tensor] : net.state_dict()) out[name] = tensor.to_vector();
  return out;
}

/// Bit for bit (-0 is not +0, a NaN is itself).
void check_same_bits(const std::map<std::string, std::vector<float>>& a,
                     const std::map<std::string, std::vector<float>>& b) {
  REQUIRE(a.size() == b.size());
  for (const auto& [name, values] : a) {
    INFO(name);
    REQUIRE(b.count(name) == 1);
    REQUIRE(values.size() == b.at(name).size());
    CHECK(std::memcmp(values.data(), b.at(name).data(), values.size() * sizeof(float)) == 0);
  }
}

/// marian_tiny's tensors as records, to change and write back with save_safetensors (which
/// adds heed's checksums).
std::map<std::string, heed::TensorRecord> tiny_records() {
  return heed::read_safetensors(kData + "/marian_tiny/model.safetensors").tensors;
}

std::string write_records(const std::map<std::string, heed::TensorRecord>& records, const std::string& name) {
  const std::string path = (fs::temp_directory_path() / ("heed_marian_" + name + ".safetensors")).string();
  heed::save_safetensors(path, std::vector<std::pair<std::string, heed::TensorRecord>>(records.begin(), records.end()),
                         {{"format", "pt"}});
  return path;
}

}  // namespace

TEST_CASE("marian_from_pretrained and from_marian load what load_marian_weights loads, bit for bit",
          "[seq2seq][marian]") {
  for (const char* name : {"marian_tiny", "marian_tiny_f16"}) {
    INFO(name);
    const std::string dir = kData + "/" + name, path = dir + "/model.safetensors";
    const heed::MarianConfig config = config_of(dir);
    heed::Generator gen(7);
    auto reference = heed::make_marian_net<float>(config, &gen);
    heed::load_marian_weights(*reference, config, path);
    const auto expected = values_of(*reference);
    auto streamed = heed::marian_from_pretrained<float>(config, path);
    check_same_bits(values_of(*streamed), expected);
    CHECK(streamed->encoder().embedding.weight.is_same(streamed->decoder().dense.weight));
    heed::Translator translator = heed::Translator::from_marian(dir);
    with_net(translator, [&](auto& net) { check_same_bits(values_of(net), expected); });
    // Into a net already built (and drawn): every parameter is overwritten.
    auto in_place = heed::make_marian_net<float>(config, &gen);
    heed::detail::load_marian_weights_in_place(*in_place, config, path);
    check_same_bits(values_of(*in_place), expected);
  }
}

TEST_CASE("A MarianMT file its header shows wrong is refused before any weight is written", "[seq2seq][marian]") {
  const heed::MarianConfig config = config_of(kData + "/marian_tiny");
  const auto refused = [&](const std::map<std::string, heed::TensorRecord>& records, const std::string& name,
                           const std::string& needle) {
    INFO(name << ": " << needle);
    const std::string path = write_records(records, name);
    heed::Generator gen(3);
    auto net = heed::make_marian_net<float>(config, &gen);
    const auto before = values_of(*net);
    CHECK_ERROR(heed::FileError, needle, heed::detail::load_marian_weights_in_place(*net, config, path));
    CHECK_ERROR(heed::FileError, path, heed::detail::load_marian_weights_in_place(*net, config, path));
    check_same_bits(values_of(*net), before);
    CHECK_ERROR(heed::FileError, needle, heed::load_marian_weights(*net, config, path));
    check_same_bits(values_of(*net), before);
    CHECK_ERROR(heed::FileError, needle, heed::marian_from_pretrained<float>(config, path));
  };
  const std::string fc1 = "model.encoder.layers.0.fc1.weight";
  {
    auto records = tiny_records();
    records.erase("model.decoder.layers.1.fc2.bias");
    refused(records, "missing", "has no tensor 'model.decoder.layers.1.fc2.bias'");
  }
  {
    auto records = tiny_records();
    records.emplace("model.extra.weight", records.at("final_logits_bias"));
    refused(records, "unexpected", "does not have ('model.extra.weight')");
  }
  {
    auto records = tiny_records();
    std::swap(records.at(fc1).shape[0], records.at(fc1).shape[1]);
    refused(records, "shape", "'" + fc1 + "' has shape (16, 32), but config.json's sizes give (32, 16)");
  }
  {
    auto records = tiny_records();
    records.at(fc1).dtype = "I32";
    refused(records, "dtype", "'" + fc1 + "': dtype I32, wanted F32 (or F16, BF16)");
  }
  {
    auto records = tiny_records();
    records.at("lm_head.weight").shape = {16, 54};
    refused(records, "copy_shape", "'lm_head.weight' has shape (16, 54)");
  }
  {
    auto records = tiny_records();
    records.erase("model.shared.weight");
    records.erase("lm_head.weight");
    refused(records, "no_embedding", "has no embedding table");
  }
  {
    auto records = tiny_records();
    records.at("model.encoder.embed_positions.weight").shape = {32, 32};
    refused(records, "positions", "'model.encoder.embed_positions.weight' has shape (32, 32)");
  }
}

TEST_CASE("A damaged MarianMT file past its header is refused naming the file", "[seq2seq][marian]") {
  const heed::MarianConfig config = config_of(kData + "/marian_tiny");
  const auto check_refused = [&](const std::string& path, const std::string& needle) {
    INFO(path << ": " << needle);
    CHECK_ERROR(heed::FileError, needle, heed::marian_from_pretrained<float>(config, path));
    CHECK_ERROR(heed::FileError, path, heed::marian_from_pretrained<float>(config, path));
    // load_marian_weights still changes nothing.
    heed::Generator gen(5);
    auto net = heed::make_marian_net<float>(config, &gen);
    const auto before = values_of(*net);
    CHECK_ERROR(heed::FileError, needle, heed::load_marian_weights(*net, config, path));
    check_same_bits(values_of(*net), before);
  };
  SECTION("a byte of a heed-written file that no longer matches its checksum") {
    heed::Translator translator = heed::Translator::from_marian(kData + "/marian_tiny");
    const fs::path dir = fs::temp_directory_path() / "heed_marian_crc";
    fs::remove_all(dir);
    translator.save_marian(dir.string());
    const std::string path = (dir / "model.safetensors").string();
    std::string bytes = read_text(path);
    std::uint64_t header = 0;
    for (int i = 7; i >= 0; --i) header = header << 8 | static_cast<unsigned char>(bytes[static_cast<std::size_t>(i)]);
    const std::size_t data = 8 + static_cast<std::size_t>(header);
    bytes[data + (bytes.size() - data) / 2] ^= 0x10;
    write_text(path, bytes);
    check_refused(path, "do not match their checksum");
    try {
      heed::Translator::from_marian(dir.string());
      FAIL("loaded");
    } catch (const heed::FileError& e) {
      CHECK_THAT(e.what(), Catch::Matchers::Contains(path) && Catch::Matchers::Contains("checksum"));
    }
  }
  SECTION("tied copies of the embedding that differ") {
    auto records = tiny_records();
    records.at("lm_head.weight").data[4 * 100 + 3] ^= 0x01;  // element 100's top byte: its sign
    const std::string path = write_records(records, "tied_differ");
    check_refused(path, "differs from");
    CHECK_ERROR(heed::FileError, "MarianMT ties them", heed::marian_from_pretrained<float>(config, path));
  }
}
