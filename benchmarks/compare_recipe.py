#!/usr/bin/python3
"""heed's "train your own translator" recipe beside d2l's own PyTorch code: the same
Transformer, the same wall-clock training time, the same held-out split of
fra-eng-large/train.txt; then the corpus BLEU-4 of each on the held-out sentences and the
speed of decoding them.

    # the real figure: 20 minutes of training each, plus the last epoch and the decoding
    /usr/bin/python3 benchmarks/compare_recipe.py --json recipe.json

    # testing the script: half a minute each (one epoch each), 200 held-out sentences,
    # 4096 training pairs (an epoch of all 72,000 takes PyTorch several minutes)
    /usr/bin/python3 benchmarks/compare_recipe.py --minutes 0.5 --max-valid 200 --max-train 4096

    # the BLEU port against sacreBLEU's documented example, the output parsers (a second)
    /usr/bin/python3 benchmarks/compare_recipe.py --self-test

heed needs build/release/examples/train_translator and translate (cmake --preset release,
with CLI11 installed; --train-translator and --translate point elsewhere).

The split (made once, by a child process that imports d2l_nmt.py): the text of --data
goes through d2l's preprocess_nmt; the pairs are grouped by English sentence (d2l's
tokens joined by spaces), and each distinct English sentence, in order of
first appearance, is held out with probability --valid-fraction (random.Random(--seed)),
all of its French lines with it, so that no held-out source is ever trained on.
--max-valid N keeps N of the held-out sentences, evenly spaced (the file is sorted by
length, so the first N would all be short), and drops the others from both parts: the
training part does not depend on --max-valid. --max-train N (testing) keeps N evenly
spaced pairs of the training part. The parts are written as
train_split.txt and valid_split.txt (the original 'English<TAB>French' text of each pair,
any further columns dropped) into a temporary folder, or --keep DIR, so that both sides
read, preprocess and tokenise the same text themselves.

The two sides, each run once in a fresh process, in --order (default pytorch, heed):
  * pytorch: d2l's code (tests/data/d2l_seq2seq.py, d2l_reference.py) on Debian's
    python3-torch (1.13), in this script's child mode, with compare_scale.py's
    environment (OPENBLAS_NUM_THREADS = OMP_NUM_THREADS = --threads, OpenBLAS's pthread
    build first on LD_LIBRARY_PATH, torch.set_num_threads(--threads),
    set_num_interop_threads(1)): vocabularies of train_split.txt (min_freq 2, <pad> <bos>
    <eos>), build_array_nmt with --num-steps, load_array batches of --batch-size,
    TransformerEncoder / TransformerDecoder of the given size, then d2l's train_seq2seq
    loop as it is (xavier init, Adam at the constant --lr, MaskedSoftmaxCELoss with
    teacher forcing, gradient clipping at 1) except that it runs epochs until the
    training time passes --minutes. Then each distinct held-out English sentence is
    translated with d2l's predict_seq2seq, one sentence at a time, greedily, in eval mode
    and under torch.no_grad() (d2l's chapter calls it with gradients on, which is slower:
    the ratio below is the kinder one to PyTorch).
  * heed: train_translator --train train_split.txt --valid valid_split.txt
    --num-examples 0 --model transformer, the same size, batch, steps, dropout, lr and
    seed flags, --time-budget --minutes --epochs 1000 --valid-every 1000 (validation only
    once, after the last epoch, outside the timed training) --out DIR --json FILE (the
    figures this script reads) --quiet, plus
    --heed-flags (default "--bucket 32 --micro-batches 2 --schedule inverse-sqrt
    --warmup 500 --lr 0.002": the recipe's; a flag given there replaces this script's
    flag of the same name), with OMP_NUM_THREADS = --threads and OMP_WAIT_POLICY=passive;
    then translate --load DIR/best.safetensors --evaluate valid_split.txt
    --micro-batches --threads --worst 0: greedy, batches of 128.
heed runs first (--order) and stops after the first epoch that ends past --minutes of
training; PyTorch then trains for exactly heed's measured training time, stopping in
mid-epoch (its epochs last minutes), so that both had the same time. Training time is
the epoch loops alone (not the data loading, the model building or the validation), as
each side measures it.

The numbers, per side: training seconds and epochs done, tokens/s (the target tokens of
the epochs over the training time; heed's from its epoch lines), the last epoch's training loss (per token; heed's
comes from another learning-rate schedule, so it is shown, not compared), peak RSS
(os.wait4's ru_maxrss of the training process, which decodes too for PyTorch; this parent never imports torch, so that
its own small peak is the floor of the figure), the corpus BLEU-4 on the held-out split,
and the seconds and sentences/s of decoding every held-out English sentence. The BLEU is
sacreBLEU's corpus BLEU (max order 4, "exp" smoothing, the brevity penalty over the
corpus with each sentence's closest reference length, ties to the shorter) on d2l's
tokens: each distinct English sentence is translated once and scored against all of its
French lines (after preprocess_nmt, tokens joined by spaces); heed's translate computes
it in C++, this script in Python for PyTorch (corpus_bleu below, the same algorithm,
checked by --self-test against heed's test of sacreBLEU's example). d2l's TransformerDecoder
adds the positional encoding of position 0 to every token that predict_seq2seq feeds it
(each call restarts the positions) where heed continues them, so the PyTorch model is
also decoded a second time with the positions continued (not the decoding speed
reported); its BLEU is printed beside, the fairer measure of how well d2l's code trained.

Ratios: heed's BLEU - PyTorch's (d2l's decoding, and with the positions continued), and
heed's decoding sentences/s / PyTorch's one-sentence-at-a-time loop's (goal >= 3).

One of PyTorch's epochs lasts much longer than one of heed's (on a loaded 2-core
machine, 13 minutes against 70 s for the whole training part), which is why PyTorch
stops in mid-epoch; with --order pytorch,heed both stop at epoch ends and the script
warns when the training times differ by more than 10 %. Run it on an otherwise idle
machine: with as many threads as cores, any other load stalls every OpenMP barrier (on
a busy 2-core machine PyTorch's 2-thread training steps took 6 times as long as its
1-thread ones). Always exits 0 (the goal is reported, not enforced) unless a run fails:
then it prints the command and the tail of its output and exits 1. --json FILE writes
the settings, the split sizes, both sides' records (with their commands and output) and
the ratios.
"""

