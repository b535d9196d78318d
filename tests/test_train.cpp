// train_seq2seq and xavier_init_weights (heed/seq2seq/train.hpp): the loss goes down,
// padding cut off, the same bits on any thread count.
#include "seq2seq_common.hpp"

#include <cstring>
#include <optional>
#include <sstream>

TEST_CASE("train_seq2seq lowers the loss and reports every epoch", "[seq2seq][train]") {
  heed::NmtData data = small_corpus(60);
  heed::Generator gen(5);
  auto net = bahdanau_net<float>(data.src_vocab.size(), data.tgt_vocab.size(), 16, 16, 1, 0.0, gen);
  const auto dir =
      std::filesystem::temp_directory_path() / ("heed_train_" + std::to_string(reinterpret_cast<std::uintptr_t>(&gen)));
  std::filesystem::create_directories(dir);
  heed::TrainOptions options;
  options.generator = &gen;
  const std::string csv_path = (dir / "loss.csv").string(), svg_path = (dir / "loss.svg").string();
  heed::LossCurve curve(svg_path, csv_path);
  std::vector<index_t> epochs_seen;
  options.on_epoch = [&](const heed::EpochStats& stats) {
    epochs_seen.push_back(stats.epoch);
    curve(stats);
  };
  const heed::TrainResult result = heed::train_seq2seq<float>(*net, data.data_iter, 0.01, 15, data.tgt_vocab, options);

  REQUIRE(result.losses.size() == 15);
  CHECK(result.losses.back() < 0.5 * result.losses.front());
  CHECK(epochs_seen == std::vector<index_t>{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15});
  index_t tokens_per_epoch = 0;
  for (const auto& batch : data.data_iter) tokens_per_epoch += batch.Y_valid_len.sum().item();
  CHECK(result.tokens == 15 * tokens_per_epoch);
  CHECK(result.tokens_per_second > 0);

  CHECK(curve.losses() == result.losses);
  std::ifstream csv(csv_path);
  std::string line;
  std::getline(csv, line);
  CHECK(line == "epoch,loss,tokens_per_second");
  index_t rows = 0;
  while (std::getline(csv, line)) ++rows;
  CHECK(rows == 15);
  std::ifstream svg(svg_path);
  const std::string picture((std::istreambuf_iterator<char>(svg)), std::istreambuf_iterator<char>());
  CHECK(picture.find("<svg") != std::string::npos);
  std::filesystem::remove_all(dir);

  CHECK_ERROR(heed::ValueError, "train_seq2seq: lr must be positive, got 0",
              heed::train_seq2seq<float>(*net, data.data_iter, 0.0, 1, data.tgt_vocab, options));
}

TEST_CASE("train_seq2seq takes each step's learning rate from options.lr_schedule", "[seq2seq][train]") {
  const auto train = [](double lr, std::optional<heed::LrSchedule> schedule) {
    heed::NmtData data = small_corpus(60);
    heed::Generator gen(5), init_gen(6);
    auto net = bahdanau_net<double>(data.src_vocab.size(), data.tgt_vocab.size(), 8, 8, 1, 0.0, gen);
    heed::TrainOptions options;
    options.generator = &init_gen;
    options.lr_schedule = schedule;
    const heed::TrainResult result = heed::train_seq2seq<double>(*net, data.data_iter, lr, 2, data.tgt_vocab, options);
    CHECK(result.steps == 2 * data.data_iter.num_batches());
    return net->named_parameters();
  };
  const auto plain = train(0.02, std::nullopt);
  // A schedule overrides lr: a constant one at 0.02 trains as lr = 0.02, bit for bit.
  const auto scheduled = train(0.01, heed::LrSchedule::constant(0.02));
  const auto warmed = train(0.02, heed::LrSchedule::constant(0.02, 4));
  REQUIRE(plain.size() == scheduled.size());
  bool warm_up_differs = false;
  for (std::size_t i = 0; i < plain.size(); ++i) {
    INFO(plain[i].first);
    const auto n = static_cast<std::size_t>(plain[i].second.numel());
    CHECK(std::memcmp(plain[i].second.data(), scheduled[i].second.data(), n * sizeof(double)) == 0);
    warm_up_differs =
        warm_up_differs || std::memcmp(plain[i].second.data(), warmed[i].second.data(), n * sizeof(double)) != 0;
  }
  CHECK(warm_up_differs);  // the first four steps ran at 1/4, 2/4, 3/4 of the rate
}

TEMPLATE_TEST_CASE("train_seq2seq cuts the padding off each batch without changing losses or parameters",
                   "[seq2seq][train]", BahdanauNet<double>, TransformerNet<double>) {
  using Net = TestType;
  constexpr bool is_transformer = std::is_same_v<Net, TransformerNet<double>>;
  static_assert(heed::detail::ignores_padding<typename Net::EncoderType>::value == is_transformer &&
                    heed::detail::ignores_padding<typename Net::DecoderType>::value == is_transformer,
                "only the Transformer's encoder and decoder may lose their padding");
  // What is cut: the steps after the longest valid sequence of the batch.
  const IndexTensor X({4, 5, 0, 1, 1, 6, 0, 1, 1, 1, 3, 1}, Shape{2, 6});
  const IndexTensor cut = heed::detail::trim_padding(X, lens({2, 3}, Shape{2}));
  CHECK(cut.shape() == Shape{2, 3});
  CHECK(std::vector<std::int64_t>(cut.data(), cut.data() + 6) == std::vector<std::int64_t>{4, 5, 0, 0, 1, 1});
  CHECK(heed::detail::trim_padding(X, lens({6, 1}, Shape{2})).shape() == Shape{2, 6});

  // Two equal nets trained on the same batches, one with the padding cut off. Dropout
  // too draws the same masks for the steps kept.
  auto make_net = [](const heed::NmtData& data) {
    heed::Generator gen(21);
    if constexpr (is_transformer) {
      heed::TransformerOptions init;
      init.generator = &gen;
      return std::make_unique<Net>(
          std::make_unique<heed::TransformerEncoder<double>>(data.src_vocab.size(), 16, 16, 16, 16, Shape{16}, 16, 32,
                                                             4, 2, 0.2, false, init),
          std::make_unique<heed::TransformerDecoder<double>>(data.tgt_vocab.size(), 16, 16, 16, 16, Shape{16}, 16, 32,
                                                             4, 2, 0.2, init));
    } else {
      return bahdanau_net<double>(data.src_vocab.size(), data.tgt_vocab.size(), 8, 16, 2, 0.2, gen);
    }
  };
  heed::NmtData data_cut = small_corpus(60), data_whole = small_corpus(60);
  auto net_cut = make_net(data_cut);
  auto net_whole = make_net(data_whole);
  heed::TrainOptions options;
  heed::Generator gen_cut(4), gen_whole(4);
  options.generator = &gen_cut;
  heed::manual_seed(8);  // dropout's generator
  const heed::TrainResult cut_result =
      heed::train_seq2seq<double>(*net_cut, data_cut.data_iter, 0.01, 3, data_cut.tgt_vocab, options);
  options.trim_padding = false;
  options.generator = &gen_whole;
  heed::manual_seed(8);
  const heed::TrainResult whole_result =
      heed::train_seq2seq<double>(*net_whole, data_whole.data_iter, 0.01, 3, data_whole.tgt_vocab, options);
  REQUIRE(cut_result.losses.size() == 3);
  for (std::size_t i = 0; i < 3; ++i) CHECK(cut_result.losses[i] == Approx(whole_result.losses[i]).epsilon(1e-10));
  CHECK(cut_result.tokens == whole_result.tokens);
  const auto cut_params = net_cut->named_parameters();
  const auto whole_params = net_whole->named_parameters();
  REQUIRE(cut_params.size() == whole_params.size());
  for (std::size_t i = 0; i < cut_params.size(); ++i) {
    INFO(cut_params[i].first);
    check_close(cut_params[i].second, whole_params[i].second, 1e-9);
  }
}

