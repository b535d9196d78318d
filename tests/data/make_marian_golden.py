#!/usr/bin/env python3
"""A tiny HuggingFace MarianMT (OPUS-MT) model directory and golden values for heed's
Marian loader, computed by a float64 PyTorch implementation written here from the
equations of transformers' MarianMTModel (transformers itself is not used and need not
be installed; tests/data/check_marian_transformers.py compares these files with
transformers on a machine that has it).

Usage (python3 with torch and sentencepiece; on Debian: apt-get install python3-torch
python3-sentencepiece):

    /usr/bin/python3 tests/data/make_marian_golden.py

Writes:

  tests/data/marian_tiny/            a MarianMTModel directory as transformers' save_pretrained
                                     (plus Helsinki-NLP's tokenizer files) lays it out:
      config.json                    a complete MarianConfig (model_type "marian", d_model 16,
                                     2 + 2 layers, 2 heads, FFN 32, "swish", vocab_size V, ...)
      generation_config.json         bad_words_ids [[V-1]], decoder_start_token_id V-1,
                                     eos_token_id 0, forced_eos_token_id 0, max_length 20,
                                     num_beams 4, pad_token_id V-1
      model.safetensors              F32, transformers' parameter names, metadata
                                     {"format": "pt"}; lm_head.weight an equal copy of
                                     model.shared.weight; final_logits_bias (1, V), nonzero;
                                     the two sinusoidal embed_positions tables (64 x 16) as
                                     float32 values (as older save_pretrained wrote them)
      source.spm, target.spm         SentencePiece unigram models (vocab 40 each) trained here
                                     on the English and French sentences below
      vocab.json                     the joint vocabulary: </s> 0, <unk> 1, >>fra<< 2, the
                                     source pieces, then the target's new pieces (each in its
                                     model's id order, control pieces skipped), less one
                                     source piece (LEFT_OUT, which so becomes <unk>), <pad> V-1
      tokenizer_config.json          MarianTokenizer, en -> fr, separate_vocabs false
  tests/data/marian_tiny_f16/        the same model with every tensor F16, without the two
                                     embed_positions tables and without lm_head.weight
                                     (only model.shared.weight; transformers ties them),
                                     config "torch_dtype": "float16"; same tokenizer files
  tests/data/marian_tiny_sentences.txt   the English test sentences, one a line
  tests/data/marian_golden.txt       golden values (tests/data/golden_file.py's format):

    src_ids        int64 (B, S)      the test sentences as MarianTokenizer(sentences,
                                     padding=True) gives them: pieces of source.spm mapped
                                     through vocab.json (a leading ">>xx<<" code kept as one
                                     token), </s> (0) appended, right-padded with <pad> (V-1)
    src_lens       int64 (B)         tokens per sentence, </s> included
    positions      float64 (64, 16)  the sinusoidal table both embed_positions hold (float32
                                     values, see below)
    encoder_output float64 (B, S, d) the encoder's last hidden state, padding keys masked;
                                     padded positions included as computed
    tgt_ids        int64 (B, T)      teacher-forcing decoder input: the start token (V-1),
                                     then the reference French translation's ids and </s>,
                                     right-padded with <pad>
    logits         float64 (B, T, V) the decoder's logits over tgt_ids (causal self-attention,
                                     no decoder attention mask, as MarianMTModel.forward with
                                     decoder_input_ids and no decoder_attention_mask)
    greedy         int64 (B, 20)     greedy decoding (generate with num_beams=1): the tokens
                                     generated after the start token, </s> included, then -1
    greedy_scores  float64 (B)       the sum over greedy's tokens of the processed log
                                     probability (log_softmax of the logits, 0 for a forced
                                     </s>): the beam search's running score for one beam
    beam4          int64 (B, 20)     beam search, num_beams 4, length_penalty 1.0,
                                     early_stopping false, likewise
    beam4_scores   float64 (B)       its sequences_scores: sum_logprobs / generated_len

The model (MarianMTModel, post-LayerNorm; modeling_marian.py):

    x = shared[ids] * sqrt(d_model) + positions[0..L-1]      (scale_embedding true; no
                                     layernorm_embedding, no final encoder/decoder LayerNorm)
    encoder layer: h = LN(h + SelfAttn(h, key padding mask)); h = LN(h + fc2(silu(fc1(h))))
    decoder layer: h = LN(h + CausalSelfAttn(h)); h = LN(h + CrossAttn(h, enc, key padding
                   mask)); h = LN(h + fc2(silu(fc1(h))))
    attention:     q, k, v, out projections with biases, 2 heads of 8, scores scaled by
                   head_dim**-0.5, softmax over the unmasked keys
    logits = h @ shared^T + final_logits_bias                 LayerNorm eps 1e-5

    positions[p, j] = sin(p / 10000**(2j/d)) for j < d/2, cos(p / 10000**(2(j-d/2)/d)) for
    j >= d/2: MarianSinusoidalPositionalEmbedding._init_weight computes
    pos / 10000**(2*(j//2)/dim) in numpy float64, puts sin of the even columns in [0, d/2)
    and cos of the odd columns in [d/2, d), and stores them through torch.FloatTensor, i.e.
    rounded to float32. The golden values use those float32 values (they are what
    transformers computes with, even after .double(), and what model.safetensors holds);
    a table computed in double differs by up to ~3e-8.

Facts checked against huggingface/transformers (main, 2025; src/transformers/models/marian/):
  * modeling_marian.py: MarianSinusoidalPositionalEmbedding._init_weight (above);
    MarianAttention (q/k/v/out_proj with bias, scaling head_dim**-0.5, heads split);
    MarianEncoderLayer / MarianDecoderLayer (post-LN order above; activation
    ACT2FN["swish"] = SiLU); MarianEncoder.forward (embed_tokens(ids) * embed_scale +
    embed_positions, dropout, no embedding LayerNorm); MarianDecoder likewise with
    causal mask; MarianMTModel: lm_logits = lm_head(h) + final_logits_bias, lm_head tied
    to the shared embedding (_tied_weights_keys), final_logits_bias and embed_positions in
    _keys_to_ignore_on_load_missing (so the F16 directory without them loads),
    embed_positions in _keys_to_ignore_on_save.
  * configuration_marian.py: MarianConfig's fields (vocab_size, decoder_vocab_size,
    max_position_embeddings, encoder_/decoder_ layers, ffn_dim, attention_heads,
    layerdrop, use_cache, is_encoder_decoder, activation_function, d_model, dropout,
    attention_dropout, activation_dropout, init_std, decoder_start_token_id,
    scale_embedding, pad_token_id, eos_token_id, forced_eos_token_id,
    share_encoder_decoder_embeddings).
  * tokenization_marian.py: _tokenize strips a leading ">>xx<<" code and keeps it as one
    token, encodes the rest with the source spm (spm.encode(text, out_type=str));
    build_inputs_with_special_tokens appends </s>; unknown pieces map to <unk>
    (transformers <= 4.5x: self.current_encoder.get(token, unk id)). NOTE: the newest
    main (2025) falls back to current_spm.piece_to_id(token) for a piece that vocab.json
    lacks, which gives the piece's raw SentencePiece id instead of <unk>; the golden
    src_ids follow the documented behaviour (<unk>, id 1), and check_marian_transformers.py
    reports that difference separately.
  * Generation, transformers v4.46 (src/transformers/generation/utils.py _sample /
    _beam_search, generation/beam_search.py BeamSearchScorer and BeamHypotheses,
    generation/logits_process.py), after PR #25294 (v4.32) removed Marian's
    adjust_logits_during_generation hack (pad logit set to -inf *before* log_softmax);
    the pad token is excluded only by NoBadWordsLogitsProcessor (bad_words_ids [[V-1]]),
    which sets its *log probability* to -inf after log_softmax, without renormalising
    (renormalize_logits is false in generation_config.json):
      - step scores: log_softmax(logits of the last position), then the processors:
        bad words -> -inf; ForcedEOSTokenLogitsProcessor: when the sequence (start token
        included) has max_length - 1 tokens, every score becomes -inf but </s>'s, 0;
      - greedy: argmax of the processed scores; stop after </s> or at max_length tokens
        (start token included), so at most 19 generated tokens, the 19th a forced </s>;
      - beam search: running beam scores start at 0 for beam 0 and -1e9 for the others;
        candidates = processed scores + beam score, flattened over (num_beams, V), the top
        2 * num_beams taken (sorted); walking them in rank order, a </s> candidate of rank
        < num_beams is added to the finished hypotheses with
        score = sum_logprobs / generated_len ** length_penalty,
        generated_len = cur_len - decoder_prompt_len, where cur_len = input_ids.shape[-1]
        + 1 and decoder_prompt_len = 1 (the start token), i.e. the number of generated
        tokens including the </s> (v4.3x before generated_len existed divided by
        hyp.shape[-1] = the same number); a </s> candidate of rank >= num_beams is
        skipped; other candidates fill the next num_beams beams. BeamHypotheses.add keeps
        the num_beams best (add if fewer than num_beams or score > worst_score).
        After each step the sentence is done if it has num_beams finished hypotheses and
        (early_stopping false) worst_score >= best_candidate_sum / (cur_len -
        decoder_prompt_len) ** length_penalty, best_candidate_sum the largest of the
        2 * num_beams candidate scores of that step. At max_length the open beams of an
        unfinished sentence are added too (generated_len = their length - 1); the best
        hypothesis (max score; the later-added of equal ones) is returned, </s> appended.
      Note: transformers >= 4.45 casts each step's logits to float32 before log_softmax,
      even for a float64 model, so its scores agree with these to ~1e-6 only.

Weights: torch.manual_seed(SEED), every value a nonzero multiple of 1/64 with |x| <= 1
(exact in F32, F16 and BF16): Linear weights randn / sqrt(fan_in), Linear biases
0.25 * randn, LayerNorm weights min(1, 1 + 0.1 * randn), LayerNorm biases 0.1 * randn,
shared SHARED_SCALE (0.2) * randn with the <pad> row zero, final_logits_bias 0.5 * randn
but its </s> entry EOS_BIAS (0.875). SEED 7 and those two values were picked by trying
seeds 0-15: a random model of this size repeats one token until </s>; with these, greedy
and beam search stop after 6-18 tokens, differ for 4 of the 5 sentences, and one greedy
and two beam outputs run to max_length (a forced </s>).
Deterministic: one thread, fixed seeds, sentencepiece trained on one thread without
sampling (checked: training twice gives the same bytes).
"""

