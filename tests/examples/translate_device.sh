#!/usr/bin/env bash
# translate --device cuda (a build with heed::cuda: a GPU, or the emulation CI runs):
# a loaded checkpoint decodes there to the CPU's translations (greedy and beam search,
# and MarianMT's tiny model where the build reads SentencePiece), d2l's Transformer
# trains there, and what cannot run there says so.
#   translate_device.sh TRANSLATE SCRATCH_DIR CHECKPOINT [MARIAN_DIR]
set -u
translate=$1 dir=$2 checkpoint=$3 marian=${4:-}
mkdir -p "$dir"
failures=0

fail() {
  echo "FAIL $*"
  failures=$((failures + 1))
}

# The lines "source => translation" of a run on the CPU and on the device, the same.
same_translations() {  # flags...
  local cpu device
  cpu=$(timeout -k 5 300 "$translate" "$@" 2>&1) || { fail "$* on the CPU: ${cpu:0:400}"; return; }
  device=$(timeout -k 5 300 "$translate" --device cuda "$@" 2>&1) || { fail "$* on cuda: ${device:0:400}"; return; }
  if ! grep -q "^on cuda:0$" <<<"$device"; then fail "$* on cuda: no 'on cuda:0' line: ${device:0:400}"; return; fi
  if [ "$(grep ' => ' <<<"$cpu")" != "$(grep ' => ' <<<"$device")" ] || ! grep -q ' => ' <<<"$cpu"; then
    fail "$*: the CPU translated
$cpu
and the device
$device"
    return
  fi
  echo "ok   $*: $(grep -c ' => ' <<<"$device") translations as on the CPU"
}

expect_error() {  # pattern flags...
  local pattern=$1 out status
  shift
  out=$(timeout -k 5 60 "$translate" "$@" 2>&1)
  status=$?
  if [ "$status" -ne 1 ] || ! grep -Eq -- "^translate: .*$pattern" <<<"$out"; then
    fail "$*: exit status $status, output: ${out:0:400}"
  else
    echo "ok   $*: $(head -1 <<<"$out")"
  fi
}

same_translations --load "$checkpoint" "we're tired ." "i'm calm ."
same_translations --load "$checkpoint" --beam 4 --n-best 2
same_translations --load "$checkpoint" --sample --seed 7 "go ."
if [ -n "$marian" ]; then
  same_translations --marian "$marian" "The cat sat on the mat." ">>fra<< i like green tea."
fi
# Trained on the device: its loss line, then d2l's four sentences.
if out=$(timeout -k 5 300 "$translate" --device cuda --num-examples 64 --epochs 2 2>&1) &&
  grep -q "^trained 2 epochs in .*: loss" <<<"$out" && [ "$(grep -c ' => ' <<<"$out")" -eq 4 ]; then
  echo "ok   --device cuda --num-examples 64 --epochs 2: trains and translates"
else
  fail "--device cuda --num-examples 64 --epochs 2: ${out:0:600}"
fi
expect_error "precision int8 runs on the CPU only, not on cuda:0" --device cuda --load "$checkpoint" --precision int8
expect_error "cuda:7 is not available" --device cuda:7 --load "$checkpoint"

if [ "$failures" -ne 0 ]; then
  echo "$failures failed"
  exit 1
fi
echo "all passed"