TEST_CASE("train_seq2seq runs the decoders' output layer and loss fused, as unfused to rounding", "[seq2seq][train]") {
  static_assert(heed::detail::has_output_features<heed::TransformerDecoder<double>>::value &&
                    heed::detail::has_output_features<heed::Seq2SeqAttentionDecoder<double>>::value,
                "both decoders expose their output layer");
  const auto train = [](bool transformer, bool fuse) {
    heed::NmtData data = small_corpus(60);
    heed::Generator gen(21);
    const auto run = [&](auto& model) {
      heed::TrainOptions options;
      heed::Generator init_gen(4);
      options.generator = &init_gen;
      options.fuse_output_loss = fuse;
      heed::manual_seed(8);  // dropout's generator
      const heed::TrainResult result =
          heed::train_seq2seq<double>(model, data.data_iter, 0.01, 3, data.tgt_vocab, options);
      return std::pair{result, model.named_parameters()};
    };
    if (!transformer) {
      const auto bahdanau = bahdanau_net<double>(data.src_vocab.size(), data.tgt_vocab.size(), 8, 16, 2, 0.2, gen);
      return run(*bahdanau);
    }
    heed::TransformerOptions init;
    init.generator = &gen;
    TransformerNet<double> transformer_net(
        std::make_unique<heed::TransformerEncoder<double>>(data.src_vocab.size(), 16, 16, 16, 16, Shape{16}, 16, 32, 4,
                                                           2, 0.2, false, init),
        std::make_unique<heed::TransformerDecoder<double>>(data.tgt_vocab.size(), 16, 16, 16, 16, Shape{16}, 16, 32, 4,
                                                           2, 0.2, init));
    return run(transformer_net);
  };
  for (const bool transformer : {true, false}) {
    INFO((transformer ? "Transformer" : "Bahdanau"));
    const auto [fused, fused_params] = train(transformer, true);
    const auto [unfused, unfused_params] = train(transformer, false);
    REQUIRE(fused.losses.size() == 3);
    CHECK(fused.losses[2] < fused.losses[0]);
    for (std::size_t i = 0; i < 3; ++i) CHECK(fused.losses[i] == Approx(unfused.losses[i]).epsilon(1e-10));
    REQUIRE(fused_params.size() == unfused_params.size());
    for (std::size_t i = 0; i < fused_params.size(); ++i) {
      INFO(fused_params[i].first);
      check_close(fused_params[i].second, unfused_params[i].second, 1e-9);
    }
  }
}

TEST_CASE(
    "Training gives the same bits on 1, 2 and 3 threads at sizes past every threading threshold, in fp32 and "
    "in bf16",
    "[seq2seq][train][threads]") {
#ifndef _OPENMP
  WARN("built without OpenMP: one thread only, nothing to compare");
#else
  // A batch of 64 sentences and 256 hidden units: the attention, FFN and vocabulary
  // products all exceed heed's threaded-GEMM threshold, and the elementwise, softmax
  // and layer_norm passes its parallel grain; dropout is on. One step (forward,
  // backward, clipping, Adam) holds every threaded pass a longer run repeats.
  // 63: d2l's tokenize_nmt reads one pair more than num_examples.
  heed::NmtData data = heed::load_data_nmt_text(heed::builtin_fra_eng(), 64, 10, 63, 3);
  REQUIRE(data.data_iter.num_batches() == 1);
  for (const heed::NmtBatch& batch : data.data_iter)  // each batch keeps steps enough after its padding is cut
    REQUIRE(64 * batch.X_valid_len.max().item() * 256 * 256 >= heed::detail::kParallelGemmWork);
  const auto train_with = [&](int threads, heed::Precision precision) {
    const int saved = omp_get_max_threads();
    omp_set_num_threads(threads);
    heed::Generator gen(11);
    heed::TransformerOptions init;
    init.generator = &gen;
    TransformerNet<float> net(
        std::make_unique<heed::TransformerEncoder<float>>(data.src_vocab.size(), 256, 256, 256, 256, Shape{256}, 256,
                                                          1024, 4, 1, 0.1, false, init),
        std::make_unique<heed::TransformerDecoder<float>>(data.tgt_vocab.size(), 256, 256, 256, 256, Shape{256}, 256,
                                                          1024, 4, 1, 0.1, init));
    heed::TrainOptions options;
    options.generator = &gen;
    options.precision = precision;
    heed::manual_seed(8);  // dropout's generator
    auto loader = data.data_iter;
    const heed::TrainResult result = heed::train_seq2seq<float>(net, loader, 0.005, 1, data.tgt_vocab, options);
    omp_set_num_threads(saved);
    std::vector<float> values(result.losses.begin(), result.losses.end());
    for (const auto& [name, p] : net.named_parameters()) values.insert(values.end(), p.data(), p.data() + p.numel());
    return values;
  };
  std::vector<float> fp32;
  for (const heed::Precision precision : {heed::Precision::fp32, heed::Precision::bf16}) {
    INFO(heed::to_string(precision));
    const std::vector<float> one = train_with(1, precision);
    REQUIRE(one.size() > 1'000'000);
    for (int threads : {2, 3}) {
      INFO(threads << " threads");
      const std::vector<float> many = train_with(threads, precision);
      REQUIRE(many.size() == one.size());
      std::size_t differ = 0;
      for (std::size_t i = 0; i < one.size(); ++i) differ += std::memcmp(&one[i], &many[i], sizeof(float)) != 0;
      CHECK(differ == 0);
    }
    if (fp32.empty()) {
      fp32 = one;
      continue;
    }
    // bf16's products did run, and trained about as fp32's: the first loss within 1 %.
    CHECK(one != fp32);
    CHECK(one[0] == Approx(fp32[0]).epsilon(0.01));
  }
#endif
}

