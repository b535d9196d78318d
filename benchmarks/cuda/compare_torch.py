#!/usr/bin/env python3
"""heed against PyTorch on the same GPU, with the same sizes (issue 50's figures), in one
run; benchmarks/cuda/run.sh calls it last.

    benchmarks/cuda/compare_torch.py BENCH DIR [--quick] [--device cuda|cpu]

BENCH is bench_cuda_peers (benchmarks/cuda/bench_cuda_peers.cpp): it times heed and writes
DIR/heed.json, the decoding model DIR/decode_model.safetensors (a translator checkpoint
with d2l's tensor names) and its sentences DIR/decode_sources.txt. Then PyTorch, here:

- training: d2l's Transformer (tests/data/d2l_reference.py) with d2l's loop (teacher
  forcing from <bos>, MaskedSoftmaxCELoss, clip_grad_norm_ 1, Adam, fused where torch
  has it, dropout 0.1) on random full-length sentences of heed's sizes, target tokens/s
  of the last epoch: fp32, and under torch.autocast(device, torch.bfloat16) with fp32
  weights (PyTorch's mixed precision; bf16 needs no loss scaling);
- attention forward + backward on (batch, heads, L, 64), causal and padded (the keys of
  each sequence past its valid length masked), F.scaled_dot_product_attention: fp32
  (the memory-efficient backend) and bf16 (flash where the mask allows it: causal;
  memory-efficient for the padded masks), peak memory;
- decoding: heed's checkpoint loaded into d2l's model, the same sentences in one batch,
  greedy and beam 4 with a key/value cache per layer (d2l's own decoder re-projects every
  earlier token at each step), in eval mode under inference_mode, fp32.

Prints a table with heed / PyTorch ratios and the issue's goals, and writes
DIR/compare.json. --device cpu rehearses the script on a machine without a GPU (with an
emulated heed build; PyTorch < 2.0 has no scaled_dot_product_attention: the attention
rows then time the same function written out). Exits 0 unless a run fails: the goals
are reported, not enforced.
"""
import argparse
import json
import math
import os
import statistics
import struct
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS_DATA = os.path.join(HERE, "..", "..", "tests", "data")
sys.dont_write_bytecode = True
sys.path.insert(0, TESTS_DATA)


def read_checkpoint(path):
    """A safetensors file: {name: (dtype, shape, bytes)} and its metadata."""
    with open(path, "rb") as f:
        size = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(size))
        data = f.read()
    meta = header.pop("__metadata__", {})
    tensors = {}
    for name, info in header.items():
        begin, end = info["data_offsets"]
        tensors[name] = (info["dtype"], info["shape"], data[begin:end])
    return tensors, meta


def sync(device):
    import torch
    if device == "cuda":
        torch.cuda.synchronize()


def median_seconds(f, reps, device):
    f()
    sync(device)
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        f()
        sync(device)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


# ---- training ----------------------------------------------------------------------------------

def make_net(vocab, h, ffn, heads, layers, dropout):
    import torch
    from d2l_reference import TransformerDecoder, TransformerEncoder

    class EncoderDecoder(torch.nn.Module):  # d2l 9.6's
        def __init__(self):
            super().__init__()
            self.encoder = TransformerEncoder(vocab, h, h, h, h, [h], h, ffn, heads, layers, dropout)
            self.decoder = TransformerDecoder(vocab, h, h, h, h, [h], h, ffn, heads, layers, dropout)

        def forward(self, enc_X, dec_X, *args):
            enc_outputs = self.encoder(enc_X, *args)
            return self.decoder(dec_X, self.decoder.init_state(enc_outputs, *args))

    return EncoderDecoder()


def masked_ce(logits, label, valid_len):
    """d2l's MaskedSoftmaxCELoss: per sequence, the mean over steps of the valid steps' losses."""
    import torch
    weights = (torch.arange(label.shape[1], device=label.device)[None, :] < valid_len[:, None]).float()
    loss = torch.nn.functional.cross_entropy(logits.permute(0, 2, 1).float(), label, reduction="none")
    return (loss * weights).mean(dim=1)


