#!/usr/bin/env python3
"""Interop golden files: d2l's two translation models trained briefly in PyTorch, saved
as safetensors checkpoints that heed loads, with their logits and greedy translations.

Writes, for tests/test_interop.cpp:
  * tests/data/interop_bahdanau.safetensors: d2l's Seq2SeqEncoder + Seq2SeqAttentionDecoder
    (embedding 16, hidden 16, 2 GRU layers, dropout 0);
  * tests/data/interop_transformer.safetensors: d2l's TransformerEncoder +
    TransformerDecoder (16 hidden, 2 layers, 4 heads, FFN 32, dropout 0);
    each holds the model's state_dict() in F32 under its own keys, with the metadata of
    heed's translate checkpoints: heed.model ("bahdanau" / "transformer"), src_vocab and
    tgt_vocab (idx_to_token, each token followed by "\\n") and num_steps ("10");
  * tests/data/interop_golden.txt (tests/data/golden_file.py's format):
      batch.enc_X, batch.dec_X (10 steps each), batch.enc_valid_lens: two training
          pairs, the decoder reading <bos> then the target minus its last token, as
          d2l's train_seq2seq feeds it;
      <model>.logits: (2, 10, len(tgt_vocab)), d2l's forward on that batch;
      sentence.<i>: the source indices of sentence i with <eos>, before padding;
      <model>.translation.<i>: its greedy translation, target indices without <eos>.

The data: the first 200 pairs of d2l's fra.txt (d2l's load_data_nmt with num_examples
200, so 201 pairs), d2l's vocabularies (min_freq 2, reserved <pad> <bos> <eos>). Each model
is trained with d2l's train_seq2seq (Xavier initialisation, Adam lr 0.005, clipping at 1)
for 150 (Bahdanau) or 60 (Transformer) epochs on one thread from torch.manual_seed(0), so
that its weights are those of a model that has learnt something, not random ones.

The logits are computed in float64 from the float32 weights (golden_file.prepare) with
dropout 0, and rounded to 7 significant digits to keep the file small (far below the
tests' 1e-5 tolerance). The Transformer's are those of d2l's training-mode forward
(causal decoder self-attention); d2l's eval mode drops the causal mask, which only its
step-by-step predict_seq2seq can afford.

The translations, of d2l's four test sentences and four training sentences: greedy,
up to 10 tokens, stopping at <eos>, each step running the whole decoder on <bos> and the
tokens so far and taking the argmax of the last step; checked to agree in float32 and
float64, so that no near tie decides them. For the Bahdanau model this is exactly
d2l's predict_seq2seq (checked). For the Transformer, d2l's predict_seq2seq can differ:
it feeds one token per call and its PositionalEncoding restarts at position 0 on every
call, so every decoded token gets position 0's encoding; heed's decoder continues the
positions, which is what the full-prefix decoding here computes. The script prints
d2l's own output beside each translation where the two differ (for these eight
sentences and these weights they happen not to).

Usage (python3 with torch; on Debian: apt-get install python3-torch):

    /usr/bin/python3 tests/data/make_interop_golden.py [--data ../shared/data/fra-eng/fra.txt]

Deterministic: the same bytes on every run (one thread, fixed seeds).
"""

import argparse
import os
import sys

import torch

sys.dont_write_bytecode = True  # leave no __pycache__ in tests/data
import d2l_seq2seq as d2l  # noqa: E402  d2l's seq2seq code, verbatim
from d2l_reference import TransformerDecoder, TransformerEncoder  # noqa: E402
from golden_file import GoldenFile, load_file, prepare, save_file  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_DATA = os.path.join(HERE, "..", "..", "..", "shared", "data", "fra-eng", "fra.txt")
GOLDEN = os.path.join(HERE, "interop_golden.txt")
CHECKPOINT = os.path.join(HERE, "interop_{}.safetensors")