// ---- micro-batches (TrainOptions::micro_batches, heed/optim/micro_batches.hpp) -------------

TEMPLATE_TEST_CASE("Micro-batches add up to the whole batch's loss and gradient", "[seq2seq][train]",
                   BahdanauNet<double>, TransformerNet<double>) {
  using Net = TestType;
  heed::NmtData data = small_corpus(60);
  auto net = dropout_net<Net>(data, 0.0);
  net->train();
  heed::MaskedSoftmaxCELoss loss;
  const heed::NmtBatch batch = data.data_iter.batch(0);
  REQUIRE(batch.X.shape()[0] == 16);  // parts of 5, 5 and 6 rows
  const IndexTensor dec_input = heed::detail::shift_right(batch.Y, data.tgt_vocab["<bos>"]);
  const auto step = [&](index_t begin, index_t end) {
    const auto rows = [&](const IndexTensor& t) { return t.narrow(0, begin, end - begin); };
    const Tensord l = heed::sum(
        loss((*net)(rows(batch.X), rows(dec_input), rows(batch.X_valid_len)), rows(batch.Y), rows(batch.Y_valid_len)));
    l.backward();
    return l.item();
  };
  const auto gradients = [&](index_t parts) {
    for (Tensord& p : net->parameters()) p.zero_grad();
    const double total = heed::accumulate_micro_batches<double>(16, parts, step);
    std::vector<Tensord> grads{heed::full<double>({1}, total)};
    for (const Tensord& p : net->parameters()) grads.push_back(p.grad());
    return grads;
  };
  const std::vector<Tensord> whole = gradients(1), parts = gradients(3);
  REQUIRE(whole.size() == parts.size());
  CHECK(parts[0].item() == Approx(whole[0].item()).epsilon(1e-12));
  const auto named = net->named_parameters();
  for (std::size_t i = 1; i < whole.size(); ++i) {
    INFO(named[i - 1].first);
    REQUIRE(whole[i].defined());
    check_close(parts[i], whole[i], 1e-12);
  }
}

TEMPLATE_TEST_CASE("Micro-batches train to the same bits on 1 and 3 threads", "[seq2seq][train][threads]",
                   BahdanauNet<float>, TransformerNet<float>) {
#ifndef _OPENMP
  WARN("built without OpenMP: one thread only, nothing to compare");
#else
  using Net = TestType;
  heed::NmtData data = small_corpus(60);  // 61 pairs: batches of 16 (parts 5, 5, 6), the last of 13 (4, 4, 5)
  index_t last_rows = 0;
  for (const heed::NmtBatch& batch : data.data_iter) last_rows = batch.X.shape()[0];
  REQUIRE(last_rows == 13);
  const auto train_with = [&](int threads, index_t micro_batches) {
    const int saved = omp_get_max_threads();
    omp_set_num_threads(threads);
    auto net = dropout_net<Net>(data, 0.2);
    heed::TrainOptions options;
    heed::Generator init_gen(4);
    options.generator = &init_gen;
    options.micro_batches = micro_batches;
    heed::manual_seed(8);  // dropout's generator
    auto loader = data.data_iter;
    const heed::TrainResult result = heed::train_seq2seq<float>(*net, loader, 0.01, 2, data.tgt_vocab, options);
    omp_set_num_threads(saved);
    // What the modules keep for inspection comes from the first part of the last batch:
    // the Transformer's rows sorted by length and cut to even cost, the Bahdanau's even.
    if constexpr (std::is_same_v<Net, TransformerNet<float>>) {
      heed::NmtBatch last;
      auto replay = data.data_iter;  // the loader's own generator: the same two epochs' draws
      for (int epoch = 0; epoch < 2; ++epoch)
        for (const heed::NmtBatch& batch : replay) last = batch;
      const auto split =
          heed::detail::length_balanced_split(last.X_valid_len, last.Y_valid_len, micro_batches, 10, 10, true, true);
      CHECK(net->encoder().attention_weights()[0].shape()[0] == split.bounds[1]);
    } else
      CHECK(net->decoder().attention_weights()[0].shape()[0] == last_rows / micro_batches);
    std::vector<float> values(result.losses.begin(), result.losses.end());
    for (const auto& [name, p] : net->named_parameters()) values.insert(values.end(), p.data(), p.data() + p.numel());
    return values;
  };
  const std::vector<float> one = train_with(1, 3), three = train_with(3, 3);
  REQUIRE(one.size() == three.size());
  std::size_t differ = 0;
  for (std::size_t i = 0; i < one.size(); ++i) differ += std::memcmp(&one[i], &three[i], sizeof(float)) != 0;
  CHECK(differ == 0);
  // The parts draw their dropout masks apart: the split, unlike the thread count, changes the bits.
  CHECK(train_with(3, 1) != one);
#endif
}

