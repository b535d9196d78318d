#!/usr/bin/env python3
"""Golden checkpoint for heed's safetensors reader: the state_dict() of a small
PyTorch module saved as safetensors, and that module's output on a fixed input.

Writes tests/data/torch_linear.safetensors and tests/data/torch_linear_golden.txt;
tests/test_checkpoint.cpp loads the checkpoint into the matching heed module (a Linear
then a LayerNorm, registered as "fc" and "ln") and compares the outputs.

Usage (python3 with torch; on Debian: apt-get install python3-torch):

    /usr/bin/python3 tests/data/make_safetensors_golden.py

The safetensors package is not in Debian, so the file is written by the few lines
of struct and json in golden_file.save_file(), laid out as safetensors.torch.save_file
lays it out: names sorted, F32 little-endian, the JSON header compact and padded
with spaces to a multiple of 8 bytes, and the metadata {"format": "pt"} that
Hugging Face writes. The script reads the file back to check it.

Deterministic: torch.manual_seed(0); the parameters and the input are float32
values, and the expected output is computed in float64 from them.
"""

import os

import torch
from torch import nn

from golden_file import GoldenFile, f32, load_file, save_file

HERE = os.path.dirname(os.path.abspath(__file__))
CHECKPOINT = os.path.join(HERE, "torch_linear.safetensors")
GOLDEN = os.path.join(HERE, "torch_linear_golden.txt")


class TinyNet(nn.Module):
    """state_dict() keys: fc.weight (4, 3), fc.bias (4), ln.weight (4), ln.bias (4)."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 4)
        self.ln = nn.LayerNorm(4)

    def forward(self, x):
        return self.ln(self.fc(x))


def main():
    torch.manual_seed(0)
    module = TinyNet()
    with torch.no_grad():  # LayerNorm starts at ones and zeros; make its parameters tell
        module.ln.weight.uniform_(0.5, 1.5)
        module.ln.bias.uniform_(-0.5, 0.5)
    state = module.state_dict()
    save_file(state, CHECKPOINT, {"format": "pt"})

    tensors, metadata = load_file(CHECKPOINT)
    assert metadata == {"format": "pt"} and set(tensors) == set(state)
    for name, t in tensors.items():
        assert torch.equal(t, state[name]), name
    print(f"wrote {len(tensors)} tensors to {CHECKPOINT} ({os.path.getsize(CHECKPOINT)} bytes)")

    x = f32(torch.randn(2, 3, dtype=torch.float64))
    with torch.no_grad():
        output = module.double()(x)
    golden = GoldenFile("tests/data/make_safetensors_golden.py")
    golden.put("x", x)
    golden.put("output", output)
    golden.write(GOLDEN)


if __name__ == "__main__":
    main()
