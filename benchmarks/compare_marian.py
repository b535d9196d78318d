#!/usr/bin/python3
"""Beam-search translation speed and peak memory of an opus-mt-en-fr-shaped MarianMT model:
heed's bench_marian against a PyTorch MarianMT written here from the equations, with the
same random weights, on the same source token ids, in one run.

    nice /usr/bin/python3 benchmarks/compare_marian.py --bench build/release/benchmarks/bench_marian \
        --sentences 512 --length 32 --threads 1,2 --repeats 3 --json marian.json

The model: Helsinki-NLP/opus-mt-en-fr's sizes (d_model 512, 6 + 6 layers, 8 heads, FFN
2048, vocabulary 59,514, SiLU, 512 positions: 74,669,178 parameters) with random weights
(torch.manual_seed(--seed); Linear weights and the shared embedding N(0, 0.02), as
transformers' init_std, biases and final_logits_bias N(0, 0.02), LayerNorms 1 + N(0, 0.1)
and N(0, 0.1), the <pad> row zero). The script writes them once into --work-dir as a
MarianMT directory (config.json and generation_config.json as a converted OPUS-MT
checkpoint carries them, model.safetensors in F32 with transformers' names, without the
positional tables, which both sides compute); bench_marian loads it with --dir
(marian_from_pretrained) and the PyTorch side reads the same file into its parameters.

The input: --sentences English sentences of --data (fra-eng-large/train.txt's first
column), evenly spaced (line i * n // N), lowercased, punctuation split off, each word
mapped to a token id deterministically, FNV-1a 64 of the word modulo (V - 3) + 2 (never
</s> 0, <unk> 1 or <pad> V - 1), </s> appended: one file of ids (--work-dir/src_ids.txt)
both sides read. No SentencePiece on either side.

The decoding (both sides): batches of --batch (32) sentences, the sources padded to the
batch's longest, beam search with --beam (4) beams, min_length = max_length = --length
(</s> forbidden until the last step and <pad> always, as MarianMT's bad_words_ids), so
every sentence decodes exactly --length steps of batch x beam rows whatever the weights:
each step the log-softmax of the logits plus the beam's running score, the best `beam` of
the beam x V candidates of each sentence kept. Tokens/s = sentences x length / seconds
(the translations' tokens; the beams compute beam x that).
  * heed: bench_marian --dir --src --length --beam --batch [--micro-batches K]
    [--precision P] (predict_seq2seq_tokens, PredictOptions::micro_batches K: at 2
    threads each batch decoded as K groups on parallel threads; --micro-batches lists
    the K tried at more than one thread, each reported, the best counted;
    --heed-precisions lists the P run, each its own row: fp32, bf16 and int8, whose
    weights are converted once, inside the timed region).
  * PyTorch (torch.no_grad, eval): transformers' MarianMTModel layout and equations
    (post-LayerNorm blocks, SiLU FFN, q/k/v/out projections with biases, q scaled by
    head_dim^-0.5, sinusoid positions sin | cos, embeddings x sqrt(d_model), lm_head tied
    to the shared embedding, + final_logits_bias) with transformers' key/value cache: the
    decoder's self-attention keys/values appended per step (torch.cat) and reordered to
    the surviving beams (index_select, as _reorder_cache); the cross-attention keys/values
    computed once per batch from the encoder output (on the batch, then repeated for the
    beams). Three settings, each reported: fp32; torch.autocast('cpu', dtype=bfloat16)
    (the log-softmax and the scores in float32); dynamic int8 quantisation
    (torch.ao.quantization.quantize_dynamic on every nn.Linear, lm_head included).
    Ratios are against fp32 (the goal's) and against the best of the three.

Timing: every measurement is a fresh process (this script with --torch-child, or
bench_marian), the thread count set by OMP_NUM_THREADS and OPENBLAS_NUM_THREADS, and for
PyTorch torch.set_num_threads(n), torch.set_num_interop_threads(1) and
openblas_set_num_threads(n) on the OpenBLAS that Debian's PyTorch (BLAS_INFO=generic)
reaches through libblas.so.3 (its kernel, openblas_get_corename, is printed); heed gets
OMP_WAIT_POLICY=passive unless set. The time is the loop over the batches alone (encoder,
decoder, beam search), not the start, the import or the load of the weights. The runs
alternate (per repeat, per thread count: PyTorch fp32, bf16, int8, heed for each K) so
that load from other processes hits every side alike; --repeats R keeps each one's best.

Memory: VmHWM of /proc/self/status, in MiB, per process (the whole process: interpreter,
libraries, weights and decoding): "peak" is the process's peak; "load" the peak before
decoding (after the imports, the load of the weights and, for int8, the quantisation);
the high-water mark is then reset (5 > /proc/self/clear_refs) and "decode" is the peak
while decoding. The goal compares the processes' peaks.

Agreement: each side writes its best hypothesis per sentence; the table counts the
sentences whose L tokens equal heed fp32's exactly (fp32 rounding differs between the
sides, and random weights give near-ties, so a few may part; bf16 and int8 part more).

Always exits 0 (the goals are reported, not enforced), unless a run fails.

Measured on 2026-12-06 on the 2-core development machine (AMD Zen 5 VM, AVX-512 with
avx512_vnni and avx512_bf16; GCC 12.2 -O3 -march=native -fopenmp; PyTorch 1.13.1 from
Debian, OpenBLAS 0.3.21 pthread, kernel Haswell), quiet, one command (882 s):

    /usr/bin/python3 benchmarks/compare_marian.py --bench build-bench/bench_marian \
        --sentences 512 --length 32 --threads 1,2 --micro-batches 1,2 --repeats 1

    thr side         mb  seconds  tokens/s    peak    load  decode GFLOP/s  x fp32    mem    agree
    ----------------------------------------------------------------------------------------------
      1 torch-fp32        127.72     128.3   957.5   634.9   957.5    55.4    1.00   1.00  512/512
      1 torch-bf16         91.47     179.1  1088.6   688.4  1088.6    77.4    1.40   1.14  420/512
      1 torch-int8         75.68     216.5  1534.7  1045.8  1534.7    93.5    1.69   1.60  299/512
      1 heed-fp32     1    44.74     366.2   464.5   302.6   464.5   158.2    2.85   0.49  512/512
      1 heed-bf16     1    29.34     558.3   310.5   296.4   310.5   241.2    4.35   0.32  473/512
      1 heed-int8     1    21.18     773.5   296.6   296.6   239.7   334.2    6.03   0.31  363/512
      1 thread: heed fp32 (micro_batches 1) 2.85x PyTorch fp32's tokens/s (goal >= 4: NOT met), peak 0.49 of fp32's (goal <= 0.5: met); 1.69x PyTorch's best (torch-int8)
      1 thread: heed bf16 (micro_batches 1) 4.35x PyTorch fp32's tokens/s (goal >= 4: met), peak 0.32 of fp32's (goal <= 0.5: met); 1.52x heed fp32; 2.58x PyTorch's best (torch-int8)
      1 thread: heed int8 (micro_batches 1) 6.03x PyTorch fp32's tokens/s (goal >= 4: met), peak 0.31 of fp32's (goal <= 0.5: met); 2.11x heed fp32; 3.57x PyTorch's best (torch-int8)
      2 torch-fp32        189.14      86.6   959.5   634.9   959.5    37.4    1.00   1.00  512/512
      2 torch-bf16         56.76     288.6  1063.2   692.3  1063.2   124.7    3.33   1.11  420/512
      2 torch-int8         74.60     219.6  1625.2  1045.5  1625.2    94.9    2.54   1.69  299/512
      2 heed-fp32     1    33.33     491.6   466.7   302.5   466.7   212.4    5.67   0.49  512/512
      2 heed-fp32     2    26.62     615.6   463.9   302.5   463.9   266.0    7.11   0.48  512/512
      2 heed-bf16     1    21.29     769.5   311.3   296.6   311.3   332.5    8.88   0.32  473/512
      2 heed-bf16     2    17.51     935.6   320.8   296.5   320.8   404.3   10.80   0.33  473/512
      2 heed-int8     1    16.88     970.8   296.7   296.7   239.4   419.5   11.21   0.31  363/512
      2 heed-int8     2    11.59    1413.2   296.5   296.5   249.4   610.6   16.31   0.31  363/512
      2 threads: heed fp32 (micro_batches 2) 7.11x PyTorch fp32's tokens/s (goal >= 4: met), peak 0.48 of fp32's (goal <= 0.5: met); 2.13x PyTorch's best (torch-bf16)
      2 threads: heed bf16 (micro_batches 2) 10.80x PyTorch fp32's tokens/s (goal >= 4: met), peak 0.33 of fp32's (goal <= 0.5: met); 1.52x heed fp32; 3.24x PyTorch's best (torch-bf16)
      2 threads: heed int8 (micro_batches 2) 16.31x PyTorch fp32's tokens/s (goal >= 4: met), peak 0.31 of fp32's (goal <= 0.5: met); 2.30x heed fp32; 4.90x PyTorch's best (torch-bf16)

  * heed int8 is 6.03x PyTorch fp32 at 1 thread (3.57x its best, int8) and 16.31x at 2
    (4.90x its best, bf16 autocast); bf16 4.35x and 10.80x. heed's own int8 is 2.11x its
    fp32 at 1 thread, bf16 1.52x.
  * Peaks: heed's bf16 and int8 peak at the fp32 load (296 MiB: the weights are read in
    fp32 and converted one tensor at a time); while decoding int8 holds 240 MiB (71 MiB of
    weights), fp32 464.
  * Agreement: heed fp32's tokens equal PyTorch fp32's on 512/512 sentences; heed bf16
    keeps them on 473, int8 on 363 (PyTorch's own bf16 420, int8 299): random weights
    give near-ties that rounding tips.
"""

