#!/usr/bin/python3
"""Side-by-side timings of heed's bench_attention and PyTorch on the same machine.

    /usr/bin/python3 benchmarks/compare_attention.py \
        --bench build/release/benchmarks/bench_attention --threads 1

Runs the heed binary (Google Benchmark, --benchmark_format=json) with OMP_NUM_THREADS
set to --threads, and the PyTorch reference in this process with
torch.set_num_threads(threads) and torch.set_num_interop_threads(1):

  * plain softmax of a (64, 512, 512) float tensor over the last dim;
  * d2l's masked_softmax (tests/data/d2l_reference.py: a -1e6 fill) with no mask,
    1-D and 2-D valid_lens, the causal rule as d2l's decoder writes it (2-D valid_lens
    1..T per query), and the (B, 1, K) boolean mask as masked_fill(-1e6) + softmax;
  * d2l's DotProductAttention forward, bmm(Q, Kᵀ)/√d → masked_softmax → bmm, on
    (64, 512, 64) queries, keys and values with 1-D valid_lens, in eval mode.

Forward cases run under torch.no_grad(); forward+backward cases use autograd with a
fixed random incoming gradient and clear .grad between iterations, as heed's do.
The valid lengths are the ones heed's benchmark uses: heed::Generator is std::mt19937_64
and randint(low, high) is low + (next() mod (high − low)) (with rejection), which this
script reproduces, so both sides mask exactly the same keys.

Timing: each side warms up, then is timed with time.perf_counter over repeats; the
reported time is the median. The heed binary and the PyTorch loop alternate for
--rounds rounds so that load from other processes on the machine hits both alike.
The table's ratio is torch / heed: above 1 means heed is faster.

Always exits 0 (the goals are reported, not enforced), unless the heed binary fails.
"""

import argparse
import json
import math
import os
import re
import statistics
import subprocess
import sys
import time

try:
    import torch
except ImportError:  # plain `python3` may be an interpreter without torch
    raise SystemExit("compare_attention.py needs PyTorch: run it with /usr/bin/python3 (Debian's python3-torch)")

# d2l's own code, shared with the golden-file generator.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data"))
from d2l_reference import DotProductAttention, masked_softmax  # noqa: E402

B, T, K, D = 64, 512, 512, 64

# ---- heed::Generator in Python (std::mt19937_64 + heed's conversions) -------------------


class MT19937_64:
    """std::mt19937_64, whose output sequence the C++ standard fixes."""

    W, N, M, R = 64, 312, 156, 31
    A = 0xB5026F5AA96619E9
    U, Dm = 29, 0x5555555555555555
    S, Bm = 17, 0x71D67FFFEDA60000
    Tt, Cm = 37, 0xFFF7EEE000000000
    L = 43
    F = 6364136223846793005
    MASK = (1 << 64) - 1
    LOWER = (1 << 31) - 1
    UPPER = MASK & ~LOWER

    def __init__(self, seed):
        self.mt = [0] * self.N
        self.mt[0] = seed & self.MASK
        for i in range(1, self.N):
            prev = self.mt[i - 1]
            self.mt[i] = (self.F * (prev ^ (prev >> 62)) + i) & self.MASK
        self.index = self.N

    def _twist(self):
        mt = self.mt
        for i in range(self.N):
            x = (mt[i] & self.UPPER) | (mt[(i + 1) % self.N] & self.LOWER)
            xa = x >> 1
            if x & 1:
                xa ^= self.A
            mt[i] = mt[(i + self.M) % self.N] ^ xa
        self.index = 0

    def __call__(self):
        if self.index >= self.N:
            self._twist()
        y = self.mt[self.index]
        self.index += 1
        y ^= (y >> self.U) & self.Dm
        y ^= (y << self.S) & self.Bm
        y ^= (y << self.Tt) & self.Cm
        y ^= y >> self.L
        return y & self.MASK


