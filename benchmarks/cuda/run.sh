#!/usr/bin/env bash
# benchmarks/cuda/run.sh — on a machine with an NVIDIA GPU: builds heed's CUDA backend
# for sm_90, runs every CUDA test (each op against the CPU), times the kernels and
# training (bench_cuda), then heed beside PyTorch on the same GPU (compare_torch.py:
# training fp32 and bf16 autocast, attention, greedy and beam decoding), its table
# printed last and written to build/cuda-bench/peers/compare.json. About ten minutes on
# an H100/H200; HEED_CUDA_PEERS=0 leaves out the comparison with PyTorch.
#
#   benchmarks/cuda/run.sh [--quick]
#
# Eigen, Catch2 and nlohmann/json come from the system, or from .deps/ when present
# (made on a Debian machine by benchmarks/cuda/make_deps.sh, for GPU machines without
# the packages). A GPU machine's host compiler may be one heed's CI does not run: if the
# build fails with warnings as errors, it is built again with them as warnings (printed
# above), so that the tests still run; the exit status then says so (3).
set -euo pipefail
cd "$(dirname "$0")/../.."
build=build/cuda-bench
extra=()
[ -d .deps ] && extra+=("-DCMAKE_PREFIX_PATH=$PWD/.deps")
if ! command -v nvcc >/dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then
  extra+=("-DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc")
fi
export CMAKE_POLICY_VERSION_MINIMUM=3.5  # CMake 4 reads packages' configs written for 3.x
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
echo "host: $(nproc) cores, $(c++ --version | head -1), $(cmake --version | head -1), nvcc $(${CUDACXX:-nvcc} --version 2>/dev/null | grep -o 'release [0-9.]*' || /usr/local/cuda/bin/nvcc --version | grep -o 'release [0-9.]*')"
configure() {
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DHEED_WITH_CUDA=ON -DHEED_CUDA_EMULATION=OFF \
    -DCMAKE_CUDA_ARCHITECTURES=90 -DHEED_BUILD_EXAMPLES=OFF -DHEED_BUILD_BENCHMARKS=OFF -DHEED_BUILD_HEADER_CHECK=OFF \
    -DHEED_INSTALL=OFF "${extra[@]}" "$@" >/dev/null
}
build() { cmake --build "$build" --target heed_cuda_tests bench_cuda bench_cuda_peers; }
status=0
echo "== build ($(date +%T))"
configure -DHEED_WARNINGS_AS_ERRORS=ON
if ! build; then
  echo "== build failed with warnings as errors: building again with them as warnings ($(date +%T))"
  configure -DHEED_WARNINGS_AS_ERRORS=OFF
  build
  status=3
fi
echo "== CUDA tests ($(date +%T))"
timeout "${HEED_CUDA_TEST_TIMEOUT:-300}" "$build/tests/heed_cuda_tests" --durations yes || status=$?
echo "== timings ($(date +%T))"
timeout "${HEED_CUDA_BENCH_TIMEOUT:-240}" "$build/benchmarks/cuda/bench_cuda" "$@" || status=$?
if [ "${HEED_CUDA_PEERS:-1}" != 0 ]; then
  echo "== heed beside PyTorch on this GPU ($(date +%T))"
  timeout "${HEED_CUDA_PEERS_TIMEOUT:-300}" python3 benchmarks/cuda/compare_torch.py \
    "$build/benchmarks/cuda/bench_cuda_peers" "$build/peers" "$@" || status=$?
fi
echo "== done ($(date +%T)), status $status"
exit "$status"
