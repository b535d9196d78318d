#!/usr/bin/env python3
"""Golden reference values for heed's GRU and sequence-to-sequence tests.

Runs torch.nn.GRU and d2l's own seq2seq code ("Dive into Deep Learning", PyTorch
edition 0.17, sections 9.6-9.7 and 10.4; copied in tests/data/d2l_seq2seq.py, which
builds on tests/data/d2l_reference.py) and writes tests/data/seq2seq_golden.txt, in
the format tests/golden.hpp reads.

Usage (python3 with torch; on Debian: apt-get install python3-torch):

    /usr/bin/python3 tests/data/make_seq2seq_golden.py

The output is deterministic: torch.manual_seed(0), float64 throughout, every input,
parameter and R a multiple of 1/64 (randn values rounded to that grid, zeros moved to
1/64), hence exact in float32, so that heed's float and double runs read the very
same numbers. Dropout is 0 everywhere.

Every parameter is overwritten with random values on that grid: Linear and GRU
weights randn / sqrt(fan_in) (so that the gates and attention scores stay O(1)),
LayerNorm weights 1 + 0.3 * randn, everything else (biases, embeddings)
0.5 * randn. A test that swaps two parameters, or leaves one at its default, fails.

Token sequences look like d2l's padded NMT batches, with d2l's reserved indices
<unk> = 0, <pad> = 1, <bos> = 2, <eos> = 3: a row of valid length L holds L - 1
word tokens (one of them <unk> where L > 2), <eos> at L - 1 and <pad> after it.
Decoder inputs are d2l's teacher forcing: <bos> followed by the labels but the last.
Tokens and valid lengths are int64.

Naming, per case <case>:

    <case>.<input>                inputs, e.g. gru.inputs, enc.X, enc.valid_lens
    <case>.<state_dict name>      parameters, e.g. gru.weight_ih_l0, enc.rnn.bias_hh_l1
    <case>.<output>               outputs (names per case below)
    <case>.R...                   random projections shaped like the outputs
    <case>.grad.<name>            gradients of the case's loss w.r.t. each
                                  floating-point input and each parameter

Cases:

    gru      torch.nn.GRU(input_size=5, hidden_size=6, num_layers=2); inputs (4,3,5)
             (num_steps, batch, input_size), state (2,3,6); outputs (4,3,6),
             final_state (2,3,6); R1, R2 shaped like them;
             loss = sum(outputs * R1) + sum(final_state * R2);
             grad.inputs, grad.state, grad.<parameter>
    gru0     the same GRU (parameters: those of gru) with no initial state (zeros):
             inputs (4,3,5); outputs, final_state, R1, R2, grad.inputs (the
             parameters' gradients take the same path as in gru)
    enc      d2l's Seq2SeqEncoder(vocab_size=10, embed_size=8, num_hiddens=16,
             num_layers=2); X int64 (4,7) with valid_lens [3,7,1,5] (d2l's encoder
             ignores them); outputs (7,4,16), state (2,4,16)
    dec      d2l's Seq2SeqAttentionDecoder(vocab_size=10, embed_size=8,
             num_hiddens=16, num_layers=2) after the enc encoder:
             state = decoder.init_state((enc.outputs, enc.state), enc.valid_lens),
             the encoder's outputs taken as leaves; X int64 (4,7); output = logits
             (4,7,10), hidden_state (2,4,16) (the final one), attention_weights
             (7,4,1,7) (d2l's list of per-step (4,1,7) weights, stacked); R
             (4,7,10); loss = sum(output * R); grad.enc_outputs (7,4,16),
             grad.enc_state (2,4,16), grad.<decoder parameter>. (The gradients of
             the encoder's parameters would double the file: the ed case checks
             them, through the whole EncoderDecoder.)
    ed       d2l's EncoderDecoder(Seq2SeqEncoder(11, 4, 5, 2),
             Seq2SeqAttentionDecoder(13, 4, 5, 2)) (sizes that differ between
             source and target, so that a mix-up fails); enc_X int64 (3,5),
             enc_valid_lens [5,2,4], Y int64 (3,6) labels, Y_valid_len [6,2,4],
             dec_X = [<bos>, Y[:, :-1]]; output = net(enc_X, dec_X, enc_valid_lens)[0]
             (3,6,13); R, grad.<parameter> (names encoder.* and decoder.*);
             loss = MaskedSoftmaxCELoss()(output, Y, Y_valid_len) (3,), and
             loss_grad = d loss.sum() / d output (3,6,13)
    tf       d2l's EncoderDecoder(TransformerEncoder(11, 8,8,8,8,[8],8,8,2,
             num_layers=2, dropout=0), TransformerDecoder(13, 8,8,8,8,[8],8,8,2,
             num_layers=2, dropout=0)) in training mode (d2l's DecoderBlock masks
             its self-attention causally only when training; with dropout 0 that
             mode is deterministic); enc_X int64 (2,5), enc_valid_lens [3,5], dec_X
             int64 (2,4); output = logits (2,4,13); P (1,10,8) = the first rows of
             d2l's positional-encoding table, computed in float32 by d2l (load it
             into heed's tables for a double comparison at 1e-10); parameters only,
             no gradients (keeps the file small; test_transformer.cpp checks the
             Transformer's gradients)

The script also asserts the shapes of d2l's own listings in 9.7 and 10.4 and that
each module's state_dict() keys are the ones listed in PARAMETER_NAMES (which the
C++ test repeats).

File format, one tensor per line:

    # generated by tests/data/make_seq2seq_golden.py (torch <version>); do not edit
    <name> <dtype> <rank> <dim0> ... <dimN-1> : <v0> <v1> ...

dtype is float64 or int64; floats are written with repr() and so round-trip.
"""

