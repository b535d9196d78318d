// 04_transformer_blocks — the listings of d2l 10.5–10.7, in order.
//
//   transformer_blocks [output_dir]     (default: the current directory)
//
// Prints what d2l prints (module summaries, output shapes, the FFN's outputs, layer
// normalisation) and writes d2l's two positional-encoding pictures as SVG into
// output_dir: columns 6–9 of P over 60 positions, and the heatmap of P.
#include <heed/heed.hpp>
#include <heed/transformer/decoder.hpp>

#include <bitset>
#include <iostream>
#include <string>
#include <vector>

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

  // 10.5: multi-head attention, queries attending to other key-value pairs.
  {
    heed::MultiHeadAttention<float> attention(/*key_size=*/100, /*query_size=*/100, /*value_size=*/100,
                                              /*num_hiddens=*/100, /*num_heads=*/5, /*dropout=*/0.5);
    attention.eval();
    std::cout << attention << "\n";
    const Tensorf X = heed::ones<float>({2, 4, 100}), Y = heed::ones<float>({2, 6, 100});
    const IndexTensor valid_lens = heed::tensor<std::int64_t>({3, 2});
    std::cout << "attention(X, Y, Y, valid_lens).shape: " << attention(X, Y, Y, valid_lens).shape() << "\n";
  }

  // 10.6.1: self-attention, queries, keys and values all X.
  {
    heed::MultiHeadAttention<float> attention(100, 100, 100, 100, 5, 0.5);
    attention.eval();
    std::cout << attention << "\n";
    const Tensorf X = heed::ones<float>({2, 4, 100});
    const IndexTensor valid_lens = heed::tensor<std::int64_t>({3, 2});
    std::cout << "attention(X, X, X, valid_lens).shape: " << attention(X, X, X, valid_lens).shape() << "\n";
  }

  // 10.6.3: sinusoidal positional encoding; P's columns oscillate more slowly the
  // further right they are.
  {
    const heed::index_t encoding_dim = 32, num_steps = 60;
    heed::PositionalEncoding<float> pos_encoding(encoding_dim, /*dropout=*/0);
    pos_encoding.eval();
    const Tensorf X = pos_encoding(heed::zeros<float>({1, num_steps, encoding_dim}));
    const Tensorf P = pos_encoding.P.narrow(1, 0, X.shape()[1]);  // (1, num_steps, encoding_dim)

    // d2l.plot(arange(num_steps), P[0, :, 6:10].T, ...) with d2l.plot's line styles.
    const Tensorf steps = heed::arange<float>(num_steps);
    const Tensorf columns = P.select(0, 0).slice(1, 6, 10).transpose(0, 1);  // (4, num_steps)
    const std::vector<std::string> styles = {"-", "m--", "g-.", "r:"};
    heed::Plot plot;
    for (heed::index_t j = 0; j < 4; ++j)
      plot.line(steps, columns.select(0, j), "Col " + std::to_string(6 + j), styles[static_cast<std::size_t>(j)]);
    plot.xlabel("Row (position)").figsize(6, 2.5);
    save(plot.render(), out_dir + "/positional_encoding_columns.svg");

    // Absolute position: in binary the higher bits alternate less often, as P's columns do.
    for (int i = 0; i < 8; ++i) std::cout << i << " in binary is " << std::bitset<3>(static_cast<unsigned>(i)) << "\n";

    save(heed::show_heatmaps(P.select(0, 0).unsqueeze(0).unsqueeze(0), "Column (encoding dimension)", "Row (position)",
                             {}, {3.5, 4}, "Blues"),
         out_dir + "/positional_encoding_heatmap.svg");
  }

  // 10.7.2: the position-wise FFN maps every position with the same MLP, so all the
  // rows of one batch element agree.
  heed::PositionWiseFFN<float> ffn(4, 4, 8);
  ffn.eval();
  std::cout << "ffn(ones((2, 3, 4)))[0]:\n" << ffn(heed::ones<float>({2, 3, 4})).select(0, 0) << "\n";

  // 10.7.3: d2l compares layer normalisation with nn.BatchNorm1d(2) here; batch
  // normalisation is outside heed's scope, so only the layer norm is printed. Each row
  // is normalised on its own: [[-1, 1], [-1, 1]].
  heed::LayerNorm<float> ln(2);
  std::cout << "layer norm: " << ln(heed::tensor<float>({{1, 2}, {2, 3}})) << "\n";

  heed::AddNorm<float> add_norm({3, 4}, 0.5);
  add_norm.eval();
  std::cout << "add_norm(ones((2, 3, 4)), ones((2, 3, 4))).shape: "
            << add_norm(heed::ones<float>({2, 3, 4}), heed::ones<float>({2, 3, 4})).shape() << "\n";

  // 10.7.4: the encoder; a block keeps the shape of its input.
  const Tensorf X = heed::ones<float>({2, 100, 24});
  const IndexTensor valid_lens = heed::tensor<std::int64_t>({3, 2});
  heed::EncoderBlock<float> encoder_blk(24, 24, 24, 24, {100, 24}, 24, 48, 8, 0.5);
  encoder_blk.eval();
  std::cout << "encoder_blk(X, valid_lens).shape: " << encoder_blk(X, valid_lens).shape() << "\n";

  heed::TransformerEncoder<float> encoder(200, 24, 24, 24, 24, {100, 24}, 24, 48, 8, 2, 0.5);
  encoder.eval();
  std::cout << encoder << "\n";
  std::cout << "encoder(ones((2, 100), dtype=long), valid_lens).shape: "
            << encoder(heed::ones<std::int64_t>({2, 100}), valid_lens).shape() << "\n";

  // 10.7.5: a decoder block, its state d2l's [enc_outputs, enc_valid_lens, [None]]:
  // the encoder block's outputs, their valid lengths and an empty key/value cache.
  // d2l's block returns (output, state); heed's returns the output and updates the state.
  heed::DecoderBlock<float> decoder_blk(24, 24, 24, 24, {100, 24}, 24, 48, 8, 0.5, /*i=*/0);
  decoder_blk.eval();
  heed::TransformerDecoderState<float> state;
  state.enc_outputs = encoder_blk(X, valid_lens);
  state.enc_valid_lens = valid_lens;
  std::cout << "decoder_blk(X, state)[0].shape: " << decoder_blk(X, state).shape() << "\n";
}
