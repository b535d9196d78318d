// Tests of multi-head attention, positional encoding and the Transformer blocks (d2l
// 10.5–10.7): d2l's listings, golden values from d2l's PyTorch code
// (tests/data/make_transformer_golden.py), incremental decoding against the full
// causal pass, grouped-query attention, pre-LayerNorm, gradients against finite
// differences and the errors of bad inputs.
#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "check.hpp"
#include "golden.hpp"

using Catch::Matchers::Contains;
using heed::AttentionMask;
using heed::index_t;
using heed::IndexTensor;
using heed::Shape;
using heed::Tensor;
using heed::Tensord;
using heed::Tensorf;
using heed::TransformerOptions;
using heed_test::check_close;
using heed_test::check_parameter_grads;
using heed_test::leaf;
using heed_test::lens;
using heed_test::tolerance;

namespace {

const heed_test::Golden& golden() {
  static const heed_test::Golden g("transformer_golden.txt");
  return g;
}

/// Copies the golden parameters `<prefix>.<name>` into the module, after checking that
/// the module has exactly d2l's state_dict() names.
template <typename T>
void load_d2l_parameters(heed::Module<T>& module, const std::string& prefix) {
  std::set<std::string> expected, actual;
  for (const auto& name : golden().names()) {
    const std::string head = prefix + ".";
    if (name.rfind(head, 0) != 0 || name.rfind(head + "grad.", 0) == 0) continue;
    const std::string rest = name.substr(head.size());
    // Parameters have dotted names and a gradient; inputs have neither a dot nor both.
    if (rest.find('.') != std::string::npos && golden().has(head + "grad." + rest)) expected.insert(rest);
  }
  for (auto& [name, p] : module.named_parameters()) actual.insert(name);
  CHECK(actual == expected);
  heed_test::load_parameters(golden(), module, prefix);
}

/// d2l builds P in float32 whatever the model's dtype; the double tests use its table
/// so that 1e-10 compares the model, not two roundings of sin and cos.
template <typename T>
void use_d2l_table(heed::PositionalEncoding<T>& pos_encoding) {
  const Tensor<T> P = golden().tensor<T>("pos.P");
  std::copy_n(P.data(), P.numel(), pos_encoding.P.data());
}

template <typename T>
Tensor<T> random(const Shape& shape, heed::Generator& gen) {
  return heed::randn<T>(shape, gen);
}

/// Small sizes shared by the gradient checks and the decoding tests.
constexpr index_t kVocab = 7, kHiddens = 8, kFfn = 12, kHeads = 2;

template <typename T>
heed::TransformerDecoder<T> small_decoder(index_t num_layers, const TransformerOptions& options = {}) {
  return heed::TransformerDecoder<T>(kVocab, kHiddens, kHiddens, kHiddens, kHiddens, {kHiddens}, kHiddens, kFfn, kHeads,
                                     num_layers, 0.0, options);
}

}  // namespace

// ---- d2l's listings ---------------------------------------------------------------------------

TEST_CASE("The shapes of d2l's 10.5-10.7 listings", "[transformer]") {
  const IndexTensor valid_lens = lens({3, 2}, {2});
  SECTION("multi-head attention") {
    heed::MultiHeadAttention<float> attention(100, 100, 100, 100, 5, 0.5);
    attention.eval();
    const Tensorf X = heed::ones<float>({2, 4, 100}), Y = heed::ones<float>({2, 6, 100});
    CHECK(attention(X, Y, Y, valid_lens).shape() == Shape{2, 4, 100});
    CHECK(attention.attention_weights().shape() == Shape{2, 5, 4, 6});
    CHECK(attention(X, X, X, valid_lens).shape() == Shape{2, 4, 100});
  }
  SECTION("AddNorm") {
    heed::AddNorm<float> add_norm({3, 4}, 0.5);
    add_norm.eval();
    CHECK(add_norm(heed::ones<float>({2, 3, 4}), heed::ones<float>({2, 3, 4})).shape() == Shape{2, 3, 4});
  }
  SECTION("encoder and decoder blocks, encoder") {
    const Tensorf X = heed::ones<float>({2, 100, 24});
    heed::EncoderBlock<float> encoder_blk(24, 24, 24, 24, {100, 24}, 24, 48, 8, 0.5);
    encoder_blk.eval();
    CHECK(encoder_blk(X, valid_lens).shape() == Shape{2, 100, 24});
    heed::TransformerEncoder<float> encoder(200, 24, 24, 24, 24, {100, 24}, 24, 48, 8, 2, 0.5);
    encoder.eval();
    CHECK(encoder(heed::ones<std::int64_t>({2, 100}), valid_lens).shape() == Shape{2, 100, 24});
    REQUIRE(encoder.attention_weights().size() == 2);
    CHECK(encoder.attention_weights()[1].shape() == Shape{2, 8, 100, 100});
    heed::DecoderBlock<float> decoder_blk(24, 24, 24, 24, {100, 24}, 24, 48, 8, 0.5, 0);
    decoder_blk.eval();
    heed::TransformerDecoderState<float> state;
    state.enc_outputs = encoder_blk(X, valid_lens);
    state.enc_valid_lens = valid_lens;
    CHECK(decoder_blk(X, state).shape() == Shape{2, 100, 24});
    CHECK(state.key_values.at(0).num_steps() == 100);
  }
}

