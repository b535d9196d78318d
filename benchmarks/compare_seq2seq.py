#!/usr/bin/python3
"""Side-by-side training runs of d2l's English-to-French models: d2l's own PyTorch code
(tests/data/d2l_seq2seq.py, d2l 0.17) against heed's examples/translate, on this machine.

    nice /usr/bin/python3 benchmarks/compare_seq2seq.py \
        --translate build/release/examples/translate --data ../shared/data/fra-eng/fra.txt

    # only heed, one thread, a short run (testing the script)
    /usr/bin/python3 benchmarks/compare_seq2seq.py --skip-torch --threads 1 --epochs 5

    # quality: heed for seeds 1..5, how many of d2l's four sentences come out exactly
    /usr/bin/python3 benchmarks/compare_seq2seq.py --quality --seeds 1,2,3,4,5 [--torch]

Both sides train with d2l's settings on the first 600 pairs of fra.txt (d2l's
num_examples=600, which reads 601 lines): batch 64, 10 steps, Adam with lr 0.005,
gradient clipping at norm 1, the masked cross-entropy with teacher forcing.
  * bahdanau: Seq2SeqEncoder + Seq2SeqAttentionDecoder, embedding 32, hidden 32, 2 GRU
    layers, dropout 0.1, 250 epochs (d2l 10.4);
  * transformer: TransformerEncoder + TransformerDecoder, 32 hidden, 2 layers, 4 heads,
    FFN 64, dropout 0.1, 200 epochs (d2l 10.7).
Then each translates d2l's four sentences ("go .", "i lost .", "he's calm .", "i'm
home .") greedily and scores them with d2l's bleu(k=2). PyTorch translates with d2l's
predict_seq2seq as it is; for the Transformer that one adds the positional encoding of
position 0 to every decoded token (d2l's decoder restarts positions on each call), while
heed continues the positions, so the two Transformers' BLEU is not the same measure of
the same thing (heed's is the standard greedy decoding).

Timing (default mode): for each model and each thread count in --threads,
  * PyTorch runs in a fresh process (this script with --torch-child) with
    torch.set_num_threads(n), torch.set_num_interop_threads(1) and OMP_NUM_THREADS=n;
    the train_seq2seq call alone is timed (wall clock), not the imports, the data
    loading or the prediction;
  * heed runs `translate --model M --data FILE --num-examples 600 --seed S --quiet` with
    OMP_NUM_THREADS=n (OMP_WAIT_POLICY=passive unless set), and its own line
    "trained N epochs in X s" is the time: train_seq2seq alone as well.
The PyTorch and heed runs alternate (PyTorch 1 thread, heed 1 thread, PyTorch 2, heed 2)
so that load from other processes hits both alike; --repeats R keeps the best of R runs
of each. The table gives the seconds, the ratio best PyTorch / best heed (the goal is
>= 3, heed at least three times as fast), and the four BLEU scores of each run.

FLOPs: the matrix-product FLOPs of a training step (batch 64, the vocabulary sizes of
the data), counted from the hyper-parameters: a product of (m, k) by (k, n) is 2mkn
forward and twice that backward (the gradients of both operands), for the linear layers,
the GRU gates (input and hidden projections of the three gates), the attention
projections, d2l's attention batched products (scores and weighted values) and the
output layer; element-wise work (activations, softmax, LayerNorm, the loss, Adam) is
left out. The keys of Bahdanau's additive attention are projected once per batch, as
heed does; d2l projects them again at every decoder step, which adds the count printed
beside. Two counts: over d2l's 10 padded steps (what PyTorch computes), and what heed
computes, which cuts each Transformer batch after its longest source and target
sequences (the second is averaged over 200 shuffles of the real lengths into batches). heed's GFLOP/s = FLOPs per epoch x epochs / seconds.

Quality mode (--quality): trains heed once per seed in --seeds (at the first thread count
of --threads) and prints, per model and seed, how many of the four sentences reach BLEU
1.000. Goals, for five seeds: the Transformer translates 4/4 for at least 3 seeds and
never fewer than 3/4; Bahdanau reaches at least 3/4 for at least 4 seeds (for other seed
counts, 60 % and 80 % of the seeds). --torch adds the same runs of d2l's PyTorch code
(torch.manual_seed(seed)).

A full timing run takes several minutes: at one thread, on the shared 2-core development
machine with Debian's reference BLAS, PyTorch alone took 180 s (Bahdanau) and 187 s (the
Transformer), heed 12 s and 19 s; --models, --threads, --skip-torch, --skip-heed and --epochs
(fewer epochs than d2l's, for testing) shorten it. Run it under `nice` on a shared
machine, but mind that with as many threads as cores a niced run there waits for a core
at every OpenMP barrier: on 2 busy cores (load 3) the niced 2-thread runs took 9 times
(PyTorch) and 90 times (heed, whose small operations meet many more barriers) as long as
the 1-thread ones, which measures the load, not the libraries. Always exits 0 (the goals
are reported, not enforced), unless a run fails.
"""