TEMPLATE_TEST_CASE("Gradient accumulation over k batches trains as batches k times as large", "[seq2seq][train]",
                   BahdanauNet<double>, TransformerNet<double>) {
  using Net = TestType;
  // The permutation does not depend on the batch size: batches of 8 taken two by two
  // hold the rows of the batches of 16 (61 pairs, d2l's num_examples quirk: the last
  // pair 8 + 5 rows, the last batch 13).
  const auto train = [](index_t batch_size, index_t accumulation_steps) {
    heed::NmtData data = heed::load_data_nmt_text(heed::builtin_fra_eng(), batch_size, 10, 60, /*seed=*/3);
    auto net = dropout_net<Net>(data, 0.0);
    heed::TrainOptions options;
    heed::Generator init_gen(4);
    options.generator = &init_gen;
    options.accumulation_steps = accumulation_steps;
    const heed::TrainResult result =
        heed::train_seq2seq<double>(*net, data.data_iter, 0.01, 2, data.tgt_vocab, options);
    return std::pair{result, net->named_parameters()};
  };
  const auto [accumulated, accumulated_params] = train(8, 2);
  const auto [whole, whole_params] = train(16, 1);
  CHECK(accumulated.steps == 8);  // 4 updates per epoch either way
  CHECK(whole.steps == 8);
  CHECK(accumulated.tokens == whole.tokens);
  for (std::size_t i = 0; i < 2; ++i) CHECK(accumulated.losses[i] == Approx(whole.losses[i]).epsilon(1e-12));
  REQUIRE(accumulated_params.size() == whole_params.size());
  for (std::size_t i = 0; i < whole_params.size(); ++i) {
    INFO(whole_params[i].first);
    check_close(accumulated_params[i].second, whole_params[i].second, 1e-9);
  }
  // Three batches of 8 per update: 8 batches an epoch make updates of 3, 3 and 2.
  CHECK(train(8, 3).first.steps == 6);
  heed::NmtData data = small_corpus(60);
  auto net = dropout_net<Net>(data, 0.0);
  heed::TrainOptions options;
  options.accumulation_steps = 0;
  CHECK_ERROR(heed::ValueError, "train_seq2seq: accumulation_steps must be >= 1, got 0",
              heed::train_seq2seq<double>(*net, data.data_iter, 0.01, 1, data.tgt_vocab, options));
}

TEST_CASE("train_seq2seq's moving average is decay·ema + (1 − decay)·param after each update (by hand)",
          "[seq2seq][train]") {
  // 8 pairs in batches of 16: one update an epoch, so the parameters after each update
  // are those after each call.
  heed::NmtData data = small_corpus(8);
  heed::Generator gen(4);
  auto net = transformer_net<float>(data.src_vocab.size(), data.tgt_vocab.size());
  heed::Adam<float> adam(net->parameters(), 0.01);
  heed::ExponentialMovingAverage ema;
  heed::TrainOptions options;
  options.ema_decay = 0.75;
  options.ema = &ema;
  const auto values_of = [&] {
    std::vector<float> values;
    for (const auto& p : net->parameters()) values.insert(values.end(), p.data(), p.data() + p.numel());
    return values;
  };
  heed::init::xavier_init_weights(*net, gen);
  options.xavier_init = false;
  std::vector<float> expected = values_of();  // the average starts from the parameters before the first update
  heed::TrainState at;
  for (int k = 1; k <= 3; ++k) {
    const heed::TrainResult result =
        heed::train_seq2seq<float>(*net, data.data_iter, adam, 1, data.tgt_vocab, options, at);
    REQUIRE(result.steps == 1);
    ++at.epochs_done;
    ++at.steps_done;
    const std::vector<float> p = values_of();
    for (std::size_t i = 0; i < expected.size(); ++i) expected[i] = 0.75f * expected[i] + 0.25f * p[i];
    std::vector<float> got;
    for (const auto& t : ema.values()) got.insert(got.end(), t.data(), t.data() + t.numel());
    CHECK(ema.updates() == k);
    REQUIRE(got.size() == expected.size());
    std::size_t differ = 0;
    for (std::size_t i = 0; i < got.size(); ++i) differ += std::memcmp(&got[i], &expected[i], sizeof(float)) != 0;
    CHECK(differ == 0);
  }
  // Without a caller's average, the run's own is in the result, started afresh; the
  // parameters train as without one.
  options.ema = nullptr;
  const heed::TrainResult own = heed::train_seq2seq<float>(*net, data.data_iter, adam, 2, data.tgt_vocab, options, at);
  CHECK(own.ema.updates() == 2);
  options.ema_decay = 1.0;
  CHECK_ERROR(heed::ValueError, "train_seq2seq: ema_decay must be in [0, 1), got 1",
              heed::train_seq2seq<float>(*net, data.data_iter, adam, 1, data.tgt_vocab, options, at));
}