TEST_CASE("transpose_qkv and transpose_output follow d2l's layout", "[transformer]") {
  const Tensorf X = heed::arange<float>(0, 2 * 3 * 6).reshape({2, 3, 6});
  const Tensorf heads = heed::transpose_qkv(X, 2);
  REQUIRE(heads.shape() == Shape{4, 3, 3});
  // (batch·num_heads + head, step, j) holds X[batch, step, head·head_dim + j]
  for (index_t b = 0; b < 2; ++b)
    for (index_t h = 0; h < 2; ++h)
      for (index_t l = 0; l < 3; ++l)
        for (index_t j = 0; j < 3; ++j)
          CHECK(heads.data()[((b * 2 + h) * 3 + l) * 3 + j] == X.data()[(b * 3 + l) * 6 + h * 3 + j]);
  check_close(heed::transpose_output(heads, 2), X, 0.0);
  CHECK_ERROR(heed::ShapeError, "divisible by num_heads = 4", heed::transpose_qkv(X, 4));
  CHECK_ERROR(heed::ShapeError, "transpose_output", heed::transpose_output(heads, 3));
}

// ---- golden values from d2l's code -----------------------------------------------------------

TEMPLATE_TEST_CASE("MultiHeadAttention matches d2l", "[transformer][golden]", float, double) {
  using T = TestType;
  for (const std::string c : {"mha", "mha_bias"}) {
    heed::MultiHeadAttention<T> attention(5, 3, 4, 8, 2, 0.0, c == "mha_bias");
    load_d2l_parameters(attention, c);
    heed_test::check_golden_attention<T>(golden(), attention, c);
  }
}

TEMPLATE_TEST_CASE("PositionalEncoding, PositionWiseFFN and AddNorm match d2l", "[transformer][golden]", float,
                   double) {
  using T = TestType;
  SECTION("positional encoding") {
    heed::PositionalEncoding<T> pos_encoding(8, 0.0, 20);
    // heed's table is computed in double, d2l's in float32.
    check_close(pos_encoding.P, golden().tensor<T>("pos.P"), 1e-6);
    use_d2l_table(pos_encoding);
    Tensor<T> X = leaf<T>(golden(), "pos.X");
    const Tensor<T> out = pos_encoding(X);
    check_close(out, golden().tensor<T>("pos.output"), tolerance<T>());
    out.backward(golden().tensor<T>("pos.R"));
    check_close(X.grad(), golden().tensor<T>("pos.grad.X"), tolerance<T>());
  }
  SECTION("position-wise FFN") {
    heed::PositionWiseFFN<T> ffn(8, 16, 8);
    load_d2l_parameters(ffn, "ffn");
    Tensor<T> X = leaf<T>(golden(), "ffn.X");
    const Tensor<T> out = ffn(X);
    check_close(out, golden().tensor<T>("ffn.output"), tolerance<T>());
    out.backward(golden().tensor<T>("ffn.R"));
    check_close(X.grad(), golden().tensor<T>("ffn.grad.X"), tolerance<T>());
    check_parameter_grads(golden(), ffn, "ffn");
  }
  SECTION("AddNorm over two dims") {
    heed::AddNorm<T> add_norm({3, 4}, 0.0);
    load_d2l_parameters(add_norm, "addnorm");
    Tensor<T> X = leaf<T>(golden(), "addnorm.X"), Y = leaf<T>(golden(), "addnorm.Y");
    const Tensor<T> out = add_norm(X, Y);
    check_close(out, golden().tensor<T>("addnorm.output"), tolerance<T>());
    out.backward(golden().tensor<T>("addnorm.R"));
    check_close(X.grad(), golden().tensor<T>("addnorm.grad.X"), tolerance<T>());
    check_close(Y.grad(), golden().tensor<T>("addnorm.grad.Y"), tolerance<T>());
    check_parameter_grads(golden(), add_norm, "addnorm");
  }
}

TEMPLATE_TEST_CASE("EncoderBlock and TransformerEncoder match d2l", "[transformer][golden]", float, double) {
  using T = TestType;
  SECTION("encoder block") {
    heed::EncoderBlock<T> blk(8, 8, 8, 8, {8}, 8, 16, 2, 0.0);
    blk.eval();
    load_d2l_parameters(blk, "enc_blk");
    Tensor<T> X = leaf<T>(golden(), "enc_blk.X");
    const Tensor<T> out = blk(X, golden().tensor<std::int64_t>("enc_blk.valid_lens"));
    check_close(out, golden().tensor<T>("enc_blk.output"), tolerance<T>());
    check_close(blk.attention.attention_weights(), golden().tensor<T>("enc_blk.attention_weights"), tolerance<T>());
    out.backward(golden().tensor<T>("enc_blk.R"));
    check_close(X.grad(), golden().tensor<T>("enc_blk.grad.X"), tolerance<T>());
    check_parameter_grads(golden(), blk, "enc_blk");
  }
  SECTION("encoder") {
    heed::TransformerEncoder<T> encoder(11, 8, 8, 8, 8, {8}, 8, 16, 2, 2, 0.0);
    encoder.eval();
    load_d2l_parameters(encoder, "encoder");
    use_d2l_table(encoder.pos_encoding);
    const Tensor<T> out =
        encoder(golden().tensor<std::int64_t>("encoder.tokens"), golden().tensor<std::int64_t>("encoder.valid_lens"));
    check_close(out, golden().tensor<T>("encoder.output"), tolerance<T>());
    for (std::size_t i = 0; i < 2; ++i) {
      INFO("layer " << i);
      check_close(encoder.attention_weights()[i], golden().tensor<T>("encoder.attention_weights." + std::to_string(i)),
                  tolerance<T>());
    }
    out.backward(golden().tensor<T>("encoder.R"));
    check_parameter_grads(golden(), encoder, "encoder");
  }
}

