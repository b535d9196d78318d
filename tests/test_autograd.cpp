// Autograd engine semantics, and finite-difference checks of what the op table
// (tests/op_table.hpp, run by test_op_table.cpp) does not cover.
#include <catch2/catch.hpp>
#include <heed/heed.hpp>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "check.hpp"

namespace {

using heed::Tensord;
using Inputs = std::vector<Tensord>;
using Fn = std::function<Tensord(const Inputs&)>;
using heed_test::leaf;
using heed_test::run_gradcheck;

std::vector<double> values(const Tensord& t) { return t.to_vector(); }

}  // namespace

using Catch::Matchers::Contains;

// ---- engine semantics ----------------------------------------------------------------------

TEST_CASE("a tensor used twice gets the sum of both gradients", "[autograd]") {
  auto x = heed::tensor<double>({1, 2, 3}).requires_grad_();
  auto y = (x * x + x).sum();
  y.backward();
  CHECK(x.grad().to_vector() == std::vector<double>{3, 5, 7});
}

TEST_CASE("leaves, results and their grad_fn names", "[autograd]") {
  auto x = heed::tensor<double>({1, 2});
  CHECK_FALSE(x.requires_grad());
  CHECK(x.is_leaf());
  CHECK(x.grad_fn_name().empty());
  CHECK_FALSE((x * 2.0).requires_grad());  // nothing to record
  CHECK((x * 2.0).is_leaf());

  x.requires_grad_();
  CHECK(x.requires_grad());
  CHECK(x.is_leaf());
  CHECK_FALSE(x.grad().defined());  // no backward yet

  auto y = x * 2.0;
  CHECK(y.requires_grad());
  CHECK_FALSE(y.is_leaf());
  CHECK(y.grad_fn_name() == "MulBackward");
  CHECK((x + x).grad_fn_name() == "AddBackward");
  CHECK(x.exp().grad_fn_name() == "ExpBackward");
  CHECK(x.sum().grad_fn_name() == "SumBackward");
  CHECK(x.reshape({2, 1}).grad_fn_name() == "ViewBackward");
  // PyTorch's names for products: torch.mm's MmBackward0, torch.bmm's BmmBackward0.
  CHECK(heed::matmul(x.reshape({2, 1}), x.reshape({1, 2})).grad_fn_name() == "MmBackward");
  CHECK(heed::matmul(x.reshape({1, 2, 1}), x.reshape({1, 1, 2})).grad_fn_name() == "BmmBackward");
  CHECK(heed::matmul(x.reshape({1, 2}), x.reshape({1, 2}), false, true).grad_fn_name() == "MmBackward");

  x.requires_grad_(false);
  CHECK_FALSE(x.requires_grad());
}

TEST_CASE("gradients accumulate across backward calls until zero_grad", "[autograd]") {
  auto x = heed::tensor<double>({1, 2, 3}).requires_grad_();
  (x * x).sum().backward();  // 2x
  CHECK(values(x.grad()) == std::vector<double>{2, 4, 6});
  (x * 3.0).sum().backward();  // + 3
  CHECK(values(x.grad()) == std::vector<double>{5, 7, 9});
  x.zero_grad();
  CHECK_FALSE(x.grad().defined());
  (x * 3.0).sum().backward();
  CHECK(values(x.grad()) == std::vector<double>{3, 3, 3});
}

TEST_CASE("a diamond graph sums the gradients of both paths", "[autograd]") {
  auto x = heed::tensor<double>({0.5, -1.0}).requires_grad_();
  auto a = x.exp();          // shared by both branches
  auto b = a * 2.0;          // d/da = 2
  auto c = a.sin();          // d/da = cos(a)
  (b + c).sum().backward();  // dx = exp(x) · (2 + cos(exp(x)))
  for (int i = 0; i < 2; ++i) {
    const double xi = x.data()[i];
    CHECK(x.grad().data()[i] == Approx(std::exp(xi) * (2 + std::cos(std::exp(xi)))).epsilon(1e-12));
  }
}

TEST_CASE("backward of a non-scalar needs an explicit gradient of its shape", "[autograd]") {
  auto x = heed::tensor<double>({1, 2}).requires_grad_();
  auto y = x * 3.0;
  CHECK_THROWS_AS(y.backward(), heed::AutogradError);
  CHECK_THROWS_WITH(y.backward(), Contains("backward: the output has shape (2)") && Contains("one element"));

  CHECK_THROWS_AS(y.backward(heed::tensor<double>({1, 2, 3})), heed::ShapeError);
  CHECK_THROWS_WITH(y.backward(heed::tensor<double>({1, 2, 3})),
                    "backward: gradient of shape (3) for an output of shape (2)");

  y.backward(heed::tensor<double>({1, 10}));
  CHECK(values(x.grad()) == std::vector<double>{3, 30});
}

