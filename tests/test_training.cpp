// Tests of the training utilities of d2l's seq2seq (d2l 8.5, 9.7, 10.4): cross_entropy,
// sequence_mask, MaskedSoftmaxCELoss, Adam, gradient clipping and BLEU. Golden values
// come from PyTorch and d2l's code (tests/data/make_training_golden.py); gradients are
// also checked against finite differences and against compositions of other ops.
#include <heed/ops/cross_entropy.hpp>
#include <heed/ops/sequence_mask.hpp>
#include <heed/optim/adam.hpp>
#include <heed/optim/clip.hpp>
#include <heed/optim/lr_schedule.hpp>
#include <heed/optim/sgd.hpp>
#include <heed/seq2seq/bleu.hpp>
#include <heed/seq2seq/loss.hpp>

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include "check.hpp"
#include "golden.hpp"

using heed::index_t;
using heed::IndexTensor;
using heed::Reduction;
using heed::Shape;
using heed::Tensor;
using heed::Tensord;
using heed::Tensorf;
using heed_test::check_close;
using heed_test::check_values;
using heed_test::leaf;
using heed_test::lens;
using heed_test::tolerance;

namespace {

const heed_test::Golden& golden() {
  static const heed_test::Golden g("training_golden.txt");
  return g;
}

/// Every element of x is within atol of expected's (a plain absolute bound: Approx
/// would also accept a relative error of 1e-5, too loose for the double checks).
template <typename T>
void check_near(const Tensor<T>& x, const Tensor<T>& expected, double atol) {
  REQUIRE(x.shape() == expected.shape());
  double worst = 0.0;
  for (index_t i = 0; i < x.numel(); ++i)
    worst = std::max(worst, std::fabs(static_cast<double>(x.data()[i]) - static_cast<double>(expected.data()[i])));
  INFO("largest difference " << worst << " for a tolerance of " << atol);
  CHECK(worst <= atol);
}

using heed_test::GradFn;
using heed_test::GradInputs;

/// A gradcheck leaf of uniform values in [-2, 2).
Tensord uniform_leaf(const Shape& shape, std::uint64_t seed) { return heed_test::leaf(shape, seed, -2.0, 2.0); }

const char* reduction_name(Reduction r) {
  return r == Reduction::none ? "none" : r == Reduction::mean ? "mean" : "sum";
}

}  // namespace

// ---- cross_entropy ------------------------------------------------------------------------

TEMPLATE_TEST_CASE("cross_entropy matches PyTorch's for every reduction, 2-D and 3-D, gradients included", "[loss]",
                   float, double) {
  for (const std::string c : {"ce2", "ce3", "ce_big"}) {
    for (const Reduction reduction : {Reduction::none, Reduction::mean, Reduction::sum}) {
      const std::string name = c + "." + reduction_name(reduction);
      INFO("case " << name);
      Tensor<TestType> logits = leaf<TestType>(golden(), name + ".logits");
      const auto labels = golden().tensor<std::int64_t>(name + ".labels");
      const Tensor<TestType> out = heed::cross_entropy(logits, labels, reduction);
      CHECK(out.grad_fn_name() == "CrossEntropyBackward");
      check_close(out, golden().tensor<TestType>(name + ".output"), tolerance<TestType>());
      out.backward(golden().tensor<TestType>(name + ".R"));
      check_close(logits.grad(), golden().tensor<TestType>(name + ".grad.logits"), tolerance<TestType>());
    }
  }
}

TEMPLATE_TEST_CASE("cross_entropy with label_smoothing matches PyTorch's label_smoothing, gradients included", "[loss]",
                   float, double) {
  for (const auto& [tag, label_smoothing] : {std::pair{"ls10", 0.1}, std::pair{"ls100", 1.0}}) {
    for (const std::string c : {"ce2", "ce3", "ce_big"}) {
      for (const Reduction reduction : {Reduction::none, Reduction::mean, Reduction::sum}) {
        const std::string name = std::string(tag) + "." + c + "." + reduction_name(reduction);
        INFO("case " << name);
        Tensor<TestType> logits = leaf<TestType>(golden(), name + ".logits");
        const auto labels = golden().tensor<std::int64_t>(name + ".labels");
        const Tensor<TestType> out = heed::cross_entropy(logits, labels, reduction, label_smoothing);
        check_close(out, golden().tensor<TestType>(name + ".output"), tolerance<TestType>());
        out.backward(golden().tensor<TestType>(name + ".R"));
        check_close(logits.grad(), golden().tensor<TestType>(name + ".grad.logits"), tolerance<TestType>());
      }
    }
  }
}

TEST_CASE("cross_entropy with label_smoothing: by hand, gradients, and its range", "[loss][gradcheck]") {
  // Uniform logits: every class has log p = −log 4, so any target gives log 4; the
  // gradient is softmax − target = 1/4 − (0.8 [c = y] + 0.05).
  auto logits = heed::zeros<double>({1, 4}).requires_grad_();
  const auto loss = heed::cross_entropy(logits, IndexTensor({2}, Shape{1}), Reduction::sum, 0.2);
  check_values(loss, {std::log(4.0)});
  loss.backward();
  check_values(logits.grad(), {0.2, 0.2, -0.6, 0.2});
  // ε = 0 is the plain loss, bit for bit.
  const Tensord x = uniform_leaf({3, 5}, 31);
  const IndexTensor labels({4, 0, 2}, Shape{3});
  CHECK(heed::cross_entropy(x, labels, Reduction::none, 0.0).to_vector() ==
        heed::cross_entropy(x, labels, Reduction::none).to_vector());
  for (const double label_smoothing : {0.1, 0.5, 1.0}) {
    INFO("label_smoothing " << label_smoothing);
    for (const Reduction reduction : {Reduction::none, Reduction::mean}) {
      const GradFn f = [&](const GradInputs& in) {
        return heed::cross_entropy(in[0], labels, reduction, label_smoothing);
      };
      CHECK_GRADIENTS(f, {uniform_leaf({3, 5}, 32)});
    }
    const IndexTensor label({0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 3, 3, 3, 3, 3}, Shape{3, 5});
    const GradFn masked = [&](const GradInputs& in) {
      return heed::masked_softmax_ce_loss(in[0], label, lens({5, 2, 0}, {3}), 0, label_smoothing);
    };
    CHECK_GRADIENTS(masked, {uniform_leaf({3, 5, 4}, 33)});
    const GradFn fused = [&](const GradInputs& in) {
      return heed::masked_linear_ce_loss(in[0], in[1], in[2], label, lens({5, 2, 1}, {3}), 0, label_smoothing);
    };
    CHECK_GRADIENTS(fused, {uniform_leaf({3, 5, 3}, 34), uniform_leaf({4, 3}, 35), uniform_leaf({4}, 36)});
    const GradFn linear = [&](const GradInputs& in) {
      return heed::linear_cross_entropy(in[0], in[1], in[2], labels, Reduction::none, label_smoothing);
    };
    CHECK_GRADIENTS(linear, {uniform_leaf({3, 3}, 37), uniform_leaf({5, 3}, 38), uniform_leaf({5}, 39)});
  }
  const auto logits2 = heed::zeros<float>({2, 3});
  const IndexTensor labels2({0, 1}, Shape{2});
  CHECK_ERROR(heed::ValueError, "cross_entropy: label_smoothing = -0.1 is outside [0, 1]",
              heed::cross_entropy(logits2, labels2, Reduction::mean, -0.1));
  CHECK_ERROR(heed::ValueError, "cross_entropy: label_smoothing = 1.5 is outside [0, 1]",
              heed::cross_entropy(logits2, labels2, Reduction::mean, 1.5));
  CHECK_ERROR(heed::ValueError, "cross_entropy: label_smoothing = nan is outside [0, 1]",
              heed::cross_entropy(logits2, labels2, Reduction::mean, std::nan("")));
  CHECK_ERROR(
      heed::ValueError, "linear_cross_entropy: label_smoothing = 2 is outside [0, 1]",
      heed::linear_cross_entropy(logits2, heed::zeros<float>({4, 3}), Tensor<float>(), labels2, Reduction::mean, 2.0));
  CHECK_ERROR(heed::ValueError, "MaskedSoftmaxCELoss: label_smoothing = -1 is outside [0, 1]",
              heed::MaskedSoftmaxCELoss(-1.0));
  CHECK_ERROR(heed::ValueError, "masked_linear_ce_loss: label_smoothing = 3 is outside [0, 1]",
              heed::masked_linear_ce_loss(heed::zeros<float>({1, 2, 3}), heed::zeros<float>({4, 3}), Tensor<float>(),
                                          IndexTensor({0, 1}, Shape{1, 2}), lens({2}, {1}), 0, 3.0));
}

