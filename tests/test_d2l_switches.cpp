// heed's three switches to d2l's exact numbers, against d2l's PyTorch code
// (tests/data/make_d2l_switches_golden.py writes d2l_switches_golden.txt):
//   - AttentionMask::with_uniform_when_fully_masked(): a row whose every key is masked
//     gets 1/num_keys, as d2l's -1e6 fill gives, instead of heed's zeros;
//   - PositionalTable::float32 (TransformerOptions::float32_positional_table): the
//     positional table computed in float32, as d2l computes it, instead of in double;
//   - TransformerOptions::decode_at_position_zero: d2l's decoder fed one token at a time
//     adds position 0's encoding to every step; heed's default gives each step its own.
// Each test checks that the switch gives d2l's numbers and that heed's default differs
// from them in the documented way, so that the switch is seen to matter. The bounds are
// on max |heed - d2l| (check_within), not check_close's Approx, whose relative epsilon
// (1.2e-5) would hide a difference of 1e-8.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "check.hpp"
#include "golden.hpp"
#include "seq2seq_nets.hpp"

// Also declared by attention_common.hpp, in the same unity translation unit: a
// using-declaration may be repeated at namespace scope.
using heed::AttentionMask;
using heed::index_t;
using heed::IndexTensor;
using heed::Shape;
using heed::Tensor;
using heed::Tensord;
using heed_test::check_values;

namespace heed_d2l_switches {

const heed_test::Golden& switches_golden() {
  static const heed_test::Golden g("d2l_switches_golden.txt");
  return g;
}

template <typename T>
Tensor<T> switches_tensor(const std::string& name) {
  return switches_golden().tensor<T>(name);
}

IndexTensor switches_ints(const std::string& name) { return switches_golden().tensor<std::int64_t>(name); }

/// max |x - y| over all elements (same shapes).
template <typename T>
double max_difference(const Tensor<T>& x, const Tensor<T>& y) {
  REQUIRE(x.shape() == y.shape());
  double m = 0;
  for (index_t i = 0; i < x.numel(); ++i)
    m = std::max(m, std::abs(static_cast<double>(x.data()[i]) - static_cast<double>(y.data()[i])));
  return m;
}

/// max |actual - expected| <= bound, the maximum reported.
template <typename T>
void check_within(const Tensor<T>& actual, const Tensor<T>& expected, double bound) {
  const double difference = max_difference(actual, expected);
  INFO("max |difference| " << difference << ", bound " << bound);
  CHECK(difference <= bound);
}

/// The masked softmax and the attentions match d2l in double to 1e-12 (the inputs are
/// the same numbers); in float to 1e-6 (their values are O(1)).
template <typename T>
double switches_tolerance() {
  return std::is_same_v<T, float> ? 1e-6 : 1e-12;
}

/// d2l's mask with the switch on.
template <typename T>
AttentionMask<T> d2l_mask(const IndexTensor& valid_lens) {
  return AttentionMask<T>(valid_lens).with_uniform_when_fully_masked();
}

/// The (batch, query) rows whose every key the valid lengths mask.
std::vector<std::pair<index_t, index_t>> fully_masked_rows(const IndexTensor& valid_lens, index_t num_queries) {
  std::vector<std::pair<index_t, index_t>> rows;
  for (index_t b = 0; b < valid_lens.shape()[0]; ++b)
    for (index_t q = 0; q < num_queries; ++q)
      if ((valid_lens.dim() == 1 ? valid_lens.at({b}) : valid_lens.at({b, q})) == 0) rows.emplace_back(b, q);
  return rows;
}

bool contains(const std::vector<std::pair<index_t, index_t>>& rows, index_t b, index_t q) {
  return std::find(rows.begin(), rows.end(), std::make_pair(b, q)) != rows.end();
}

/// Row (b, q) of a (batch, num_queries, width) tensor.
template <typename T>
Tensor<T> row_of(const Tensor<T>& x, index_t b, index_t q) {
  return x.select(0, b).select(0, q);
}

// ---- the Transformer of the pz case ---------------------------------------------------------------

/// make_d2l_switches_golden.py's net (TransformerEncoder(9, 8, ..., num_layers=1),
/// TransformerDecoder(10, 8, ..., num_layers=2), dropout 0) with d2l's parameters.
template <typename T>
std::unique_ptr<TransformerNet<T>> switches_transformer(const heed::TransformerOptions& options) {
  auto net = std::make_unique<TransformerNet<T>>(
      std::make_unique<heed::TransformerEncoder<T>>(9, 8, 8, 8, 8, Shape{8}, 8, 8, 2, 1, 0.0, false, options),
      std::make_unique<heed::TransformerDecoder<T>>(10, 8, 8, 8, 8, Shape{8}, 8, 8, 2, 2, 0.0, options));
  heed_test::load_parameters(switches_golden(), *net, "pz");
  return net;
}

/// d2l's predict loop: encode, init_state, then one column of pz.dec_X per decoder call,
/// the state carried over, in eval mode; the logits of the steps, (batch, steps, vocab).
template <typename T>
Tensor<T> decode_one_step_at_a_time(TransformerNet<T>& net) {
  heed::NoGradGuard no_grad;
  net.eval();
  const IndexTensor enc_X = switches_ints("pz.enc_X"), enc_valid_lens = switches_ints("pz.enc_valid_lens");
  const IndexTensor dec_X = switches_ints("pz.dec_X");
  auto state = net.decoder().init_state(net.encoder()(enc_X, enc_valid_lens), enc_valid_lens);
  const index_t batch = dec_X.shape()[0];
  std::vector<Tensor<T>> steps;
  for (index_t t = 0; t < dec_X.shape()[1]; ++t) {
    std::vector<std::int64_t> column;
    for (index_t b = 0; b < batch; ++b) column.push_back(dec_X.at({b, t}));
    steps.push_back(net.decoder()(IndexTensor(column, Shape{batch, 1}), state));
  }
  return heed::cat(steps, 1);
}

/// The whole target sequence in one eval-mode forward.
template <typename T>
Tensor<T> decode_whole_sequence(TransformerNet<T>& net) {
  heed::NoGradGuard no_grad;
  net.eval();
  return net.forward(switches_ints("pz.enc_X"), switches_ints("pz.dec_X"), switches_ints("pz.enc_valid_lens"));
}

/// Step t of (batch, steps, vocab) logits.
template <typename T>
Tensor<T> step_of(const Tensor<T>& logits, index_t t) {
  return logits.narrow(1, t, 1);
}

}  // namespace heed_d2l_switches

