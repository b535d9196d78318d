#!/usr/bin/env bash
# scripts/dev.sh — set-up, build and run in one command, on Debian 12.
#
#   scripts/dev.sh demo    install what is missing, build what the demo needs (about 2.5
#                          minutes the first time on 2 cores), run the demo (English→French
#                          Transformer trained on the built-in corpus, under a minute)
#   scripts/dev.sh test    install what is missing, build, run every test (release)
#   scripts/dev.sh asan    clang++ in C++20 mode, OpenBLAS products: the test suite under AddressSanitizer
#                          + UBSan, the benchmarks compiled, and every header alone compiled
#                          and linked (link_check); `test` builds and runs the suite with g++
#                          in C++17
#   scripts/dev.sh cuda    build the CUDA backend with nvcc (CUDA 12+ in /usr/local/cuda or
#                          on PATH, for sm_90) and run its tests, which skip without a GPU;
#                          `test` runs the same tests against a host emulation
#   scripts/dev.sh fuzz [S] build the libFuzzer targets (tests/fuzz, clang++) and fuzz each
#                          for S seconds (default 600), one after another; prints the execs
#   scripts/dev.sh format  check that the sources follow .clang-format
#   scripts/dev.sh bench   build and run the benchmarks
#   scripts/dev.sh compare heed and PyTorch (with OpenBLAS) side by side: the fused
#                          attention at sequence lengths 128-8192, attention and the
#                          Transformer blocks (speed and peak memory), and d2l's
#                          translation training runs when ../shared/data/fra-eng exists;
#                          then benchmarks/compare_scale.py: heed (built with OpenBLAS in
#                          build/bench), the libtorch peers and PyTorch on d2l's runs and the
#                          realistic Transformer (../shared/data/fra-eng-large, when there)
#   scripts/dev.sh deps    only install the Debian packages
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(g++ cmake ninja-build libeigen3-dev nlohmann-json3-dev catch2 libbenchmark-dev libcli11-dev
  libsentencepiece-dev libopenmpi-dev openmpi-bin)

install_deps() {
  local wanted=("${packages[@]}" "$@") missing=()
  for p in "${wanted[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  local sudo=()
  [ "$(id -u)" -eq 0 ] || sudo=(sudo)
  echo "installing: ${missing[*]}"
  "${sudo[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
}

case "${1:-}" in
  deps) install_deps clang ;;
  demo)
    install_deps
    cmake --preset release >/dev/null
    # Only what the demo needs: heed's compiled library's float half and translate, one
    # compiler per core at most (HEED_BUILD_JOBS); Ninja prints [done/all] per file.
    if [ ! -x build/release/examples/translate ]; then
      echo "first build: heed::compiled_float and translate, about 4 CPU-minutes (2.5 minutes on 2 cores); later builds take seconds"
    fi
    cmake --build --preset release --target translate
    build/release/examples/translate
    ;;
  test) install_deps && cmake --workflow --preset release ;;
  asan) install_deps clang libopenblas-dev && cmake --workflow --preset asan ;;
  cuda)
    install_deps
    if ! command -v nvcc >/dev/null && [ ! -x /usr/local/cuda/bin/nvcc ]; then
      echo "cuda: no nvcc on PATH or in /usr/local/cuda/bin: install the CUDA toolkit (12 or later)" >&2
      exit 1
    fi
    cmake --workflow --preset cuda
    cmake --build --preset cuda --target bench_cuda bench_cuda_peers  # compiled, run on a GPU by benchmarks/cuda/run.sh
    ;;
  fuzz)
    # The fuzz preset's CTests with each target fuzzing for S seconds (default 600), two
    # at a time (each on a core of its own: the same executions as one after another in
    # half the time); the scratch corpora under build/fuzz keep what each run found for
    # the next. Prints each target's execs; a finding fails the run and names its reproducer.
    install_deps clang libclang-rt-14-dev
    cmake --preset fuzz -DHEED_FUZZ_SECONDS="${2:-600}" >/dev/null
    cmake --build --preset fuzz
    log=build/fuzz/fuzz.log
    status=0
    ctest --preset fuzz --verbose >"$log" 2>&1 || status=1
    grep -E 'Test +#[0-9]+: fuzz_|number_of_executed_units|average_exec_per_sec|Test artifact written|ERROR:|runtime error' "$log" |
      sed 's/^[0-9]*: //'
    grep -E 'tests passed|tests failed' "$log"
    exit "$status"
    ;;
  format)
    install_deps clang-format
    git ls-files '*.hpp' '*.cpp' | xargs clang-format --dry-run --Werror
    ;;
  bench)
    install_deps
    cmake --preset release -DHEED_BUILD_BENCHMARKS=ON >/dev/null
    cmake --build --preset release
    for b in build/release/benchmarks/bench_*; do "$b"; done
    ;;
  compare)
    # OpenBLAS: Debian's python3-torch calls libblas.so.3, the netlib reference BLAS
    # (a few GFLOP/s) unless an optimised alternative is installed.
    install_deps python3-torch libopenblas0-openmp
    cmake --preset release -DHEED_BUILD_BENCHMARKS=ON >/dev/null
    cmake --build --preset release --target bench_attention bench_transformer bench_fused_attention
    /usr/bin/python3 benchmarks/compare_fused_attention.py --bench build/release/benchmarks/bench_fused_attention \
      --transformer-bench build/release/benchmarks/bench_transformer --threads "$(nproc)"
    for threads in 1 2; do
      /usr/bin/python3 benchmarks/compare_attention.py --bench build/release/benchmarks/bench_attention --threads "$threads"
    done
    /usr/bin/python3 benchmarks/compare_transformer.py --bench build/release/benchmarks/bench_transformer --threads 1,2
    if [ -f ../shared/data/fra-eng-large/train.txt ]; then
      # MarianMT at opus-mt-en-fr's size (random weights), beam 4, batches of 32
      cmake --build --preset release --target bench_marian
      /usr/bin/python3 benchmarks/compare_marian.py --bench build/release/benchmarks/bench_marian --threads 1,2
    fi
    if [ -f ../shared/data/fra-eng/fra.txt ]; then
      cmake --build --preset release --target translate
      /usr/bin/python3 benchmarks/compare_seq2seq.py --translate build/release/examples/translate \
        --data ../shared/data/fra-eng/fra.txt --threads 1,2
    fi
    if [ -f ../shared/data/fra-eng-large/train.txt ] && [ -d ../shared/peers/libtorch ]; then
      install_deps libtorch-dev libopenblas-dev libopenblas0-pthread libtcmalloc-minimal4
      cmake --preset release -B build/bench -DHEED_BUILD_BENCHMARKS=ON -DHEED_BUILD_TESTS=OFF \
        -DHEED_WITH_OPENBLAS=ON >/dev/null
      cmake --build build/bench --target train_scale translate bench_gemm_shapes
      # OpenBLAS 0.3.21 runs its AVX2 kernels on AVX-512 CPUs it does not know (Zen 4)
      if grep -q ' avx512f' /proc/cpuinfo; then export OPENBLAS_CORETYPE=SkylakeX; fi
      OMP_NUM_THREADS=1 build/bench/benchmarks/bench_gemm_shapes --benchmark_min_time=0.2
      /usr/bin/python3 benchmarks/compare_scale.py --threads 1,2
    fi
    ;;
  *)
    sed -n '2,/^set -euo/{/^set -euo/!p}' "$0"
    exit 2
    ;;
esac