import argparse
import json
import math
import os
import random
import re
import subprocess
import sys
import time

try:
    import torch
except ImportError:  # plain `python3` may be an interpreter without torch
    raise SystemExit("compare_seq2seq.py needs PyTorch: run it with /usr/bin/python3 (Debian's python3-torch)")

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.dont_write_bytecode = True  # the imports below would leave __pycache__ in benchmarks/ and tests/data/
sys.path.insert(0, os.path.join(REPO, "tests", "data"))
sys.path.insert(0, HERE)
import d2l_seq2seq as d2l  # noqa: E402  d2l's seq2seq code, verbatim
from d2l_reference import TransformerDecoder, TransformerEncoder  # noqa: E402
from compare_attention import blas_info  # noqa: E402

MODELS = ("bahdanau", "transformer")
BATCH_SIZE, NUM_STEPS, LR, NUM_EXAMPLES = 64, 10, 0.005, 600
EPOCHS = {"bahdanau": 250, "transformer": 200}
# d2l 10.4: embed_size, num_hiddens, num_layers, dropout; d2l 10.7 adds the FFN and heads.
EMBED, HIDDENS, LAYERS, DROPOUT = 32, 32, 2, 0.1
FFN_HIDDENS, HEADS = 64, 4
SENTENCES = ["go .", "i lost .", "he's calm .", "i'm home ."]
REFERENCES = ["va !", "j'ai perdu .", "il est calme .", "je suis chez moi ."]
SPEED_GOAL = 3.0


# ---- PyTorch, in a fresh process ---------------------------------------------------------


def make_torch_net(model, src_vocab, tgt_vocab):
    """d2l's model with d2l's hyper-parameters, exactly as the book builds it."""
    if model == "bahdanau":
        encoder = d2l.Seq2SeqEncoder(len(src_vocab), EMBED, HIDDENS, LAYERS, DROPOUT)
        decoder = d2l.Seq2SeqAttentionDecoder(len(tgt_vocab), EMBED, HIDDENS, LAYERS, DROPOUT)
    else:
        h = HIDDENS
        encoder = TransformerEncoder(len(src_vocab), h, h, h, h, [h], h, FFN_HIDDENS, HEADS, LAYERS, DROPOUT)
        decoder = TransformerDecoder(len(tgt_vocab), h, h, h, h, [h], h, FFN_HIDDENS, HEADS, LAYERS, DROPOUT)
    return d2l.EncoderDecoder(encoder, decoder)