TEMPLATE_TEST_CASE("Two epochs give the bits of one, a checkpoint, a new process's resume and one more",
                   "[seq2seq][train][io]", BahdanauNet<float>, TransformerNet<float>) {
  using Net = TestType;
  // Dropout, two micro-batches, a warm-up schedule and bucketing: every generator and
  // every counter the second epoch depends on goes through the checkpoint.
  heed::NmtData data = small_corpus(60);
  data.data_iter.set_bucketing(2);
  heed::TrainOptions options;
  options.micro_batches = 2;
  options.lr_schedule = heed::LrSchedule::inverse_sqrt(0.01, 3);
  const auto fresh = [&] {
    auto net = dropout_net<Net>(data, 0.2);
    auto optimizer = std::make_unique<heed::Adam<float>>(net->parameters(), 0.01);
    return std::pair{std::move(net), std::move(optimizer)};
  };
  const auto values_of = [](const Net& net) {
    std::vector<float> values;
    for (const auto& [name, p] : net.named_parameters()) values.insert(values.end(), p.data(), p.data() + p.numel());
    return values;
  };

  heed::manual_seed(8);
  auto [straight, straight_adam] = fresh();
  auto straight_loader = data.data_iter;
  const heed::TrainResult two =
      heed::train_seq2seq<float>(*straight, straight_loader, *straight_adam, 2, data.tgt_vocab, options);

  heed::manual_seed(8);
  auto [first, first_adam] = fresh();
  auto first_loader = data.data_iter;
  const heed::TrainResult one =
      heed::train_seq2seq<float>(*first, first_loader, *first_adam, 1, data.tgt_vocab, options);
  const std::filesystem::path path =
      std::filesystem::temp_directory_path() / ("heed_test_resume-" + std::to_string(std::random_device{}()));
  heed::save_training_checkpoint(*first, *first_adam, path.string(),
                                 {{"loader_generator", first_loader.generator().get_state()},
                                  {"default_generator", heed::default_generator().get_state()},
                                  {"epochs", "1"},
                                  {"steps", std::to_string(one.steps)}});

  heed::manual_seed(99);  // what the new process would have done before loading
  auto [resumed, resumed_adam] = fresh();
  auto resumed_loader = data.data_iter;
  resumed_loader.set_seed(12345);
  const auto metadata = heed::load_training_checkpoint(*resumed, *resumed_adam, path.string());
  std::filesystem::remove(path);
  resumed_loader.generator().set_state(metadata.at("loader_generator"));
  heed::default_generator().set_state(metadata.at("default_generator"));
  heed::TrainOptions resume = options;
  resume.xavier_init = false;
  heed::TrainState at;
  at.epochs_done = std::stoll(metadata.at("epochs"));
  at.steps_done = std::stoll(metadata.at("steps"));
  std::vector<index_t> epochs_seen;
  resume.on_epoch = [&](const heed::EpochStats& stats) { epochs_seen.push_back(stats.epoch * 10 + stats.num_epochs); };
  const heed::TrainResult rest =
      heed::train_seq2seq<float>(*resumed, resumed_loader, *resumed_adam, 1, data.tgt_vocab, resume, at);

  CHECK(epochs_seen == std::vector<index_t>{22});  // epoch 2 of 2
  CHECK(one.steps + rest.steps == two.steps);
  CHECK(rest.losses[0] == two.losses[1]);
  const std::vector<float> expected = values_of(*straight), got = values_of(*resumed);
  REQUIRE(expected.size() == got.size());
  std::size_t differ = 0;
  for (std::size_t i = 0; i < expected.size(); ++i) differ += std::memcmp(&expected[i], &got[i], sizeof(float)) != 0;
  CHECK(differ == 0);

  // Stopped by max_steps two batches into epoch 2, then resumed from there: the same bits
  // again. The loader's generator is saved as it was before epoch 2 (the epoch's order is
  // drawn again), and the batches done are passed over.
  heed::manual_seed(8);
  auto [part, part_adam] = fresh();
  auto part_loader = data.data_iter;
  heed::TrainOptions stop = options;
  stop.max_steps = one.steps + 2;
  const heed::TrainResult epoch1 = heed::train_seq2seq<float>(*part, part_loader, *part_adam, 1, data.tgt_vocab, stop);
  CHECK_FALSE(epoch1.stopped_mid_epoch);
  const std::string before_epoch2 = part_loader.generator().get_state();
  stop.xavier_init = false;
  heed::TrainState stop_at;
  stop_at.epochs_done = 1;
  stop_at.steps_done = epoch1.steps;
  bool reported = false;
  stop.on_epoch = [&](const heed::EpochStats&) { reported = true; };
  const heed::TrainResult stopped =
      heed::train_seq2seq<float>(*part, part_loader, *part_adam, 5, data.tgt_vocab, stop, stop_at);
  CHECK(stopped.stopped_mid_epoch);
  CHECK(stopped.steps == 2);
  CHECK(stopped.epoch_batches == 2);
  CHECK_FALSE(reported);  // a part of an epoch is not an epoch
  const std::string dropout_state = heed::default_generator().get_state();
  REQUIRE(part_loader.num_batches() > 2);
  heed::manual_seed(99);
  auto [rest_net, rest_adam] = fresh();
  heed::save_training_checkpoint(*part, *part_adam, path.string(), {});
  heed::load_training_checkpoint(*rest_net, *rest_adam, path.string());
  std::filesystem::remove(path);
  auto rest_loader = data.data_iter;
  rest_loader.generator().set_state(before_epoch2);
  heed::default_generator().set_state(dropout_state);
  heed::TrainOptions go_on = options;
  go_on.xavier_init = false;
  // The old spelling, TrainOptions' deprecated resume members, is still honoured.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
  go_on.epochs_done = 1;
  go_on.steps_done = epoch1.steps + stopped.steps;
  go_on.skip_batches = stopped.epoch_batches;
#pragma GCC diagnostic pop
  const heed::TrainResult finished =
      heed::train_seq2seq<float>(*rest_net, rest_loader, *rest_adam, 1, data.tgt_vocab, go_on);
  CHECK(epoch1.steps + stopped.steps + finished.steps == two.steps);
  const std::vector<float> resumed_mid_epoch = values_of(*rest_net);
  REQUIRE(resumed_mid_epoch.size() == expected.size());
  differ = 0;
  for (std::size_t i = 0; i < expected.size(); ++i)
    differ += std::memcmp(&expected[i], &resumed_mid_epoch[i], sizeof(float)) != 0;
  CHECK(differ == 0);

  // The optimizer must be the net's, and the counts of a resumed run cannot be negative.
  heed::Adam<float> stray(first->parameters(), 0.01);
  CHECK_ERROR(heed::ValueError, "train_seq2seq: the optimizer's",
              heed::train_seq2seq<float>(*straight, straight_loader, stray, 1, data.tgt_vocab, options));
  heed::TrainState negative;
  negative.steps_done = -1;
  CHECK_ERROR(
      heed::ValueError, "train_seq2seq: epochs_done and steps_done must be >= 0, got 0 and -1",
      heed::train_seq2seq<float>(*straight, straight_loader, *straight_adam, 1, data.tgt_vocab, options, negative));

  // max_seconds stops after the update that passes it, mid-epoch if so, as max_steps does:
  // a nanosecond stops after the first batch of the first epoch of 3.
  heed::TrainOptions timed = options;
  timed.max_seconds = 1e-9;
  auto timed_loader = data.data_iter;
  const heed::TrainResult timed_out =
      heed::train_seq2seq<float>(*straight, timed_loader, *straight_adam, 3, data.tgt_vocab, timed);
  CHECK(timed_out.out_of_time);
  CHECK(timed_out.stopped_mid_epoch);
  CHECK(timed_out.steps == 1);
  CHECK(timed_out.epoch_batches == 1);
  CHECK(timed_out.losses.size() == 1);
  timed.max_seconds = 3600.0;  // not reached: every epoch
  const heed::TrainResult in_time =
      heed::train_seq2seq<float>(*straight, timed_loader, *straight_adam, 2, data.tgt_vocab, timed);
  CHECK_FALSE(in_time.out_of_time);
  CHECK(in_time.losses.size() == 2);
  timed.max_seconds = -1.0;
  CHECK_ERROR(heed::ValueError, "train_seq2seq: max_seconds must be >= 0, got -1",
              heed::train_seq2seq<float>(*straight, timed_loader, *straight_adam, 1, data.tgt_vocab, timed));
}