// ---- 1. fully masked rows: weights 1/num_keys ------------------------------------------------------

TEMPLATE_TEST_CASE("with_uniform_when_fully_masked gives d2l's masked_softmax of a valid length 0",
                   "[attention][golden]", float, double) {
  using T = TestType;
  namespace s = heed_d2l_switches;
  for (const std::string c : {"msz1", "msz2"}) {
    INFO("case " << c);
    const IndexTensor valid_lens = s::switches_ints(c + ".valid_lens");
    const Tensor<T> expected = s::switches_tensor<T>(c + ".output");
    const auto rows = s::fully_masked_rows(valid_lens, expected.shape()[1]);
    REQUIRE(!rows.empty());

    // The switch on: d2l's weights (1/4 in the fully masked rows) and gradients (0 there).
    Tensor<T> x = s::switches_tensor<T>(c + ".X").requires_grad_();
    const Tensor<T> out = heed::masked_softmax(x, s::d2l_mask<T>(valid_lens));
    s::check_within(out, expected, s::switches_tolerance<T>());
    for (const auto& [b, q] : rows) check_values(s::row_of(out, b, q), {0.25, 0.25, 0.25, 0.25}, 0.0);
    out.backward(s::switches_tensor<T>(c + ".R"));
    s::check_within(x.grad(), s::switches_tensor<T>(c + ".grad.X"), s::switches_tolerance<T>());
    for (const auto& [b, q] : rows) check_values(s::row_of(x.grad(), b, q), {0, 0, 0, 0}, 0.0);

    // heed's default: zeros in those rows, d2l's numbers in the others; the gradients
    // are d2l's either way (both give the fully masked rows none).
    Tensor<T> x0 = s::switches_tensor<T>(c + ".X").requires_grad_();
    const Tensor<T> heed_out = heed::masked_softmax(x0, valid_lens);
    for (index_t b = 0; b < expected.shape()[0]; ++b)
      for (index_t q = 0; q < expected.shape()[1]; ++q) {
        INFO("row " << b << ", " << q);
        if (s::contains(rows, b, q))
          check_values(s::row_of(heed_out, b, q), {0, 0, 0, 0}, 0.0);
        else
          s::check_within(s::row_of(heed_out, b, q), s::row_of(expected, b, q), s::switches_tolerance<T>());
      }
    CHECK(s::max_difference(heed_out, expected) == 0.25);
    heed_out.backward(s::switches_tensor<T>(c + ".R"));
    s::check_within(x0.grad(), s::switches_tensor<T>(c + ".grad.X"), s::switches_tolerance<T>());
  }
}

