#!/usr/bin/python3
"""Attention at scale: heed's fused attention, its classic path and PyTorch side by side.

    /usr/bin/python3 benchmarks/compare_fused_attention.py \
        --bench build/release/benchmarks/bench_fused_attention \
        --transformer-bench build/release/benchmarks/bench_transformer --threads 2

With the thread count fixed and equal (heed: OMP_NUM_THREADS; PyTorch in this process:
torch.set_num_threads and torch.set_num_interop_threads(1)), prints one table of
median times (minimum in brackets) and ratios torch / heed (above 1: heed is faster):

  * attention on queries, keys and values of (8 batch, 8 heads, L, 64), float, with 1-D
    valid_lens, L in {128, 512, 2048, 8192}, forward (eval, no grad) and forward +
    backward: heed's fused path (bench_fused_attention BM_Fused*) and classic path
    (BM_Classic*, weights kept), PyTorch's bmm -> softmax -> bmm written plainly (scores
    masked_fill'ed with -inf, the fast way to write it) and d2l's DotProductAttention
    (tests/data/d2l_reference.py, its masked_softmax, on the heads folded into the
    batch as d2l's MultiHeadAttention does). PyTorch stops at 2048: at 8192 its
    (8, 8, 8192, 8192) scores alone are 16 GiB, and forward + backward holds several;
  * d2l's MultiHeadAttention and EncoderBlock (d 512, FFN 2048, 8 heads, dropout 0),
    forward + backward at 128 and 512 steps (bench_transformer BM_*FwdBwdSteps), heed with
    and without kept weights;
  * GFLOP/s of the fused path (median time): the products' useful work over visible
    (query, key) pairs, next to the GEMM throughput of heed::matmul (Eigen) on two
    2048 x 2048 floats measured in the same run (the best of its samples: the ceiling),
    and PyTorch's own GEMM on the same sizes;
  * peak memory of one forward + backward (bench_fused_attention --peak-memory, one
    fresh process each): fused and classic at L = 2048 (batch 8) and L = 8192 (batch 1,
    where the classic path fits), and fused at L = 8192, batch 8.

The valid lengths are those of heed's benchmarks (heed::randint, std::mt19937_64,
reproduced by compare_attention.heed_randint), so both sides mask the same keys.
PyTorch's matrix products go through its BLAS: Debian's python3-torch says BLAS_INFO=generic
and calls whatever libblas.so.3 is installed, the netlib reference BLAS (a few GFLOP/s)
unless an optimised one such as libopenblas0-openmp is (scripts/dev.sh compare installs
it); the table's header names the library loaded.

Always exits 0 (the goals are reported, not enforced), unless a heed binary fails.
"""

import argparse
import math
import os
import statistics
import subprocess
import sys

try:
    import torch
except ImportError:  # plain `python3` may be an interpreter without torch
    raise SystemExit("compare_fused_attention.py needs PyTorch: run it with /usr/bin/python3 (Debian's python3-torch)")

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from d2l_reference import DotProductAttention, EncoderBlock, MultiHeadAttention  # noqa: E402
from compare_attention import blas_info, heed_randint, run_heed, time_ms  # noqa: E402
from compare_transformer import last_json_line  # noqa: E402

B, H, D = 8, 8, 64
LENGTHS = [128, 512, 2048, 8192]
TORCH_MAX_LENGTH = 2048
VALID_LENS_SEED = 21  # bench_fused_attention's kValidLensSeed
# bench_transformer's BM_*Steps: d 512, FFN 2048, 8 heads, batch 8, valid_lens seed 10.
HIDDENS, FFN_HIDDENS, STEPS, STEPS_LENS_SEED = 512, 2048, [128, 512], 10


def loaded_blas():
    with open("/proc/self/maps") as maps:
        paths = {line.split()[-1] for line in maps if "blas" in line}
    return ", ".join(sorted(os.path.basename(p) for p in paths)) or "none loaded yet"


def attention_inputs(steps):
    gen = torch.Generator().manual_seed(0)
    q, k, v, g = (torch.randn(B, H, steps, D, generator=gen) for _ in range(4))
    lens = torch.tensor(heed_randint(1, steps + 1, B, VALID_LENS_SEED))
    return q, k, v, g, lens


def torch_attention_cases(steps):
    """{(impl, pass): fn} for PyTorch at this length."""
    q, k, v, g, lens = attention_inputs(steps)
    masked = (torch.arange(steps)[None, :] >= lens[:, None])[:, None, None, :]  # (B, 1, 1, L)
    d2l = DotProductAttention(dropout=0.0)
    d2l.eval()
    d2l_lens = torch.repeat_interleave(lens, H)  # d2l folds the heads into the batch

    def plain(q, k, v):
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(D)
        return torch.matmul(torch.softmax(scores.masked_fill(masked, float("-inf")), dim=-1), v)

    def d2l_attention(q, k, v):
        fold = lambda x: x.reshape(B * H, steps, x.shape[-1])  # noqa: E731
        return d2l(fold(q), fold(k), fold(v), d2l_lens)

    def forward(fn):
        def run():
            with torch.no_grad():
                fn(q, k, v)
        return run

    def forward_backward(fn):
        leaves = [t.clone().requires_grad_() for t in (q, k, v)]

        def run():
            out = fn(*leaves)
            out.backward(g.reshape(out.shape))
            for t in leaves:
                t.grad = None
        return run

    return {("plain", "fwd"): forward(plain), ("plain", "fwd+bwd"): forward_backward(plain),
            ("d2l", "fwd"): forward(d2l_attention), ("d2l", "fwd+bwd"): forward_backward(d2l_attention)}