TEST_CASE("Micro-batches of length-sorted rows train as the whole batch", "[seq2seq][train]") {
  // Without dropout the parts' sum is the batch's loss and gradient, whatever rows each
  // part holds: sorting the rows and cutting each part after its own longest changes
  // rounding only.
  heed::NmtData data = small_corpus(60);
  const auto train = [&](index_t micro_batches) {
    auto net = dropout_net<TransformerNet<double>>(data, 0.0);
    heed::TrainOptions options;
    heed::Generator init_gen(4);
    options.generator = &init_gen;
    options.micro_batches = micro_batches;
    auto loader = data.data_iter;
    const heed::TrainResult result = heed::train_seq2seq<double>(*net, loader, 0.01, 2, data.tgt_vocab, options);
    return std::pair{result, net->named_parameters()};
  };
  const auto [whole, whole_params] = train(1);
  const auto [parts, parts_params] = train(3);
  for (std::size_t i = 0; i < 2; ++i) CHECK(parts.losses[i] == Approx(whole.losses[i]).epsilon(1e-12));
  REQUIRE(parts_params.size() == whole_params.size());
  for (std::size_t i = 0; i < whole_params.size(); ++i) {
    INFO(whole_params[i].first);
    check_close(parts_params[i].second, whole_params[i].second, 1e-9);
  }
}

TEST_CASE("length_balanced_split sorts rows by length and evens the parts' cost", "[seq2seq][train]") {
  const IndexTensor lengths = heed::tensor<std::int64_t>({5, 1, 1, 5, 1, 1});
  // Sorted: the four rows of 1 (cost 4 rows × 2 steps + 4 tokens = 12), then the two of 5
  // (2 × 10 + 10 = 30); moving a long row to the first part would cost it 5 × 10 + 6 = 56.
  auto split = heed::detail::length_balanced_split(lengths, lengths, 2, 10, 10, true, true);
  CHECK(std::vector<std::int64_t>(split.order.data(), split.order.data() + 6) ==
        std::vector<std::int64_t>{1, 2, 4, 5, 0, 3});
  CHECK(split.bounds == std::vector<index_t>{0, 4, 6});
  // Three parts: the long rows apart (15 each), the short ones together (12).
  split = heed::detail::length_balanced_split(lengths, lengths, 3, 10, 10, true, true);
  CHECK(split.bounds == std::vector<index_t>{0, 4, 5, 6});
  // As many parts as rows: one each; one part: all of them.
  CHECK(heed::detail::length_balanced_split(lengths, lengths, 6, 10, 10, true, true).bounds ==
        std::vector<index_t>{0, 1, 2, 3, 4, 5, 6});
  CHECK(heed::detail::length_balanced_split(lengths, lengths, 1, 10, 10, true, true).bounds ==
        std::vector<index_t>{0, 6});
  // A source that is not cut costs its full width, and does not order the rows.
  const IndexTensor source = heed::tensor<std::int64_t>({1, 9, 9, 1, 9, 9});
  split = heed::detail::length_balanced_split(source, lengths, 2, 10, 10, false, true);
  CHECK(std::vector<std::int64_t>(split.order.data(), split.order.data() + 6) ==
        std::vector<std::int64_t>{1, 2, 4, 5, 0, 3});
  CHECK_ERROR(heed::ValueError, "length_balanced_split: 6 and 6 valid lengths cannot make 7 parts",
              heed::detail::length_balanced_split(lengths, lengths, 7, 10, 10, true, true));
}

TEST_CASE("accumulate_micro_batches adds the parts in order and rethrows the first part's error", "[train]") {
  auto w = heed::tensor<double>({1, 2, 3}).requires_grad_();
  // Part [begin, end) adds (end - begin) · w: the gradient counts the rows.
  const auto step = [&](index_t begin, index_t end) {
    (w * static_cast<double>(end - begin)).sum().backward();
    return static_cast<double>(end - begin);
  };
  CHECK(heed::accumulate_micro_batches<double>(7, 3, step) == 7.0);  // rows 0-1, 2-3, 4-6
  CHECK(w.grad().to_vector() == std::vector<double>{7, 7, 7});
  CHECK(heed::accumulate_micro_batches<double>(2, 2, step) == 2.0);  // added to what was there
  CHECK(w.grad().to_vector() == std::vector<double>{9, 9, 9});
  // A leaf made inside a part lives until its gradient has been added.
  const auto with_temporary = [&](index_t begin, index_t end) {
    auto temporary = heed::tensor<double>({1, 2}).requires_grad_();
    (temporary * w.narrow(0, 0, 2)).sum().backward();
    return static_cast<double>(end - begin);
  };
  CHECK(heed::accumulate_micro_batches<double>(4, 2, with_temporary) == 4.0);
  CHECK(w.grad().to_vector() == std::vector<double>{11, 13, 9});

  w.zero_grad();
  const auto failing = [&](index_t begin, index_t end) {
    (w * 1.0).sum().backward();
    if (begin > 0) throw heed::ValueError("part from row " + std::to_string(begin));
    return static_cast<double>(end - begin);
  };
  CHECK_ERROR(heed::ValueError, "part from row 2", heed::accumulate_micro_batches<double>(6, 3, failing));
  CHECK(!w.grad().defined());  // no part's gradient was added
  CHECK_ERROR(heed::ValueError, "accumulate_micro_batches: parts must be >= 1, got 0",
              heed::accumulate_micro_batches<double>(6, 0, step));
  CHECK_ERROR(heed::ValueError, "accumulate_micro_batches: 2 rows cannot make 3 non-empty parts",
              heed::accumulate_micro_batches<double>(2, 3, step));
  // Parts given by their bounds: rows 0, then 1-3.
  w.zero_grad();
  CHECK(heed::accumulate_micro_batches<double>(std::vector<index_t>{0, 1, 4}, step) == 4.0);
  CHECK(w.grad().to_vector() == std::vector<double>{4, 4, 4});
  CHECK_ERROR(heed::ValueError, "accumulate_micro_batches: part 1 is empty (rows 1 to 1)",
              heed::accumulate_micro_batches<double>(std::vector<index_t>{0, 1, 1, 4}, step));
  CHECK_ERROR(heed::ValueError, "accumulate_micro_batches: bounds must start at 0 and hold at least 2 values, got 1",
              heed::accumulate_micro_batches<double>(std::vector<index_t>{0}, step));

  heed::NmtData data = small_corpus(20);
  heed::Generator gen(5);
  auto net = bahdanau_net<float>(data.src_vocab.size(), data.tgt_vocab.size(), 8, 8, 1, 0.0, gen);
  heed::TrainOptions options;
  options.micro_batches = 0;
  CHECK_ERROR(heed::ValueError, "train_seq2seq: micro_batches must be >= 1, got 0",
              heed::train_seq2seq<float>(*net, data.data_iter, 0.01, 1, data.tgt_vocab, options));
}