TEMPLATE_TEST_CASE("DecoderBlock and TransformerDecoder match d2l in training mode", "[transformer][golden]", float,
                   double) {
  using T = TestType;
  SECTION("decoder block") {
    heed::DecoderBlock<T> blk(8, 8, 8, 8, {8}, 8, 16, 2, 0.0, 0);
    load_d2l_parameters(blk, "dec_blk");
    Tensor<T> X = leaf<T>(golden(), "dec_blk.X"), enc_outputs = leaf<T>(golden(), "dec_blk.enc_outputs");
    heed::TransformerDecoderState<T> state;
    state.enc_outputs = enc_outputs;
    state.enc_valid_lens = golden().tensor<std::int64_t>("dec_blk.enc_valid_lens");
    const Tensor<T> out = blk(X, state);
    check_close(out, golden().tensor<T>("dec_blk.output"), tolerance<T>());
    check_close(blk.attention1.attention_weights(), golden().tensor<T>("dec_blk.self_attention_weights"),
                tolerance<T>());
    check_close(blk.attention2.attention_weights(), golden().tensor<T>("dec_blk.cross_attention_weights"),
                tolerance<T>());
    out.backward(golden().tensor<T>("dec_blk.R"));
    check_close(X.grad(), golden().tensor<T>("dec_blk.grad.X"), tolerance<T>());
    check_close(enc_outputs.grad(), golden().tensor<T>("dec_blk.grad.enc_outputs"), tolerance<T>());
    check_parameter_grads(golden(), blk, "dec_blk");
  }
  SECTION("decoder") {
    heed::TransformerDecoder<T> decoder(13, 8, 8, 8, 8, {8}, 8, 16, 2, 2, 0.0);
    load_d2l_parameters(decoder, "decoder");
    use_d2l_table(decoder.pos_encoding);
    Tensor<T> enc_outputs = leaf<T>(golden(), "decoder.enc_outputs");
    auto state = decoder.init_state(enc_outputs, golden().tensor<std::int64_t>("decoder.enc_valid_lens"));
    const Tensor<T> logits = decoder(golden().tensor<std::int64_t>("decoder.tokens"), state);
    check_close(logits, golden().tensor<T>("decoder.output"), tolerance<T>());
    for (std::size_t i = 0; i < 2; ++i) {
      INFO("layer " << i);
      const std::string layer = std::to_string(i);
      check_close(decoder.self_attention_weights()[i], golden().tensor<T>("decoder.self_attention_weights." + layer),
                  tolerance<T>());
      check_close(decoder.attention_weights()[1][i], golden().tensor<T>("decoder.cross_attention_weights." + layer),
                  tolerance<T>());
    }
    logits.backward(golden().tensor<T>("decoder.R"));
    check_close(enc_outputs.grad(), golden().tensor<T>("decoder.grad.enc_outputs"), tolerance<T>());
    check_parameter_grads(golden(), decoder, "decoder");
  }
}

// ---- positional encoding -----------------------------------------------------------------------

TEST_CASE("PositionalEncoding is d2l's sinusoid and refuses positions past max_len", "[transformer]") {
  heed::PositionalEncoding<double> pos_encoding(32, 0.0, 1000);
  REQUIRE(pos_encoding.P.shape() == Shape{1, 1000, 32});
  for (index_t i : {0, 1, 7, 59, 999})
    for (index_t j : {0, 3, 6, 15}) {
      INFO("position " << i << ", pair " << j);
      const double angle = static_cast<double>(i) / std::pow(10000.0, 2.0 * static_cast<double>(j) / 32.0);
      CHECK(pos_encoding.P.data()[i * 32 + 2 * j] == Approx(std::sin(angle)).margin(1e-12));
      CHECK(pos_encoding.P.data()[i * 32 + 2 * j + 1] == Approx(std::cos(angle)).margin(1e-12));
    }
  // The offset places X's steps further on: a step at position 7 gets row 7.
  const Tensord step = pos_encoding(heed::zeros<double>({1, 1, 32}), 7);
  check_close(step.reshape({32}), pos_encoding.P.select(1, 7).reshape({32}), 0.0);
  CHECK_ERROR(heed::ValueError, "reach past max_len = 1000", pos_encoding(heed::zeros<double>({1, 1001, 32})));
  CHECK_ERROR(heed::ValueError, "2 steps from position 999 of X (1, 2, 32) reach past max_len = 1000",
              pos_encoding(heed::zeros<double>({1, 2, 32}), 999));
  CHECK_ERROR(heed::ShapeError, "PositionalEncoding: X must be (batch, num_steps, 32)",
              pos_encoding(heed::zeros<double>({1, 2, 16})));
  // An odd width fills the last column with a sine, where d2l's code fails.
  heed::PositionalEncoding<double> odd(5, 0.0, 4);
  CHECK(odd.P.data()[3 * 5 + 4] == Approx(std::sin(3.0 / std::pow(10000.0, 4.0 / 5.0))).margin(1e-12));
}

// ---- decoding one step at a time ---------------------------------------------------------------

namespace {

/// Logits of the whole target sequence in training mode, and of the same sequence fed in
/// chunks of `chunk` tokens through the eval-mode decoder and its caches.
template <typename T>
void check_incremental_decoding(const TransformerOptions& options, index_t chunk, double margin) {
  heed::Generator gen(11);
  TransformerOptions init = options;
  init.generator = &gen;
  auto decoder = small_decoder<T>(2, init);
  const index_t batch = 2, num_steps = 6, num_enc_steps = 5;
  const Tensor<T> enc_outputs = random<T>({batch, num_enc_steps, kHiddens}, gen);
  const IndexTensor enc_valid_lens = lens({3, 5}, {2});
  const IndexTensor tokens = heed::randint(0, kVocab, {batch, num_steps}, gen);

  decoder.train();
  auto full_state = decoder.init_state(enc_outputs, enc_valid_lens);
  const Tensor<T> full = decoder(tokens, full_state);
  const auto full_self = decoder.self_attention_weights();

  decoder.eval();
  auto state = decoder.init_state(enc_outputs, enc_valid_lens);
  std::vector<Tensor<T>> pieces;
  for (index_t start = 0; start < num_steps; start += chunk) {
    const index_t n = std::min(chunk, num_steps - start);
    pieces.push_back(decoder(tokens.narrow(1, start, n), state));
    CHECK(state.num_steps == start + n);
    CHECK(state.key_values.at(1).num_steps() == start + n);
    CHECK(state.key_values.at(1).used().keys.shape() ==
          Shape{batch, decoder.blks[1].attention1.num_kv_heads(), start + n, kHiddens / kHeads});
    CHECK(state.cross_key_values.at(0).num_steps() == num_enc_steps);
  }
  check_close(heed::cat(pieces, 1), full, margin);
  // The last step's self-attention weights are the last row of the full pass's weights.
  const Tensor<T> last = decoder.self_attention_weights()[0];
  const index_t n = last.shape()[2];
  check_close(last, full_self[0].narrow(2, num_steps - n, n), margin);
}

}  // namespace

