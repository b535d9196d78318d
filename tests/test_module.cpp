// Module: dotted parameter names, buffers and children, train/eval, zero_grad,
// registration errors and PyTorch-style repr (heed/nn/module.hpp).
#include "nn_common.hpp"

// ---- Module ---------------------------------------------------------------------------------

TEST_CASE("Module names parameters with dotted paths, own ones first", "[nn]") {
  heed::Generator gen(0);
  Net net(gen);
  CHECK(names_of(net.named_parameters()) ==
        std::vector<std::string>{"scale", "fc.weight", "fc.bias", "inner.fc.weight", "inner.fc.bias"});
  const auto named = net.named_parameters();
  CHECK(named[1].second.is_same(net.fc.weight));
  CHECK(named[4].second.is_same(net.inner.fc.bias));
  CHECK(named[0].second.shape() == heed::Shape{3});
  CHECK(named[3].second.shape() == heed::Shape{2, 3});

  const auto params = net.parameters();
  REQUIRE(params.size() == 5);
  for (std::size_t i = 0; i < params.size(); ++i) {
    CHECK(params[i].is_same(named[i].second));
    CHECK(params[i].requires_grad());  // registration marks them
    CHECK(params[i].is_leaf());
  }

  // scale 3 + fc 4·3 + 3 + inner.fc 3·2 + 2
  CHECK(net.num_parameters() == 26);
  CHECK(net.inner.num_parameters() == 8);
  CHECK(net.drop.num_parameters() == 0);
  CHECK(net.drop.named_parameters().empty());
}

TEST_CASE("Module lists buffers and children, which are not parameters", "[nn]") {
  heed::Generator gen(0);
  Net net(gen);
  CHECK(names_of(net.named_buffers()) == std::vector<std::string>{"table", "inner.running"});
  CHECK(net.named_buffers()[0].second.is_same(net.table));
  CHECK(net.named_buffers()[1].second.is_same(net.inner.running));
  CHECK_FALSE(net.table.requires_grad());

  const auto children = net.named_children();
  REQUIRE(children.size() == 3);
  CHECK(children[0].first == "fc");
  CHECK(children[0].second == &net.fc);
  CHECK(children[1].first == "inner");
  CHECK(children[1].second == &net.inner);
  CHECK(children[2].first == "drop");
  CHECK(children[2].second == &net.drop);
  CHECK(net.type_name() == "Net");
}

TEST_CASE("state_dict and load_state_dict move parameters and buffers by name, as PyTorch's", "[nn]") {
  heed::Generator gen(0), other_gen(1);
  Net source(gen), target(other_gen);
  source.table.fill_(7.0f);
  const auto state = source.state_dict();
  std::vector<std::string> keys;
  for (const auto& [name, value] : state) keys.push_back(name);
  CHECK(keys == std::vector<std::string>{"fc.bias", "fc.weight", "inner.fc.bias", "inner.fc.weight", "inner.running",
                                         "scale", "table"});
  CHECK(state.at("fc.weight").shares_storage(source.fc.weight));  // views, as PyTorch's
  CHECK_FALSE(state.at("fc.weight").requires_grad());

  const auto result = target.load_state_dict(state);
  CHECK(result.missing_keys.empty());
  CHECK(result.unexpected_keys.empty());
  for (const auto& [name, value] : target.state_dict()) CHECK(value.to_vector() == state.at(name).to_vector());
  CHECK(target.table.to_vector() == std::vector<float>(target.table.numel(), 7.0f));
  CHECK(target.fc.weight.requires_grad());  // still a parameter, updated in place

  // Buffers may be left out: heed's are computed by the constructors (d2l saves none).
  Net fresh(other_gen);
  auto parameters_only = state;
  parameters_only.erase("table");
  parameters_only.erase("inner.running");
  CHECK(fresh.load_state_dict(parameters_only).missing_keys.empty());
  CHECK(fresh.fc.weight.to_vector() == source.fc.weight.to_vector());

  // strict: a missing parameter or an unknown name changes nothing.
  Net untouched(other_gen);
  const auto before = untouched.fc.weight.to_vector();
  auto partial = state;
  partial.erase("fc.bias");
  partial.emplace("fc.gain", heed::ones<float>({4}));
  CHECK_ERROR(heed::ValueError, "load_state_dict: Net: missing 'fc.bias'; unexpected 'fc.gain'",
              untouched.load_state_dict(partial));
  CHECK(untouched.fc.weight.to_vector() == before);
  // Not strict: what matches is loaded and the rest reported.
  const auto loose = untouched.load_state_dict(partial, false);
  CHECK(loose.missing_keys == std::vector<std::string>{"fc.bias"});
  CHECK(loose.unexpected_keys == std::vector<std::string>{"fc.gain"});
  CHECK(untouched.fc.weight.to_vector() == source.fc.weight.to_vector());
  // A shape that differs is refused, strict or not, before anything is copied.
  Net refused(other_gen);
  const auto refused_before = refused.scale.to_vector();
  auto wrong = state;
  wrong["fc.weight"] = heed::zeros<float>({4, 3});
  CHECK_ERROR(heed::ValueError, "load_state_dict: Net: 'fc.weight' has shape (4, 3), the module's is (3, 4)",
              refused.load_state_dict(wrong, false));
  CHECK(refused.scale.to_vector() == refused_before);
}