TEMPLATE_TEST_CASE("with_uniform_when_fully_masked gives d2l's DotProductAttention of a valid length 0",
                   "[attention][golden]", float, double) {
  using T = TestType;
  namespace s = heed_d2l_switches;
  const std::string c = "dotz";
  const IndexTensor valid_lens = s::switches_ints(c + ".valid_lens");  // [0, 3]
  const Tensor<T> expected = s::switches_tensor<T>(c + ".output");
  const double tol = s::switches_tolerance<T>();

  // Through DotProductAttention keeping its weights (masked_softmax), not keeping them
  // (the fused path where the device has one), and scaled_dot_product_attention itself.
  for (const int path : {0, 1, 2}) {
    INFO("path " << path);
    Tensor<T> q = s::switches_tensor<T>(c + ".queries").requires_grad_();
    Tensor<T> k = s::switches_tensor<T>(c + ".keys").requires_grad_();
    Tensor<T> v = s::switches_tensor<T>(c + ".values").requires_grad_();
    heed::DotProductAttention<T> attention(0.0);
    attention.keep_attention_weights(path == 0);
    const Tensor<T> out = path == 2 ? heed::scaled_dot_product_attention(q, k, v, s::d2l_mask<T>(valid_lens))
                                    : attention(q, k, v, s::d2l_mask<T>(valid_lens));
    s::check_within(out, expected, tol);
    if (path == 0) s::check_within(attention.attention_weights(), s::switches_tensor<T>(c + ".attention_weights"), tol);
    out.backward(s::switches_tensor<T>(c + ".R"));
    s::check_within(q.grad(), s::switches_tensor<T>(c + ".grad.queries"), tol);
    s::check_within(k.grad(), s::switches_tensor<T>(c + ".grad.keys"), tol);
    s::check_within(v.grad(), s::switches_tensor<T>(c + ".grad.values"), tol);
  }

  // heed's default: batch 0 (valid length 0) gives zeros where d2l averages its values.
  heed::DotProductAttention<T> attention(0.0);
  const Tensor<T> out = attention(s::switches_tensor<T>(c + ".queries"), s::switches_tensor<T>(c + ".keys"),
                                  s::switches_tensor<T>(c + ".values"), valid_lens);
  CHECK(out.select(0, 0).abs().sum().item() == 0);
  CHECK(s::max_difference(out.select(0, 0), expected.select(0, 0)) > 0.1);
  s::check_within(out.select(0, 1), expected.select(0, 1), tol);
}