TEST_CASE("backward of a one-element tensor of any rank seeds it with 1", "[autograd]") {
  auto x = heed::tensor<double>({{2}}).requires_grad_();  // (1, 1)
  (x * x).backward();
  CHECK(values(x.grad()) == std::vector<double>{4});
  auto leaf = heed::tensor<double>({1, 2}).requires_grad_();
  leaf.backward(heed::tensor<double>({5, 6}));  // a leaf as root gets the seed itself
  CHECK(values(leaf.grad()) == std::vector<double>{5, 6});
}

TEST_CASE("backward of a tensor that does not require grad throws", "[autograd]") {
  auto x = heed::tensor<double>({1, 2});
  CHECK_THROWS_AS(x.sum().backward(), heed::AutogradError);
  CHECK_THROWS_WITH(x.sum().backward(), Contains("does not require grad"));
  CHECK_THROWS_AS(heed::Tensor<std::int64_t>({1}, {1}).backward(), heed::AutogradError);
  CHECK_THROWS_WITH(heed::Tensor<std::int64_t>({1}, {1}).backward(), Contains("int64"));
}

TEST_CASE("backward frees the graph unless retain_graph", "[autograd]") {
  auto x = heed::tensor<double>({1, 2}).requires_grad_();

  SECTION("a second pass through a freed graph throws naming retain_graph") {
    auto y = (x * x).sum();
    y.backward();
    CHECK_THROWS_AS(y.backward(), heed::AutogradError);
    CHECK_THROWS_WITH(y.backward(), Contains("already freed") && Contains("retain_graph"));
  }
  SECTION("so does a new graph built on a freed part") {
    auto a = x * x;
    a.sum().backward();
    auto z = (a * 2.0).sum();
    CHECK_THROWS_AS(z.backward(), heed::AutogradError);
    CHECK_THROWS_WITH(z.backward(), Contains("MulBackward") && Contains("retain_graph"));
  }
  SECTION("retain_graph allows a second pass, and the gradients double") {
    auto y = (x * x).sum();
    y.backward(Tensord(), true);
    CHECK(values(x.grad()) == std::vector<double>{2, 4});
    y.backward();
    CHECK(values(x.grad()) == std::vector<double>{4, 8});
  }
}

TEST_CASE("NoGradGuard stops recording and restores the previous mode", "[autograd]") {
  auto x = heed::tensor<double>({1, 2}).requires_grad_();
  CHECK(heed::autograd::GradMode::is_enabled());
  {
    heed::NoGradGuard outer;
    auto y = x * 2.0;
    CHECK_FALSE(y.requires_grad());
    CHECK(y.is_leaf());
    CHECK(values(y) == std::vector<double>{2, 4});
    {
      heed::NoGradGuard inner;
      CHECK_FALSE(heed::autograd::GradMode::is_enabled());
    }
    CHECK_FALSE(heed::autograd::GradMode::is_enabled());  // inner restored "off", not "on"
    CHECK_FALSE((x + x).requires_grad());
  }
  CHECK(heed::autograd::GradMode::is_enabled());
  CHECK((x * 2.0).requires_grad());
}

TEST_CASE("detach cuts the graph but shares the data", "[autograd]") {
  auto x = heed::tensor<double>({1, 2}).requires_grad_();
  auto d = (x * 2.0).detach();
  CHECK_FALSE(d.requires_grad());
  CHECK(d.is_leaf());
  CHECK(values(d) == std::vector<double>{2, 4});
  CHECK(x.detach().shares_storage(x));
  (d * x).sum().backward();  // d is a constant: dx = d, not 4x
  CHECK(values(x.grad()) == std::vector<double>{2, 4});
}

