#!/usr/bin/env python3
"""Golden reference values for heed's NMT data pipeline (heed/seq2seq/data.hpp).

Runs d2l's own data functions (d2l_nmt.py: preprocess_nmt, tokenize_nmt, Vocab,
truncate_pad, build_array_nmt, copied verbatim from d2l 0.17) and writes
tests/data/nmt_golden.txt, which tests/golden.hpp reads.

Usage (python3 with torch; on Debian: apt-get install python3-torch):

    /usr/bin/python3 tests/data/make_nmt_golden.py

Cases:
  lower.*  every code point heed's preprocess_nmt lowercases (its documented
           coverage) through d2l's preprocess_nmt, one at a time;
  hand.*   a small handcrafted text (accents, U+202F, NBSP, Greek, Cyrillic, U+0130,
           punctuation after spaces, tabs and line starts, double spaces, a line
           without a tab, an empty line) through the whole pipeline;
  fra.*    the first 600 examples of ../shared/data/fra-eng/fra.txt (beside the
           checkout) as d2l's load_data_nmt(batch_size, num_steps=10, num_examples=600)
           prepares them, and fra_all.* the whole file; skipped when the file is absent.

The golden format holds numbers only, so a string is stored as the int64 tensor of
its UTF-8 bytes, and a list of strings as one string joined by '\n' (no token or
line here contains '\n'); a token sequence is its tokens joined by ' ' (which
round-trips through d2l's split(' ')).
"""

import os

import torch

from golden_file import GoldenFile
from d2l_nmt import Vocab, build_array_nmt, preprocess_nmt, tokenize_nmt, truncate_pad

HERE = os.path.dirname(os.path.abspath(__file__))
OUT_FILE = os.path.join(HERE, "nmt_golden.txt")
FRA_TXT = os.path.normpath(os.path.join(HERE, "..", "..", "..", "shared", "data", "fra-eng", "fra.txt"))

RESERVED = ['<pad>', '<bos>', '<eos>']

# The code points heed's preprocess_nmt lowercases as str.lower() does (see data.hpp):
# ASCII, Latin-1, Latin Extended-A, basic Greek and Cyrillic.
LOWER_COVERAGE = list(range(0x00, 0x180)) + list(range(0x386, 0x3CF)) + list(range(0x400, 0x460))

HAND = ("Go.\tVa\u202f!\n"
        "Hi.\tSalut\u00a0!\n"
        "He's calm.\tIl est calme.\n"
        "I'm home.\tJe suis chez moi.\n"
        "Who?\tQui ?\n"
        "Wait, what?!\tAttends, quoi\u202f?!\n"
        "I lost.\tJ'ai perdu.\n"
        "no tab on this line.\n"
        "\u00c7a va?\t\u00c7A VA\u00a0?\n"
        "\u00c9COLE \u00c0 \u00c8 \u0152UVRE \u0178.\t\u00c9cole \u00c0\u00c9\u00c8\u00c7 \u0152uvre.\n"
        "Stop...\tArr\u00eate...\n"
        "  Two  spaces ,\t.dot first\n"
        "\n"
        "\u0395\u03bb\u03bb\u03ac\u03b4\u03b1!\t\u0391\u0398\u0389\u039d\u0391, \u039c\u039f\u03a3\u039a\u0392\u0391 \u039f\u0394\u039f\u03a3 \u03a3.\n"
        "\u041c\u043e\u0441\u043a\u0432\u0430.\t\u041c\u041e\u0421\u041a\u0412\u0410!\n"
        "\u0130stanbul.\t\u0130STANBUL.\n"
        "I'm home.\tJe suis chez moi.\n"
        "Go.\tVa !\n"
        "Hi.\tSalut.\n")

golden = GoldenFile("tests/data/make_nmt_golden.py")


def put_text(name, s):
    """A string as the int64 tensor of its UTF-8 bytes."""
    golden.put(name, torch.tensor(list(s.encode("utf-8")), dtype=torch.int64))


def put_lines(name, strings):
    put_text(name, "\n".join(strings))


def put_ints(name, values):
    golden.put(name, torch.tensor(values, dtype=torch.int64))


def put_vocab(name, vocab, head=None):
    """Size, idx_to_token and token_freqs (tokens, counts), the lists cut to `head`."""
    put_ints(f"{name}.size", [len(vocab)])
    put_lines(f"{name}.idx_to_token", vocab.idx_to_token[:head])
    freqs = vocab.token_freqs[:head]
    put_lines(f"{name}.freq_tokens", [t for t, _ in freqs])
    put_ints(f"{name}.freqs", [f for _, f in freqs])


