// Writes two small checkpoints as train_translator wrote them before the translator
// moved into the library (examples/translator.hpp at bb6ca6e): tests/data's
// translator_v1_*.safetensors.
#include <iostream>
#include "translator.hpp"

using namespace translator;

int main(int, char** argv) {
  const std::string dir = argv[1];
  const std::vector<std::string> en = {"go .", "i lost .", "he's calm .", "i'm home ."};
  const std::vector<std::string> fr = {"va !", "j'ai perdu .", "il est calme .", "je suis chez moi ."};
  heed::NmtTokens words;
  for (std::size_t i = 0; i < en.size(); ++i) {
    words.source.push_back(heed::detail::split(en[i], ' '));
    words.target.push_back(heed::detail::split(fr[i], ' '));
  }
  const Tokenizers tokenizers;
  const heed::Vocab src = tokenizers.vocab(words.source, false, 0), tgt = tokenizers.vocab(words.target, true, 0);
  {
    heed::manual_seed(3);
    ModelConfig c;
    c.num_hiddens = 8, c.ffn_num_hiddens = 16, c.num_heads = 2, c.num_layers = 1, c.num_steps = 6;
    auto net = make_net(c, src, tgt, static_cast<TransformerNet*>(nullptr));
    std::map<std::string, std::string> metadata = c.to_metadata();
    metadata.merge(vocab_metadata(src, tgt));
    heed::save_checkpoint(*net, dir + "/translator_v1_transformer.safetensors", metadata);
    heed::PredictOptions options;
    options.save_attention_weights = false;
    for (const auto& t : translate(*net, tokenizers, en, src, tgt, c.num_steps, options))
      std::cout << "transformer: " << t.text << " | " << t.score << "\n";
  }
  {
    heed::manual_seed(4);
    ModelConfig c;
    c.model = "bahdanau";
    c.num_hiddens = 8, c.embed_size = 4, c.num_layers = 1, c.num_steps = 6;
    auto net = make_net(c, src, tgt, static_cast<BahdanauNet*>(nullptr));
    std::map<std::string, std::string> metadata = c.to_metadata();
    metadata.merge(vocab_metadata(src, tgt));
    heed::Adam<Float> optimizer(net->parameters(), 0.01);
    heed::Tensor<Float> total;
    for (const auto& p : net->parameters()) total = total.defined() ? total + p.sum() : p.sum();
    total.backward();
    optimizer.step();
    // train_translator's resume keys, as its save() wrote them
    metadata["loader_generator"] = heed::Generator(5).get_state();
    metadata["default_generator"] = heed::Generator(6).get_state();
    metadata["epochs_done"] = "1";
    metadata["steps_done"] = "3";
    metadata["epoch_batches_done"] = "2";
    std::ostringstream best;
    best.precision(17);
    best << 12.5;
    metadata["best_bleu"] = best.str();
    heed::save_training_checkpoint(*net, optimizer, dir + "/translator_v1_last.safetensors", metadata);
    heed::PredictOptions options;
    options.save_attention_weights = false;
    for (const auto& t : translate(*net, tokenizers, en, src, tgt, c.num_steps, options))
      std::cout << "bahdanau: " << t.text << " | " << t.score << "\n";
  }
}