TEST_CASE("train_seq2seq refuses int8 training and bf16 of a double net", "[seq2seq][train][errors]") {
  heed::NmtData data = small_corpus(20);
  heed::Generator gen(5);
  heed::TrainOptions options;
  options.precision = heed::Precision::int8;
  auto net = bahdanau_net<float>(data.src_vocab.size(), data.tgt_vocab.size(), 8, 8, 1, 0.0, gen);
  CHECK_ERROR(heed::ValueError, "train_seq2seq: precision int8 is for decoding only; training takes fp32 or bf16",
              heed::train_seq2seq<float>(*net, data.data_iter, 0.01, 1, data.tgt_vocab, options));
  options.precision = heed::Precision::bf16;
  auto double_net = bahdanau_net<double>(data.src_vocab.size(), data.tgt_vocab.size(), 8, 8, 1, 0.0, gen);
  CHECK_ERROR(heed::ValueError, "train_seq2seq: precision bf16 trains a float net, the net is double",
              heed::train_seq2seq<double>(*double_net, data.data_iter, 0.01, 1, data.tgt_vocab, options));
}

// ---- data-parallel training on one process (heed/dist/; N processes: test_distributed.cpp) -------

TEST_CASE("DataParallel on a single process runs every part, as accumulate_micro_batches does", "[train][dist]") {
  heed::dist::LocalCommunicator one;
  CHECK(one.rank() == 0);
  CHECK(one.size() == 1);
  auto w = heed::tensor<double>({1, 2, 3}).requires_grad_();
  heed::dist::DataParallel<double> parallel(one, {{"w", w}});
  parallel.broadcast_parameters();  // nothing to check against, nothing to copy
  CHECK(w.to_vector() == std::vector<double>{1, 2, 3});
  const auto step = [&](index_t begin, index_t end) {
    (w * static_cast<double>(end - begin)).sum().backward();
    return static_cast<double>(end - begin);
  };
  CHECK(parallel.global_parts(7, 3) == 3);
  CHECK(parallel.global_parts(2, 3) == 2);
  CHECK(heed::dist::even_bounds(7, 3) == std::vector<index_t>{0, 2, 4, 7});
  CHECK(parallel.accumulate(heed::dist::even_bounds(7, 3), 3, step) == 7.0);
  parallel.allreduce_gradients();
  CHECK(w.grad().to_vector() == std::vector<double>{7, 7, 7});
  CHECK(parallel.allreduce(2.5) == 2.5);
  CHECK(parallel.run_or_abort([] { return 4; }, "test") == 4);
  CHECK_ERROR(heed::ValueError, "part from the test",
              parallel.run_or_abort([]() -> int { throw heed::ValueError("part from the test"); }, "test"));
  CHECK_ERROR(heed::ValueError, "DataParallel::accumulate: 4 parts cannot go 3 to each of 1 ranks",
              parallel.accumulate(heed::dist::even_bounds(8, 4), 3, step));
  CHECK_ERROR(heed::ValueError, "DataParallel::accumulate: part 0 is empty (rows 0 to 0)",
              parallel.accumulate(std::vector<index_t>{0, 0, 3}, 3, step));
  CHECK_ERROR(heed::ValueError, "even_bounds: 2 rows cannot make 3 non-empty parts", heed::dist::even_bounds(2, 3));
  CHECK_ERROR(heed::ValueError, "DataParallel::global_parts: rows (0) and parts_per_rank (1) must be >= 1",
              parallel.global_parts(0, 1));
  CHECK_ERROR(heed::ValueError, "LocalCommunicator::broadcast: root 1 is not a rank of 1",
              one.broadcast(w.data(), 3, 1));
  CHECK_ERROR(heed::ValueError, "DataParallel: bucket_elements must be >= 1",
              heed::dist::DataParallel<double>(one, {{"w", w}}, {}, 0));
  CHECK_ERROR(heed::DeviceError, "DataParallel: v is undefined",
              heed::dist::DataParallel<double>(one, {{"v", Tensor<double>()}}));
}

TEMPLATE_TEST_CASE("train_seq2seq with a single-process communicator gives the bits of none", "[seq2seq][train][dist]",
                   BahdanauNet<float>, TransformerNet<float>) {
  using Net = TestType;
  heed::NmtData data = small_corpus(40);
  heed::dist::LocalCommunicator one;
  const auto train = [&](heed::dist::Communicator* communicator) {
    auto net = dropout_net<Net>(data, 0.2);
    heed::TrainOptions options;
    heed::Generator init_gen(4);
    options.generator = &init_gen;
    options.micro_batches = 2;
    options.communicator = communicator;
    heed::manual_seed(8);
    auto loader = data.data_iter;
    const heed::TrainResult result = heed::train_seq2seq<float>(*net, loader, 0.01, 2, data.tgt_vocab, options);
    CHECK(result.communication_seconds == 0.0);
    std::vector<float> values(result.losses.begin(), result.losses.end());
    for (const auto& [name, p] : net->named_parameters()) values.insert(values.end(), p.data(), p.data() + p.numel());
    return values;
  };
  CHECK(train(&one) == train(nullptr));
}

