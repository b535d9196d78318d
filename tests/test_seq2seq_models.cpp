// The sequence-to-sequence models (d2l 9.6-9.7 and 10.4): d2l's listings, parameter
// names, golden values from d2l's PyTorch code (tests/data/make_seq2seq_golden.py), the
// generic EncoderDecoder with the Transformer, gradients against finite differences,
// step-by-step decoding against the whole-sequence pass, and seeds.
#include "seq2seq_common.hpp"

// ---- d2l's listings and parameter names ---------------------------------------------------------

TEST_CASE("The shapes of d2l's 9.7 and 10.4 listings", "[seq2seq]") {
  heed::Seq2SeqEncoder<float> encoder(/*vocab_size=*/10, /*embed_size=*/8, /*num_hiddens=*/16, /*num_layers=*/2);
  encoder.eval();
  const IndexTensor X = heed::zeros<std::int64_t>({4, 7});  // (batch_size, num_steps)
  const heed::GRUOutput<float> enc = encoder.forward(X);
  CHECK(enc.outputs.shape() == Shape{7, 4, 16});
  CHECK(enc.state.shape() == Shape{2, 4, 16});

  heed::Seq2SeqAttentionDecoder<float> decoder(/*vocab_size=*/10, /*embed_size=*/8, /*num_hiddens=*/16,
                                               /*num_layers=*/2);
  decoder.eval();
  auto state = decoder.init_state(encoder.forward(X), IndexTensor());
  const Tensorf out = decoder.forward(X, state);
  CHECK(out.shape() == Shape{4, 7, 10});
  // d2l prints: torch.Size([4, 7, 10]) 3 torch.Size([4, 7, 16]) 2 torch.Size([4, 16])
  CHECK(state.enc_outputs.shape() == Shape{4, 7, 16});
  CHECK(state.hidden_state.shape() == Shape{2, 4, 16});
  CHECK_FALSE(state.enc_valid_lens.defined());
  const auto weights = decoder.attention_weights();
  REQUIRE(weights.size() == 7);
  for (const auto& w : weights) CHECK(w.shape() == Shape{4, 1, 7});
}

TEST_CASE("GRU and seq2seq parameters carry torch's and d2l's state_dict names, in order", "[gru][seq2seq]") {
  heed::GRU<float> gru(5, 6, 2);
  CHECK(parameter_names(gru) == kGRUNames);
  const std::vector<Shape> shapes = {{18, 5}, {18, 6}, {18}, {18}, {18, 6}, {18, 6}, {18}, {18}};
  const auto params = gru.parameters();
  REQUIRE(params.size() == shapes.size());
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    INFO(kGRUNames[i]);
    CHECK(params[i].shape() == shapes[i]);
    CHECK(params[i].requires_grad());
  }
  CHECK(parameter_names(heed::GRU<float>(3, 4)) == Names{"weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0"});

  heed::Seq2SeqEncoder<float> encoder(10, 8, 16, 2);
  CHECK(parameter_names(encoder) == kEncoderNames);
  heed::Seq2SeqAttentionDecoder<float> decoder(10, 8, 16, 2);
  CHECK(parameter_names(decoder) == kDecoderNames);
  // The decoder's GRU reads [context; embedding]: num_hiddens + embed_size inputs.
  CHECK(decoder.named_parameters().at(4).second.shape() == Shape{48, 24});

  heed::Generator gen(0);
  const auto net = bahdanau_net<float>(11, 13, 4, 5, 2, 0.0, gen);
  CHECK(parameter_names(*net) == concat(prefixed("encoder.", kEncoderNames), prefixed("decoder.", kDecoderNames)));
  Names children;
  for (const auto& [name, child] : net->named_children()) children.push_back(name);
  CHECK(children == Names{"encoder", "decoder"});
  CHECK(net->encoder().named_parameters().front().second.is_same(net->parameters().front()));
}

// ---- golden values ------------------------------------------------------------------------------