TEST_CASE("cross_entropy of uniform logits is log(num_classes), by hand", "[loss]") {
  auto logits = heed::zeros<double>({2, 4}).requires_grad_();
  const IndexTensor labels({1, 3}, Shape{2});

  const auto none = heed::cross_entropy(logits, labels, Reduction::none);
  REQUIRE(none.shape() == Shape{2});
  check_values(none, {std::log(4.0), std::log(4.0)});
  check_values(heed::cross_entropy(logits, labels, Reduction::sum), {2 * std::log(4.0)});

  const auto mean = heed::cross_entropy(logits, labels);  // mean by default, as PyTorch
  REQUIRE(mean.shape() == Shape{});
  check_values(mean, {std::log(4.0)});
  // d mean / d x = (softmax − one_hot) / rows = (1/4 − [c = y]) / 2
  mean.backward();
  check_values(logits.grad(), {0.125, -0.375, 0.125, 0.125, 0.125, 0.125, 0.125, -0.375});

  // One row: logits (num_classes) with a rank-0 label.
  const auto single =
      heed::cross_entropy(heed::Tensord({0.0, std::log(3.0)}, Shape{2}), IndexTensor({1}, Shape{}), Reduction::none);
  REQUIRE(single.shape() == Shape{});
  check_values(single, {std::log(4.0 / 3.0)});

  // A confident right answer costs almost nothing; a confident wrong one its margin.
  const heed::Tensord sharp({50.0, 0.0, 0.0}, Shape{1, 3});
  CHECK(heed::cross_entropy(sharp, IndexTensor({0}, Shape{1})).item() == Approx(0.0).margin(1e-15));
  CHECK(heed::cross_entropy(sharp, IndexTensor({2}, Shape{1})).item() == Approx(50.0));

  // Without a tensor that requires grad nothing is recorded.
  CHECK_FALSE(heed::cross_entropy(heed::zeros<double>({2, 4}), labels).requires_grad());
  // No rows: none gives an empty tensor, sum 0, mean NaN (0/0, as PyTorch).
  const heed::Tensord empty = heed::zeros<double>({0, 3});
  const IndexTensor no_labels(std::vector<std::int64_t>{}, Shape{0});
  CHECK(heed::cross_entropy(empty, no_labels, Reduction::none).shape() == Shape{0});
  CHECK(heed::cross_entropy(empty, no_labels, Reduction::sum).item() == 0.0);
  CHECK(std::isnan(heed::cross_entropy(empty, no_labels).item()));
}

TEST_CASE("cross_entropy stays finite for logits that would overflow exp", "[loss]") {
  const Tensorf logits({1e4f, 0.f, -1e4f, 3e4f, 3e4f, 3e4f}, Shape{2, 3});
  const auto loss = heed::cross_entropy(logits, IndexTensor({0, 2}, Shape{2}), Reduction::none);
  check_values(loss, {0.0, std::log(3.0)});
}

TEST_CASE("gradcheck of cross_entropy", "[loss][gradcheck]") {
  const IndexTensor labels2({4, 0, 2}, Shape{3});
  const IndexTensor labels3({1, 0, 3, 3, 2, 1}, Shape{2, 3});
  for (const Reduction reduction : {Reduction::none, Reduction::mean, Reduction::sum}) {
    INFO("reduction " << reduction_name(reduction));
    const GradFn ce2 = [&](const GradInputs& in) { return heed::cross_entropy(in[0], labels2, reduction); };
    CHECK_GRADIENTS(ce2, {uniform_leaf({3, 5}, 1)});
    const GradFn ce3 = [&](const GradInputs& in) { return heed::cross_entropy(in[0], labels3, reduction); };
    CHECK_GRADIENTS(ce3, {uniform_leaf({2, 3, 4}, 2)});
  }
  // Composed with other ops, so that the upstream gradient is not a plain projection.
  const GradFn composed = [&](const GradInputs& in) {
    return heed::tanh(heed::cross_entropy(in[0] * in[1], labels3, Reduction::none)).sum();
  };
  CHECK_GRADIENTS(composed, {uniform_leaf({2, 3, 4}, 3), uniform_leaf({4}, 4)});
}

TEST_CASE("cross_entropy agrees with -log_softmax picked at the label", "[loss]") {
  const Tensord logits = heed_test::leaf({3, 4, 6}, 5, -4.0, 4.0);
  const IndexTensor labels({0, 5, 1, 2, 3, 4, 5, 5, 0, 1, 2, 3}, Shape{3, 4});
  const Tensord log_p = heed::log_softmax(logits.detach(), -1);
  const auto loss = heed::cross_entropy(logits, labels, Reduction::none);
  for (index_t r = 0; r < 12; ++r)
    CHECK(loss.data()[r] == Approx(-log_p.data()[r * 6 + labels.data()[r]]).epsilon(1e-12));
}

TEST_CASE("cross_entropy checks its labels and shapes", "[loss][errors]") {
  const auto logits = heed::zeros<float>({3, 5});
  CHECK_ERROR(heed::IndexError, "cross_entropy: label 5 at position (1) of labels (3) is out of range for 5 classes",
              heed::cross_entropy(logits, IndexTensor({0, 5, 1}, Shape{3})));
  CHECK_ERROR(heed::IndexError, "cross_entropy: label -1 at position (2)",
              heed::cross_entropy(logits, IndexTensor({0, 1, -1}, Shape{3})));
  CHECK_ERROR(heed::IndexError, "cross_entropy: label 7 at position (1, 0) of labels (2, 2) is out of range for 4",
              heed::cross_entropy(heed::zeros<float>({2, 2, 4}), IndexTensor({0, 1, 7, 2}, Shape{2, 2})));
  CHECK_ERROR(heed::ShapeError,
              "cross_entropy: labels of shape (4) do not match logits of shape (3, 5); expected labels of shape (3)",
              heed::cross_entropy(logits, IndexTensor({0, 0, 0, 0}, Shape{4})));
  // PyTorch's layout, classes on dim 1, is refused: heed's are last.
  CHECK_ERROR(heed::ShapeError, "labels of shape (2, 3) do not match logits of shape (2, 5, 3)",
              heed::cross_entropy(heed::zeros<float>({2, 5, 3}), IndexTensor({0, 0, 0, 0, 0, 0}, Shape{2, 3})));
  CHECK_ERROR(heed::ShapeError, "cross_entropy: logits must be (..., num_classes), got shape ()",
              heed::cross_entropy(heed::scalar_tensor<float>(1.f), IndexTensor({0}, Shape{})));
  CHECK_ERROR(heed::ValueError, "cross_entropy: labels is an undefined tensor",
              heed::cross_entropy(logits, IndexTensor()));
}

