#!/usr/bin/python3
"""heed against its peers in one run: heed, the libtorch C++ frontend (../shared/peers/
libtorch) and d2l's own PyTorch code, side by side on this machine, alternating, each
measurement in a fresh process, at 1 and 2 threads.

    # the quick default: both workloads, 1 and 2 threads (10 to 15 minutes on 2 cores)
    /usr/bin/python3 benchmarks/compare_scale.py

    # the "real" scale figure: the whole of train.txt, 2 epochs
    /usr/bin/python3 benchmarks/compare_scale.py --workloads scale --train-subset 0 --scale-epochs 2

    # testing the script: short runs
    /usr/bin/python3 benchmarks/compare_scale.py --workloads scale --train-subset 256 --decode-sentences 64 --threads 1
    /usr/bin/python3 benchmarks/compare_scale.py --workloads d2l --epochs 3 --threads 1

The three implementations
  * heed: build/bench/benchmarks/train_scale (--heed) for the scale workload and
    build/bench/examples/translate (--translate) for the d2l one, built with
        cmake --preset release -B build/bench -DHEED_BUILD_BENCHMARKS=ON -DHEED_BUILD_TESTS=OFF
        cmake --build build/bench --target train_scale translate
    run with OMP_NUM_THREADS=n and OMP_WAIT_POLICY=passive (unless set) and
    --micro-batches K (--heed-micro-batches, default 2) at every thread count: each batch
    trains as K parts on parallel threads, and since K, not the thread count, fixes how
    the work is cut, heed computes the same bits at 1 and 2 threads;
  * libtorch: d2l_train.cpp (d2l workload) and d2l_train_scale.cpp (scale workload), the
    line-by-line libtorch port of d2l's code in --peer-src; built here into --peer-dir
    ($TMPDIR or /tmp) when the binary is missing or older than its source, with
        g++ -O2 -std=c++17 X.cpp -o DIR/X -I/usr/include/torch/csrc/api/include -ltorch -ltorch_cpu -lc10
    (about 25 s each), run with --threads n, OMP_NUM_THREADS=n, OPENBLAS_NUM_THREADS=n and
    LD_LIBRARY_PATH=--openblas-dir (/usr/lib/x86_64-linux-gnu/openblas-pthread: Debian's
    default libblas.so.3 is the netlib reference BLAS, some 30 times slower);
  * pytorch: d2l's own modules (tests/data/d2l_seq2seq.py, d2l_reference.py) on Debian's
    python3-torch (1.13), same environment as libtorch, torch.set_num_threads(n) and
    torch.set_num_interop_threads(1). The d2l workload runs compare_seq2seq.py's child mode
    (`compare_seq2seq.py --torch-child MODEL`); the scale workload runs this script's child
    mode (`--torch-child scale`, which takes the peers' flags).
For each workload, model and thread count the three run in the order pytorch, libtorch,
heed, the order rotated by one at each repeat (libtorch, heed, pytorch; then heed,
pytorch, libtorch), then the next thread count, with --pause seconds of rest before each
run, so that drift of the machine, and whatever one run leaves the next (a 2-thread run
right after another ran up to 17 % slower than alone), hits all alike; --repeats R keeps
the best of R runs of each figure (the smallest time, the largest rates, the smallest peak
RSS; the loss is the fastest run's).

Workload d2l (--workloads d2l): d2l chapter 10's two translation runs on the first 600
pairs of fra-eng/fra.txt (--d2l-data; d2l's num_examples=600 reads 601 lines): batch 64,
10 steps, Adam lr 0.005, clipping 1, xavier init, masked cross-entropy with teacher
forcing; the Transformer (32 hidden, FFN 64, 4 heads, 2 + 2 layers, dropout 0.1, 200
epochs) and Bahdanau's GRU seq2seq (embedding 32, hidden 32, 2 layers, dropout 0.1, 250
epochs); --epochs overrides the epochs (testing). The time is train_seq2seq's alone, as
each implementation reports it. Ratio: the best peer setting (the smallest time over
libtorch and pytorch and their thread counts) / heed's time at each thread count;
the goal is >= 10.

Workload scale (--workloads scale): d2l's Transformer at a realistic size on
fra-eng-large/train.txt (--scale-data): 128 hidden (embedding 128), FFN 512, 4 heads,
2 + 2 layers, dropout 0.1, batch 128, num_steps 12, Adam lr 0.001, clipping 1, xavier
init. Data as d2l's load_data_nmt over every line (or the first --max-pairs), the
vocabularies (min_freq 2, <pad> <bos> <eos>) from all of them; --train-subset K trains on
K evenly spaced pairs (row i*n//K; 0: all), --scale-epochs epochs (quick default: 2048
pairs, 1 epoch; the real figure: --train-subset 0 --scale-epochs 2). Tokens are the
targets' valid lengths summed over all epochs (as d2l counts them) and tokens/s is that
over train_seq2seq's wall time. Then each implementation decodes the same test-source
file greedily, in batches of 128, under no-grad: --decode-sentences (1258) distinct
English sentences of train.txt, in file order, every k-th, after d2l's preprocess_nmt
(lower case, a space before , . ! ?). Ratios: training, heed's tokens/s at each thread
count / the best peer's (over libtorch and pytorch, their thread counts and, with
--precisions fp32,bf16, PyTorch's bf16 autocast), goal >= 3.5 (issue 49's); heed's
2-thread / 1-thread tokens/s, goal >= 1.85; decoding, heed's sentences/s / the
best libtorch sentences/s, goal >= 3; memory, heed's peak RSS / pytorch's at the same
thread count, goal <= 0.25. The final losses are printed so that one sees all trained
alike, and the data sizes (pairs, vocabularies, parameters) are checked to agree.

Peak RSS: every measurement is a child process started by this script, whose own
parent process uses only the standard library (no torch): the child's peak resident set
is ru_maxrss of os.wait4 on it. Linux carries the resident high-water mark of the
process image an exec replaces into ru_maxrss, so no child can show less than this
small parent's peak, which is printed at the end (about 14 MiB: /bin/true shows as
much); it matters only for heed's d2l runs, whose figures (15-25 MiB) are close to it.
For pytorch the figure includes the interpreter and torch's libraries, as a user running
d2l's code pays them. heed's train_scale also reports its own VmHWM, kept in the --json
records as self_reported_peak_rss_mib.

Always exits 0 (the goals are reported, not enforced) unless a run fails: then it prints
the command and the tail of its output, and exits 1. --json OUT writes every raw record
(each run's own JSON or parsed output, plus its command, thread count and peak RSS).
"""