def torch_child(args):
    """Trains one model with d2l's code; prints one JSON line."""
    torch.set_num_threads(args.child_threads)
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:
        pass
    torch.manual_seed(args.seed)
    data_iter, src_vocab, tgt_vocab = d2l.load_data_nmt(BATCH_SIZE, NUM_STEPS, NUM_EXAMPLES, args.data)
    net = make_torch_net(args.torch_child, src_vocab, tgt_vocab)
    epochs = args.epochs if args.epochs is not None else EPOCHS[args.torch_child]
    device = torch.device("cpu")
    start = time.perf_counter()
    losses = d2l.train_seq2seq(net, data_iter, LR, epochs, tgt_vocab, device, verbose=False)
    seconds = time.perf_counter() - start
    translations, bleus = [], []
    for sentence, reference in zip(SENTENCES, REFERENCES):
        translation, _ = d2l.predict_seq2seq(net, sentence, src_vocab, tgt_vocab, NUM_STEPS, device)
        translations.append(translation)
        try:
            bleus.append(d2l.bleu(translation, reference, k=2))
        except ZeroDivisionError:  # d2l's bleu with k=2 divides by zero on a one-token translation
            bleus.append(0.0)
    print(json.dumps({"seconds": seconds, "loss": losses[-1] if losses else float("nan"),
                      "translations": translations, "bleus": bleus}))


def run_torch(model, threads, seed, args):
    env = dict(os.environ)
    env["OMP_NUM_THREADS"] = str(threads)
    cmd = [sys.executable, os.path.abspath(__file__), "--torch-child", model, "--child-threads", str(threads),
           "--seed", str(seed), "--data", args.data]
    if args.epochs is not None:
        cmd += ["--epochs", str(args.epochs)]
    proc = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr)
        raise SystemExit(f"PyTorch {model} run ({threads} threads, seed {seed}) failed with exit status "
                         f"{proc.returncode}")
    for line in reversed(proc.stdout.strip().splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    raise SystemExit(f"PyTorch {model} run printed no result:\n{proc.stdout}")


# ---- heed's translate --------------------------------------------------------------------

TRAINED = re.compile(r"^trained (\d+) epochs in ([0-9.]+) s: loss ([0-9.naif-]+), ([0-9.]+) tokens/s$")
TRANSLATED = re.compile(r"^(.*) => (.*), bleu ([0-9.]+)$")


def run_heed(model, threads, seed, args):
    env = dict(os.environ)
    env["OMP_NUM_THREADS"] = str(threads)
    env.setdefault("OMP_WAIT_POLICY", "passive")  # spinning idle threads steal the core
    cmd = [args.translate, "--model", model, "--data", args.data, "--num-examples", str(NUM_EXAMPLES),
           "--seed", str(seed), "--quiet"]
    if args.epochs is not None:
        cmd += ["--epochs", str(args.epochs)]
    proc = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout + proc.stderr)
        raise SystemExit(f"{' '.join(cmd)} failed with exit status {proc.returncode}")
    result = {"translations": [], "bleus": []}
    for line in proc.stdout.splitlines():
        m = TRAINED.match(line)
        if m:
            result["seconds"], result["loss"] = float(m.group(2)), float(m.group(3))
            continue
        m = TRANSLATED.match(line)
        if m and len(result["bleus"]) < len(SENTENCES):
            result["translations"].append(m.group(2))
            result["bleus"].append(float(m.group(3)))
    if "seconds" not in result or len(result["bleus"]) != len(SENTENCES):
        raise SystemExit(f"unexpected output of {' '.join(cmd)}:\n{proc.stdout}")
    return result


# ---- FLOPs -------------------------------------------------------------------------------


def mm(m, k, n):
    """Forward FLOPs of an (m, k) by (k, n) product."""
    return 2 * m * k * n


def bahdanau_forward_flops(B, T_src, T_tgt, tgt_vocab):
    """(forward FLOPs, d2l's extra forward FLOPs) of the GRU encoder-decoder."""
    E, H, L = EMBED, HIDDENS, LAYERS
    gru_step = lambda inputs: mm(B, inputs, 3 * H) + mm(B, H, 3 * H)  # noqa: E731  r, z, n gates
    encoder = T_src * sum(gru_step(E if layer == 0 else H) for layer in range(L))
    keys = mm(B * T_src, H, H)  # W_k(enc_outputs), once
    per_step = (mm(B, H, H)  # W_q(query)
                + mm(B * T_src, H, 1)  # w_v(tanh(q + k)): the scores
                + 2 * B * T_src * H  # bmm(weights (B, 1, T), values (B, T, H))
                + sum(gru_step(E + H if layer == 0 else H) for layer in range(L)))
    dense = mm(B * T_tgt, H, tgt_vocab)
    d2l_extra = (T_tgt - 1) * keys  # d2l projects the keys again at every step
    return encoder + keys + T_tgt * per_step + dense, d2l_extra


