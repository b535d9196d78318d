#!/usr/bin/env bash
# translate under `mpiexec -n 2`, the two ranks given different arguments (Open MPI's
# `-n 1 A : -n 1 B`): a rank that fails (a missing file, a bad flag, a length past the
# model's) or was given other training flags or data must end the whole job, with its
# message, instead of leaving the other waiting in a collective forever.
#   translate_mpi_errors.sh MPIEXEC TRANSLATE PAIRS_FILE
set -u
mpiexec=$1 translate=$2 pairs=$3
common=(--epochs 1 --quiet)
failures=0

expect() {  # pattern -- rank 0's flags -- rank 1's flags
  local pattern=$1 out status
  shift 2
  local zero=() one=()
  while [ "$1" != "--" ]; do zero+=("$1") && shift; done
  shift
  one=("$@")
  out=$(timeout -k 5 60 "$mpiexec" --oversubscribe -n 1 "$translate" "${zero[@]}" : -n 1 "$translate" "${one[@]}" 2>&1)
  status=$?
  if [ "$status" -eq 0 ] || [ "$status" -eq 124 ] || [ "$status" -eq 137 ] || ! grep -Eq -- "$pattern" <<<"$out"; then
    echo "FAIL [${zero[*]}] : [${one[*]}]: exit status $status (124: hung), output:"
    echo "$out" | head -40
    failures=$((failures + 1))
  else
    echo "ok   [${zero[*]}] : [${one[*]}]: $(grep -Eo -- "$pattern" <<<"$out" | head -1)"
  fi
}

r1="heed: rank 1 of 2: translate: "
differ="translate: ranks were given different settings: "
expect "${r1}.*no_such_pairs\.txt" -- "${common[@]}" -- "${common[@]}" --data "$pairs.no_such_pairs.txt"
expect "${r1}unknown flag --bogus" -- "${common[@]}" -- "${common[@]}" --bogus
expect "${r1}--beam wants an integer in \[1, 1024\], got '0'" -- "${common[@]}" -- "${common[@]}" --beam 0
expect "${r1}--max-length 5000 is more than the model's limit of 1000" -- "${common[@]}" -- "${common[@]}" \
  --max-length 5000
expect "${differ}--help is 'not given' on rank 0 and 'given' on rank 1" -- "${common[@]}" -- --help
expect "${differ}--epochs is '2' on rank 0 and '1' on rank 1" -- --epochs 2 --quiet -- "${common[@]}"
expect "${differ}--seed is '1' on rank 0 and '2' on rank 1" -- "${common[@]}" --seed 1 -- "${common[@]}" --seed 2
expect "${differ}--micro-batches is '1' on rank 0 and '2' on rank 1" -- "${common[@]}" --micro-batches 1 -- \
  "${common[@]}" --micro-batches 2
expect "${differ}--num-examples is '600' on rank 0 and '100' on rank 1" -- "${common[@]}" -- "${common[@]}" \
  --num-examples 100
expect "${differ}--model is 'transformer' on rank 0 and 'bahdanau' on rank 1" -- "${common[@]}" -- "${common[@]}" \
  --model bahdanau
expect "${differ}--data is '[0-9]+ pairs, vocabularies [0-9]+ / [0-9]+, FNV-1a [0-9a-f]+' on rank 0 and '6 pairs, " \
  -- "${common[@]}" -- "${common[@]}" --data "$pairs"

if [ "$failures" -ne 0 ]; then
  echo "$failures failed"
  exit 1
fi
echo "all passed"