import argparse
import ctypes
import json
import math
import os
import re
import struct
import subprocess
import sys
import time

try:
    import numpy as np
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
except ImportError:  # plain `python3` may be an interpreter without torch
    raise SystemExit("compare_marian.py needs PyTorch and numpy: run it with /usr/bin/python3 (Debian's python3-torch)")

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)

# Helsinki-NLP/opus-mt-en-fr's config.json sizes.
D_MODEL, LAYERS, HEADS, FFN, VOCAB, MAX_POS = 512, 6, 8, 2048, 59514, 512
EOS, UNK, PAD = 0, 1, VOCAB - 1
SPEED_GOAL, MEMORY_GOAL = 4.0, 0.5
TORCH_MODES = ("fp32", "bf16", "int8")


# ---- input and weights -------------------------------------------------------------------


def fnv1a64(text):
    h = 0xcbf29ce484222325
    for byte in text.encode("utf-8"):
        h = ((h ^ byte) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return h


def words(sentence):
    """Lowercased, punctuation split off (d2l's preprocess_nmt, roughly)."""
    text = sentence.replace("\u202f", " ").replace("\xa0", " ").lower()
    text = re.sub(r"([,.!?;:\"])", r" \1 ", text)
    return text.split()


def source_ids(path, count):
    with open(path, encoding="utf-8") as f:
        english = [line.split("\t")[0] for line in f if line.strip()]
    n = len(english)
    if count > n:
        raise SystemExit(f"--sentences {count}: {path} has only {n} lines")
    picked = [english[i * n // count] for i in range(count)]
    return [[fnv1a64(w) % (VOCAB - 3) + 2 for w in words(s)] + [EOS] for s in picked]


def config_json():
    """config.json as the converted Helsinki-NLP/opus-mt-en-fr checkpoint carries it."""
    return {
        "_name_or_path": "opus-mt-en-fr-random", "activation_dropout": 0.0, "activation_function": "swish",
        "add_bias_logits": False, "add_final_layer_norm": False, "architectures": ["MarianMTModel"],
        "attention_dropout": 0.0, "bad_words_ids": [[PAD]], "bos_token_id": 0, "classif_dropout": 0.0,
        "classifier_dropout": 0.0, "d_model": D_MODEL, "decoder_attention_heads": HEADS, "decoder_ffn_dim": FFN,
        "decoder_layerdrop": 0.0, "decoder_layers": LAYERS, "decoder_start_token_id": PAD,
        "decoder_vocab_size": VOCAB, "dropout": 0.1, "encoder_attention_heads": HEADS, "encoder_ffn_dim": FFN,
        "encoder_layerdrop": 0.0, "encoder_layers": LAYERS, "eos_token_id": EOS, "extra_pos_embeddings": VOCAB,
        "forced_eos_token_id": EOS, "init_std": 0.02, "is_encoder_decoder": True, "max_length": 512,
        "max_position_embeddings": MAX_POS, "model_type": "marian", "normalize_before": False,
        "normalize_embedding": False, "num_beams": 4, "num_hidden_layers": LAYERS, "pad_token_id": PAD,
        "scale_embedding": True, "share_encoder_decoder_embeddings": True, "static_position_embeddings": True,
        "tie_word_embeddings": True, "torch_dtype": "float32", "transformers_version": "4.46.3",
        "use_cache": True, "vocab_size": VOCAB,
    }


def generation_config_json():
    return {"bad_words_ids": [[PAD]], "bos_token_id": 0, "decoder_start_token_id": PAD, "eos_token_id": EOS,
            "forced_eos_token_id": EOS, "max_length": 512, "num_beams": 4, "pad_token_id": PAD,
            "transformers_version": "4.46.3"}


def save_safetensors(tensors, path):
    """golden_file.save_file's layout (names sorted, F32, compact header padded with
    spaces to 8 bytes, metadata {"format": "pt"}), written with numpy (75 M floats)."""
    header, offset = {"__metadata__": {"format": "pt"}}, 0
    names = sorted(tensors)
    for name in names:
        t = tensors[name]
        size = t.numel() * 4
        header[name] = {"dtype": "F32", "shape": list(t.shape), "data_offsets": [offset, offset + size]}
        offset += size
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * (-len(text) % 8)
    with open(path + ".tmp", "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        for name in names:
            f.write(tensors[name].detach().contiguous().numpy().astype("<f4", copy=False).tobytes())
    os.replace(path + ".tmp", path)


def make_model_dir(path, seed):
    stamp = os.path.join(path, "seed")
    if os.path.isfile(stamp) and open(stamp).read().strip() == str(seed):
        return
    os.makedirs(path, exist_ok=True)
    torch.manual_seed(seed)
    model = MarianMT()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("layer_norm.weight"):
                p.copy_(1 + 0.1 * torch.randn_like(p))
            elif name.endswith("layer_norm.bias"):
                p.copy_(0.1 * torch.randn_like(p))
            else:
                p.normal_(0.0, 0.02)
        model.model.shared.weight[PAD].zero_()
    state = {n: p for n, p in model.named_parameters()}  # model.shared.weight once (lm_head is tied)
    save_safetensors(state, os.path.join(path, "model.safetensors"))
    for name, content in (("config.json", config_json()), ("generation_config.json", generation_config_json())):
        with open(os.path.join(path, name), "w") as f:
            json.dump(content, f, indent=2, sort_keys=True)
    with open(stamp, "w") as f:
        f.write(f"{seed}\n")


def load_safetensors_into(model, path):
    """Reads each F32 tensor of the file straight into the parameter of the same name."""
    params = dict(model.named_parameters())
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
        base = 8 + n
        header.pop("__metadata__", None)
        missing = set(params) - set(header)
        if missing:
            raise SystemExit(f"{path}: lacks {sorted(missing)[:3]}")
        for name, entry in header.items():
            if name not in params:
                continue  # the positional tables, if any: computed
            p = params[name]
            assert entry["dtype"] == "F32" and entry["shape"] == list(p.shape), (name, entry)
            buf = p.detach().numpy().reshape(-1).view(np.uint8)
            f.seek(base + entry["data_offsets"][0])
            if f.readinto(memoryview(buf)) != buf.size:
                raise SystemExit(f"{path}: {name} truncated")


# ---- the PyTorch model -------------------------------------------------------------------


def sinusoids(n_pos, dim):
    """MarianSinusoidalPositionalEmbedding._init_weight: float64 angles, sin | cos, float32."""
    pos = torch.arange(n_pos, dtype=torch.float64)[:, None]
    j = torch.arange(dim // 2, dtype=torch.float64)[None, :]
    angle = pos / torch.pow(torch.tensor(10000.0, dtype=torch.float64), 2 * j / dim)
    return torch.cat([torch.sin(angle), torch.cos(angle)], 1).float()


class Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.q_proj, self.k_proj = nn.Linear(D_MODEL, D_MODEL), nn.Linear(D_MODEL, D_MODEL)
        self.v_proj, self.out_proj = nn.Linear(D_MODEL, D_MODEL), nn.Linear(D_MODEL, D_MODEL)

    @staticmethod
    def heads(x):  # (B, L, d) -> (B, H, L, hd)
        B, L, _ = x.shape
        return x.view(B, L, HEADS, D_MODEL // HEADS).transpose(1, 2)

    def attend(self, x, k, v, bias=None):
        """x (B, Lq, d) against keys/values (B, H, Lk, hd); bias (B, 1, 1, Lk) or None."""
        B, Lq, _ = x.shape
        q = self.heads(self.q_proj(x) * (D_MODEL // HEADS) ** -0.5)
        scores = q @ k.transpose(2, 3)
        if bias is not None:
            scores = scores + bias
        out = torch.softmax(scores.float(), -1).to(v.dtype) @ v
        return self.out_proj(out.transpose(1, 2).reshape(B, Lq, D_MODEL))


class EncoderLayer(nn.Module):
    def __init__(self):
        super().__init__()
        self.self_attn, self.self_attn_layer_norm = Attention(), nn.LayerNorm(D_MODEL)
        self.fc1, self.fc2 = nn.Linear(D_MODEL, FFN), nn.Linear(FFN, D_MODEL)
        self.final_layer_norm = nn.LayerNorm(D_MODEL)

    def forward(self, h, bias):
        a = self.self_attn
        h = self.self_attn_layer_norm(h + a.attend(h, a.heads(a.k_proj(h)), a.heads(a.v_proj(h)), bias))
        return self.final_layer_norm(h + self.fc2(F.silu(self.fc1(h))))


class DecoderLayer(nn.Module):
    def __init__(self):
        super().__init__()
        self.self_attn, self.self_attn_layer_norm = Attention(), nn.LayerNorm(D_MODEL)
        self.encoder_attn, self.encoder_attn_layer_norm = Attention(), nn.LayerNorm(D_MODEL)
        self.fc1, self.fc2 = nn.Linear(D_MODEL, FFN), nn.Linear(FFN, D_MODEL)
        self.final_layer_norm = nn.LayerNorm(D_MODEL)

    def step(self, h, cache, cross_k, cross_v, cross_bias):
        """One new position h (R, 1, d); cache [k, v] of the earlier ones (or None), extended."""
        a = self.self_attn
        k, v = a.heads(a.k_proj(h)), a.heads(a.v_proj(h))
        if cache[0] is not None:
            k, v = torch.cat([cache[0], k], 2), torch.cat([cache[1], v], 2)
        cache[0], cache[1] = k, v
        h = self.self_attn_layer_norm(h + a.attend(h, k, v))
        h = self.encoder_attn_layer_norm(h + self.encoder_attn.attend(h, cross_k, cross_v, cross_bias))
        return self.final_layer_norm(h + self.fc2(F.silu(self.fc1(h))))


class MarianMT(nn.Module):
    """transformers' MarianMTModel parameter names: model.shared, model.encoder.layers.N...,
    model.decoder.layers.N..., lm_head (tied), final_logits_bias."""

    def __init__(self):
        super().__init__()
        self.model = nn.Module()
        self.model.shared = nn.Embedding(VOCAB, D_MODEL, padding_idx=PAD)
        self.model.encoder = nn.Module()
        self.model.encoder.layers = nn.ModuleList(EncoderLayer() for _ in range(LAYERS))
        self.model.decoder = nn.Module()
        self.model.decoder.layers = nn.ModuleList(DecoderLayer() for _ in range(LAYERS))
        self.lm_head = nn.Linear(D_MODEL, VOCAB, bias=False)
        self.lm_head.weight = self.model.shared.weight
        self.final_logits_bias = nn.Parameter(torch.zeros(1, VOCAB))
        self.register_buffer("positions", sinusoids(MAX_POS, D_MODEL), persistent=False)

    def embed(self, ids, first_position):
        L = ids.shape[1]
        return self.model.shared(ids) * math.sqrt(D_MODEL) + self.positions[first_position:first_position + L]

    def translate(self, src, beam, length):
        """Beam search over a batch of sources (lists of ids, </s> last); min = max length
        `length`. Returns each sentence's best hypothesis (a list of `length` ids)."""
        B, S = len(src), max(len(s) for s in src)
        ids = torch.full((B, S), PAD, dtype=torch.int64)
        for i, s in enumerate(src):
            ids[i, :len(s)] = torch.tensor(s)
        valid = ids != PAD
        bias = torch.zeros(B, 1, 1, S).masked_fill(~valid[:, None, None, :], float("-inf"))
        h = self.embed(ids, 0)
        for layer in self.model.encoder.layers:
            h = layer(h, bias)
        # Cross-attention keys/values once, then one copy per beam (row b * beam + k).
        cross = []
        for layer in self.model.decoder.layers:
            a = layer.encoder_attn
            cross.append((a.heads(a.k_proj(h)).repeat_interleave(beam, 0),
                          a.heads(a.v_proj(h)).repeat_interleave(beam, 0)))
        cross_bias = bias.repeat_interleave(beam, 0)
        caches = [[None, None] for _ in self.model.decoder.layers]
        R = B * beam
        scores = torch.full((B, beam), -1e9)
        scores[:, 0] = 0.0
        scores = scores.view(R)
        tokens = torch.full((R, 1), PAD, dtype=torch.int64)  # the start token
        offsets = (torch.arange(B) * beam)[:, None]
        for t in range(length):
            x = self.embed(tokens[:, -1:], t)
            for layer, (ck, cv), cache in zip(self.model.decoder.layers, cross, caches):
                x = layer.step(x, cache, ck, cv, cross_bias)
            logits = self.lm_head(x[:, 0]).float() + self.final_logits_bias
            lp = torch.log_softmax(logits, -1)
            lp[:, PAD] = float("-inf")  # bad_words_ids
            lp[:, EOS] = float("-inf")  # min_length = length: no </s> in the `length` steps
            candidates = (lp + scores[:, None]).view(B, beam * VOCAB)
            top_scores, top = torch.topk(candidates, beam, 1)
            parent = (top // VOCAB + offsets).view(R)
            scores = top_scores.view(R)
            tokens = torch.cat([tokens.index_select(0, parent), (top % VOCAB).view(R, 1)], 1)
            for cache in caches:  # _reorder_cache
                cache[0], cache[1] = cache[0].index_select(0, parent), cache[1].index_select(0, parent)
        best = scores.view(B, beam).argmax(1) + offsets[:, 0]
        return tokens.index_select(0, best)[:, 1:].tolist()


# ---- one measured process ----------------------------------------------------------------


def status_mib(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024.0
    return -1.0


def reset_hwm():
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def loaded_openblas():
    """(path, corename) of the OpenBLAS mapped into this process, or (None, None)."""
    libs = set()
    with open("/proc/self/maps") as f:
        for line in f:
            slash = line.find("/")
            if slash >= 0 and ("blas" in os.path.basename(line[slash:]) or "lapack" in line[slash:]):
                libs.add(os.path.realpath(line[slash:].strip()))
    for lib in sorted(libs):
        try:
            cdll = ctypes.CDLL(lib)
            cdll.openblas_get_corename.restype = ctypes.c_char_p
            return lib, cdll, cdll.openblas_get_corename().decode()
        except (OSError, AttributeError):
            continue
    return None, None, None


def torch_child(args):
    threads = args.child_threads
    torch.set_num_threads(threads)
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:
        pass
    torch.manual_seed(0)
    # A tiny product loads the BLAS so that its thread count can be set.
    torch.ones(64, 64) @ torch.ones(64, 64)
    lib, cdll, core = loaded_openblas()
    if cdll is not None:
        cdll.openblas_set_num_threads(threads)
    load_start = time.perf_counter()
    model = MarianMT()
    load_safetensors_into(model, os.path.join(args.work_dir, "model.safetensors"))
    model.eval()
    if args.torch_child == "int8":
        model = torch.ao.quantization.quantize_dynamic(model, {nn.Linear}, dtype=torch.qint8)
    load_s = time.perf_counter() - load_start
    with open(os.path.join(args.work_dir, "src_ids.txt")) as f:
        src = [[int(t) for t in line.split()] for line in f][:args.sentences]
    # Warm-up: one tiny batch (starts the threads, loads the kernels).
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.torch_child == "bf16"):
        model.translate(src[:2], args.beam, 2)
    load_peak = status_mib("VmHWM")
    reset = reset_hwm()
    rss_before = status_mib("VmRSS")
    hypotheses = []
    start = time.perf_counter()
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.torch_child == "bf16"):
        for first in range(0, len(src), args.batch):
            hypotheses += model.translate(src[first:first + args.batch], args.beam, args.length)
    seconds = time.perf_counter() - start
    decode_peak = status_mib("VmHWM")
    if args.child_out:
        with open(args.child_out, "w") as f:
            for h in hypotheses:
                f.write(" ".join(map(str, h)) + "\n")
    tokens = sum(len(h) for h in hypotheses)
    print(json.dumps({
        "side": f"torch-{args.torch_child}", "sentences": len(src), "threads": threads, "tokens": tokens,
        "seconds": seconds, "tokens_per_s": tokens / seconds, "load_s": load_s, "load_peak_mib": load_peak,
        "rss_before_decode_mib": rss_before, "decode_peak_mib": decode_peak,
        "peak_mib": max(load_peak, decode_peak), "hwm_reset": reset, "openblas": lib, "openblas_core": core,
        "torch_threads": torch.get_num_threads()}))


# ---- the parent --------------------------------------------------------------------------


def last_json(text):
    for line in reversed(text.strip().splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    raise ValueError("no JSON line")


def child_env(threads, heed):
    env = dict(os.environ)
    env["OMP_NUM_THREADS"] = str(threads)
    env["OPENBLAS_NUM_THREADS"] = str(threads)
    if heed:
        env.setdefault("OMP_WAIT_POLICY", "passive")  # spinning idle threads steal the core
    return env


def run(cmd, env, what):
    proc = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout + proc.stderr)
        raise SystemExit(f"{what} failed with exit status {proc.returncode}: {' '.join(cmd)}")
    result = last_json(proc.stdout)
    return result


def run_torch(mode, threads, args, out):
    cmd = [sys.executable, os.path.abspath(__file__), "--torch-child", mode, "--child-threads", str(threads),
           "--work-dir", args.work_dir, "--sentences", str(args.sentences), "--length", str(args.length),
           "--beam", str(args.beam), "--batch", str(args.batch), "--child-out", out]
    return run(cmd, child_env(threads, False), f"PyTorch {mode} at {threads} threads")


def run_heed(threads, micro_batches, precision, args, out):
    cmd = [args.bench, "--dir", args.work_dir, "--src", os.path.join(args.work_dir, "src_ids.txt"),
           "--sentences", str(args.sentences), "--length", str(args.length), "--beam", str(args.beam),
           "--batch", str(args.batch), "--micro-batches", str(micro_batches), "--precision", precision, "--out", out]
    return run(cmd, child_env(threads, True),
               f"heed {precision} at {threads} threads, micro_batches {micro_batches}")


def run_flops(src, batch, beam, length):
    """Matrix-product FLOPs of the whole decode (2 per multiply-add): the encoder over
    each batch padded to its longest source, the cross-attention keys/values once per
    batch, then per step and row (batch x beam) the decoder's projections, FFN and
    attention products and the output layer. Element-wise work is left out."""
    d, f, total = D_MODEL, FFN, 0
    for first in range(0, len(src), batch):
        part = src[first:first + batch]
        B, S = len(part), max(len(s) for s in part)
        total += B * S * LAYERS * 2 * (4 * d * d + 2 * d * f + 2 * d * S)  # encoder
        total += B * S * LAYERS * 2 * 2 * d * d  # cross-attention keys and values
        for t in range(length):
            per_row = LAYERS * 2 * (4 * d * d + 2 * d * d + 2 * d * f + 2 * d * (t + 1) + 2 * d * S) + 2 * d * VOCAB
            total += B * beam * per_row
    return total


def read_ids(path):
    with open(path) as f:
        return [line.split() for line in f]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bench", default=os.path.join(REPO, "build", "release", "benchmarks", "bench_marian"),
                        help="path of heed's bench_marian")
    parser.add_argument("--data", default=os.path.join(REPO, "..", "shared", "data", "fra-eng-large", "train.txt"))
    parser.add_argument("--work-dir", default=os.path.join(REPO, "build", "compare_marian"),
                        help="the model directory, the source ids and the outputs")
    parser.add_argument("--sentences", type=int, default=512)
    parser.add_argument("--length", type=int, default=32, help="tokens decoded per sentence (min = max length)")
    parser.add_argument("--beam", type=int, default=4)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--threads", default="1,2", help="comma-separated thread counts")
    parser.add_argument("--micro-batches", default="1,2",
                        help="heed's PredictOptions::micro_batches tried at more than one thread (1 at one)")
    parser.add_argument("--torch-modes", default=",".join(TORCH_MODES), help="fp32, bf16, int8")
    parser.add_argument("--heed-precisions", default="fp32,bf16,int8", help="heed's --precision: fp32, bf16, int8")
    parser.add_argument("--repeats", type=int, default=3, help="runs of each; the best counts")
    parser.add_argument("--seed", type=int, default=1, help="the random weights' seed")
    parser.add_argument("--json", help="write every run and the table's numbers here")
    parser.add_argument("--torch-child", choices=TORCH_MODES, help=argparse.SUPPRESS)
    parser.add_argument("--child-threads", type=int, default=1, help=argparse.SUPPRESS)
    parser.add_argument("--child-out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    args.work_dir = os.path.abspath(args.work_dir)
    if args.torch_child:
        torch_child(args)
        return 0

    thread_counts = [int(t) for t in args.threads.split(",") if t.strip()]
    micro = [int(k) for k in args.micro_batches.split(",") if k.strip()]
    modes = [m.strip() for m in args.torch_modes.split(",") if m.strip()]
    for m in modes:
        if m not in TORCH_MODES:
            parser.error(f"--torch-modes: unknown {m!r}")
    precisions = [p.strip() for p in args.heed_precisions.split(",") if p.strip()]
    for p in precisions:
        if p not in TORCH_MODES:
            parser.error(f"--heed-precisions: unknown {p!r}")
    if not os.path.isfile(args.bench):
        raise SystemExit(f"no bench_marian at {args.bench}: build it (see benchmarks/bench_marian.cpp) or pass --bench")
    started = time.time()
    make_model_dir(args.work_dir, args.seed)
    src = source_ids(args.data, args.sentences)
    with open(os.path.join(args.work_dir, "src_ids.txt"), "w") as f:
        for s in src:
            f.write(" ".join(map(str, s)) + "\n")
    lengths = [len(s) for s in src]
    print(f"opus-mt-en-fr-shaped MarianMT, random weights (seed {args.seed}), "
          f"{sum(p.numel() for n, p in MarianMT().named_parameters()):,} parameters; {args.sentences} sentences of "
          f"{args.data} (source tokens with </s>: mean {sum(lengths) / len(lengths):.1f}, max {max(lengths)}); "
          f"beam {args.beam}, batches of {args.batch}, {args.length} tokens each (min = max length)")

    runs = {}  # (side, threads, micro) -> [result]
    for r in range(args.repeats):
        for threads in thread_counts:
            for mode in modes:
                out = os.path.join(args.work_dir, f"hyp_torch_{mode}_{threads}.txt")
                res = run_torch(mode, threads, args, out)
                res["out"] = out
                runs.setdefault((f"torch-{mode}", threads, 0), []).append(res)
                print(f"  repeat {r + 1}: torch {mode:<4} {threads}t {res['seconds']:8.2f} s "
                      f"{res['tokens_per_s']:8.1f} tok/s peak {res['peak_mib']:7.1f} MiB", flush=True)
            for precision in precisions:
                for k in (micro if threads > 1 else [1]):
                    out = os.path.join(args.work_dir, f"hyp_heed_{precision}_{threads}_{k}.txt")
                    res = run_heed(threads, k, precision, args, out)
                    res["out"] = out
                    runs.setdefault((f"heed-{precision}", threads, k), []).append(res)
                    print(f"  repeat {r + 1}: heed {precision} mb={k} {threads}t {res['seconds']:8.2f} s "
                          f"{res['tokens_per_s']:8.1f} tok/s peak {res['peak_mib']:7.1f} MiB", flush=True)

    def best(key):
        return max(runs[key], key=lambda x: x["tokens_per_s"]) if key in runs else None

    any_torch = next((v[0] for k, v in runs.items() if k[0].startswith("torch")), None)
    print()
    if any_torch:
        print(f"PyTorch {torch.__version__}, OpenBLAS {any_torch['openblas']} (kernel {any_torch['openblas_core']}), "
              f"openblas_set_num_threads = torch.set_num_threads = OMP_NUM_THREADS = OPENBLAS_NUM_THREADS = threads, "
              f"1 inter-op thread; heed {args.bench} (its own GEMM, OMP_WAIT_POLICY="
              f"{os.environ.get('OMP_WAIT_POLICY', 'passive')}); best of {args.repeats}, fresh process each; "
              f"peaks VmHWM in MiB")
    header = (f"{'thr':>3} {'side':<12} {'mb':>2} {'seconds':>8} {'tokens/s':>9} {'peak':>7} {'load':>7} "
              f"{'decode':>7} {'GFLOP/s':>7} {'x fp32':>7} {'mem':>6} {'agree':>8}")
    print(header)
    print("-" * len(header))
    summary = []
    flops = run_flops(src, args.batch, args.beam, args.length)
    for threads in thread_counts:
        ks = micro if threads > 1 else [1]
        heed_best = {}  # precision -> its best run over the micro-batch counts
        for p in precisions:
            keys = [(f"heed-{p}", threads, k) for k in ks if (f"heed-{p}", threads, k) in runs]
            if keys:
                heed_best[p] = max((best(k) for k in keys), key=lambda x: x["tokens_per_s"])
        reference = heed_best.get("fp32") or next(iter(heed_best.values()), None)
        reference_ids = read_ids(reference["out"]) if reference else None
        fp32 = best(("torch-fp32", threads, 0))
        rows = [(f"torch-{m}", 0) for m in modes] + [(f"heed-{p}", k) for p in precisions for k in ks]
        for side, k in rows:
            b = best((side, threads, k))
            if not b:
                continue
            ratio = f"{b['tokens_per_s'] / fp32['tokens_per_s']:7.2f}" if fp32 else f"{'':>7}"
            mem = f"{b['peak_mib'] / fp32['peak_mib']:6.2f}" if fp32 else f"{'':>6}"
            agree = ""
            if reference_ids is not None:
                ids = read_ids(b["out"])
                agree = f"{sum(a == c for a, c in zip(ids, reference_ids))}/{len(reference_ids)}"
                b["agree_with_heed_fp32"] = agree
            print(f"{threads:>3} {side:<12} {k if side.startswith('heed') else '':>2} {b['seconds']:8.2f} "
                  f"{b['tokens_per_s']:9.1f} {b['peak_mib']:7.1f} {b['load_peak_mib']:7.1f} "
                  f"{b['decode_peak_mib']:7.1f} {flops / b['seconds'] / 1e9:7.1f} {ratio} {mem} {agree:>8}")
        torch_best = max((best((f"torch-{m}", threads, 0)) for m in modes if best((f"torch-{m}", threads, 0))),
                         key=lambda x: x["tokens_per_s"], default=None)
        for p, h in heed_best.items():
            if not fp32:
                continue
            speed = h["tokens_per_s"] / fp32["tokens_per_s"]
            memory = h["peak_mib"] / fp32["peak_mib"]
            line = (f"  {threads} thread{'s' if threads > 1 else ''}: heed {p} (micro_batches {h['micro_batches']}) "
                    f"{speed:.2f}x PyTorch fp32's tokens/s (goal >= {SPEED_GOAL:g}: "
                    f"{'met' if speed >= SPEED_GOAL else 'NOT met'}), peak {memory:.2f} of fp32's (goal <= "
                    f"{MEMORY_GOAL:g}: {'met' if memory <= MEMORY_GOAL else 'NOT met'})")
            if reference and p != "fp32" and "fp32" in heed_best:
                line += f"; {h['tokens_per_s'] / reference['tokens_per_s']:.2f}x heed fp32"
            if torch_best:
                line += (f"; {h['tokens_per_s'] / torch_best['tokens_per_s']:.2f}x PyTorch's best "
                         f"({torch_best['side']})")
            summary.append({"threads": threads, "precision": p, "speed_vs_fp32": speed, "memory_vs_fp32": memory,
                            "best_torch": torch_best["side"] if torch_best else None,
                            "speed_vs_best_torch": h["tokens_per_s"] / torch_best["tokens_per_s"]
                            if torch_best else None, "heed_micro_batches": h["micro_batches"]})
            print(line)
    print(f"(GFLOP/s: the run's {flops / 1e9:.0f} GFLOP of matrix products (run_flops) / seconds; "
          f"x fp32: this row's tokens/s / PyTorch fp32's at that thread count; mem: this row's peak / PyTorch "
          f"fp32's; agree: sentences whose {args.length} tokens equal heed fp32's best run's; "
          f"total {time.time() - started:.0f} s)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"settings": {k: v for k, v in vars(args).items() if not k.startswith("child")},
                       "runs": [dict(r, key=list(k)) for k, v in runs.items() for r in v],
                       "gflop": flops / 1e9, "summary": summary}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