TEMPLATE_TEST_CASE("Seq2SeqEncoder and Seq2SeqAttentionDecoder match d2l", "[seq2seq][golden]", float, double) {
  using T = TestType;
  heed::Seq2SeqEncoder<T> encoder(10, 8, 16, 2);
  heed_test::load_parameters(golden(), encoder, "enc");
  const IndexTensor enc_X = golden().tensor<std::int64_t>("enc.X");
  const IndexTensor enc_valid_lens = golden().tensor<std::int64_t>("enc.valid_lens");
  heed::Seq2SeqAttentionDecoder<T> decoder(10, 8, 16, 2);
  heed_test::load_parameters(golden(), decoder, "dec");
  const IndexTensor dec_X = golden().tensor<std::int64_t>("dec.X");

  SECTION("encoder") {
    const heed::GRUOutput<T> out = encoder.forward(enc_X, enc_valid_lens);
    check_close(out.outputs, golden().tensor<T>("enc.outputs"), tolerance<T>());
    check_close(out.state, golden().tensor<T>("enc.state"), tolerance<T>());
  }
  SECTION("decoder, on the encoder's outputs as leaves") {
    heed::GRUOutput<T> enc{leaf<T>(golden(), "enc.outputs"), leaf<T>(golden(), "enc.state")};
    auto state = decoder.init_state(enc, enc_valid_lens);
    // d2l's init_state: outputs permuted to (batch, num_steps, num_hiddens), the
    // encoder's final state, the valid lengths.
    check_close(state.enc_outputs, enc.outputs.permute({1, 0, 2}), 0.0);
    check_close(state.hidden_state, enc.state, 0.0);
    CHECK(state.enc_valid_lens.to_vector() == enc_valid_lens.to_vector());

    const Tensor<T> logits = decoder.forward(dec_X, state);
    check_close(logits, golden().tensor<T>("dec.output"), tolerance<T>());
    check_close(state.hidden_state, golden().tensor<T>("dec.hidden_state"), tolerance<T>());
    const Tensor<T> expected_weights = golden().tensor<T>("dec.attention_weights");  // (7, 4, 1, 7)
    const auto weights = decoder.attention_weights();
    REQUIRE(weights.size() == 7);
    for (index_t t = 0; t < 7; ++t) {
      INFO("step " << t);
      check_close(weights[static_cast<std::size_t>(t)], expected_weights.select(0, t), tolerance<T>());
    }
    logits.backward(golden().tensor<T>("dec.R"));
    check_close(enc.outputs.grad(), golden().tensor<T>("dec.grad.enc_outputs"), tolerance<T>());
    check_close(enc.state.grad(), golden().tensor<T>("dec.grad.enc_state"), tolerance<T>());
    check_grads(decoder, "dec.grad");
  }
  SECTION("decoder after the encoder, as d2l chains them") {
    auto state = decoder.init_state(encoder.forward(enc_X, enc_valid_lens), enc_valid_lens);
    check_close(decoder.forward(dec_X, state), golden().tensor<T>("dec.output"), tolerance<T>());
  }
}

