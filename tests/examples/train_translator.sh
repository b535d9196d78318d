#!/usr/bin/env bash
# train_translator end to end on the built-in corpus: validation and checkpoints; a run
# of 4 epochs against 2 epochs, then --resume to 4 (the files must be the same bytes:
# parameters, Adam's state, generators, step); translate loading the best checkpoint of
# a model of other sizes; and the errors a user meets (each an exit status and a message
# naming the option or the file, never a signal).
# With TOKENS = sentencepiece (a build with HEED_WITH_SENTENCEPIECE), a model of subword
# tokens is trained, resumed and used by translate; with words, --sentencepiece is refused.
#   tests/examples/train_translator.sh TRAIN_TRANSLATOR TRANSLATE SCRATCH_DIR TOKENS PAIRS_FILE
set -u
train=$1 translate=$2 dir=$3 tokens=$4 pairs=$5
rm -rf "$dir" && mkdir -p "$dir"
failures=0
fail() { echo "FAIL $*"; failures=$((failures + 1)); }

# Smaller than d2l's model, so that the whole script takes seconds; dropout and two
# micro-batches on, so that the generators matter.
small=(--num-hiddens 16 --ffn-num-hiddens 32 --num-heads 2 --valid-fraction 0.1 --micro-batches 2 --quiet)

out=$("$train" "${small[@]}" --epochs 4 --out "$dir/straight" 2>&1) || fail "the 4-epoch run: $out"
echo "$out"
grep -Eq '^epoch 4/4: loss [0-9.]+, .*validation loss [0-9.]+, BLEU [0-9.]+' <<<"$out" || fail "no validation line"
for f in last best; do [ -f "$dir/straight/$f.safetensors" ] || fail "no $f.safetensors"; done

"$train" "${small[@]}" --epochs 2 --out "$dir/resumed" >/dev/null 2>&1 || fail "the 2-epoch run"
cp "$dir/resumed/last.safetensors" "$dir/after2.safetensors"
out=$("$train" "${small[@]}" --epochs 4 --out "$dir/resumed" --resume "$dir/after2.safetensors" 2>&1) ||
  fail "the resumed run: $out"
grep -q "resumed from .* after epoch 2, step " <<<"$out" || fail "no resume line: $out"
cmp "$dir/straight/last.safetensors" "$dir/resumed/last.safetensors" ||
  fail "2 epochs + resume + 2 differ from 4 epochs"
cmp "$dir/straight/best.safetensors" "$dir/resumed/best.safetensors" || fail "the best checkpoints differ"

# --max-steps stops in mid-epoch; a resume with more steps goes on from that batch: 10
# steps straight (an epoch of 7 batches and 3 more) against 5, then resumed to 10. No
# validation: the run stopped at 5 would validate once more, and keep another best BLEU.
steps=("${small[@]/0.1/0}")
"$train" "${steps[@]}" --epochs 100 --max-steps 10 --out "$dir/steps10" >"$dir/steps10.log" 2>&1 ||
  fail "--max-steps 10: $(cat "$dir/steps10.log")"
grep -Eq '^epoch 2/100 \(3 of 7 batches: --max-steps 10\)' "$dir/steps10.log" ||
  fail "no mid-epoch line: $(cat "$dir/steps10.log")"
"$train" "${steps[@]}" --epochs 100 --max-steps 5 --out "$dir/steps5" >/dev/null 2>&1 || fail "--max-steps 5"
out=$("$train" "${steps[@]}" --epochs 100 --max-steps 10 --out "$dir/steps5" --resume "$dir/steps5/last.safetensors" 2>&1) ||
  fail "the resumed --max-steps run: $out"
grep -q "resumed from .* after epoch 0 and 5 batches of epoch 1, step 5" <<<"$out" || fail "no mid-epoch resume line: $out"
cmp "$dir/steps10/last.safetensors" "$dir/steps5/last.safetensors" || fail "5 steps + resume + 5 differ from 10 steps"

# translate reads the sizes from the checkpoint, and loads a training checkpoint too.
for f in best last; do
  out=$("$translate" --load "$dir/straight/$f.safetensors" "i'm calm ." 2>&1) || fail "translate --load $f: $out"
  grep -q "^loaded transformer from " <<<"$out" && grep -q "^i'm calm \. => " <<<"$out" ||
    fail "translate --load $f: $out"
done

# Decoding flags: n-best lists, sampling (the same --seed, the same samples), constraints.
ckpt="$dir/straight/best.safetensors"
sampled=$("$translate" --load "$ckpt" --sample --temperature 1.5 --top-p 0.9 --beam 3 --n-best 3 --seed 5 \
  "i'm calm ." 2>&1) || fail "translate --sample: $sampled"
grep -Eq '^  3\. .* \(score -?[0-9.]+, log P -?[0-9.]+\)$' <<<"$sampled" || fail "no third sample: $sampled"
again=$("$translate" --load "$ckpt" --sample --temperature 1.5 --top-p 0.9 --beam 3 --n-best 3 --seed 5 \
  "i'm calm ." 2>&1)
[ "$sampled" = "$again" ] || fail "the same --seed sampled differently"
out=$("$translate" --load "$ckpt" --beam 4 --n-best 2 --min-length 3 --max-length 6 --no-repeat-ngram 1 \
  "i'm calm ." 2>&1) || fail "translate with constraints: $out"
