#!/usr/bin/env python3
"""Golden reference values for heed's training utilities (tests/test_training.cpp).

Runs PyTorch and d2l's own code ("Dive into Deep Learning" 0.17, PyTorch edition,
section 9.7: MaskedSoftmaxCELoss (with sequence_mask) and bleu, as copied in
tests/data/d2l_seq2seq.py) and writes tests/data/training_golden.txt, which
tests/golden.hpp reads.

Usage (python3 with torch; on Debian: apt-get install python3-torch):

    /usr/bin/python3 tests/data/make_training_golden.py

The output is deterministic: torch.manual_seed(0), float64 unless said otherwise, and
every input rounded to float32 first (x.float().double()) so that heed's float and
double runs read the very same inputs.

Cases:
  ce2.<reduction>, ce3.<reduction>, ce_big.<reduction>
      F.cross_entropy with the classes moved to dim 1 (heed keeps them last), for
      reduction none / mean / sum: logits, labels, output, R and d(output*R).sum()/d logits.
  mce.d2l, mce.rand
      d2l's MaskedSoftmaxCELoss: pred, label, valid_len, output, R and the gradient
      with respect to pred. mce.d2l is d2l's own example.
  ls<ε>.ce2.<reduction>, ls<ε>.ce_big.<reduction>, ls<ε>.mce.rand
      the same with label_smoothing = ε (10 for 0.1, 100 for 1.0): F.cross_entropy(...,
      label_smoothing=ε) and d2l's MaskedSoftmaxCELoss(label_smoothing=ε), a subclass of
      nn.CrossEntropyLoss. Drawn last, so that the cases above keep their values.
  adam.<problem>.<dtype>.<name>
      torch.optim.Adam on a small problem, run once in float32 and once in float64:
      the trajectory of each parameter (steps + 1, *shape), row 0 the start, and the
      state after the last step (exp_avg, exp_avg_sq).
  bleu.scores, bleu.d2l_raises
      d2l's bleu() on BLEU_CASES below, in that order (tests/test_training.cpp lists the
      same cases); where d2l's raises ZeroDivisionError the score is heed's convention, 0,
      and d2l_raises is 1.
"""

import os

import torch
from torch.nn import functional as F

from golden_file import GoldenFile, f32, leaf
from d2l_seq2seq import MaskedSoftmaxCELoss, bleu

OUT_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "training_golden.txt")


# ---- cases ---------------------------------------------------------------------------

# (pred_seq, label_seq, k): tests/test_training.cpp repeats this list in this order.
BLEU_CASES = [
    ("va !", "va !", 2),                                    # d2l's first translation: 1
    ("j'ai perdu .", "j'ai perdu .", 2),
    ("il est riche .", "il est calme .", 2),                # one unigram and one bigram wrong
    ("je suis <unk> .", "je suis chez moi .", 2),           # brevity penalty exp(1 - 5/4)
    ("je suis chez .", "je suis chez moi .", 3),            # trigrams, and the brevity penalty
    ("il est calme .", "il est calme .", 4),
    ("a a a a", "a a b", 2),                                # repeated unigrams clipped at 2
    ("a b a b a b", "a b a b", 3),                          # repeated bigrams and trigrams clipped
    ("the the the the the the the", "the cat is on the mat", 1),
    ("le chat est sur le tapis", "le chat est sur le tapis bleu", 4),
    ("x y", "x y z w", 2),                                  # brevity exp(1 - 4/2)
    ("a b c d e", "a b", 2),                                # longer than the label: no penalty
    ("c b a", "a b c", 2),                                  # unigrams match, no bigram: 0
    ("a  b", "a  b", 2),                                    # two spaces: an empty token
    ("", "a", 1),                                           # one empty token
    ("", "", 1),                                            # ... which matches an empty label
    ("a b", "b a", 3),                                      # 2 tokens, k = 3: d2l divides by 0
    ("a", "a b c", 2),                                      # 1 token, k = 2: d2l divides by 0
]


golden = GoldenFile("tests/data/make_training_golden.py")


def cross_entropy_cases(case, logits, labels, label_smoothing=0.0):
    """F.cross_entropy with the classes last, for every reduction."""
    for reduction in ("none", "mean", "sum"):
        x = logits.detach().clone().requires_grad_(True)
        moved = x.permute(0, 2, 1) if x.dim() == 3 else x
        out = F.cross_entropy(moved, labels, reduction=reduction, label_smoothing=label_smoothing)
        golden.finish(f"{case}.{reduction}", out, {"logits": x, "labels": labels})


def adam_trajectory(case, dtype, make_params, loss_fn, steps, **adam_args):
    """torch.optim.Adam for `steps` steps in `dtype`; stores every parameter's path."""
    params = [p.detach().to(dtype).clone().requires_grad_(True) for p in make_params()]
    optimizer = torch.optim.Adam(params, **adam_args)
    paths = [[p.detach().clone()] for p in params]
    for _ in range(steps):
        optimizer.zero_grad()
        loss_fn(*params).backward()
        optimizer.step()
        for path, p in zip(paths, params):
            path.append(p.detach().clone())
    name = "float32" if dtype == torch.float32 else "float64"
    for i, (path, p) in enumerate(zip(paths, params)):
        golden.put(f"{case}.{name}.p{i}", torch.stack(path).double())
        state = optimizer.state[p]
        assert float(state["step"]) == steps
        golden.put(f"{case}.{name}.exp_avg{i}", state["exp_avg"].double())
        golden.put(f"{case}.{name}.exp_avg_sq{i}", state["exp_avg_sq"].double())


