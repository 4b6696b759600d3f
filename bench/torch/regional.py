"""PyTorch's side of `bench regional`: 12 naive transformer blocks (4x128x512, f32) compiled whole
with torch.compile, against regional compilation (each block's `.compile()`, PyTorch's recipe
`recipes_source/regional_compilation.py`), over a schedule of sequence lengths.

    python bench/torch/regional.py --device cuda --json > torch-regional.json

Per form, in a new process with empty Inductor and Triton caches (TORCHINDUCTOR_CACHE_DIR and
TRITON_CACHE_DIR pointed at a fresh folder, so that nothing compiled earlier is reused): the first
call at the first length, then one call at each later length (the second recompiles, and makes the
length dynamic), each on the wall clock with the device synchronised. Then, in this process, both
forms' steady state at the first length, timed in turns as `bench models` times (CUDA events after
an L2 flush, or the monotonic clock on the CPU), medians reported. The block mirrors
models/src/phase5.rs op for op, reading the batch and length from its input, as the engine's does.
"""

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile

import torch
import torch.nn.functional as F
from torch import nn

from models import Timer, naive_layer_norm, naive_softmax

LAYERS = 12
D_MODEL, HEADS, BATCH = 512, 8, 4


class Block(nn.Module):
    """The naive pre-norm block of models/src/phase5.rs (`Block::naive_forward`)."""

    def __init__(self, d, heads, gen):
        super().__init__()
        self.heads = heads

        def param(shape, fan_in):
            return nn.Parameter(torch.randn(shape, generator=gen) / math.sqrt(fan_in), requires_grad=False)

        self.ln1_w, self.ln1_b = nn.Parameter(torch.ones(d), False), nn.Parameter(torch.zeros(d), False)
        self.ln2_w, self.ln2_b = nn.Parameter(torch.ones(d), False), nn.Parameter(torch.zeros(d), False)
        self.wq, self.wk, self.wv, self.wo = (param((d, d), d) for _ in range(4))
        self.bq, self.bk, self.bv, self.bo = (param((d,), d) for _ in range(4))
        self.fc1_w, self.fc1_b = param((4 * d, d), d), param((4 * d,), d)
        self.fc2_w, self.fc2_b = param((d, 4 * d), 4 * d), param((d,), 4 * d)

    def attention(self, x):
        batch, seq, d = x.shape
        head_dim = d // self.heads

        def split(t):
            return t.reshape(batch, seq, self.heads, head_dim).transpose(1, 2)

        q, k, v = (split(F.linear(x, w, b)) for w, b in ((self.wq, self.bq), (self.wk, self.bk), (self.wv, self.bv)))
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(head_dim)
        attended = naive_softmax(scores) @ v
        return F.linear(attended.transpose(1, 2).contiguous().reshape(batch, seq, d), self.wo, self.bo)

    def forward(self, x):
        h = x + self.attention(naive_layer_norm(x, self.ln1_w, self.ln1_b))
        hidden = F.gelu(F.linear(naive_layer_norm(h, self.ln2_w, self.ln2_b), self.fc1_w, self.fc1_b))
        return h + F.linear(hidden, self.fc2_w, self.fc2_b)


class Stack(nn.Module):
    def __init__(self, device):
        super().__init__()
        gen = torch.Generator().manual_seed(0)
        self.blocks = nn.ModuleList(Block(D_MODEL, HEADS, gen) for _ in range(LAYERS))
        self.to(device)

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return x


def compiled(form, device):
    """The stack, and the callable of `form`: torch.compile of the model, or each block compiled."""
    stack = Stack(device)
    if form == "whole":
        return torch.compile(stack)
    for block in stack.blocks:
        block.compile()
    return stack


def inputs(seqs, device):
    gen = torch.Generator().manual_seed(1)
    return [torch.randn(BATCH, s, D_MODEL, generator=gen).to(device) for s in seqs]


def run_one(form, device, seqs):
    """In this (new) process: the call at each length, in order, on the wall clock."""
    timer = Timer(device)
    f = compiled(form, device)
    times = []
    with torch.no_grad():
        for x in inputs(seqs, device):
            _, seconds = timer.once(lambda x=x: f(x))
            times.append(seconds * 1e3)
    print(json.dumps({"form": form, "first_call_ms": times[0], "new_length_ms": times[1] if len(times) > 1 else None,
                      "later_lengths_ms": times[2:]}))


def in_new_process(form, device, seqs):
    with tempfile.TemporaryDirectory(prefix=f"torch-regional-{form}-") as cache:
        env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=os.path.join(cache, "inductor"),
                   TRITON_CACHE_DIR=os.path.join(cache, "triton"))
        args = [sys.executable, __file__, "--device", str(device), "--seqs", ",".join(map(str, seqs)), "--run", form]
        out = subprocess.run(args, env=env, capture_output=True, text=True, check=True)
        return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--seqs", default="128,256,384", help="sequence lengths, in the order they are called")
    parser.add_argument("--samples", type=int, default=25)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--run", choices=["whole", "regional"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    device = torch.device(args.device)
    seqs = [int(s) for s in args.seqs.split(",")]
    if args.run:
        run_one(args.run, device, seqs)
        return
    forms = {form: in_new_process(form, device, seqs) for form in ("whole", "regional")}
    timer = Timer(device)
    whole, regional = compiled("whole", device), compiled("regional", device)
    x = inputs(seqs[:1], device)[0]
    with torch.no_grad():
        whole(x), regional(x)
        samples = args.samples if device.type == "cuda" else min(args.samples, 10)
        t = timer.interleaved([lambda: whole(x), lambda: regional(x)], samples, warmup=3)
    steady = {"whole": statistics.median(t[0]) * 1e3, "regional": statistics.median(t[1]) * 1e3}
    report = {"device": str(device), "torch": torch.__version__, "layers": LAYERS, "shape": f"{BATCH}x{seqs[0]}x{D_MODEL}",
              "seqs": seqs, "whole": forms["whole"], "regional": forms["regional"],
              "steady_whole_ms": steady["whole"], "steady_regional_ms": steady["regional"],
              "steady_ratio": steady["regional"] / steady["whole"]}
    if args.json:
        print(json.dumps(report, indent=2))
        return
    print(f"torch {torch.__version__} on {device}: {LAYERS} naive blocks, lengths {seqs}")
    for name in ("first_call_ms", "new_length_ms"):
        print(f"  {name}: whole {forms['whole'][name]:.1f}, regional {forms['regional'][name]:.1f}")
    print(f"  steady ms: whole {steady['whole']:.3f}, regional {steady['regional']:.3f}")


if __name__ == "__main__":
    main()
