// examples/train_translator.cpp — train an English→French translator of any size on a
// fra.txt-format file, with validation, checkpoints and resume; no C++ to write.
//
//   train_translator                                   d2l's Transformer on the built-in corpus
//   train_translator --train ../shared/data/fra-eng-large/train.txt --num-examples 0
//       --valid-fraction 0.02 --num-hiddens 128 --ffn-num-hiddens 512 --num-steps 12
//       --batch-size 128 --lr 0.001 --bucket 32 --micro-batches 2 --epochs 6 --out run
//   train_translator ... --resume run/last.safetensors --epochs 8      two more epochs
//   translate --load run/best.safetensors "i'm calm ."
//   train_translator --init-marian opus-mt-en-fr --train pairs.txt --valid-fraction 0.05
//       --lr 0.00005 --epochs 2 --out ft --save-marian opus-mt-en-fr-ft     fine-tune OPUS-MT
//
// Every hyper-parameter has a flag (train_translator --help); the defaults are d2l's
// (batch 64, 10 steps, lr 0.005, 32 hidden, 2 layers, dropout 0.1, 200 epochs for the
// Transformer and 250 for the Bahdanau model). After each --valid-every epochs it
// reports the validation loss and corpus BLEU-4; with --out DIR it keeps DIR/last.safetensors
// (the training checkpoint: parameters, Adam's state, the generators, the epoch and step)
// and DIR/best.safetensors (the parameters of the best validation BLEU so far); --json FILE
// writes what the run did (heed::TranslatorTrainReport) for scripts such as
// benchmarks/compare_recipe.py. The work is heed::train_translator's
// (heed/seq2seq/translator_training.hpp): this program is its command line.
// --average-last N writes DIR/averaged.safetensors, the mean of the last N epochs'
// parameters; --ema DECAY keeps a moving average of the weights (DIR/ema.safetensors);
// both are validated beside the last and best (with --init-marian, DIR/averaged and
// DIR/ema are MarianMT directories).
// --resume continues from a last.safetensors: the same command line with a larger
// --epochs gives the parameters an uninterrupted run gives, bit for bit (with --schedule
// cosine, whose length is --epochs, the same --epochs).
#include <heed/seq2seq/translator_training.hpp>

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdint>
#include <exception>
#include <iostream>
#include <string>

namespace {
using heed::index_t;
}  // namespace

