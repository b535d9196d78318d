#!/usr/bin/python3
"""Decoding with and without a vocabulary shortlist (translate --shortlist), side by side:
sentences/s and held-out BLEU of one trained model, at each precision and beam width,
the two runs of each setting interleaved --repeats times (medians and their ratio).

    # a model and its shortlist: the README recipe (any train_translator run) with
    # --shortlist, written from the training pairs before training
    build/release/examples/train_translator --train ../shared/data/fra-eng-large/train.txt \\
        --num-examples 0 --valid-fraction 0.02 ... --shortlist run/shortlist.txt --out run
    /usr/bin/python3 benchmarks/compare_shortlist.py --run run --evaluate run/valid.txt

--evaluate is the file of pairs decoded (translate --evaluate: batches of 128 sentences,
each batch's union of candidates); a larger file than the held-out one gives steadier
timings (its BLEU then counts sentences the model trained on). Each run is a fresh
process of translate --load RUN/best.safetensors --worst 0 --micro-batches --threads,
OMP_NUM_THREADS = --threads; the timing is translate's own "decoded in" figure (the
decoding alone, not the loading).
"""
import argparse
import os
import re
import statistics
import subprocess
import sys


def run_translate(args, precision, beam, shortlist):
    cmd = [args.translate, "--load", os.path.join(args.run, "best.safetensors"), "--evaluate", args.evaluate,
           "--worst", "0", "--micro-batches", str(args.threads), "--precision", precision, "--beam", str(beam)]
    if shortlist:
        cmd += ["--shortlist", args.shortlist or os.path.join(args.run, "shortlist.txt")]
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads), OMP_WAIT_POLICY="passive")
    out = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({out.returncode}):\n{out.stdout}{out.stderr}")
    bleu = re.search(r"^BLEU = ([0-9.]+)", out.stdout, re.M)
    speed = re.search(r"decoded in ([0-9.]+) s: ([0-9.]+) sentences/s", out.stdout)
    count = re.search(r"^\S+: ([0-9]+) English sentences", out.stdout, re.M)
    if not bleu or not speed or not count:
        sys.exit(f"no BLEU, count or speed line from {' '.join(cmd)}:\n{out.stdout}")
    return float(bleu.group(1)), float(speed.group(1)), int(count.group(1))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run", required=True, help="a train_translator --out directory (best.safetensors)")
    parser.add_argument("--shortlist", help="the shortlist file (default RUN/shortlist.txt)")
    parser.add_argument("--evaluate", required=True, help="pairs to decode (translate --evaluate)")
    parser.add_argument("--translate", default="build/release/examples/translate")
    parser.add_argument("--precisions", default="fp32,int8")
    parser.add_argument("--beams", default="1,4")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    print(f"{args.run}/best.safetensors on {args.evaluate}, {args.threads} threads, medians of {args.repeats}")
    print(f"{'precision':>9} {'beam':>4} | {'BLEU':>6} {'sent/s':>8} | {'BLEU':>6} {'sent/s':>8} | shortlist/whole")
    print(f"{'':>9} {'':>4} | {'whole vocabulary':>15} | {'shortlist':>15} |")
    for precision in args.precisions.split(","):
        for beam in (int(b) for b in args.beams.split(",")):
            seconds = {False: [], True: []}
            bleu = {}
            for _ in range(args.repeats):
                for shortlist in (False, True):
                    bleu[shortlist], s, sentences = run_translate(args, precision, beam, shortlist)
                    seconds[shortlist].append(s)
            whole, short = statistics.median(seconds[False]), statistics.median(seconds[True])
            print(f"{precision:>9} {beam:>4} | {bleu[False]:6.2f} {sentences / whole:8.0f} | {bleu[True]:6.2f} "
                  f"{sentences / short:8.0f} | {whole / short:.2f}x")


if __name__ == "__main__":
    main()
