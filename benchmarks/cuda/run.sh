#!/usr/bin/env bash
# benchmarks/cuda/run.sh — on a machine with an NVIDIA GPU: builds heed's CUDA backend
# for sm_90, runs every CUDA test (each op against the CPU), then times the kernels and
# training (bench_cuda), its table printed last. Well under 5 minutes on an H100/H200.
#
#   benchmarks/cuda/run.sh [--quick]
#
# Eigen and Catch2 come from the system, or from .deps/ when present (made on a Debian
# machine by benchmarks/cuda/make_deps.sh, for GPU machines without the packages).
set -euo pipefail
cd "$(dirname "$0")/../.."
build=build/cuda-bench
extra=()
[ -d .deps ] && extra+=("-DCMAKE_PREFIX_PATH=$PWD/.deps")
if ! command -v nvcc >/dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then
  extra+=("-DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc")
fi
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DHEED_WITH_CUDA=ON -DHEED_CUDA_EMULATION=OFF \
  -DCMAKE_CUDA_ARCHITECTURES=90 -DHEED_BUILD_EXAMPLES=OFF -DHEED_BUILD_BENCHMARKS=OFF -DHEED_BUILD_HEADER_CHECK=OFF \
  -DHEED_INSTALL=OFF "${extra[@]}" >/dev/null
cmake --build "$build" --target heed_cuda_tests bench_cuda
echo "== CUDA tests"
status=0
"$build/tests/heed_cuda_tests" || status=$?
echo "== timings"
"$build/benchmarks/cuda/bench_cuda" "$@"
exit "$status"