TEMPLATE_TEST_CASE("EncoderDecoder of the GRU encoder and the Bahdanau decoder matches d2l", "[seq2seq][golden]", float,
                   double) {
  using T = TestType;
  heed::Generator gen(0);
  const auto net = bahdanau_net<T>(11, 13, 4, 5, 2, 0.0, gen);
  heed_test::load_parameters(golden(), *net, "ed");
  const IndexTensor enc_X = golden().tensor<std::int64_t>("ed.enc_X"),
                    dec_X = golden().tensor<std::int64_t>("ed.dec_X");
  const IndexTensor enc_valid_lens = golden().tensor<std::int64_t>("ed.enc_valid_lens");
  const Tensor<T> logits = net->forward(enc_X, dec_X, enc_valid_lens);
  check_close(logits, golden().tensor<T>("ed.output"), tolerance<T>());
  {
    // d2l's forward also returns the decoder's final state: the parts called by hand.
    const heed::NoGradGuard no_grad;
    auto [with_state, state] = net->forward_with_state(enc_X, dec_X, enc_valid_lens);
    CHECK(with_state.to_vector() == logits.to_vector());
    auto by_hand = net->decoder().init_state(net->encoder().forward(enc_X, enc_valid_lens), enc_valid_lens);
    (void)net->decoder().forward(dec_X, by_hand);
    REQUIRE(state.hidden_state.shape() == Shape{2, 3, 5});
    CHECK(state.hidden_state.to_vector() == by_hand.hidden_state.to_vector());
  }
  // The decoder kept d2l's per-step attention weights: masked encoder steps get none.
  const auto weights = net->decoder().attention_weights();
  REQUIRE(weights.size() == 6);
  for (const auto& w : weights) {
    REQUIRE(w.shape() == Shape{3, 1, 5});
    for (index_t k = 2; k < 5; ++k) CHECK(w.at({1, 0, k}) == 0);  // row 1 has 2 valid steps
  }
  logits.backward(golden().tensor<T>("ed.R"));
  heed_test::check_parameter_grads(golden(), *net, "ed");

  // d2l's MaskedSoftmaxCELoss of those logits against the labels.
  heed::MaskedSoftmaxCELoss loss;
  Tensor<T> pred = golden().tensor<T>("ed.output").requires_grad_();
  const Tensor<T> l =
      loss(pred, golden().tensor<std::int64_t>("ed.Y"), golden().tensor<std::int64_t>("ed.Y_valid_len"));
  check_close(l, golden().tensor<T>("ed.loss"), tolerance<T>());
  l.sum().backward();
  check_close(pred.grad(), golden().tensor<T>("ed.loss_grad"), tolerance<T>());
}

TEMPLATE_TEST_CASE("EncoderDecoder runs d2l's Transformer encoder and decoder", "[seq2seq][golden]", float, double) {
  using T = TestType;
  TransformerNet<T> net(std::make_unique<heed::TransformerEncoder<T>>(11, 8, 8, 8, 8, Shape{8}, 8, 8, 2, 2, 0.0),
                        std::make_unique<heed::TransformerDecoder<T>>(13, 8, 8, 8, 8, Shape{8}, 8, 8, 2, 2, 0.0));
  // d2l's names, in d2l's order: those the script wrote, parameters being dotted.
  Names expected;
  for (const auto& name : golden().names())
    if (name.rfind("tf.encoder.", 0) == 0 || name.rfind("tf.decoder.", 0) == 0) expected.push_back(name.substr(3));
  CHECK(parameter_names(net) == expected);
  heed_test::load_parameters(golden(), net, "tf");
  // d2l builds its positional-encoding table in float32: use its rows in both tables.
  const Tensor<T> P = golden().tensor<T>("tf.P");
  std::copy_n(P.data(), P.numel(), net.encoder().pos_encoding.P.data());
  std::copy_n(P.data(), P.numel(), net.decoder().pos_encoding.P.data());

  // Training mode, as the script ran d2l's (its causal self-attention mask).
  net.train();
  const Tensor<T> logits =
      net.forward(golden().tensor<std::int64_t>("tf.enc_X"), golden().tensor<std::int64_t>("tf.dec_X"),
                  golden().tensor<std::int64_t>("tf.enc_valid_lens"));
  check_close(logits, golden().tensor<T>("tf.output"), tolerance<T>());
}

// ---- gradients against finite differences -------------------------------------------------------

TEST_CASE("Bahdanau decoder gradients match finite differences", "[seq2seq][gradcheck]") {
  heed::Generator gen(9);
  heed::Seq2SeqAttentionDecoder<double> decoder(/*vocab_size=*/5, /*embed_size=*/3, /*num_hiddens=*/4,
                                                /*num_layers=*/2, 0.0, gen);
  const index_t batch = 2, num_enc_steps = 4;
  std::vector<Tensord> inputs{heed::randn<double>({num_enc_steps, batch, 4}, gen).requires_grad_(),
                              heed::randn<double>({2, batch, 4}, gen).requires_grad_()};
  for (auto& p : decoder.parameters()) inputs.push_back(p);
  const IndexTensor enc_valid_lens = lens({2, 4}, {2});
  const IndexTensor X = heed::randint(0, 5, {batch, 3}, gen);
  auto f = [&](const std::vector<Tensord>& in) {
    auto state = decoder.init_state(heed::GRUOutput<double>{in[0], in[1]}, enc_valid_lens);
    const Tensord logits = decoder.forward(X, state);
    return heed::cat({logits.reshape({-1}), state.hidden_state.reshape({-1})}, 0);
  };
  const auto result = heed::gradcheck(f, inputs);
  INFO(result.message);
  CHECK(result.ok);
}

