#!/usr/bin/python3
"""Decoding of one heed-trained Transformer at each precision, heed beside PyTorch on the
same weights and sentences: sentences/s, peak RSS and held-out corpus BLEU, with ratios.

    # a model: the README recipe (any train_translator run of d2l's Transformer)
    build/release/examples/train_translator --train ../shared/data/fra-eng-large/train.txt \\
        --num-examples 0 --valid-fraction 0.02 ... --out run
    /usr/bin/python3 benchmarks/compare_decode.py --run run --evaluate run/valid.txt

heed: `translate --load CKPT --evaluate FILE --worst 0 --micro-batches T --precision P
--beam B` (batches of 128 distinct English sentences, each batch padded to its longest),
the time its own "decoded in" figure (the decoding alone). bf16 and int8 load the
checkpoint that `translate --precision P --save` wrote (converted once, before the runs),
so that their peak RSS is that of a user who keeps the converted model.

The peer: PyTorch (this python3's torch) running d2l's TransformerEncoder/Decoder
(tests/data/d2l_reference.py) with heed's checkpoint loaded into it (its tensor names are
d2l's state_dict), in eval mode under inference_mode, on the same sentences in the same
batches, each batch padded to its longest: the encoder as d2l's, then greedy decoding
that keeps each layer's projected keys and values (d2l's own decoder re-projects every
earlier token at every step and restarts the positional encoding at each call), drops
finished sentences from the batch as heed does, and never emits <pad> or <bos> (heed's
rule). At
  fp32;
  bf16: under torch.autocast('cpu', dtype=torch.bfloat16) (oneDNN's bf16 products);
  int8: torch.ao.quantization.quantize_dynamic of every nn.Linear to qint8 (the output
        layer included; the embeddings stay fp32), engine onednn;
with tcmalloc preloaded (PyTorch's tuning advice; --peer-malloc glibc to drop it). The
peer decodes greedily only (d2l has no beam search): beam widths > 1 run heed alone.
Its BLEU is computed here with heed's formula (sacreBLEU's corpus BLEU on d2l's tokens,
every French line of an English sentence a reference); the fp32 peer's BLEU beside heed's
fp32 BLEU checks that both decode the same model.

Each setting runs --repeats times, the settings interleaved; the table shows medians.
--timing FILE decodes a larger file for the speed and memory figures (its BLEU would
count sentences the model trained on), and --evaluate's held-out file once per setting
for BLEU. Always exits 0 unless a run fails (the goals are reported, not enforced).
"""
import argparse
import collections
import json
import math
import os
import statistics
import struct
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.dont_write_bytecode = True  # no __pycache__ in benchmarks/ or tests/data/
sys.path.insert(0, HERE)
import compare_recipe as cr  # noqa: E402  standard library only: corpus BLEU, translate --evaluate's lines
import compare_scale as cs  # noqa: E402  the child runner (peak RSS from wait4), the peers' allocator

TESTS_DATA = cs.TESTS_DATA
TCMALLOC = cs.PEER_MALLOCS["tcmalloc"]
GOALS = {"int8": 2.0, "bf16": 1.5, "bleu": 0.3, "rss": 0.4, "peer": 3.5}


def read_references(path):
    """translate --evaluate's sentences: each distinct English sentence of a fra.txt-format
    file (d2l's preprocess_nmt and tokenize_nmt) and all its French lines."""
    sys.path.insert(0, TESTS_DATA)
    from d2l_nmt import preprocess_nmt, tokenize_nmt
    with open(path, encoding="utf-8") as f:
        return cr.group_references(*tokenize_nmt(preprocess_nmt(f.read())))


# ---- the peer (a child process: the parent never imports torch) ----------------------------------


def read_checkpoint(path):
    """heed's safetensors checkpoint: ({name: (dtype, shape, bytes)}, metadata)."""
    with open(path, "rb") as f:
        (size,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(size))
        base = 8 + size
        metadata = header.pop("__metadata__", {})
        tensors = {}
        for name, info in header.items():
            begin, end = info["data_offsets"]
            f.seek(base + begin)
            tensors[name] = (info["dtype"], info["shape"], f.read(end - begin))
    return tensors, metadata


