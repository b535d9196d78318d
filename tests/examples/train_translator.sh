#!/usr/bin/env bash
# train_translator end to end on the built-in corpus: validation and checkpoints; a run
# of 4 epochs against 2 epochs, then --resume to 4 (the files must be the same bytes:
# parameters, Adam's state, generators, step); translate loading the best checkpoint of
# a model of other sizes; and the errors a user meets (each an exit status and a message
# naming the option or the file, never a signal).
# With TOKENS = sentencepiece (a build with HEED_WITH_SENTENCEPIECE), a model of subword
# tokens is trained, resumed and used by translate; with words, --sentencepiece is refused.
# Checkpoints that lie (issue 45) are refused with exit status 1 and a message naming the
# file and what is wrong: SentencePiece models swapped, from another run, removed or added
# to a checkpoint of words, and --resume metadata that is no count (0.5, 1e15) or past the
# run's bounds; a --seed past 2^64 - 1 or negative is a usage error.
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

# The held-out split is written beside the checkpoints, and translate --evaluate scores
# it as validation did (the 4th epoch's BLEU is last.safetensors'), with no warning.
[ -s "$dir/straight/valid.txt" ] && grep -q "^held out: [0-9]* pairs in $dir/straight/valid.txt" <<<"$out" ||
  fail "no held-out file or line: $out"
valid_bleu=$(sed -nE 's/^epoch 4\/4: .*validation loss [0-9.]+, BLEU ([0-9.]+).*/\1/p' <<<"$out")
evaluated=$("$translate" --load "$dir/straight/last.safetensors" --evaluate "$dir/straight/valid.txt" 2>&1) ||
  fail "translate --evaluate valid.txt: $evaluated"
grep -q "^BLEU = $valid_bleu " <<<"$evaluated" || fail "valid.txt scored otherwise than validation ($valid_bleu): $evaluated"
grep -q "warning" <<<"$evaluated" && fail "a warning for held-out data: $evaluated"
# The pairs it trained on are named as such.
evaluated=$("$translate" --load "$dir/straight/last.safetensors" --evaluate "$pairs" 2>&1)
grep -Eq "^warning: [1-5] of the 5 English sentences of $pairs are in this model's training data \(the built-in corpus\)" \
  <<<"$evaluated" || fail "no warning for trained-on sentences: $evaluated"

# --shortlist: train_translator writes the vocabulary map of its training pairs (always-kept
# line first); translate --shortlist decodes with it; a bad map is refused (status 1)
# naming the file and line.
out=$("$train" "${small[@]}" --epochs 1 --shortlist "$dir/shortlist.txt" 2>&1) || fail "--shortlist: $out"
grep -q "^shortlist: [0-9]* source tokens' target candidates and the [0-9]* most frequent target tokens in $dir/shortlist.txt" \
  <<<"$out" || fail "no shortlist line: $out"
[ "$(head -c 1 "$dir/shortlist.txt")" = $'\t' ] && [ "$(wc -l <"$dir/shortlist.txt")" -gt 10 ] ||
  fail "the shortlist: $(head -c 300 "$dir/shortlist.txt")"
evaluated=$("$translate" --load "$dir/straight/last.safetensors" --evaluate "$dir/straight/valid.txt" \
  --shortlist "$dir/shortlist.txt" 2>&1) || fail "translate --shortlist: $evaluated"
grep -q "^BLEU = " <<<"$evaluated" || fail "no BLEU with --shortlist: $evaluated"
printf 'cat chat\n' >"$dir/bad_shortlist.txt"
got=$("$translate" --load "$dir/straight/last.safetensors" --shortlist "$dir/bad_shortlist.txt" "go ." 2>&1)
[ $? -eq 1 ] && grep -q "$dir/bad_shortlist.txt: line 1: no tab" <<<"$got" || fail "a bad shortlist: ${got:0:300}"

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

# --time-budget stops after the batch that passes it, mid-epoch if so (60 µs: after the
# first update), and a resume without it goes on from that batch: the bits of a 2-epoch
# run.
"$train" "${steps[@]}" --epochs 2 --out "$dir/epochs2" >/dev/null 2>&1 || fail "the 2-epoch run without validation"
"$train" "${steps[@]}" --epochs 2 --time-budget 0.000001 --out "$dir/budget" >"$dir/budget.log" 2>&1 ||
  fail "--time-budget: $(cat "$dir/budget.log")"