def transformer_forward_flops(B, T_src, T_tgt, tgt_vocab):
    H, F, L = HIDDENS, FFN_HIDDENS, LAYERS

    def attention(q_steps, kv_steps):
        projections = mm(B * q_steps, H, H) * 2 + mm(B * kv_steps, H, H) * 2  # W_q, W_o; W_k, W_v
        products = 2 * (2 * B * q_steps * kv_steps * H)  # Q Kᵀ and weights · V over all heads
        return projections + products

    ffn = lambda T: mm(B * T, H, F) + mm(B * T, F, H)  # noqa: E731
    encoder = L * (attention(T_src, T_src) + ffn(T_src))
    decoder = L * (attention(T_tgt, T_tgt) + attention(T_tgt, T_src) + ffn(T_tgt))  # causal self, then cross
    return encoder + decoder + mm(B * T_tgt, H, tgt_vocab), 0


def epoch_flops(model, lengths, tgt_vocab, trimmed, epochs=200, seed=0):
    """(FLOPs of one epoch, forward + backward; d2l's extra), the mean over `epochs`
    shuffles of the batches d2l's loader gives (batches of 64, the last one smaller).
    trimmed: each Transformer batch cut after its longest source and target sequence, as
    heed's train_seq2seq does (not Bahdanau's: its GRU encoder reads the padding, and its
    decoder's dropouts draw once per step); otherwise d2l's NUM_STEPS steps."""
    fn = bahdanau_forward_flops if model == "bahdanau" else transformer_forward_flops
    rng = random.Random(seed)
    order = list(range(len(lengths)))
    total = extra = 0
    for _ in range(epochs):
        rng.shuffle(order)
        for i in range(0, len(order), BATCH_SIZE):
            batch = [lengths[j] for j in order[i:i + BATCH_SIZE]]
            cut = trimmed and model == "transformer"
            T_src = max(s for s, _ in batch) if cut else NUM_STEPS
            T_tgt = max(t for _, t in batch) if cut else NUM_STEPS
            forward, forward_extra = fn(len(batch), T_src, T_tgt, tgt_vocab)
            total += 3 * forward  # backward: twice the forward's products
            extra += 3 * forward_extra
    return total / epochs, extra / epochs


def nmt_sizes(path):
    """(source vocabulary size, target vocabulary size, [(source valid_len, target valid_len)])."""
    text = d2l.preprocess_nmt(d2l.read_data_nmt(path))
    source, target = d2l.tokenize_nmt(text, NUM_EXAMPLES)
    reserved = ["<pad>", "<bos>", "<eos>"]
    src = d2l.Vocab(source, min_freq=2, reserved_tokens=reserved)
    tgt = d2l.Vocab(target, min_freq=2, reserved_tokens=reserved)
    lengths = [(min(len(s) + 1, NUM_STEPS), min(len(t) + 1, NUM_STEPS)) for s, t in zip(source, target)]
    return len(src), len(tgt), lengths


# ---- the two modes -----------------------------------------------------------------------


def exact(bleus):
    """How many translations reach BLEU 1.000 (as printed with three decimals)."""
    return sum(1 for b in bleus if round(b, 3) >= 1.0)


def bleu_cell(bleus):
    return " ".join(f"{b:.2f}" for b in bleus)