import argparse
import json
import math
import os
import random
import re
import shlex
import shutil
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.dont_write_bytecode = True  # no __pycache__ in benchmarks/ or tests/data/
sys.path.insert(0, HERE)
import compare_scale as cs  # noqa: E402  standard library only: the child runner, the environments

TESTS_DATA = cs.TESTS_DATA
SIDES = ("pytorch", "heed")
DECODE_GOAL = 3.0
DEFAULT_HEED_FLAGS = "--bucket 32 --micro-batches 2 --schedule inverse-sqrt --warmup 500 --lr 0.002"
# The model and data flags both sides take, with the names train_translator gives them.
SHARED_FLAGS = ("num_hiddens", "ffn_num_hiddens", "num_heads", "num_layers", "num_steps", "batch_size", "dropout",
                "lr", "seed")


# ---- corpus BLEU (sacreBLEU's algorithm on whitespace tokens, as heed::corpus_bleu) -------------


def corpus_bleu(hypotheses, references, max_order=4):
    """sacreBLEU's corpus_score with tokenize='none': hypotheses[i] (a string) against
    references[i] (a list of strings). Returns a dict: score (0..100), counts, totals,
    precisions (percent), bp, sys_len, ref_len, and line (sacreBLEU's printed form)."""
    if len(hypotheses) != len(references):
        raise ValueError(f"corpus_bleu: {len(hypotheses)} hypotheses but {len(references)} reference lists")

    def ngrams(tokens):
        out = {}
        for n in range(1, max_order + 1):
            for i in range(len(tokens) - n + 1):
                gram = tuple(tokens[i:i + n])
                out[gram] = out.get(gram, 0) + 1
        return out

    counts, totals = [0] * max_order, [0] * max_order
    sys_len = ref_len = 0
    for hyp_text, refs in zip(hypotheses, references):
        hyp = hyp_text.split()
        ref_max, closest = {}, None  # each n-gram's largest count in one reference
        for ref_text in refs:
            ref = ref_text.split()
            diff = abs(len(hyp) - len(ref))
            if closest is None or diff < abs(len(hyp) - closest) or (diff == abs(len(hyp) - closest)
                                                                      and len(ref) < closest):
                closest = len(ref)
            for gram, c in ngrams(ref).items():
                ref_max[gram] = max(ref_max.get(gram, 0), c)
        sys_len += len(hyp)
        ref_len += closest or 0
        for gram, c in ngrams(hyp).items():
            counts[len(gram) - 1] += min(c, ref_max.get(gram, 0))
        for n in range(1, max_order + 1):
            totals[n - 1] += max(len(hyp) - n + 1, 0)
    bp = 1.0 if sys_len >= ref_len else (math.exp(1.0 - ref_len / sys_len) if sys_len > 0 else 0.0)
    precisions, score = [0.0] * max_order, 0.0
    if any(counts):
        smooth = 1.0
        for n in range(max_order):
            if totals[n] == 0:  # sacreBLEU stops here: the later precisions stay 0, the score 0
                break
            if counts[n] == 0:
                smooth *= 2.0
                precisions[n] = 100.0 / (smooth * totals[n])
            else:
                precisions[n] = 100.0 * counts[n] / totals[n]
        log_sum = sum(math.log(p) if p > 0.0 else -9999999999.0 for p in precisions)
        score = bp * math.exp(log_sum / max_order)
    ratio = sys_len / ref_len if ref_len > 0 else 0.0
    line = (f"BLEU = {score:.2f} {'/'.join(f'{p:.1f}' for p in precisions)} (BP = {bp:.3f} ratio = {ratio:.3f} "
            f"hyp_len = {sys_len} ref_len = {ref_len})")
    return {"score": score, "counts": counts, "totals": totals, "precisions": precisions, "bp": bp,
            "sys_len": sys_len, "ref_len": ref_len, "line": line}


def group_references(source, target):
    """The distinct English sentences (tokens joined by ' ') in order of first appearance
    and, for each, all its French lines: what heed's translate --evaluate scores."""
    index, sources, refs = {}, [], []
    for src, tgt in zip(source, target):
        key = " ".join(src)
        if key not in index:
            index[key] = len(sources)
            sources.append(key)
            refs.append([])
        refs[index[key]].append(" ".join(tgt))
    return sources, refs


# ---- the split ----------------------------------------------------------------------------------