TEMPLATE_TEST_CASE("with_uniform_when_fully_masked gives d2l's MultiHeadAttention of a valid length 0",
                   "[attention][golden]", float, double) {
  using T = TestType;
  namespace s = heed_d2l_switches;
  const std::string c = "mhaz";
  const IndexTensor valid_lens = s::switches_ints(c + ".valid_lens");  // [[0, 2, 4], [3, 0, 1]]
  const Tensor<T> expected = s::switches_tensor<T>(c + ".output");
  const double tol = s::switches_tolerance<T>();
  const auto rows = s::fully_masked_rows(valid_lens, expected.shape()[1]);
  REQUIRE(rows.size() == 2);

  heed::MultiHeadAttention<T> attention(/*key_size=*/3, /*query_size=*/5, /*value_size=*/2, /*num_hiddens=*/4,
                                        /*num_heads=*/2, 0.0);
  heed_test::load_parameters(s::switches_golden(), attention, c);
  Tensor<T> q = s::switches_tensor<T>(c + ".queries").requires_grad_();
  Tensor<T> k = s::switches_tensor<T>(c + ".keys").requires_grad_();
  Tensor<T> v = s::switches_tensor<T>(c + ".values").requires_grad_();
  const Tensor<T> out = attention(q, k, v, s::d2l_mask<T>(valid_lens));
  s::check_within(out, expected, tol);
  out.backward(s::switches_tensor<T>(c + ".R"));
  s::check_within(q.grad(), s::switches_tensor<T>(c + ".grad.queries"), tol);
  s::check_within(k.grad(), s::switches_tensor<T>(c + ".grad.keys"), tol);
  s::check_within(v.grad(), s::switches_tensor<T>(c + ".grad.values"), tol);
  for (const auto& [name, p] : attention.named_parameters()) {
    INFO("gradient of " << name);
    s::check_within(p.grad(), s::switches_tensor<T>(c + ".grad." + name), tol);
  }

  // heed's default: the fully masked rows are W_o(0) = 0 (no bias) where d2l's are not.
  heed::NoGradGuard no_grad;
  const Tensor<T> heed_out = attention(q, k, v, valid_lens);
  for (index_t b = 0; b < 2; ++b)
    for (index_t i = 0; i < 3; ++i) {
      INFO("row " << b << ", " << i);
      if (s::contains(rows, b, i)) {
        CHECK(s::row_of(heed_out, b, i).abs().sum().item() == 0);
        CHECK(s::row_of(expected, b, i).abs().max().item() > 0.01);
      } else {
        s::check_within(s::row_of(heed_out, b, i), s::row_of(expected, b, i), tol);
      }
    }
}

// ---- 2. the float32 positional table ----------------------------------------------------------------

TEST_CASE("PositionalTable::float32 gives d2l's positional table", "[attention][golden]") {
  namespace s = heed_d2l_switches;
  const IndexTensor positions = s::switches_ints("pe.positions");  // 0, 1, 2, 7, 100, 500, 999
  const Tensord rows = s::switches_tensor<double>("pe.rows");      // d2l's P[0, positions], float32 values
  const index_t num_hiddens = rows.shape()[1];
  const heed::PositionalEncoding<double> d2l_table(num_hiddens, 0.0, 1000, heed::PositionalTable::float32);
  const heed::PositionalEncoding<float> d2l_table_f(num_hiddens, 0.0, 1000, heed::PositionalTable::float32);
  const heed::PositionalEncoding<double> heed_table(num_hiddens, 0.0);

  // d2l divides i by 10000^(2j/d) and takes sin or cos, each in float32; heed's switch
  // does the same with the C library's powf, sinf and cosf. The script ran torch's
  // scalar kernels, which call the C library too: bit for bit the same numbers
  // (measured: all 224 entries here, all 32000 of the table). torch's AVX2 kernels,
  // what d2l runs on most x86 machines, round about 5% of the entries to the other
  // float32 neighbour (one ulp, at most 2^-24 = 5.96e-8 below 1): the bound every entry
  // must keep in any case, and what a C library whose sinf rounds otherwise could give.
  // heed's default table is the double one: up to 8.6e-6 away at position 999 (1.6e-6
  // at 100), the float32 rounding of angles near 1000, which float32 holds to 6e-5.
  double float32_max = 0, default_max = 0;
  index_t equal = 0;
  for (index_t r = 0; r < positions.numel(); ++r) {
    const index_t i = positions.data()[r];
    double float32_row = 0, default_row = 0;
    for (index_t c = 0; c < num_hiddens; ++c) {
      INFO("position " << i << ", column " << c);
      const double expected = rows.at({r, c});
      REQUIRE(static_cast<double>(static_cast<float>(expected)) == expected);  // float32 values on file
      const double ours = d2l_table.P.at({0, i, c});
      CHECK(static_cast<double>(static_cast<float>(ours)) == ours);     // the switch's table holds float32 values
      CHECK(static_cast<double>(d2l_table_f.P.at({0, i, c})) == ours);  // the same in a float model
      const auto e = static_cast<float>(std::abs(expected));
      CHECK(std::abs(ours - expected) <= static_cast<double>(std::nextafter(e, 2.0f) - e));  // one ulp
      equal += ours == expected;
      float32_row = std::max(float32_row, std::abs(ours - expected));
      default_row = std::max(default_row, std::abs(heed_table.P.at({0, i, c}) - expected));
    }
    INFO("position " << i << ": float32 table " << float32_row << " from d2l's, default table " << default_row);
    CHECK(float32_row <= 0x1p-24);
    if (i == 0) CHECK(default_row == 0);  // sin 0 = 0 and cos 0 = 1 in any precision
    if (i > 0) CHECK(default_row > 1e-8);
    if (i >= 100) CHECK(default_row > 1e-6);
    float32_max = std::max(float32_max, float32_row);
    default_max = std::max(default_max, default_row);
  }
  INFO("float32 table " << float32_max << " from d2l's (" << equal << " of " << rows.numel()
                        << " entries equal), default table " << default_max);
#ifdef __GLIBC__
  CHECK(equal == rows.numel());  // measured with glibc 2.36, as the script's torch
#endif
  CHECK(equal >= rows.numel() * 9 / 10);
  CHECK(default_max > 5e-6);
  CHECK(default_max > 64 * float32_max);
}