import io
import json
import math
import os
import shutil
import struct
import sys

import torch
import torch.nn.functional as F

sys.dont_write_bytecode = True  # leave no __pycache__ in tests/data
import sentencepiece as spm  # noqa: E402

from golden_file import GoldenFile, save_file  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = "tests/data/make_marian_golden.py"
SEED = 7
SHARED_SCALE = 0.2  # shared ~ SHARED_SCALE * randn
EOS_BIAS = 0.875  # final_logits_bias[</s>], if not random

D_MODEL, LAYERS, HEADS, FFN, MAX_POS = 16, 2, 2, 32, 64
MAX_LENGTH, NUM_BEAMS = 20, 4
EOS, UNK = 0, 1
LANG_CODE = ">>fra<<"
STEP = 1 / 64

# ---- the text --------------------------------------------------------------------------

ENGLISH = [
    "the cat sat on the mat.",
    "i like green tea.",
    "where is the train station?",
    "the dog runs in the park.",
    "we eat bread and cheese.",
    "she reads a long book.",
    "my house is small.",
    "the sun is hot today.",
    "they play music at night.",
    "he walks to school.",
    "the bird sings a song.",
    "open the door, please.",
    "it is cold in winter.",
    "we drink water.",
    "the children are happy.",
    "this car is red.",
    "i see the sea.",
    "you have a nice hat.",
    "the teacher speaks slowly.",
    "good morning, my friend.",
]