TEMPLATE_TEST_CASE("Incremental decoding equals the full causal pass", "[transformer]", float, double) {
  using T = TestType;
  const double margin = std::is_same_v<T, float> ? 1e-5 : 1e-12;
  SECTION("d2l's blocks, one token at a time") { check_incremental_decoding<T>({}, 1, margin); }
  SECTION("two and three tokens per call") {
    check_incremental_decoding<T>({}, 2, margin);
    check_incremental_decoding<T>({}, 4, margin);
  }
  SECTION("pre-LayerNorm, GELU and grouped-query attention") {
    TransformerOptions options;
    options.norm_first = true;
    options.activation = heed::Activation::gelu;
    options.num_kv_heads = 1;
    check_incremental_decoding<T>(options, 1, margin);
  }
}

TEMPLATE_TEST_CASE("A KVCache appends in place, copies on write and reorders rows without changing attention",
                   "[transformer]", float, double) {
  using T = TestType;
  heed::Generator gen(21);
  const index_t batch = 3, hiddens = 8, heads = 2;
  heed::MultiHeadAttention<T> attention(hiddens, hiddens, hiddens, hiddens, heads, 0.0, true, 0, gen);
  attention.eval();
  attention.keep_attention_weights(false);  // the fused kernel, reading the cache in place
  const heed::NoGradGuard no_grad;
  heed::KVCache<T> cache;
  std::vector<Tensor<T>> keys, values;
  bool grew_in_place = false;
  for (index_t step = 0; step < 6; ++step) {
    const Tensor<T> X = heed::randn<T>({batch, step == 2 ? index_t(2) : index_t(1), hiddens}, gen);
    const heed::KVCache<T> more = attention.project_kv(X, X);
    keys.push_back(more.keys);
    values.push_back(more.values);
    const Tensor<T> before = cache.keys;
    cache.append(more);
    grew_in_place = grew_in_place || (before.defined() && cache.keys.data() == before.data());
    const heed::KVCache<T> exact(heed::cat(keys, 2), heed::cat(values, 2));
    REQUIRE(cache.num_steps() == exact.num_steps());
    CHECK(cache.capacity() >= cache.num_steps());
    CHECK(cache.used().keys.to_vector() == exact.keys.to_vector());
    CHECK(cache.used().values.to_vector() == exact.values.to_vector());
    const Tensor<T> q = heed::randn<T>({batch, 1, hiddens}, gen);
    CHECK(attention.attend(q, cache, AttentionMask<T>::causal()).to_vector() ==
          attention.attend(q, exact, AttentionMask<T>::causal()).to_vector());
    const IndexTensor valid = lens({1, 2, 3}, {batch});
    CHECK(attention.attend(q, cache, AttentionMask<T>(valid)).to_vector() ==
          attention.attend(q, exact, AttentionMask<T>(valid)).to_vector());
  }
  CHECK(grew_in_place);
  CHECK(cache.capacity() > cache.num_steps());
  const index_t room = cache.capacity() + 5;
  cache.reserve(room);
  CHECK(cache.capacity() == room);
  const T* reserved = cache.keys.data();

  // A copy shares the tensors until one appends: neither sees the other's steps.
  heed::KVCache<T> copy = cache;
  const std::vector<T> kept = cache.used().keys.to_vector();
  const Tensor<T> X = heed::randn<T>({batch, 1, hiddens}, gen);
  copy.append(attention.project_kv(X, X));
  cache.append(attention.project_kv(X * T(2), X * T(2)));
  // The copy appended first, to tensors of its own; the cache, alone again, in place.
  CHECK(copy.keys.data() != reserved);
  CHECK(cache.keys.data() == reserved);
  CHECK(copy.num_steps() == cache.num_steps());
  CHECK(copy.used().keys.narrow(2, 0, copy.num_steps() - 1).to_vector() == kept);
  CHECK(cache.used().keys.narrow(2, 0, cache.num_steps() - 1).to_vector() == kept);
  CHECK(copy.used().keys.to_vector() != cache.used().keys.to_vector());

  // Beam search's reorder: rows picked, repeated, dropped.
  const IndexTensor index = lens({2, 0, 0, 1}, {4});
  const heed::KVCache<T> whole = cache.used();
  cache.reorder(index);
  CHECK(cache.num_steps() == whole.num_steps());
  CHECK(cache.used().keys.to_vector() == heed::index_select(whole.keys, 0, index).to_vector());
  CHECK(cache.used().values.to_vector() == heed::index_select(whole.values, 0, index).to_vector());
  cache.append(attention.project_kv(heed::randn<T>({4, 1, hiddens}, gen), heed::randn<T>({4, 1, hiddens}, gen)));
  CHECK(cache.used().keys.narrow(2, 0, whole.num_steps()).to_vector() ==
        heed::index_select(whole.keys, 0, index).to_vector());

  // The same rows in another order (beams within their sentences): rewritten in place,
  // through swaps, chains and repeats.
  for (const std::vector<std::int64_t>& order :
       {std::vector<std::int64_t>{1, 0, 3, 2}, {1, 2, 3, 0}, {0, 0, 0, 3}, {3, 3, 1, 1}, {0, 1, 2, 3}}) {
    const heed::KVCache<T> before = cache.used();
    const T* storage = cache.keys.data();
    const IndexTensor permutation = lens(order, {4});
    cache.reorder(permutation);
    CHECK(cache.keys.data() == storage);
    CHECK(cache.used().keys.to_vector() == heed::index_select(before.keys, 0, permutation).to_vector());
    CHECK(cache.used().values.to_vector() == heed::index_select(before.values, 0, permutation).to_vector());
  }
  // A copy shares the tensors: the reorder writes to new ones, the copy keeps its rows.
  const heed::KVCache<T> shared = cache;
  const std::vector<T> shared_keys = shared.used().keys.to_vector();
  cache.reorder(lens({1, 0, 3, 2}, {4}));
  CHECK(cache.keys.data() != shared.keys.data());
  CHECK(shared.used().keys.to_vector() == shared_keys);
  CHECK_ERROR(heed::IndexError, "KVCache::reorder: index 4 out of range for a batch of 4",
              cache.reorder(lens({4}, {1})));
  CHECK_ERROR(
      heed::ShapeError, "KVCache::append: keys (2, 2, 1, 4) do not fit the cache's (4, 2,",
      cache.append(attention.project_kv(heed::randn<T>({2, 1, hiddens}, gen), heed::randn<T>({2, 1, hiddens}, gen))));
  CHECK_ERROR(heed::ValueError, "KVCache::append: nothing to append", cache.append(heed::KVCache<T>()));
  CHECK_ERROR(heed::ValueError, "KVCache::reserve: steps must be >= 0, got -1", cache.reserve(-1));
  CHECK_ERROR(heed::ShapeError, "KVCache: keys and values must both be (batch, num_kv_heads, steps, head_dim)",
              heed::KVCache<T>(heed::zeros<T>({1, 2, 3, 4}), heed::zeros<T>({1, 2, 2, 4})));

  // Fewer rows (sentences that ended), reordered and repeated: written in place, the
  // first rows kept as a view, and appends go on in place.
  // (The expected rows are copies: a cache that shares its tensors reorders into new ones.)
  const IndexTensor fewer = lens({3, 1, 1}, {3});
  const Tensor<T> kept_keys = heed::index_select(cache.used().keys, 0, fewer),
                  kept_values = heed::index_select(cache.used().values, 0, fewer);
  const T* storage = cache.keys.data();
  cache.reorder(fewer);
  CHECK(cache.keys.data() == storage);
  REQUIRE(cache.keys.shape()[0] == 3);
  CHECK(cache.used().keys.to_vector() == kept_keys.to_vector());
  CHECK(cache.used().values.to_vector() == kept_values.to_vector());
  const Tensor<T> Y = heed::randn<T>({3, 1, hiddens}, gen);
  const heed::KVCache<T> last = attention.project_kv(Y, Y);
  cache.append(last);
  CHECK(cache.keys.data() == storage);
  CHECK(cache.used().keys.to_vector() == heed::cat({kept_keys, last.keys}, 2).to_vector());
  CHECK(cache.used().values.to_vector() == heed::cat({kept_values, last.values}, 2).to_vector());
}