TEST_CASE("float32_positional_table gives the Transformer d2l's table", "[transformer][golden]") {
  namespace s = heed_d2l_switches;
  heed::TransformerOptions options;
  options.float32_positional_table = true;
  auto net = s::switches_transformer<double>(options);
  auto heed_net = s::switches_transformer<double>({});
  // The option reaches both tables: PositionalTable::float32's, and heed's double table
  // without it (3.05e-6 apart at most over the 1000 positions of width 8).
  const heed::PositionalEncoding<double> float32_table(8, 0.0, 1000, heed::PositionalTable::float32);
  const heed::PositionalEncoding<double> double_table(8, 0.0);
  CHECK(s::max_difference(net->encoder().pos_encoding.P, float32_table.P) == 0);
  CHECK(s::max_difference(net->decoder().pos_encoding.P, float32_table.P) == 0);
  CHECK(s::max_difference(heed_net->encoder().pos_encoding.P, double_table.P) == 0);
  CHECK(s::max_difference(heed_net->decoder().pos_encoding.P, double_table.P) == 0);
  CHECK(s::max_difference(float32_table.P, double_table.P) > 1e-6);

  // d2l's first rows: the switch's exactly (glibc, as above), the default's up to 3e-8 away.
  const Tensord P = s::switches_tensor<double>("pz.P");  // (1, 5, 8)
  const Tensord float32_rows = float32_table.P.narrow(1, 0, P.shape()[1]);
  const Tensord double_rows = double_table.P.narrow(1, 0, P.shape()[1]);
  s::check_within(float32_rows, P, 0x1p-24);
#ifdef __GLIBC__
  CHECK(s::max_difference(float32_rows, P) == 0);
#endif
  CHECK(s::max_difference(double_rows, P) > 1e-8);

  // So heed's step-by-step decoding, each step at its own position, gives d2l's
  // training-mode pass over the sequence with the switch (measured: 1.3e-15), and
  // misses it by the tables' difference without (measured: 1.8e-8).
  const Tensord d2l_full = s::switches_tensor<double>("pz.full_output");
  s::check_within(s::decode_one_step_at_a_time(*net), d2l_full, 1e-10);
  CHECK(s::max_difference(s::decode_one_step_at_a_time(*heed_net), d2l_full) > 1e-9);
}

// ---- 3. decoding one token at a time at position 0 --------------------------------------------------

