// 03_attention_scoring — the listings of d2l 10.1 and 10.3, and the concatenation rule.
//
//   attention_scoring [output_dir]     (default: the current directory)
//
// Prints what d2l prints (masked softmax values, attention outputs) and writes d2l's
// heatmaps as SVG into output_dir: the identity "attention" of 10.1, and the weights
// of additive and scaled dot-product attention on d2l's toy keys and values.
#include <heed/heed.hpp>

#include <iostream>
#include <string>

using heed::IndexTensor;
using heed::Tensorf;

namespace {

void save(const heed::Svg& svg, const std::string& path) {
  svg.save(path);
  std::cout << "wrote " << path << "\n";
}

}  // namespace

int main(int argc, char** argv) {
  const std::string out_dir = argc > 1 ? argv[1] : ".";
  heed::manual_seed(0);  // module initialisation and dropout draw from the default generator
  heed::Generator gen(0);

  // 10.1: a query attends only to the key of the same index.
  save(heed::show_heatmaps(heed::eye<float>(10).reshape({1, 1, 10, 10}), "Keys", "Queries"),
       out_dir + "/attention_eye.svg");

  // 10.3.1: masked softmax, one valid length per batch, then per query.
  std::cout << "masked_softmax(rand(2, 2, 4), [2, 3]):\n"
            << heed::masked_softmax(heed::rand<float>({2, 2, 4}, gen), heed::tensor<std::int64_t>({2, 3})) << "\n";
  std::cout << "masked_softmax(rand(2, 2, 4), [[1, 3], [2, 4]]):\n"
            << heed::masked_softmax(heed::rand<float>({2, 2, 4}, gen), heed::tensor<std::int64_t>({{1, 3}, {2, 4}}))
            << "\n";

  // 10.3.2: additive attention on keys of ones and values 0..39; two queries of size 20.
  const Tensorf keys = heed::ones<float>({2, 10, 2});
  const Tensorf values = heed::arange<float>(0, 40).reshape({1, 10, 4}).repeat({2, 1, 1});
  const IndexTensor valid_lens = heed::tensor<std::int64_t>({2, 6});
  heed::AdditiveAttention<float> additive(/*key_size=*/2, /*query_size=*/20, /*num_hiddens=*/8, /*dropout=*/0.1);
  additive.eval();
  std::cout << additive << "\n";
  std::cout << "additive attention:\n"
            << additive(heed::normal<float>(0, 1, {2, 1, 20}, gen), keys, values, valid_lens) << "\n";
  save(heed::show_heatmaps(additive.attention_weights().reshape({1, 1, 2, 10}), "Keys", "Queries"),
       out_dir + "/additive_attention.svg");

  // 10.3.3: scaled dot-product attention; queries now share the keys' size.
  heed::DotProductAttention<float> dot_product(/*dropout=*/0.5);
  dot_product.eval();
  std::cout << "dot-product attention:\n"
            << dot_product(heed::normal<float>(0, 1, {2, 1, 2}, gen), keys, values, valid_lens) << "\n";
  save(heed::show_heatmaps(dot_product.attention_weights().reshape({1, 1, 2, 10}), "Keys", "Queries"),
       out_dir + "/dot_product_attention.svg");

  // The concatenation rule with the tutorial's sizes.
  heed::ConcatAttention<float> concat(32, 32, 32, 64, 64);
  const auto [output, weights] = concat(heed::rand<float>({1, 1, 32}, gen), heed::rand<float>({1, 1, 32}, gen),
                                        heed::rand<float>({1, 32, 64}, gen));
  std::cout << "concat attention: output " << output.shape() << ", weights " << weights.shape() << ", weights sum to "
            << weights.sum().item() << "\n";
  save(heed::show_heatmaps(weights.reshape({1, 1, 1, 32}), "Values", "Query", {}, {3.5, 1.2}, "Blues"),
       out_dir + "/concat_attention.svg");
}