TEMPLATE_TEST_CASE("Query rows in groups share a cache row: beams attend to their sentence's one copy", "[transformer]",
                   float, double) {
  using T = TestType;
  heed::Generator gen(23);
  const index_t sources = 3, group = 4, steps = 5, hiddens = 8;
  heed::MultiHeadAttention<T> attention(hiddens, hiddens, hiddens, hiddens, 2, 0.0, true, 0, gen);
  attention.eval();
  const heed::NoGradGuard no_grad;
  const Tensor<T> enc = heed::randn<T>({sources, steps, hiddens}, gen);
  const heed::KVCache<T> once = attention.project_kv(enc, enc);
  // What beam search did before: each source row repeated for each of its beams.
  const IndexTensor repeat = lens({0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2}, {sources * group});
  const heed::KVCache<T> repeated(heed::index_select(once.keys, 0, repeat), heed::index_select(once.values, 0, repeat));
  const IndexTensor valid = lens({5, 2, 3}, {sources});
  const heed::AttentionMask<T> mask(valid), repeated_mask(heed::index_select(valid, 0, repeat));
  for (const bool keep : {false, true}) {  // the fused kernel, and the scores kept
    attention.keep_attention_weights(keep);
    for (const index_t queries : {index_t(1), index_t(3)}) {
      INFO("keep weights " << keep << ", " << queries << " queries a row");
      const Tensor<T> q = heed::randn<T>({sources * group, queries, hiddens}, gen);
      const Tensor<T> grouped = attention.attend(q, once, mask);
      CHECK(grouped.shape() == (Shape{sources * group, queries, hiddens}));
      // Equal to rounding: the fused kernel's tiles of queries differ.
      const double tolerance = std::is_same_v<T, float> ? 1e-6 : 1e-14;
      check_close(grouped, attention.attend(q, repeated, repeated_mask), tolerance);
      check_close(attention.attend(q, once), attention.attend(q, repeated), tolerance);
    }
  }
  const Tensor<T> q = heed::randn<T>({sources * group, 1, hiddens}, gen);
  CHECK_ERROR(heed::ShapeError, "the cache's rows must divide the queries'",
              attention.attend(heed::randn<T>({5, 1, hiddens}, gen), once));
  CHECK_ERROR(heed::ShapeError, "in groups of 4 per cache row take no mask or valid lens per cache row",
              attention.attend(q, once, heed::AttentionMask<T>::causal()));
  CHECK_ERROR(heed::ShapeError, "in groups of 4 per cache row",
              attention.attend(q, once, heed::AttentionMask<T>(lens({1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1}, {12, 1}))));
}

// ---- options: grouped-query attention, pre-LayerNorm, GELU, kept weights ------------------------