def timing(args, models, thread_counts):
    src_size, tgt_size, lengths = nmt_sizes(args.data)
    pairs = len(lengths)
    print(f"d2l's seq2seq training on {args.data}: {pairs} pairs, vocabularies {src_size} / {tgt_size}, "
          f"batch {BATCH_SIZE}, {NUM_STEPS} steps, float32; seed {args.seed}")
    print(f"PyTorch {torch.__version__}, BLAS: {blas_info()} ('generic' on Debian is the netlib reference BLAS "
          f"unless an optimised libblas.so.3 alternative is installed); heed: {args.translate}")
    runs = {}  # (side, model, threads) -> [result, ...]
    for model in models:
        for threads in thread_counts:
            for _ in range(args.repeats):
                if not args.skip_torch:
                    runs.setdefault(("torch", model, threads), []).append(run_torch(model, threads, args.seed, args))
                if not args.skip_heed:
                    runs.setdefault(("heed", model, threads), []).append(run_heed(model, threads, args.seed, args))

    def best(side, model, threads):
        results = runs.get((side, model, threads))
        return min(results, key=lambda r: r["seconds"]) if results else None

    print()
    cols = [f"{side} {t}t s" for side in ("torch", "heed") for t in thread_counts]
    header = f"{'model':<12} {'epochs':>6} " + " ".join(f"{c:>10}" for c in cols) + f" {'torch/heed':>10}  goal"
    print(header)
    print("-" * len(header))
    flop_lines = []
    for model in models:
        epochs = args.epochs if args.epochs is not None else EPOCHS[model]
        cells = []
        for side in ("torch", "heed"):
            for t in thread_counts:
                r = best(side, model, t)
                cells.append(f"{r['seconds']:10.2f}" if r else f"{'-':>10}")
        torch_best = [best("torch", model, t)["seconds"] for t in thread_counts if best("torch", model, t)]
        heed_best = [best("heed", model, t)["seconds"] for t in thread_counts if best("heed", model, t)]
        if torch_best and heed_best:
            ratio = min(torch_best) / min(heed_best)
            verdict = f"{ratio:10.2f}  >= {SPEED_GOAL:g}x: {'met' if ratio >= SPEED_GOAL else 'NOT met'}"
        else:
            verdict = f"{'-':>10}"
        print(f"{model:<12} {epochs:>6} " + " ".join(cells) + f" {verdict}")

        padded, d2l_extra = epoch_flops(model, lengths, tgt_size, trimmed=False)
        computed, _ = epoch_flops(model, lengths, tgt_size, trimmed=True)
        steps_per_epoch = math.ceil(pairs / BATCH_SIZE)
        rates = []
        for t in thread_counts:
            r = best("heed", model, t)
            if r:
                rates.append(f"{computed * epochs / r['seconds'] / 1e9:.2f} GFLOP/s computed "
                             f"({padded * epochs / r['seconds'] / 1e9:.2f} counting d2l's padded steps) at {t} "
                             f"thread{'s' if t > 1 else ''}")
        extra = (f" (d2l's code: + {d2l_extra / steps_per_epoch / 1e6:.1f} MFLOP re-projecting the keys)"
                 if d2l_extra else "")
        flop_lines.append(f"  {model}: {padded / steps_per_epoch / 1e6:.1f} MFLOP per training step over d2l's "
                          f"{NUM_STEPS} padded steps{extra}; {computed / steps_per_epoch / 1e6:.1f} MFLOP in heed; "
                          f"{steps_per_epoch * epochs} steps; "
                          f"heed: {', '.join(rates) if rates else '-'}")

    print()
    print("Translations of d2l's four sentences, BLEU (k=2) of each, loss of the last epoch, per run:")
    header = f"{'model':<12} {'side':<6} {'thr':>3} {'seconds':>8} {'loss':>7} {'BLEU x4':>20} {'exact':>6}"
    print(header)
    print("-" * len(header))
    for model in models:
        for side in ("torch", "heed"):
            for t in thread_counts:
                for r in runs.get((side, model, t), []):
                    print(f"{model:<12} {side:<6} {t:>3} {r['seconds']:8.2f} {r['loss']:7.3f} "
                          f"{bleu_cell(r['bleus']):>20} {exact(r['bleus']):>4}/4")
    for model in models:
        for side in ("torch", "heed"):
            results = [r for t in thread_counts for r in runs.get((side, model, t), [])]
            if results:
                print(f"  {side} {model}: " + " | ".join(f"{s} => {tr}" for s, tr in
                                                         zip(SENTENCES, results[0]["translations"])))
    print()
    print("FLOPs (matrix products only, batch 64):")
    for line in flop_lines:
        print(line)


