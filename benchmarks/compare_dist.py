#!/usr/bin/env python3
"""Data-parallel training against threads, side by side in one run (issue 20's goals).

    OMP_WAIT_POLICY=passive /usr/bin/python3 benchmarks/compare_dist.py \\
        --heed build/blas/benchmarks/train_scale --train-subset 16384 --repeats 2

The realistic workload of compare_scale.py (the Transformer: 128 hidden, FFN 512, 4
heads, 2 + 2 layers, dropout 0.1, batch 128 on ../shared/data/fra-eng-large/train.txt),
trained by train_scale (built with heed::mpi and, for the honest BLAS, HEED_WITH_OPENBLAS)
in four ways, one after another in each repeat:

  1p x 1t      one process, one thread, each batch as one part
  1p x 1t, 2   one process, one thread, each batch as two parts run one after the other
  1p x 2t      one process, two threads, each batch as two parts (TrainOptions::micro_batches)
  2p x 1t      mpiexec -n 2, one thread each, a part each (TrainOptions::communicator)

2p x 1t and 1p x 1t, 2 train the same bits (the final losses printed must agree). The
table gives the medians of the training throughputs, the ratios the goals ask for (2p x 1t
against the better of the two single-thread runs, and against 1p x 2t; each taken within a
repeat, since this machine's speed drifts, and their median), and the share of a step
spent summing the gradients across the processes (and waiting for the slower one).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from compare_scale import SCALE, heed_env  # noqa: E402  the workload and heed's environment


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--heed", default="build/blas/benchmarks/train_scale")
    p.add_argument("--data", default=os.path.join(HERE, "..", "..", "shared", "data", "fra-eng-large", "train.txt"))
    p.add_argument("--train-subset", type=int, default=16384)
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--mpiexec", default="mpiexec")
    p.add_argument("--openblas-coretype", default="SkylakeX" if " avx512f" in open("/proc/cpuinfo").read() else "")
    args = p.parse_args()
    if not os.path.exists(args.data):
        sys.exit(f"compare_dist: no {args.data} (../shared/data/fra-eng-large)")

    configs = [("1p x 1t", 1, 1, 1), ("1p x 1t, 2", 1, 1, 2), ("1p x 2t", 1, 2, 2), ("2p x 1t", 2, 1, 1)]
    runs = {name: [] for name, *_ in configs}
    with tempfile.TemporaryDirectory() as tmp:
        for repeat in range(args.repeats):
            for name, processes, threads, parts in configs:
                out = os.path.join(tmp, f"run_{repeat}_{processes}_{threads}_{parts}.json")
                cmd = [args.heed, "--model", "transformer", "--train", args.data, "--train-subset",
                       str(args.train_subset), "--epochs", str(args.epochs), "--threads", str(threads),
                       "--micro-batches", str(parts), "--seed", "0", "--out", out, "--quiet"]
                for key, value in SCALE.items():
                    cmd += ["--" + key, str(value)]
                if processes > 1:
                    cmd = [args.mpiexec, "-n", str(processes), "--oversubscribe"] + cmd
                env = dict(os.environ)
                env.update(heed_env(threads))
                env.update({"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"})
                if args.openblas_coretype:
                    env["OPENBLAS_CORETYPE"] = args.openblas_coretype
                done = subprocess.run(cmd, env=env, capture_output=True, text=True)
                if done.returncode != 0:
                    sys.exit(f"compare_dist: {' '.join(cmd)} failed:\n{done.stdout}\n{done.stderr}")
                with open(out) as f:
                    record = json.load(f)
                runs[name].append(record)
                print(f"  {name:12s} repeat {repeat + 1}: {record['tokens_per_s']:8.0f} tokens/s, "
                      f"train {record['train_wall_s']:.2f} s, loss {record['final_loss']:.6f}, "
                      f"all-reduce {record.get('allreduce_s', 0.0):.2f} s, wait {record.get('allreduce_wait_s', 0.0):.2f} s, "
                      f"peak RSS {record['peak_rss_mib']:.1f} MiB (rank 0)", flush=True)

    first = runs["2p x 1t"][0]
    print(f"\nheed train_scale, {first['n_train_pairs']} pairs, {args.epochs} epoch(s), GEMM: {first['gemm']}; "
          f"medians of {args.repeats} runs")
    print(f"{'run':12s} {'tokens/s':>9s} {'train s':>8s} {'final loss':>11s}")
    median = {}
    for name, *_ in configs:
        median[name] = statistics.median(r["tokens_per_s"] for r in runs[name])
        print(f"{name:12s} {median[name]:9.0f} {statistics.median(r['train_wall_s'] for r in runs[name]):8.2f} "
              f"{runs[name][0]['final_loss']:11.6f}")
    # The machine's speed drifts between repeats: each ratio is taken within a repeat (its
    # runs are minutes apart, not tens of minutes), and the median of those is given.
    def paired(numerator, denominators):
        ratios = [runs[numerator][i]["tokens_per_s"] / max(runs[d][i]["tokens_per_s"] for d in denominators)
                  for i in range(args.repeats)]
        return statistics.median(ratios), ratios

    single, single_all = paired("2p x 1t", ["1p x 1t", "1p x 1t, 2"])
    threads, threads_all = paired("2p x 1t", ["1p x 2t"])
    share = statistics.median(r["allreduce_s"] / r["train_wall_s"] for r in runs["2p x 1t"])
    wait = statistics.median(r["allreduce_wait_s"] / r["train_wall_s"] for r in runs["2p x 1t"])
    listed = lambda ratios: ", ".join(f"{r:.2f}" for r in ratios)
    print(f"2p x 1t / best 1p x 1t: {single:.2f}x (goal >= 1.8x; each repeat: {listed(single_all)})")
    print(f"2p x 1t / 1p x 2t:      {threads:.2f}x (goal >= 1.0x; each repeat: {listed(threads_all)})")
    print(f"all-reduce share of rank 0's training time: {100 * share:.1f} % summing, {100 * wait:.1f} % waiting "
          f"for the slower rank")
    elements = statistics.median(r["allreduce_elements_per_step"] for r in runs["2p x 1t"])
    print(f"gradient elements summed per update: {elements:,.0f} of {first['n_params']:,} parameters "
          f"(the embeddings' rows no token of the batch touched are left out)")
    # The same parameters; the reported loss is summed per process first: equal to rounding.
    a, b = runs["2p x 1t"][0]["final_loss"], runs["1p x 1t, 2"][0]["final_loss"]
    print(f"2p x 1t and 1p x 1t, 2 final losses {'agree' if abs(a - b) <= 1e-9 * abs(b) else 'DIFFER'}: {a!r}, {b!r}")


if __name__ == "__main__":
    main()