FRENCH = [
    "le chat est sur le tapis.",
    "j'aime le thé vert.",
    "où est la gare?",
    "le chien court dans le parc.",
    "nous mangeons du pain et du fromage.",
    "elle lit un long livre.",
    "ma maison est petite.",
    "le soleil est chaud aujourd'hui.",
    "ils jouent de la musique la nuit.",
    "il marche à l'école.",
    "l'oiseau chante une chanson.",
    "ouvre la porte, s'il te plaît.",
    "il fait froid en hiver.",
    "nous buvons de l'eau.",
    "les enfants sont heureux.",
    "cette voiture est rouge.",
    "je vois la mer.",
    "tu as un joli chapeau.",
    "le professeur parle lentement.",
    "bonjour, mon ami.",
]

# The test sentences (marian_tiny_sentences.txt) and their reference translations (the
# teacher-forcing targets). Sentence 2 starts with the language code; LEFT_OUT, a piece
# of sentence 3's encoding, is left out of vocab.json.
TEST_SENTENCES = [
    "the cat sat on the mat.",
    ">>fra<< i like green tea.",
    "where is the big train station?",
    "she reads a book.",
    "good morning.",
]
TEST_TARGETS = [
    "le chat est sur le tapis.",
    "j'aime le thé vert.",
    "où est la grande gare?",
    "elle lit un livre.",
    "bonjour.",
]
LEFT_OUT = "▁w"  # "where" -> "▁w" "he" "re": the first token becomes <unk>