TEST_CASE("requires_grad_ only marks floating-point leaves", "[autograd]") {
  auto i = heed::Tensor<std::int64_t>({1, 2}, {2});
  CHECK_THROWS_AS(i.requires_grad_(), heed::AutogradError);
  CHECK_THROWS_WITH(i.requires_grad_(), Contains("only floating-point") && Contains("int64"));
  CHECK_NOTHROW(i.requires_grad_(false));
  CHECK_FALSE(i.requires_grad());

  auto x = heed::tensor<double>({1, 2}).requires_grad_();
  auto y = x * 2.0;
  CHECK_THROWS_AS(y.requires_grad_(), heed::AutogradError);
  CHECK_THROWS_WITH(y.requires_grad_(), Contains("only leaves") && Contains("MulBackward"));
}

TEST_CASE("in-place updates of a tensor that requires grad need NoGradGuard", "[autograd]") {
  auto x = heed::tensor<double>({1, 2}).requires_grad_();
  const auto other = heed::tensor<double>({10, 20});
  CHECK_THROWS_AS(x.add_(other), heed::AutogradError);
  CHECK_THROWS_WITH(x.add_(other), Contains("add_") && Contains("in-place") && Contains("NoGradGuard"));
  CHECK_THROWS_WITH(x.sub_(other), Contains("in-place"));
  CHECK_THROWS_WITH(x.mul_(2.0), Contains("mul_: in-place"));
  CHECK_THROWS_WITH(x.fill_(0.0), Contains("fill_: in-place"));
  CHECK_THROWS_WITH(x.zero_(), Contains("fill_: in-place"));
  CHECK_THROWS_WITH(x.copy_(other), Contains("copy_: in-place"));
  CHECK_THROWS_AS((x * 2.0).mul_(2.0), heed::AutogradError);  // a non-leaf too
  CHECK(values(x) == std::vector<double>{1, 2});              // refused updates changed nothing

  heed::NoGradGuard no_grad;
  x.add_(other, 0.5);
  CHECK(values(x) == std::vector<double>{6, 12});
  x.sub_(other);
  CHECK(values(x) == std::vector<double>{-4, -8});
  x.mul_(-0.5);
  CHECK(values(x) == std::vector<double>{2, 4});
  x.copy_(heed::tensor<double>({7}));  // broadcasts
  CHECK(values(x) == std::vector<double>{7, 7});
  x.fill_(3.0);
  CHECK(values(x) == std::vector<double>{3, 3});
  x.zero_();
  CHECK(values(x) == std::vector<double>{0, 0});
  CHECK(x.requires_grad());  // still a leaf that requires grad
}

TEST_CASE("modifying a tensor saved for backward makes backward throw", "[autograd]") {
  auto x = heed::tensor<double>({1, 2}).requires_grad_();
  auto w = heed::tensor<double>({3, 4}).requires_grad_();

  SECTION("an op's saved output") {
    auto y = x.exp();
    {
      heed::NoGradGuard no_grad;
      y.add_(heed::ones<double>({2}));
    }
    CHECK_THROWS_AS(y.sum().backward(), heed::AutogradError);
    auto z = x.exp();
    {
      heed::NoGradGuard no_grad;
      z.add_(heed::ones<double>({2}));
    }
    CHECK_THROWS_WITH(z.sum().backward(), Contains("ExpBackward") && Contains("in-place"));
  }
  SECTION("mul's saved input") {
    auto y = x * w;
    {
      heed::NoGradGuard no_grad;
      x.mul_(2.0);  // dw needs the old x
    }
    CHECK_THROWS_WITH(y.sum().backward(), Contains("MulBackward") && Contains("in-place"));
  }
  SECTION("an input mul did not save may change") {
    auto c = heed::tensor<double>({3, 4});  // needs no grad, so mul keeps no copy of x
    auto y = x * c;
    {
      heed::NoGradGuard no_grad;
      x.mul_(2.0);
    }
    y.sum().backward();
    CHECK(values(x.grad()) == std::vector<double>{3, 4});
  }
  SECTION("an update refused for its shape changes no version") {
    auto y = x.exp();
    {
      heed::NoGradGuard no_grad;
      CHECK_THROWS_AS(y.add_(heed::ones<double>({3})), heed::ShapeError);
      CHECK_THROWS_AS(y.copy_(heed::ones<double>({3})), heed::ShapeError);
    }
    y.sum().backward();
    CHECK(x.grad().data()[1] == Approx(std::exp(2.0)));
  }
}