grep -Eq '^epoch 1/2 \(1 of 7 batches: --time-budget\)' "$dir/budget.log" &&
  grep -q '^stopped in epoch 1 after 1 of its 7 batches: .* reached --time-budget 1e-06 min' "$dir/budget.log" ||
  fail "no mid-epoch --time-budget lines: $(cat "$dir/budget.log")"
out=$("$train" "${steps[@]}" --epochs 2 --out "$dir/budget" --resume "$dir/budget/last.safetensors" 2>&1) ||
  fail "the resumed --time-budget run: $out"
grep -q "resumed from .* after epoch 0 and 1 batches of epoch 1, step 1" <<<"$out" || fail "no resume line: $out"
cmp "$dir/epochs2/last.safetensors" "$dir/budget/last.safetensors" || fail "1 batch + resume differs from 2 epochs"

# --precision bf16: mixed-precision training (its products differ from fp32's), resumed
# to the same bytes; int8 is refused with a message.
out=$("$train" "${steps[@]}" --epochs 2 --precision bf16 --out "$dir/bf16" 2>&1) || fail "--precision bf16: $out"
cmp -s "$dir/bf16/last.safetensors" "$dir/epochs2/last.safetensors" && fail "--precision bf16 trained as fp32 did"
"$train" "${steps[@]}" --epochs 1 --precision bf16 --out "$dir/bf16r" >/dev/null 2>&1 || fail "the 1-epoch bf16 run"
out=$("$train" "${steps[@]}" --epochs 2 --precision bf16 --out "$dir/bf16r" --resume "$dir/bf16r/last.safetensors" 2>&1) ||
  fail "the resumed bf16 run: $out"
cmp "$dir/bf16/last.safetensors" "$dir/bf16r/last.safetensors" || fail "bf16: 1 epoch + resume + 1 differ from 2 epochs"
out=$("$train" "${steps[@]}" --epochs 1 --precision int8 --out "$dir/int8" 2>&1) && fail "--precision int8 trained"
grep -q "^train_translator: .*precision int8 is for decoding only" <<<"$out" ||
  fail "no refusal of int8 training: $out"

# --average-last and --ema: the epoch checkpoints of the last N epochs only, averaged.safetensors
# and ema.safetensors validated and loadable, and 2 epochs + resume + 2 the bytes of 4 epochs
# (the moving average travels in last.safetensors).
avg=(--average-last 2 --ema 0.9)
out=$("$train" "${small[@]}" "${avg[@]}" --epochs 4 --out "$dir/avg" --json "$dir/avg.json" 2>&1) ||
  fail "--average-last --ema: $out"
[ "$(cd "$dir/avg" && ls epoch-*.safetensors | tr '\n' ' ')" = "epoch-3.safetensors epoch-4.safetensors " ] ||
  fail "epoch checkpoints kept: $(ls "$dir/avg")"
grep -Eq '^epoch 4/4: .*BLEU [0-9.]+.*; EMA: validation loss [0-9.]+, BLEU [0-9.]+' <<<"$out" || fail "no EMA validation: $out"
grep -Eq "^averaged epochs 3 to 4 \(2 checkpoints\) into $dir/avg/averaged.safetensors: validation loss [0-9.]+, BLEU [0-9.]+ \(last [0-9.]+, best [0-9.]+, EMA [0-9.]+\)" \
  <<<"$out" || fail "no averaged line: $out"
grep -q '"averaged_epochs": 2' "$dir/avg.json" && grep -q '"ema_bleu": ' "$dir/avg.json" ||
  fail "no averaged or EMA figures in --json: $(cat "$dir/avg.json")"
for f in averaged ema last; do  # last.safetensors: a training checkpoint with its moving average
  got=$("$translate" --load "$dir/avg/$f.safetensors" "i'm calm ." 2>&1) || fail "translate --load $f: $got"
done
cmp "$dir/avg/last.safetensors" "$dir/straight/last.safetensors" >/dev/null &&
  fail "the moving average is not in last.safetensors"