grep -Eq '^  2\. ' <<<"$out" || fail "no second hypothesis: $out"
for bad in "--top-p 0" "--temperature -1" "--n-best 3" "--top-k x"; do
  # shellcheck disable=SC2086
  got=$("$translate" --load "$ckpt" $bad "go ." 2>&1)
  [ $? -eq 2 ] && grep -q "^translate: --" <<<"$got" || fail "translate $bad: ${got:0:300}"
done
out=$("$train" "${small[@]}" --epochs 1 --label-smoothing 0.1 --batch-tokens 300 --bucket 4 2>&1) ||
  fail "--label-smoothing 0.1 --batch-tokens 300: $out"
grep -Eq '^epoch 1/1: loss [0-9.]+' <<<"$out" || fail "no epoch line with --batch-tokens: $out"

expect() {  # status pattern flags...
  local status=$1 pattern=$2 got
  shift 2
  got=$("$train" "$@" 2>&1)
  local s=$?
  if [ "$s" -ne "$status" ] || ! grep -Eq -- "$pattern" <<<"$got"; then
    fail "$*: exit status $s, output: ${got:0:400}"
  else
    echo "ok   $*: $(head -c 200 <<<"$got" | tr '\n' ' ')"
  fi
}

# Subword tokens: SentencePiece models trained on the training pairs, kept in the
# checkpoints; translate reads them back and prints words, not pieces.
if [ "$tokens" = sentencepiece ]; then
  spm=(--num-hiddens 16 --ffn-num-hiddens 32 --num-heads 2 --valid-fraction 0.1 --quiet --sentencepiece 90 --num-steps 16)
  out=$("$train" "${spm[@]}" --epochs 2 --out "$dir/spm" 2>&1) || fail "--sentencepiece 90: $out"
  grep -Eq '^epoch 2/2: loss [0-9.]+, .*validation loss [0-9.]+, BLEU [0-9.]+' <<<"$out" ||
    fail "--sentencepiece 90: no validation line: $out"
  grep -Eq 'vocabularies [0-9]+ / [0-9]+' <<<"$out" || fail "--sentencepiece 90: no vocabulary sizes: $out"
  out=$("$translate" --load "$dir/spm/best.safetensors" "i'm calm ." 2>&1) || fail "translate a subword model: $out"
  grep -q "^i'm calm \. => " <<<"$out" || fail "translate a subword model: $out"
  grep -q $'\xe2\x96\x81' <<<"$out" && fail "translate printed SentencePiece's word marks: $out"
  out=$("$translate" --load "$dir/spm/best.safetensors" --evaluate "$pairs" 2>&1) || fail "--evaluate a subword model: $out"
  grep -q "^BLEU = " <<<"$out" || fail "--evaluate a subword model: $out"
  expect 1 "heed.src_spm: [0-9]+ base64 characters in the checkpoint, [0-9]+ base64 characters here" \
    "${spm[@]/90/70}" --epochs 3 --resume "$dir/spm/last.safetensors"
else
  expect 1 "--sentencepiece: this build has no SentencePiece" --sentencepiece 90
fi
expect 1 "^train_translator: read_data_nmt: .*no_such_file.txt" --train "$dir/no_such_file.txt"
printf 'go .\tva !\n' >"$dir/one.txt" && : >"$dir/empty.txt"
printf 'hello there\n' >"$dir/no_tab.txt"
printf 'caf\xe9\tcaf\xc3\xa9\n' >"$dir/latin1.txt"
expect 1 "empty.txt: holds no sentence pairs" --train "$dir/empty.txt"
expect 1 "no_tab.txt:1: no tab between the English and the French sentence" --train "$dir/no_tab.txt"
expect 1 "latin1.txt:1: invalid UTF-8" --train "$dir/latin1.txt"
printf 'a b c d e f\tg h i j k l\n' >"$dir/long.txt"
expect 1 "long.txt: every one of its 1 pairs is longer than --num-steps 4" --train "$dir/long.txt" --num-steps 4
expect 1 "one.txt: --valid-fraction 0.5 leaves" --train "$dir/one.txt" --valid-fraction 0.5 --seed 3
expect 105 "--batch-size: Value 0 not in range" --batch-size 0
expect 105 "--dropout: Value 1.5 not in range" --dropout 1.5
expect 105 "--schedule: .*not in" --schedule linear
expect 105 "--label-smoothing: Value 1.5 not in range" --label-smoothing 1.5
expect 105 "--batch-tokens: Value -1 not in range" --batch-tokens -1
expect 1 "another model or data than this command line's: .*num_hiddens: '16' in the checkpoint, '32' here" \
  --valid-fraction 0.1 --micro-batches 2 --quiet --epochs 5 --resume "$dir/after2.safetensors"
before=$(md5sum <"$dir/after2.safetensors")
expect 1 "src_vocab: [0-9]+ tokens in the checkpoint, [0-9]+ tokens here \(built from the training data\)" "${small[@]}" --num-examples 300 --epochs 5 \
  --resume "$dir/after2.safetensors"
[ "$(md5sum <"$dir/after2.safetensors")" = "$before" ] || fail "a refused resume changed the checkpoint"

[ "$failures" -eq 0 ] && echo "all passed" || { echo "$failures failed"; exit 1; }
