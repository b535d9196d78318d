#!/usr/bin/env bash
# The README's mpiexec command, as written there (mpiexec and translate at this build's
# paths, a shorter run's flags added), trains what one process trains with
# --micro-batches 2: the same loss and translations (the parameters are the same bits:
# tests/test_distributed.cpp), printed once, by rank 0. It runs as this user and, under
# root, also as root and as the unprivileged user nobody: the README's line works for both.
#   translate_mpi.sh MPIEXEC TRANSLATE README
set -euo pipefail
mpiexec=$1 translate=$2 readme=$3
command=$(grep -m1 '^mpiexec --allow-run-as-root -n 2 build/release/examples/translate' "$readme") ||
  { echo "FAILED: no 'mpiexec --allow-run-as-root -n 2 build/release/examples/translate' line in $readme"; exit 1; }
command=${command%%#*}  # the comment after it
read -ra words <<<"$command"
words[0]=$mpiexec
for i in "${!words[@]}"; do [ "${words[$i]}" = build/release/examples/translate ] && words[$i]=$translate; done
flags=(--epochs 20 --quiet "She's happy.")
# Timings differ; the rest must not.
strip_times() { sed -E 's/ in [0-9.]+ s:/:/; s/, [0-9]+ tokens\/s//' | grep -v "all-reduce took"; }
one=$("$translate" --micro-batches 2 "${flags[@]}" | strip_times)
check() {  # check WHO OUTPUT
  echo "$2"
  echo "$2" | grep -q "^2 processes; the gradients' all-reduce took [0-9.]* % of rank 0's time$" ||
    { echo "FAILED ($1): no all-reduce figure from rank 0"; exit 1; }
  [ "$(echo "$2" | grep -c '^trained ')" -eq 1 ] || { echo "FAILED ($1): not one report"; exit 1; }
  if [ "$(echo "$2" | strip_times)" != "$one" ]; then
    echo "FAILED ($1): one process with --micro-batches 2 printed:"
    echo "$one"
    exit 1
  fi
}
echo "README: ${words[*]}"
check "$(id -un)" "$(env -u OMPI_ALLOW_RUN_AS_ROOT -u OMPI_ALLOW_RUN_AS_ROOT_CONFIRM "${words[@]}" "${flags[@]}")"
if [ "$(id -u)" -eq 0 ]; then
  home=$(mktemp -d) && chmod 777 "$home"
  check nobody "$(cd "$home" && setpriv --reuid=nobody --regid=nogroup --clear-groups \
    env -u OMPI_ALLOW_RUN_AS_ROOT -u OMPI_ALLOW_RUN_AS_ROOT_CONFIRM HOME="$home" "${words[@]}" "${flags[@]}")"
  rm -rf "$home"
fi
echo "same as one process"