def train_spm(sentences):
    """A unigram SentencePiece model (serialized bytes), deterministic and small."""
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(sentences), model_writer=model, vocab_size=40, model_type="unigram",
        normalization_rule_name="identity", character_coverage=1.0, num_threads=1, input_sentence_size=0,
        shuffle_input_sentence=False, seed_sentencepiece_size=1000000, hard_vocab_limit=True, minloglevel=2)
    return model.getvalue()


def ordinary_pieces(proto):
    sp = spm.SentencePieceProcessor(model_proto=proto)
    return [sp.id_to_piece(i) for i in range(sp.get_piece_size())
            if not (sp.is_control(i) or sp.is_unknown(i))]


def build_vocab(source_proto, target_proto):
    vocab = {"</s>": EOS, "<unk>": UNK, LANG_CODE: 2}
    source = ordinary_pieces(source_proto)
    target = ordinary_pieces(target_proto)
    assert LEFT_OUT in source and LEFT_OUT not in target, LEFT_OUT
    for piece in source + target:
        if piece != LEFT_OUT and piece not in vocab:
            vocab[piece] = len(vocab)
    vocab["<pad>"] = len(vocab)
    return vocab


def encode(sp, vocab, text):
    """MarianTokenizer's ids of one text: a leading >>xx<< code as one token, the rest
    through the spm, unknown pieces -> <unk>, </s> appended."""
    code = []
    if text.startswith(">>") and text.find("<<") != -1:
        end = text.find("<<") + 2
        code, text = [text[:end]], text[end:]
    pieces = code + sp.encode(text, out_type=str)
    return [vocab.get(p, UNK) for p in pieces] + [EOS]


def padded(rows, pad, width=None):
    width = width or max(len(r) for r in rows)
    return torch.tensor([r + [pad] * (width - len(r)) for r in rows], dtype=torch.int64)


# ---- the weights -----------------------------------------------------------------------


def on_grid(x):
    """x on the 1/64 grid, nonzero, clamped to [-1, 1]."""
    y = torch.round(x / STEP) * STEP
    y[y == 0] = STEP
    return y.clamp(-1, 1).double()