int main(int argc, char** argv) {
  heed::TranslatorTrainOptions args;
  std::string json;
  CLI::App app{
      "Trains an English-to-French translator (d2l's Transformer or Bahdanau model) on a fra.txt-format "
      "file, with validation, checkpoints and resume. The defaults are d2l's.",
      "train_translator"};
  app.option_defaults()->always_capture_default();
  auto* data = "Data";
  app.add_option("--train", args.train, "training pairs, 'English<TAB>French' per line (default: the built-in corpus)")
      ->group(data);
  app.add_option("--valid", args.valid, "validation pairs in the same format")->group(data);
  app.add_option("--valid-fraction", args.valid_fraction,
                 "hold out this fraction of the training file's English sentences (with all their translations) "
                 "for validation, when there is no --valid")
      ->check(CLI::Range(0.0, 0.9))
      ->excludes("--valid")
      ->group(data);
  app.add_option("--num-examples", args.num_examples, "pairs to read, d2l's num_examples; 0 reads all")
      ->check(CLI::Range(index_t(0), index_t(1) << 40))
      ->group(data);
  app.add_option("--num-steps", args.model.num_steps, "tokens per sentence, <eos> included; longer ones are cut")
      ->check(CLI::Range(index_t(2), index_t(4096)))
      ->group(data);
  app.add_option("--min-freq", args.min_freq, "a word seen fewer times is <unk>")
      ->check(CLI::Range(index_t(0), index_t(1) << 40))
      ->group(data);
  app.add_option("--batch-size", args.batch_size, "sentences per batch (at most, with --batch-tokens)")
      ->check(CLI::Range(index_t(1), index_t(1) << 20))
      ->group(data);
  app.add_option("--batch-tokens", args.batch_tokens,
                 "positions per batch, rows × (longest source + longest target), at most (0: by --batch-size)")
      ->check(CLI::Range(index_t(0), index_t(1) << 40))
      ->group(data);
  app.add_option("--sentencepiece", args.sentencepiece,
                 "subword tokens: a SentencePiece model of this many pieces per language, trained on the training "
                 "pairs and kept in the checkpoints (a build with HEED_WITH_SENTENCEPIECE; 0: d2l's words)")
      ->check(CLI::Range(index_t(0), index_t(1) << 20))
      ->group(data);
  app.add_option("--bucket", args.bucket, "sort by length within windows of this many batches (0: d2l's shuffle)")
      ->check(CLI::Range(index_t(0), index_t(1) << 20))
      ->group(data);

  auto* model = "Model";
  app.add_option("--model", args.model.model, "transformer or bahdanau")
      ->check(CLI::IsMember({"transformer", "bahdanau"}))
      ->group(model);
  app.add_option("--num-hiddens", args.model.num_hiddens, "width of every layer (d2l's num_hiddens)")
      ->check(CLI::Range(index_t(1), index_t(1) << 16))
      ->group(model);
  app.add_option("--embed-size", args.model.embed_size, "Bahdanau: embedding width")
      ->check(CLI::Range(index_t(1), index_t(1) << 16))
      ->group(model);
  app.add_option("--ffn-num-hiddens", args.model.ffn_num_hiddens, "Transformer: hidden width of the FFN")
      ->check(CLI::Range(index_t(1), index_t(1) << 18))
      ->group(model);
  app.add_option("--num-heads", args.model.num_heads, "Transformer: attention heads (dividing --num-hiddens)")
      ->check(CLI::Range(index_t(1), index_t(1) << 10))
      ->group(model);
  app.add_option("--num-kv-heads", args.model.num_kv_heads,
                 "Transformer: key/value heads (grouped-query attention; 0: --num-heads)")
      ->check(CLI::Range(index_t(0), index_t(1) << 10))
      ->group(model);
  app.add_option("--num-layers", args.model.num_layers, "layers of the encoder and of the decoder")
      ->check(CLI::Range(index_t(1), index_t(256)))
      ->group(model);
  app.add_option("--dropout", args.model.dropout, "dropout probability")->check(CLI::Range(0.0, 0.99))->group(model);
  app.add_flag("--pre-norm", args.model.norm_first, "Transformer: LayerNorm before each sublayer")->group(model);
  app.add_option("--embedding-scale", args.model.embedding_scale,
                 "Transformer: the embeddings' factor before the positions are added (0: sqrt(--num-hiddens), d2l's; "
                 "1: none)")
      ->check(CLI::Range(0.0, 1e6))
      ->group(model);

  auto* training = "Training";
  app.add_option("--epochs", args.epochs, "epochs in all (a resumed run counts those done; default: d2l's)")
      ->check(CLI::Range(index_t(0), index_t(1) << 30))
      ->group(training);
  app.add_option("--lr", args.lr, "Adam's learning rate (the peak of a schedule)")
      ->check(CLI::Range(1e-12, 10.0))
      ->group(training);
  app.add_option("--schedule", args.schedule,
                 "constant, inverse-sqrt (\"Attention Is All You Need\") or cosine, after --warmup steps")
      ->check(CLI::IsMember({"constant", "inverse-sqrt", "cosine"}))
      ->group(training);
  app.add_option("--warmup", args.warmup, "steps of linear warm-up")
      ->check(CLI::Range(index_t(0), index_t(1) << 40))
      ->group(training);
  app.add_option("--min-lr", args.min_lr, "cosine: the rate at the last step")
      ->check(CLI::Range(0.0, 10.0))
      ->group(training);
  app.add_option("--grad-clip", args.grad_clip, "clip the gradients' global norm to this (0: off)")
      ->check(CLI::Range(0.0, 1e12))
      ->group(training);
  app.add_option("--label-smoothing", args.label_smoothing,
                 "ε of the training targets, (1 − ε) one-hot + ε / vocabulary (validation loss stays unsmoothed)")
      ->check(CLI::Range(0.0, 1.0))
      ->group(training);
  app.add_option("--accumulation-steps", args.accumulation_steps, "batches summed into one update")
      ->check(CLI::Range(index_t(1), index_t(1) << 20))
      ->group(training);
  app.add_option("--micro-batches", args.micro_batches,
                 "parts of each batch trained on parallel threads (the thread count trains fastest; the parts, "
                 "not the threads, set the bits)")
      ->check(CLI::Range(index_t(1), index_t(1024)))
      ->group(training);
  std::string precision = "fp32";
  app.add_option("--precision", precision,
                 "the products' precision: fp32, or bf16 (mixed precision as PyTorch's CPU autocast: bf16 operands, "
                 "fp32 sums, weights, gradients and Adam); int8 is for decoding (translate --precision)")
      ->group(training);
  app.add_option("--max-steps", args.max_steps,
                 "stop after this many optimiser steps in all, in mid-epoch if so (0: --epochs alone); a --resume "
                 "with more goes on from there")
      ->check(CLI::Range(index_t(0), index_t(1) << 40))
      ->group(training);
  app.add_option("--time-budget", args.time_budget,
                 "stop after the batch that passes this many minutes of training, mid-epoch if so (--resume goes "
                 "on from there; 0: no limit)")
      ->check(CLI::Range(0.0, 1e9))
      ->group(training);
  // CLI11 reads integers with strtoull, which takes "-1" and 2^64 (both as 2^64 - 1) and
  // "010" as octal: the seed is checked as decimal digits first.
  app.add_option("--seed", args.seed, "seeds the initialisation, dropout, the data order and the split")
      ->transform(CLI::Validator(
          [](std::string& text) -> std::string {
            const std::string digits = "a decimal integer from 0 to 18446744073709551615";
            if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos)
              return "'" + text + "' is not " + digits;
            const std::size_t first = std::min(text.find_first_not_of('0'), text.size() - 1);
            text.erase(0, first);  // "007" is 7, not octal
            if (text.size() > 20 || (text.size() == 20 && text > "18446744073709551615"))
              return text + " is more than 18446744073709551615 (2^64 - 1)";
            return {};
          },
          ""))
      ->group(training);

  auto* output = "Validation and checkpoints";
  app.add_option("--valid-every", args.valid_every, "validate after every this many epochs (and after the last)")
      ->check(CLI::Range(index_t(1), index_t(1) << 30))
      ->group(output);
  app.add_option("--beam", args.beam, "beam width of the validation translations (1: greedy)")
      ->check(CLI::Range(index_t(1), index_t(64)))
      ->group(output);
  app.add_option("--out", args.out, "directory for last.safetensors and best.safetensors")->group(output);
  app.add_option("--resume", args.resume, "a last.safetensors to continue from (the same flags, more --epochs)")
      ->check(CLI::ExistingFile)
      ->group(output);
  app.add_option("--init-marian", args.init_marian,
                 "fine-tune a MarianMT (OPUS-MT) model directory: its net, SentencePiece models and vocabulary "
                 "(the model's flags are ignored but --num-steps, default 128 here); OUT/best is then a MarianMT "
                 "directory")
      ->check(CLI::ExistingDirectory)
      ->group(output);
  app.add_option("--save-marian", args.save_marian,
                 "write the fine-tuned model as a MarianMT directory that transformers and translate --marian load")
      ->needs("--init-marian")
      ->group(output);
  app.add_option("--average-last", args.average_last,
                 "keep OUT/epoch-K.safetensors of the last N epochs and write OUT/averaged.safetensors, their mean, "
                 "at the end, validated beside last and best (0: off; with --init-marian also OUT/averaged, a MarianMT "
                 "directory)")
      ->check(CLI::Range(index_t(0), index_t(1) << 20))
      ->needs("--out")
      ->group(output);
  app.add_option("--ema", args.ema,
                 "keep an exponential moving average of the weights with this decay (Marian's exponential smoothing, "
                 "e.g. 0.9999), validate with it too and save it as OUT/ema.safetensors (with --init-marian OUT/ema, a "
                 "MarianMT directory; 0: off)")
      ->check(CLI::Range(0.0, 0.999999999))
      ->group(output);
  app.add_option("--shortlist", args.shortlist,
                 "write a vocabulary shortlist of the training pairs to this file (each source token's 30 target "
                 "tokens of highest Dice coefficient and the 100 most frequent ones) for translate --shortlist")
      ->group(output);
  app.add_flag("--quiet", args.quiet, "no per-epoch progress line from the training loop")->group(output);
  app.add_option("--json", json,
                 "also write what the run did (its data, model, every epoch's loss, speed and validation) to this "
                 "JSON file, atomically")
      ->group(output);
  try {
    app.parse(argc, argv);
    if (args.model.model == "transformer" && args.model.num_steps > heed::TranslatorConfig::kMaxTransformerSteps)
      throw CLI::ValidationError(
          "--num-steps", "a Transformer reads at most " + std::to_string(heed::TranslatorConfig::kMaxTransformerSteps) +
                             " positions (its positional encoding), got " + std::to_string(args.model.num_steps));
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    args.precision = heed::parse_precision(precision, "--precision");
    const heed::TranslatorTrainReport report = heed::train_translator(args, std::cout);
    if (!json.empty()) report.save_json(json);
    return 0;
  } catch (const std::exception& e) {  // heed::Error and the standard library's: a message, not an abort
    std::cerr << "train_translator: " << e.what() << "\n";
    return 1;
  }
}
