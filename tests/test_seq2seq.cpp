// Tests of the GRU and of the sequence-to-sequence models (d2l 9.6-9.7 and 10.4): d2l's
// listings, parameter names, golden values from torch.nn.GRU and d2l's PyTorch code
// (tests/data/make_seq2seq_golden.py), the generic EncoderDecoder with the Transformer,
// gradients against finite differences, step-by-step decoding against the
// whole-sequence pass, determinism and the errors of bad inputs.
#include <heed/nn/gru.hpp>
#include <heed/seq2seq/alignment.hpp>
#include <heed/seq2seq/bahdanau_decoder.hpp>
#include <heed/seq2seq/corpus.hpp>
#include <heed/seq2seq/encoder_decoder.hpp>
#include <heed/seq2seq/gru_encoder.hpp>
#include <heed/seq2seq/loss.hpp>
#include <heed/seq2seq/predict.hpp>
#include <heed/seq2seq/train.hpp>
#include <heed/transformer/decoder.hpp>
#include <heed/transformer/encoder.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "check.hpp"
#include "golden.hpp"

using heed::index_t;
using heed::IndexTensor;
using heed::Shape;
using heed::Tensor;
using heed::Tensord;
using heed::Tensorf;
using heed_test::check_close;
using heed_test::leaf;
using heed_test::lens;
using heed_test::tolerance;