def heed_randint(low, high, count, seed):
    """heed::randint(low, high, {count}, Generator(seed)) as a list."""
    engine = MT19937_64(seed)
    n = high - low
    limit = MT19937_64.MASK - MT19937_64.MASK % n
    out = []
    for _ in range(count):
        x = engine()
        while x >= limit:
            x = engine()
        out.append(low + x % n)
    return out


# ---- timing ----------------------------------------------------------------------------


def time_ms(fn, warmup, min_repeats, min_seconds):
    """Median and minimum wall time of fn() in ms, after warmup calls."""
    for _ in range(warmup):
        fn()
    samples = []
    start = time.perf_counter()
    while len(samples) < min_repeats or time.perf_counter() - start < min_seconds:
        t0 = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - t0) * 1e3)
    return samples


# Cases: (label, heed benchmark name, torch case key)
SOFTMAX_CASES = [
    ("softmax", "BM_Softmax", "softmax"),
    ("masked none", "BM_MaskedSoftmax/none", "masked_none"),
    ("masked valid_lens 1-D", "BM_MaskedSoftmax/valid_lens_1d", "masked_vl1"),
    ("masked valid_lens 2-D", "BM_MaskedSoftmax/valid_lens_2d", "masked_vl2"),
    ("masked causal", "BM_MaskedSoftmax/causal", "masked_causal"),
    ("masked boolean (B,1,K)", "BM_MaskedSoftmax/boolean", "masked_bool"),
]
ATTENTION_CASES = [
    ("DotProductAttention", "BM_DotProductAttention/keep", "dpa"),
]
# The forward's steps on their own (forward only; torch: d2l's bmm(Q, K^T) / sqrt(d) and
# bmm(W, V) under no_grad). The softmax step is the "masked valid_lens 1-D" row.
PART_CASES = [
    ("DPA step: scores (Q K^T / sqrt d)", "BM_AttentionPart_Scores", "part_scores"),
    ("DPA step: W V", "BM_AttentionPart_WeightsTimesValues", "part_wv"),
]
HEED_ONLY = [
    ("DPA, keep_attention_weights(false)", "BM_DotProductAttention/no_keep"),
]


def make_torch_cases():
    torch.manual_seed(0)
    x = torch.randn(B, T, K)
    g = torch.randn(B, T, K)
    vl1 = torch.tensor(heed_randint(1, K + 1, B, seed=2), dtype=torch.int64)
    vl2 = torch.tensor(heed_randint(1, K + 1, B * T, seed=3), dtype=torch.int64).reshape(B, T)
    causal_vl = torch.arange(1, T + 1).repeat(B, 1)  # d2l's dec_valid_lens in training
    allowed = (torch.arange(K)[None, :] < vl1[:, None]).reshape(B, 1, K)
    not_allowed = ~allowed

    q = torch.randn(B, T, D)
    k = torch.randn(B, K, D)
    v = torch.randn(B, K, D)
    g_out = torch.randn(B, T, D)
    attention = DotProductAttention(dropout=0.0)
    attention.eval()

    # d2l's sequence_mask writes into its argument: forward-only calls get a scratch
    # copy of x of their own per case (masking it again each call costs what it cost the
    # first time); autograd calls clone a leaf, since a leaf's view cannot be written in
    # place.
    def masked_fwd(valid_lens):
        scratch = x.clone()

        def fn():
            with torch.no_grad():
                return masked_softmax(scratch, valid_lens)

        return fn

    def bool_fwd():
        with torch.no_grad():
            return torch.softmax(x.masked_fill(not_allowed, -1e6), dim=-1)

    leaf = x.clone().requires_grad_()

    def fwdbwd(forward):
        def fn():
            y = forward()
            y.backward(g)
            leaf.grad = None

        return fn

    ql, kl, vlv = (t.clone().requires_grad_() for t in (q, k, v))

    def dpa_fwd():
        with torch.no_grad():
            return attention(q, k, v, vl1)

    weights = masked_softmax(x.clone(), vl1)

    def part_scores():
        with torch.no_grad():
            return torch.bmm(q, k.transpose(1, 2)) / math.sqrt(D)

    def part_wv():
        with torch.no_grad():
            return torch.bmm(weights, v)

    def dpa_fwdbwd():
        out = attention(ql, kl, vlv, vl1)
        out.backward(g_out)
        ql.grad = kl.grad = vlv.grad = None

    def softmax_fwd():
        with torch.no_grad():
            return torch.softmax(x, dim=-1)

    fwd = {
        "softmax": softmax_fwd,
        "masked_none": masked_fwd(None),
        "masked_vl1": masked_fwd(vl1),
        "masked_vl2": masked_fwd(vl2),
        "masked_causal": masked_fwd(causal_vl),
        "masked_bool": bool_fwd,
        "dpa": dpa_fwd,
    }
    parts = {"part_scores": part_scores, "part_wv": part_wv}

    both = {
        "softmax": fwdbwd(lambda: torch.softmax(leaf, dim=-1)),
        "masked_none": fwdbwd(lambda: masked_softmax(leaf, None)),  # None: d2l writes nothing
        "masked_vl1": fwdbwd(lambda: masked_softmax(leaf.clone(), vl1)),
        "masked_vl2": fwdbwd(lambda: masked_softmax(leaf.clone(), vl2)),
        "masked_causal": fwdbwd(lambda: masked_softmax(leaf.clone(), causal_vl)),
        "masked_bool": fwdbwd(lambda: torch.softmax(leaf.masked_fill(not_allowed, -1e6), dim=-1)),
        "dpa": dpa_fwdbwd,
    }
    return fwd, both, parts