def torch_training(size, device, bf16, epochs):
    import torch
    torch.manual_seed(7)
    V, B, S, n = size["vocab"], size["batch"], size["steps"], size["batches"]
    net = make_net(V, size["hidden"], size["ffn"], size["heads"], size["layers"], 0.1).to(device)
    net.train()
    try:
        optimizer = torch.optim.Adam(net.parameters(), lr=0.001, fused=device == "cuda")
    except TypeError:  # torch < 2.0
        optimizer = torch.optim.Adam(net.parameters(), lr=0.001)
    src = torch.randint(4, V, (n, B, S), device=device)
    tgt = torch.randint(4, V, (n, B, S), device=device)
    lens = torch.full((B,), S, device=device)
    bos = torch.full((B, 1), 2, device=device)
    rate = 0.0
    for _ in range(epochs):
        sync(device)
        start = time.perf_counter()
        for i in range(n):
            optimizer.zero_grad(set_to_none=True)
            with torch.autocast(device, dtype=torch.bfloat16, enabled=bf16):
                logits, _ = net(src[i], torch.cat([bos, tgt[i][:, :-1]], 1), lens)
                loss = masked_ce(logits, tgt[i], lens).sum()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
            optimizer.step()
        sync(device)
        rate = n * B * S / (time.perf_counter() - start)
    return rate


# ---- attention ---------------------------------------------------------------------------------