def main():
    torch.manual_seed(0)
    torch.set_default_dtype(torch.float64)

    # ---- cross entropy -----------------------------------------------------------------
    cross_entropy_cases("ce2", f32(3 * torch.randn(4, 5)), torch.tensor([0, 4, 2, 2]))
    cross_entropy_cases("ce3", f32(2 * torch.randn(2, 3, 6)), torch.randint(0, 6, (2, 3)))
    # Logits far from 0: a naive exp would overflow; the loss stays finite.
    cross_entropy_cases("ce_big", f32(torch.tensor([[1000.0, 1001.0, 999.0], [-1000.0, -1003.0, -998.5]])),
                        torch.tensor([1, 0]))

    # ---- MaskedSoftmaxCELoss -----------------------------------------------------------
    loss = MaskedSoftmaxCELoss()
    pred = leaf(torch.ones(3, 4, 10))
    label, valid_len = torch.ones((3, 4), dtype=torch.long), torch.tensor([4, 2, 0])
    out = loss(pred, label, valid_len)
    assert torch.allclose(out, torch.tensor([2.3026, 1.1513, 0.0]), atol=1e-4), out  # d2l's printout
    golden.finish("mce.d2l", out, {"pred": pred, "label": label, "valid_len": valid_len})

    pred = leaf(1.5 * torch.randn(4, 5, 7))
    label = torch.randint(0, 7, (4, 5))
    valid_len = torch.tensor([7, 2, 0, 3])  # 7 > num_steps: every step counts
    golden.finish("mce.rand", loss(pred, label, valid_len), {"pred": pred, "label": label, "valid_len": valid_len})

    # ---- Adam --------------------------------------------------------------------------
    # quad: 0.5 ||p0 - c0||² + 0.5 ||p1 - c1||², whose gradient p - c is exact in float.
    quad_start = [f32(torch.randn(2, 3)), f32(torch.randn(4))]
    quad_target = [f32(torch.randn(2, 3)), f32(torch.randn(4))]
    for i in range(2):
        golden.put(f"adam.quad.c{i}", quad_target[i])

    def quad_loss(p0, p1):
        c0, c1 = (c.to(p0.dtype) for c in quad_target)
        return 0.5 * ((p0 - c0) ** 2).sum() + 0.5 * ((p1 - c1) ** 2).sum()

    # linreg: mean squared error of X w + b against y.
    X, y = f32(torch.randn(10, 3)), f32(torch.randn(10, 1))
    golden.put("adam.linreg.X", X)
    golden.put("adam.linreg.y", y)
    linreg_start = [f32(0.1 * torch.randn(3, 1)), f32(torch.zeros(1))]

    def linreg_loss(w, b):
        return ((X.to(w.dtype) @ w + b - y.to(w.dtype)) ** 2).mean()

    for dtype in (torch.float32, torch.float64):
        adam_trajectory("adam.quad", dtype, lambda: quad_start, quad_loss, 5, lr=0.1)
        adam_trajectory("adam.quad_wd", dtype, lambda: quad_start, quad_loss, 5, lr=0.05, betas=(0.8, 0.95),
                        eps=1e-6, weight_decay=0.1)
        adam_trajectory("adam.linreg", dtype, lambda: linreg_start, linreg_loss, 5, lr=0.1, weight_decay=0.01)

    # ---- BLEU --------------------------------------------------------------------------
    scores, raises = [], []
    for pred_seq, label_seq, k in BLEU_CASES:
        try:
            scores.append(bleu(pred_seq, label_seq, k))
            raises.append(0)
        except ZeroDivisionError:
            scores.append(0.0)
            raises.append(1)
    assert scores[0] == 1.0 and raises[-2:] == [1, 1] and sum(raises) == 2, (scores, raises)
    golden.put("bleu.scores", torch.tensor(scores, dtype=torch.float64))
    golden.put("bleu.d2l_raises", torch.tensor(raises, dtype=torch.int64))

    # ---- label smoothing ---------------------------------------------------------------
    for eps, tag in ((0.1, "ls10"), (1.0, "ls100")):
        cross_entropy_cases(f"{tag}.ce2", f32(3 * torch.randn(4, 5)), torch.tensor([0, 4, 2, 2]), eps)
        cross_entropy_cases(f"{tag}.ce3", f32(2 * torch.randn(2, 3, 6)), torch.randint(0, 6, (2, 3)), eps)
        cross_entropy_cases(f"{tag}.ce_big",
                            f32(torch.tensor([[1000.0, 1001.0, 999.0], [-1000.0, -1003.0, -998.5]])),
                            torch.tensor([1, 0]), eps)
        pred = leaf(1.5 * torch.randn(4, 5, 7))
        label = torch.randint(0, 7, (4, 5))
        valid_len = torch.tensor([7, 2, 0, 3])
        golden.finish(f"{tag}.mce.rand", MaskedSoftmaxCELoss(label_smoothing=eps)(pred, label, valid_len),
                      {"pred": pred, "label": label, "valid_len": valid_len})

    golden.write(OUT_FILE)


if __name__ == "__main__":
    main()