def peer_child(argv):
    p = argparse.ArgumentParser(prog="compare_decode.py --peer-child")
    p.add_argument("--checkpoint", required=True)
    p.add_argument("--evaluate", required=True)
    p.add_argument("--timing")
    p.add_argument("--precision", choices=["fp32", "bf16", "int8"], default="fp32")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--hyp")
    a = p.parse_args(argv)

    import torch
    sys.path.insert(0, TESTS_DATA)
    from d2l_reference import TransformerDecoder, TransformerEncoder
    torch.set_num_threads(a.threads)
    torch.set_num_interop_threads(1)

    tensors, meta = read_checkpoint(a.checkpoint)
    if meta.get("heed.model") != "transformer" or meta.get("norm_first", "0") != "0" or \
            meta.get("num_kv_heads", "0") != "0":
        sys.exit(f"{a.checkpoint}: the peer runs d2l's post-norm Transformer with full heads only")
    h, ffn, heads, layers = (int(meta[k]) for k in ("num_hiddens", "ffn_num_hiddens", "num_heads", "num_layers"))
    num_steps = int(meta["num_steps"])
    src_words = meta["src_vocab"].split("\n")[:-1]
    tgt_words = meta["tgt_vocab"].split("\n")[:-1]
    src_index = {w: i for i, w in enumerate(src_words)}
    unk, pad, bos, eos = (src_index[w] for w in ("<unk>", "<pad>", "<bos>", "<eos>"))
    tgt_index = {w: i for i, w in enumerate(tgt_words)}
    t_pad, t_bos, t_eos = tgt_index["<pad>"], tgt_index["<bos>"], tgt_index["<eos>"]

    encoder = TransformerEncoder(len(src_words), h, h, h, h, [h], h, ffn, heads, layers, 0.0)
    decoder = TransformerDecoder(len(tgt_words), h, h, h, h, [h], h, ffn, heads, layers, 0.0)
    net = torch.nn.Module()
    net.encoder, net.decoder = encoder, decoder
    state = {}
    for name, (dtype, shape, raw) in tensors.items():
        if dtype != "F32":
            sys.exit(f"{a.checkpoint}: {name} is {dtype}; the peer reads an fp32 checkpoint")
        state[name] = torch.frombuffer(bytearray(raw), dtype=torch.float32).reshape(shape)
    net.load_state_dict(state, strict=True)
    net.eval()
    if a.precision == "int8":
        torch.backends.quantized.engine = "onednn"
        net = torch.ao.quantization.quantize_dynamic(net, {torch.nn.Linear}, dtype=torch.qint8)
    dh = h // heads
    P = net.decoder.pos_encoding.P

    def split_heads(x):  # (rows, steps, h) -> (rows, heads, steps, dh)
        return x.reshape(x.shape[0], x.shape[1], heads, dh).transpose(1, 2)

    def merge_heads(x):  # (rows, heads, steps, dh) -> (rows, steps, h)
        return x.transpose(1, 2).reshape(x.shape[0], x.shape[2], h)

    def attend(q, k, v, mask):  # d2l's DotProductAttention: masked scores are -1e6
        scores = q @ k.transpose(-1, -2) / math.sqrt(dh)
        if mask is not None:
            scores = scores.masked_fill(~mask, -1e6)
        return torch.softmax(scores, dim=-1) @ v

    def translate_batch(sentences):
        ids = [[src_index.get(w, unk) for w in s.split(" ")] + [eos] for s in sentences]
        lens = [min(len(x), num_steps) for x in ids]
        steps = max(lens)
        enc_X = torch.tensor([x[:steps] + [pad] * (steps - len(x[:steps])) for x in ids], dtype=torch.long)
        valid = torch.tensor(lens)
        enc = net.encoder(enc_X, valid)  # (rows, steps, h)
        blocks = list(net.decoder.blks)
        cross = [(split_heads(b.attention2.W_k(enc)), split_heads(b.attention2.W_v(enc))) for b in blocks]
        mask = (torch.arange(steps)[None, :] < valid[:, None])[:, None, None, :]  # (rows, 1, 1, steps)
        keys, values = [None] * len(blocks), [None] * len(blocks)
        rows = torch.arange(len(sentences))
        outputs = [[] for _ in sentences]
        y = torch.full((len(sentences), 1), t_bos, dtype=torch.long)
        for t in range(num_steps):
            x = net.decoder.embedding(y) * math.sqrt(h) + P[:, t:t + 1]  # (rows, 1, h)
            for i, b in enumerate(blocks):
                a1 = b.attention1
                k, v = split_heads(a1.W_k(x)), split_heads(a1.W_v(x))
                keys[i] = k if keys[i] is None else torch.cat([keys[i], k], 2)
                values[i] = v if values[i] is None else torch.cat([values[i], v], 2)
                x = b.addnorm1(x, a1.W_o(merge_heads(attend(split_heads(a1.W_q(x)), keys[i], values[i], None))))
                a2 = b.attention2
                x = b.addnorm2(x, a2.W_o(merge_heads(attend(split_heads(a2.W_q(x)), *cross[i], mask))))
                x = b.addnorm3(x, b.ffn(x))
            logits = net.decoder.dense(x[:, 0]).float()  # (rows, V)
            logits[:, t_pad] = -math.inf
            logits[:, t_bos] = -math.inf
            nxt = logits.argmax(dim=1)
            for row, token in zip(rows.tolist(), nxt.tolist()):
                if token != t_eos:
                    outputs[row].append(token)
            going = nxt != t_eos
            if not bool(going.all()):
                keep = going.nonzero().squeeze(1)
                if keep.numel() == 0:
                    break
                rows, nxt, mask = rows[keep], nxt[keep], mask[keep]
                cross = [(k[keep], v[keep]) for k, v in cross]
                keys = [k[keep] for k in keys]
                values = [v[keep] for v in values]
            y = nxt[:, None]
        return [" ".join(tgt_words[i] for i in out) for out in outputs]

    def translate_all(sentences):
        hyps = []
        start = time.perf_counter()
        with torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=a.precision == "bf16"):
            for b in range(0, len(sentences), 128):
                hyps += translate_batch(sentences[b:b + 128])
        return hyps, time.perf_counter() - start

    sources, references = read_references(a.evaluate)
    hyps, seconds = translate_all(sources)
    record = {"bleu": cr.corpus_bleu(hyps, references)["score"], "sentences": len(sources), "seconds": seconds}
    if a.hyp:
        with open(a.hyp, "w", encoding="utf-8") as f:
            f.writelines(hyp + "\n" for hyp in hyps)
    if a.timing:
        timing_sources, _ = read_references(a.timing)
        _, seconds = translate_all(timing_sources)
        record.update({"sentences": len(timing_sources), "seconds": seconds})
    record["torch"] = torch.__version__
    print(json.dumps(record))