TEST_CASE("integer and bool results carry no gradient", "[autograd]") {
  auto x = heed::tensor<double>({-1, 2, 3}).requires_grad_();
  const heed::Tensor<bool> mask = x > 0.0;
  CHECK_FALSE(mask.requires_grad());
  CHECK_FALSE(x.argmax(0).requires_grad());
  CHECK_FALSE(x.to<float>().requires_grad());  // conversions are not recorded

  // The mask's path contributes nothing; only x's own path does.
  auto y = (mask.to<double>() * x).sum();
  CHECK(y.requires_grad());
  y.backward();
  CHECK(values(x.grad()) == std::vector<double>{0, 1, 1});

  // A constant operand gets no gradient; an index tensor neither.
  auto c = heed::tensor<double>({1, 2, 3});
  auto index = heed::Tensor<std::int64_t>({2, 2}, {2});
  x.zero_grad();
  (x.index_select(0, index) * c.index_select(0, index)).sum().backward();
  CHECK(values(x.grad()) == std::vector<double>{0, 0, 6});
  CHECK_FALSE(c.grad().defined());
  CHECK_FALSE(index.grad().defined());
}

TEST_CASE("a chain of 100 adds accumulates 101 paths into the leaf", "[autograd]") {
  auto x = heed::tensor<double>({1, -2}).requires_grad_();
  Tensord y = x;
  for (int i = 0; i < 100; ++i) y = y + x;
  CHECK(values(y) == std::vector<double>{101, -202});
  y.sum().backward();
  CHECK(values(x.grad()) == std::vector<double>{101, 101});
}

TEST_CASE("a chain of 10000 ops neither overflows the stack in backward nor when dropped", "[autograd]") {
  auto x = heed::tensor<double>({1, 2}).requires_grad_();
  auto chain = [&x] {
    Tensord y = x;
    for (int i = 0; i < 10000; ++i) y = y * 1.0001;
    return y.sum();
  };
  chain().backward();
  const double expected = std::pow(1.0001, 10000);
  CHECK(x.grad().data()[0] == Approx(expected).epsilon(1e-9));
  CHECK(x.grad().data()[1] == Approx(expected).epsilon(1e-9));

  Tensord kept = chain();
  kept.backward(Tensord(), true);  // retained graph, then released by the handle
  kept = Tensord();
  CHECK_NOTHROW(chain());  // built, never differentiated, dropped
  CHECK(x.grad().data()[0] == Approx(2 * expected).epsilon(1e-9));
}

TEST_CASE("a pass that threw leaves no partial gradients behind for the next", "[autograd]") {
  auto x = heed::tensor<double>({1, 2}).requires_grad_();
  auto a = x * 3.0;
  Tensord b;
  {
    heed::NoGradGuard no_grad;
    b = a * 1.0;
  }
  int calls = 0;
  heed::autograd::record(b, "FlakyBackward", {a}, [&calls](const Tensord& g) {
    if (calls++ == 0) throw heed::AutogradError("flaky");
    return heed::autograd::Grads<double>{g};
  });
  auto y = (a + b).sum();  // a receives one gradient directly and one through FlakyBackward
  CHECK_THROWS_WITH(y.backward(Tensord(), true), "backward of FlakyBackward: flaky");
  x.zero_grad();
  y.backward(Tensord(), true);
  CHECK(values(x.grad()) == std::vector<double>{6, 6});
}

// ---- gradcheck -------------------------------------------------------------------------------

TEST_CASE("gradcheck catches a wrong backward", "[gradcheck]") {
  // x², with a backward that forgets the factor 2.
  const Fn bad_square = [](const Inputs& in) {
    const Tensord& x = in[0];
    Tensord out;
    {
      heed::NoGradGuard no_grad;
      out = x * x;
    }
    if (heed::autograd::needs_grad(x))
      heed::autograd::record(out, "BadSquareBackward", {x}, [saved = heed::autograd::save(x)](const Tensord& g) {
        return heed::autograd::Grads<double>{g * saved.get()};
      });
    return out;
  };
  const auto result = run_gradcheck(bad_square, {leaf({2, 3}, 1, 0.5, 1.5)});
  CHECK_FALSE(result.ok);
  CHECK_FALSE(static_cast<bool>(result));
  CHECK_THAT(result.message, Contains("input 0") && Contains("analytical"));
  CHECK(result.max_error > 0.1);

  const Fn good_square = [](const Inputs& in) { return in[0] * in[0]; };
  const auto good = run_gradcheck(good_square, {leaf({2, 3}, 1, 0.5, 1.5)});
  CHECK(good.ok);
  CHECK(good.max_error < 1e-6);
}