// ---- sequence_mask ------------------------------------------------------------------------

TEST_CASE("sequence_mask blanks the steps past each valid length, as d2l's examples", "[loss]") {
  // d2l 9.7.3: X = [[1, 2, 3], [4, 5, 6]], valid_len [1, 2] -> [[1, 0, 0], [4, 5, 0]]
  const auto X = heed::tensor<float>({{1, 2, 3}, {4, 5, 6}});
  const auto masked = heed::sequence_mask(X, lens({1, 2}, {2}));
  check_values(masked, {1, 0, 0, 4, 5, 0});
  check_values(X, {1, 2, 3, 4, 5, 6});  // a new tensor; d2l's writes into X

  // d2l: sequence_mask(torch.ones(2, 3, 4), torch.tensor([1, 2]), value=-1)
  const auto deep = heed::sequence_mask(heed::ones<float>({2, 3, 4}), lens({1, 2}, {2}), -1);
  REQUIRE(deep.shape() == Shape{2, 3, 4});
  std::vector<double> expected(24, -1.0);
  std::fill_n(expected.begin(), 4, 1.0);       // sequence 0, step 0
  std::fill_n(expected.begin() + 12, 8, 1.0);  // sequence 1, steps 0 and 1
  check_values(deep, expected);

  // The weights of MaskedSoftmaxCELoss: an int64 tensor; a length past num_steps keeps all.
  const auto weights =
      heed::sequence_mask(heed::ones_like(IndexTensor({1, 1, 1, 1, 1, 1}, Shape{3, 2})), lens({5, 1, 0}, {3}));
  CHECK(weights.to_vector() == std::vector<std::int64_t>{1, 1, 1, 0, 0, 0});
}

TEST_CASE("sequence_mask passes the gradient where X passes", "[loss][gradcheck]") {
  auto X = heed::ones<double>({2, 3, 2}).requires_grad_();
  const auto masked = heed::sequence_mask(X, lens({2, 1}, {2}), 7.0);
  CHECK(masked.grad_fn_name() == "SequenceMaskBackward");
  masked.backward(heed::arange<double>(12).reshape({2, 3, 2}));
  check_values(X.grad(), {0, 1, 2, 3, 0, 0, 6, 7, 0, 0, 0, 0});

  const IndexTensor valid_len = lens({3, 0, 1}, {3});
  const GradFn f = [&](const GradInputs& in) { return heed::tanh(heed::sequence_mask(in[0], valid_len, -1.0)); };
  CHECK_GRADIENTS(f, {uniform_leaf({3, 4, 2}, 6)});
}

TEST_CASE("sequence_mask checks X and valid_len", "[loss][errors]") {
  const auto X = heed::zeros<float>({2, 3});
  CHECK_ERROR(heed::ShapeError, "sequence_mask: X must be (batch, num_steps, ...), got shape (3)",
              heed::sequence_mask(heed::zeros<float>({3}), lens({1, 1, 1}, {3})));
  CHECK_ERROR(heed::ShapeError, "sequence_mask: valid_len of shape (3) does not match a batch of 2 sequences",
              heed::sequence_mask(X, lens({1, 1, 1}, {3})));
  CHECK_ERROR(heed::ShapeError, "sequence_mask: valid_len of shape (2, 1)",
              heed::sequence_mask(X, lens({1, 1}, {2, 1})));
  CHECK_ERROR(heed::ValueError, "sequence_mask: valid_len must not be negative, got -1 at index 1",
              heed::sequence_mask(X, lens({1, -1}, {2})));
  CHECK_ERROR(heed::ValueError, "sequence_mask: valid_len is an undefined tensor",
              heed::sequence_mask(X, IndexTensor()));
}

// ---- MaskedSoftmaxCELoss ---------------------------------------------------------------

TEST_CASE("MaskedSoftmaxCELoss of d2l's example is [2.3026, 1.1513, 0]", "[loss]") {
  // d2l 9.7.3: loss(torch.ones(3, 4, 10), torch.ones((3, 4), dtype=torch.long), torch.tensor([4, 2, 0]))
  heed::MaskedSoftmaxCELoss loss;
  const auto l = loss(heed::ones<float>({3, 4, 10}), heed::ones<std::int64_t>({3, 4}), lens({4, 2, 0}, {3}));
  REQUIRE(l.shape() == Shape{3});
  check_values(l, {std::log(10.0), std::log(10.0) / 2, 0.0});
}

TEMPLATE_TEST_CASE("MaskedSoftmaxCELoss matches d2l's, gradients included", "[loss]", float, double) {
  heed::MaskedSoftmaxCELoss loss;
  for (const std::string c : {"mce.d2l", "mce.rand"}) {
    INFO("case " << c);
    Tensor<TestType> pred = leaf<TestType>(golden(), c + ".pred");
    const Tensor<TestType> out =
        loss(pred, golden().tensor<std::int64_t>(c + ".label"), golden().tensor<std::int64_t>(c + ".valid_len"));
    CHECK(out.grad_fn_name() == "MaskedSoftmaxCELossBackward");
    check_close(out, golden().tensor<TestType>(c + ".output"), tolerance<TestType>());
    out.backward(golden().tensor<TestType>(c + ".R"));
    check_close(pred.grad(), golden().tensor<TestType>(c + ".grad.pred"), tolerance<TestType>());
  }
}

TEMPLATE_TEST_CASE("MaskedSoftmaxCELoss(label_smoothing) matches d2l's class given PyTorch's label_smoothing", "[loss]",
                   float, double) {
  for (const auto& [tag, label_smoothing] : {std::pair{"ls10", 0.1}, std::pair{"ls100", 1.0}}) {
    const std::string c = std::string(tag) + ".mce.rand";
    INFO("case " << c);
    const heed::MaskedSoftmaxCELoss loss(label_smoothing);
    CHECK(loss.label_smoothing() == label_smoothing);
    Tensor<TestType> pred = leaf<TestType>(golden(), c + ".pred");
    const auto label = golden().tensor<std::int64_t>(c + ".label");
    const auto valid_len = golden().tensor<std::int64_t>(c + ".valid_len");
    const Tensor<TestType> out = loss(pred, label, valid_len);
    check_close(out, golden().tensor<TestType>(c + ".output"), tolerance<TestType>());
    out.backward(golden().tensor<TestType>(c + ".R"));
    check_close(pred.grad(), golden().tensor<TestType>(c + ".grad.pred"), tolerance<TestType>());
  }
}

