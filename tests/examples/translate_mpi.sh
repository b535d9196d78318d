#!/usr/bin/env bash
# translate under `mpiexec -n 2` trains what one process trains with --micro-batches 2:
# the same loss and translations (the parameters are the same bits: tests/test_distributed.cpp),
# printed once, by rank 0.
#   translate_mpi.sh MPIEXEC TRANSLATE
set -euo pipefail
mpiexec=$1 translate=$2
flags=(--epochs 20 --quiet "She's happy.")
# Timings differ; the rest must not.
strip_times() { sed -E 's/ in [0-9.]+ s:/:/; s/, [0-9]+ tokens\/s//' | grep -v "all-reduce took"; }
one=$("$translate" --micro-batches 2 "${flags[@]}" | strip_times)
two=$("$mpiexec" -n 2 --oversubscribe "$translate" "${flags[@]}")
echo "$two"
echo "$two" | grep -q "^2 processes; the gradients' all-reduce took [0-9.]* % of rank 0's time$" ||
  { echo "FAILED: no all-reduce figure from rank 0"; exit 1; }
[ "$(echo "$two" | grep -c '^trained ')" -eq 1 ] || { echo "FAILED: not one report"; exit 1; }
if [ "$(echo "$two" | strip_times)" != "$one" ]; then
  echo "FAILED: one process with --micro-batches 2 printed:"
  echo "$one"
  exit 1
fi
echo "same as one process"
