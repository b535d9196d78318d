// SGD (heed/optim/sgd.hpp) against PyTorch's update rule: plain, momentum, weight decay,
// parameters without a gradient, a small fit, bad hyperparameters.
#include "nn_common.hpp"

// ---- SGD ------------------------------------------------------------------------------------

TEST_CASE("SGD step subtracts lr times the gradient", "[optim]") {
  const Tensord w = heed::tensor<double>({1.0, -2.0, 3.0}).requires_grad_();
  const Tensord c = heed::tensor<double>({0.5, 1.5, -1.0});
  heed::SGD<double> sgd({w}, 0.1);
  CHECK(sgd.lr() == 0.1);
  (w * c).sum().backward();  // grad = c
  sgd.step();
  check_values(w, {1.0 - 0.05, -2.0 - 0.15, 3.0 + 0.1});
  CHECK(w.is_leaf());
  CHECK(w.requires_grad());

  // The gradient stays until zero_grad; a second step repeats the update.
  sgd.step();
  check_values(w, {1.0 - 0.1, -2.0 - 0.3, 3.0 + 0.2});
  sgd.zero_grad();
  CHECK_FALSE(w.grad().defined());
  sgd.step();  // no gradient, no change
  check_values(w, {1.0 - 0.1, -2.0 - 0.3, 3.0 + 0.2});

  sgd.set_lr(1.0);
  CHECK(sgd.lr() == 1.0);
  (w * c).sum().backward();
  sgd.step();
  check_values(w, {0.9 - 0.5, -2.3 - 1.5, 3.2 + 1.0});
}

TEST_CASE("SGD with momentum and weight decay follows PyTorch's update", "[optim]") {
  const double lr = 0.1, mu = 0.9, wd = 0.01;
  const std::vector<double> start = {1.0, -0.5, 2.0, 0.25};
  const std::vector<double> c = {1.0, 2.0, 0.5, -3.0};
  const Tensord w = heed::tensor<double>({1.0, -0.5, 2.0, 0.25}).requires_grad_();
  const Tensord coef = heed::tensor<double>({1.0, 2.0, 0.5, -3.0});
  heed::SGD<double> sgd({w}, lr, mu, wd);

  // Reference: loss = Σ c p², grad = 2 c p; g ← grad + wd·p; b ← μ b + g (b = g first); p ← p − lr b.
  std::vector<double> p = start, buf(4, 0.0);
  for (int step = 0; step < 3; ++step) {
    INFO("step " << step);
    sgd.zero_grad();
    (coef * w * w).sum().backward();
    sgd.step();
    for (std::size_t i = 0; i < 4; ++i) {
      const double g = 2 * c[i] * p[i] + wd * p[i];
      buf[i] = step == 0 ? g : mu * buf[i] + g;
      p[i] -= lr * buf[i];
    }
    check_values(w, p, 1e-14);
  }
  // Step 0 by hand for element 0: g = 2 + 0.01, p = 1 − 0.201 = 0.799.
  // (the loop above reproduces it; spot-check the first update independently)
  Tensord single = heed::tensor<double>({1.0}).requires_grad_();
  heed::SGD<double> one({single}, lr, mu, wd);
  (single * single).sum().backward();
  one.step();
  check_values(single, {0.799}, 1e-14);
  // Step 1: g = 2·0.799 + 0.00799 = 1.60599, b = 0.9·2.01 + 1.60599 = 3.41499
  single.zero_grad();
  (single * single).sum().backward();
  one.step();
  check_values(single, {0.799 - 0.341499}, 1e-14);
}

TEST_CASE("SGD with momentum alone and with weight decay alone", "[optim]") {
  const Tensord a = heed::tensor<double>({2.0}).requires_grad_();
  const Tensord b = heed::tensor<double>({2.0}).requires_grad_();
  heed::SGD<double> momentum({a}, 0.5, 0.5);
  heed::SGD<double> decay({b}, 0.5, 0.0, 0.1);
  for (int i = 0; i < 2; ++i) {
    momentum.zero_grad();
    decay.zero_grad();
    (a * 3.0).sum().backward();  // grad 3
    (b * 3.0).sum().backward();
    momentum.step();
    decay.step();
  }
  // momentum: b1 = 3, a = 2 − 1.5 = 0.5; b2 = 1.5 + 3 = 4.5, a = 0.5 − 2.25 = −1.75
  check_values(a, {-1.75}, 1e-14);
  // decay: g1 = 3.2, b = 2 − 1.6 = 0.4; g2 = 3.04, b = 0.4 − 1.52 = −1.12
  check_values(b, {-1.12}, 1e-14);
}