def torch_module_cases(steps):
    gen = torch.Generator().manual_seed(0)
    X = torch.randn(B, steps, HIDDENS, generator=gen, requires_grad=True)
    g = torch.randn(B, steps, HIDDENS, generator=gen)
    lens = torch.tensor(heed_randint(1, steps + 1, B, STEPS_LENS_SEED))
    block = EncoderBlock(HIDDENS, HIDDENS, HIDDENS, HIDDENS, [HIDDENS], HIDDENS, FFN_HIDDENS, H, 0.0)
    mha = MultiHeadAttention(HIDDENS, HIDDENS, HIDDENS, HIDDENS, H, 0.0)

    def fwd_bwd(module, call):
        module.train()

        def run():
            call().backward(g)
            module.zero_grad(set_to_none=True)
            X.grad = None
        return run

    return {"EncoderBlock": fwd_bwd(block, lambda: block(X, lens)),
            "MultiHeadAttention": fwd_bwd(mha, lambda: mha(X, X, X, lens))}


def torch_gemm_gflops():
    a, b = torch.randn(2048, 2048), torch.randn(2048, 2048)
    samples = time_ms(lambda: a @ b, 1, 5, 1.0)
    return 2 * 2048 ** 3 / (min(samples) * 1e-3) / 1e9


def cell(samples):
    if not samples:
        return "-"
    return f"{statistics.median(samples):10.1f} ({min(samples):10.1f})"


def ratio(ref, heed):
    return statistics.median(ref) / statistics.median(heed) if ref and heed else float("nan")


def print_table_head(times, numbers):
    """A blank line, then the column names of print_table_row's rows and a rule."""
    head = f"{'case':<34}{'pass':<9}" + "".join(f"{t:>24}" for t in times) + "".join(f"{n:>13}" for n in numbers)
    print()
    print(head)
    print("-" * len(head))


def print_table_row(case, pass_, times, numbers):
    """One row: median (min) of each list of samples, then the numbers (ratios, GFLOP/s)."""
    print(f"{case:<34}{pass_:<9}" + "".join(f"{cell(t):>24}" for t in times) + "".join(f"{n:>13.2f}" for n in numbers))


