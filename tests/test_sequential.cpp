// Sequential (heed/nn/sequential.hpp): modules in order, PyTorch's names, the deduced
// element type, gradients, a state_dict round trip and errors.
#include "nn_common.hpp"

#include <heed/nn/sequential.hpp>

// ---- Sequential -----------------------------------------------------------------------------

TEST_CASE("Sequential applies its modules in order and names them as torch.nn.Sequential", "[nn]") {
  heed::Generator gen(0);
  heed::Sequential net(std::make_unique<heed::Linear<float>>(4, 8, true, gen),
                       std::make_unique<heed::ActivationLayer<float>>(heed::Activation::relu),
                       std::make_unique<heed::Linear<float>>(8, 1, true, gen));
  static_assert(std::is_same_v<decltype(net), heed::Sequential<float>>);
  CHECK(net.size() == 3);
  CHECK_FALSE(net.empty());
  // nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1)).state_dict().keys()
  CHECK(names_of(net.named_parameters()) == std::vector<std::string>{"0.weight", "0.bias", "2.weight", "2.bias"});
  CHECK(net.repr() ==
        "Sequential(\n"
        "  (0): Linear(in_features=4, out_features=8, bias=True)\n"
        "  (1): ReLU()\n"
        "  (2): Linear(in_features=8, out_features=1, bias=True)\n"
        ")");
  auto& first = dynamic_cast<heed::Linear<float>&>(net[0]);
  auto& last = dynamic_cast<heed::Linear<float>&>(net[2]);
  CHECK(first.out_features() == 8);
  CHECK(std::as_const(net)[2].type_name() == "Linear");

  // The output is the modules' composition, bit for bit, and so are the gradients.
  const Tensorf X = heed::randn<float>({5, 4}, gen);
  const Tensorf expected = last(first(X).relu());
  CHECK(net(X).shape() == heed::Shape{5, 1});
  CHECK(net(X).to_vector() == expected.to_vector());
  CHECK(net.forward(X).to_vector() == expected.to_vector());
  expected.sum().backward();
  const auto by_hand = first.weight.grad().to_vector();
  net.zero_grad();
  net(X).sum().backward();
  CHECK(first.weight.grad().to_vector() == by_hand);
  for (const auto& [name, p] : net.named_parameters()) {
    INFO(name);
    CHECK(p.grad().defined());
  }
  net.eval();
  CHECK_FALSE(net[0].is_training());
}

TEST_CASE("Sequential of double modules passes gradcheck", "[nn][gradcheck]") {
  heed::Generator gen(1);
  heed::Sequential<double> net;
  net.append(std::make_unique<heed::Linear<double>>(3, 4, true, gen));
  net.append(std::make_unique<heed::ActivationLayer<double>>(heed::Activation::gelu));
  net.append(std::make_unique<heed::LayerNorm<double>>(heed::Shape{4}));
  net.append(std::make_unique<heed::Linear<double>>(4, 2, false, gen));
  const Fn f = [&net](const Inputs& in) { return net(in[0]); };
  CHECK_GRADIENTS(f, {leaf({2, 3}, 2)});
  CHECK_GRADIENTS(f, {leaf({2, 5, 3}, 3)});  // leading dims pass through, as Linear's
}

TEST_CASE("Sequential nests, takes names, and round-trips its state_dict", "[nn]") {
  heed::Generator gen(2);
  heed::Sequential<float> net;
  auto& body = net.append(std::make_unique<heed::Sequential<float>>(
      std::make_unique<heed::Linear<float>>(2, 3, true, gen), std::make_unique<heed::Dropout<float>>(0.5)));
  net.push_back("head", std::make_unique<heed::Linear<float>>(3, 1, true, gen));
  CHECK(body.size() == 2);
  // nn.Sequential(nn.Sequential(nn.Linear(2, 3), nn.Dropout(0.5)), ...) with OrderedDict's "head"
  CHECK(names_of(net.named_parameters()) ==
        std::vector<std::string>{"0.0.weight", "0.0.bias", "head.weight", "head.bias"});

  heed::Sequential<float> copy;
  copy.append(std::make_unique<heed::Sequential<float>>(std::make_unique<heed::Linear<float>>(2, 3),
                                                        std::make_unique<heed::Dropout<float>>(0.5)));
  copy.push_back("head", std::make_unique<heed::Linear<float>>(3, 1));
  const auto result = copy.load_state_dict(net.state_dict());
  CHECK(result.missing_keys.empty());
  CHECK(result.unexpected_keys.empty());
  net.eval();
  copy.eval();  // dropout off in both
  const Tensorf X = heed::randn<float>({4, 2}, gen);
  CHECK(copy(X).to_vector() == net(X).to_vector());
}

TEST_CASE("an empty Sequential returns its input, as PyTorch's", "[nn]") {
  heed::Sequential<double> net;
  CHECK(net.empty());
  CHECK(net.repr() == "Sequential()");
  const Tensord x = leaf({2, 3}, 4);
  CHECK(net(x).shares_storage(x));
  CHECK(net.named_parameters().empty());
}

TEST_CASE("Sequential refuses null modules, taken names, bad indices and undefined input", "[nn][errors]") {
  heed::Generator gen(3);
  heed::Sequential<float> net;
  net.append(std::make_unique<heed::Linear<float>>(2, 2, true, gen));
  CHECK_ERROR(heed::ValueError, "Sequential.append: module '1' is null",
              net.append(std::unique_ptr<heed::Linear<float>>()));
  CHECK_ERROR(heed::ValueError, "Sequential.push_back: module 'x' is null",
              net.push_back("x", std::unique_ptr<heed::Dropout<float>>()));
  CHECK_ERROR(heed::ValueError, "Sequential.register_module: name '0' is already registered",
              net.push_back("0", std::make_unique<heed::Linear<float>>(2, 2, true, gen)));
  CHECK_ERROR(heed::ValueError, "Sequential.register_module: name 'a.b' must be non-empty and contain no '.'",
              net.push_back("a.b", std::make_unique<heed::Linear<float>>(2, 2, true, gen)));
  CHECK(net.size() == 1);  // the refused modules were neither kept nor registered
  CHECK(net.named_children().size() == 1);
  CHECK_ERROR(heed::IndexError, "Sequential: index 1 out of range for 1 modules", net[1]);
  CHECK_ERROR(heed::ValueError, "Sequential: x is an undefined tensor", net(Tensorf()));
  CHECK_ERROR(heed::ValueError, "Sequential: x is an undefined tensor", heed::Sequential<float>()(Tensorf()));
  // A module's own error passes through, naming its op.
  CHECK_ERROR(heed::ShapeError, "linear", net(heed::zeros<float>({3, 5})));
}