TEST_CASE("Grouped-query attention equals multi-head attention with shared key/value heads", "[transformer]") {
  heed::Generator gen(5);
  const index_t num_heads = 4, num_kv_heads = 2, head_dim = 3, num_hiddens = num_heads * head_dim;
  heed::MultiHeadAttention<double> grouped(6, 5, 7, num_hiddens, num_heads, 0.0, true, num_kv_heads, gen);
  heed::MultiHeadAttention<double> plain(6, 5, 7, num_hiddens, num_heads, 0.0, true, 0, gen);
  CHECK(grouped.W_k.weight.shape() == Shape{num_kv_heads * head_dim, 6});
  CHECK(grouped.num_parameters() < plain.num_parameters());
  {
    // Query head h reads key/value head h / (num_heads / num_kv_heads).
    heed::NoGradGuard no_grad;
    plain.W_q.weight.copy_(grouped.W_q.weight);
    plain.W_q.bias.copy_(grouped.W_q.bias);
    plain.W_o.weight.copy_(grouped.W_o.weight);
    plain.W_o.bias.copy_(grouped.W_o.bias);
    for (auto [from, to] : {std::pair{&grouped.W_k, &plain.W_k}, std::pair{&grouped.W_v, &plain.W_v}})
      for (index_t h = 0; h < num_heads; ++h) {
        const index_t kv = h / (num_heads / num_kv_heads);
        const index_t in = from->in_features();
        std::copy_n(from->weight.data() + kv * head_dim * in, head_dim * in, to->weight.data() + h * head_dim * in);
        std::copy_n(from->bias.data() + kv * head_dim, head_dim, to->bias.data() + h * head_dim);
      }
  }
  const Tensord q = random<double>({2, 3, 5}, gen), k = random<double>({2, 4, 6}, gen),
                v = random<double>({2, 4, 7}, gen);
  const IndexTensor valid_lens = lens({2, 4, 1, 3, 4, 4}, {2, 3});
  check_close(grouped(q, k, v, valid_lens), plain(q, k, v, valid_lens), 1e-12);
  check_close(grouped.attention_weights(), plain.attention_weights(), 1e-12);

  std::vector<Tensord> inputs{q.clone().requires_grad_(), k.clone().requires_grad_(), v.clone().requires_grad_()};
  for (auto& p : grouped.parameters()) inputs.push_back(p);
  const auto result =
      heed::gradcheck([&](const std::vector<Tensord>& in) { return grouped(in[0], in[1], in[2], valid_lens); }, inputs);
  INFO(result.message);
  CHECK(result.ok);
}

TEST_CASE("Pre-LayerNorm blocks normalise before each sublayer and after the stack", "[transformer]") {
  heed::Generator gen(8);
  TransformerOptions options;
  options.norm_first = true;
  options.activation = heed::Activation::gelu;
  options.generator = &gen;
  heed::EncoderBlock<double> blk(8, 8, 8, 8, {8}, 8, 12, 2, 0.0, false, options);
  {
    heed::NoGradGuard no_grad;
    for (auto& p : blk.parameters()) p.copy_(random<double>(p.shape(), gen));
  }
  const Tensord X = random<double>({2, 5, 8}, gen);
  const IndexTensor valid_lens = lens({2, 5}, {2});
  const Tensord normed = blk.addnorm1.ln(X);
  const Tensord Y = X + blk.attention(normed, normed, normed, valid_lens);
  const Tensord Z = blk.ffn.dense2(heed::gelu(blk.ffn.dense1(blk.addnorm2.ln(Y))));
  check_close(blk(X, valid_lens), Y + Z, 1e-12);

  heed::TransformerEncoder<double> encoder(11, 8, 8, 8, 8, {8}, 8, 12, 2, 2, 0.0, false, options);
  std::set<std::string> names;
  for (auto& [name, p] : encoder.named_parameters()) names.insert(name);
  CHECK(names.count("ln.weight") == 1);
  CHECK(names.count("blks.block1.ffn.dense2.bias") == 1);
  const Tensord out = encoder(heed::randint(0, 11, {2, 5}, gen), valid_lens);
  // The final LayerNorm (weight 1, bias 0 at init) leaves every row with mean 0.
  CHECK(out.mean(-1).abs().max().item() < 1e-12);
  CHECK_THAT(encoder.repr(), Contains("(gelu): GELU(approximate='none')"));
}

TEST_CASE("embedding_scale multiplies the embeddings in place of sqrt(num_hiddens)", "[transformer]") {
  // A model with embedding_scale s equals d2l's model whose embedding weights are
  // multiplied by s / √num_hiddens: the scale is the only difference.
  const IndexTensor tokens({1, 4, 2, 9, 3, 0, 7, 7}, {2, 4});
  const IndexTensor valid_lens = lens({4, 3}, {2});
  for (const double scale : {1.0, 0.5, std::sqrt(8.0)}) {
    INFO("embedding_scale " << scale);
    heed::Generator gen_a(21), gen_b(21);
    TransformerOptions scaled, plain;
    scaled.embedding_scale = scale;
    scaled.generator = &gen_a;
    plain.generator = &gen_b;
    heed::TransformerEncoder<double> encoder(11, 8, 8, 8, 8, {8}, 8, 12, 2, 2, 0.0, false, scaled);
    heed::TransformerEncoder<double> reference(11, 8, 8, 8, 8, {8}, 8, 12, 2, 2, 0.0, false, plain);
    heed::TransformerDecoder<double> decoder(11, 8, 8, 8, 8, {8}, 8, 12, 2, 2, 0.0, scaled);
    heed::TransformerDecoder<double> decoder_reference(11, 8, 8, 8, 8, {8}, 8, 12, 2, 2, 0.0, plain);
    {
      heed::NoGradGuard no_grad;
      for (heed::Embedding<double>* e : {&reference.embedding, &decoder_reference.embedding})
        e->weight.copy_(e->weight * (scale / std::sqrt(8.0)));
    }
    const Tensord enc = encoder(tokens, valid_lens);
    check_close(enc, reference(tokens, valid_lens), 1e-12);
    auto state = decoder.init_state(enc, valid_lens);
    auto state_reference = decoder_reference.init_state(enc, valid_lens);
    check_close(decoder(tokens, state), decoder_reference(tokens, state_reference), 1e-12);
  }
  TransformerOptions bad;
  bad.embedding_scale = -1.0;
  CHECK_ERROR(heed::ValueError,
              "TransformerEncoder: embedding_scale must be finite and >= 0 (0: sqrt(num_hiddens)), got -1",
              heed::TransformerEncoder<float>(11, 8, 8, 8, 8, {8}, 8, 12, 2, 2, 0.0, false, bad));
  bad.embedding_scale = std::nan("");
  CHECK_ERROR(heed::ValueError, "TransformerDecoder: embedding_scale must be finite and >= 0",
              heed::TransformerDecoder<float>(11, 8, 8, 8, 8, {8}, 8, 12, 2, 2, 0.0, bad));
}