def blas_info():
    match = re.search(r"BLAS_INFO=([^,\s]+)", torch.__config__.show())
    return f"BLAS_INFO={match.group(1)}" if match else "unknown"


def run_heed(bench, threads, bench_filter, repetitions, min_time):
    env = dict(os.environ)
    env["OMP_NUM_THREADS"] = str(threads)
    env.setdefault("OMP_WAIT_POLICY", "passive")  # README: spinning idle threads steal the core
    cmd = [
        bench,
        "--benchmark_format=json",
        f"--benchmark_filter={bench_filter}",
        f"--benchmark_repetitions={repetitions}",
        f"--benchmark_min_time={min_time}",
    ]
    if not os.path.isfile(bench):
        raise SystemExit(f"no heed benchmark binary at {bench}: build its target (scripts/dev.sh compare) or pass --bench")
    proc = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr)
        raise SystemExit(f"{bench} failed with exit status {proc.returncode}")
    data = json.loads(proc.stdout)
    samples = {}
    scale = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}
    for b in data["benchmarks"]:
        if b.get("run_type") != "iteration":
            continue
        name = b["run_name"].replace("/real_time", "")
        samples.setdefault(name, []).append(b["real_time"] * scale[b["time_unit"]])
    return samples


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bench", default="build/release/benchmarks/bench_attention",
                        help="path of the bench_attention binary")
    parser.add_argument("--threads", type=int, default=1, help="threads for both heed (OpenMP) and PyTorch")
    parser.add_argument("--rounds", type=int, default=3,
                        help="heed and PyTorch alternate this many times; samples of all rounds are pooled")
    parser.add_argument("--repetitions", type=int, default=3, help="heed repetitions per round")
    parser.add_argument("--min-time", type=float, default=0.3, help="seconds per heed repetition / torch case")
    parser.add_argument("--goal", type=float, default=1.3, help="goal (a): masked / plain softmax time at most this")
    args = parser.parse_args()

    torch.set_num_threads(args.threads)
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:
        pass  # already set (only possible once per process)

    names = [h for _, h, _ in SOFTMAX_CASES + ATTENTION_CASES]
    names += [h + "FwdBwd" if "/" not in h else h.replace("/", "FwdBwd/", 1) for h in names]
    names += [h for _, h, _ in PART_CASES] + [h for _, h in HEED_ONLY]
    bench_filter = "^(" + "|".join(names) + ")(/real_time)?$"

    fwd, both, parts = make_torch_cases()
    heed = {}
    ref = {}
    for _ in range(args.rounds):
        for name, s in run_heed(args.bench, args.threads, bench_filter, args.repetitions, args.min_time).items():
            heed.setdefault(name, []).extend(s)
        for key, fn in fwd.items():
            ref.setdefault(("fwd", key), []).extend(time_ms(fn, 2, 3, args.min_time))
        for key, fn in both.items():
            ref.setdefault(("both", key), []).extend(time_ms(fn, 1, 3, args.min_time))
        for key, fn in parts.items():
            ref.setdefault(("fwd", key), []).extend(time_ms(fn, 1, 3, args.min_time))

    def hmed(name):
        s = heed.get(name)
        return statistics.median(s) if s else float("nan")

    def hmin(name):
        s = heed.get(name)
        return min(s) if s else float("nan")

    def fwdbwd_name(h):
        return h.replace("/", "FwdBwd/", 1) if "/" in h else h + "FwdBwd"

    print(f"heed vs PyTorch {torch.__version__}, threads = {args.threads}, "
          f"(64, 512, 512) scores / (64, 512, 64) Q, K, V, float32; "
          f"median (min) of {args.rounds} rounds; torch/heed > 1 means heed is faster")
    header = f"{'case':<36} {'pass':<8} {'heed ms':>16} {'torch ms':>16} {'torch/heed':>11}"
    print(header)
    print("-" * len(header))
    for label, h, key in SOFTMAX_CASES + ATTENTION_CASES:
        for pass_name, hname, rkey in (("fwd", h, ("fwd", key)), ("fwd+bwd", fwdbwd_name(h), ("both", key))):
            hm, hn = hmed(hname), hmin(hname)
            rs = ref[rkey]
            rm, rn = statistics.median(rs), min(rs)
            print(f"{label:<36} {pass_name:<8} {hm:7.2f} ({hn:6.2f}) {rm:7.2f} ({rn:6.2f}) {rm / hm:11.2f}")
    for label, h, key in PART_CASES:
        hm, hn = hmed(h), hmin(h)
        rs = ref[("fwd", key)]
        rm, rn = statistics.median(rs), min(rs)
        print(f"{label:<36} {'fwd':<8} {hm:7.2f} ({hn:6.2f}) {rm:7.2f} ({rn:6.2f}) {rm / hm:11.2f}")
    for label, h in HEED_ONLY:
        print(f"{label:<36} {'fwd':<8} {hmed(h):7.2f} ({hmin(h):6.2f}) {'-':>16} {'-':>11}")

    print()
    print("Notes: torch 'masked causal' is d2l's decoder form (2-D valid_lens 1..T); torch "
          "'masked boolean' is masked_fill(~mask, -1e6) + softmax; torch masked fwd+bwd "
          "with valid_lens include a clone of the leaf (d2l's sequence_mask writes in place).")
    print(f"PyTorch BLAS: {blas_info()} (torch.bmm goes through it; 'generic' on Debian is the "
          "netlib reference BLAS unless an optimised libblas.so.3 alternative is installed)")
    print()
    print(f"Goal (a): heed masked_softmax / heed softmax (64, 512, 512) <= {args.goal} (median times)")
    print(f"{'mask':<36} {'fwd ratio':>10} {'fwd+bwd ratio':>14}  verdict (fwd)")
    plain_f, plain_b = hmed("BM_Softmax"), hmed("BM_SoftmaxFwdBwd")
    for label, h, _ in SOFTMAX_CASES[1:]:
        rf = hmed(h) / plain_f
        rb = hmed(fwdbwd_name(h)) / plain_b
        verdict = "met" if rf <= args.goal else "NOT met"
        print(f"{label:<36} {rf:10.2f} {rb:14.2f}  {verdict}")
    print()
    dpa_h, dpa_t = hmed("BM_DotProductAttention/keep"), statistics.median(ref[("fwd", "dpa")])
    print(f"Goal (b): DotProductAttention forward, 1-D valid_lens: heed {dpa_h:.2f} ms, "
          f"torch {dpa_t:.2f} ms, torch/heed {dpa_t / dpa_h:.2f} -> {'met' if dpa_h <= dpa_t else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