import argparse
import itertools
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
SHARED = os.path.join(REPO, "..", "shared")
TESTS_DATA = os.path.join(REPO, "tests", "data")

IMPLS = ("pytorch", "libtorch", "heed")
D2L_MODELS = ("transformer", "bahdanau")
D2L_EPOCHS = {"transformer": 200, "bahdanau": 250}
D2L_NUM_EXAMPLES = 600
# The scale workload's settings, passed explicitly to all three (their defaults agree).
SCALE = {"batch-size": 128, "num-steps": 12, "lr": 0.001, "num-hiddens": 128, "embed-size": 128,
         "ffn-num-hiddens": 512, "num-heads": 4, "num-layers": 2, "dropout": 0.1}
DECODE_BATCH = 128
GOALS = {"d2l": 10.0, "train": 3.5, "scaling": 1.85, "decode": 3.0, "rss": 0.25, "bf16": 1.6}
TORCH_INCLUDE = "/usr/include/torch/csrc/api/include"
TRAINED = re.compile(r"^trained (\d+) epochs in ([0-9.]+) s: loss ([0-9.naif-]+), ([0-9.]+) tokens/s$")


def verdict(ok):
    return "met" if ok else "NOT met"


def fmt(value, spec, width):
    return f"{'-':>{width}}" if value is None else f"{value:{width}{spec}}"


def plural(n):
    return "thread" if n == 1 else "threads"


# ---- child processes ------------------------------------------------------------------------


def shell_line(cmd, env_changes):
    env = " ".join(f"{k}={v}" for k, v in env_changes.items())
    return (env + " " if env else "") + " ".join(cmd)


def run_child(cmd, env_changes, label):
    """Runs cmd in a fresh process with os.environ plus env_changes; returns (stdout,
    stderr, peak RSS in MiB from os.wait4's ru_maxrss, wall seconds). Exits on failure."""
    env = dict(os.environ)
    env.update(env_changes)
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=err)
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        except BaseException:  # Ctrl-C: do not leave the child running
            proc.kill()
            os.wait4(proc.pid, 0)
            proc.returncode = -9
            raise
        proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here: Popen must not wait again
        wall = time.perf_counter() - start
        out.seek(0)
        err.seek(0)
        stdout = out.read().decode("utf-8", "replace")
        stderr = err.read().decode("utf-8", "replace")
    if proc.returncode != 0:
        fail(label, cmd, env_changes, f"exit status {proc.returncode}", stdout, stderr)
    return stdout, stderr, usage.ru_maxrss / 1024.0, wall


def fail(label, cmd, env_changes, why, stdout, stderr):
    tail = lambda text: "\n".join(text.rstrip().splitlines()[-40:])  # noqa: E731
    sys.stdout.flush()
    sys.stderr.write(f"\n{label} failed ({why}):\n  {shell_line(cmd, env_changes)}\n")
    if stdout.strip():
        sys.stderr.write(f"--- stdout (tail) ---\n{tail(stdout)}\n")
    if stderr.strip():
        sys.stderr.write(f"--- stderr (tail) ---\n{tail(stderr)}\n")
    raise SystemExit(1)