def peak_memory(bench, threads, spec):
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    env.setdefault("OMP_WAIT_POLICY", "passive")
    proc = subprocess.run([bench, f"--peak-memory={spec}"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True)
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr)
        raise SystemExit(f"{bench} --peak-memory={spec} failed with exit status {proc.returncode}")
    return last_json_line(proc.stdout)["peak_delta_mib"]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bench", default="build/release/benchmarks/bench_fused_attention")
    parser.add_argument("--transformer-bench", default="build/release/benchmarks/bench_transformer")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=2, help="heed/PyTorch alternations per case")
    parser.add_argument("--min-time", type=float, default=0.5, help="seconds per timing sample set")
    parser.add_argument("--max-length", type=int, default=8192, help="skip longer sequences")
    parser.add_argument("--no-memory", action="store_true")
    args = parser.parse_args()

    torch.set_num_threads(args.threads)
    torch.set_num_interop_threads(1)
    lengths = [L for L in LENGTHS if L <= args.max_length]
    gemm_torch = torch_gemm_gflops()
    print(f"heed vs PyTorch {torch.__version__}, float32, {args.threads} threads, 1-D valid_lens; "
          f"median (min) ms of {args.rounds} rounds; torch/heed > 1 means heed is faster")
    print(f"PyTorch BLAS: {blas_info()}, loaded: {loaded_blas()}")

    # heed first per round, then PyTorch, alternating, so that load hits both alike.
    heed, ref = {}, {}
    for _ in range(args.rounds):
        names = [f"BM_{n}/{L}" for L in lengths for n in ("Fused", "FusedFwdBwd")]
        names += [f"BM_{n}/{L}" for L in lengths if L <= TORCH_MAX_LENGTH for n in ("Classic", "ClassicFwdBwd")]
        pattern = "^(" + "|".join(names) + ")(/real_time)?$"
        for name, s in run_heed(args.bench, args.threads, pattern, 1, args.min_time).items():
            heed.setdefault(name, []).extend(s)
        # The ceiling: the best of several GEMM samples (the machine's load varies).
        for name, s in run_heed(args.bench, args.threads, "^BM_EigenGemm(/real_time)?$", 3, 1.0).items():
            heed.setdefault(name, []).extend(s)
        steps_pattern = "^BM_(EncoderBlock|MultiHeadAttention)FwdBwdSteps/(keep|no_keep)/(128|512)(/real_time)?$"
        for name, s in run_heed(args.transformer_bench, args.threads, steps_pattern, 1, args.min_time).items():
            heed.setdefault(name, []).extend(s)
        for L in lengths:
            if L > TORCH_MAX_LENGTH:
                continue
            for key, fn in torch_attention_cases(L).items():
                ref.setdefault((L,) + key, []).extend(time_ms(fn, 1, 1, args.min_time))
        for steps in STEPS:
            for key, fn in torch_module_cases(steps).items():
                ref.setdefault((steps, key), []).extend(time_ms(fn, 1, 2, args.min_time))

    gemm_ms = min(heed["BM_EigenGemm"])
    gemm_heed = 2 * 2048 ** 3 / (gemm_ms * 1e-3) / 1e9
    print_table_head(["heed fused", "heed classic", "torch plain", "torch d2l"], ["plain/fused", "d2l/fused", "GFLOP/s"])
    flops = {}
    for L in lengths:
        lens = heed_randint(1, L + 1, B, VALID_LENS_SEED)
        pairs = sum(H * L * n for n in lens)
        for p, suffix, factor in (("fwd", "", 4), ("fwd+bwd", "FwdBwd", 12)):
            fused = heed.get(f"BM_Fused{suffix}/{L}", [])
            classic = heed.get(f"BM_Classic{suffix}/{L}", [])
            plain, d2l = ref.get((L, "plain", p), []), ref.get((L, "d2l", p), [])
            gflops = factor * D * pairs / (statistics.median(fused) * 1e-3) / 1e9 if fused else float("nan")
            flops[(L, p)] = gflops
            print_table_row(f"attention (8, 8, {L}, 64)", p, [fused, classic, plain, d2l],
                            [ratio(plain, fused), ratio(d2l, fused), gflops])
    print_table_head(["heed no_keep", "heed keep", "torch d2l"], ["d2l/no_keep", "d2l/keep"])
    module_ratio = {}
    for steps in STEPS:
        for module in ("MultiHeadAttention", "EncoderBlock"):
            free = heed.get(f"BM_{module}FwdBwdSteps/no_keep/{steps}", [])
            kept = heed.get(f"BM_{module}FwdBwdSteps/keep/{steps}", [])
            r = ref.get((steps, module), [])
            module_ratio[(module, steps)] = (ratio(r, free), ratio(r, kept))
            print_table_row(f"{module} (8, {steps}, 512)", "fwd+bwd", [free, kept, r], [ratio(r, free), ratio(r, kept)])
    print()
    print(f"GEMM 2048 x 2048 x 2048 float, best sample: heed::matmul (Eigen) {gemm_heed:.1f} GFLOP/s "
          f"({gemm_ms:.1f} ms); PyTorch {gemm_torch:.1f} GFLOP/s")

    peaks = {}
    if not args.no_memory:
        print()
        print("peak memory of one forward + backward (growth of VmHWM, MiB, fresh process each):")
        specs = ["fused:2048:8", "classic:2048:8"]
        if args.max_length >= 8192:
            specs += ["fused:8192:1", "classic:8192:1", "fused:8192:8"]
        for spec in specs:
            peaks[spec] = peak_memory(args.bench, args.threads, spec)
            path, L, batch = spec.split(":")
            print(f"  {path:<8} L = {L:>5}, batch {batch}: {peaks[spec]:10.1f} MiB")
        weights_gib = B * H * 8192 * 8192 * 4 / 2 ** 30
        print(f"  classic  L =  8192, batch 8: does not fit; its weights alone are {weights_gib:.0f} GiB")

    print()
    print("Goals:")
    if 2048 in lengths:
        fused = heed["BM_FusedFwdBwd/2048"]
        plain = ref.get((2048, "plain", "fwd+bwd"), [])
        r = ratio(plain, fused)
        print(f"  fused fwd+bwd at L = 2048 >= 1.5x PyTorch (plain bmm -> softmax -> bmm): {r:.2f}x -> "
              f"{'met' if r >= 1.5 else 'NOT met'}")
        share = flops[(2048, "fwd+bwd")] / gemm_heed
        print(f"  fused fwd+bwd at L = 2048 >= 50% of heed's GEMM throughput: {flops[(2048, 'fwd+bwd')]:.1f} of "
              f"{gemm_heed:.1f} GFLOP/s = {100 * share:.0f}% -> {'met' if share >= 0.5 else 'NOT met'}")
    if "fused:8192:1" in peaks:
        share = peaks["fused:8192:1"] / peaks["classic:8192:1"]
        print(f"  peak memory at L = 8192 (batch 1) <= 1/10 of the classic path's: {peaks['fused:8192:1']:.1f} vs "
              f"{peaks['classic:8192:1']:.1f} MiB = 1/{1 / share:.0f} -> {'met' if share <= 0.1 else 'NOT met'}")
    for steps in STEPS:
        free, kept = module_ratio[("EncoderBlock", steps)]
        print(f"  EncoderBlock fwd+bwd at {steps} steps >= 1.2x PyTorch: no_keep {free:.2f}x, keep {kept:.2f}x -> "
              f"{'met' if free >= 1.2 else 'NOT met'} (no_keep)")


if __name__ == "__main__":
    main()