TEST_CASE("Keeping attention weights changes no output", "[transformer]") {
  heed::Generator gen(3);
  auto decoder = small_decoder<float>(2);
  heed::TransformerEncoder<float> encoder(kVocab, kHiddens, kHiddens, kHiddens, kHiddens, {kHiddens}, kHiddens, kFfn,
                                          kHeads, 2, 0.0);
  const IndexTensor src = heed::randint(0, kVocab, {2, 5}, gen), tgt = heed::randint(0, kVocab, {2, 4}, gen);
  const IndexTensor valid_lens = lens({3, 5}, {2});
  auto run = [&] {
    const Tensorf enc_outputs = encoder(src, valid_lens);
    auto state = decoder.init_state(enc_outputs, valid_lens);
    return std::pair{enc_outputs, decoder(tgt, state)};
  };
  const auto [enc_kept, dec_kept] = run();
  CHECK(encoder.attention_weights()[0].defined());
  CHECK(decoder.cross_attention_weights()[1].shape() == Shape{2, kHeads, 4, 5});
  encoder.keep_attention_weights(false);
  decoder.keep_attention_weights(false);
  const auto [enc_free, dec_free] = run();  // the fused attention: the same up to rounding
  check_close(enc_free, enc_kept, 1e-5);
  check_close(dec_free, dec_kept, 1e-5);
  CHECK_FALSE(encoder.attention_weights()[0].defined());
  CHECK_FALSE(decoder.self_attention_weights()[1].defined());
}

TEST_CASE("Boolean and causal masks reach every head", "[transformer]") {
  heed::Generator gen(9);
  heed::MultiHeadAttention<double> attention(4, 4, 4, 8, 2, 0.0, false, 0, gen);
  const Tensord X = random<double>({2, 3, 4}, gen);
  // (batch, queries, keys) boolean mask equal to valid_lens [2, 3]
  heed::BoolTensor allowed = heed::zeros<bool>({2, 3, 3});
  for (index_t q = 0; q < 3; ++q)
    for (index_t k = 0; k < 3; ++k) allowed.data()[q * 3 + k] = k < 2, allowed.data()[9 + q * 3 + k] = true;
  check_close(attention(X, X, X, allowed), attention(X, X, X, lens({2, 3}, {2})), 1e-12);
  attention(X, X, X, AttentionMask<double>::causal());
  const Tensord w = attention.attention_weights();
  CHECK(w.shape() == Shape{2, 2, 3, 3});
  for (index_t r = 0; r < 12; ++r)
    for (index_t k = r % 3 + 1; k < 3; ++k) CHECK(w.data()[r * 3 + k] == 0.0);
}

// ---- gradients -------------------------------------------------------------------------------