TEST_CASE("MaskedSoftmaxCELoss equals d2l's formula written with heed's ops", "[loss][gradcheck]") {
  // weights = sequence_mask(ones_like(label), valid_len)
  // (cross_entropy(pred, label, 'none') * weights).mean(dim=1)
  Tensord pred = uniform_leaf({3, 5, 4}, 7);
  const IndexTensor label({0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 3, 3, 3, 3, 3}, Shape{3, 5});
  const IndexTensor valid_len = lens({5, 2, 0}, {3});
  const Tensord fused = heed::masked_softmax_ce_loss(pred, label, valid_len);
  const Tensord weights = heed::sequence_mask(heed::ones<double>({3, 5}), valid_len);
  const Tensord composed = (heed::cross_entropy(pred, label, Reduction::none) * weights).mean(1);
  check_close(fused, composed, 1e-12);

  const Tensord R({0.5, -2.0, 3.0}, Shape{3});
  fused.backward(R);
  const Tensord fused_grad = pred.grad();
  pred.zero_grad();
  composed.backward(R);
  check_close(fused_grad, pred.grad(), 1e-12);
  // Padded steps get a gradient of exactly 0.
  for (index_t v = 0; v < 4; ++v) CHECK(fused_grad.at({1, 3, v}) == 0.0);

  const GradFn f = [&](const GradInputs& in) { return heed::masked_softmax_ce_loss(in[0], label, valid_len); };
  CHECK_GRADIENTS(f, {uniform_leaf({3, 5, 4}, 8)});
  const IndexTensor long_enough = lens({9, 4, 1}, {3});
  const GradFn g = [&](const GradInputs& in) { return heed::masked_softmax_ce_loss(in[0], label, long_enough).sum(); };
  CHECK_GRADIENTS(g, {uniform_leaf({3, 5, 4}, 9)});
}

TEST_CASE("masked_linear_ce_loss equals the output layer then MaskedSoftmaxCELoss", "[loss][gradcheck]") {
  // 300 classes: two tiles of the classes, the second one short.
  Tensord hidden = uniform_leaf({3, 5, 4}, 11), weight = uniform_leaf({300, 4}, 12), bias = uniform_leaf({300}, 13);
  IndexTensor label = heed::detail::make_tensor<std::int64_t>(Shape{3, 5});
  for (index_t i = 0; i < 15; ++i) label.data()[i] = (i * 97) % 300;
  for (const auto& [valid, mean_steps, label_smoothing] :
       {std::tuple{lens({5, 2, 0}, {3}), index_t(0), 0.0}, std::tuple{lens({9, 4, 1}, {3}), index_t(7), 0.0},
        std::tuple{lens({5, 2, 0}, {3}), index_t(0), 0.1}, std::tuple{lens({9, 4, 1}, {3}), index_t(7), 1.0}}) {
    INFO("label_smoothing " << label_smoothing);
    const Tensord fused = heed::masked_linear_ce_loss(hidden, weight, bias, label, valid, mean_steps, label_smoothing);
    CHECK(fused.grad_fn_name() == "MaskedLinearCELossBackward");
    const Tensord composed =
        heed::masked_softmax_ce_loss(heed::linear(hidden, weight, bias), label, valid, mean_steps, label_smoothing);
    check_close(fused, composed, 1e-12);
    const Tensord R({0.5, -2.0, 3.0}, Shape{3});
    std::vector<Tensord> grads;
    for (const Tensord& out : {fused, composed}) {
      out.backward(R);
      for (Tensord* p : {&hidden, &weight, &bias}) grads.push_back(p->grad()), p->zero_grad();
    }
    for (std::size_t i = 0; i < 3; ++i) check_close(grads[i], grads[i + 3], 1e-12);
  }
  // A step past valid_len gets a gradient of exactly 0.
  heed::masked_linear_ce_loss(hidden, weight, bias, label, lens({5, 2, 0}, {3})).sum().backward();
  for (index_t d = 0; d < 4; ++d) CHECK(hidden.grad().at({1, 3, d}) == 0.0);
  for (index_t d = 0; d < 4; ++d) CHECK(hidden.grad().at({2, 0, d}) == 0.0);

  const IndexTensor small_label({0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 3, 3, 3, 3, 3}, Shape{3, 5});
  const GradFn f = [&](const GradInputs& in) {
    return heed::masked_linear_ce_loss(in[0], in[1], in[2], small_label, lens({5, 2, 1}, {3}));
  };
  CHECK_GRADIENTS(f, {uniform_leaf({3, 5, 3}, 14), uniform_leaf({4, 3}, 15), uniform_leaf({4}, 16)});
  const GradFn no_bias = [&](const GradInputs& in) {
    return heed::masked_linear_ce_loss(in[0], in[1], Tensord(), small_label, lens({3, 5, 4}, {3})).sum();
  };
  CHECK_GRADIENTS(no_bias, {uniform_leaf({3, 5, 3}, 17), uniform_leaf({4, 3}, 18)});
}

TEST_CASE("masked_linear_ce_loss forms its gradient with the forward for a uniform upstream gradient",
          "[loss][gradcheck]") {
  // 40 sequences of 9 steps, 300 classes: the counted rows (221) make two row blocks of
  // kRowTile, the classes two tiles. The last sequence counts no step.
  static_assert(heed::detail::kRowTile < 221 && heed::detail::kClassTile < 300);
  Tensord hidden = uniform_leaf({40, 9, 4}, 21), weight = uniform_leaf({300, 4}, 22), bias = uniform_leaf({300}, 23);
  IndexTensor label = heed::detail::make_tensor<std::int64_t>(Shape{40, 9});
  for (index_t i = 0; i < label.numel(); ++i) label.data()[i] = (i * 131) % 300;
  IndexTensor valid = heed::detail::make_tensor<std::int64_t>(Shape{40});
  for (index_t b = 0; b < 40; ++b) valid.data()[b] = b == 39 ? 0 : 1 + (b * 7) % 11;  // some past num_steps
  const auto gradients = [&](const Tensord& out, const Tensord& upstream, bool retain_graph = false) {
    out.backward(upstream, retain_graph);
    std::vector<Tensord> grads;
    for (Tensord* p : {&hidden, &weight, &bias}) grads.push_back(p->grad()), p->zero_grad();
    return grads;
  };
  const auto fused = [&] { return heed::masked_linear_ce_loss(hidden, weight, bias, label, valid); };
  const Tensord composed = heed::masked_softmax_ce_loss(heed::linear(hidden, weight, bias), label, valid);
  check_close(fused(), composed, 1e-12);

  Tensord ones = heed::ones<double>({40}), quarters = heed::full<double>({40}, 0.25);
  Tensord uneven = heed::ones<double>({40});
  uneven.data()[39] = 7.0;  // not uniform, but the sequence it scales counts no step
  const std::vector<Tensord> reference = gradients(composed, ones);
  const std::vector<Tensord> formed = gradients(fused(), ones), scaled = gradients(fused(), quarters);
  const std::vector<Tensord> recomputed = gradients(fused(), uneven);
  for (std::size_t i = 0; i < 3; ++i) {
    check_close(formed[i], reference[i], 1e-12);
    check_close(scaled[i], heed::mul(reference[i], 0.25), 1e-12);
    // The same products on the same tiles in the same order: the same bits.
    REQUIRE(std::memcmp(formed[i].data(), recomputed[i].data(), sizeof(double) * formed[i].numel()) == 0);
  }
  // A second backward through a retained graph computes the logits again: the same bits.
  const Tensord out = fused();
  const std::vector<Tensord> first = gradients(out, ones, true), second = gradients(out, ones);
  for (std::size_t i = 0; i < 3; ++i)
    REQUIRE(std::memcmp(first[i].data(), second[i].data(), sizeof(double) * first[i].numel()) == 0);
  // Without a gradient the forward keeps a tile at a time; its losses are the same bits.
  Tensord no_grad;
  {
    const heed::NoGradGuard guard;
    no_grad = fused();
  }
  CHECK(!no_grad.requires_grad());
  REQUIRE(std::memcmp(no_grad.data(), out.data(), sizeof(double) * out.numel()) == 0);
  // An empty batch: an upstream gradient of no elements, and gradients of zeros.
  const Tensord nothing = uniform_leaf({0, 9, 4}, 27);
  heed::masked_linear_ce_loss(nothing, weight, bias, heed::detail::make_tensor<std::int64_t>(Shape{0, 9}),
                              heed::detail::make_tensor<std::int64_t>(Shape{0}))
      .sum()
      .backward();
  CHECK(nothing.grad().shape() == Shape{0, 9, 4});
  CHECK(heed::sum(heed::abs(weight.grad())).item() == 0.0);
  CHECK(heed::sum(heed::abs(bias.grad())).item() == 0.0);
  // Finite differences: the uniform path's at a small size in the test above (no_bias);
  // across tiles the gradients equal the composed ops' to 1e-12 (above), whose own
  // finite-difference checks are op-table entries. (Differences at this size took 157 s
  // under the sanitizers.)
}

