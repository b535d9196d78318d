// The GRU (heed/nn/gru.hpp): torch.nn.GRU golden values, gradients against finite
// differences, dropout between layers and errors.
#include "seq2seq_common.hpp"

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

TEMPLATE_TEST_CASE("GRU inside a PackedWeightsGuard matches torch.nn.GRU", "[gru][golden]", float, double) {
  using T = TestType;
  heed::GRU<T> gru(/*input_size=*/5, /*num_hiddens=*/6, /*num_layers=*/2);
  heed_test::load_parameters(golden(), gru, "gru");
  // Without gradients the input and recurrent products take the packed weights.
  heed::NoGradGuard no_grad;
  heed::PackedWeightsGuard packed;
  const heed::GRUOutput<T> out = gru.forward(golden().tensor<T>("gru.inputs"), golden().tensor<T>("gru.state"));
  check_close(out.outputs, golden().tensor<T>("gru.outputs"), tolerance<T>());
  check_close(out.state, golden().tensor<T>("gru.final_state"), tolerance<T>());
}

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
