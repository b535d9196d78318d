// convert_weights_ (heed/nn/convert_weights.hpp): a net's Linear weights and Embedding
// tables in bf16 or int8, their fp32 tensors released.
#include "nn_common.hpp"

#include <heed/nn/convert_weights.hpp>
#include <heed/nn/sequential.hpp>

#include "tied_net.hpp"

TEST_CASE("convert_weights_ multiplies by converted weights, shares tied ones and frees the fp32 tensors", "[nn]") {
  for (const heed::Precision precision : {heed::Precision::bf16, heed::Precision::int8}) {
    INFO(heed::to_string(precision));
    heed::Generator gen(41);
    heed_test::TiedNet net(gen);
    const heed::IndexTensor tokens({3, 7, 49, 0, 12, 3}, heed::Shape{2, 3});
    const Tensorf before = net.forward(tokens);
    const Tensorf table = net.embedding.weight.clone(), hidden = net.hidden.weight.clone();
    const Tensorf hidden_bias = net.hidden.bias, output_bias = net.output.bias;
    CHECK(net.num_parameters() == 50 * 24 + 24 * 24 + 24 + 50);

    const heed::ConvertedWeights report = heed::convert_weights_(net, precision);
    CHECK(report.tensors == 2);  // the tied table once
    CHECK(report.fp32_bytes == (50 * 24 + 24 * 24) * sizeof(float));
    CHECK_FALSE(net.embedding.weight.defined());
    CHECK_FALSE(net.output.weight.defined());
    CHECK(net.embedding.converted_weight == net.output.converted_weight);
    CHECK(names_of(net.named_parameters()) == std::vector<std::string>{"hidden.bias", "output.bias"});
    CHECK(net.num_parameters() == 24 + 50);
    CHECK(net.state_dict().size() == 2);
    CHECK(net.hidden.repr() ==
          "Linear(in_features=24, out_features=24, bias=True, weight=" + std::string(heed::to_string(precision)) + ")");

    // The forward pass is the converted weights' exactly: rows of the table as stored,
    // the products of LowPrecisionWeight, no gradient recorded.
    const Tensorf after = net.forward(tokens);
    CHECK_FALSE(after.requires_grad());
    const heed::detail::LowPrecisionWeight table_converted(table.data(), 50, 24, precision),
        hidden_converted(hidden.data(), 24, 24, precision);
    CHECK(report.converted_bytes == table_converted.bytes() + hidden_converted.bytes());
    Tensorf rows = heed::zeros<float>({6, 24});
    for (index_t i = 0; i < 6; ++i) table_converted.row(tokens.data()[i], rows.data() + i * 24);
    CHECK(net.embedding(tokens).reshape({6, 24}).to_vector() == rows.to_vector());
    Tensorf h = heed::zeros<float>({6, 24}), logits = heed::zeros<float>({6, 50});
    hidden_converted.apply(rows.data(), 6, hidden_bias.data(), h.data());
    h = h.relu();
    table_converted.apply(h.data(), 6, output_bias.data(), logits.data());
    CHECK(after.reshape({6, 50}).to_vector() == logits.to_vector());
    check_close(after, before, precision == heed::Precision::int8 ? 0.15 : 0.1);

    // Converting again changes nothing; fp32 is refused.
    CHECK(heed::convert_weights_(net, precision).tensors == 0);
    CHECK(net.forward(tokens).to_vector() == after.to_vector());
    CHECK_THROWS_WITH(heed::convert_weights_(net, heed::Precision::fp32), Contains("must be bf16 or int8"));
    // A lookup out of range and a wrong width are refused by name.
    CHECK_THROWS_AS(net.embedding(heed::IndexTensor({50}, heed::Shape{1})), heed::IndexError);
    CHECK_THROWS_WITH(net.hidden(heed::zeros<float>({2, 23})), Contains("does not end in in_features = 24"));
  }
}

TEST_CASE("convert_weights_ leaves the net as it was when a weight cannot be converted", "[nn]") {
  heed::Generator gen(42);
  heed::Sequential<float> net;
  auto& first = net.append(std::make_unique<heed::Linear<float>>(4, 4, true, gen));
  auto& second = net.append(std::make_unique<heed::Linear<float>>(4, 4, true, gen));
  second.weight.detach().data()[5] = std::numeric_limits<float>::infinity();
  CHECK_THROWS_WITH(heed::convert_weights_(net, heed::Precision::int8),
                    Contains("convert_weights_: int8: '1.weight' (4, 4) holds inf at flat position 5"));
  CHECK(first.weight.defined());
  CHECK_FALSE(first.converted_weight);
  CHECK(net.named_parameters().size() == 4);
}
