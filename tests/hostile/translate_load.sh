#!/usr/bin/env bash
# translate --load on hostile checkpoints: each must end with exit status 1 and a
# message on stderr naming the file, never with a signal or an abort; once with the
# model read from the file's metadata, once with --model given (load_checkpoint).
#   tests/hostile/translate_load.sh TRANSLATE SCRATCH_DIR
set -u
export LC_ALL=C  # ${#json} counts bytes
translate=$1 dir=$2
mkdir -p "$dir"
failures=0 cases=0

# safetensors: the header's length as 8 little-endian bytes, then the JSON header.
write_checkpoint() {  # name json
  local n=${#2} octal=""
  for shift in 0 8 16 24 32 40 48 56; do octal+=$(printf '\\%03o' $(((n >> shift) & 255))); done
  printf "$octal" >"$dir/$1"
  printf '%s' "$2" >>"$dir/$1"
}

expect_file_error() {  # name [flags...]
  local path=$dir/$1 stderr status
  shift
  stderr=$("$translate" --load "$path" "$@" "go ." 2>&1 >/dev/null)
  status=$?
  if [ "$status" -ne 1 ] || [[ "$stderr" != *"$path"* ]]; then
    echo "FAIL ${path##*/} $*: exit status $status, stderr: ${stderr:0:300}"
    failures=$((failures + 1))
  else
    echo "ok   ${path##*/} $*: ${stderr:0:160}"
  fi
  cases=$((cases + 1))
}

depth=1000000
open=$(printf '%*s' "$depth" '' | tr ' ' '[')
close=$(printf '%*s' "$depth" '' | tr ' ' ']')
write_checkpoint deep_metadata.safetensors "{\"__metadata__\":$open$close}"
write_checkpoint deep_dtype.safetensors "{\"w\":{\"dtype\":$open$close,\"shape\":[1],\"data_offsets\":[0,4]}}"
write_checkpoint deep_shape.safetensors "{\"w\":{\"dtype\":\"F32\",\"shape\":[$open$close],\"data_offsets\":[0,4]}}"
write_checkpoint deep_offsets.safetensors "{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":$open$close}}"
write_checkpoint unclosed.safetensors "{\"__metadata__\":$open"
write_checkpoint huge_number.safetensors '{"a":1e400}'
write_checkpoint huge_offset.safetensors "{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,1e400]}}"
write_checkpoint negative_shape.safetensors "{\"w\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}"
write_checkpoint vast_shape.safetensors \
  "{\"w\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,4294967296],\"data_offsets\":[0,4]}}"
printf '\377\377\377\377\377\377\377\177{}' >"$dir/vast_header.safetensors"
rm -f "$dir/fifo.safetensors" && mkfifo "$dir/fifo.safetensors"
# Sizes in the metadata that would build a net too large to make, or are not numbers.
vocabs='"heed.model":"transformer","src_vocab":"<unk>\n","tgt_vocab":"<unk>\n"'
write_checkpoint vast_model.safetensors "{\"__metadata__\":{$vocabs,\"num_layers\":\"1000000000\"}}"
write_checkpoint nan_size.safetensors "{\"__metadata__\":{$vocabs,\"num_hiddens\":\"nan\"}}"
write_checkpoint word_size.safetensors "{\"__metadata__\":{$vocabs,\"num_heads\":\"4 heads\"}}"
# SentencePiece models (train_translator --sentencepiece) that are not base64, not a
# model, or one of two; without SentencePiece in the build, any is refused by name.
write_checkpoint spm_not_base64.safetensors "{\"__metadata__\":{$vocabs,\"heed.src_spm\":\"@@@@\",\"heed.tgt_spm\":\"QUJD\"}}"
write_checkpoint spm_garbage.safetensors "{\"__metadata__\":{$vocabs,\"heed.src_spm\":\"QUJD\",\"heed.tgt_spm\":\"QUJD\"}}"
write_checkpoint spm_one.safetensors "{\"__metadata__\":{$vocabs,\"heed.src_spm\":\"QUJD\"}}"

for name in deep_metadata deep_dtype deep_shape deep_offsets unclosed huge_number huge_offset negative_shape \
  vast_shape vast_header fifo vast_model nan_size word_size spm_not_base64 spm_garbage spm_one; do
  expect_file_error "$name.safetensors"
  expect_file_error "$name.safetensors" --model transformer
done