// ---- decoding and determinism -------------------------------------------------------------------

TEMPLATE_TEST_CASE("Decoding one step per call equals the whole-sequence forward", "[seq2seq]", float, double) {
  using T = TestType;
  const double margin = std::is_same_v<T, float> ? 1e-5 : 1e-12;
  heed::Generator gen(5);
  // Dropout 0.1 as in d2l's training; eval() turns it off.
  const auto net = bahdanau_net<T>(9, 11, 4, 6, 2, 0.1, gen);
  net->eval();
  const index_t batch = 3, num_steps = 5;
  const IndexTensor enc_X = heed::randint(0, 9, {batch, 6}, gen);
  const IndexTensor enc_valid_lens = lens({6, 2, 4}, {3});
  const IndexTensor dec_X = heed::randint(0, 11, {batch, num_steps}, gen);
  auto& decoder = net->decoder();

  auto full_state = decoder.init_state(net->encoder().forward(enc_X, enc_valid_lens), enc_valid_lens);
  const Tensor<T> full = decoder.forward(dec_X, full_state);
  const auto full_weights = decoder.attention_weights();
  REQUIRE(full_weights.size() == static_cast<std::size_t>(num_steps));
  check_close(full, net->forward(enc_X, dec_X, enc_valid_lens), margin);

  auto state = decoder.init_state(net->encoder().forward(enc_X, enc_valid_lens), enc_valid_lens);
  std::vector<Tensor<T>> pieces;
  for (index_t t = 0; t < num_steps; ++t) {
    INFO("step " << t);
    pieces.push_back(decoder.forward(dec_X.narrow(1, t, 1), state));
    CHECK(pieces.back().shape() == Shape{batch, 1, 11});
    const auto weights = decoder.attention_weights();
    REQUIRE(weights.size() == 1);
    check_close(weights[0], full_weights[static_cast<std::size_t>(t)], margin);
  }
  check_close(heed::cat(pieces, 1), full, margin);
  check_close(state.hidden_state, full_state.hidden_state, margin);
}

TEST_CASE("The generator seed decides the initial parameters and so the outputs", "[seq2seq]") {
  heed::Generator gen_a(42), gen_b(42), gen_c(43);
  const auto a = bahdanau_net<float>(9, 11, 4, 6, 2, 0.0, gen_a);
  const auto b = bahdanau_net<float>(9, 11, 4, 6, 2, 0.0, gen_b);
  const auto c = bahdanau_net<float>(9, 11, 4, 6, 2, 0.0, gen_c);
  const auto pa = a->parameters(), pb = b->parameters(), pc = c->parameters();
  REQUIRE(pa.size() == pb.size());
  bool any_differs = false;
  for (std::size_t i = 0; i < pa.size(); ++i) {
    check_close(pa[i], pb[i], 0.0);
    any_differs = any_differs || pa[i].to_vector() != pc[i].to_vector();
  }
  CHECK(any_differs);

  heed::Generator gen(1);
  const IndexTensor enc_X = heed::randint(0, 9, {2, 4}, gen), dec_X = heed::randint(0, 11, {2, 3}, gen);
  const IndexTensor valid_lens = lens({4, 3}, {2});
  check_close(a->forward(enc_X, dec_X, valid_lens), b->forward(enc_X, dec_X, valid_lens), 0.0);

  heed::Generator g1(3), g2(3);
  heed::GRU<double> gru1(3, 4, 2, 0.0, g1), gru2(3, 4, 2, 0.0, g2);
  const Tensord x = heed::randn<double>({2, 1, 3}, gen);
  check_close(gru1.forward(x).outputs, gru2.forward(x).outputs, 0.0);
}