TEST_CASE("train and eval reach every child", "[nn]") {
  heed::Generator gen(0);
  Net net(gen);
  CHECK(net.is_training());
  CHECK(net.inner.fc.is_training());
  CHECK(net.drop.is_training());

  CHECK(&net.eval() == &net);
  CHECK_FALSE(net.is_training());
  CHECK_FALSE(net.fc.is_training());
  CHECK_FALSE(net.inner.is_training());
  CHECK_FALSE(net.inner.fc.is_training());
  CHECK_FALSE(net.drop.is_training());

  // The dropout child is now the identity.
  const Tensorf x = heed::ones<float>({4, 5});
  CHECK(net.drop(x).is_same(x));

  net.train();
  CHECK(net.is_training());
  CHECK(net.inner.fc.is_training());
  CHECK(net.drop.is_training());

  // A child's mode can be set alone.
  net.inner.train(false);
  CHECK(net.is_training());
  CHECK_FALSE(net.inner.is_training());
  CHECK_FALSE(net.inner.fc.is_training());
  CHECK(net.fc.is_training());
}

TEST_CASE("Module zero_grad clears the gradient of every parameter", "[nn]") {
  heed::Generator gen(1);
  Net net(gen);
  const Tensorf x = heed::randn<float>({5, 4}, gen);
  const Tensorf hidden = net.fc(x) * net.scale;  // (5, 3)
  (net.inner.fc(hidden).sum()).backward();
  for (const auto& [name, p] : net.named_parameters()) {
    INFO(name);
    CHECK(p.grad().defined());
  }
  // d sum / d inner.fc.bias = number of rows
  check_values(net.inner.fc.bias.grad(), {5, 5});

  net.zero_grad();
  for (const auto& [name, p] : net.named_parameters()) {
    INFO(name);
    CHECK_FALSE(p.grad().defined());
  }
}

TEST_CASE("Module registration refuses bad names and tensors", "[nn]") {
  Open m;
  Tensorf w = heed::ones<float>({2});
  Tensorf b = heed::zeros<float>({2});
  Tensorf undefined;
  heed::Dropout<float> child(0.5);

  CHECK_ERROR(heed::ValueError, "Open.register_parameter: name '' must be non-empty", m.register_parameter("", w));
  CHECK_ERROR(heed::ValueError, "register_parameter: name 'a.b'", m.register_parameter("a.b", w));
  CHECK_ERROR(heed::ValueError, "register_buffer: name ''", m.register_buffer("", b));
  CHECK_ERROR(heed::ValueError, "register_buffer: name 'x.y'", m.register_buffer("x.y", b));
  CHECK_ERROR(heed::ValueError, "register_module: name ''", m.register_module("", child));
  CHECK_ERROR(heed::ValueError, "register_module: name 'c.d'", m.register_module("c.d", child));
  CHECK_ERROR(heed::ValueError, "register_parameter: 'u' must be a defined leaf tensor",
              m.register_parameter("u", undefined));
  CHECK_ERROR(heed::ValueError, "register_buffer: 'u' is undefined", m.register_buffer("u", undefined));
  CHECK(m.named_parameters().empty());  // nothing was registered by the refused calls
  CHECK(m.named_buffers().empty());
  CHECK(m.named_children().empty());

  // A non-leaf is not a parameter either.
  Tensorf leaf_w = heed::ones<float>({2}).requires_grad_();
  Tensorf computed = leaf_w * 2.f;
  CHECK_ERROR(heed::ValueError, "register_parameter: 'c' must be a defined leaf tensor",
              m.register_parameter("c", computed));

  // One name per module, across parameters, buffers and children.
  m.register_parameter("w", w);
  CHECK_ERROR(heed::ValueError, "Open.register_parameter: name 'w' is already registered",
              m.register_parameter("w", b));
  CHECK_ERROR(heed::ValueError, "register_buffer: name 'w' is already registered", m.register_buffer("w", b));
  CHECK_ERROR(heed::ValueError, "register_module: name 'w' is already registered", m.register_module("w", child));
  m.register_buffer("b", b);
  m.register_module("drop", child);
  CHECK_ERROR(heed::ValueError, "register_parameter: name 'drop' is already registered",
              m.register_parameter("drop", b));
  CHECK(names_of(m.named_parameters()) == std::vector<std::string>{"w"});
  CHECK(names_of(m.named_buffers()) == std::vector<std::string>{"b"});
  CHECK(m.named_children().size() == 1);
  CHECK(w.requires_grad());
  CHECK_FALSE(b.requires_grad());
}

TEST_CASE("repr matches PyTorch's module summaries", "[nn]") {
  heed::Generator gen(0);
  CHECK(heed::Linear<float>(2, 8, false, gen).repr() == "Linear(in_features=2, out_features=8, bias=False)");
  CHECK(heed::Linear<float>(20, 1, true, gen).repr() == "Linear(in_features=20, out_features=1, bias=True)");
  CHECK(heed::Dropout<float>(0.1).repr() == "Dropout(p=0.1, inplace=False)");
  CHECK(heed::Dropout<float>().repr() == "Dropout(p=0.5, inplace=False)");
  CHECK(heed::Dropout<float>(0.0).repr() == "Dropout(p=0, inplace=False)");
  CHECK(Open().repr() == "Open()");

  Net net(gen);
  const std::string expected =
      "Net(\n"
      "  (fc): Linear(in_features=4, out_features=3, bias=True)\n"
      "  (inner): Inner(\n"
      "    (fc): Linear(in_features=3, out_features=2, bias=True)\n"
      "  )\n"
      "  (drop): Dropout(p=0.25, inplace=False)\n"
      ")";
  CHECK(net.repr() == expected);
  std::ostringstream os;
  os << net;
  CHECK(os.str() == expected);
}