def split_pairs(raw_pairs, preprocessed_lines, fraction, seed, max_valid, max_train=0):
    """raw_pairs[i] is a pair's 'English\\tFrench' text, preprocessed_lines[i] the same
    after preprocess_nmt. Returns (train, valid, summary): lists of raw_pairs entries."""
    rng = random.Random(seed)
    held_out = {}  # English sentence -> held out?
    order = []
    for line in preprocessed_lines:
        english = line.split("\t")[0]  # d2l's tokens joined by ' ' are the text itself
        if english not in held_out:
            held_out[english] = rng.random() < fraction
            order.append(english)
    held = [e for e in order if held_out[e]]
    kept = set(held)
    if max_valid and len(held) > max_valid:  # evenly spaced: the file is sorted by length
        kept = {held[i * len(held) // max_valid] for i in range(max_valid)}
    train, valid = [], []
    for raw, line in zip(raw_pairs, preprocessed_lines):
        english = line.split("\t")[0]
        if not held_out[english]:
            train.append(raw)
        elif english in kept:
            valid.append(raw)
    all_train = len(train)
    if max_train and len(train) > max_train:
        train = [train[i * len(train) // max_train] for i in range(max_train)]
    summary = {"pairs": len(raw_pairs), "distinct_english": len(order), "held_out_english": len(held),
               "valid_english": len(kept), "train_pairs": len(train), "valid_pairs": len(valid),
               "train_pairs_before_max_train": all_train,
               "dropped_pairs": len(raw_pairs) - all_train - len(valid)}  # held out, past --max-valid
    return train, valid, summary


def make_split_child(argv):
    """--make-split DATA FRACTION SEED MAX_VALID MAX_TRAIN DIR: writes DIR/train_split.txt and
    DIR/valid_split.txt; prints the summary as JSON. A child, so that the parent never
    imports torch (d2l_nmt.py does): the parent's peak RSS is the floor of every child's."""
    data, fraction, seed, max_valid, max_train, out_dir = argv[0], float(argv[1]), int(argv[2]), int(argv[3]), \
        int(argv[4]), argv[5]
    sys.path.insert(0, TESTS_DATA)
    from d2l_nmt import preprocess_nmt  # d2l's own function
    with open(data, encoding="utf-8") as f:
        lines = f.read().split("\n")
    raw_pairs, skipped = [], 0
    for line in lines:
        columns = line.rstrip("\r").split("\t")
        if len(columns) >= 2:  # heed's read_data_nmt keeps the first two columns; d2l would skip the line
            raw_pairs.append(columns[0] + "\t" + columns[1])
        elif line.strip():
            skipped += 1
    # On the whole text, as d2l does (a '.' after a line break gets its space too).
    preprocessed = preprocess_nmt("\n".join(raw_pairs)).split("\n")
    assert len(preprocessed) == len(raw_pairs)
    train, valid, summary = split_pairs(raw_pairs, preprocessed, fraction, seed, max_valid, max_train)
    summary["skipped_lines"] = skipped
    for name, pairs in (("train_split.txt", train), ("valid_split.txt", valid)):
        with open(os.path.join(out_dir, name), "w", encoding="utf-8") as f:
            f.writelines(p + "\n" for p in pairs)
    print(json.dumps(summary))


# ---- parsing heed's output ----------------------------------------------------------------------

EVAL_HEADER = re.compile(r"^(.*): (\d+) English sentences, (\d+) references$")
EVAL_BLEU = re.compile(r"^BLEU = ([0-9.]+) (\S+) \(BP = ([0-9.]+) ratio = ([0-9.]+) hyp_len = (\d+) "
                       r"ref_len = (\d+)\)$")
EVAL_DECODED = re.compile(r"^decoded in ([0-9.]+) s: ([0-9.]+) sentences/s$")


def parse_train_translator(report):
    """The figures of train_translator --json's report (a dict, heed::TranslatorTrainReport):
    a dict, or the name of what is missing."""
    records = report.get("epoch_records") or []
    if "parameters" not in report:
        return "'parameters' in the --json report"
    if not records:
        return "an epoch in the --json report"
    r = {"train_pairs": report["train_pairs"], "valid_pairs": report["valid_pairs"],
         "src_vocab": report["src_vocab"], "tgt_vocab": report["tgt_vocab"], "n_params": report["parameters"],
         "batches_per_epoch": report["batches_per_epoch"], "epochs": records[-1]["epoch"],
         "final_loss": records[-1]["loss"], "train_s": report["seconds"]}
    r["epoch_lines"] = []
    for e in records:
        line = f"epoch {e['epoch']}/{report['epochs']}: loss {e['loss']:.4f}, {e['tokens_per_second']:.0f} tokens/s, " \
               f"{e['seconds']:.1f} s"
        if "valid_bleu" in e:
            r.update(valid_loss=e["valid_loss"], valid_bleu=e["valid_bleu"])
            line += f"; validation loss {e['valid_loss']:.4f}, BLEU {e['valid_bleu']:.2f}"
        r["epoch_lines"].append(line)
    if report.get("stopped_after"):
        r["stopped_after"] = report["stopped_after"]
    r["tokens_per_s"] = report["tokens"] / r["train_s"] if r["train_s"] > 0 else 0.0
    return r


def parse_evaluate(stdout):
    """translate --evaluate's figures: a dict, or the name of what is missing."""
    r = {}
    for line in stdout.splitlines():
        line = line.strip()
        m = EVAL_HEADER.match(line)
        if m:
            r.update(sentences=int(m.group(2)), references=int(m.group(3)))
        m = EVAL_BLEU.match(line)
        if m:
            r.update(bleu=float(m.group(1)), bleu_line=line)
        m = EVAL_DECODED.match(line)
        if m:
            r.update(decode_s=float(m.group(1)), sentences_per_s=float(m.group(2)))
    for key, what in (("sentences", "the 'N English sentences' line"), ("bleu", "the 'BLEU = ' line"),
                      ("decode_s", "the 'decoded in' line")):
        if key not in r:
            return what
    return r


# ---- the two sides ------------------------------------------------------------------------------


def flag_names(tokens):
    return {t.split("=", 1)[0] for t in tokens if t.startswith("--")}


def heed_command(args, work):
    """train_translator's command: the script's flags, less those --heed-flags gives."""
    extra = shlex.split(args.heed_flags)
    given = flag_names(extra)
    own = [("--train", os.path.join(work, "train_split.txt")), ("--valid", os.path.join(work, "valid_split.txt")),
           ("--num-examples", "0"), ("--model", "transformer")]
    own += [("--" + name.replace("_", "-"), str(getattr(args, name))) for name in SHARED_FLAGS]
    own += [("--time-budget", f"{args.minutes:g}"), ("--epochs", "1000"), ("--valid-every", "1000"),
            ("--out", os.path.join(work, "heed")), ("--json", os.path.join(work, "heed.json")), ("--quiet", None)]
    cmd = [args.train_translator]
    for flag, value in own:
        if flag not in given:
            cmd += [flag] if value is None else [flag, value]
    replaced = sorted(given & {flag for flag, _ in own})
    return cmd + extra, replaced


def run_heed(args, work):
    cmd, _ = heed_command(args, work)
    env = cs.heed_env(args.threads, args)
    stdout, stderr, rss, wall = cs.run_child(cmd, env, "heed train_translator")
    json_path = os.path.join(work, "heed.json")
    if not os.path.isfile(json_path):
        cs.fail("heed train_translator", cmd, env, f"no {json_path}", stdout, stderr)
    with open(json_path, encoding="utf-8") as f:
        record = parse_train_translator(json.load(f))
    if isinstance(record, str):
        cs.fail("heed train_translator", cmd, env, f"no {record} in its output", stdout, stderr)
    record.update(peak_rss_mib=rss, wall_s=wall, command=cs.shell_line(cmd, env), output=stdout.splitlines())
    checkpoint = os.path.join(work, "heed", "best.safetensors")
    if not os.path.isfile(checkpoint):
        cs.fail("heed train_translator", cmd, env, f"no {checkpoint}", stdout, stderr)
    eval_cmd = [args.translate, "--load", checkpoint, "--evaluate", os.path.join(work, "valid_split.txt"),
                "--micro-batches", str(args.threads), "--worst", "0"]
    stdout, stderr, _, _ = cs.run_child(eval_cmd, env, "heed translate --evaluate")
    evaluated = parse_evaluate(stdout)
    if isinstance(evaluated, str):
        cs.fail("heed translate --evaluate", eval_cmd, env, f"no {evaluated} in its output", stdout, stderr)
    record.update(evaluated)
    record.update(evaluate_command=cs.shell_line(eval_cmd, env), evaluate_output=stdout.splitlines())
    return record


def run_pytorch(args, work, budget_s):
    cmd = [args.python, os.path.abspath(__file__), "--torch-child", "--train", os.path.join(work, "train_split.txt"),
           "--valid", os.path.join(work, "valid_split.txt"), "--threads", str(args.threads), "--seconds",
           f"{budget_s:.3f}", "--hyp", os.path.join(work, "pytorch_hypotheses.txt")]
    cmd += [f"--{name.replace('_', '-')}={getattr(args, name)}" for name in SHARED_FLAGS]
    env = cs.peer_env(args.threads, args)
    stdout, stderr, rss, wall = cs.run_child(cmd, env, "pytorch (d2l's code)")
    record = cs.last_json_line(stdout)
    if record is None:
        cs.fail("pytorch (d2l's code)", cmd, env, "no JSON line", stdout, stderr)
    record.update(peak_rss_mib=rss, wall_s=wall, command=cs.shell_line(cmd, env))
    return record


# ---- the PyTorch child (imports torch; the parent never does) -----------------------------------


class ContinuedPositions:
    """Within it, d2l's TransformerDecoder gives a fed token the positional encoding of
    its place in the output (the tokens already cached), not of position 0 at every call,
    as heed's decoder does; d2l's predict_seq2seq runs unchanged."""

    def __init__(self, decoder):
        self.decoder = decoder

    def __enter__(self):
        decoder, pe = self.decoder, self.decoder.pos_encoding
        d2l_forward = decoder.forward
        pe.start = 0

        def decoder_forward(X, state):
            cached = state[2][0]  # block 0's keys and values of the tokens decoded so far
            pe.start = 0 if cached is None else cached.shape[1]
            return d2l_forward(X, state)

        def pe_forward(X):  # d2l's PositionalEncoding.forward, from position pe.start on
            X = X + pe.P[:, pe.start:pe.start + X.shape[1], :].to(X.device)
            return pe.dropout(X)

        decoder.forward, pe.forward = decoder_forward, pe_forward  # instance attributes shadow the methods
        return self

    def __exit__(self, *exc):
        del self.decoder.forward, self.decoder.pos_encoding.forward, self.decoder.pos_encoding.start
        return False


def torch_child(argv):
    p = argparse.ArgumentParser(prog="compare_recipe.py --torch-child")
    p.add_argument("--train", required=True)
    p.add_argument("--valid", required=True)
    p.add_argument("--threads", type=int, required=True)
    p.add_argument("--seconds", type=float, required=True)
    p.add_argument("--hyp")
    for name in SHARED_FLAGS:
        p.add_argument("--" + name.replace("_", "-"), type=float if name in ("dropout", "lr") else int, required=True)
    a = p.parse_args(argv)

    torch, d2l, TransformerEncoder, TransformerDecoder = cs.import_d2l_torch(a.threads, a.seed)
    device = torch.device("cpu")

    # d2l's load_data_nmt on the training part (all of its lines), the batch size given.
    source, target = d2l.tokenize_nmt(d2l.preprocess_nmt(d2l.read_data_nmt(a.train)))
    reserved = ["<pad>", "<bos>", "<eos>"]
    src_vocab = d2l.Vocab(source, min_freq=2, reserved_tokens=reserved)
    tgt_vocab = d2l.Vocab(target, min_freq=2, reserved_tokens=reserved)
    src_array, src_valid_len = d2l.build_array_nmt(source, src_vocab, a.num_steps)
    tgt_array, tgt_valid_len = d2l.build_array_nmt(target, tgt_vocab, a.num_steps)
    data_iter = d2l.load_array((src_array, src_valid_len, tgt_array, tgt_valid_len), a.batch_size)
    tokens_per_epoch = int(tgt_valid_len.sum())

    h = a.num_hiddens
    encoder = TransformerEncoder(len(src_vocab), h, h, h, h, [h], h, a.ffn_num_hiddens, a.num_heads, a.num_layers,
                                 a.dropout)
    decoder = TransformerDecoder(len(tgt_vocab), h, h, h, h, [h], h, a.ffn_num_hiddens, a.num_heads, a.num_layers,
                                 a.dropout)
    net = d2l.EncoderDecoder(encoder, decoder)
    n_params = sum(p.numel() for p in net.parameters())

    # d2l's train_seq2seq (d2l_seq2seq.py), verbatim but for the lines marked "recipe:".
    def xavier_init_weights(m):
        if type(m) == torch.nn.Linear:
            torch.nn.init.xavier_uniform_(m.weight)
        if type(m) == torch.nn.GRU:
            for param in m._flat_weights_names:
                if "weight" in param:
                    torch.nn.init.xavier_uniform_(m._parameters[param])
    net.apply(xavier_init_weights)
    net.to(device)
    optimizer = torch.optim.Adam(net.parameters(), lr=a.lr)
    loss = d2l.MaskedSoftmaxCELoss()
    net.train()
    losses, epoch_lines, train_s = [], [], 0.0
    budget_s = a.seconds
    out_of_time = partial = False
    while not out_of_time:  # recipe: epochs until the budget, instead of `for epoch in range(num_epochs)`
        start = time.perf_counter()  # recipe: instead of d2l.Timer, the clock heed's side reads too
        metric = d2l.Accumulator(2)  # Sum of training loss, no. of tokens
        for batch in data_iter:
            # recipe: stop in mid-epoch once the budget is spent, so that the time is heed's to the batch
            if train_s + time.perf_counter() - start >= budget_s:
                out_of_time = partial = True
                break
            optimizer.zero_grad()
            X, X_valid_len, Y, Y_valid_len = [x.to(device) for x in batch]
            bos = torch.tensor([tgt_vocab['<bos>']] * Y.shape[0], device=device).reshape(-1, 1)
            dec_input = d2l.concat([bos, Y[:, :-1]], 1)  # Teacher forcing
            Y_hat, _ = net(X, dec_input, X_valid_len)
            l = loss(Y_hat, Y, Y_valid_len)
            l.sum().backward()  # Make the loss scalar for `backward`
            d2l.grad_clipping(net, 1)
            num_tokens = Y_valid_len.sum()
            optimizer.step()
            with torch.no_grad():
                metric.add(l.sum(), num_tokens)
        epoch_s = time.perf_counter() - start
        train_s += epoch_s
        if metric[1] == 0:  # the budget ran out at an epoch's end: nothing of this one ran
            break
        out_of_time = out_of_time or train_s >= budget_s
        losses.append(metric[0] / metric[1])
        # recipe: heed's epoch line (a partial last epoch says so)
        epoch_lines.append(f"epoch {len(losses)}{' (partial)' if partial else ''}: loss {losses[-1]:.4f}, "
                           f"{metric[1] / epoch_s:.0f} tokens/s, {train_s:.1f} s")
        print(epoch_lines[-1], file=sys.stderr, flush=True)

    # Every distinct held-out English sentence once, one at a time, as d2l translates.
    valid_source, valid_target = d2l.tokenize_nmt(d2l.preprocess_nmt(d2l.read_data_nmt(a.valid)))
    sentences, references = group_references(valid_source, valid_target)
    net.eval()
    with torch.no_grad():
        start = time.perf_counter()
        hypotheses = [d2l.predict_seq2seq(net, s, src_vocab, tgt_vocab, a.num_steps, device)[0] for s in sentences]
        decode_s = time.perf_counter() - start
        with ContinuedPositions(net.decoder):
            start = time.perf_counter()
            continued = [d2l.predict_seq2seq(net, s, src_vocab, tgt_vocab, a.num_steps, device)[0]
                         for s in sentences]
            continued_decode_s = time.perf_counter() - start
    bleu = corpus_bleu(hypotheses, references)
    bleu_continued = corpus_bleu(continued, references)
    if a.hyp:
        with open(a.hyp, "w", encoding="utf-8") as f:
            f.writelines(f"{s}\t{hyp}\t{c}\n" for s, hyp, c in zip(sentences, hypotheses, continued))

    record = {"train_pairs": int(src_array.shape[0]), "valid_pairs": len(valid_source), "src_vocab": len(src_vocab),
              "tgt_vocab": len(tgt_vocab), "n_params": int(n_params), "threads": torch.get_num_threads(),
              "epochs": len(losses), "train_s": train_s, "tokens_per_s": tokens_per_epoch * len(losses) / train_s,
              "final_loss": losses[-1], "epoch_losses": losses, "epoch_lines": epoch_lines,
              "sentences": len(sentences), "references": len(valid_source), "bleu": bleu["score"],
              "bleu_line": bleu["line"], "decode_s": decode_s, "sentences_per_s": len(sentences) / decode_s,
              "bleu_continued_positions": bleu_continued["score"], "bleu_continued_line": bleu_continued["line"],
              "continued_decode_s": continued_decode_s, "blas": cs.loaded_blas(), "torch": torch.__version__}
    print(json.dumps(record))


# ---- --self-test --------------------------------------------------------------------------------


def self_test():
    """corpus_bleu against heed's tests of sacreBLEU's algorithm (tests/test_training.cpp),
    the split's rules, and the parsers on train_translator's and translate's formats."""
    failures = []

    def check(what, got, want):
        ok = abs(got - want) <= 1e-12 * max(1.0, abs(want)) if isinstance(want, float) else got == want
        if not ok:
            failures.append(f"{what}: got {got!r}, want {want!r}")

    # sacreBLEU's README example, 13a-tokenised ("wasn't" stays whole, final periods split
    # off): "BLEU = 48.53 82.4/50.0/45.5/37.5 (BP = 0.943 ratio = 0.944 hyp_len = 17 ref_len = 18)".
    s = corpus_bleu(["The dog bit the man .", "It wasn't surprising .", "The man had just bitten him ."],
                    [["The dog bit the man .", "The dog had bit the man ."],
                     ["It was not unexpected .", "No one was surprised ."],
                     ["The man bit him first .", "The man had bitten the dog ."]])
    check("sacreBLEU example", s["line"],
          "BLEU = 48.53 82.4/50.0/45.5/37.5 (BP = 0.943 ratio = 0.944 hyp_len = 17 ref_len = 18)")
    check("sacreBLEU example counts", (s["counts"], s["totals"]), ([14, 7, 5, 3], [17, 14, 11, 8]))
    want = math.exp(1 - 18 / 17) * 100 * (14 / 17 * 7 / 14 * 5 / 11 * 3 / 8) ** 0.25
    check("sacreBLEU example score", round(s["score"] / want, 12), 1.0)
    check("perfect, whitespace runs", corpus_bleu(["je suis  chez moi .\n", "va !"],
                                                  [["je suis chez moi ."], ["va !"]])["score"], 100.0)
    clipped = corpus_bleu(["a a a a"], [["a a b", "a b a a"]], 1)
    check("clipping", (clipped["counts"], clipped["ref_len"], round(clipped["score"], 9)), ([3], 4, 75.0))
    check("closest length, ties to the shorter", corpus_bleu(["a b c d e"], [["a b c d e f", "a b c d"]], 1)["ref_len"],
          4)
    short = corpus_bleu(["x y", "p q"], [["x y"], ["p q r s"]], 2)
    check("corpus brevity penalty", round(short["bp"] / math.exp(1 - 6 / 4), 12), 1.0)
    smoothed = corpus_bleu(["c b a"], [["a b c"]], 3)
    check("exp smoothing", (smoothed["counts"], smoothed["precisions"][1:]), ([3, 0, 0], [25.0, 25.0]))
    check("exp smoothing score", round(smoothed["score"] / (100 * 25 * 25) ** (1 / 3), 12), 1.0)
    check("no match", corpus_bleu(["x y z w"], [["a b c d"]])["score"], 0.0)
    check("no 4-gram", corpus_bleu(["a b c"], [["a b c"]])["score"] < 1e-300, True)
    check("no reference", corpus_bleu(["a b c"], [[]])["score"], 0.0)
    check("empty corpus", corpus_bleu([], [])["line"],
          "BLEU = 0.00 0.0/0.0/0.0/0.0 (BP = 1.000 ratio = 0.000 hyp_len = 0 ref_len = 0)")

    # The split: by English sentence, the same draws whatever --max-valid, kept ones evenly spaced.
    raw = [f"S{i % 50}.\tF{i}." for i in range(200)]
    pre = [r.lower().replace(".", " .") for r in raw]
    train, valid, summary = split_pairs(raw, pre, 0.3, 7, 0)
    train_capped, valid_capped, capped = split_pairs(raw, pre, 0.3, 7, 3)
    held = {r.split("\t")[0] for r in valid}
    check("split keeps every pair", len(train) + len(valid), 200)
    check("split is by English sentence", held & {r.split("\t")[0] for r in train}, set())
    check("split draws per distinct sentence", summary["distinct_english"], 50)
    check("--max-valid leaves the training part", train_capped, train)
    check("--max-valid keeps that many", (capped["valid_english"], len({r.split("\t")[0] for r in valid_capped})),
          (3, 3))
    check("--max-valid drops the rest", capped["dropped_pairs"], len(valid) - len(valid_capped))
    few, _, _ = split_pairs(raw, pre, 0.3, 7, 0, 10)
    check("--max-train: evenly spaced", few, [train[i * len(train) // 10] for i in range(10)])
    check("group_references", group_references([["a", "."], ["b"], ["a", "."]], [["x"], ["y"], ["z", "w"]]),
          (["a .", "b"], [["x", "z w"], ["y"]]))

    # train_translator --json's report, and the lines translate prints (its printf formats).
    epoch = {"epoch": 1, "loss": 4.1234, "tokens_per_second": 9000.0, "seconds": 60.0, "batches": 555,
             "stopped_mid_epoch": False}
    report = {"model": "transformer", "data": "t.txt", "train_pairs": 71000, "valid_pairs": 1500, "src_vocab": 5000,
              "tgt_vocab": 8000, "parameters": 3500000, "batches_per_epoch": 555, "epochs": 1000, "epochs_run": 2,
              "steps": 1110, "tokens": 9000 * 60 + 12000 * 50, "seconds": 110.0, "best_bleu": 23.45,
              "stopped_after": 2,
              "epoch_records": [epoch, dict(epoch, epoch=2, loss=3.0, tokens_per_second=12000.0, seconds=110.0,
                                            valid_loss=2.5, valid_bleu=23.45, best=True)]}
    heed = parse_train_translator(report)
    if isinstance(heed, str):
        failures.append(f"train_translator's report: no {heed}")
    else:
        check("train_translator: epochs, seconds, loss", (heed["epochs"], heed["train_s"], heed["final_loss"]),
              (2, 110.0, 3.0))
        check("train_translator: sizes", (heed["train_pairs"], heed["src_vocab"], heed["n_params"]),
              (71000, 5000, 3500000))
        check("train_translator: validation", (heed["valid_bleu"], heed["stopped_after"]), (23.45, 2))
        check("train_translator: tokens/s", round(heed["tokens_per_s"], 6), round((9000 * 60 + 12000 * 50) / 110, 6))
    check("train_translator: a report without epochs", parse_train_translator(dict(report, epoch_records=[])),
          "an epoch in the --json report")
    ev = parse_evaluate("loaded transformer from b.safetensors (10 parameters)\nv.txt: 1234 English sentences, "
                        "1500 references\nBLEU = 23.45 60.1/30.2/15.0/8.0 (BP = 0.950 ratio = 0.951 hyp_len = 9000 "
                        "ref_len = 9464)\ndecoded in 0.52 s: 2373 sentences/s\n")
    check("translate --evaluate", ev if isinstance(ev, str) else (ev["sentences"], ev["bleu"], ev["decode_s"],
                                                                  ev["sentences_per_s"]), (1234, 23.45, 0.52, 2373.0))

    class Flags:
        train_translator, heed_flags, minutes = "train_translator", "--lr 0.002 --bucket=32", 0.5
        num_hiddens, ffn_num_hiddens, num_heads, num_layers, num_steps = 128, 512, 4, 2, 12
        batch_size, dropout, lr, seed = 128, 0.1, 0.001, 1
    cmd, replaced = heed_command(Flags, "w")
    check("--heed-flags replace the script's flags", (cmd.count("--lr"), replaced, cmd[-3:]),
          (1, ["--lr"], ["--lr", "0.002", "--bucket=32"]))

    if failures:
        print("self-test FAILED:\n  " + "\n  ".join(failures))
        return 1
    print("self-test passed: corpus_bleu reproduces sacreBLEU's example (48.53) and heed's corpus_bleu tests; "
          "the split and the output parsers work")
    return 0


# ---- main ---------------------------------------------------------------------------------------


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--self-test", action="store_true", help="check the BLEU port and the parsers; nothing runs")
    parser.add_argument("--data", metavar="FILE", default=os.path.join(cs.SHARED, "data", "fra-eng-large", "train.txt"),
                        help="the pairs to split (fra-eng-large/train.txt)")
    release = os.path.join(REPO, "build", "release", "examples")
    parser.add_argument("--train-translator", metavar="PATH", default=os.path.join(release, "train_translator"),
                        help="heed's examples/train_translator")
    parser.add_argument("--translate", metavar="PATH", default=os.path.join(release, "translate"),
                        help="heed's examples/translate")
    parser.add_argument("--minutes", metavar="M", type=float, default=20.0,
                        help="training time of each side: both stop after the first epoch that ends past it")
    parser.add_argument("--threads", metavar="N", type=int, default=2, help="threads of both sides")
    parser.add_argument("--valid-fraction", metavar="P", type=float, default=0.02,
                        help="the chance of each distinct English sentence to be held out")
    parser.add_argument("--max-valid", metavar="N", type=int, default=0,
                        help="keep at most N held-out English sentences, evenly spaced (0: all)")
    parser.add_argument("--max-train", metavar="N", type=int, default=0,
                        help="train on N evenly spaced pairs of the training part (0: all; for testing the script, "
                             "as an epoch is the smallest unit of training time)")
    parser.add_argument("--seed", metavar="S", type=int, default=1, help="the split's, and both sides' training seed")
    model = parser.add_argument_group("the model and its training (both sides)")
    model.add_argument("--num-hiddens", type=int, default=128)
    model.add_argument("--ffn-num-hiddens", type=int, default=512)
    model.add_argument("--num-heads", type=int, default=4)
    model.add_argument("--num-layers", type=int, default=2, help="layers of the encoder and of the decoder")
    model.add_argument("--num-steps", type=int, default=12)
    model.add_argument("--batch-size", type=int, default=128)
    model.add_argument("--dropout", type=float, default=0.1)
    model.add_argument("--lr", type=float, default=0.001, help="Adam's rate (PyTorch: d2l's constant rate)")
    parser.add_argument("--heed-flags", metavar="FLAGS", default=DEFAULT_HEED_FLAGS,
                        help="more train_translator flags; one named here replaces the script's own "
                             f"(default: \"{DEFAULT_HEED_FLAGS}\")")
    parser.add_argument("--order", metavar="A,B", default="heed,pytorch",
                        help="which side runs first: heed,pytorch (PyTorch then trains for heed's measured training "
                             "time, stopping in mid-epoch) or pytorch,heed (PyTorch trains for --minutes)")
    parser.add_argument("--json", metavar="FILE", help="write the settings, the records and the ratios to FILE")
    parser.add_argument("--keep", metavar="DIR", help="keep the split files and checkpoints in DIR (else a temp dir)")
    parser.add_argument("--openblas-coretype", metavar="NAME", default="auto",
                        help="OPENBLAS_CORETYPE of both sides (as compare_scale.py: auto is SkylakeX on AVX-512)")
    parser.add_argument("--openblas-dir", metavar="DIR", default="/usr/lib/x86_64-linux-gnu/openblas-pthread",
                        help="put first on PyTorch's LD_LIBRARY_PATH ('' for none)")
    parser.add_argument("--peer-malloc", choices=["tcmalloc", "jemalloc", "glibc"], default="tcmalloc",
                        help="allocator preloaded into PyTorch (as compare_scale.py: default tcmalloc, its best)")
    default_python = "/usr/bin/python3" if os.path.isfile("/usr/bin/python3") else sys.executable
    parser.add_argument("--python", metavar="PATH", default=default_python,
                        help="interpreter with torch (Debian's python3-torch)")
    args = parser.parse_args()
    if cs.missing_peer_malloc(args):
        parser.error(cs.missing_peer_malloc(args))
    args.order = [s.strip() for s in args.order.split(",") if s.strip()]
    if sorted(args.order) != sorted(SIDES):
        parser.error("--order wants pytorch,heed or heed,pytorch")
    if args.minutes <= 0:
        parser.error("--minutes must be > 0 (train_translator's --time-budget 0 means no limit)")
    if args.threads < 1 or args.max_valid < 0 or args.max_train < 0 or not 0.0 < args.valid_fraction < 0.9:
        parser.error("--threads must be >= 1, --max-valid and --max-train >= 0, --valid-fraction in (0, 0.9)")
    for name in ("data", "train_translator", "translate", "python"):
        setattr(args, name, os.path.abspath(getattr(args, name)))
    return args


def print_table(records):
    header = (f"{'side':<8} {'train s':>8} {'epochs':>6} {'tokens/s':>9} {'loss':>7} {'peak MiB':>8} {'BLEU':>6} "
              f"{'decode s':>8} {'sent/s':>8}")
    print(header)
    print("-" * len(header))
    for side in SIDES:
        r = records[side]
        print(f"{side:<8} {r['train_s']:8.1f} {r['epochs']:6d} {r['tokens_per_s']:9.0f} {r['final_loss']:7.4f} "
              f"{r['peak_rss_mib']:8.0f} {r['bleu']:6.2f} {r['decode_s']:8.2f} {r['sentences_per_s']:8.1f}")


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--torch-child":
        torch_child(sys.argv[2:])
        return 0
    if len(sys.argv) == 8 and sys.argv[1] == "--make-split":
        make_split_child(sys.argv[2:])
        return 0
    args = parse_args()
    if args.self_test:
        return self_test()
    for path, what in ((args.data, "--data (fra-eng-large/train.txt)"), (args.python, "--python (one with torch)"),
                       (args.train_translator, "--train-translator (cmake --preset release builds it with CLI11)"),
                       (args.translate, "--translate")):
        if not os.path.isfile(path):
            raise SystemExit(f"no {path}: pass {what}")

    work = os.path.abspath(args.keep) if args.keep else tempfile.mkdtemp(prefix="compare_recipe.")
    os.makedirs(work, exist_ok=True)
    try:
        cmd = [args.python, os.path.abspath(__file__), "--make-split", args.data, str(args.valid_fraction),
               str(args.seed), str(args.max_valid), str(args.max_train), work]
        stdout, _, _, _ = cs.run_child(cmd, {}, "the split")
        split = json.loads(stdout.strip().splitlines()[-1])
        print(f"split of {args.data}: {split['pairs']} pairs, {split['distinct_english']} distinct English "
              f"sentences; held out {split['held_out_english']} (--valid-fraction {args.valid_fraction:g}, seed "
              f"{args.seed})" + (f", {split['valid_english']} kept (--max-valid)" if args.max_valid else "")
              + f": {split['train_pairs']} training pairs"
              + (f" (--max-train, of {split['train_pairs_before_max_train']})" if args.max_train else "")
              + f", {split['valid_pairs']} held-out pairs"
              + (f", {split['dropped_pairs']} dropped" if split["dropped_pairs"] else "")
              + (f"; {split['skipped_lines']} lines without a tab skipped" if split["skipped_lines"] else "")
              + f"\n  in {work}", flush=True)
        heed_cmd, replaced = heed_command(args, work)
        print(f"model: d2l's Transformer, {args.num_hiddens} hidden, FFN {args.ffn_num_hiddens}, {args.num_heads} "
              f"heads, {args.num_layers} + {args.num_layers} layers, dropout {args.dropout:g}; batch "
              f"{args.batch_size}, {args.num_steps} steps; {args.minutes:g} min of training each, {args.threads} "
              f"thread{'s' if args.threads != 1 else ''}, seed {args.seed}")
        print(f"pytorch: d2l's train_seq2seq, Adam at a constant {args.lr:g}, clipping 1; heed: --heed-flags "
              f"\"{args.heed_flags}\"" + (f" (replacing {', '.join(replaced)})" if replaced else ""))

        records = {}
        for side in args.order:
            # PyTorch's budget: heed's measured training time when heed ran first (its epochs end the budget
            # a little past --minutes), else --minutes.
            budget_s = records["heed"]["train_s"] if "heed" in records else 60.0 * args.minutes
            print(f"\nrunning {side} ({budget_s / 60 if side == 'pytorch' else args.minutes:g} min of training, "
                  f"then decoding) ...", flush=True)
            started = time.perf_counter()
            records[side] = run_pytorch(args, work, budget_s) if side == "pytorch" else run_heed(args, work)
            r = records[side]
            for line in r["epoch_lines"]:
                print(f"  {line}")
            print(f"  {r['bleu_line']}")
            if side == "pytorch":
                print(f"  with the decoder's positions continued: {r['bleu_continued_line']}")
            print(f"  {r['sentences']} held-out sentences decoded in {r['decode_s']:.2f} s: "
                  f"{r['sentences_per_s']:.1f} sentences/s ({time.perf_counter() - started:.0f} s in all)", flush=True)

        print()
        print_table(records)
        py, he = records["pytorch"], records["heed"]
        sizes = {side: (r["train_pairs"], r["src_vocab"], r["tgt_vocab"], r["n_params"], r["sentences"])
                 for side, r in records.items()}
        print(f"data and model: {py['train_pairs']} training pairs, vocabularies {py['src_vocab']} / "
              f"{py['tgt_vocab']}, {py['n_params']} parameters, {py['sentences']} held-out English sentences "
              f"({py['references']} references)")
        if sizes["pytorch"] != sizes["heed"]:
            print(f"WARNING: the sides disagree on (training pairs, vocabularies, parameters, held-out sentences): "
                  f"pytorch {sizes['pytorch']}, heed {sizes['heed']}")
        print(f"BLAS of pytorch: {cs.blas_line(py)}")
        longer, shorter = max(py["train_s"], he["train_s"]), min(py["train_s"], he["train_s"])
        if longer > 1.1 * shorter:  # the budget is checked after each epoch: the slower side overshoots more
            print(f"WARNING: the training times differ {longer / shorter:.1f}-fold (heed stops at an epoch's end, "
                  f"PyTorch at a batch's end), so the BLEUs are not at equal time: raise --minutes")

        bleu_gain = he["bleu"] - py["bleu"]
        bleu_gain_continued = he["bleu"] - py["bleu_continued_positions"]
        decode_ratio = he["sentences_per_s"] / py["sentences_per_s"]
        print("\nRatios:")
        print(f"  BLEU: heed {he['bleu']:.2f} - pytorch {py['bleu']:.2f} = {bleu_gain:+.2f} (pytorch with the "
              f"decoder's positions continued: {py['bleu_continued_positions']:.2f}, difference "
              f"{bleu_gain_continued:+.2f})")
        print(f"  decoding: heed {he['sentences_per_s']:.1f} sentences/s (batches of 128) / pytorch "
              f"{py['sentences_per_s']:.1f} (one sentence at a time) = {decode_ratio:.2f}x   goal >= "
              f"{DECODE_GOAL:g}x: {cs.verdict(decode_ratio >= DECODE_GOAL)}")
        print("\nCommands:")
        print(f"  {py['command']}")
        print(f"  {he['command']}")
        print(f"  {he['evaluate_command']}")
        if args.json:
            ratios = {"bleu_difference": bleu_gain, "bleu_difference_continued_positions": bleu_gain_continued,
                      "decode_ratio": decode_ratio, "decode_goal": DECODE_GOAL}
            with open(args.json, "w") as f:
                json.dump({"settings": vars(args), "split": split, "records": records, "ratios": ratios}, f, indent=1)
            print(f"records: {args.json}")
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