TEST_CASE("masked_linear_ce_loss checks its inputs", "[loss][errors]") {
  const auto hidden = heed::zeros<float>({2, 3, 4}), weight = heed::zeros<float>({5, 4});
  const auto bias = heed::zeros<float>({5});
  const IndexTensor label({0, 1, 2, 3, 0, 1}, Shape{2, 3});
  const IndexTensor valid_len = lens({3, 1}, {2});
  CHECK_ERROR(heed::ShapeError, "masked_linear_ce_loss: hidden must be (batch, num_steps, in_features), got (6, 4)",
              heed::masked_linear_ce_loss(heed::zeros<float>({6, 4}), weight, bias, label, valid_len));
  CHECK_ERROR(heed::ShapeError, "masked_linear_ce_loss: input of shape (2, 3, 4) does not end in in_features = 3",
              heed::masked_linear_ce_loss(hidden, heed::zeros<float>({5, 3}), bias, label, valid_len));
  CHECK_ERROR(heed::ShapeError, "masked_linear_ce_loss: bias of shape (4) does not match the weight's 5 classes",
              heed::masked_linear_ce_loss(hidden, weight, heed::zeros<float>({4}), label, valid_len));
  CHECK_ERROR(heed::ShapeError, "masked_linear_ce_loss: labels of shape (3, 2) do not match input of shape (2, 3, 4)",
              heed::masked_linear_ce_loss(hidden, weight, bias, label.reshape({3, 2}), valid_len));
  CHECK_ERROR(
      heed::IndexError,
      "masked_linear_ce_loss: label 5 at position (1, 2) of labels (2, 3) is out of range for 5 classes",
      heed::masked_linear_ce_loss(hidden, weight, bias, IndexTensor({0, 1, 2, 3, 0, 5}, Shape{2, 3}), valid_len));
  CHECK_ERROR(heed::ValueError, "masked_linear_ce_loss: valid_len must not be negative, got -2 at index 0",
              heed::masked_linear_ce_loss(hidden, weight, bias, label, lens({-2, 1}, {2})));
  CHECK_ERROR(heed::ValueError, "masked_linear_ce_loss: mean_steps = 2 is fewer than hidden's 3 steps",
              heed::masked_linear_ce_loss(hidden, weight, bias, label, valid_len, 2));
  CHECK_ERROR(heed::ShapeError, "linear_cross_entropy: weight (0, 4) has no classes",
              heed::linear_cross_entropy(heed::zeros<float>({3, 4}), heed::zeros<float>({0, 4}), Tensorf(),
                                         IndexTensor({0, 0, 0}, Shape{3})));
}

TEST_CASE("MaskedSoftmaxCELoss checks pred, label and valid_len", "[loss][errors]") {
  heed::MaskedSoftmaxCELoss loss;
  const auto pred = heed::zeros<float>({2, 3, 4});
  const IndexTensor label({0, 1, 2, 3, 0, 1}, Shape{2, 3});
  const IndexTensor valid_len = lens({3, 1}, {2});
  CHECK_ERROR(heed::ShapeError, "MaskedSoftmaxCELoss: pred must be (batch, num_steps, vocab_size), got (6, 4)",
              loss(heed::zeros<float>({6, 4}), label, valid_len));
  CHECK_ERROR(heed::ShapeError,
              "MaskedSoftmaxCELoss: label of shape (3, 2) does not match pred of shape (2, 3, 4); expected label of "
              "shape (2, 3)",
              loss(pred, label.reshape({3, 2}), valid_len));
  CHECK_ERROR(heed::ShapeError, "MaskedSoftmaxCELoss: valid_len of shape (3) does not match a batch of 2 sequences",
              loss(pred, label, lens({1, 1, 1}, {3})));
  CHECK_ERROR(heed::ValueError, "MaskedSoftmaxCELoss: valid_len must not be negative, got -2 at index 0",
              loss(pred, label, lens({-2, 1}, {2})));
  // Padded labels are checked too, as PyTorch's cross entropy checks every target.
  CHECK_ERROR(heed::IndexError,
              "MaskedSoftmaxCELoss: label 4 at position (1, 2) of labels (2, 3) is out of range for 4 classes",
              loss(pred, IndexTensor({0, 1, 2, 3, 0, 4}, Shape{2, 3}), valid_len));
  CHECK_ERROR(heed::ValueError, "MaskedSoftmaxCELoss: label is undefined", loss(pred, IndexTensor(), valid_len));
  CHECK_ERROR(heed::ValueError, "MaskedSoftmaxCELoss: mean_steps = 2 is fewer than pred's 3 steps",
              loss(pred, label, valid_len, 2));
}

TEST_CASE("MaskedSoftmaxCELoss with mean_steps is the loss of the batch before its padding was cut", "[loss]") {
  // (2, 5, 4) logits whose last two steps are padding for both sequences (valid 3 and 2).
  heed::Generator gen(7);
  const Tensord padded = heed::randn<double>({2, 5, 4}, gen).requires_grad_();
  const IndexTensor padded_label({0, 1, 2, 3, 3, 3, 2, 1, 0, 0}, Shape{2, 5});
  const IndexTensor valid_len = lens({3, 2}, {2});
  const Tensord cut = padded.detach().narrow(1, 0, 3).requires_grad_();
  const IndexTensor cut_label({0, 1, 2, 3, 2, 1}, Shape{2, 3});
  heed::MaskedSoftmaxCELoss loss;
  const Tensord whole = loss(padded, padded_label, valid_len);
  const Tensord part = loss(cut, cut_label, valid_len, 5);
  check_close(part, whole, 1e-15);
  whole.sum().backward();
  part.sum().backward();
  check_close(cut.grad(), padded.grad().narrow(1, 0, 3), 1e-15);
  // Without mean_steps the divisor is the steps pred has.
  check_close(loss(cut, cut_label, valid_len), whole * (5.0 / 3.0), 1e-14);
}

// ---- Adam ------------------------------------------------------------------------------

namespace {

struct AdamCase {
  const char* name;
  double lr, beta1, beta2, eps, weight_decay;
};

/// The loss of the golden Adam problem `problem` at params.
template <typename T>
Tensor<T> adam_problem_loss(const std::string& problem, const std::vector<Tensor<T>>& params) {
  if (problem == "adam.linreg") {
    const Tensor<T> X = golden().tensor<T>("adam.linreg.X"), y = golden().tensor<T>("adam.linreg.y");
    return (heed::matmul(X, params[0]) + params[1] - y).pow(T(2)).mean();
  }
  // 0.5 ||p0 - c0||² + 0.5 ||p1 - c1||²
  return (params[0] - golden().tensor<T>("adam.quad.c0")).pow(T(2)).sum() * T(0.5) +
         (params[1] - golden().tensor<T>("adam.quad.c1")).pow(T(2)).sum() * T(0.5);
}

}  // namespace