TEST_CASE("Every Transformer module passes gradcheck with valid_lens", "[transformer][autograd]") {
  heed::Generator gen(4);
  auto check = [](const auto& f, std::vector<Tensord> inputs, const heed::Module<double>& module) {
    for (auto& p : module.parameters()) inputs.push_back(p);
    const auto result = heed::gradcheck(f, inputs);
    INFO(module.type_name() << ": " << result.message);
    CHECK(result.ok);
  };
  const IndexTensor valid_lens = lens({2, 4, 1, 3}, {2, 2});  // (batch, queries) for two queries
  const IndexTensor valid_lens_1d = lens({3, 5}, {2});
  SECTION("MultiHeadAttention") {
    heed::MultiHeadAttention<double> attention(3, 4, 2, 6, 3, 0.0, true, 0, gen);
    check([&](const auto& in) { return attention(in[0], in[1], in[2], valid_lens); },
          {random<double>({2, 2, 4}, gen).requires_grad_(), random<double>({2, 5, 3}, gen).requires_grad_(),
           random<double>({2, 5, 2}, gen).requires_grad_()},
          attention);
  }
  SECTION("PositionalEncoding, PositionWiseFFN, AddNorm") {
    heed::PositionalEncoding<double> pos_encoding(6, 0.0, 10);
    check([&](const auto& in) { return pos_encoding(in[0], 2); }, {random<double>({2, 3, 6}, gen).requires_grad_()},
          pos_encoding);
    heed::PositionWiseFFN<double> ffn(4, 6, 3, heed::Activation::gelu, gen);
    check([&](const auto& in) { return ffn(in[0]); }, {random<double>({2, 3, 4}, gen).requires_grad_()}, ffn);
    heed::AddNorm<double> add_norm({3, 4}, 0.0);
    {
      heed::NoGradGuard no_grad;
      for (auto& p : add_norm.parameters()) p.copy_(random<double>(p.shape(), gen));
    }
    check([&](const auto& in) { return add_norm(in[0], in[1]); },
          {random<double>({2, 3, 4}, gen).requires_grad_(), random<double>({2, 3, 4}, gen).requires_grad_()}, add_norm);
  }
  SECTION("EncoderBlock and TransformerEncoder") {
    heed::EncoderBlock<double> blk(kHiddens, kHiddens, kHiddens, kHiddens, {kHiddens}, kHiddens, kFfn, kHeads, 0.0);
    check([&](const auto& in) { return blk(in[0], valid_lens_1d); },
          {random<double>({2, 5, kHiddens}, gen).requires_grad_()}, blk);
    heed::TransformerEncoder<double> encoder(kVocab, kHiddens, kHiddens, kHiddens, kHiddens, {kHiddens}, kHiddens, kFfn,
                                             kHeads, 2, 0.0);
    const IndexTensor tokens = heed::randint(0, kVocab, {2, 5}, gen);
    check([&](const auto&) { return encoder(tokens, valid_lens_1d); }, {}, encoder);
  }
  SECTION("DecoderBlock and TransformerDecoder in training mode") {
    heed::DecoderBlock<double> blk(kHiddens, kHiddens, kHiddens, kHiddens, {kHiddens}, kHiddens, kFfn, kHeads, 0.0, 0);
    check(
        [&](const auto& in) {
          heed::TransformerDecoderState<double> state;
          state.enc_outputs = in[1];
          state.enc_valid_lens = valid_lens_1d;
          return blk(in[0], state);
        },
        {random<double>({2, 4, kHiddens}, gen).requires_grad_(),
         random<double>({2, 5, kHiddens}, gen).requires_grad_()},
        blk);
    auto decoder = small_decoder<double>(2);
    const IndexTensor tokens = heed::randint(0, kVocab, {2, 4}, gen);
    check(
        [&](const auto& in) {
          auto state = decoder.init_state(in[0], valid_lens_1d);
          return decoder(tokens, state);
        },
        {random<double>({2, 5, kHiddens}, gen).requires_grad_()}, decoder);
  }
}

// ---- errors ----------------------------------------------------------------------------------

TEST_CASE("Bad Transformer inputs are errors naming the module and the shapes", "[transformer][errors]") {
  CHECK_ERROR(heed::ValueError, "num_hiddens = 10 is not divisible by num_heads = 3",
              heed::MultiHeadAttention<float>(4, 4, 4, 10, 3, 0.0));
  CHECK_ERROR(heed::ValueError, "num_kv_heads = 3 does not divide num_heads = 4",
              heed::MultiHeadAttention<float>(4, 4, 4, 8, 4, 0.0, false, 3));
  CHECK_ERROR(heed::ValueError, "EncoderBlock: key_size, query_size, value_size, ffn_num_input",
              heed::EncoderBlock<float>(24, 24, 24, 32, {32}, 24, 48, 8, 0.0));
  CHECK_ERROR(heed::ValueError, "DecoderBlock: key_size",
              heed::DecoderBlock<float>(24, 24, 24, 24, {100, 32}, 24, 48, 8, 0.0, 0));
  CHECK_ERROR(heed::ValueError, "num_layers must be positive",
              heed::TransformerEncoder<float>(10, 8, 8, 8, 8, {8}, 8, 16, 2, 0, 0.0));

  heed::MultiHeadAttention<float> attention(4, 4, 4, 8, 2, 0.0);
  const Tensorf X = heed::ones<float>({2, 3, 4});
  CHECK_ERROR(heed::ShapeError, "MultiHeadAttention: queries must be (batch, steps, 4), got (2, 3)",
              attention(heed::ones<float>({2, 3}), X, X));
  CHECK_ERROR(heed::ShapeError, "MultiHeadAttention: keys must be (batch, steps, 4), got (2, 3, 5)",
              attention(X, heed::ones<float>({2, 3, 5}), X));
  CHECK_ERROR(heed::ShapeError, "valid_lens must be (batch) or (batch, num_queries) with batch = 2, got (3)",
              attention(X, X, X, lens({1, 2, 3}, {3})));
  CHECK_ERROR(heed::ShapeError, "differ in batch or steps", attention(X, X, heed::ones<float>({2, 4, 4})));

  // Blocks of one width fed another: the next block names its width.
  heed::EncoderBlock<float> narrow_blk(8, 8, 8, 8, {8}, 8, 16, 2, 0.0);
  CHECK_ERROR(heed::ShapeError, "EncoderBlock: X must be (batch, num_steps, 8), got (2, 5, 24)",
              narrow_blk(heed::ones<float>({2, 5, 24})));
  heed::DecoderBlock<float> dec_blk(8, 8, 8, 8, {8}, 8, 16, 2, 0.0, 0);
  heed::TransformerDecoderState<float> state;
  state.enc_outputs = heed::ones<float>({3, 5, 8});
  CHECK_ERROR(heed::ShapeError, "DecoderBlock: enc_outputs (3, 5, 8) must be (batch, num_enc_steps, num_hiddens)",
              dec_blk(heed::ones<float>({2, 4, 8}), state));

  heed::TransformerEncoder<float> encoder(10, 8, 8, 8, 8, {8}, 8, 16, 2, 1, 0.0);
  CHECK_ERROR(heed::ShapeError, "TransformerEncoder: tokens must be (batch, num_steps), got (2, 3, 4)",
              encoder(heed::zeros<std::int64_t>({2, 3, 4})));
  CHECK_ERROR(heed::IndexError, "out of range for 10 embeddings", encoder(heed::full<std::int64_t>({1, 2}, 10)));
  CHECK_ERROR(heed::ShapeError, "valid_lens must be (batch) or (batch, num_queries) with batch = 2, got (3)",
              encoder(heed::zeros<std::int64_t>({2, 3}), lens({1, 2, 3}, {3})));
}