TEMPLATE_TEST_CASE("decode_at_position_zero gives d2l's step-by-step Transformer decoding", "[transformer][golden]",
                   float, double) {
  using T = TestType;
  namespace s = heed_d2l_switches;
  const Tensor<T> d2l_steps = s::switches_tensor<T>("pz.step_output");  // (2, 5, 10), position 0 at every step
  const index_t num_steps = d2l_steps.shape()[1];
  // Logits O(1): 1e-10 in double (measured: 2.2e-15), 1e-5 in float (measured: 1.2e-6).
  const double tol = std::is_same_v<T, float> ? 1e-5 : 1e-10;
  heed::TransformerOptions d2l_options;
  d2l_options.decode_at_position_zero = true;
  d2l_options.float32_positional_table = true;

  SECTION("both switches on: d2l's logits at every step") {
    auto net = s::switches_transformer<T>(d2l_options);
    // d2l's names, in d2l's order.
    std::vector<std::string> expected;
    for (const auto& name : s::switches_golden().names())
      if (name.rfind("pz.encoder.", 0) == 0 || name.rfind("pz.decoder.", 0) == 0) expected.push_back(name.substr(3));
    std::vector<std::string> names;
    for (const auto& [name, p] : net->named_parameters()) names.push_back(name);
    CHECK(names == expected);
    s::check_within(s::decode_one_step_at_a_time(*net), d2l_steps, tol);
  }

  SECTION("decode_at_position_zero alone: d2l's steps but for the encoder's table") {
    // The decoder adds only position 0's row, (0, 1, 0, 1, ...), exact in any
    // precision; the encoder adds rows 0 to 4, which heed's double table rounds
    // otherwise (measured: 1.2e-8 from d2l's logits in double).
    heed::TransformerOptions options;
    options.decode_at_position_zero = true;
    const Tensor<T> steps = s::decode_one_step_at_a_time(*s::switches_transformer<T>(options));
    s::check_within(steps, d2l_steps, std::is_same_v<T, float> ? 1e-5 : 1e-7);
    if constexpr (std::is_same_v<T, double>) CHECK(s::max_difference(steps, d2l_steps) > 1e-10);
  }

  SECTION("the switch leaves the whole-sequence forward alone") {
    auto net = s::switches_transformer<T>(d2l_options);
    heed::TransformerOptions table_only;
    table_only.float32_positional_table = true;
    auto heed_net = s::switches_transformer<T>(table_only);
    CHECK(s::max_difference(s::decode_whole_sequence(*net), s::decode_whole_sequence(*heed_net)) == 0);
  }

  SECTION("heed's default: each step at its own position, as one forward over the sequence") {
    heed::TransformerOptions table_only;
    table_only.float32_positional_table = true;
    for (const bool float32_table : {false, true}) {
      INFO("float32_positional_table " << float32_table);
      auto net = s::switches_transformer<T>(float32_table ? table_only : heed::TransformerOptions{});
      const Tensor<T> steps = s::decode_one_step_at_a_time(*net);
      // heed's consistency: one token per call gives the whole-sequence eval forward
      // (measured: 4.4e-16 in double, 0 in float).
      s::check_within(steps, s::decode_whole_sequence(*net), std::is_same_v<T, float> ? 1e-6 : 1e-13);
      // Step 0 sits at position 0 either way; the later steps are clearly not d2l's
      // (measured: 0.39 to 0.99).
      s::check_within(s::step_of(steps, 0), s::step_of(d2l_steps, 0), std::is_same_v<T, float> ? 1e-5 : 1e-7);
      for (index_t t = 1; t < num_steps; ++t) {
        INFO("step " << t);
        CHECK(s::max_difference(s::step_of(steps, t), s::step_of(d2l_steps, t)) > 0.1);
      }
    }
    // They are d2l's training-mode pass over the sequence (full_output), with the
    // float32 table (the test above has the double one).
    s::check_within(s::decode_one_step_at_a_time(*s::switches_transformer<T>(table_only)),
                    s::switches_tensor<T>("pz.full_output"), tol);
  }
}