NUM_EXAMPLES, BATCH_SIZE, NUM_STEPS, LR = 200, 64, 10, 0.005
EMBED, HIDDENS, LAYERS, FFN_HIDDENS, HEADS = 16, 16, 2, 32, 4
SEED = 0
EPOCHS = {"bahdanau": 150, "transformer": 60}
BATCH_ROWS = [146, 65]  # the pairs of the fixed batch: source valid lengths 4 and 3, targets 7 and 3
# d2l's four test sentences, then four training sentences (tests/test_interop.cpp has them too).
SENTENCES = ["go .", "i lost .", "he's calm .", "i'm home .",
             "i'm ill .", "go home .", "help me .", "i'm tom ."]


# ---- the checkpoint's metadata -----------------------------------------------------------


def vocab_text(vocab):
    """idx_to_token as heed's translate stores it: each token followed by a newline."""
    assert all("\n" not in token for token in vocab.idx_to_token)
    return "".join(token + "\n" for token in vocab.idx_to_token)


# ---- the models --------------------------------------------------------------------------


def make_net(model, src_vocab, tgt_vocab):
    if model == "bahdanau":
        encoder = d2l.Seq2SeqEncoder(len(src_vocab), EMBED, HIDDENS, LAYERS, 0)
        decoder = d2l.Seq2SeqAttentionDecoder(len(tgt_vocab), EMBED, HIDDENS, LAYERS, 0)
    else:
        h = HIDDENS
        encoder = TransformerEncoder(len(src_vocab), h, h, h, h, [h], h, FFN_HIDDENS, HEADS, LAYERS, 0)
        decoder = TransformerDecoder(len(tgt_vocab), h, h, h, h, [h], h, FFN_HIDDENS, HEADS, LAYERS, 0)
    return d2l.EncoderDecoder(encoder, decoder)


def logits(net, enc_X, dec_X, enc_valid_lens):
    """d2l's forward with dropout 0; the Transformer's in training mode (causal)."""
    net.train()  # every dropout is 0: training mode only makes the Transformer's decoder causal
    with torch.no_grad():
        output, _ = net(enc_X, dec_X, enc_valid_lens)
    net.eval()
    return output


def source_tokens(sentence, src_vocab):
    """d2l's predict_seq2seq's source: the indices of the words, then <eos>."""
    return src_vocab[sentence.lower().split(" ")] + [src_vocab["<eos>"]]


def greedy(net, sentence, src_vocab, tgt_vocab):
    """Greedy decoding that runs the whole prefix at every step (see the docstring)."""
    src = source_tokens(sentence, src_vocab)
    enc_valid_len = torch.tensor([len(src)])
    enc_X = torch.tensor([d2l.truncate_pad(src, NUM_STEPS, src_vocab["<pad>"])], dtype=torch.long)
    out = []
    for _ in range(NUM_STEPS):
        dec_X = torch.tensor([[tgt_vocab["<bos>"]] + out], dtype=torch.long)
        pred = int(logits(net, enc_X, dec_X, enc_valid_len)[0, -1].argmax())
        if pred == tgt_vocab["<eos>"]:
            break
        out.append(pred)
    return out