TEMPLATE_TEST_CASE("Adam follows torch.optim.Adam's trajectory, with and without weight decay", "[optim]", float,
                   double) {
  const double atol = std::is_same_v<TestType, float> ? 1e-6 : 1e-12;
  const std::string dtype = std::is_same_v<TestType, float> ? "float32" : "float64";
  // The same arguments as make_training_golden.py gives torch.optim.Adam.
  const AdamCase cases[] = {{"adam.quad", 0.1, 0.9, 0.999, 1e-8, 0.0},
                            {"adam.quad_wd", 0.05, 0.8, 0.95, 1e-6, 0.1},
                            {"adam.linreg", 0.1, 0.9, 0.999, 1e-8, 0.01}};
  for (const AdamCase& c : cases) {
    INFO("case " << c.name << " in " << dtype);
    const std::string prefix = std::string(c.name) + "." + dtype;
    const Tensor<TestType> paths[] = {golden().tensor<TestType>(prefix + ".p0"),
                                      golden().tensor<TestType>(prefix + ".p1")};
    std::vector<Tensor<TestType>> params;
    for (const auto& path : paths) params.push_back(path.select(0, 0).clone().requires_grad_());
    heed::Adam<TestType> optimizer(params, c.lr, c.beta1, c.beta2, c.eps, c.weight_decay);
    for (index_t step = 1; step <= 5; ++step) {
      INFO("step " << step);
      optimizer.zero_grad();
      adam_problem_loss(c.name, params).backward();
      optimizer.step();
      for (std::size_t i = 0; i < 2; ++i) check_near(params[i], paths[i].select(0, step), atol);
    }
    for (std::size_t i = 0; i < 2; ++i) {
      const heed::AdamState<TestType>& state = optimizer.state()[i];
      CHECK(state.step == 5);
      check_near(state.exp_avg, golden().tensor<TestType>(prefix + ".exp_avg" + std::to_string(i)), atol);
      check_near(state.exp_avg_sq, golden().tensor<TestType>(prefix + ".exp_avg_sq" + std::to_string(i)), atol);
    }
  }
}

TEST_CASE("Adam's first step moves each parameter by lr against the sign of its gradient", "[optim]") {
  auto p = heed::Tensord({1.0, -2.0}, Shape{2}).requires_grad_();
  auto idle = heed::Tensord({5.0}, Shape{1}).requires_grad_();  // never reached by backward
  heed::Adam<double> optimizer({p, idle}, /*lr=*/0.01);
  CHECK(optimizer.lr() == 0.01);
  (p * heed::Tensord({3.0, -0.5}, Shape{2})).sum().backward();
  optimizer.step();
  // m̂ = g, v̂ = g²: the update is lr · g / (|g| + eps).
  check_values(p, {1.0 - 0.01 * 3.0 / (3.0 + 1e-8), -2.0 + 0.01 * 0.5 / (0.5 + 1e-8)}, 1e-15);
  const auto& state = optimizer.state();
  CHECK(state[0].step == 1);
  check_values(state[0].exp_avg, {0.1 * 3.0, 0.1 * -0.5}, 1e-15);
  check_values(state[0].exp_avg_sq, {0.001 * 9.0, 0.001 * 0.25}, 1e-15);
  // A parameter without a gradient is left alone, its step count and state too.
  check_values(idle, {5.0});
  CHECK(state[1].step == 0);
  CHECK_FALSE(state[1].exp_avg.defined());

  // zero_grad forgets the gradients; a step then changes nothing.
  optimizer.zero_grad();
  CHECK_FALSE(p.grad().defined());
  const auto before = p.clone();
  optimizer.step();
  check_values(p, before.to_vector());
  CHECK(state[0].step == 1);

  // set_lr(0) keeps the parameters but still counts the step, as PyTorch.
  optimizer.set_lr(0.0);
  (p * 2.0).sum().backward();
  optimizer.step();
  check_values(p, before.to_vector());
  CHECK(state[0].step == 2);
}

TEST_CASE("Adam's update of a parameter invalidates what autograd saved of it", "[optim]") {
  auto w = heed::Tensord({1.0, 2.0}, Shape{2}).requires_grad_();
  heed::Adam<double> optimizer({w});
  const auto y = (w * w).sum();  // MulBackward saved w
  y.backward(Tensord(), /*retain_graph=*/true);
  optimizer.step();
  CHECK_THROWS_AS(y.backward(), heed::AutogradError);
}

TEST_CASE("Adam and SGD check their hyper-parameters and parameters", "[optim][errors]") {
  auto w = heed::zeros<float>({2}).requires_grad_();
  CHECK_ERROR(heed::ValueError, "Adam: invalid learning rate: -0.1", heed::Adam<float>({w}, -0.1));
  CHECK_ERROR(heed::ValueError, "Adam: invalid beta parameter at index 0: 1", heed::Adam<float>({w}, 0.1, 1.0));
  CHECK_ERROR(heed::ValueError, "Adam: invalid beta parameter at index 1: -0.5",
              heed::Adam<float>({w}, 0.1, 0.9, -0.5));
  CHECK_ERROR(heed::ValueError, "Adam: invalid epsilon value: -1", heed::Adam<float>({w}, 0.1, 0.9, 0.999, -1.0));
  CHECK_ERROR(heed::ValueError, "Adam: invalid weight_decay value: -0.01",
              heed::Adam<float>({w}, 0.1, 0.9, 0.999, 1e-8, -0.01));
  CHECK_ERROR(heed::ValueError, "Adam: parameter 1 must be a leaf tensor that requires grad",
              heed::Adam<float>({w, heed::zeros<float>({2})}));
  CHECK_ERROR(heed::ValueError, "Adam: parameter 0 must be a leaf tensor that requires grad",
              heed::Adam<float>({w * 2.f}));
  // An empty list is a module whose parameters were never registered: it would train nothing.
  CHECK_ERROR(heed::ValueError, "Adam: got an empty parameter list", heed::Adam<float>({}));
  CHECK_ERROR(heed::ValueError, "SGD: got an empty parameter list", heed::SGD<float>({}, 0.1));
  heed::Adam<float> optimizer({w});
  CHECK_ERROR(heed::ValueError, "Adam: invalid learning rate: nan",
              optimizer.set_lr(std::numeric_limits<double>::quiet_NaN()));
  CHECK(optimizer.lr() == 1e-3);
}

// ---- gradient clipping ----------------------------------------------------------------------