import os

import torch
from torch import nn

from golden_file import (BOS, EOS, PAD, GoldenFile, expect_shape, grid, prepare, rand, randomize, sentences,
                         teacher_forcing)
from d2l_reference import TransformerDecoder, TransformerEncoder
from d2l_seq2seq import EncoderDecoder, MaskedSoftmaxCELoss, Seq2SeqAttentionDecoder, Seq2SeqEncoder

OUT_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "seq2seq_golden.txt")


# torch.nn.GRU's parameters: weight_ih, weight_hh, bias_ih, bias_hh per layer.
GRU_NAMES = [f"{kind}_{part}_l{layer}" for layer in range(2) for kind, part in
             [("weight", "ih"), ("weight", "hh"), ("bias", "ih"), ("bias", "hh")]]
PARAMETER_NAMES = {
    "gru": GRU_NAMES,
    "encoder": ["embedding.weight"] + ["rnn." + n for n in GRU_NAMES],
    "decoder": ["attention.W_k.weight", "attention.W_q.weight", "attention.w_v.weight", "embedding.weight"] +
               ["rnn." + n for n in GRU_NAMES] + ["dense.weight", "dense.bias"],
}


# ---- helpers (grid, rand, randomize, sentences and teacher_forcing: golden_file.py) ----


golden = GoldenFile("tests/data/make_seq2seq_golden.py")


def put_parameters(case, module):
    for name, p in module.state_dict().items():
        golden.put(f"{case}.{name}", p)


def put_grads(prefix, named):
    for name, x in named:
        golden.put(f"{prefix}.{name}", x.grad if x.grad is not None else torch.zeros_like(x))


def expect_names(module, kind, prefix=""):
    names = [prefix + n for n in PARAMETER_NAMES[kind]]
    assert list(module.state_dict().keys()) == names, (list(module.state_dict().keys()), names)
    assert [n for n, _ in module.named_parameters()] == names


# ---- cases -------------------------------------------------------------------------