"$train" "${small[@]}" "${avg[@]}" --epochs 2 --out "$dir/avg2" >/dev/null 2>&1 || fail "the 2-epoch --ema run"
out=$("$train" "${small[@]}" "${avg[@]}" --epochs 4 --out "$dir/avg2" --resume "$dir/avg2/last.safetensors" 2>&1) ||
  fail "the resumed --ema run: $out"
for f in last best ema averaged epoch-4; do
  cmp "$dir/avg/$f.safetensors" "$dir/avg2/$f.safetensors" || fail "2 epochs + resume + 2 differ in $f.safetensors"
done
# Training never reads the average: the parameters are those of the run without it.
python3 - "$dir/avg/best.safetensors" "$dir/straight/best.safetensors" <<'PY' || fail "--ema changed the training"
import json, struct, sys
def tensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    header.pop("__metadata__", None)
    return {k: data[v["data_offsets"][0]:v["data_offsets"][1]] for k, v in header.items()}
sys.exit(0 if tensors(sys.argv[1]) == tensors(sys.argv[2]) else 1)
PY

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
# In bf16 and int8: the weights converted, a translation scored near fp32's score.
score_of() { sed -n "s/^i'm calm \. => .* (score \(-\{0,1\}[0-9.]*\))$/\1/p" <<<"$1"; }
fp32=$(score_of "$("$translate" --load "$ckpt" --beam 2 "i'm calm ." 2>&1)")
for precision in bf16 int8; do
  out=$("$translate" --load "$ckpt" --precision $precision --beam 2 "i'm calm ." 2>&1) ||
    fail "translate --precision $precision: $out"
  grep -q "^converted [0-9]* weights to $precision" <<<"$out" || fail "no conversion to $precision: $out"
  score=$(score_of "$out")
  awk -v a="$score" -v b="$fp32" 'BEGIN { d = a - b; exit !(a != "" && b != "" && d * d <= (0.05 * b) ^ 2 + 1e-6) }' ||
    fail "$precision's score '$score' is not within 5 % of fp32's '$fp32': $out"
  # --save after --precision: a quantised checkpoint, smaller, that loads back in that
  # precision and translates with the same score.
  out=$("$translate" --load "$ckpt" --precision $precision --save "$dir/$precision.safetensors" 2>&1) ||
    fail "translate --precision $precision --save: $out"
  [ "$(stat -c %s "$dir/$precision.safetensors")" -lt "$(stat -c %s "$ckpt")" ] ||
    fail "the $precision checkpoint is not smaller than the fp32 one"
  out=$("$translate" --load "$dir/$precision.safetensors" --beam 2 "i'm calm ." 2>&1) ||
    fail "translate --load a $precision checkpoint: $out"
  grep -q "parameters, weights in $precision)" <<<"$out" || fail "not loaded in $precision: $out"
  [ "$(score_of "$out")" = "$score" ] || fail "the $precision checkpoint scores $(score_of "$out"), not $score: $out"
done
for bad in "--top-p 0" "--temperature -1" "--n-best 3" "--top-k x"; do
  # shellcheck disable=SC2086
  got=$("$translate" --load "$ckpt" $bad "go ." 2>&1)
  [ $? -eq 2 ] && grep -q "^translate: --" <<<"$got" || fail "translate $bad: ${got:0:300}"
done
out=$("$train" "${small[@]}" --epochs 1 --label-smoothing 0.1 --batch-tokens 300 --bucket 4 2>&1) ||
  fail "--label-smoothing 0.1 --batch-tokens 300: $out"
grep -Eq '^epoch 1/1: loss [0-9.]+' <<<"$out" || fail "no epoch line with --batch-tokens: $out"

# Rewrites a checkpoint's metadata: edit_metadata SRC DST CODE runs the Python CODE on
# the dict m of SRC's metadata (meta(PATH) gives another file's) and writes DST, with the
# tensors' bytes as they were.
edit_metadata() {
  python3 - "$@" <<'PYTHON'
import json, struct, sys
def read(path):
    data = open(path, 'rb').read()
    n = struct.unpack('<Q', data[:8])[0]
    return json.loads(data[8:8 + n]), data[8 + n:]
def meta(path):
    return read(path)[0].get('__metadata__', {})
src, dst, code = sys.argv[1:4]
header, tensors = read(src)
m = header.setdefault('__metadata__', {})
exec(code, {'m': m, 'meta': meta})
text = json.dumps(header).encode()
text += b' ' * (-len(text) % 8)
open(dst, 'wb').write(struct.pack('<Q', len(text)) + text + tensors)
PYTHON
}

# translate --load on a tampered checkpoint: exit status 1 and a message naming the file.
expect_load() {  # file pattern
  local got
  got=$("$translate" --load "$1" "go ." 2>&1)
  local s=$?
  if [ "$s" -ne 1 ] || ! grep -q -- "$1" <<<"$got" || ! grep -Eq -- "$2" <<<"$got"; then
    fail "translate --load ${1##*/}: exit status $s, output: ${got:0:400}"
  else
    echo "ok   translate --load ${1##*/}: $(head -c 200 <<<"$got" | tr '\n' ' ')"
  fi
}

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

  # Tampered SentencePiece models: each checked against its checksum and the vocabulary
  # beside it. A model of another run: 70 pieces.
  "$train" "${spm[@]/90/70}" --epochs 1 --out "$dir/spm70" >/dev/null 2>&1 || fail "--sentencepiece 70"
  good=$dir/spm/best.safetensors other=$dir/spm70/best.safetensors t=$dir/tampered
  mkdir -p "$t"
  grep -q '"heed.src_spm_crc32c": *"[0-9a-f]\{8\}"' "$good" || fail "no heed.src_spm_crc32c in $good"
  swap='m["heed.src_spm"], m["heed.tgt_spm"] = m["heed.tgt_spm"], m["heed.src_spm"]'
  edit_metadata "$good" "$t/swapped.safetensors" "$swap"
  expect_load "$t/swapped.safetensors" "heed.src_spm does not match its checksum heed.src_spm_crc32c"
  edit_metadata "$good" "$t/swapped_with_checksums.safetensors" \
    "$swap; m['heed.src_spm_crc32c'], m['heed.tgt_spm_crc32c'] = m['heed.tgt_spm_crc32c'], m['heed.src_spm_crc32c']"
  expect_load "$t/swapped_with_checksums.safetensors" "heed.src_spm does not match src_vocab: "
  edit_metadata "$good" "$t/other_run.safetensors" \
    "o = meta('$other'); m['heed.tgt_spm'] = o['heed.tgt_spm']; m['heed.tgt_spm_crc32c'] = o['heed.tgt_spm_crc32c']"
  expect_load "$t/other_run.safetensors" "heed.tgt_spm does not match tgt_vocab: [0-9]+ pieces, vocabulary of [0-9]+ tokens"
  edit_metadata "$good" "$t/one_removed.safetensors" "del m['heed.src_spm'], m['heed.src_spm_crc32c']"
  expect_load "$t/one_removed.safetensors" "holds one SentencePiece model of two"
  edit_metadata "$good" "$t/both_removed.safetensors" \
    "for k in ['heed.src_spm', 'heed.tgt_spm', 'heed.src_spm_crc32c', 'heed.tgt_spm_crc32c']: del m[k]"
  expect_load "$t/both_removed.safetensors" "src_vocab holds SentencePiece pieces .*no heed.src_spm"
  edit_metadata "$good" "$t/models_removed.safetensors" "del m['heed.src_spm'], m['heed.tgt_spm']"
  expect_load "$t/models_removed.safetensors" "has heed.src_spm_crc32c but no heed.src_spm"
  edit_metadata "$good" "$t/bad_checksum.safetensors" "m['heed.tgt_spm_crc32c'] = 'zz'"
  expect_load "$t/bad_checksum.safetensors" "heed.tgt_spm_crc32c is 'zz', not a CRC-32C"
  edit_metadata "$dir/straight/best.safetensors" "$t/words_plus_models.safetensors" \
    "o = meta('$good'); m.update({k: o[k] for k in o if k.startswith('heed.') and 'spm' in k})"
  expect_load "$t/words_plus_models.safetensors" "heed.src_spm does not match src_vocab: "
  # A checkpoint of the code before the checksums (none) still loads, and resumes.
  edit_metadata "$good" "$t/no_checksums.safetensors" "del m['heed.src_spm_crc32c'], m['heed.tgt_spm_crc32c']"
  out=$("$translate" --load "$t/no_checksums.safetensors" "i'm calm ." 2>&1) || fail "a checkpoint without checksums: $out"
  grep -q "^i'm calm \. => " <<<"$out" || fail "a checkpoint without checksums: $out"
  edit_metadata "$dir/spm/last.safetensors" "$t/last_no_checksums.safetensors" \
    "del m['heed.src_spm_crc32c'], m['heed.tgt_spm_crc32c']"
  out=$("$train" "${spm[@]}" --epochs 3 --resume "$t/last_no_checksums.safetensors" 2>&1) ||
    fail "resuming a checkpoint without checksums: $out"
  grep -q "resumed from .* after epoch 2, step " <<<"$out" || fail "resuming a checkpoint without checksums: $out"
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
expect 1 "long.txt: every one of its 1 training pairs is longer than --num-steps 4" --train "$dir/long.txt" --num-steps 4
expect 1 "one.txt: a valid_fraction of 0.5 leaves" --train "$dir/one.txt" --valid-fraction 0.5 --seed 3
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

# --resume metadata that strtod read as numbers, or past this run's bounds: refused with
# the file, the key and the text, before anything is written (--out stays absent).
r=$dir/resume && mkdir -p "$r"
expect_resume() {  # name python pattern [flags...]
  local name=$1 code=$2 pattern=$3
  shift 3
  edit_metadata "$dir/after2.safetensors" "$r/$name.safetensors" "$code"
  expect 1 "$r/$name.safetensors: metadata $pattern" "${small[@]}" --epochs 4 --out "$r/out_$name" \
    --resume "$r/$name.safetensors" "$@"
  [ -e "$r/out_$name" ] && fail "a refused resume ($name) created its --out"
}
expect_resume half_epoch "m['epochs_done'] = '0.5'" "'epochs_done' is '0.5', not a count"
expect_resume exponent "m['epoch_batches_done'] = '1e15'" "'epoch_batches_done' is '1e15', not a count"
expect_resume signed "m['steps_done'] = '+14'" "'steps_done' is '\\+14', not a count"
expect_resume overflow "m['steps_done'] = '99999999999999999999'" "'steps_done' is '99999999999999999999', not a count"
expect_resume past_epoch "m['epoch_batches_done'] = '7'" "'epoch_batches_done' is 7, but epoch 3 of this run has 7 batches"
expect_resume past_run "m['epochs_done'] = '9'" "'epochs_done' is 9, more than this run's --epochs 4: refused"
expect_resume steps "m['steps_done'] = '1000000'" "'steps_done' is 1000000, but 2 epochs and 0 batches take from 2 to"
expect_resume no_steps "m['steps_done'] = '1'" "'steps_done' is 1, but 2 epochs"
expect_resume nan_bleu "m['best_bleu'] = 'nan'" "'best_bleu' is 'nan', not a BLEU score"
expect_resume big_bleu "m['best_bleu'] = '1e300'" "'best_bleu' is '1e300', not a BLEU score"
expect_resume state "m['loader_generator'] = 'heed.mt19937_64 1 0 0 5'" "'loader_generator' is .*not a generator's state"
expect 1 "best.safetensors: no 'epochs_done' in its metadata: not a train_translator last.safetensors" \
  "${small[@]}" --epochs 4 --resume "$dir/straight/best.safetensors"
[ "$(md5sum <"$dir/after2.safetensors")" = "$before" ] || fail "a refused resume changed the checkpoint"

# Seeds are 64-bit: CLI11's strtoull would take 2^64 and -1 as 2^64 - 1.
expect 105 "--seed: 18446744073709551616 is more than 18446744073709551615" --seed 18446744073709551616
expect 105 "--seed: '-1' is not a decimal integer" --seed -1
expect 105 "--seed: '0x10' is not a decimal integer" --seed 0x10
expect 0 "trained 0 epochs" --seed 18446744073709551615 --epochs 0 --quiet
expect 105 "--num-steps: a Transformer reads at most 1000 positions" --num-steps 1001

[ "$failures" -eq 0 ] && echo "all passed" || { echo "$failures failed"; exit 1; }