TEST_CASE("clip_grad_norm scales every gradient by max_norm / norm when norm exceeds it", "[optim]") {
  auto a = heed::zeros<double>({2}).requires_grad_();
  auto b = heed::zeros<double>({1}).requires_grad_();
  auto unused = heed::zeros<double>({3}).requires_grad_();  // no gradient: skipped
  const auto set_grads = [&] {
    a.zero_grad(), b.zero_grad();
    ((a * heed::Tensord({3.0, 4.0}, Shape{2})).sum() + b.sum() * 12.0).backward();  // norm √(9 + 16 + 144) = 13
  };
  const std::vector<Tensord> params{a, b, unused};

  SECTION("above the threshold: clipped to norm max_norm") {
    set_grads();
    CHECK(heed::clip_grad_norm(params, 1.0) == Approx(13.0).epsilon(1e-15));
    check_values(a.grad(), {3.0 / 13, 4.0 / 13}, 1e-15);
    check_values(b.grad(), {12.0 / 13}, 1e-15);
    CHECK(heed::clip_grad_norm(params, 1.0) == Approx(1.0).epsilon(1e-15));  // now at the threshold
    CHECK_FALSE(unused.grad().defined());
  }
  SECTION("at or below the threshold: unchanged (d2l clips only when norm > max_norm)") {
    for (const double max_norm : {20.0, 13.0}) {
      set_grads();
      CHECK(heed::clip_grad_norm(params, max_norm) == 13.0);
      check_values(a.grad(), {3.0, 4.0});
      check_values(b.grad(), {12.0});
    }
  }
  SECTION("max_norm 0 zeroes the gradients; no gradient at all gives norm 0") {
    set_grads();
    CHECK(heed::clip_grad_norm(params, 0.0) == 13.0);
    check_values(a.grad(), {0.0, 0.0});
    CHECK(heed::clip_grad_norm(std::vector<Tensord>{unused}, 1.0) == 0.0);
  }
  SECTION("float: the norm is summed in double") {
    auto big = heed::full<float>({1000}, 1e-3f).requires_grad_();
    (big * 1.f).sum().backward();  // gradient 1 everywhere: norm √1000
    CHECK(heed::clip_grad_norm(std::vector<Tensorf>{big}, 1.0) == Approx(std::sqrt(1000.0)));
    CHECK(big.grad().at({7}) == Approx(1 / std::sqrt(1000.0)));
  }
  CHECK_ERROR(heed::ValueError, "clip_grad_norm: max_norm must be >= 0, got -1", heed::clip_grad_norm(params, -1.0));
  CHECK_ERROR(heed::ValueError, "clip_grad_norm: max_norm must be >= 0, got nan",
              heed::clip_grad_norm(params, std::numeric_limits<double>::quiet_NaN()));
}

TEST_CASE("grad_clipping(net, theta) clips a module's gradients as d2l's", "[optim]") {
  heed::Generator gen(3);
  heed::Linear<double> net(3, 2, true, gen);
  const auto x = heed::randn<double>({4, 3}, gen);
  net(x).pow(2.0).sum().backward();
  double norm2 = 0.0;
  for (const auto& p : net.parameters()) norm2 += p.grad().array().square().sum();
  REQUIRE(std::sqrt(norm2) > 0.5);
  std::vector<Tensord> before;
  for (const auto& p : net.parameters()) before.push_back(p.grad().clone());
  CHECK(heed::grad_clipping(net, 0.5) == Approx(std::sqrt(norm2)).epsilon(1e-14));
  const auto params = net.parameters();
  for (std::size_t i = 0; i < params.size(); ++i)
    check_close(params[i].grad(), before[i] * (0.5 / std::sqrt(norm2)), 1e-15);
  CHECK(heed::grad_clipping(net, 0.5) == Approx(0.5).epsilon(1e-14));
}

TEST_CASE("LrSchedule gives constant, inverse square root and cosine rates with a linear warm-up", "[optim]") {
  const double kPi = std::acos(-1.0);
  const auto flat = heed::LrSchedule::constant(0.005);
  CHECK(flat(1) == 0.005);
  CHECK(flat(1000000) == 0.005);
  CHECK(flat.name() == "constant");
  const auto warm = heed::LrSchedule::constant(0.01, 4);
  CHECK(warm(1) == Approx(0.0025).epsilon(1e-15));
  CHECK(warm(3) == Approx(0.0075).epsilon(1e-15));
  CHECK(warm(4) == 0.01);
  CHECK(warm(5) == 0.01);

  // Vaswani et al.'s rate, d_model^-0.5 · min(step^-0.5, step · warmup^-1.5), at d_model 512
  // and 4000 warm-up steps, is inverse_sqrt with lr = (512 · 4000)^-0.5.
  const auto noam = heed::LrSchedule::inverse_sqrt(1.0 / std::sqrt(512.0 * 4000.0), 4000);
  CHECK(noam.name() == "inverse_sqrt");
  for (const std::int64_t step : {1, 2, 100, 3999, 4000, 4001, 10000, 100000}) {
    const double s = static_cast<double>(step);
    INFO("step " << step);
    CHECK(noam(step) ==
          Approx(std::pow(512.0, -0.5) * std::min(std::pow(s, -0.5), s * std::pow(4000.0, -1.5))).epsilon(1e-13));
  }
  CHECK(noam(4000) == Approx(noam.lr()).epsilon(1e-15));  // the peak

  const auto cos = heed::LrSchedule::cosine(1e-3, 10, 110, 1e-5);
  CHECK(cos.name() == "cosine");
  CHECK(cos(5) == Approx(5e-4).epsilon(1e-14));                         // warm-up
  CHECK(cos(10) == Approx(1e-3).epsilon(1e-14));                        // the peak
  CHECK(cos(60) == Approx(1e-5 + (1e-3 - 1e-5) * 0.5).epsilon(1e-14));  // half-way: cos(π/2) = 0
  CHECK(cos(35) == Approx(1e-5 + (1e-3 - 1e-5) * 0.5 * (1.0 + std::cos(kPi / 4))).epsilon(1e-14));
  CHECK(cos(110) == 1e-5);
  CHECK(cos(500) == 1e-5);
  for (std::int64_t step = 11; step < 110; ++step) CHECK(cos(step + 1) < cos(step));  // decreasing
  CHECK(heed::LrSchedule::cosine(2.0, 0, 4)(1) == Approx(2.0 * 0.5 * (1.0 + std::cos(kPi / 4))).epsilon(1e-15));

  CHECK_ERROR(heed::ValueError, "LrSchedule: lr must be positive and finite, got 0", heed::LrSchedule::constant(0.0));
  CHECK_ERROR(heed::ValueError, "LrSchedule: warmup_steps must be >= 0, got -1", heed::LrSchedule::constant(1.0, -1));
  CHECK_ERROR(heed::ValueError, "LrSchedule::inverse_sqrt: warmup_steps must be >= 1, got 0",
              heed::LrSchedule::inverse_sqrt(1.0, 0));
  CHECK_ERROR(heed::ValueError, "LrSchedule::cosine: total_steps (10) must exceed warmup_steps (10)",
              heed::LrSchedule::cosine(1.0, 10, 10));
  CHECK_ERROR(heed::ValueError, "LrSchedule::cosine: min_lr must be in [0, lr = 1], got 2",
              heed::LrSchedule::cosine(1.0, 0, 10, 2.0));
  CHECK_ERROR(heed::ValueError, "LrSchedule: step must be >= 1, got 0", flat(0));
}

// ---- BLEU ---------------------------------------------------------------------------------