namespace {

const heed_test::Golden& golden() {
  static const heed_test::Golden g("seq2seq_golden.txt");
  return g;
}

using Names = std::vector<std::string>;

Names prefixed(const std::string& prefix, const Names& names) {
  Names result;
  for (const auto& name : names) result.push_back(prefix + name);
  return result;
}

Names concat(Names a, const Names& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// torch.nn.GRU's parameters of a 2-layer GRU, in state_dict() order.
const Names kGRUNames = {"weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0",
                         "weight_ih_l1", "weight_hh_l1", "bias_ih_l1", "bias_hh_l1"};
// d2l's Seq2SeqEncoder and Seq2SeqAttentionDecoder (2 layers), in state_dict() order.
const Names kEncoderNames = concat({"embedding.weight"}, prefixed("rnn.", kGRUNames));
const Names kDecoderNames =
    concat(concat({"attention.W_k.weight", "attention.W_q.weight", "attention.w_v.weight", "embedding.weight"},
                  prefixed("rnn.", kGRUNames)),
           {"dense.weight", "dense.bias"});

template <typename T>
Names parameter_names(const heed::Module<T>& module) {
  Names names;
  for (const auto& [name, p] : module.named_parameters()) names.push_back(name);
  return names;
}

/// Every parameter's gradient equals the golden `<grad_prefix>.<name>`.
template <typename T>
void check_grads(const heed::Module<T>& module, const std::string& grad_prefix) {
  for (const auto& [name, p] : module.named_parameters()) {
    INFO("gradient of " << name);
    check_close(p.grad(), golden().tensor<T>(grad_prefix + "." + name), tolerance<T>());
  }
}

/// The loss of the gru cases: sum(outputs * R1) + sum(final state * R2).
template <typename T>
Tensor<T> projected(const heed::GRUOutput<T>& out, const std::string& c) {
  return (out.outputs * golden().tensor<T>(c + ".R1")).sum() + (out.state * golden().tensor<T>(c + ".R2")).sum();
}

template <typename T>
using BahdanauNet = heed::EncoderDecoder<T, heed::Seq2SeqEncoder<T>, heed::Seq2SeqAttentionDecoder<T>>;

template <typename T>
using TransformerNet = heed::EncoderDecoder<T, heed::TransformerEncoder<T>, heed::TransformerDecoder<T>>;

template <typename T>
std::unique_ptr<BahdanauNet<T>> bahdanau_net(index_t src_vocab, index_t tgt_vocab, index_t embed_size,
                                             index_t num_hiddens, index_t num_layers, double dropout,
                                             heed::Generator& gen) {
  return std::make_unique<BahdanauNet<T>>(
      std::make_unique<heed::Seq2SeqEncoder<T>>(src_vocab, embed_size, num_hiddens, num_layers, dropout, gen),
      std::make_unique<heed::Seq2SeqAttentionDecoder<T>>(tgt_vocab, embed_size, num_hiddens, num_layers, dropout, gen));
}

}  // namespace

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

TEMPLATE_TEST_CASE("GRU matches torch.nn.GRU", "[gru][golden]", float, double) {
  using T = TestType;
  heed::GRU<T> gru(/*input_size=*/5, /*num_hiddens=*/6, /*num_layers=*/2);
  heed_test::load_parameters(golden(), gru, "gru");
  SECTION("with an initial state") {
    Tensor<T> inputs = leaf<T>(golden(), "gru.inputs"), state = leaf<T>(golden(), "gru.state");
    const heed::GRUOutput<T> out = gru.forward(inputs, state);
    check_close(out.outputs, golden().tensor<T>("gru.outputs"), tolerance<T>());
    check_close(out.state, golden().tensor<T>("gru.final_state"), tolerance<T>());
    projected(out, "gru").backward();
    check_close(inputs.grad(), golden().tensor<T>("gru.grad.inputs"), tolerance<T>());
    check_close(state.grad(), golden().tensor<T>("gru.grad.state"), tolerance<T>());
    check_grads(gru, "gru.grad");
  }
  SECTION("without one: zeros") {
    Tensor<T> inputs = leaf<T>(golden(), "gru0.inputs");
    const heed::GRUOutput<T> out = gru.forward(inputs);
    check_close(out.outputs, golden().tensor<T>("gru0.outputs"), tolerance<T>());
    check_close(out.state, golden().tensor<T>("gru0.final_state"), tolerance<T>());
    projected(out, "gru0").backward();
    check_close(inputs.grad(), golden().tensor<T>("gru0.grad.inputs"), tolerance<T>());
    // An explicit zero state gives the very same numbers.
    const heed::GRUOutput<T> zero = gru.forward(inputs.detach(), heed::zeros<T>({2, 3, 6}));
    check_close(zero.outputs, out.outputs, 0.0);
    check_close(zero.state, out.state, 0.0);
  }
}

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

TEST_CASE("GRU gradients match finite differences", "[gru][gradcheck]") {
  heed::Generator gen(7);
  for (index_t num_layers : {1, 2}) {
    INFO(num_layers << " layer(s)");
    heed::GRU<double> gru(3, 4, num_layers, 0.0, gen);
    std::vector<Tensord> inputs{heed::randn<double>({3, 2, 3}, gen).requires_grad_(),
                                heed::randn<double>({num_layers, 2, 4}, gen).requires_grad_()};
    for (auto& p : gru.parameters()) inputs.push_back(p);
    // Both outputs in one vector, so that the check covers the final state's gradient.
    auto f = [&](const std::vector<Tensord>& in) {
      const heed::GRUOutput<double> out = gru.forward(in[0], in[1]);
      return heed::cat({out.outputs.reshape({-1}), out.state.reshape({-1})}, 0);
    };
    const auto result = heed::gradcheck(f, inputs);
    INFO(result.message);
    CHECK(result.ok);

    // Without an initial state.
    inputs.erase(inputs.begin() + 1);
    const auto zero_state =
        heed::gradcheck([&](const std::vector<Tensord>& in) { return gru.forward(in[0]).outputs; }, inputs);
    INFO(zero_state.message);
    CHECK(zero_state.ok);
  }
}

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

TEST_CASE("GRU dropout acts between layers in training mode only", "[gru]") {
  heed::Generator gen(4), same(4);
  heed::GRU<double> gru(3, 8, 2, /*dropout=*/0.5, gen);
  heed::GRU<double> plain(3, 8, 2, 0.0, same);  // the same initial parameters
  const Tensord x = heed::randn<double>({5, 2, 3}, gen);
  gru.eval();
  check_close(gru.forward(x).outputs, plain.forward(x).outputs, 0.0);
  gru.train();
  const Tensord dropped = gru.forward(x).outputs;
  CHECK((dropped - plain.forward(x).outputs).abs().max().item() > 1e-6);
}

// ---- errors -------------------------------------------------------------------------------------

TEST_CASE("GRU refuses bad arguments, naming GRU and the shapes", "[gru]") {
  heed::GRU<float> gru(5, 6, 2);
  CHECK_ERROR(heed::ShapeError, "GRU", gru.forward(heed::zeros<float>({3, 5})));
  CHECK_ERROR(heed::ShapeError, "(3, 5)", gru.forward(heed::zeros<float>({3, 5})));
  CHECK_ERROR(heed::ShapeError, "GRU", gru.forward(heed::zeros<float>({4, 3, 7})));
  CHECK_ERROR(heed::ShapeError, "(4, 3, 7)", gru.forward(heed::zeros<float>({4, 3, 7})));
  const Tensorf inputs = heed::zeros<float>({4, 3, 5});
  for (const Shape& bad : {Shape{1, 3, 6}, Shape{2, 2, 6}, Shape{2, 3, 5}, Shape{3, 6}}) {
    INFO("state " << heed::to_string(bad));
    CHECK_ERROR(heed::ShapeError, "GRU", gru.forward(inputs, heed::zeros<float>(bad)));
    CHECK_ERROR(heed::ShapeError, heed::to_string(bad), gru.forward(inputs, heed::zeros<float>(bad)));
  }
  CHECK_THROWS_AS(heed::GRU<float>(0, 6), heed::ValueError);
  CHECK_THROWS_AS(heed::GRU<float>(5, 0), heed::ValueError);
  CHECK_THROWS_AS(heed::GRU<float>(5, 6, 0), heed::ValueError);
}

// ---- training, prediction, alignments ------------------------------------------------------------

namespace {

/// The first pairs of the built-in corpus, as d2l's loader gives them.
heed::NmtData small_corpus(index_t num_examples) {
  return heed::load_data_nmt_text(heed::builtin_fra_eng(), /*batch_size=*/16, /*num_steps=*/10,
                                  static_cast<std::size_t>(num_examples), /*seed=*/3);
}

template <typename T>
std::unique_ptr<TransformerNet<T>> transformer_net(index_t src_vocab, index_t tgt_vocab) {
  return std::make_unique<TransformerNet<T>>(
      std::make_unique<heed::TransformerEncoder<T>>(src_vocab, 16, 16, 16, 16, Shape{16}, 16, 32, 4, 2, 0.0),
      std::make_unique<heed::TransformerDecoder<T>>(tgt_vocab, 16, 16, 16, 16, Shape{16}, 16, 32, 4, 2, 0.0));
}

/// Σ log P of `tokens` (then <eos> when `ended`), fed to the decoder one by one: what a
/// hypothesis's log_prob must be.
template <typename T, typename Net>
double teacher_forced_log_prob(Net& net, const std::string& sentence, const std::vector<index_t>& tokens, bool ended,
                               const heed::Vocab& src_vocab, const heed::Vocab& tgt_vocab) {
  heed::NoGradGuard no_grad;
  std::vector<std::string> words = heed::detail::split(sentence, ' ');
  words.push_back("<eos>");
  std::vector<index_t> ids = src_vocab[words];
  const index_t valid = static_cast<index_t>(ids.size());
  ids = heed::truncate_pad(ids, 10, src_vocab["<pad>"]);
  const IndexTensor enc_X = IndexTensor(ids, Shape{1, 10}), enc_valid_len = IndexTensor({valid}, Shape{1});
  auto state = net.decoder().init_state(net.encoder()(enc_X, enc_valid_len), enc_valid_len);
  std::vector<index_t> inputs = {tgt_vocab["<bos>"]};
  inputs.insert(inputs.end(), tokens.begin(), tokens.end());
  std::vector<index_t> targets = tokens;
  if (ended) targets.push_back(tgt_vocab["<eos>"]);
  double total = 0;
  for (std::size_t t = 0; t < targets.size(); ++t) {
    const Tensor<T> log_probs = heed::log_softmax(net.decoder()(IndexTensor({inputs[t]}, Shape{1, 1}), state), -1);
    total += static_cast<double>(log_probs.data()[targets[t]]);
  }
  return total;
}

}  // namespace

TEST_CASE("train_seq2seq lowers the loss and reports every epoch", "[seq2seq][train]") {
  heed::NmtData data = small_corpus(60);
  heed::Generator gen(5);
  auto net = bahdanau_net<float>(data.src_vocab.size(), data.tgt_vocab.size(), 16, 16, 1, 0.0, gen);
  const auto dir =
      std::filesystem::temp_directory_path() / ("heed_train_" + std::to_string(reinterpret_cast<std::uintptr_t>(&gen)));
  std::filesystem::create_directories(dir);
  heed::TrainOptions options;
  options.progress = false;
  options.generator = &gen;
  options.loss_csv = (dir / "loss.csv").string();
  options.loss_svg = (dir / "loss.svg").string();
  std::vector<index_t> epochs_seen;
  options.on_epoch = [&](const heed::EpochStats& stats) { epochs_seen.push_back(stats.epoch); };
  const heed::TrainResult result = heed::train_seq2seq<float>(*net, data.data_iter, 0.01, 15, data.tgt_vocab, options);

  REQUIRE(result.losses.size() == 15);
  CHECK(result.losses.back() < 0.5 * result.losses.front());
  CHECK(epochs_seen == std::vector<index_t>{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15});
  index_t tokens_per_epoch = 0;
  for (const auto& batch : data.data_iter) tokens_per_epoch += batch.Y_valid_len.sum().item();
  CHECK(result.tokens == 15 * tokens_per_epoch);
  CHECK(result.tokens_per_second > 0);

  std::ifstream csv(options.loss_csv);
  std::string line;
  std::getline(csv, line);
  CHECK(line == "epoch,loss,tokens_per_second");
  index_t rows = 0;
  while (std::getline(csv, line)) ++rows;
  CHECK(rows == 15);
  std::ifstream svg(options.loss_svg);
  const std::string picture((std::istreambuf_iterator<char>(svg)), std::istreambuf_iterator<char>());
  CHECK(picture.find("<svg") != std::string::npos);
  std::filesystem::remove_all(dir);

  CHECK_ERROR(heed::ValueError, "train_seq2seq: lr must be positive, got 0",
              heed::train_seq2seq<float>(*net, data.data_iter, 0.0, 1, data.tgt_vocab, options));
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
  options.progress = false;
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

TEST_CASE("Training gives the same bits on 1, 2 and 3 threads at sizes past every threading threshold",
          "[seq2seq][train][threads]") {
#ifndef _OPENMP
  WARN("built without OpenMP: one thread only, nothing to compare");
#else
  // Batches of 64 sentences and 256 hidden units: the attention, FFN and vocabulary
  // products all exceed heed's threaded-GEMM threshold, and the elementwise, softmax
  // and layer_norm passes its parallel grain; dropout is on.
  heed::NmtData data = heed::load_data_nmt_text(heed::builtin_fra_eng(), 64, 10, 127, 3);
  for (const heed::NmtBatch& batch : data.data_iter)  // each batch keeps steps enough after its padding is cut
    REQUIRE(64 * batch.X_valid_len.max().item() * 256 * 256 >= heed::detail::kParallelGemmWork);
  const auto train_with = [&](int threads) {
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
    options.progress = false;
    options.generator = &gen;
    heed::manual_seed(8);  // dropout's generator
    auto loader = data.data_iter;
    const heed::TrainResult result = heed::train_seq2seq<float>(net, loader, 0.005, 1, data.tgt_vocab, options);
    omp_set_num_threads(saved);
    std::vector<float> values(result.losses.begin(), result.losses.end());
    for (const auto& [name, p] : net.named_parameters()) values.insert(values.end(), p.data(), p.data() + p.numel());
    return values;
  };
  const std::vector<float> one = train_with(1);
  REQUIRE(one.size() > 1'000'000);
  for (int threads : {2, 3}) {
    INFO(threads << " threads");
    const std::vector<float> many = train_with(threads);
    REQUIRE(many.size() == one.size());
    std::size_t differ = 0;
    for (std::size_t i = 0; i < one.size(); ++i) differ += std::memcmp(&one[i], &many[i], sizeof(float)) != 0;
    CHECK(differ == 0);
  }
#endif
}

TEMPLATE_TEST_CASE("predict_seq2seq decodes greedily, in batches, and with beam search", "[seq2seq][predict]",
                   BahdanauNet<float>, TransformerNet<float>) {
  using Net = TestType;
  heed::NmtData data = small_corpus(80);
  heed::Generator gen(11);
  std::unique_ptr<Net> net;
  if constexpr (std::is_same_v<Net, BahdanauNet<float>>)
    net = bahdanau_net<float>(data.src_vocab.size(), data.tgt_vocab.size(), 16, 16, 2, 0.0, gen);
  else
    net = transformer_net<float>(data.src_vocab.size(), data.tgt_vocab.size());
  heed::TrainOptions options;
  options.progress = false;
  options.generator = &gen;
  heed::train_seq2seq<float>(*net, data.data_iter, 0.01, 5, data.tgt_vocab, options);
  const std::vector<std::string> sentences = {"go .", "i'm home .", "he's calm .", "we are not tired at all ."};

  // Greedy: each step's token is the argmax, its log-probability what the decoder gives.
  const auto greedy = heed::predict_seq2seq<float>(*net, sentences, data.src_vocab, data.tgt_vocab, 10);
  REQUIRE(greedy.size() == sentences.size());
  for (std::size_t i = 0; i < sentences.size(); ++i) {
    INFO(sentences[i] << " => " << greedy[i].text);
    const auto& t = greedy[i];
    const bool ended = static_cast<index_t>(t.tokens.size()) < 10;
    CHECK(t.log_prob ==
          Approx(teacher_forced_log_prob<float>(*net, sentences[i], t.tokens, ended, data.src_vocab, data.tgt_vocab))
              .epsilon(1e-4));
    // The same sentence alone decodes the same way: batching sentences of different
    // lengths changes nothing.
    const auto alone = heed::predict_seq2seq<float>(*net, sentences[i], data.src_vocab, data.tgt_vocab, 10);
    CHECK(alone.tokens == t.tokens);
    CHECK(alone.text == t.text);
    CHECK(alone.log_prob == Approx(t.log_prob).epsilon(1e-4));
    // Attention of every output step over the sentence's valid source steps.
    const index_t out_steps = static_cast<index_t>(t.tokens.size()) + (ended ? 1 : 0);
    const index_t src_steps = std::min<index_t>(static_cast<index_t>(t.source_tokens.size()), 10);
    REQUIRE(t.cross_attention.defined());
    CHECK(t.cross_attention.shape()[2] == out_steps);
    CHECK(t.cross_attention.shape()[3] == src_steps);
    const Tensorf row_sums = t.cross_attention.sum(3);
    for (index_t j = 0; j < row_sums.numel(); ++j) CHECK(row_sums.data()[j] == Approx(1.0f).epsilon(1e-5));
    if constexpr (std::is_same_v<Net, TransformerNet<float>>) {
      CHECK(t.cross_attention.shape() == (Shape{2, 4, out_steps, src_steps}));
      CHECK(t.self_attention.shape() == (Shape{2, 4, out_steps, out_steps}));
      CHECK(t.encoder_attention.shape() == (Shape{2, 4, src_steps, src_steps}));
      CHECK(t.self_attention.at({0, 0, 0, out_steps - 1}) == 0.0f);  // causal: the first step sees itself only
    } else {
      CHECK(t.cross_attention.shape() == (Shape{1, 1, out_steps, src_steps}));
      CHECK_FALSE(t.self_attention.defined());
      CHECK_FALSE(t.encoder_attention.defined());
    }
  }

  // Beam search: n_best hypotheses, best first by log P / L^α, each log P being what the
  // decoder gives its tokens; a beam of 1 is greedy decoding.
  heed::PredictOptions beam;
  beam.beam_size = 4;
  beam.n_best = 3;
  const auto beams = heed::predict_seq2seq<float>(*net, sentences, data.src_vocab, data.tgt_vocab, 10, beam);
  for (std::size_t i = 0; i < sentences.size(); ++i) {
    INFO(sentences[i]);
    REQUIRE(beams[i].n_best.size() == 3);
    CHECK(beams[i].text == beams[i].n_best[0].text);
    for (std::size_t k = 0; k < 3; ++k) {
      const auto& h = beams[i].n_best[k];
      if (k > 0) CHECK(h.score <= beams[i].n_best[k - 1].score);
      const bool ended = static_cast<index_t>(h.tokens.size()) < 10;
      CHECK(h.log_prob ==
            Approx(teacher_forced_log_prob<float>(*net, sentences[i], h.tokens, ended, data.src_vocab, data.tgt_vocab))
                .epsilon(1e-4));
      const double length = static_cast<double>(h.tokens.size() + (ended ? 1 : 0));
      CHECK(h.score == Approx(h.log_prob / std::pow(length, 0.75)).epsilon(1e-6));
    }
  }
  // A wide beam, where hypotheses end while others live on: every n-best entry is
  // still a real hypothesis with its own log P.
  heed::PredictOptions wide;
  wide.beam_size = 8;
  wide.n_best = 8;
  const auto wide_beams = heed::predict_seq2seq<float>(*net, sentences, data.src_vocab, data.tgt_vocab, 10, wide);
  for (std::size_t i = 0; i < sentences.size(); ++i)
    for (const auto& h : wide_beams[i].n_best) {
      INFO(sentences[i] << " => " << h.text);
      const bool ended = static_cast<index_t>(h.tokens.size()) < 10;
      CHECK(h.log_prob ==
            Approx(teacher_forced_log_prob<float>(*net, sentences[i], h.tokens, ended, data.src_vocab, data.tgt_vocab))
                .epsilon(1e-4));
    }
  heed::PredictOptions one;
  one.beam_size = 1;
  const auto beam_one = heed::predict_seq2seq<float>(*net, sentences, data.src_vocab, data.tgt_vocab, 10, one);
  for (std::size_t i = 0; i < sentences.size(); ++i) CHECK(beam_one[i].tokens == greedy[i].tokens);

  heed::PredictOptions bad;
  bad.n_best = 2;
  CHECK_ERROR(heed::ValueError, "predict_seq2seq: need 1 <= n_best <= beam_size, got n_best = 2, beam_size = 1",
              heed::predict_seq2seq<float>(*net, sentences, data.src_vocab, data.tgt_vocab, 10, bad));
  CHECK_ERROR(heed::ValueError, "predict_seq2seq: num_steps must be positive, got 0",
              heed::predict_seq2seq<float>(*net, sentences, data.src_vocab, data.tgt_vocab, 0));
}

TEST_CASE("Word alignments are the argmax of the encoder-decoder attention", "[seq2seq][alignment]") {
  // (1 layer, 2 heads, 3 target steps, 4 source steps)
  const Tensorf weights({0.7f, 0.1f, 0.1f, 0.1f, 0.1f, 0.6f, 0.2f, 0.1f, 0.0f, 0.0f, 0.1f, 0.9f,   // head 0
                         0.1f, 0.7f, 0.1f, 0.1f, 0.1f, 0.1f, 0.1f, 0.7f, 0.0f, 0.0f, 0.9f, 0.1f},  // head 1
                        Shape{1, 2, 3, 4});
  const heed::Alignment head0 = heed::align(weights, 0, 0, false);
  CHECK(head0 == heed::Alignment{{0, 0}, {1, 1}, {3, 2}});
  CHECK(heed::pharaoh(head0) == "0-0 1-1 3-2");
  CHECK(heed::pharaoh(heed::align(weights, 0, -1, false)) == "1-0 3-1 2-2");
  // Mean of the heads: step 0 (0.4, 0.4, 0.1, 0.1) and step 2 (0, 0, 0.5, 0.5) tie, the
  // first wins; step 1 (0.1, 0.35, 0.15, 0.4).
  CHECK(heed::pharaoh(heed::align(weights)) == "0-0 3-1 2-2");
  CHECK(heed::alignment_table({"he's", "calm", ".", "<eos>"}, {"il", "est", "calme"}, head0) ==
        "il → he's\nest → calm\ncalme → <eos>\n");
  CHECK_ERROR(heed::IndexError, "align: layer 1 and head 0 out of range for 1 layers and 2 heads",
              heed::align(weights, 1, 0, false));
  CHECK_ERROR(heed::ShapeError, "align: cross_attention must be (num_layers, num_heads, target steps, source steps)",
              heed::align(heed::zeros<float>({3, 4})));
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