def torch_attention(row, device, dtype, reps):
    import torch
    F = torch.nn.functional
    B, H, L = row["batch"], row["heads"], row["L"]
    gen = torch.Generator(device=device).manual_seed(9)
    q, k, v, g = (torch.randn(B, H, L, 64, device=device, dtype=dtype, generator=gen) for _ in range(4))
    for x in (q, k, v):
        x.requires_grad_()
    causal = row["mask"] == "causal"
    mask = None
    if not causal:  # heed's lengths: L/2 up to L
        lens = torch.tensor([L // 2 + (L // 2) * b // max(B - 1, 1) for b in range(B)], device=device)
        mask = (torch.arange(L, device=device)[None, :] < lens[:, None])[:, None, None, :]
    sdpa = getattr(F, "scaled_dot_product_attention", None)
    backend = "written out"
    if sdpa is not None and device == "cuda":
        from torch.nn.attention import SDPBackend, sdpa_kernel
        flash = dtype == torch.bfloat16 and causal
        chosen = SDPBackend.FLASH_ATTENTION if flash else SDPBackend.EFFICIENT_ATTENTION
        backend = "flash" if flash else "memory-efficient"

        def run():
            with sdpa_kernel([chosen]):
                sdpa(q, k, v, attn_mask=mask, is_causal=causal).backward(g)
    else:
        def run():
            scores = q @ k.transpose(-1, -2) / 8.0
            if causal:
                scores = scores.masked_fill(torch.ones(L, L, dtype=torch.bool, device=device).triu(1), -math.inf)
            else:
                scores = scores.masked_fill(~mask, -math.inf)
            (torch.softmax(scores, -1) @ v).backward(g)
    if device == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_allocated()
    try:
        seconds = median_seconds(run, reps, device)
    except torch.cuda.OutOfMemoryError if device == "cuda" else MemoryError:
        return {"error": "out of memory", "backend": backend}
    out = {"seconds": seconds, "backend": backend}
    if device == "cuda":
        out["bytes"] = torch.cuda.max_memory_allocated() - before
    return out


# ---- decoding ----------------------------------------------------------------------------------

def torch_decoding(directory, device, beams, reps):
    """Sentences/s of greedy and beam search over the same sentences as heed, one batch."""
    import torch
    tensors, meta = read_checkpoint(os.path.join(directory, "decode_model.safetensors"))
    h, ffn, heads, layers = (int(meta[k]) for k in ("num_hiddens", "ffn_num_hiddens", "num_heads", "num_layers"))
    num_steps = int(meta["num_steps"])
    src_words = meta["src_vocab"].split("\n")[:-1]
    tgt_words = meta["tgt_vocab"].split("\n")[:-1]
    src_index = {w: i for i, w in enumerate(src_words)}
    unk, pad, eos = (src_index[w] for w in ("<unk>", "<pad>", "<eos>"))
    tgt_index = {w: i for i, w in enumerate(tgt_words)}
    t_pad, t_bos, t_eos = tgt_index["<pad>"], tgt_index["<bos>"], tgt_index["<eos>"]
    net = make_net(len(src_words), h, ffn, heads, layers, 0.0)  # heed's checkpoint: src and tgt vocab alike
    state = {name: torch.frombuffer(bytearray(raw), dtype=torch.float32).reshape(shape)
             for name, (dtype, shape, raw) in tensors.items()}
    net.load_state_dict(state, strict=True)
    net = net.to(device).eval()
    dh = h // heads
    P = net.decoder.pos_encoding.P.to(device)
    blocks = list(net.decoder.blks)
    with open(os.path.join(directory, "decode_sources.txt"), encoding="utf-8") as f:
        sentences = [line.rstrip("\n") for line in f if line.strip()]
    ids = [[src_index.get(w, unk) for w in s.split(" ")] + [eos] for s in sentences]
    lens = [min(len(x), num_steps) for x in ids]
    steps = max(lens)
    enc_X = torch.tensor([x[:steps] + [pad] * (steps - len(x[:steps])) for x in ids], device=device)
    valid = torch.tensor(lens, device=device)

    def split_heads(x):  # (rows, steps, h) -> (rows, heads, steps, dh)
        return x.reshape(x.shape[0], x.shape[1], heads, dh).transpose(1, 2)

    def merge_heads(x):
        return x.transpose(1, 2).reshape(x.shape[0], x.shape[2], h)

    def attend(q, k, v, mask):  # d2l's DotProductAttention: masked scores are -1e6
        scores = q @ k.transpose(-1, -2) / math.sqrt(dh)
        if mask is not None:
            scores = scores.masked_fill(~mask, -1e6)
        return torch.softmax(scores, dim=-1) @ v

    def step(y, t, keys, values, cross, mask):
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
        logits = net.decoder.dense(x[:, 0]).float()
        logits[:, t_pad] = -math.inf  # heed never emits <pad> or <bos>
        logits[:, t_bos] = -math.inf
        return logits

    def decode(K):
        N = len(sentences)
        enc = net.encoder(enc_X, valid)
        rows_valid = valid.repeat_interleave(K)
        enc = enc.repeat_interleave(K, 0)
        cross = [(split_heads(b.attention2.W_k(enc)), split_heads(b.attention2.W_v(enc))) for b in blocks]
        mask = (torch.arange(steps, device=device)[None, :] < rows_valid[:, None])[:, None, None, :]
        keys, values = [None] * len(blocks), [None] * len(blocks)
        y = torch.full((N * K, 1), t_bos, device=device)
        if K == 1:  # greedy, finished sentences leaving the batch, as heed does
            live = torch.arange(N, device=device)
            emitted = torch.zeros((), dtype=torch.long, device=device)
            for t in range(num_steps):
                nxt = step(y, t, keys, values, cross, mask).argmax(dim=1)
                going = nxt != t_eos
                emitted += going.sum()
                if not bool(going.all()):
                    keep = going.nonzero().squeeze(1)
                    if keep.numel() == 0:
                        break
                    live, nxt, mask = live[keep], nxt[keep], mask[keep]
                    cross = [(k[keep], v[keep]) for k, v in cross]
                    keys = [k[keep] for k in keys]
                    values = [v[keep] for v in values]
                y = nxt[:, None]
            return int(emitted)
        # beam search: the K best non-<eos> of the 2K best continuations go on; an <eos>
        # among them finishes a hypothesis (kept as its sentence's best finished score)
        scores = torch.full((N, K), -math.inf, device=device)
        scores[:, 0] = 0
        finished = torch.full((N,), -math.inf, device=device)
        rows = torch.arange(N, device=device)[:, None] * K
        for t in range(num_steps):
            log_p = torch.log_softmax(step(y, t, keys, values, cross, mask), dim=1)  # (N K, V)
            V = log_p.shape[1]
            top, index = (scores.reshape(-1, 1) + log_p).reshape(N, K * V).topk(2 * K, dim=1)
            token = index % V
            is_eos = token == t_eos
            finished = torch.maximum(finished, torch.where(is_eos, top, -math.inf).max(dim=1).values)
            scores, chosen = torch.where(is_eos, -math.inf, top).topk(K, dim=1)
            origin = (rows + (index // V).gather(1, chosen)).reshape(-1)
            keys = [k[origin] for k in keys]
            values = [v[origin] for v in values]
            y = token.gather(1, chosen).reshape(-1, 1)
        return None

    out = []
    for K in beams:
        with torch.inference_mode():
            seconds = median_seconds(lambda: decode(K), reps, device)
            tokens = decode(K)
        out.append({"beam": K, "sentences": len(sentences), "seconds": seconds, "tokens": tokens})
    return out


# ---- the table ---------------------------------------------------------------------------------

def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("bench", help="bench_cuda_peers")
    p.add_argument("dir", help="where heed.json, the decoding model and compare.json go")
    p.add_argument("--quick", action="store_true", help="small sizes (a rehearsal)")
    p.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    a = p.parse_args()
    os.makedirs(a.dir, exist_ok=True)
    print(f"== heed: {a.bench} {a.dir}{' --quick' if a.quick else ''}", flush=True)
    subprocess.run([a.bench, a.dir] + (["--quick"] if a.quick else []), check=True)
    with open(os.path.join(a.dir, "heed.json")) as f:
        heed = json.load(f)

    import torch
    device = a.device
    name = torch.cuda.get_device_name(0) if device == "cuda" else "CPU"
    print(f"== PyTorch {torch.__version__} on {name} ({time.strftime('%Y-%m-%d')})", flush=True)
    if device == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = False  # fp32 means fp32, as heed's products
        torch.backends.cudnn.allow_tf32 = False
    rows = []  # (what, heed, peer, ratio, goal)
    result = {"device": name, "torch": torch.__version__, "date": time.strftime("%Y-%m-%d"), "heed": heed,
              "torch_results": {}}
    epochs = 2 if heed["quick"] else 3
    for size in heed["training"]:
        fp32 = torch_training(size, device, False, epochs)
        bf16 = torch_training(size, device, True, epochs)
        result["torch_results"][f"training {size['size']}"] = {"fp32": fp32, "bf16": bf16}
        what = f"training {size['size']} ({size['hidden']} hidden, {size['layers']}+{size['layers']}, " \
               f"batch {size['batch']}x{size['steps']}), tokens/s"
        goal = 1.5 if size["size"] == "realistic" else 1.0
        rows.append((what + " fp32", size["tokens_per_second"], fp32, size["tokens_per_second"] / fp32, goal))
        rows.append((what + " heed fp32 vs torch bf16 autocast", size["tokens_per_second"], bf16,
                     size["tokens_per_second"] / bf16, None))
        print(f"  torch training {size['size']}: fp32 {fp32:.0f}, bf16 {bf16:.0f} tokens/s", flush=True)

    reps = 2 if heed["quick"] else 5
    for row in heed["attention"]:
        what = f"attention fwd+bwd B={row['batch']} H={row['heads']} L={row['L']} {row['mask']}, ms"
        for dtype, label, goal in ((torch.float32, "fp32", 1.0), (torch.bfloat16, "bf16", 0.7)):
            peer = torch_attention(row, device, dtype, reps)
            result["torch_results"][f"{what} {label}"] = peer
            heed_ms = 1e3 * row["seconds"] if "seconds" in row else None
            peer_ms = 1e3 * peer["seconds"] if "seconds" in peer else None
            ratio = peer_ms / heed_ms if heed_ms and peer_ms else None
            rows.append((f"{what}, heed fp32 vs torch {label} ({peer['backend']})", heed_ms, peer_ms, ratio,
                         goal if label == "fp32" else None))
            mib = f", peak {peer['bytes'] / 2**20:.0f} MiB (heed {row.get('bytes', 0) / 2**20:.0f})" \
                if "bytes" in peer else ""
            print(f"  torch attention L={row['L']} {row['mask']} {label}: "
                  f"{peer_ms if peer_ms is None else round(peer_ms, 3)} ms{mib}", flush=True)

    decoding = torch_decoding(a.dir, device, [r["beam"] for r in heed["decoding"]], 1 if heed["quick"] else 3)
    result["torch_results"]["decoding"] = decoding
    for mine, peer in zip(heed["decoding"], decoding):
        ours, theirs = mine["sentences"] / mine["seconds"], peer["sentences"] / peer["seconds"]
        # Greedy: both decode the same weights, so they emit the same number of tokens
        # (the same work) unless their float roundings pick different tokens somewhere.
        same = "" if peer["tokens"] is None else \
            f" (tokens out: heed {mine['tokens']}, PyTorch {peer['tokens']})"
        rows.append((f"decoding beam {mine['beam']}, {mine['sentences']} sentences, sentences/s{same}", ours, theirs,
                     ours / theirs, 1.0))

    def cell(x):
        return "-" if x is None else f"{x:.3g}" if x < 100 else f"{x:.0f}"
    print(f"\n{'what':<96} {'heed':>9} {'PyTorch':>9} {'ratio':>7} goal")
    for what, ours, theirs, ratio, goal in rows:
        mark = "" if goal is None or ratio is None else (" met" if ratio >= goal else " missed")
        print(f"{what:<96} {cell(ours):>9} {cell(theirs):>9} {cell(ratio):>7} "
              f"{'' if goal is None else '>= ' + str(goal)}{mark}")
    result["rows"] = [dict(zip(("what", "heed", "torch", "ratio", "goal"), r)) for r in rows]
    with open(os.path.join(a.dir, "compare.json"), "w") as f:
        json.dump(result, f, indent=1)
    print(f"\nwrote {os.path.join(a.dir, 'compare.json')}")


if __name__ == "__main__":
    main()