TEST_CASE("bleu matches d2l's on its examples, partial matches, repeats and short predictions", "[bleu]") {
  // BLEU_CASES of make_training_golden.py, in its order.
  const std::vector<std::tuple<std::string, std::string, int>> cases{
      {"va !", "va !", 2},
      {"j'ai perdu .", "j'ai perdu .", 2},
      {"il est riche .", "il est calme .", 2},
      {"je suis <unk> .", "je suis chez moi .", 2},
      {"je suis chez .", "je suis chez moi .", 3},
      {"il est calme .", "il est calme .", 4},
      {"a a a a", "a a b", 2},
      {"a b a b a b", "a b a b", 3},
      {"the the the the the the the", "the cat is on the mat", 1},
      {"le chat est sur le tapis", "le chat est sur le tapis bleu", 4},
      {"x y", "x y z w", 2},
      {"a b c d e", "a b", 2},
      {"c b a", "a b c", 2},
      {"a  b", "a  b", 2},
      {"", "a", 1},
      {"", "", 1},
      {"a b", "b a", 3},
      {"a", "a b c", 2},
  };
  const auto scores = golden().tensor<double>("bleu.scores");
  const auto d2l_raises = golden().tensor<std::int64_t>("bleu.d2l_raises");
  REQUIRE(scores.numel() == static_cast<index_t>(cases.size()));
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const auto& [pred, label, k] = cases[i];
    INFO("bleu('" << pred << "', '" << label << "', " << k << ")");
    const double score = heed::bleu(pred, label, k);
    CHECK(score == Approx(scores.data()[i]).epsilon(1e-14).margin(1e-15));
    // Where d2l divides by zero (fewer than k predicted tokens) heed's score is 0.
    if (d2l_raises.data()[i]) CHECK(score == 0.0);
  }
  CHECK(heed::bleu("va !", "va !", 2) == 1.0);
  // By hand: one of four unigrams wrong (p1 = 3/4), two of three bigrams wrong (p2 = 1/3).
  CHECK(heed::bleu("il est riche .", "il est calme .", 2) == Approx(std::sqrt(0.75) * std::pow(1.0 / 3, 0.25)));
  // The brevity penalty alone: exp(1 − 4/2), every n-gram matching.
  CHECK(heed::bleu("x y", "x y z w", 2) == Approx(std::exp(-1.0)));
}

TEST_CASE("bleu on token lists equals bleu on the joined strings", "[bleu]") {
  using Tokens = std::vector<std::string>;
  CHECK(heed::bleu(Tokens{"je", "suis", "chez", "."}, Tokens{"je", "suis", "chez", "moi", "."}, 3) ==
        heed::bleu("je suis chez .", "je suis chez moi .", 3));
  CHECK(heed::bleu(Tokens{"a", "", "b"}, Tokens{"a", "", "b"}, 2) == heed::bleu("a  b", "a  b", 2));
  CHECK(heed::bleu(Tokens{}, Tokens{"a"}, 1) == 0.0);  // no tokens: 0, where d2l divides by zero
  CHECK(heed::bleu(Tokens{"a"}, Tokens{}, 1) == 0.0);
  CHECK_ERROR(heed::ValueError, "bleu: k must be at least 1, got 0", heed::bleu("va !", "va !", 0));
  CHECK_ERROR(heed::ValueError, "bleu: k must be at least 1, got -2", heed::bleu(Tokens{"a"}, Tokens{"a"}, -2));
}

TEST_CASE("corpus_bleu reproduces sacreBLEU's documented example", "[bleu]") {
  // sacreBLEU's README: sys = ['The dog bit the man.', "It wasn't surprising.", 'The man had just
  // bitten him.'] against two reference streams prints "BLEU = 48.53 82.4/50.0/45.5/37.5 (BP =
  // 0.943 ratio = 0.944 hyp_len = 17 ref_len = 18)". Its 13a tokeniser splits off the final
  // periods and keeps "wasn't" whole, so these are the same sentences tokenised.
  const std::vector<std::string> hypotheses{"The dog bit the man .", "It wasn't surprising .",
                                            "The man had just bitten him ."};
  const std::vector<std::vector<std::string>> references{{"The dog bit the man .", "The dog had bit the man ."},
                                                         {"It was not unexpected .", "No one was surprised ."},
                                                         {"The man bit him first .", "The man had bitten the dog ."}};
  const heed::CorpusBleu s = heed::corpus_bleu(hypotheses, references);
  CHECK(s.to_string() == "BLEU = 48.53 82.4/50.0/45.5/37.5 (BP = 0.943 ratio = 0.944 hyp_len = 17 ref_len = 18)");
  CHECK(s.counts == std::vector<long>{14, 7, 5, 3});
  CHECK(s.totals == std::vector<long>{17, 14, 11, 8});
  CHECK(s.sys_len == 17);
  CHECK(s.ref_len == 18);  // closest lengths 6, 5 and 7
  const double expected =
      std::exp(1.0 - 18.0 / 17.0) * 100.0 * std::pow(14.0 / 17 * 7.0 / 14 * 5.0 / 11 * 3.0 / 8, 0.25);
  CHECK(s.score == Approx(expected).epsilon(1e-14));
}

TEST_CASE("corpus_bleu sums statistics over the corpus, clips by the best reference and smooths as exp", "[bleu]") {
  // A perfect corpus; whitespace runs and a trailing newline do not make tokens.
  CHECK(heed::corpus_bleu({"je suis  chez moi .\n", "va !"}, {{"je suis chez moi ."}, {"va !"}}).score ==
        Approx(100.0).epsilon(1e-14));
  // Clipping: "a a a a" against references holding "a" twice and three times matches 3 unigrams.
  const heed::CorpusBleu clipped = heed::corpus_bleu({"a a a a"}, {{"a a b", "a b a a"}}, 1);
  CHECK(clipped.counts == std::vector<long>{3});
  CHECK(clipped.ref_len == 4);  // the closest of 3 and 4 to the hypothesis's 4
  CHECK(clipped.score == Approx(75.0).epsilon(1e-14));
  // The closest reference length, ties to the shorter: 4 and 6 are both 1 away from 5.
  CHECK(heed::corpus_bleu({"a b c d e"}, {{"a b c d e f", "a b c d"}}, 1).ref_len == 4);
  // The brevity penalty is the corpus's: 2 + 2 tokens against 2 + 4.
  const heed::CorpusBleu short_corpus = heed::corpus_bleu({"x y", "p q"}, {{"x y"}, {"p q r s"}}, 2);
  CHECK(short_corpus.bp == Approx(std::exp(1.0 - 6.0 / 4.0)).epsilon(1e-14));
  CHECK(short_corpus.score == Approx(std::exp(1.0 - 6.0 / 4.0) * 100.0).epsilon(1e-14));
  // exp smoothing: no bigram matches, so p2 = 100 / (2 · 2); no trigram: 100 / (4 · 1).
  const heed::CorpusBleu smoothed = heed::corpus_bleu({"c b a"}, {{"a b c"}}, 3);
  CHECK(smoothed.counts == std::vector<long>{3, 0, 0});
  CHECK(smoothed.precisions[1] == Approx(25.0).epsilon(1e-14));
  CHECK(smoothed.precisions[2] == Approx(25.0).epsilon(1e-14));
  CHECK(smoothed.score == Approx(std::cbrt(100.0 * 25.0 * 25.0)).epsilon(1e-14));
  // No match at all, no hypothesis 4-gram, no reference, an empty corpus: 0.
  CHECK(heed::corpus_bleu({"x y z w"}, {{"a b c d"}}).score == 0.0);
  CHECK(heed::corpus_bleu({"a b c"}, {{"a b c"}}).score == Approx(0.0).margin(1e-300));
  CHECK(heed::corpus_bleu({"a b c"}, {{}}).score == 0.0);
  CHECK(heed::corpus_bleu({}, {}).score == 0.0);
  CHECK(heed::corpus_bleu({}, {}).to_string() ==
        "BLEU = 0.00 0.0/0.0/0.0/0.0 (BP = 1.000 ratio = 0.000 hyp_len = 0 ref_len = 0)");
  CHECK_ERROR(heed::ValueError, "corpus_bleu: 2 hypotheses but 1 reference lists",
              heed::corpus_bleu({"a", "b"}, {{"a"}}));
  CHECK_ERROR(heed::ValueError, "corpus_bleu: max_order must be at least 1, got 0",
              heed::corpus_bleu({"a"}, {{"a"}}, 0));
}