def gru_cases():
    gru = randomize(prepare(nn.GRU(input_size=5, hidden_size=6, num_layers=2)))
    expect_names(gru, "gru")
    params = list(gru.named_parameters())

    # With an initial state.
    inputs, state = rand(4, 3, 5), rand(2, 3, 6)
    outputs, final_state = gru(inputs, state)
    expect_shape(outputs, (4, 3, 6))
    expect_shape(final_state, (2, 3, 6))
    assert torch.equal(outputs[-1], final_state[-1])  # the top layer's last step
    R1, R2 = grid(torch.randn(outputs.shape)), grid(torch.randn(final_state.shape))
    ((outputs * R1).sum() + (final_state * R2).sum()).backward()
    golden.put("gru.inputs", inputs)
    golden.put("gru.state", state)
    put_parameters("gru", gru)
    golden.put("gru.outputs", outputs)
    golden.put("gru.final_state", final_state)
    golden.put("gru.R1", R1)
    golden.put("gru.R2", R2)
    put_grads("gru.grad", [("inputs", inputs), ("state", state)] + params)

    # Without one: zeros.
    gru.zero_grad(set_to_none=True)
    inputs = rand(4, 3, 5)
    outputs, final_state = gru(inputs)
    zero_outputs, _ = gru(inputs, torch.zeros(2, 3, 6))
    assert torch.equal(outputs, zero_outputs)
    R1, R2 = grid(torch.randn(outputs.shape)), grid(torch.randn(final_state.shape))
    ((outputs * R1).sum() + (final_state * R2).sum()).backward()
    golden.put("gru0.inputs", inputs)
    golden.put("gru0.outputs", outputs)
    golden.put("gru0.final_state", final_state)
    golden.put("gru0.R1", R1)
    golden.put("gru0.R2", R2)
    put_grads("gru0.grad", [("inputs", inputs)])


def bahdanau_cases():
    # d2l's encoder, on a padded batch.
    encoder = randomize(prepare(Seq2SeqEncoder(vocab_size=10, embed_size=8, num_hiddens=16, num_layers=2)))
    expect_names(encoder, "encoder")
    enc_valid_lens = torch.tensor([3, 7, 1, 5])
    enc_X = sentences(enc_valid_lens.tolist(), 7, 10)
    outputs, state = encoder(enc_X, enc_valid_lens)
    expect_shape(outputs, (7, 4, 16))
    expect_shape(state, (2, 4, 16))
    golden.put("enc.X", enc_X)
    golden.put("enc.valid_lens", enc_valid_lens)
    put_parameters("enc", encoder)
    golden.put("enc.outputs", outputs)
    golden.put("enc.state", state)

    # d2l's Bahdanau decoder after it, teacher forcing on labels of other lengths.
    decoder = randomize(prepare(Seq2SeqAttentionDecoder(vocab_size=10, embed_size=8, num_hiddens=16, num_layers=2)))
    expect_names(decoder, "decoder")
    dec_X = teacher_forcing(sentences([7, 2, 5, 4], 7, 10))
    # The encoder's outputs as leaves: their gradients stand in for those of the
    # encoder's parameters, which would double the file (the ed case checks those).
    enc_outputs = outputs.detach().clone().requires_grad_(True)
    enc_state = state.detach().clone().requires_grad_(True)
    dec_state = decoder.init_state((enc_outputs, enc_state), enc_valid_lens)
    logits, dec_state = decoder(dec_X, dec_state)
    expect_shape(logits, (4, 7, 10))
    hidden_state = dec_state[1]
    expect_shape(hidden_state, (2, 4, 16))
    weights = torch.stack(decoder.attention_weights)
    expect_shape(weights, (7, 4, 1, 7))
    # Masked keys get no weight: batch row 2 attends to its one valid step only.
    assert torch.all(weights[:, 2, 0, 0] == 1) and torch.all(weights[:, 0, 0, 3:] == 0)
    R = grid(torch.randn(logits.shape))
    (logits * R).sum().backward()
    golden.put("dec.X", dec_X)
    put_parameters("dec", decoder)
    golden.put("dec.output", logits)
    golden.put("dec.hidden_state", hidden_state)
    golden.put("dec.attention_weights", weights)
    golden.put("dec.R", R)
    put_grads("dec.grad", [("enc_outputs", enc_outputs), ("enc_state", enc_state)] +
              list(decoder.named_parameters()))