# Metadata that lies about the net's size: compared with the file's tensors (their shapes
# in the header) before the net is built, so that num_hiddens = 65536 in a file of a few
# bytes costs no 17 GB. Tensors here are zeros: write_tensors NAME METADATA NAME=DIMS...
write_tensors() {
  local name=$1 metadata=$2 json="" offset=0 size t d dims
  shift 2
  for t in "$@"; do
    size=4 dims=${t#*=}
    for d in ${dims//,/ }; do size=$((size * d)); done
    json+=",\"${t%%=*}\":{\"dtype\":\"F32\",\"shape\":[${t#*=}],\"data_offsets\":[$offset,$((offset + size))]}"
    offset=$((offset + size))
  done
  write_checkpoint "$name" "{\"__metadata__\":{$metadata}$json}"
  head -c "$offset" /dev/zero >>"$dir/$name"
}
words='"src_vocab":"<unk>\n<pad>\n<bos>\n<eos>\n","tgt_vocab":"<unk>\n<pad>\n<bos>\n<eos>\n"'
tiny='"num_hiddens":"4","ffn_num_hiddens":"8","num_heads":"2","num_layers":"1"'
write_tensors huge_transformer.safetensors "\"heed.model\":\"transformer\",$words,\"num_hiddens\":\"65536\",\"num_heads\":\"1\"" \
  encoder.embedding.weight=4,4
write_tensors huge_bahdanau.safetensors "\"heed.model\":\"bahdanau\",$words,\"num_hiddens\":\"65536\"" \
  encoder.embedding.weight=4,4
write_tensors wide.safetensors "\"heed.model\":\"transformer\",$words,\"num_hiddens\":\"1024\",\"num_heads\":\"1\"" \
  encoder.embedding.weight=4,4
write_tensors no_embedding.safetensors "\"heed.model\":\"transformer\",$words,$tiny" x=1
named=(encoder.embedding.weight=4,4 decoder.embedding.weight=4,4 decoder.dense.weight=4,4
  encoder.blks.block0.attention.W_k.weight=4,4 encoder.blks.block0.ffn.dense1.weight=8,4
  decoder.blks.block0.attention2.W_v.weight=4,4 decoder.blks.block0.ffn.dense2.weight=4,8)
write_tensors few_tensors.safetensors "\"heed.model\":\"transformer\",$words,$tiny" "${named[@]}"
write_tensors odd_heads.safetensors "\"heed.model\":\"transformer\",$words,$tiny,\"num_kv_heads\":\"3\"" "${named[@]}"
write_tensors no_eos.safetensors \
  '"heed.model":"transformer","src_vocab":"<unk>\n<pad>\n<bos>\n","tgt_vocab":"<unk>\n<pad>\n<bos>\n<eos>\n"' x=1
write_tensors long_steps.safetensors "\"heed.model\":\"transformer\",$words,$tiny,\"num_steps\":\"1001\"" x=1

expect_message() {  # name pattern [flags...]: exit status 1, the file and the pattern on stderr
  local path=$dir/$1 pattern=$2 stderr status
  shift 2
  stderr=$("$translate" --load "$path" "$@" "go ." 2>&1 >/dev/null)
  status=$?
  if [ "$status" -ne 1 ] || [[ "$stderr" != *"$path"* ]] || ! grep -Eq -- "$pattern" <<<"$stderr"; then
    echo "FAIL ${path##*/} $*: exit status $status, stderr: ${stderr:0:300}"
    failures=$((failures + 1))
  else
    echo "ok   ${path##*/} $*: ${stderr:0:200}"
  fi
  cases=$((cases + 1))
}
expect_message huge_transformer.safetensors "describes a transformer of [0-9]+ parameters .*more than the 2\^31"
expect_message huge_bahdanau.safetensors "describes a bahdanau of [0-9]+ parameters .*more than the 2\^31"
expect_message wide.safetensors "tensor 'encoder.embedding.weight' has shape \(4, 4\), .* has \(4, 1024\)"
expect_message no_embedding.safetensors "has no tensor 'encoder.embedding.weight'"
expect_message few_tensors.safetensors "its tensors hold 144 parameters, but the transformer its metadata describes has [0-9]+"
expect_message odd_heads.safetensors "num_kv_heads 3 does not divide num_heads 2"
expect_message no_eos.safetensors "src_vocab has no <eos> token"
expect_message long_steps.safetensors "num_steps 1001 is more than the 1000 positions"
expect_message few_tensors.safetensors "holds a transformer model, not a bahdanau one" --model bahdanau
rm -f "$dir/fifo.safetensors"
echo "$failures of $cases loads of hostile checkpoints misbehaved"
[ "$failures" -eq 0 ]
