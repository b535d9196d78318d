// ModuleList (heed/nn/module_list.hpp): registration, d2l's nn.Sequential names and
// errors.
#include "nn_common.hpp"

// ---- ModuleList -----------------------------------------------------------------------------

namespace {

/// d2l's TransformerEncoder layout: a list of blocks registered as "blks".
class Stack : public heed::Module<float> {
 public:
  explicit Stack(heed::Generator& gen) : heed::Module<float>("Stack"), blks("Sequential") {
    blks.push_back("block0", std::make_unique<heed::Linear<float>>(2, 3, true, gen));
    blks.push_back("block1", std::make_unique<heed::Linear<float>>(3, 1, true, gen));
    register_module("blks", blks);
  }
  Tensorf forward(Tensorf X) const {
    for (const auto& blk : blks) X = (*blk)(X);
    return X;
  }
  heed::ModuleList<float, heed::Linear<float>> blks;
};

}  // namespace

TEST_CASE("ModuleList registers its modules under their names", "[nn]") {
  heed::Generator gen(0);
  heed::ModuleList<float, heed::Linear<float>> list;
  CHECK(list.empty());
  CHECK(list.size() == 0);
  CHECK(list.repr() == "ModuleList()");
  auto& first = list.push_back("block0", std::make_unique<heed::Linear<float>>(2, 3, true, gen));
  auto& second = list.push_back("block1", std::make_unique<heed::Linear<float>>(3, 1, false, gen));
  CHECK_FALSE(list.empty());
  CHECK(list.size() == 2);
  CHECK(&list[0] == &first);
  CHECK(&list[1] == &second);
  CHECK(list[0].out_features() == 3);
  CHECK(std::as_const(list)[1].in_features() == 3);
  CHECK_THROWS_AS(list[2], std::out_of_range);
  CHECK(names_of(list.named_parameters()) == std::vector<std::string>{"block0.weight", "block0.bias", "block1.weight"});
  CHECK(list.num_parameters() == 6 + 3 + 3);
  const auto children = list.named_children();
  REQUIRE(children.size() == 2);
  CHECK(children[0].first == "block0");
  CHECK(children[0].second == &first);
  CHECK(children[1].first == "block1");

  std::vector<index_t> outs;
  for (auto& blk : list) outs.push_back(blk->out_features());
  CHECK(outs == std::vector<index_t>{3, 1});
  std::vector<index_t> ins;
  for (const auto& blk : std::as_const(list)) ins.push_back(blk->in_features());
  CHECK(ins == std::vector<index_t>{2, 3});

  CHECK(list.repr() ==
        "ModuleList(\n"
        "  (block0): Linear(in_features=2, out_features=3, bias=True)\n"
        "  (block1): Linear(in_features=3, out_features=1, bias=False)\n"
        ")");
  list.eval();
  CHECK_FALSE(list[0].is_training());
  CHECK_FALSE(list[1].is_training());
}

TEST_CASE("ModuleList inside a parent names parameters as d2l's nn.Sequential of blocks", "[nn]") {
  heed::Generator gen(0);
  Stack net(gen);
  CHECK(names_of(net.named_parameters()) ==
        std::vector<std::string>{"blks.block0.weight", "blks.block0.bias", "blks.block1.weight", "blks.block1.bias"});
  CHECK(net.repr() ==
        "Stack(\n"
        "  (blks): Sequential(\n"
        "    (block0): Linear(in_features=2, out_features=3, bias=True)\n"
        "    (block1): Linear(in_features=3, out_features=1, bias=True)\n"
        "  )\n"
        ")");
  // The named parameters are the blocks' own tensors.
  const auto params = net.named_parameters();
  CHECK(params[0].second.shares_storage(net.blks[0].weight));
  CHECK(params[3].second.shares_storage(net.blks[1].bias));

  // Iterating applies the blocks in order.
  const auto X = heed::tensor<float>({{1, 2}, {-1, 0.5}});
  const auto expected = net.blks[1](net.blks[0](X));
  CHECK(net.forward(X).to_vector() == expected.to_vector());
  net.forward(X).sum().backward();
  for (const auto& [name, p] : net.named_parameters()) {
    INFO(name);
    CHECK(p.grad().defined());
  }
  net.zero_grad();
  CHECK_FALSE(net.blks[0].weight.grad().defined());
  net.train(false);
  CHECK_FALSE(net.blks[1].is_training());
}

TEST_CASE("ModuleList refuses null modules and taken names", "[nn][errors]") {
  heed::Generator gen(0);
  heed::ModuleList<float, heed::Linear<float>> list("Sequential");
  list.push_back("block0", std::make_unique<heed::Linear<float>>(2, 2, true, gen));
  CHECK_ERROR(heed::ValueError, "Sequential.push_back: module 'block1' is null",
              list.push_back("block1", std::unique_ptr<heed::Linear<float>>()));
  CHECK_ERROR(heed::ValueError, "Sequential.register_module: name 'block0' is already registered",
              list.push_back("block0", std::make_unique<heed::Linear<float>>(2, 2, true, gen)));
  CHECK_ERROR(heed::ValueError, "Sequential.register_module: name 'a.b' must be non-empty and contain no '.'",
              list.push_back("a.b", std::make_unique<heed::Linear<float>>(2, 2, true, gen)));
  CHECK_ERROR(heed::ValueError, "register_module: name ''",
              list.push_back("", std::make_unique<heed::Linear<float>>(2, 2, true, gen)));
  CHECK(list.size() == 1);  // the refused modules were not added
  CHECK(list.named_children().size() == 1);
  CHECK(names_of(list.named_parameters()) == std::vector<std::string>{"block0.weight", "block0.bias"});
  heed::ModuleList<float, heed::Linear<float>> plain;
  CHECK_ERROR(heed::ValueError, "ModuleList.push_back: module 'x' is null",
              plain.push_back("x", std::unique_ptr<heed::Linear<float>>()));
}

TEST_CASE("ModuleList deduces its types from the modules given and names them by index", "[nn]") {
  heed::Generator gen(0);
  heed::ModuleList list(std::make_unique<heed::Linear<double>>(2, 3, true, gen),
                        std::make_unique<heed::Linear<double>>(3, 1, false, gen));
  static_assert(std::is_same_v<decltype(list), heed::ModuleList<double, heed::Linear<double>>>);
  CHECK(list.size() == 2);
  CHECK(list.repr() ==
        "ModuleList(\n"
        "  (0): Linear(in_features=2, out_features=3, bias=True)\n"
        "  (1): Linear(in_features=3, out_features=1, bias=False)\n"
        ")");
  std::vector<std::string> names;
  for (const auto& [name, p] : list.named_parameters()) names.push_back(name);
  CHECK(names == std::vector<std::string>{"0.weight", "0.bias", "1.weight"});  // torch.nn.ModuleList's
  // append continues the indices, as torch.nn.ModuleList.append.
  auto& third = list.append(std::make_unique<heed::Linear<double>>(1, 4, true, gen));
  CHECK(&list[2] == &third);
  CHECK(list.named_children().back().first == "2");
  CHECK_ERROR(heed::ValueError, "ModuleList.append: module '3' is null",
              list.append(std::unique_ptr<heed::Linear<double>>()));
  // One module deduces too; an ActivationLayer list holds its own type.
  heed::ModuleList acts(std::make_unique<heed::ActivationLayer<float>>(heed::Activation::gelu));
  static_assert(std::is_same_v<decltype(acts), heed::ModuleList<float, heed::ActivationLayer<float>>>);
  CHECK(acts.named_children().front().first == "0");
}
