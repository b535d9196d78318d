#!/usr/bin/env bash
# translate's flags out of range, empty file names and lengths past the model's: each a
# usage error (exit status 2) naming the flag, before any training or decoding; the
# extremes still accepted run.
#   translate_flags.sh TRANSLATE SCRATCH_DIR
set -u
translate=$1 dir=$2
mkdir -p "$dir"
failures=0

fail() {
  echo "FAIL $*"
  failures=$((failures + 1))
}

expect_usage() {  # pattern flags...
  local pattern=$1 out status
  shift
  out=$(timeout -k 5 60 "$translate" "$@" 2>&1)
  status=$?
  if [ "$status" -ne 2 ] || ! grep -Eq -- "^translate: $pattern" <<<"$out" || ! grep -q "^usage: translate" <<<"$out" ||
    grep -q "epochs$" <<<"$out"; then  # the line printed before training
    fail "$*: exit status $status, output: ${out:0:400}"
  else
    echo "ok   $*: $(head -1 <<<"$out")"
  fi
}

expect_runs() {  # flags...
  local out
  out=$(timeout -k 5 120 "$translate" "$@" 2>&1) || { fail "$*: exit status $?, output: ${out:0:400}"; return; }
  echo "ok   $*: runs"
}

for flag in --data --load --save --evaluate --alignments; do
  expect_usage "$flag wants a file name, got ''" "$flag" ""
done
expect_usage "--heatmaps wants a directory, got ''" --heatmaps ""

range() { printf '%s' "$1 wants an integer in \\[$2, $3\\], got '$4'"; }
expect_usage "$(range --beam 1 1024 4611686018427387904)" --beam 4611686018427387904
expect_usage "$(range --beam 1 1024 1025)" --beam 1025
expect_usage "$(range --n-best 1 1024 1025)" --n-best 1025
expect_usage "$(range --top-k 0 1073741824 1073741825)" --top-k 1073741825
expect_usage "$(range --top-k 0 1073741824 -1)" --top-k -1
expect_usage "$(range --min-length 0 1048576 1048577)" --min-length 1048577
expect_usage "$(range --max-length 0 1048576 -1)" --max-length -1
expect_usage "$(range --no-repeat-ngram 0 1024 1025)" --no-repeat-ngram 1025
expect_usage "--precision wants fp32, bf16 or int8, got 'fp16'" --precision fp16
expect_usage "--device wants cpu, cuda or cuda:N, got 'gpu'" --device gpu
expect_usage "$(range --worst 0 1073741824 -1)" --worst -1
expect_usage "$(range --micro-batches 1 1024 0)" --micro-batches 0
expect_usage "$(range --micro-batches 1 1024 1025)" --micro-batches 1025
expect_usage "$(range --epochs 0 1073741824 1073741825)" --epochs 1073741825
expect_usage "$(range --epochs 0 1073741824 ' 5')" --epochs " 5"
expect_usage "$(range --num-examples 1 1099511627776 0)" --num-examples 0
expect_usage "$(range --num-examples 1 1099511627776 1099511627777)" --num-examples 1099511627777
expect_usage "--length-penalty wants a number in \[0, 10\], got '10.5'" --length-penalty 10.5
expect_usage "--length-penalty wants a number in \[0, 10\], got '-1'" --length-penalty -1
expect_usage "$(range --seed 0 18446744073709551615 18446744073709551616)" --seed 18446744073709551616
expect_usage "$(range --seed 0 18446744073709551615 -1)" --seed -1
expect_usage "$(range --seed 0 18446744073709551615 '\+1')" --seed +1
# Lengths past the model's, found before training (without --epochs: d2l's 200).
expect_usage "--max-length 5000 is more than the model's limit of 1000 tokens" --max-length 5000
expect_usage "--min-length 20 is more than the 10 tokens decoded at most" --min-length 20
expect_usage "--min-length 7 is more than the 6 tokens decoded at most" --max-length 6 --min-length 7

expect_runs --epochs 0 --quiet --seed 18446744073709551615 --beam 1024 --n-best 1024 --length-penalty 10
expect_runs --epochs 0 --quiet --max-length 1000 --min-length 1000
# After --load, the loaded model's limit.
"$translate" --epochs 1 --quiet --save "$dir/model.safetensors" >/dev/null 2>&1 || fail "could not train a model"
expect_usage "--max-length 1001 is more than the model's limit of 1000 tokens" --load "$dir/model.safetensors" \
  --max-length 1001
if ! out=$("$translate" --help 2>&1) || ! grep -q "^usage: translate" <<<"$out"; then fail "--help: ${out:0:200}"; fi

if [ "$failures" -ne 0 ]; then
  echo "$failures failed"
  exit 1
fi
echo "all passed"
