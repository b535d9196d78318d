// ActivationLayer (heed/nn/activation.hpp): ReLU and GELU, and their repr.
#include "nn_common.hpp"

// ---- ActivationLayer ------------------------------------------------------------------------

TEST_CASE("ActivationLayer dispatches to relu or gelu", "[nn]") {
  const auto x = heed::tensor<double>({-2, -0.5, 0, 0.5, 2});
  std::vector<double> gelu_expected;
  for (double v : x.to_vector()) gelu_expected.push_back(0.5 * v * (1 + std::erf(v / std::sqrt(2.0))));

  heed::ActivationLayer<double> relu;  // relu by default
  CHECK(relu.activation() == heed::Activation::relu);
  check_values(relu(x), {0, 0, 0, 0.5, 2}, 0.0);
  CHECK(relu.named_parameters().empty());

  heed::ActivationLayer<double> gelu(heed::Activation::gelu);
  CHECK(gelu.activation() == heed::Activation::gelu);
  check_values(gelu(x), gelu_expected, 1e-15);
  check_values(gelu.forward(heed::tensor<double>({1, -1})), {0.8413447460685429, -0.15865525393145707}, 1e-15);

  CHECK(heed::activate(x, heed::Activation::relu).to_vector() == heed::relu(x).to_vector());
  CHECK(heed::activate(x, heed::Activation::gelu).to_vector() == heed::gelu(x).to_vector());
  CHECK(std::string(heed::to_string(heed::Activation::relu)) == "relu");
  CHECK(std::string(heed::to_string(heed::Activation::gelu)) == "gelu");

  // Gradients flow through: relu'(0) = 0 as in PyTorch, gelu'(0) = 1/2.
  auto leaf_x = heed::tensor<double>({-1, 0, 1}).requires_grad_();
  relu(leaf_x).sum().backward();
  check_values(leaf_x.grad(), {0, 0, 1}, 0.0);
  leaf_x.zero_grad();
  gelu(leaf_x).sum().backward();
  check_values(leaf_x.grad(), {-0.08331547058768629, 0.5, 1.0833154705876864}, 1e-12);
}

TEST_CASE("ActivationLayer prints as PyTorch's ReLU and GELU", "[nn]") {
  CHECK(heed::ActivationLayer<float>().repr() == "ReLU()");
  CHECK(heed::ActivationLayer<float>(heed::Activation::relu).repr() == "ReLU()");
  CHECK(heed::ActivationLayer<float>(heed::Activation::gelu).repr() == "GELU(approximate='none')");
  CHECK(heed::ActivationLayer<float>(heed::Activation::gelu).type_name() == "GELU");
  CHECK(heed::ActivationLayer<float>(heed::Activation::silu).type_name() == "SiLU");
  CHECK(std::string(heed::to_string(heed::Activation::silu)) == "silu");
  const auto x = heed::tensor<float>({-2.0f, 0.5f, 3.0f});
  CHECK(heed::activate(x, heed::Activation::silu).to_vector() == heed::silu(x).to_vector());
}