def last_json_line(text):
    for line in reversed(text.strip().splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    return None


def openblas_coretype(args):
    """OPENBLAS_CORETYPE for every run: --openblas-coretype, or SkylakeX on a CPU with
    AVX-512 (OpenBLAS 0.3.21 does not recognise AMD's Zen 4 and falls back to its AVX2
    Haswell kernels, about 1.6x slower there: benchmarks/bench_gemm_shapes.cpp)."""
    if args.openblas_coretype != "auto":
        return args.openblas_coretype
    try:
        with open("/proc/cpuinfo") as f:
            return "SkylakeX" if " avx512f" in f.read() else ""
    except OSError:
        return ""


def heed_env(threads, args=None):
    env = {"OMP_NUM_THREADS": str(threads), "OPENBLAS_NUM_THREADS": "1"}
    if args is not None and openblas_coretype(args):
        env["OPENBLAS_CORETYPE"] = openblas_coretype(args)  # for a heed built with HEED_WITH_OPENBLAS
    if "OMP_WAIT_POLICY" not in os.environ:
        env["OMP_WAIT_POLICY"] = "passive"  # spinning idle threads steal the core
    return env


def peer_env(threads, args):
    env = {"OMP_NUM_THREADS": str(threads), "OPENBLAS_NUM_THREADS": str(threads)}
    if openblas_coretype(args):
        env["OPENBLAS_CORETYPE"] = openblas_coretype(args)
    if args.openblas_dir:
        old = os.environ.get("LD_LIBRARY_PATH")
        env["LD_LIBRARY_PATH"] = args.openblas_dir + (":" + old if old else "")
    if peer_malloc_path(args):
        env["LD_PRELOAD"] = peer_malloc_path(args)
    return env


PEER_MALLOCS = {"tcmalloc": "/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4",
                "jemalloc": "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2"}


def peer_malloc_path(args):
    """The allocator preloaded into the peers, or None for glibc's. PyTorch and libtorch take
    each tensor from malloc afresh; glibc maps buffers over 32 MiB afresh each time and the
    kernel faults their pages in again (the vocabulary projection's 49 MB output: 160 ms on
    a machine whose page faults cost 11 us, 20 ms under tcmalloc, which keeps them).
    PyTorch's tuning guide recommends tcmalloc or jemalloc for this; heed keeps its own
    buffers (heed/core/storage.hpp) and runs with glibc's."""
    if args.peer_malloc == "glibc":
        return None
    return PEER_MALLOCS[args.peer_malloc]


def missing_peer_malloc(args):
    """Why --peer-malloc cannot be preloaded, or None."""
    path = peer_malloc_path(args)
    if path is None or os.path.isfile(path):
        return None
    package = "libtcmalloc-minimal4" if args.peer_malloc == "tcmalloc" else "libjemalloc2"
    return f"{path} is missing (apt-get install {package}, or --peer-malloc glibc)"


def build_peer(name, args):
    """The libtorch peer `name` in --peer-dir, built when missing or older than its source."""
    source = os.path.join(args.peer_src, name + ".cpp")
    binary = os.path.join(args.peer_dir, name)
    if not os.path.isfile(source):
        raise SystemExit(f"no peer source at {source}: pass --peer-src (../shared/peers/libtorch) or --skip-libtorch")
    if os.path.isfile(binary) and os.path.getmtime(binary) >= os.path.getmtime(source):
        return binary
    os.makedirs(args.peer_dir, exist_ok=True)
    cmd = ["g++", "-O2", "-std=c++17", source, "-o", binary, "-I" + TORCH_INCLUDE, "-ltorch", "-ltorch_cpu", "-lc10"]
    print(f"building the libtorch peer {binary} (about 25 s): {' '.join(cmd)}", flush=True)
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if proc.returncode != 0:
        fail(f"building {name}", cmd, {}, f"exit status {proc.returncode}", proc.stdout,
             "(is libtorch-dev installed? apt-get install libtorch-dev libopenblas0-pthread)")
    return binary


# ---- one run of each implementation ------------------------------------------------------------


def run_d2l(impl, model, threads, args, tmp):
    """One d2l training run; a record with seconds, tokens_per_s (or None), loss."""
    seed, epochs = str(args.seed), args.epochs
    if impl == "heed":
        cmd = [args.translate, "--model", model, "--data", args.d2l_data, "--num-examples", str(D2L_NUM_EXAMPLES),
               "--seed", seed, "--micro-batches", str(args.heed_micro_batches), "--quiet"]
        cmd += ["--epochs", str(epochs)] if epochs else []
        env = heed_env(threads, args)
        stdout, stderr, rss, _ = run_child(cmd, env, f"heed translate {model}")
        record = None
        for line in stdout.splitlines():
            m = TRAINED.match(line.strip())
            if m:
                record = {"epochs": int(m.group(1)), "seconds": float(m.group(2)), "loss": float(m.group(3)),
                          "tokens_per_s": float(m.group(4))}
                break
        if record is None:
            fail(f"heed translate {model}", cmd, env, "no 'trained N epochs in X s' line", stdout, stderr)
        record["output"] = stdout.strip().splitlines()
    elif impl == "libtorch":
        out = os.path.join(tmp, f"d2l_{model}_{threads}.json")
        cmd = [args.d2l_train, "--model", model, "--seed", seed, "--threads", str(threads), "--quiet",
               "--data-dir", os.path.dirname(args.d2l_data), "--out", out]
        cmd += ["--epochs", str(epochs)] if epochs else []
        env = peer_env(threads, args)
        stdout, stderr, rss, _ = run_child(cmd, env, f"libtorch d2l_train {model}")
        try:
            with open(out) as f:
                raw = json.load(f)
        except (OSError, ValueError) as e:
            fail(f"libtorch d2l_train {model}", cmd, env, f"no JSON record ({e})", stdout, stderr)
        os.remove(out)
        record = {"epochs": raw["hyper_params"]["num_epochs"], "seconds": raw["train_wall_s"],
                  "loss": raw["final_loss"], "tokens_per_s": raw["tokens_per_sec_whole_run"], "raw": raw}
    else:
        cmd = [args.python, os.path.join(HERE, "compare_seq2seq.py"), "--torch-child", model, "--child-threads",
               str(threads), "--seed", seed, "--data", args.d2l_data] + (["--epochs", str(epochs)] if epochs else [])
        env = peer_env(threads, args)
        stdout, stderr, rss, _ = run_child(cmd, env, f"pytorch (compare_seq2seq.py) {model}")
        raw = last_json_line(stdout)
        if raw is None:
            fail(f"pytorch (compare_seq2seq.py) {model}", cmd, env, "no JSON line", stdout, stderr)
        record = {"epochs": epochs or D2L_EPOCHS[model], "seconds": raw["seconds"], "loss": raw["loss"],
                  "tokens_per_s": None, "raw": raw}
    record.update({"workload": "d2l", "model": model, "impl": impl, "threads": threads, "peak_rss_mib": rss,
                   "command": shell_line(cmd, env)})
    return record


def scale_flags(threads, args, test_src, hyp, out):
    flags = ["--model", "transformer", "--train", args.scale_data, "--train-subset", str(args.train_subset),
             "--epochs", str(args.scale_epochs), "--threads", str(threads), "--seed", str(args.seed)]
    if args.max_pairs:
        flags += ["--max-pairs", str(args.max_pairs)]
    for key, value in SCALE.items():
        flags += ["--" + key, str(value)]
    if test_src:
        flags += ["--test-src", test_src, "--hyp", hyp, "--decode-batch", str(DECODE_BATCH)]
    return flags + ["--out", out, "--quiet"]


def run_scale(impl, threads, args, tmp, test_src, repeat):
    out = os.path.join(tmp, f"scale_{impl}_{threads}_{repeat}.json")
    hyp = os.path.join(tmp, f"hyp_{impl}_{threads}_{repeat}.txt")
    flags = scale_flags(threads, args, test_src, hyp, out)
    impl, _, precision = impl.partition("-")  # "heed-bf16": heed, training in bf16
    if precision:
        flags += ["--precision", precision]
    if impl == "heed":
        cmd, env = [args.heed] + flags + ["--micro-batches", str(args.heed_micro_batches)], heed_env(threads, args)
    elif impl == "libtorch":
        cmd, env = [args.d2l_train_scale] + flags, peer_env(threads, args)
    else:
        cmd, env = [args.python, os.path.abspath(__file__), "--torch-child", "scale"] + flags, peer_env(threads, args)
    stdout, stderr, rss, _ = run_child(cmd, env, f"{impl} scale run")
    try:
        with open(out) as f:
            record = json.loads(f.read())
    except (OSError, ValueError) as e:
        fail(f"{impl} scale run", cmd, env, f"no JSON record in {out} ({e})", stdout, stderr)
    if "peak_rss_mib" in record:  # heed's own VmHWM; the table uses wait4's figure for all alike
        record["self_reported_peak_rss_mib"] = record.pop("peak_rss_mib")
    record.update({"workload": "scale", "impl": impl + ("-" + precision if precision else ""), "threads": threads, "peak_rss_mib": rss,
                   "hyp_file": hyp if test_src else None, "command": shell_line(cmd, env)})
    return record


# ---- the d2l workload --------------------------------------------------------------------------


def best_of(records, key, smallest):
    values = [r[key] for r in records if r.get(key) is not None]
    if not values:
        return None
    return min(values) if smallest else max(values)


def rotated(impls, repeat):
    """The run order of a repeat: each implementation leads once in every len(impls) repeats."""
    k = repeat % len(impls)
    return impls[k:] + impls[:k]


def rest(args):
    if args.pause > 0:
        time.sleep(args.pause)


def d2l_workload(args, impls, thread_counts, tmp, all_records):
    models = args.models
    print(f"\n== d2l: chapter 10's translation runs on the first {D2L_NUM_EXAMPLES} pairs of {args.d2l_data}, "
          f"seed {args.seed} ==", flush=True)
    runs = {}  # (model, impl, threads) -> [record]
    for model in models:
        for threads in thread_counts:
            for repeat in range(args.repeats):
                for impl in rotated(impls, repeat):
                    rest(args)
                    r = run_d2l(impl, model, threads, args, tmp)
                    runs.setdefault((model, impl, threads), []).append(r)
                    all_records.append(r)
                    tps = f", {r['tokens_per_s']:.0f} tokens/s" if r["tokens_per_s"] else ""
                    print(f"  {model:<11} {impl:<8} {threads} {plural(threads)}: {r['seconds']:.2f} s{tps}, "
                          f"loss {r['loss']:.4f}, peak RSS {r['peak_rss_mib']:.0f} MiB", flush=True)

    print()
    header = f"{'model':<12} {'epochs':>6} {'impl':<9} {'thr':>3} {'train s':>9} {'tokens/s':>9} {'peak MiB':>9} " \
             f"{'loss':>7}"
    print(header)
    print("-" * len(header))
    summary = []
    for model in models:
        epochs = args.epochs or D2L_EPOCHS[model]
        for threads in thread_counts:
            for impl in impls:
                rs = runs[(model, impl, threads)]
                fastest = min(rs, key=lambda r: r["seconds"])
                print(f"{model:<12} {epochs:>6} {impl:<9} {threads:>3} {fastest['seconds']:9.2f} "
                      f"{fmt(best_of(rs, 'tokens_per_s', False), '.0f', 9)} "
                      f"{best_of(rs, 'peak_rss_mib', True):9.1f} {fastest['loss']:7.4f}")
        peers = [(min(r["seconds"] for r in runs[(model, impl, t)]), impl, t)
                 for impl in impls if impl != "heed" for t in thread_counts]
        if "heed" in impls and peers:
            peer_s, peer_impl, peer_t = min(peers)
            for t in thread_counts:
                heed_s = min(r["seconds"] for r in runs[(model, "heed", t)])
                ratio = peer_s / heed_s
                summary.append(f"  {model}: best peer {peer_impl} {peer_t}t {peer_s:.2f} s / heed {t}t "
                               f"{heed_s:.2f} s = {ratio:.2f}x   goal >= {GOALS['d2l']:g}x: "
                               f"{verdict(ratio >= GOALS['d2l'])}")
    if summary:
        print("\nRatios (best peer setting / heed; > 1: heed is faster):")
        for line in summary:
            print(line)
    if args.epochs:
        print(f"  (--epochs {args.epochs}: not d2l's epochs; the ratios include more of each run's fixed costs)")


# ---- the scale workload ------------------------------------------------------------------------


def make_test_src(args, tmp):
    """Writes the decoding test set in a child (keeps this process small); returns (path, count)."""
    path = os.path.join(tmp, "test_src.txt")
    cmd = [args.python, os.path.abspath(__file__), "--make-test-src", args.scale_data, str(args.decode_sentences),
           path]
    stdout, _, _, _ = run_child(cmd, {}, "writing the test sources")
    with open(path, encoding="utf-8") as f:
        count = sum(1 for _ in f)
    print(f"decoding test set: {count} sentences in {path} ({stdout.strip()})")
    return path, count


def blas_line(record):
    blas = record.get("blas")
    if not blas:
        return "not recorded"
    paths = blas.get("libs") or []
    folders = sorted({os.path.dirname(p) for p in paths})
    libs = (", ".join(os.path.basename(p) for p in paths) + f" in {', '.join(folders)}") if paths else "none mapped"
    threads = blas.get("openblas_threads", -1)
    return libs + (f" (OpenBLAS threads {threads})" if threads is not None and threads >= 0 else "")


def scale_workload(args, impls, thread_counts, tmp, all_records):
    # Each implementation at each precision: "heed", "heed-bf16", ...; libtorch's peer is fp32 only.
    impls = [impl if p == "fp32" else f"{impl}-{p}" for impl in impls for p in args.precisions
             if p == "fp32" or impl != "libtorch"]
    subset = "all pairs" if args.train_subset == 0 else f"{args.train_subset} evenly spaced pairs"
    print(f"\n== scale: d2l's Transformer, 128 hidden, FFN 512, 4 heads, 2 + 2 layers, batch 128, 12 steps, "
          f"lr 0.001, dropout 0.1; {args.scale_data}: {subset}, {args.scale_epochs} "
          f"epoch{'s' if args.scale_epochs != 1 else ''}, seed {args.seed} ==", flush=True)
    test_src, n_sentences = (None, 0)
    if args.decode_sentences > 0:
        test_src, n_sentences = make_test_src(args, tmp)
    runs = {}  # (impl, threads) -> [record]
    for threads in thread_counts:
        for repeat in range(args.repeats):
            for impl in rotated(impls, repeat):
                rest(args)
                r = run_scale(impl, threads, args, tmp, test_src, repeat)
                runs.setdefault((impl, threads), []).append(r)
                all_records.append(r)
                print(f"  {impl:<8} {threads} {plural(threads)}: train {r['train_wall_s']:.2f} s, "
                      f"{r['tokens_per_s']:.0f} tokens/s, loss {r['final_loss']:.4f}; decode "
                      f"{r['decode_sentences']} sentences in {r['decode_wall_s']:.2f} s; "
                      f"peak RSS {r['peak_rss_mib']:.0f} MiB", flush=True)

    best = {}  # (impl, threads) -> dict of best figures
    for key, rs in runs.items():
        fastest = min(rs, key=lambda r: r["train_wall_s"])
        best[key] = {"train_s": fastest["train_wall_s"], "tokens": fastest["tokens"],
                     "tokens_per_s": best_of(rs, "tokens_per_s", False),
                     "sentences_per_s": best_of(rs, "sentences_per_s", False) if test_src else None,
                     "rss": best_of(rs, "peak_rss_mib", True), "loss": fastest["final_loss"]}
    print()
    header = (f"{'impl':<9} {'thr':>3} {'train s':>9} {'tokens':>9} {'tokens/s':>9} {'dec sent/s':>10} "
              f"{'peak MiB':>9} {'final loss':>10}")
    print(header)
    print("-" * len(header))
    for threads in thread_counts:
        for impl in impls:
            b = best[(impl, threads)]
            print(f"{impl:<9} {threads:>3} {b['train_s']:9.2f} {b['tokens']:9d} {b['tokens_per_s']:9.0f} "
                  f"{fmt(b['sentences_per_s'], '.1f', 10)} {b['rss']:9.1f} {b['loss']:10.4f}")

    # Do all train on the same data and model?
    sizes = {}
    for (impl, threads), rs in sorted(runs.items()):
        r = rs[0]
        sizes.setdefault((r.get("n_train_pairs"), r.get("src_vocab"), r.get("tgt_vocab"), r.get("n_params")),
                         []).append(f"{impl} {threads}t")
    for (pairs, src, tgt, params), who in sizes.items():
        print(f"data: {pairs} training pairs, vocabularies {src} / {tgt}, {params} parameters"
              + ("" if len(sizes) == 1 else f"  <- {', '.join(who)}"))
    if len(sizes) > 1:
        print("WARNING: the implementations do not agree on the data or the model size")
    hashes = {r["vocab_hash"] for rs in runs.values() for r in rs if r.get("vocab_hash")}
    if len(hashes) > 1:
        print(f"WARNING: the vocabularies differ (vocab hashes {', '.join(sorted(hashes))})")
    if test_src:
        print(f"decoding: {n_sentences} sentences, greedy, batches of {DECODE_BATCH}, at most "
              f"{SCALE['num-steps']} steps")
    for threads in thread_counts:
        for impl in impls:
            if not impl.startswith("heed"):
                print(f"BLAS of {impl} at {threads} {plural(threads)}: {blas_line(runs[(impl, threads)][0])}")

    if "heed" not in impls:
        return
    print("\nRatios (> 1: heed is better, except RSS, where < 1 is):")
    peers = [(best[(impl, t)]["tokens_per_s"], impl, t) for impl in impls if not impl.startswith("heed")
             for t in thread_counts]
    heeds = [impl for impl in impls if impl.startswith("heed")]
    if peers:
        peer_tps, peer_impl, peer_t = max(peers)
        for heed in heeds:
            for t in thread_counts:
                ratio = best[(heed, t)]["tokens_per_s"] / peer_tps
                print(f"  training: {heed} {t}t {best[(heed, t)]['tokens_per_s']:.0f} tokens/s / best peer "
                      f"{peer_impl} {peer_t}t {peer_tps:.0f} = {ratio:.2f}x   goal >= {GOALS['train']:g}x: "
                      f"{verdict(ratio >= GOALS['train'])}")
    if "heed-bf16" in impls:
        for t in thread_counts:
            ratio = best[("heed-bf16", t)]["tokens_per_s"] / best[("heed", t)]["tokens_per_s"]
            print(f"  bf16: heed-bf16 {t}t / heed {t}t tokens/s = {ratio:.2f}x   goal >= {GOALS['bf16']:g}x: "
                  f"{verdict(ratio >= GOALS['bf16'])}")
    if 1 in thread_counts and 2 in thread_counts:
        ratio = best[("heed", 2)]["tokens_per_s"] / best[("heed", 1)]["tokens_per_s"]
        print(f"  scaling: heed 2 threads / 1 thread tokens/s = {ratio:.2f}x   goal >= {GOALS['scaling']:g}x: "
              f"{verdict(ratio >= GOALS['scaling'])}")
    if test_src and "libtorch" in impls:
        lib_sps, lib_t = max((best[("libtorch", t)]["sentences_per_s"], t) for t in thread_counts)
        for t in thread_counts:
            ratio = best[("heed", t)]["sentences_per_s"] / lib_sps
            print(f"  decoding: heed {t}t {best[('heed', t)]['sentences_per_s']:.1f} sentences/s / best libtorch "
                  f"{lib_t}t {lib_sps:.1f} = {ratio:.2f}x   goal >= {GOALS['decode']:g}x: "
                  f"{verdict(ratio >= GOALS['decode'])}")
    if "pytorch" in impls:
        for t in thread_counts:
            ratio = best[("heed", t)]["rss"] / best[("pytorch", t)]["rss"]
            print(f"  peak RSS: heed {t}t {best[('heed', t)]['rss']:.1f} MiB / pytorch {t}t "
                  f"{best[('pytorch', t)]['rss']:.1f} MiB = {ratio:.3f}   goal <= {GOALS['rss']:g}: "
                  f"{verdict(ratio <= GOALS['rss'])}")


# ---- child modes (these import torch; the parent never does) -----------------------------------


def make_test_src_child(argv):
    """--make-test-src TRAIN N OUT: N distinct English sentences of TRAIN, in file order,
    every k-th, after d2l's preprocess_nmt, one a line."""
    train, n, out = argv[0], int(argv[1]), argv[2]
    sys.dont_write_bytecode = True
    sys.path.insert(0, TESTS_DATA)
    from d2l_nmt import preprocess_nmt  # d2l's own function (the module imports torch)
    with open(train, encoding="utf-8") as f:
        text = preprocess_nmt(f.read())
    english = {}
    for line in text.split("\n"):
        parts = line.split("\t")
        if len(parts) == 2:
            english.setdefault(parts[0].strip(), None)
    distinct = [s for s in english if s]
    n = min(n, len(distinct))
    step = max(1, len(distinct) // n) if n else 1
    chosen = distinct[::step][:n]
    with open(out, "w", encoding="utf-8") as f:
        f.writelines(s + "\n" for s in chosen)
    print(f"one in {step} of {len(distinct)} distinct English sentences")


def loaded_blas():
    """The BLAS/LAPACK libraries mapped into this process, and OpenBLAS's thread count
    (-1 when OpenBLAS is not among them), like the libtorch peer's record."""
    import ctypes
    libs = set()
    with open("/proc/self/maps") as f:
        for line in f:
            slash = line.find("/")
            if slash < 0:
                continue
            path = line[slash:].strip()
            name = os.path.basename(path)
            if "blas" in name or "lapack" in name or "mkl" in name:
                libs.add(os.path.realpath(path))
    threads = -1
    for lib in sorted(libs):
        try:
            threads = int(ctypes.CDLL(lib).openblas_get_num_threads())
            break
        except (OSError, AttributeError):
            continue
    return {"libs": sorted(libs), "openblas_threads": threads}


def fnv1a64(text):
    h = 0xcbf29ce484222325
    for byte in text.encode("utf-8"):
        h = ((h ^ byte) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return f"{h:016x}"


def import_d2l_torch(threads, seed):
    """For a PyTorch child: torch on `threads` threads (one inter-op thread), seeded, and
    d2l's seq2seq code with its Transformer: (torch, d2l, TransformerEncoder, TransformerDecoder)."""
    import torch
    sys.dont_write_bytecode = True  # no __pycache__ in tests/data
    sys.path.insert(0, TESTS_DATA)
    import d2l_seq2seq as d2l  # d2l's seq2seq code, verbatim
    from d2l_reference import TransformerDecoder, TransformerEncoder

    torch.set_num_threads(threads)
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:
        pass
    torch.manual_seed(seed)
    return torch, d2l, TransformerEncoder, TransformerDecoder


def torch_scale_child(argv):
    """d2l's Transformer at the scale workload's size, with the libtorch peer's flags and
    JSON record: d2l's load_data_nmt / train_seq2seq, then batched greedy decoding."""
    p = argparse.ArgumentParser(prog="compare_scale.py --torch-child scale")
    p.add_argument("--model", default="transformer", choices=["transformer"])
    p.add_argument("--train", required=True)
    p.add_argument("--max-pairs", type=int, default=0)
    p.add_argument("--train-subset", type=int, default=0)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--batch-size", type=int, default=128)
    p.add_argument("--num-steps", type=int, default=12)
    p.add_argument("--lr", type=float, default=0.001)
    p.add_argument("--num-hiddens", type=int, default=128)
    p.add_argument("--embed-size", type=int, default=128)  # the Transformer's embedding is num_hiddens
    p.add_argument("--ffn-num-hiddens", type=int, default=512)
    p.add_argument("--num-heads", type=int, default=4)
    p.add_argument("--num-layers", type=int, default=2)
    p.add_argument("--dropout", type=float, default=0.1)
    p.add_argument("--test-src")
    p.add_argument("--hyp")
    p.add_argument("--decode-batch", type=int, default=128)
    p.add_argument("--out")
    p.add_argument("--quiet", action="store_true")
    p.add_argument("--precision", default="fp32", choices=["fp32", "bf16"],
                   help="bf16: training under torch.autocast('cpu', dtype=torch.bfloat16); decoding stays fp32")
    a = p.parse_args(argv)

    torch, d2l, TransformerEncoder, TransformerDecoder = import_d2l_torch(a.threads, a.seed)

    t0 = time.perf_counter()
    with open(a.train, encoding="utf-8") as f:  # d2l's read_data_nmt, the first --max-pairs lines
        text = "".join(itertools.islice(f, a.max_pairs) if a.max_pairs > 0 else f)
    source, target = d2l.tokenize_nmt(d2l.preprocess_nmt(text))  # every line (num_examples=None)
    reserved = ["<pad>", "<bos>", "<eos>"]
    src_vocab = d2l.Vocab(source, min_freq=2, reserved_tokens=reserved)
    tgt_vocab = d2l.Vocab(target, min_freq=2, reserved_tokens=reserved)
    src_array, src_valid_len = d2l.build_array_nmt(source, src_vocab, a.num_steps)
    tgt_array, tgt_valid_len = d2l.build_array_nmt(target, tgt_vocab, a.num_steps)
    n_read = src_array.shape[0]
    if a.train_subset > 0:  # K evenly spaced pairs (row i*n//K), vocabularies from all
        k = min(a.train_subset, n_read)
        rows = torch.tensor([i * n_read // k for i in range(k)], dtype=torch.long)
        src_array, src_valid_len = src_array[rows], src_valid_len[rows]
        tgt_array, tgt_valid_len = tgt_array[rows], tgt_valid_len[rows]
    data_iter = d2l.load_array((src_array, src_valid_len, tgt_array, tgt_valid_len), a.batch_size)
    data_load_s = time.perf_counter() - t0

    h = a.num_hiddens
    encoder = TransformerEncoder(len(src_vocab), h, h, h, h, [h], h, a.ffn_num_hiddens, a.num_heads, a.num_layers,
                                 a.dropout)
    decoder = TransformerDecoder(len(tgt_vocab), h, h, h, h, [h], h, a.ffn_num_hiddens, a.num_heads, a.num_layers,
                                 a.dropout)
    net = d2l.EncoderDecoder(encoder, decoder)
    n_params = sum(p.numel() for p in net.parameters())
    vocab_hash = fnv1a64("\n".join(src_vocab.idx_to_token) + "\t" + "\n".join(tgt_vocab.idx_to_token))
    blas = loaded_blas()
    print(f"pytorch: {src_array.shape[0]} pairs, vocab {len(src_vocab)}/{len(tgt_vocab)} ({vocab_hash}), {n_params} "
          f"params, {torch.get_num_threads()} threads, BLAS {' '.join(blas['libs'])} "
          f"(OpenBLAS threads {blas['openblas_threads']})", file=sys.stderr)

    device = torch.device("cpu")
    start = time.perf_counter()
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=a.precision == "bf16"):
        losses = d2l.train_seq2seq(net, data_iter, a.lr, a.epochs, tgt_vocab, device, verbose=not a.quiet)
    train_wall = time.perf_counter() - start
    tokens = int(tgt_valid_len.sum()) * a.epochs

    sentences = []
    if a.test_src:
        with open(a.test_src, encoding="utf-8") as f:
            sentences = [line.rstrip("\n") for line in f]
    start = time.perf_counter()
    hyps = []
    for b in range(0, len(sentences), a.decode_batch):
        hyps += predict_batch(torch, d2l, net, sentences[b:b + a.decode_batch], src_vocab, tgt_vocab, a.num_steps)
    decode_wall = time.perf_counter() - start
    if a.hyp:
        with open(a.hyp, "w", encoding="utf-8") as f:
            f.writelines(hyp + "\n" for hyp in hyps)

    final_loss = losses[-1] if losses else 0.0
    print(f"pytorch threads {torch.get_num_threads()}: train {train_wall:.2f} s, {tokens / train_wall:.0f} tokens/s, "
          f"final loss {final_loss:.4f}; decode {len(sentences)} sentences in {decode_wall:.2f} s")
    record = {"impl": "pytorch", "model": a.model, "threads": torch.get_num_threads(), "seed": a.seed,
              "train_file": a.train, "max_pairs": a.max_pairs, "train_subset": a.train_subset,
              "n_pairs_read": int(n_read), "n_train_pairs": int(src_array.shape[0]), "src_vocab": len(src_vocab),
              "tgt_vocab": len(tgt_vocab), "vocab_hash": vocab_hash, "n_params": int(n_params), "epochs": a.epochs,
              "batch_size": a.batch_size, "num_steps": a.num_steps, "lr": a.lr, "num_hiddens": a.num_hiddens,
              "ffn_num_hiddens": a.ffn_num_hiddens, "num_heads": a.num_heads, "num_layers": a.num_layers,
              "dropout": a.dropout, "data_load_s": data_load_s, "train_wall_s": train_wall, "tokens": tokens,
              "tokens_per_epoch": tokens // max(a.epochs, 1),
              "tokens_per_s": tokens / train_wall if train_wall > 0 else 0.0,
              "final_loss": final_loss, "epoch_losses": losses, "decode_sentences": len(sentences),
              "decode_batch": a.decode_batch, "decode_wall_s": decode_wall,
              "sentences_per_s": len(sentences) / decode_wall if decode_wall > 0 else 0.0, "blas": blas,
              "torch": torch.__version__}
    if a.out:
        with open(a.out, "w") as f:
            f.write(json.dumps(record) + "\n")
    print(json.dumps(record))


def predict_batch(torch, d2l, net, sentences, src_vocab, tgt_vocab, num_steps):
    """d2l's predict_seq2seq on a batch of sentences, under no_grad: every row is fed its
    own argmax, a row stops collecting at its first <eos>, the loop stops when every row
    has (or after num_steps) -- the libtorch peer's predict_batch."""
    net.eval()
    with torch.no_grad():
        rows, lens = [], []
        for sentence in sentences:
            src_tokens = src_vocab[sentence.lower().split(' ')] + [src_vocab['<eos>']]
            lens.append(len(src_tokens))
            rows.append(d2l.truncate_pad(src_tokens, num_steps, src_vocab['<pad>']))
        enc_X = torch.tensor(rows, dtype=torch.long)
        enc_valid_len = torch.tensor(lens)
        enc_outputs = net.encoder(enc_X, enc_valid_len)
        dec_state = net.decoder.init_state(enc_outputs, enc_valid_len)
        dec_X = torch.full((len(sentences), 1), tgt_vocab['<bos>'], dtype=torch.long)
        eos = tgt_vocab['<eos>']
        outputs = [[] for _ in sentences]
        done = [False] * len(sentences)
        remaining = len(sentences)
        for _ in range(num_steps):
            if remaining == 0:
                break
            Y, dec_state = net.decoder(dec_X, dec_state)
            dec_X = Y.argmax(dim=2)
            for row, pred in enumerate(dec_X[:, 0].tolist()):
                if done[row]:
                    continue
                if pred == eos:
                    done[row] = True
                    remaining -= 1
                else:
                    outputs[row].append(pred)
    return [' '.join(tgt_vocab.to_tokens(seq)) for seq in outputs]


# ---- main ----------------------------------------------------------------------------------------


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workloads", default="d2l,scale", help="comma-separated: d2l, scale")
    parser.add_argument("--threads", default="1,2", help="comma-separated thread counts (all implementations)")
    parser.add_argument("--repeats", type=int, default=1, help="runs of each configuration; the best figures count")
    parser.add_argument("--pause", type=float, default=10.0,
                        help="seconds of rest before each run, so that no run inherits the last one's load (0: none)")
    parser.add_argument("--seed", type=int, default=1, help="seed of every run")
    parser.add_argument("--skip-torch", action="store_true", help="no PyTorch (d2l's Python code) runs")
    parser.add_argument("--skip-libtorch", action="store_true", help="no libtorch peer runs")
    parser.add_argument("--skip-heed", action="store_true", help="no heed runs")
    parser.add_argument("--json", metavar="OUT", help="write every raw record to OUT")
    parser.add_argument("--heed-micro-batches", type=int, default=2,
                        help="heed's --micro-batches at every thread count (the parts of a batch trained on "
                             "parallel threads; the same at 1 and 2 threads, so both runs compute the same bits)")
    parser.add_argument("--heed", default=os.path.join(REPO, "build", "bench", "benchmarks", "train_scale"),
                        help="heed's benchmarks/train_scale (scale workload)")
    parser.add_argument("--translate", default=os.path.join(REPO, "build", "bench", "examples", "translate"),
                        help="heed's examples/translate (d2l workload)")
    parser.add_argument("--peer-src", default=os.path.join(SHARED, "peers", "libtorch"),
                        help="the libtorch peers' sources (d2l_train.cpp, d2l_train_scale.cpp)")
    parser.add_argument("--peer-dir", default=os.environ.get("TMPDIR") or "/tmp",
                        help="where the libtorch peers are built (default $TMPDIR or /tmp)")
    parser.add_argument("--openblas-coretype", default="auto",
                        help="OPENBLAS_CORETYPE of every run ('' for OpenBLAS's own detection; auto: SkylakeX "
                             "on an AVX-512 CPU, which OpenBLAS 0.3.21 may not recognise)")
    parser.add_argument("--openblas-dir", default="/usr/lib/x86_64-linux-gnu/openblas-pthread",
                        help="put first on the peers' LD_LIBRARY_PATH ('' for none)")
    parser.add_argument("--peer-malloc", choices=["tcmalloc", "jemalloc", "glibc"], default="tcmalloc",
                        help="allocator preloaded into the peers (default tcmalloc, Debian's libtcmalloc-minimal4: "
                             "their best; see peer_malloc_path)")
    default_python = "/usr/bin/python3" if os.path.isfile("/usr/bin/python3") else sys.executable
    parser.add_argument("--python", default=default_python,
                        help="interpreter with torch for the PyTorch runs (Debian's python3-torch)")
    d2l = parser.add_argument_group("d2l workload")
    d2l.add_argument("--d2l-data", default=os.path.join(SHARED, "data", "fra-eng", "fra.txt"),
                     help="d2l's fra.txt (the libtorch peer reads fra.txt from its folder)")
    d2l.add_argument("--models", default="transformer,bahdanau", help="comma-separated: transformer, bahdanau")
    d2l.add_argument("--epochs", type=int, help="override d2l's epochs (200 / 250), for testing")
    scale = parser.add_argument_group("scale workload")
    scale.add_argument("--scale-data", default=os.path.join(SHARED, "data", "fra-eng-large", "train.txt"),
                       help="fra-eng-large/train.txt")
    scale.add_argument("--train-subset", type=int, default=2048, help="K evenly spaced training pairs; 0: all")
    scale.add_argument("--scale-epochs", type=int, default=1, help="training epochs (the real figure: 2)")
    scale.add_argument("--max-pairs", type=int, default=0, help="read only the first N lines (0: all)")
    scale.add_argument("--decode-sentences", type=int, default=1258, help="sentences each one decodes; 0: none")
    scale.add_argument("--precisions", default="fp32",
                       help="comma-separated: fp32, bf16. heed and PyTorch train in each (heed-bf16: "
                            "TrainOptions::precision; pytorch-bf16: torch.autocast('cpu', dtype=torch.bfloat16)); "
                            "the libtorch peer trains in fp32 only; decoding stays fp32")
    args = parser.parse_args()

    args.workloads = [w.strip() for w in args.workloads.split(",") if w.strip()]
    for w in args.workloads:
        if w not in ("d2l", "scale"):
            parser.error(f"--workloads: unknown workload {w!r} (d2l, scale)")
    args.models = [m.strip() for m in args.models.split(",") if m.strip()]
    for m in args.models:
        if m not in D2L_MODELS:
            parser.error(f"--models: unknown model {m!r} (transformer, bahdanau)")
    try:
        args.thread_counts = [int(t) for t in args.threads.split(",") if t.strip()]
    except ValueError:
        parser.error("--threads wants comma-separated positive integers")
    if not args.thread_counts or min(args.thread_counts) < 1 or len(set(args.thread_counts)) != len(args.thread_counts):
        parser.error("--threads wants distinct positive thread counts")
    if args.repeats < 1:
        parser.error("--repeats must be >= 1")
    if args.pause < 0:
        parser.error("--pause must be >= 0")
    if args.epochs is not None and args.epochs < 1:
        parser.error("--epochs must be >= 1")
    args.precisions = [p.strip() for p in args.precisions.split(",") if p.strip()]
    if not args.precisions or any(p not in ("fp32", "bf16") for p in args.precisions):
        parser.error("--precisions wants fp32 and/or bf16")
    if args.scale_epochs < 1 or args.train_subset < 0 or args.max_pairs < 0 or args.decode_sentences < 0:
        parser.error("--scale-epochs must be >= 1; --train-subset, --max-pairs and --decode-sentences >= 0")
    for name in ("d2l_data", "scale_data", "heed", "translate", "peer_src", "peer_dir", "python"):
        setattr(args, name, os.path.abspath(getattr(args, name)))
    return args


def main():
    if len(sys.argv) > 2 and sys.argv[1] == "--torch-child" and sys.argv[2] == "scale":
        torch_scale_child(sys.argv[3:])
        return 0
    if len(sys.argv) == 5 and sys.argv[1] == "--make-test-src":
        make_test_src_child(sys.argv[2:])
        return 0
    args = parse_args()
    impls = [i for i in IMPLS if not getattr(args, "skip_" + {"pytorch": "torch"}.get(i, i))]
    if not impls:
        raise SystemExit("nothing to run: every implementation is skipped")

    # Check and build everything first, so that a long run does not stop half-way.
    if "d2l" in args.workloads:
        if not os.path.isfile(args.d2l_data):
            raise SystemExit(f"no data at {args.d2l_data}: pass --d2l-data (d2l's fra-eng/fra.txt)")
        if "libtorch" in impls and os.path.basename(args.d2l_data) != "fra.txt":
            raise SystemExit(f"--d2l-data {args.d2l_data}: the libtorch peer reads the fra.txt of a folder")
    if "scale" in args.workloads and not os.path.isfile(args.scale_data):
        raise SystemExit(f"no data at {args.scale_data}: pass --scale-data (fra-eng-large/train.txt)")
    if "heed" in impls:
        for workload, binary in (("d2l", args.translate), ("scale", args.heed)):
            if workload in args.workloads and not os.path.isfile(binary):
                raise SystemExit(
                    f"no heed binary at {binary}: build it (cmake --preset release -B build/bench "
                    "-DHEED_BUILD_BENCHMARKS=ON -DHEED_BUILD_TESTS=OFF && cmake --build build/bench --target "
                    "train_scale translate), pass --heed / --translate, or --skip-heed")
    if "pytorch" in impls or "scale" in args.workloads:
        if not os.path.isfile(args.python):
            raise SystemExit(f"no interpreter at {args.python}: pass --python (one with torch)")
    if "libtorch" in impls:
        if "d2l" in args.workloads:
            args.d2l_train = build_peer("d2l_train", args)
        if "scale" in args.workloads:
            args.d2l_train_scale = build_peer("d2l_train_scale", args)
    if args.openblas_dir and not os.path.isdir(args.openblas_dir) and impls != ["heed"]:
        print(f"WARNING: {args.openblas_dir} does not exist: the peers run with the default libblas.so.3 "
              "(apt-get install libopenblas0-pthread)")

    if impls != ["heed"] and missing_peer_malloc(args):
        sys.exit(f"compare_scale: {missing_peer_malloc(args)}")
    print(f"implementations: {', '.join(impls)}; threads {', '.join(map(str, args.thread_counts))}; "
          f"best of {args.repeats}; {os.cpu_count()} CPUs")
    if impls != ["heed"]:
        print(f"peers: LD_LIBRARY_PATH={args.openblas_dir or '(unchanged)'}, OPENBLAS_NUM_THREADS = "
              f"OMP_NUM_THREADS = --threads, OPENBLAS_CORETYPE={openblas_coretype(args) or '(detected)'}, "
              f"LD_PRELOAD={peer_malloc_path(args) or '(glibc malloc)'}; pytorch: {args.python}")
    if "heed" in impls:
        print(f"heed: OMP_NUM_THREADS = --threads, OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY', 'passive')}")
    records = []
    tmp = tempfile.mkdtemp(prefix="compare_scale.")
    try:
        for workload in args.workloads:
            if workload == "d2l":
                d2l_workload(args, impls, args.thread_counts, tmp, records)
            else:
                scale_workload(args, impls, args.thread_counts, tmp, records)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    parent_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    print(f"\nPeak RSS is each child's ru_maxrss (os.wait4); this parent's own peak, the floor of every child's "
          f"figure, is {parent_mib:.1f} MiB.")
    if args.json:
        for r in records:
            r.pop("hyp_file", None)  # the temporary folder is gone
        with open(args.json, "w") as f:
            json.dump({"settings": {k: v for k, v in vars(args).items()}, "records": records}, f, indent=1)
        print(f"raw records: {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