def put_array(name, array, valid_len, rows=None):
    """Shape, the first `rows` rows, a position-weighted checksum and the valid lengths
    (the first 1000 of them, and the sum)."""
    n, steps = array.shape
    put_ints(f"{name}.shape", [n, steps])
    golden.put(f"{name}.array", array[:rows].to(torch.int64))
    weights = torch.arange(1, n * steps + 1, dtype=torch.int64).reshape(n, steps)
    put_ints(f"{name}.checksum", [int((array.to(torch.int64) * weights).sum())])
    golden.put(f"{name}.valid_len", valid_len[:1000].to(torch.int64))
    put_ints(f"{name}.valid_len_sum", [int(valid_len.sum())])


def pipeline(case, raw, num_examples, num_steps, head=None, rows=None):
    """d2l's load_data_nmt up to the arrays, on raw text."""
    text = preprocess_nmt(raw)
    source, target = tokenize_nmt(text, num_examples)
    src_vocab = Vocab(source, min_freq=2, reserved_tokens=RESERVED)
    tgt_vocab = Vocab(target, min_freq=2, reserved_tokens=RESERVED)
    put_ints(f"{case}.num_pairs", [len(source)])
    put_vocab(f"{case}.src_vocab", src_vocab, head)
    put_vocab(f"{case}.tgt_vocab", tgt_vocab, head)
    put_array(f"{case}.src", *build_array_nmt(source, src_vocab, num_steps), rows)
    put_array(f"{case}.tgt", *build_array_nmt(target, tgt_vocab, num_steps), rows)
    return text, source, target, src_vocab, tgt_vocab


def main():
    # lower.*: one code point at a time, so no punctuation spacing; str.lower() may give
    # two code points (U+0130), hence (code point, first, second or -1).
    rows = []
    for cp in LOWER_COVERAGE:
        out = [ord(c) for c in preprocess_nmt(chr(cp))]
        assert 1 <= len(out) <= 2, hex(cp)
        rows.append([cp, out[0], out[1] if len(out) == 2 else -1])
    put_ints("lower.table", rows)

    # hand.*: the whole pipeline on the handcrafted text.
    text, source, target, src_vocab, tgt_vocab = pipeline("hand", HAND, None, 4)
    put_text("hand.raw", HAND)
    put_text("hand.text", text)
    put_lines("hand.source", [" ".join(line) for line in source])
    put_lines("hand.target", [" ".join(line) for line in target])
    source3, _ = tokenize_nmt(text, 3)
    put_ints("hand.num_pairs3", [len(source3)])
    put_array("hand.src8", *build_array_nmt(source, src_vocab, 8))

    vocab0 = Vocab(source)  # min_freq 0, no reserved tokens
    put_vocab("hand.vocab0", vocab0)
    # Reserved tokens that also occur in the text keep their reserved index.
    vocab_res = Vocab(source, min_freq=1, reserved_tokens=['<pad>', '.', 'go'])
    put_vocab("hand.vocab_res", vocab_res)

    queries = ["go", ".", "i'm", "home", "nowhere", "<pad>", "<unk>", ""]
    put_lines("hand.queries", queries)
    put_ints("hand.query_idx", src_vocab[queries])

    for name, line, num_steps, pad in [("short", [5, 6, 7], 5, 1), ("exact", [5, 6, 7], 3, 1),
                                       ("long", [5, 6, 7, 8, 9], 2, 0), ("empty", [], 3, 4), ("zero", [5], 0, 1)]:
        put_ints(f"truncate_pad.{name}", truncate_pad(line, num_steps, pad))

    # fra.*: d2l's own settings, on the file beside the checkout when it is there.
    if not os.path.exists(FRA_TXT):
        print(f"note: {FRA_TXT} is absent, no fra.* cases written")
    else:
        with open(FRA_TXT, "r", encoding="utf-8") as f:
            raw = f.read()
        _, source, target, src_vocab, tgt_vocab = pipeline("fra", raw, 600, 10, head=40, rows=8)
        d2l_pairs = [("go .", "va !"), ("i lost .", "j'ai perdu ."), ("he's calm .", "il est calme ."),
                     ("i'm home .", "je suis chez moi .")]
        put_ints("fra.d2l_src_idx", [i for eng, _ in d2l_pairs for i in src_vocab[eng.split(" ")]])
        put_ints("fra.d2l_tgt_idx", [i for _, fra in d2l_pairs for i in tgt_vocab[fra.split(" ")]])
        pipeline("fra_all", raw, None, 10, head=40, rows=8)

    golden.write(OUT_FILE, name_width=24)


if __name__ == "__main__":
    main()