def d2l_predict(net, sentence, src_vocab, tgt_vocab):
    text, _ = d2l.predict_seq2seq(net, sentence, src_vocab, tgt_vocab, NUM_STEPS, torch.device("cpu"))
    return tgt_vocab[text.split(" ")] if text else []


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default=DEFAULT_DATA, help="d2l's fra-eng/fra.txt")
    args = parser.parse_args()
    torch.set_num_threads(1)

    # d2l's load_data_nmt, step by step: the arrays give the fixed batch too.
    text = d2l.preprocess_nmt(d2l.read_data_nmt(args.data))
    source, target = d2l.tokenize_nmt(text, NUM_EXAMPLES)
    src_vocab = d2l.Vocab(source, min_freq=2, reserved_tokens=["<pad>", "<bos>", "<eos>"])
    tgt_vocab = d2l.Vocab(target, min_freq=2, reserved_tokens=["<pad>", "<bos>", "<eos>"])
    src_array, src_valid_len = d2l.build_array_nmt(source, src_vocab, NUM_STEPS)
    tgt_array, tgt_valid_len = d2l.build_array_nmt(target, tgt_vocab, NUM_STEPS)
    print(f"{len(source)} pairs, vocabularies {len(src_vocab)} / {len(tgt_vocab)}")

    rows = torch.tensor(BATCH_ROWS)
    enc_X, enc_valid_lens = src_array[rows].long(), src_valid_len[rows].long()
    Y = tgt_array[rows].long()
    bos = torch.full((len(BATCH_ROWS), 1), tgt_vocab["<bos>"], dtype=torch.long)
    dec_X = torch.cat([bos, Y[:, :-1]], 1)  # teacher forcing, as train_seq2seq
    for r in BATCH_ROWS:
        print(f"  batch: {' '.join(source[r])} => {' '.join(target[r])}")

    golden = GoldenFile("tests/data/make_interop_golden.py")
    golden.put("batch.enc_X", enc_X)
    golden.put("batch.dec_X", dec_X)
    golden.put("batch.enc_valid_lens", enc_valid_lens)
    for i, sentence in enumerate(SENTENCES):
        golden.put(f"sentence.{i}", torch.tensor(source_tokens(sentence, src_vocab), dtype=torch.long))

    for model in ("bahdanau", "transformer"):
        torch.manual_seed(SEED)
        data_iter = d2l.load_array((src_array, src_valid_len, tgt_array, tgt_valid_len), BATCH_SIZE)
        net = make_net(model, src_vocab, tgt_vocab)
        losses = d2l.train_seq2seq(net, data_iter, LR, EPOCHS[model], tgt_vocab, torch.device("cpu"), verbose=False)
        net.eval()
        print(f"{model}: {sum(p.numel() for p in net.parameters())} parameters, loss {losses[0]:.3f} -> "
              f"{losses[-1]:.3f} after {EPOCHS[model]} epochs")

        # The checkpoint: every state_dict() entry is a parameter (d2l's positional
        # encoding is a plain attribute, not a buffer).
        state = net.state_dict()
        assert set(state) == set(dict(net.named_parameters())), set(state) ^ set(dict(net.named_parameters()))
        metadata = {"heed.model": model, "src_vocab": vocab_text(src_vocab), "tgt_vocab": vocab_text(tgt_vocab),
                    "num_steps": str(NUM_STEPS)}
        path = CHECKPOINT.format(model)
        save_file(state, path, metadata)
        tensors, meta = load_file(path)
        assert meta == metadata and set(tensors) == set(state)
        for name, t in tensors.items():
            assert torch.equal(t, state[name]), name
        print(f"  wrote {len(tensors)} tensors to {path} ({os.path.getsize(path)} bytes)")

        net64 = make_net(model, src_vocab, tgt_vocab)
        net64.load_state_dict(state)
        net64 = prepare(net64)
        output = logits(net64, enc_X, dec_X, enc_valid_lens)
        assert torch.allclose(output.float(), logits(net, enc_X, dec_X, enc_valid_lens), atol=1e-4)
        golden.put(f"{model}.logits", output.apply_(lambda v: float(f"{v:.7g}")))

        for i, sentence in enumerate(SENTENCES):
            tokens = greedy(net, sentence, src_vocab, tgt_vocab)
            assert tokens == greedy(net64, sentence, src_vocab, tgt_vocab), (model, sentence)
            reference = d2l_predict(net, sentence, src_vocab, tgt_vocab)
            if model == "bahdanau":
                assert tokens == reference, (sentence, tokens, reference)
            golden.put(f"{model}.translation.{i}", torch.tensor(tokens, dtype=torch.long))
            d2l_text = " ".join(tgt_vocab.to_tokens(reference))
            note = "" if tokens == reference else f"   (d2l's predict_seq2seq: {d2l_text})"
            print(f"  {sentence} => {' '.join(tgt_vocab.to_tokens(tokens))}{note}")

    golden.write(GOLDEN)


if __name__ == "__main__":
    main()