# ---- the parent ----------------------------------------------------------------------------------


def heed_run(args, precision, beam, threads, path):
    cmd = [args.translate, "--load", args.checkpoints[precision], "--evaluate", path, "--worst", "0",
           "--micro-batches", str(threads), "--precision", precision, "--beam", str(beam), "--quiet"]
    env = {"OMP_NUM_THREADS": str(threads), "OMP_WAIT_POLICY": "passive"}
    stdout, stderr, rss, _ = cs.run_child(cmd, env, f"heed {precision} beam {beam}, {threads} threads")
    r = cr.parse_evaluate(stdout)
    if isinstance(r, str):
        cs.fail("heed", cmd, env, f"no {r}", stdout, stderr)
    return {"bleu": r["bleu"], "seconds": r["decode_s"], "sentences": r["sentences"], "rss": rss}


def peer_run(args, precision, threads, with_timing):
    cmd = [sys.executable, os.path.abspath(__file__), "--peer-child", "--checkpoint", args.checkpoints["fp32"],
           "--evaluate", args.evaluate, "--precision", precision, "--threads", str(threads)]
    if with_timing:
        cmd += ["--timing", args.timing]
    env = {"OMP_NUM_THREADS": str(threads)}
    if args.peer_malloc == "tcmalloc":
        env["LD_PRELOAD"] = TCMALLOC
    stdout, stderr, rss, _ = cs.run_child(cmd, env, f"pytorch {precision}, {threads} threads")
    record = cs.last_json_line(stdout)
    if record is None:
        cs.fail("pytorch", cmd, env, "no JSON line", stdout, stderr)
    record["rss"] = rss
    return record