def quality(args, models, thread_counts):
    seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    threads = thread_counts[0]
    sides = (["torch"] if args.torch else []) + ([] if args.skip_heed else ["heed"])
    epochs = "d2l's epochs" if args.epochs is None else f"{args.epochs} epochs"
    print(f"Quality: sentences of d2l's four at BLEU 1.000, per seed ({threads} thread"
          f"{'s' if threads > 1 else ''}, {epochs}, {args.data})")
    header = f"{'model':<12} {'side':<6} " + " ".join(f"{'s' + str(s):>4}" for s in seeds) + "  goal"
    print(header)
    print("-" * len(header))
    for model in models:
        for side in sides:
            counts = []
            for seed in seeds:
                run = run_torch if side == "torch" else run_heed
                counts.append(exact(run(model, threads, seed, args)["bleus"]))
            n = len(seeds)
            if model == "transformer":
                need = math.ceil(0.6 * n)
                met = sum(c == 4 for c in counts) >= need and min(counts) >= 3
                goal = f"4/4 for >= {need} of {n} seeds, never < 3: {'met' if met else 'NOT met'}"
            else:
                need = math.ceil(0.8 * n)
                met = sum(c >= 3 for c in counts) >= need
                goal = f">= 3/4 for >= {need} of {n} seeds: {'met' if met else 'NOT met'}"
            print(f"{model:<12} {side:<6} " + " ".join(f"{c:>2}/4" for c in counts) + f"  {goal}")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--translate", default=os.path.join(REPO, "build", "release", "examples", "translate"),
                        help="path of heed's translate example")
    parser.add_argument("--data", default=os.path.join(REPO, "..", "shared", "data", "fra-eng", "fra.txt"),
                        help="d2l's fra.txt (Tatoeba English-French pairs)")
    parser.add_argument("--models", default="bahdanau,transformer", help="comma-separated: bahdanau, transformer")
    parser.add_argument("--threads", default="1,2", help="comma-separated thread counts for both sides")
    parser.add_argument("--seed", type=int, default=1, help="seed of the timing runs (both sides)")
    parser.add_argument("--repeats", type=int, default=1, help="runs per configuration; the fastest counts")
    parser.add_argument("--epochs", type=int, help="override d2l's epochs (250 / 200), for testing")
    parser.add_argument("--skip-torch", action="store_true", help="no PyTorch runs")
    parser.add_argument("--skip-heed", action="store_true", help="no heed runs")
    parser.add_argument("--quality", action="store_true", help="quality mode instead of timing (see above)")
    parser.add_argument("--seeds", default="1,2,3,4,5", help="seeds of the quality mode")
    parser.add_argument("--torch", action="store_true", help="quality mode: PyTorch runs too")
    parser.add_argument("--torch-child", choices=MODELS, help=argparse.SUPPRESS)
    parser.add_argument("--child-threads", type=int, default=1, help=argparse.SUPPRESS)
    args = parser.parse_args()
    args.data = os.path.abspath(args.data)

    if args.torch_child:
        torch_child(args)
        return 0

    models = [m.strip() for m in args.models.split(",") if m.strip()]
    for m in models:
        if m not in MODELS:
            parser.error(f"--models: unknown model {m!r} (bahdanau, transformer)")
    thread_counts = [int(t) for t in args.threads.split(",") if t.strip()]
    if not thread_counts or min(thread_counts) < 1:
        parser.error("--threads wants positive thread counts")
    if args.epochs is not None and args.epochs < 1:
        parser.error("--epochs must be >= 1")
    if not os.path.isfile(args.data):
        raise SystemExit(f"no data at {args.data}: pass --data (d2l's fra-eng/fra.txt)")
    if not args.skip_heed and not os.path.isfile(args.translate):
        raise SystemExit(f"no heed translate binary at {args.translate}: build the translate example and pass "
                         "--translate (or --skip-heed)")
    if args.quality:
        quality(args, models, thread_counts)
    else:
        timing(args, models, thread_counts)
    return 0


if __name__ == "__main__":
    sys.exit(main())
