#!/usr/bin/python3
"""heed's matrix products beside Eigen's and OpenBLAS's at the shapes heed's models run
(benchmarks/bench_gemm_shapes.cpp), at 1 and 2 threads, with the ratios:

    /usr/bin/python3 benchmarks/compare_gemm.py                 # build/bench's binary
    /usr/bin/python3 benchmarks/compare_gemm.py --threads 1 --min-time 0.05 --repetitions 1

Per shape and thread count, GFLOP/s (the median of --repetitions runs of
--min-time seconds each) of
  * Eigen: Eigen 3.4's GEMM (-march=native), with OpenMP's threads;
  * OpenBLAS: cblas_sgemm with OPENBLAS_NUM_THREADS threads and OPENBLAS_CORETYPE
    --openblas-coretype (auto: SkylakeX on a CPU with AVX-512, which OpenBLAS 0.3.21 does
    not recognise on AMD's Zen 4 and 5 and would run with its AVX2 Haswell kernels); the
    kernel it ran is printed;
  * heed fp32: heed::detail::gemm as the build configures it (heed's own AVX-512 GEMM,
    heed/ops/fp32_gemm.hpp, from 16 rows; its small kernel or Eigen below), its threads;
  * heed bf16: heed::detail::bf16_gemm (operands rounded to bf16, fp32 sums: what an
    AutocastGuard of bf16 runs), its threads;
then heed fp32 / the faster of Eigen and OpenBLAS (goal >= 1.0 at every shape), and heed
bf16 / heed fp32 (goal >= 1.8) over the shapes autocast sends to bf16 with at least 1M
multiply-adds (below, the rounding's pass costs as much as the product). --json FILE
writes every figure.
"""
import argparse
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare_scale import openblas_coretype, run_child, verdict  # noqa: E402

GOALS = {"fp32": 1.0, "bf16": 1.8}
SIDES = {"BM_Eigen": "eigen", "BM_OpenBLAS": "openblas", "BM_Heed": "fp32", "BM_Bf16Gemm": "bf16"}
BF16_MIN_WORK = 1 << 20


def run_bench(args, threads):
    """{shape index: {side: GFLOP/s}} and the benchmark's context, at `threads`."""
    env = {"OMP_NUM_THREADS": str(threads), "OPENBLAS_NUM_THREADS": str(threads)}
    if openblas_coretype(args):
        env["OPENBLAS_CORETYPE"] = openblas_coretype(args)
    cmd = [args.bench, "--benchmark_filter=^BM_(Eigen|OpenBLAS|Heed|Bf16Gemm)/", "--benchmark_format=json",
           f"--benchmark_min_time={args.min_time}", f"--benchmark_repetitions={args.repetitions}"]
    stdout, _, _, _ = run_child(cmd, env, f"bench_gemm_shapes at {threads} threads")
    report = json.loads(stdout)
    runs = {}
    for b in report["benchmarks"]:
        if b.get("run_type") == "aggregate" or "GFLOPS" not in b:
            continue
        name, shape = b["run_name"].split("/")[:2]
        runs.setdefault((int(shape.split(":")[1]), SIDES[name]), []).append(b["GFLOPS"] / 1e9)
    figures = {}
    for (shape, side), values in runs.items():
        figures.setdefault(shape, {})[side] = statistics.median(values)
    return figures, report["context"]


def shape_of(context, index):
    """(m, n, k, label) of shape `index` from the context line "128x9807x128 bT"."""
    label = context[f"shape {index}"]
    m, n, k = (int(v) for v in label.split()[0].split("x"))
    return m, n, k, label


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bench", default="build/bench/benchmarks/bench_gemm_shapes")
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--min-time", type=float, default=0.2)
    parser.add_argument("--repetitions", type=int, default=3)
    parser.add_argument("--openblas-coretype", default="auto")
    parser.add_argument("--json")
    args = parser.parse_args()
    if not os.path.exists(args.bench):
        raise SystemExit(f"{args.bench}: not built (cmake --build build/bench --target bench_gemm_shapes)")

    results, misses = [], {"fp32": [], "bf16": []}
    for threads in [int(t) for t in args.threads.split(",")]:
        figures, context = run_bench(args, threads)
        print(f"\n{threads} thread{'s' if threads > 1 else ''}: OpenBLAS kernel {context.get('openblas', 'absent')}, "
              f"heed's CPU features {context.get('heed_cpu_features')}; GFLOP/s")
        print(f"{'shape':>24} {'Eigen':>7} {'OpenBLAS':>8} {'heed fp32':>9} {'vs best':>7} {'heed bf16':>9} {'bf16/fp32':>9}")
        for shape in sorted(figures):
            f = figures[shape]
            m, n, k, label = shape_of(context, shape)
            peers = [f[side] for side in ("eigen", "openblas") if side in f]
            fp32_ratio = f["fp32"] / max(peers)
            bf16_ratio = f["bf16"] / f["fp32"]
            bf16_counts = m * n * k >= BF16_MIN_WORK and k >= 16
            if fp32_ratio < GOALS["fp32"]:
                misses["fp32"].append(f"{label} at {threads}t ({fp32_ratio:.2f})")
            if bf16_counts and bf16_ratio < GOALS["bf16"]:
                misses["bf16"].append(f"{label} at {threads}t ({bf16_ratio:.2f})")
            openblas = f"{f['openblas']:8.1f}" if "openblas" in f else f"{'-':>8}"
            print(f"{label:>24} {f['eigen']:7.1f} {openblas} {f['fp32']:9.1f} {fp32_ratio:7.2f} {f['bf16']:9.1f} "
                  f"{bf16_ratio:9.2f}{'' if bf16_counts else ' (small)'}")
            results.append({"shape": label, "threads": threads, **f, "fp32_vs_best": fp32_ratio,
                            "bf16_vs_fp32": bf16_ratio})
    print()
    for key, what in (("fp32", "heed fp32 >= the faster of Eigen and OpenBLAS at every shape"),
                      ("bf16", f"heed bf16 >= {GOALS['bf16']}x heed fp32 (shapes of 1M+ multiply-adds)")):
        missed = misses[key]
        print(f"goal {what}: {verdict(not missed)}" + (f" — missed at {', '.join(missed)}" if missed else ""))
    if args.json:
        with open(args.json, "w") as out:
            json.dump(results, out, indent=1)


if __name__ == "__main__":
    main()