def convert_checkpoints(args, tmp):
    """fp32: the run's checkpoint; bf16 and int8: translate --precision P --save, once."""
    args.checkpoints = {"fp32": args.checkpoint}
    for precision in ("bf16", "int8"):
        if precision in args.precisions:
            path = os.path.join(tmp, f"{precision}.safetensors")
            cs.run_child([args.translate, "--load", args.checkpoint, "--precision", precision, "--save", path,
                          "--quiet"], {"OMP_NUM_THREADS": "1"}, f"converting to {precision}")
            args.checkpoints[precision] = path


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--peer-child":
        return peer_child(sys.argv[2:])
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run", help="a train_translator --out directory (its best.safetensors)")
    parser.add_argument("--checkpoint", help="the fp32 checkpoint (default RUN/best.safetensors)")
    parser.add_argument("--evaluate", required=True, help="held-out pairs (BLEU; and timings without --timing)")
    parser.add_argument("--timing", help="a larger file of pairs decoded for the speed and memory figures")
    parser.add_argument("--translate", default="build/release/examples/translate")
    parser.add_argument("--precisions", default="fp32,bf16,int8")
    parser.add_argument("--beams", default="1,4", help="heed's beam widths (the peer: greedy only)")
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--skip-peer", action="store_true")
    parser.add_argument("--peer-malloc", choices=["tcmalloc", "glibc"], default="tcmalloc")
    parser.add_argument("--json", help="write every run's record here")
    args = parser.parse_args()
    args.checkpoint = args.checkpoint or (args.run and os.path.join(args.run, "best.safetensors"))
    if not args.checkpoint:
        parser.error("give --run or --checkpoint")
    if args.peer_malloc == "tcmalloc" and not os.path.isfile(TCMALLOC):
        sys.exit(f"{TCMALLOC} is missing (apt-get install libtcmalloc-minimal4, or --peer-malloc glibc)")
    args.precisions = args.precisions.split(",")
    beams = [int(b) for b in args.beams.split(",")]
    thread_counts = [int(t) for t in args.threads.split(",")]
    timing_path = args.timing or args.evaluate

    with tempfile.TemporaryDirectory() as tmp:
        convert_checkpoints(args, tmp)
        settings = [("heed", p, b, t) for p in args.precisions for b in beams for t in thread_counts]
        if not args.skip_peer:
            settings += [("pytorch", p, 1, t) for p in args.precisions for t in thread_counts]
        bleu, runs = {}, collections.defaultdict(list)
        if args.timing:  # heed's held-out BLEU once per setting (the peer's comes with its runs)
            for p in args.precisions:
                for b in beams:
                    bleu[("heed", p, b)] = heed_run(args, p, b, max(thread_counts), args.evaluate)["bleu"]
        for repeat in range(args.repeats):
            order = settings[repeat % len(settings):] + settings[:repeat % len(settings)]
            for impl, p, b, t in order:
                if impl == "heed":
                    r = heed_run(args, p, b, t, timing_path)
                    if not args.timing:
                        bleu[(impl, p, b)] = r["bleu"]
                else:
                    r = peer_run(args, p, t, bool(args.timing))
                    bleu[(impl, p, b)] = r["bleu"]
                r.update({"impl": impl, "precision": p, "beam": b, "threads": t, "repeat": repeat})
                runs[(impl, p, b, t)].append(r)
                print(f"  {impl:<7} {p:<4} beam {b} {t} thr: {r['sentences'] / r['seconds']:8.0f} sentences/s, "
                      f"peak {r['rss']:.0f} MiB", flush=True)

    speed = {k: statistics.median(r["sentences"] / r["seconds"] for r in rs) for k, rs in runs.items()}
    rss = {k: statistics.median(r["rss"] for r in rs) for k, rs in runs.items()}
    print(f"\n{args.checkpoint}; BLEU on {args.evaluate} (held out if train_translator held it out), speed "
          f"and peak RSS on {timing_path}, medians of {args.repeats}; heed's translate, PyTorch "
          f"{'with tcmalloc' if args.peer_malloc == 'tcmalloc' else 'with glibc malloc'}")
    print(f"{'impl':<8} {'prec':<5} {'beam':>4} {'threads':>7} {'sent/s':>9} {'peak MiB':>9} {'BLEU':>6}")
    for key in settings:
        impl, p, b, t = key
        print(f"{impl:<8} {p:<5} {b:>4} {t:>7} {speed[key]:9.0f} {rss[key]:9.0f} {bleu[(impl, p, b)]:6.2f}")

    def best(impl, p, b):  # (sentences/s, threads) at the best thread count
        return max((speed[(impl, p, b, t)], t) for t in thread_counts if (impl, p, b, t) in speed)

    print("\nRatios (each at its best thread count):")
    for b in beams:
        fp32, _ = best("heed", "fp32", b)
        for p in args.precisions:
            if p == "fp32":
                continue
            s, t = best("heed", p, b)
            goal = GOALS[p]
            delta = bleu[("heed", p, b)] - bleu[("heed", "fp32", b)]
            print(f"  beam {b}: heed {p} {s:.0f} / heed fp32 {fp32:.0f} sentences/s = {s / fp32:.2f}x   goal >= "
                  f"{goal:g}x: {cs.verdict(s / fp32 >= goal)}; BLEU {delta:+.2f}   goal within {GOALS['bleu']:g}: "
                  f"{cs.verdict(abs(delta) <= GOALS['bleu'])}")
    if "int8" in args.precisions:
        top = max(thread_counts)
        ratio = rss[("heed", "int8", 1, top)] / rss[("heed", "fp32", 1, top)]
        print(f"  peak RSS: heed int8 / heed fp32 (greedy, {top} threads) = {ratio:.2f}   goal <= {GOALS['rss']:g}: "
              f"{cs.verdict(ratio <= GOALS['rss'])}")
    if not args.skip_peer and 1 in beams:
        peers = [(best("pytorch", p, 1), p) for p in args.precisions]
        (peer_s, peer_t), peer_p = max(peers)
        for p in args.precisions:
            s, t = best("heed", p, 1)
            ps, pt = best("pytorch", p, 1)
            print(f"  greedy: heed {p} {t}t {s:.0f} / pytorch {p} {pt}t {ps:.0f} sentences/s = {s / ps:.2f}x")
        (heed_s, heed_t), heed_p = max((best("heed", p, 1), p) for p in args.precisions)
        print(f"  greedy: heed's best ({heed_p}, {heed_t}t) {heed_s:.0f} / the best peer (pytorch {peer_p}, "
              f"{peer_t}t) {peer_s:.0f} sentences/s = {heed_s / peer_s:.2f}x   goal >= {GOALS['peer']:g}x: "
              f"{cs.verdict(heed_s / peer_s >= GOALS['peer'])}")
        print(f"  BLEU of the same model: heed fp32 {bleu[('heed', 'fp32', 1)]:.2f}, pytorch fp32 "
              f"{bleu[('pytorch', 'fp32', 1)]:.2f} (greedy)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump([r for rs in runs.values() for r in rs], f, indent=1)


if __name__ == "__main__":
    main()