def sinusoidal_table(n_pos, dim):
    """MarianSinusoidalPositionalEmbedding._init_weight: float64, then rounded to float32."""
    pos = torch.arange(n_pos, dtype=torch.float64)[:, None]
    j = torch.arange(dim // 2, dtype=torch.float64)[None, :]
    angle = pos / torch.pow(torch.tensor(10000.0, dtype=torch.float64), 2 * j / dim)
    return torch.cat([torch.sin(angle), torch.cos(angle)], 1).float().double()


def make_weights(V):
    """transformers' state_dict names -> float64 tensors (on the grid)."""
    torch.manual_seed(SEED)
    w = {}

    def linear(prefix, n_out, n_in):
        w[f"{prefix}.weight"] = on_grid(torch.randn(n_out, n_in) / n_in**0.5)
        w[f"{prefix}.bias"] = on_grid(0.25 * torch.randn(n_out))

    def layer_norm(prefix):
        w[f"{prefix}.weight"] = on_grid(1 + 0.1 * torch.randn(D_MODEL)).clamp(max=1)
        w[f"{prefix}.bias"] = on_grid(0.1 * torch.randn(D_MODEL))

    def attention(prefix):
        for name in ("q_proj", "k_proj", "v_proj", "out_proj"):
            linear(f"{prefix}.{name}", D_MODEL, D_MODEL)

    shared = on_grid(SHARED_SCALE * torch.randn(V, D_MODEL))
    shared[V - 1] = 0  # <pad> = padding_idx: nn.Embedding keeps its row zero
    w["model.shared.weight"] = shared
    w["final_logits_bias"] = on_grid(0.5 * torch.randn(1, V))
    if EOS_BIAS is not None:
        w["final_logits_bias"][0, EOS] = EOS_BIAS
    for i in range(LAYERS):
        p = f"model.encoder.layers.{i}"
        attention(f"{p}.self_attn")
        layer_norm(f"{p}.self_attn_layer_norm")
        linear(f"{p}.fc1", FFN, D_MODEL)
        linear(f"{p}.fc2", D_MODEL, FFN)
        layer_norm(f"{p}.final_layer_norm")
    for i in range(LAYERS):
        p = f"model.decoder.layers.{i}"
        attention(f"{p}.self_attn")
        layer_norm(f"{p}.self_attn_layer_norm")
        attention(f"{p}.encoder_attn")
        layer_norm(f"{p}.encoder_attn_layer_norm")
        linear(f"{p}.fc1", FFN, D_MODEL)
        linear(f"{p}.fc2", D_MODEL, FFN)
        layer_norm(f"{p}.final_layer_norm")
    table = sinusoidal_table(MAX_POS, D_MODEL)
    w["model.encoder.embed_positions.weight"] = table
    w["model.decoder.embed_positions.weight"] = table.clone()
    for name, t in w.items():
        assert t.abs().max() <= 1, name
        if "embed_positions" not in name:
            assert torch.equal(torch.round(t / STEP) * STEP, t), name
            assert torch.equal(t.half().double(), t) and torch.equal(t.bfloat16().double(), t), name
    return w


# ---- the model (float64) ---------------------------------------------------------------


def linear(w, prefix, x):
    return x @ w[f"{prefix}.weight"].T + w[f"{prefix}.bias"]


def layer_norm(w, prefix, x):
    return F.layer_norm(x, (D_MODEL,), w[f"{prefix}.weight"], w[f"{prefix}.bias"], eps=1e-5)


def attention(w, prefix, x, memory, key_valid, causal):
    """MarianAttention. x (B, Lq, d), memory (B, Lk, d), key_valid (B, Lk) bool."""
    B, Lq, _ = x.shape
    Lk = memory.shape[1]
    hd = D_MODEL // HEADS

    def heads(t, L):
        return t.reshape(B, L, HEADS, hd).transpose(1, 2)

    q = heads(linear(w, f"{prefix}.q_proj", x), Lq)
    k = heads(linear(w, f"{prefix}.k_proj", memory), Lk)
    v = heads(linear(w, f"{prefix}.v_proj", memory), Lk)
    scores = (q @ k.transpose(2, 3)) * hd**-0.5  # (B, H, Lq, Lk)
    mask = key_valid[:, None, None, :].expand(B, 1, Lq, Lk)
    if causal:
        mask = mask & torch.ones(Lq, Lk, dtype=torch.bool).tril()[None, None]
    scores = scores.masked_fill(~mask, float("-inf"))
    out = torch.softmax(scores, -1) @ v
    return linear(w, f"{prefix}.out_proj", out.transpose(1, 2).reshape(B, Lq, D_MODEL))


def embed(w, ids):
    L = ids.shape[1]
    return w["model.shared.weight"][ids] * math.sqrt(D_MODEL) + w["model.encoder.embed_positions.weight"][:L]


def encoder(w, src_ids, src_valid):
    h = embed(w, src_ids)
    for i in range(LAYERS):
        p = f"model.encoder.layers.{i}"
        h = layer_norm(w, f"{p}.self_attn_layer_norm", h + attention(w, f"{p}.self_attn", h, h, src_valid, False))
        h = layer_norm(w, f"{p}.final_layer_norm", h + linear(w, f"{p}.fc2", F.silu(linear(w, f"{p}.fc1", h))))
    return h


def decoder_logits(w, tgt_ids, enc, src_valid):
    B, T = tgt_ids.shape
    h = w["model.shared.weight"][tgt_ids] * math.sqrt(D_MODEL) + w["model.decoder.embed_positions.weight"][:T]
    all_valid = torch.ones(B, T, dtype=torch.bool)
    for i in range(LAYERS):
        p = f"model.decoder.layers.{i}"
        h = layer_norm(w, f"{p}.self_attn_layer_norm", h + attention(w, f"{p}.self_attn", h, h, all_valid, True))
        h = layer_norm(w, f"{p}.encoder_attn_layer_norm",
                       h + attention(w, f"{p}.encoder_attn", h, enc, src_valid, False))
        h = layer_norm(w, f"{p}.final_layer_norm", h + linear(w, f"{p}.fc2", F.silu(linear(w, f"{p}.fc1", h))))
    return h @ w["model.shared.weight"].T + w["final_logits_bias"]


# ---- decoding (transformers v4.46 semantics; see the docstring) -------------------------


def step_scores(w, prefixes, enc, src_valid, pad_id):
    """Processed log probabilities of the next token for each prefix (a list of equally
    long token lists, the start token first), one sentence's encoder output `enc`
    (1, S, d) and key mask: log_softmax, then NoBadWordsLogitsProcessor ([[pad]]) and
    ForcedEOSTokenLogitsProcessor (max_length)."""
    ids = torch.tensor(prefixes, dtype=torch.int64)
    n = ids.shape[0]
    logits = decoder_logits(w, ids, enc.expand(n, -1, -1), src_valid.expand(n, -1))[:, -1]
    scores = torch.log_softmax(logits, -1)
    scores[:, pad_id] = float("-inf")  # bad_words_ids [[pad]]
    if ids.shape[1] == MAX_LENGTH - 1:  # forced_eos_token_id
        scores = torch.full_like(scores, float("-inf"))
        scores[:, EOS] = 0
    return scores


def greedy_search(w, enc, src_valid, start, pad_id):
    """generate(num_beams=1, do_sample=False): the generated tokens (</s> included) and
    the sum of their processed log probabilities."""
    tokens, total = [start], 0.0
    while len(tokens) < MAX_LENGTH:
        scores = step_scores(w, [tokens], enc, src_valid, pad_id)[0]
        token = int(torch.argmax(scores))
        total += float(scores[token])
        tokens.append(token)
        if token == EOS:
            break
    return tokens[1:], total


class BeamHypotheses:
    """transformers' BeamHypotheses (early_stopping False): the num_beams best finished
    hypotheses, each (score, tokens without </s>, start token first)."""

    def __init__(self, num_beams, length_penalty):
        self.num_beams, self.length_penalty = num_beams, length_penalty
        self.beams, self.worst_score = [], 1e9

    def add(self, tokens, sum_logprobs, generated_len):
        score = sum_logprobs / generated_len**self.length_penalty
        if len(self.beams) < self.num_beams or score > self.worst_score:
            self.beams.append((score, tokens))
            if len(self.beams) > self.num_beams:
                ranked = sorted((s, i) for i, (s, _) in enumerate(self.beams))
                del self.beams[ranked[0][1]]
                self.worst_score = ranked[1][0]
            else:
                self.worst_score = min(score, self.worst_score)

    def is_done(self, best_sum_logprobs, generated_len):
        if len(self.beams) < self.num_beams:
            return False
        return self.worst_score >= best_sum_logprobs / generated_len**self.length_penalty


def beam_search(w, enc, src_valid, start, pad_id, num_beams=NUM_BEAMS, length_penalty=1.0):
    """generate(num_beams=4, length_penalty=1.0, early_stopping=False) for one sentence,
    as BeamSearchScorer.process / finalize do it (batching does not change a sentence's
    result: a finished sentence only gets padded). Returns the generated tokens (</s>
    included when it fits) and the sequence score."""
    decoder_prompt_len = 1
    beams = [[start] for _ in range(num_beams)]
    beam_scores = torch.tensor([0.0] + [-1e9] * (num_beams - 1), dtype=torch.float64)
    hyps = BeamHypotheses(num_beams, length_penalty)
    done = False
    while len(beams[0]) < MAX_LENGTH and not done:
        scores = step_scores(w, beams, enc, src_valid, pad_id)  # (num_beams, V)
        V = scores.shape[1]
        candidates = (scores + beam_scores[:, None]).reshape(-1)
        top_scores, top_ids = torch.topk(candidates, 2 * num_beams, largest=True, sorted=True)
        cur_len = len(beams[0]) + 1  # the length the candidates' sequences would have
        next_beams, next_scores = [], []
        for rank, (score, flat) in enumerate(zip(top_scores.tolist(), top_ids.tolist())):
            beam, token = divmod(flat, V)
            if token == EOS:
                if rank >= num_beams:
                    continue
                hyps.add(list(beams[beam]), score, cur_len - decoder_prompt_len)
            else:
                next_beams.append(beams[beam] + [token])
                next_scores.append(score)
            if len(next_beams) == num_beams:
                break
        assert len(next_beams) == num_beams
        done = hyps.is_done(top_scores.max().item(), cur_len - decoder_prompt_len)
        beams, beam_scores = next_beams, torch.tensor(next_scores, dtype=torch.float64)
    if not done:  # finalize: the open beams join the finished ones
        for beam, score in zip(beams, beam_scores.tolist()):
            hyps.add(list(beam), score, len(beam) - decoder_prompt_len)
    best_score, best = sorted(hyps.beams, key=lambda x: x[0])[-1]
    tokens = best[1:] + ([EOS] if len(best) < MAX_LENGTH else [])
    return tokens, best_score


# ---- files -----------------------------------------------------------------------------


def save_f16(tensors, path, metadata=None):
    """golden_file.save_file's layout (names sorted, compact header padded with spaces to
    a multiple of 8), every tensor F16."""
    header = {"__metadata__": metadata} if metadata else {}
    chunks, offset = [], 0
    for name in sorted(tensors):
        t = tensors[name].detach().contiguous().half()
        data = t.numpy().astype("<f2").tobytes()
        header[name] = {"dtype": "F16", "shape": list(t.shape), "data_offsets": [offset, offset + len(data)]}
        chunks.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as out_file:
        out_file.write(struct.pack("<Q", len(text)) + text + b"".join(chunks))


def write_json(path, data):
    with open(path, "w", encoding="utf-8", newline="\n") as out_file:
        json.dump(data, out_file, indent=2, ensure_ascii=False)
        out_file.write("\n")


def config_json(V, torch_dtype):
    """config.json as an OPUS-MT checkpoint converted with transformers carries it."""
    return {
        "_name_or_path": "marian_tiny",
        "activation_dropout": 0.0,
        "activation_function": "swish",
        "add_bias_logits": False,
        "add_final_layer_norm": False,
        "architectures": ["MarianMTModel"],
        "attention_dropout": 0.0,
        "bad_words_ids": [[V - 1]],
        "bos_token_id": 0,
        "classif_dropout": 0.0,
        "classifier_dropout": 0.0,
        "d_model": D_MODEL,
        "decoder_attention_heads": HEADS,
        "decoder_ffn_dim": FFN,
        "decoder_layerdrop": 0.0,
        "decoder_layers": LAYERS,
        "decoder_start_token_id": V - 1,
        "decoder_vocab_size": V,
        "dropout": 0.1,
        "encoder_attention_heads": HEADS,
        "encoder_ffn_dim": FFN,
        "encoder_layerdrop": 0.0,
        "encoder_layers": LAYERS,
        "eos_token_id": EOS,
        "extra_pos_embeddings": V,
        "forced_eos_token_id": EOS,
        "gradient_checkpointing": False,
        "id2label": {"0": "LABEL_0", "1": "LABEL_1", "2": "LABEL_2"},
        "init_std": 0.02,
        "is_encoder_decoder": True,
        "label2id": {"LABEL_0": 0, "LABEL_1": 1, "LABEL_2": 2},
        "max_length": MAX_LENGTH,
        "max_position_embeddings": MAX_POS,
        "model_type": "marian",
        "normalize_before": False,
        "normalize_embedding": False,
        "num_beams": NUM_BEAMS,
        "num_hidden_layers": LAYERS,
        "pad_token_id": V - 1,
        "scale_embedding": True,
        "share_encoder_decoder_embeddings": True,
        "static_position_embeddings": True,
        "tie_word_embeddings": True,
        "torch_dtype": torch_dtype,
        "transformers_version": "4.46.3",
        "use_cache": True,
        "vocab_size": V,
    }


def write_model_dir(path, tensors, V, torch_dtype, source_proto, target_proto, vocab):
    if os.path.isdir(path):
        shutil.rmtree(path)
    os.makedirs(path)
    write_json(os.path.join(path, "config.json"), config_json(V, torch_dtype))
    write_json(os.path.join(path, "generation_config.json"), {
        "bad_words_ids": [[V - 1]],
        "bos_token_id": 0,
        "decoder_start_token_id": V - 1,
        "eos_token_id": EOS,
        "forced_eos_token_id": EOS,
        "max_length": MAX_LENGTH,
        "num_beams": NUM_BEAMS,
        "pad_token_id": V - 1,
        "transformers_version": "4.46.3",
    })
    write_json(os.path.join(path, "tokenizer_config.json"), {
        "source_lang": "en", "target_lang": "fr", "model_max_length": 512, "separate_vocabs": False,
        "unk_token": "<unk>", "eos_token": "</s>", "pad_token": "<pad>", "tokenizer_class": "MarianTokenizer"})
    write_json(os.path.join(path, "vocab.json"), vocab)
    for name, proto in (("source.spm", source_proto), ("target.spm", target_proto)):
        with open(os.path.join(path, name), "wb") as out_file:
            out_file.write(proto)
    if torch_dtype == "float32":
        save_file({n: t.float() for n, t in tensors.items()}, os.path.join(path, "model.safetensors"),
                  metadata={"format": "pt"})
    else:
        save_f16(tensors, os.path.join(path, "model.safetensors"), metadata={"format": "pt"})


def main():
    torch.set_num_threads(1)
    torch.set_default_dtype(torch.float64)

    source_proto, target_proto = train_spm(ENGLISH), train_spm(FRENCH)
    assert train_spm(ENGLISH) == source_proto and train_spm(FRENCH) == target_proto, "spm not deterministic"
    vocab = build_vocab(source_proto, target_proto)
    V = len(vocab)
    pad_id = V - 1
    sp_source = spm.SentencePieceProcessor(model_proto=source_proto)
    sp_target = spm.SentencePieceProcessor(model_proto=target_proto)

    src_rows = [encode(sp_source, vocab, s) for s in TEST_SENTENCES]
    assert src_rows[1][0] == vocab[LANG_CODE]
    assert sum(r.count(UNK) for r in src_rows) >= 1 and UNK in src_rows[2], src_rows
    src_ids = padded(src_rows, pad_id)
    src_lens = torch.tensor([len(r) for r in src_rows], dtype=torch.int64)
    src_valid = src_ids != pad_id
    tgt_rows = [[pad_id] + [vocab.get(p, UNK) for p in sp_target.encode(t, out_type=str)] + [EOS]
                for t in TEST_TARGETS]
    assert all(UNK not in r for r in tgt_rows), tgt_rows
    tgt_ids = padded(tgt_rows, pad_id)

    w = make_weights(V)
    enc = encoder(w, src_ids, src_valid)
    logits = decoder_logits(w, tgt_ids, enc, src_valid)

    B = len(TEST_SENTENCES)
    greedy = torch.full((B, MAX_LENGTH), -1, dtype=torch.int64)
    beam4 = torch.full((B, MAX_LENGTH), -1, dtype=torch.int64)
    greedy_scores = torch.zeros(B)
    beam4_scores = torch.zeros(B)
    for b in range(B):
        args = (w, enc[b : b + 1], src_valid[b : b + 1], pad_id, pad_id)
        tokens, greedy_scores[b] = greedy_search(*args)
        greedy[b, : len(tokens)] = torch.tensor(tokens)
        tokens, beam4_scores[b] = beam_search(*args)
        beam4[b, : len(tokens)] = torch.tensor(tokens)

    # the files
    tiny = os.path.join(HERE, "marian_tiny")
    f32_tensors = dict(w)
    f32_tensors["lm_head.weight"] = w["model.shared.weight"].clone()
    write_model_dir(tiny, f32_tensors, V, "float32", source_proto, target_proto, vocab)
    f16_tensors = {n: t for n, t in w.items() if "embed_positions" not in n}
    write_model_dir(tiny + "_f16", f16_tensors, V, "float16", source_proto, target_proto, vocab)
    with open(os.path.join(HERE, "marian_tiny_sentences.txt"), "w", encoding="utf-8", newline="\n") as out_file:
        out_file.write("".join(s + "\n" for s in TEST_SENTENCES))

    golden = GoldenFile(SCRIPT)
    golden.put("src_ids", src_ids)
    golden.put("src_lens", src_lens)
    golden.put("positions", w["model.encoder.embed_positions.weight"])
    golden.put("encoder_output", enc)
    golden.put("tgt_ids", tgt_ids)
    golden.put("logits", logits)
    golden.put("greedy", greedy)
    golden.put("greedy_scores", greedy_scores)
    golden.put("beam4", beam4)
    golden.put("beam4_scores", beam4_scores)
    golden.write(os.path.join(HERE, "marian_golden.txt"), name_width=16)

    # the summary
    id_to_piece = {i: p for p, i in vocab.items()}
    print(f"V = {V}: </s> {EOS}, <unk> {UNK}, {LANG_CODE} {vocab[LANG_CODE]}, <pad> {pad_id} "
          f"(decoder start); left out of vocab.json: {LEFT_OUT!r}")
    for b, s in enumerate(TEST_SENTENCES):
        print(f"[{b}] {s}")
        print(f"    src    {src_rows[b]}")
        print(f"    tgt    {tgt_rows[b]}")
        for name, out, score in (("greedy", greedy, greedy_scores), ("beam4", beam4, beam4_scores)):
            toks = [t for t in out[b].tolist() if t >= 0]
            print(f"    {name:6s} {toks} score {score[b].item():.6f}  "
                  f"{''.join(id_to_piece[t] for t in toks[:-1]).replace('▁', ' ').strip()!r}")
    for path in (tiny, tiny + "_f16"):
        size = sum(os.path.getsize(os.path.join(path, f)) for f in os.listdir(path))
        print(f"wrote {path} ({size} bytes: {', '.join(sorted(os.listdir(path)))})")


if __name__ == "__main__":
    main()