// Each op's gradcheck, over its shapes and broadcasts, is in the op table
// (tests/op_table.hpp); these are the cases the table does not run.

TEST_CASE("gradcheck when only one operand of binary arithmetic requires grad", "[gradcheck]") {
  const Tensord b = leaf({3}, 2, 0.5, 2.0).detach();
  CHECK_GRADIENTS([b](const Inputs& in) { return in[0] * b / b - b + heed::pow(in[0], b); }, leaf({2, 3}, 1, 0.5, 2.0));
  CHECK_GRADIENTS([b](const Inputs& in) { return b / in[0] - b * in[0] + heed::pow(b, in[0]); }, leaf({2, 3}, 2));
}

TEST_CASE("relu and abs gradients on both sides of zero", "[gradcheck]") {
  auto x = heed::tensor<double>({-2, -0.5, 0.5, 2}).requires_grad_();
  (x.relu() + x.abs() * 10.0).sum().backward();
  CHECK(values(x.grad()) == std::vector<double>{-10, -10, 11, 11});
}

TEST_CASE("where sends the gradient to a where the mask is true, to b elsewhere", "[gradcheck]") {
  const auto mask = heed::tensor<bool>({{true, false, true}, {false, false, true}});
  auto a = heed::tensor<double>({{1, 2, 3}, {4, 5, 6}}).requires_grad_();
  auto b = heed::tensor<double>({{1, 2, 3}, {4, 5, 6}}).requires_grad_();
  heed::where(mask, a, b).sum().backward();
  CHECK(values(a.grad()) == std::vector<double>{1, 0, 1, 0, 0, 1});
  CHECK(values(b.grad()) == std::vector<double>{0, 1, 0, 1, 1, 0});
}

TEST_CASE("max and min send their gradient to the first extreme along a dim, evenly over everything", "[gradcheck]") {
  // PyTorch's rules: the index max(dim) reports gets it all; max() shares it among ties.
  auto x = heed::tensor<double>({{1, 5, 5}, {7, 0, 7}}).requires_grad_();
  x.max(1).sum().backward();
  CHECK(values(x.grad()) == std::vector<double>{0, 1, 0, 1, 0, 0});
  x.zero_grad();
  x.max().backward();
  CHECK(values(x.grad()) == std::vector<double>{0, 0, 0, 0.5, 0, 0.5});
  x.zero_grad();
  x.min(0).sum().backward();
  CHECK(values(x.grad()) == std::vector<double>{1, 0, 1, 0, 1, 0});
  x.zero_grad();
  auto y = heed::tensor<double>({{2, 0, 0}, {0, 3, 4}}).requires_grad_();
  y.min().backward();
  CHECK(values(y.grad()) == std::vector<double>{0, 1.0 / 3, 1.0 / 3, 1.0 / 3, 0, 0});
}

TEST_CASE("a constant part of a cat gets no gradient and does not stop the others'", "[gradcheck]") {
  auto c = heed::tensor<double>({{9}, {9}});
  auto a = heed::tensor<double>({{1}, {2}}).requires_grad_();
  (heed::cat(Inputs{c, a}, 1) * heed::tensor<double>({{1, 10}, {1, 10}})).sum().backward();
  CHECK(values(a.grad()) == std::vector<double>{10, 10});
  CHECK_FALSE(c.grad().defined());
}

TEST_CASE("gradcheck of matmul's method form with a constant operand", "[gradcheck]") {
  const auto w = heed::tensor<double>({{1, 2}, {3, 4}, {5, 6}});
  CHECK_GRADIENTS([w](const Inputs& in) { return in[0].matmul(w); }, leaf({2, 3}, 52));
  CHECK_GRADIENTS([w](const Inputs& in) { return heed::matmul(w.transpose(0, 1), in[0]); }, leaf({3, 2}, 53));
}

TEST_CASE("gradcheck of a two-layer MLP with a log-softmax loss", "[gradcheck]") {
  const auto x = heed::tensor<double>({{0.5, -1.0, 2.0}, {1.5, 0.2, -0.3}, {-0.7, 0.9, 0.1}, {0.0, -0.4, 1.2}});
  const auto targets = heed::tensor<double>({{1, 0, 0}, {0, 0, 1}, {0, 1, 0}, {0, 0, 1}});  // one-hot
  const Fn mlp = [x, targets](const Inputs& p) {
    const Tensord hidden = heed::tanh(heed::matmul(x, p[0]) + p[1]);
    const Tensord logits = heed::matmul(hidden, p[2]) + p[3];
    return -(logits.log_softmax(-1) * targets).sum(1).mean();
  };
  CHECK_GRADIENTS(mlp, leaf({3, 5}, 70), leaf({5}, 71), leaf({5, 3}, 72), leaf({3}, 73));
}

