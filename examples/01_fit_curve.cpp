// 01_fit_curve — heed's autograd at work: fit a small network to a noisy curve.
//
// The data is d2l 10.2's: y = 2 sin(x) + x^0.8 + ε, ε ~ N(0, 0.5²), x in [0, 5).
// A one-hidden-layer tanh network is trained by full-batch gradient descent with
// momentum, written out by hand: forward, loss.backward(), update under NoGradGuard.
//
//   fit_curve [epochs]      (default 2000; prints the loss as it goes)
//
// Exits with status 1 if the fit does not beat predicting the mean, so CI can run it.
#include <heed/heed.hpp>

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

using heed::Tensorf;

int main(int argc, char** argv) {
  const int epochs = argc > 1 ? std::stoi(argv[1]) : 2000;
  const int num_train = 50, num_hiddens = 32;
  heed::Generator gen(42);

  // Training inputs sorted as in d2l, targets with noise; a clean test grid.
  auto f = [](const Tensorf& x) { return 2.0 * heed::sin(x) + x.pow(0.8f); };
  std::vector<float> xs = (heed::rand<float>({num_train}, gen) * 5.0).to_vector();
  std::sort(xs.begin(), xs.end());
  Tensorf x_train = Tensorf(xs, {num_train, 1});
  Tensorf y_train = f(x_train) + heed::normal<float>(0.f, 0.5f, {num_train, 1}, gen);
  Tensorf x_test = heed::arange(0.f, 5.f, 0.1f).reshape({-1, 1});
  Tensorf y_test = f(x_test);

  // Parameters: (1 → hidden) tanh (hidden → 1), small random init.
  std::vector<Tensorf> params = {
      heed::normal<float>(0.f, 1.f, {1, num_hiddens}, gen).requires_grad_(),
      heed::zeros({num_hiddens}).requires_grad_(),
      heed::normal<float>(0.f, 0.2f, {num_hiddens, 1}, gen).requires_grad_(),
      heed::zeros({1}).requires_grad_(),
  };
  auto net = [&](const Tensorf& x) {
    // x: (n, 1) -> (n, 1)
    auto hidden = heed::tanh(heed::matmul(x, params[0]) + params[1]);
    return heed::matmul(hidden, params[2]) + params[3];
  };
  auto mse = [](const Tensorf& pred, const Tensorf& target) { return (pred - target).pow(2.f).mean(); };

  std::vector<Tensorf> velocity;
  for (const Tensorf& p : params) velocity.push_back(heed::zeros_like(p));
  const float lr = 0.05f, momentum = 0.9f;
  std::cout << "fitting y = 2 sin(x) + x^0.8 + noise with a " << num_hiddens << "-unit tanh network\n";
  for (int epoch = 1; epoch <= epochs; ++epoch) {
    Tensorf loss = mse(net(x_train), y_train);
    for (Tensorf& p : params) p.zero_grad();
    loss.backward();
    {
      heed::NoGradGuard no_grad;  // the update itself is not part of the model
      for (std::size_t i = 0; i < params.size(); ++i) {
        velocity[i].mul_(momentum).add_(params[i].grad());
        params[i].sub_(velocity[i], lr);
      }
    }
    if (epoch == 1 || epoch % (epochs / 10 > 0 ? epochs / 10 : 1) == 0)
      std::cout << "epoch " << epoch << ", train loss " << loss.item() << "\n";
  }

  heed::NoGradGuard no_grad;
  const float test_loss = mse(net(x_test), y_test).item();
  const float baseline = mse(heed::full_like(y_test, y_test.mean().item()), y_test).item();
  std::cout << "test loss " << test_loss << " (predicting the mean: " << baseline << ")\n";
  std::cout << "predictions at x = 0, 1, 2, 3, 4:\n"
            << net(heed::tensor<float>({{0}, {1}, {2}, {3}, {4}})).reshape({-1}) << "\n"
            << "truth:\n"
            << f(heed::tensor<float>({0, 1, 2, 3, 4})) << "\n";
  return test_loss < 0.5f * baseline ? EXIT_SUCCESS : EXIT_FAILURE;
}