TEMPLATE_TEST_CASE("Steady-state training allocates no tensor buffer", "[seq2seq][train]", BahdanauNet<float>,
                   TransformerNet<float>) {
  using Net = TestType;
  heed::NmtData data = small_corpus(64);
  heed::Generator gen(3);
  const index_t src_vocab = data.src_vocab.size(), tgt_vocab = data.tgt_vocab.size();
  std::unique_ptr<Net> net;  // dropout on: its masks are buffers too
  if constexpr (std::is_same_v<Net, BahdanauNet<float>>)
    net = bahdanau_net<float>(src_vocab, tgt_vocab, 16, 16, 2, 0.1, gen);
  else
    net = std::make_unique<Net>(
        std::make_unique<heed::TransformerEncoder<float>>(src_vocab, 16, 16, 16, 16, Shape{16}, 16, 32, 4, 2, 0.1),
        std::make_unique<heed::TransformerDecoder<float>>(tgt_vocab, 16, 16, 16, 16, Shape{16}, 16, 32, 4, 2, 0.1));
  net->train();
  heed::Adam<float> optimizer(net->parameters(), 0.01);
  heed::MaskedSoftmaxCELoss loss;
  const heed::NmtBatch batch = data.data_iter.batch(0);
  const IndexTensor dec_input = heed::detail::shift_right(batch.Y, data.tgt_vocab["<bos>"]);
  // The same batch step after step, as an epoch's batches of one shape: from the
  // second step on, every buffer comes back from the cache.
  std::vector<std::uint64_t> allocations;
  for (int step = 0; step < 5; ++step) {
    optimizer.zero_grad();
    const Tensorf l = heed::sum(loss((*net)(batch.X, dec_input, batch.X_valid_len), batch.Y, batch.Y_valid_len));
    l.backward();
    heed::clip_grad_norm_(net->parameters(), 1.0);
    optimizer.step();
    allocations.push_back(heed::buffer_allocations());
  }
  INFO("buffers allocated so far after each step: " << allocations[0] << " " << allocations[1] << " " << allocations[2]
                                                    << " " << allocations[3] << " " << allocations[4]);
  CHECK(allocations[4] == allocations[1]);
}

TEST_CASE("xavier_init_weights redraws the weights of Linear and GRU layers only", "[seq2seq][init]") {
  heed::Generator gen(2);
  auto net = bahdanau_net<double>(10, 12, 8, 6, 2, 0.0, gen);
  const Tensord embedding_before = net->encoder().embedding.weight.clone();
  const Tensord bias_before = net->decoder().dense.bias.clone();
  heed::init::xavier_init_weights(*net, gen);
  check_close(net->encoder().embedding.weight, embedding_before, 0.0);
  check_close(net->decoder().dense.bias, bias_before, 0.0);
  auto check_bound = [](const Tensord& w) {
    const double bound = std::sqrt(6.0 / static_cast<double>(w.shape()[0] + w.shape()[1]));
    CHECK(heed::max(heed::abs(w)).item() <= bound);
    CHECK(heed::max(heed::abs(w)).item() > 0.5 * bound);  // drawn anew over the whole range
  };
  check_bound(net->decoder().dense.weight);          // (12, 6)
  check_bound(net->decoder().attention.W_q.weight);  // (6, 6)
  check_bound(net->encoder().rnn.weight_ih[0]);      // (18, 8)
  check_bound(net->decoder().rnn.weight_hh[1]);      // (18, 6)
  Tensord loose = heed::zeros<double>({3});
  CHECK_ERROR(heed::ShapeError, "xavier_uniform_: expected a 2-D weight, got (3)", heed::init::xavier_uniform_(loose));
}

TEST_CASE("ProgressReport draws a bar on a terminal and a line per tenth elsewhere", "[seq2seq][train]") {
  heed::EpochStats stats;
  stats.num_epochs = 20;
  stats.loss = 1.25;
  stats.tokens_per_second = 1000;
  std::ostringstream log, terminal;
  const heed::ProgressReport to_log(log, false), to_terminal(terminal, true);
  for (index_t epoch = 1; epoch <= 20; ++epoch) {
    stats.epoch = epoch;
    stats.elapsed_seconds = 0.5 * static_cast<double>(epoch);
    to_log(stats);
    to_terminal(stats);
  }
  // Every second epoch (a tenth of 20), each on its own line, with the ETA.
  const std::string lines = log.str();
  CHECK(std::count(lines.begin(), lines.end(), '\n') == 10);
  CHECK(lines.find("  epoch 2/20: loss 1.250, 1000 tokens/s, 1.0 s elapsed, ETA 9.0 s\n") == 0);
  CHECK(lines.find("epoch 3/20") == std::string::npos);
  CHECK(lines.find("epoch 20/20: loss 1.250, 1000 tokens/s, 10.0 s elapsed, ETA 0.0 s\n") != std::string::npos);
  // One line redrawn 20 times, ended after the last epoch.
  const std::string bar = terminal.str();
  CHECK(std::count(bar.begin(), bar.end(), '\r') == 20);
  CHECK(std::count(bar.begin(), bar.end(), '\n') == 1);
  CHECK(bar.find("\r  epoch 10/20 [############............] loss 1.250") != std::string::npos);

  // A run resumed after 10 epochs: its 1.0 s is of epochs 11 and 12, so 8 more take 4 s.
  std::ostringstream resumed;
  stats.epoch = 12;
  stats.epochs_before = 10;
  stats.elapsed_seconds = 1.0;
  heed::ProgressReport(resumed, false)(stats);
  CHECK(resumed.str() == "  epoch 12/20: loss 1.250, 1000 tokens/s, 1.0 s elapsed, ETA 4.0 s\n");
}

TEST_CASE("LossCurve writes its files after the last epoch only", "[seq2seq][train]") {
  const auto dir = std::filesystem::temp_directory_path() / "heed_loss_curve_test";
  std::filesystem::create_directories(dir);
  const std::string csv_path = (dir / "loss.csv").string(), svg_path = (dir / "loss.svg").string();
  std::filesystem::remove(csv_path);
  std::filesystem::remove(svg_path);
  heed::LossCurve curve(svg_path, csv_path);
  heed::EpochStats stats;
  stats.num_epochs = 3;
  for (index_t epoch = 1; epoch <= 3; ++epoch) {
    CHECK_FALSE(std::filesystem::exists(csv_path));
    stats.epoch = epoch;
    stats.loss = 1.0 / static_cast<double>(epoch);
    stats.tokens_per_second = 100.0 * static_cast<double>(epoch);
    curve(stats);
  }
  std::ifstream csv(csv_path);
  const std::string text((std::istreambuf_iterator<char>(csv)), std::istreambuf_iterator<char>());
  CHECK(text == "epoch,loss,tokens_per_second\n1,1,100\n2,0.5,200\n3,0.333333,300\n");
  CHECK(std::filesystem::exists(svg_path));
  CHECK_ERROR(heed::FileError, "LossCurve", heed::LossCurve("", (dir / "missing" / "loss.csv").string()).save());
  std::filesystem::remove_all(dir);
}