TEST_CASE("the graph keeps what backward saved, not the results of ops", "[autograd]") {
  auto x = heed::tensor<double>({1, -2, 3}).requires_grad_();
  Tensord a = x * 2.0;  // mul by a constant saves nothing
  const Tensord b = a.neg();
  // Only this handle holds a: the node of b points at a's node, not at a's data.
  CHECK(a.use_count() == 1);
  CHECK(heed::detail::impl(a).storage.use_count() == 1);
  const Tensord c = b.exp();  // exp saves its result
  CHECK(heed::detail::impl(c).storage.use_count() == 2);
  a = Tensord();  // a's data goes; b's gradient still reaches x through a's node
  c.sum().backward();
  CHECK(x.grad().data()[0] == Approx(-2 * std::exp(-2.0)));
  CHECK(x.grad().data()[1] == Approx(-2 * std::exp(4.0)));
}

TEST_CASE("a leaf keeps an incoming gradient without a copy only when nothing else sees it", "[autograd]") {
  auto x = heed::tensor<double>({1, 2}).requires_grad_();
  auto y = heed::tensor<double>({3, 4}).requires_grad_();
  const Tensord g = heed::tensor<double>({5, 6});
  (x + y).backward(g);  // add hands one gradient to both inputs
  CHECK(x.grad().data() != y.grad().data());
  CHECK(x.grad().data() != g.data());
  x.grad().add_(x.grad(), 1.0);
  CHECK(values(y.grad()) == std::vector<double>{5, 6});
  CHECK(values(g) == std::vector<double>{5, 6});
  // A leaf as the root gets a copy of the caller's gradient, never the caller's tensor.
  auto z = heed::tensor<double>({7}).requires_grad_();
  const Tensord seed = heed::tensor<double>({1});
  z.backward(seed);
  CHECK(z.grad().data() != seed.data());
}

TEST_CASE("LeafGradients takes the leaves' gradients of backward on its thread while installed", "[autograd]") {
  auto x = heed::tensor<double>({1, 2}).requires_grad_();
  auto w = heed::tensor<double>({3, 4}).requires_grad_();
  heed::autograd::LeafGradients<double> outer, inner;
  {
    const heed::autograd::LeafGradientsScope<double> outer_scope(outer);
    (x * w).sum().backward();
    {
      const heed::autograd::LeafGradientsScope<double> inner_scope(inner);
      (x * x).sum().backward();  // x used twice: both paths summed into inner
    }
    (x * 2.0).sum().backward();  // outer again once inner's scope ends
  }
  CHECK(!x.grad().defined());
  CHECK(!w.grad().defined());
  CHECK(values(outer.of(x)) == std::vector<double>{3 + 2, 4 + 2});
  CHECK(values(outer.of(w)) == std::vector<double>{1, 2});
  CHECK(values(inner.of(x)) == std::vector<double>{2, 4});
  CHECK(!inner.of(w).defined());
  // Uninstalled: backward writes .grad() again.
  (x * w).sum().backward();
  CHECK(values(x.grad()) == std::vector<double>{3, 4});
  // A leaf with a sum stays alive as long as the sum: its identity cannot be reused.
  {
    const heed::autograd::LeafGradientsScope<double> scope(inner);
    auto temporary = heed::tensor<double>({1, 1}).requires_grad_();
    (temporary * 3.0).sum().backward();
  }
  std::size_t leaves = 0;
  inner.for_each([&](const Tensord& leaf, const Tensord& sum) {
    ++leaves;
    CHECK(leaf.requires_grad());
    CHECK(sum.shape() == leaf.shape());
  });
  CHECK(leaves == 2);  // x and the temporary
  inner.clear();
  CHECK(!inner.of(x).defined());
}

TEST_CASE("a graph of 200000 ops is dropped without recursion", "[autograd]") {
  auto x = heed::tensor<double>({1}).requires_grad_();
  Tensord y = x;
  for (int i = 0; i < 200000; ++i) y = y * 1.0;
  y = Tensord();  // would overflow the stack if each node freed the next one deeper
  CHECK(x.use_count() == 1);
}