def encoder_decoder_case():
    net = randomize(prepare(EncoderDecoder(Seq2SeqEncoder(11, 4, 5, 2), Seq2SeqAttentionDecoder(13, 4, 5, 2))))
    expect_names(net.encoder, "encoder")
    expect_names(net.decoder, "decoder")
    enc_valid_lens, Y_valid_len = torch.tensor([5, 2, 4]), torch.tensor([6, 2, 4])
    enc_X = sentences(enc_valid_lens.tolist(), 5, 11)
    Y = sentences(Y_valid_len.tolist(), 6, 13)
    dec_X = teacher_forcing(Y)
    logits, _ = net(enc_X, dec_X, enc_valid_lens)
    expect_shape(logits, (3, 6, 13))
    golden.finish("ed", logits, {"enc_X": enc_X, "enc_valid_lens": enc_valid_lens, "dec_X": dec_X, "Y": Y,
                                 "Y_valid_len": Y_valid_len}, net, rounding=grid)

    # d2l's masked loss of those logits, and its gradient.
    leaf = logits.detach().clone().requires_grad_(True)
    loss = MaskedSoftmaxCELoss()(leaf, Y, Y_valid_len)
    expect_shape(loss, (3,))
    loss.sum().backward()
    # Steps past a row's valid length get no gradient.
    assert torch.all(leaf.grad[1, 2:] == 0) and torch.all(leaf.grad[2, 4:] == 0)
    golden.put("ed.loss", loss)
    golden.put("ed.loss_grad", leaf.grad)


def transformer_case():
    encoder = TransformerEncoder(11, 8, 8, 8, 8, [8], 8, 8, 2, num_layers=2, dropout=0)
    decoder = TransformerDecoder(13, 8, 8, 8, 8, [8], 8, 8, 2, num_layers=2, dropout=0)
    net = randomize(prepare(EncoderDecoder(encoder, decoder))).train()
    enc_valid_lens = torch.tensor([3, 5])
    enc_X = sentences(enc_valid_lens.tolist(), 5, 11)
    dec_X = teacher_forcing(sentences([4, 2], 4, 13))
    with torch.no_grad():
        logits, state = net(enc_X, dec_X, enc_valid_lens)
    expect_shape(logits, (2, 4, 13))
    assert state[2][0] is not None  # the blocks cached their keys/values
    P = encoder.pos_encoding.P[:, :10].double()
    assert torch.equal(P, decoder.pos_encoding.P[:, :10].double())
    golden.put("tf.enc_X", enc_X)
    golden.put("tf.enc_valid_lens", enc_valid_lens)
    golden.put("tf.dec_X", dec_X)
    golden.put("tf.P", P)
    put_parameters("tf", net)
    golden.put("tf.output", logits)


def check_d2l_listings():
    """The shapes d2l's own listings in 9.7 and 10.4 print (default initialization)."""
    encoder = Seq2SeqEncoder(vocab_size=10, embed_size=8, num_hiddens=16, num_layers=2)
    encoder.eval()
    X = torch.zeros((4, 7), dtype=torch.long)
    output, state = encoder(X)
    expect_shape(output, (7, 4, 16))
    expect_shape(state, (2, 4, 16))

    decoder = Seq2SeqAttentionDecoder(vocab_size=10, embed_size=8, num_hiddens=16, num_layers=2)
    decoder.eval()
    state = decoder.init_state(encoder(X), None)
    out, state = decoder(X, state)
    expect_shape(out, (4, 7, 10))
    assert len(state) == 3
    expect_shape(state[0], (4, 7, 16))
    assert len(state[1]) == 2
    expect_shape(state[1][0], (4, 16))

    loss = MaskedSoftmaxCELoss()
    values = loss(torch.ones(3, 4, 10), torch.ones((3, 4), dtype=torch.long), torch.tensor([4, 2, 0]))
    assert torch.allclose(values, torch.tensor([2.3026, 1.1513, 0.0]), atol=1e-4)


def main():
    torch.manual_seed(0)
    torch.set_default_dtype(torch.float64)
    gru_cases()
    bahdanau_cases()
    encoder_decoder_case()
    transformer_case()
    torch.set_default_dtype(torch.float32)
    check_d2l_listings()
    golden.write(OUT_FILE, name_width=48)


if __name__ == "__main__":
    main()