TEST_CASE("SGD leaves parameters without a gradient alone", "[optim]") {
  heed::Generator gen(0);
  heed::Linear<double> used(3, 2, true, gen), unused(3, 2, true, gen);
  std::vector<Tensord> params = used.parameters();
  for (const auto& p : unused.parameters()) params.push_back(p);
  heed::SGD<double> sgd(params, 0.5, 0.9, 0.1);
  CHECK(sgd.params().size() == 4);

  const auto unused_weight = unused.weight.to_vector(), unused_bias = unused.bias.to_vector();
  const auto used_weight = used.weight.to_vector();
  const Tensord x = heed::randn<double>({4, 3}, gen);
  for (int i = 0; i < 2; ++i) {
    sgd.zero_grad();
    used(x).pow(2.0).sum().backward();
    sgd.step();
  }
  CHECK_FALSE(unused.weight.grad().defined());
  CHECK(unused.weight.to_vector() == unused_weight);
  CHECK(unused.bias.to_vector() == unused_bias);
  CHECK(used.weight.to_vector() != used_weight);

  // zero_grad on the optimiser clears the module's gradients: they are the same tensors.
  CHECK(used.weight.grad().defined());
  sgd.zero_grad();
  CHECK_FALSE(used.weight.grad().defined());
  CHECK_FALSE(used.bias.grad().defined());
}

TEST_CASE("SGD trains a Linear layer towards a linear target", "[optim]") {
  heed::Generator gen(4);
  heed::Linear<double> fc(2, 1, true, gen);
  const Tensord x = heed::randn<double>({64, 2}, gen);
  const Tensord true_w = heed::tensor<double>({{2.0}, {-3.4}});
  const Tensord y = heed::matmul(x, true_w) + 4.2;
  heed::SGD<double> sgd(fc.parameters(), 0.1);
  double first = 0, last = 0;
  for (int epoch = 0; epoch < 200; ++epoch) {
    sgd.zero_grad();
    const Tensord loss = (fc(x) - y).pow(2.0).mean();
    if (epoch == 0) first = loss.item();
    last = loss.item();
    loss.backward();
    sgd.step();
  }
  CHECK(last < 1e-6 * first);
  check_values(fc.weight, {2.0, -3.4}, 1e-3);
  check_values(fc.bias, {4.2}, 1e-3);
}

TEST_CASE("SGD refuses bad hyperparameters and parameters", "[optim]") {
  const Tensord w = heed::ones<double>({2}).requires_grad_();
  CHECK_ERROR(heed::ValueError, "SGD: learning rate must be non-negative, got -0.1", heed::SGD<double>({w}, -0.1));
  CHECK_ERROR(heed::ValueError, "SGD: momentum must be non-negative", heed::SGD<double>({w}, 0.1, -0.5));
  CHECK_ERROR(heed::ValueError, "SGD: weight_decay must be non-negative", heed::SGD<double>({w}, 0.1, 0.0, -1.0));
  CHECK_ERROR(heed::ValueError, "SGD: parameter 1 must be a leaf tensor that requires grad",
              heed::SGD<double>({w, w * 2.0}, 0.1));
  CHECK_ERROR(heed::ValueError, "SGD: parameter 0 must be a leaf",
              heed::SGD<double>({heed::ones<double>({2})}, 0.1));  // no requires_grad
  CHECK_ERROR(heed::ValueError, "SGD: parameter 0", heed::SGD<double>({Tensord()}, 0.1));
  heed::SGD<double> sgd({w}, 0.1);
  CHECK_ERROR(heed::ValueError, "SGD: learning rate must be non-negative", sgd.set_lr(-1.0));
  CHECK(sgd.lr() == 0.1);
  heed::SGD<double> zero_lr({w}, 0.0);  // lr = 0 is allowed
  CHECK(zero_lr.lr() == 0.0);
}
