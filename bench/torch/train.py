"""PyTorch's side of `bench train`: training steps, eager against torch.compile.

    python bench/torch/train.py --device cuda --samples 50 --json > torch-train.json
    python bench/torch/train.py --device cpu --only mlp

Each workload mirrors bench/src/train.rs: the MLP 512-2048-512 (exact GELU) at batch 64 and 4096
and the naive pre-norm transformer block (models/src/phase5.rs, op for op) at 4x128x512 and
8x1024x768, trained on a fixed batch with the MSE loss and `torch.optim.SGD(lr=1e-3,
momentum=0.9)`, gradients set to None after each step. Forms, each training its own copy of the
model from the same seed:

- `eager`: the step as written;
- `compiled model`: `torch.compile(model)`, the loss, backward and optimizer eager;
- `compiled step <mode>`: the whole step function compiled with `torch.compile(step, mode=...)`
  for `default`, `reduce-overhead` and `max-autotune` (compiled autograd off, PyTorch's default:
  Dynamo breaks the graph at `backward()` and compiles the optimizer's step as its own graph).

Timing as the engine's: the first step of each form on the wall clock (tracing and compiling
included), the first two losses compared with eager's, then the forms' samples in turns; on CUDA
each sample of one step is bracketed by CUDA events with no L2 flush (a training loop's steady
state), on the CPU by a monotonic clock. Medians are reported.
"""

import argparse
import json
import math
import statistics
import sys

import torch
import torch.nn.functional as F

# The timer and the spread of `bench/torch/models.py`, beside this file.
from models import Timer, spread

MLP_FEATURES, MLP_HIDDEN = 512, 2048
MLP_BATCHES = [64, 4096]
LAYER_NORM_EPS = 1e-5
# (batch, seq, d_model, heads), as BlockShape::SMALL and BlockShape::LARGE.
BLOCK_SHAPES = [(4, 128, 512, 8), (8, 1024, 768, 12)]
LR, MOMENTUM = 1e-3, 0.9
CPU_SECONDS_PER_WORKLOAD = 4.0
MODES = ["default", "reduce-overhead", "max-autotune"]


def param(shape, fan_in, gen, device):
    return (torch.randn(shape, generator=gen) / math.sqrt(fan_in)).to(device).requires_grad_()


def naive_softmax(x):
    shifted = torch.exp(x - x.amax(-1, keepdim=True))
    return shifted / shifted.sum(-1, keepdim=True)


def naive_layer_norm(x, weight, bias):
    centered = x - x.mean(-1, keepdim=True)
    variance = (centered * centered).mean(-1, keepdim=True)
    return centered / torch.sqrt(variance + LAYER_NORM_EPS) * weight + bias


class Mlp(torch.nn.Module):
    def __init__(self, gen, device):
        super().__init__()
        self.w1 = torch.nn.Parameter(param((MLP_HIDDEN, MLP_FEATURES), MLP_FEATURES, gen, device))
        self.b1 = torch.nn.Parameter(param((MLP_HIDDEN,), MLP_FEATURES, gen, device))
        self.w2 = torch.nn.Parameter(param((MLP_FEATURES, MLP_HIDDEN), MLP_HIDDEN, gen, device))
        self.b2 = torch.nn.Parameter(param((MLP_FEATURES,), MLP_HIDDEN, gen, device))

    def forward(self, x):
        return F.linear(F.gelu(F.linear(x, self.w1, self.b1)), self.w2, self.b2)


class Block(torch.nn.Module):
    def __init__(self, shape, gen, device):
        super().__init__()
        self.shape = shape
        _, _, d, _ = shape

        def p(*dims, fan_in):
            return torch.nn.Parameter(param(dims, fan_in, gen, device))

        def const(value):
            return torch.nn.Parameter(torch.full((d,), value, device=device))

        self.ln1_w, self.ln1_b = const(1.0), const(0.0)
        self.wq, self.bq = p(d, d, fan_in=d), p(d, fan_in=d)
        self.wk, self.bk = p(d, d, fan_in=d), p(d, fan_in=d)
        self.wv, self.bv = p(d, d, fan_in=d), p(d, fan_in=d)
        self.wo, self.bo = p(d, d, fan_in=d), p(d, fan_in=d)
        self.ln2_w, self.ln2_b = const(1.0), const(0.0)
        self.fc1_w, self.fc1_b = p(4 * d, d, fan_in=d), p(4 * d, fan_in=d)
        self.fc2_w, self.fc2_b = p(d, 4 * d, fan_in=4 * d), p(d, fan_in=4 * d)

    def attention(self, x):
        batch, seq, d, heads = self.shape
        head_dim = d // heads

        def split(t):
            return t.reshape(batch, seq, heads, head_dim).transpose(1, 2)

        q = split(F.linear(x, self.wq, self.bq))
        k = split(F.linear(x, self.wk, self.bk))
        v = split(F.linear(x, self.wv, self.bv))
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(head_dim)
        attended = naive_softmax(scores) @ v
        return F.linear(attended.transpose(1, 2).contiguous().reshape(batch, seq, d), self.wo, self.bo)

    def forward(self, x):
        h = x + self.attention(naive_layer_norm(x, self.ln1_w, self.ln1_b))
        hidden = F.gelu(F.linear(naive_layer_norm(h, self.ln2_w, self.ln2_b), self.fc1_w, self.fc1_b))
        return h + F.linear(hidden, self.fc2_w, self.fc2_b)


def workloads(device):
    """(name, build) for each workload; build() makes the model, batch and target anew."""

    def seeded(make, batch_shape):
        def build():
            gen = torch.Generator().manual_seed(0)
            model = make(gen)
            x = torch.randn(*batch_shape, generator=gen).to(device)
            target = torch.randn(*batch_shape, generator=gen).to(device)
            return model, x, target

        return build

    for batch in MLP_BATCHES:
        yield f"mlp bs={batch}", seeded(lambda gen: Mlp(gen, device), (batch, MLP_FEATURES))
    for shape in BLOCK_SHAPES:
        batch, seq, d, _ = shape
        yield f"block {batch}x{seq}x{d}", seeded(lambda gen, shape=shape: Block(shape, gen, device), (batch, seq, d))


def step_function(model, optimizer):
    def step(x, target):
        loss = F.mse_loss(model(x), target)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return loss

    return step


def forms(build, modes):
    """(name, step) for each form, each on its own copy of the model and batch: eager, the compiled
    model, and the whole step compiled in each of `modes`."""

    def on_batch(step, x, target):
        return lambda: step(x, target)

    model, x, target = build()
    yield "eager", on_batch(step_function(model, sgd(model)), x, target)
    model, x, target = build()
    yield "compiled model", on_batch(step_function(torch.compile(model), sgd(model)), x, target)
    for mode in modes:
        model, x, target = build()
        yield f"compiled step {mode}", on_batch(marked(torch.compile(step_function(model, sgd(model)), mode=mode)), x, target)


def marked(step):
    """`step` with a new CUDA-graph step marked before each call: reduce-overhead's recordings
    reuse their output memory, and the optimizer's state (momentum buffers) lives on between
    steps, so PyTorch asks for `torch.compiler.cudagraph_mark_step_begin()` before each step."""

    def run(x, target):
        torch.compiler.cudagraph_mark_step_begin()
        return step(x, target)

    return run


def sgd(model):
    return torch.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--samples", type=int, default=25)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--only", action="append", default=[])
    parser.add_argument(
        "--modes",
        default=",".join(MODES),
        help="the compile modes of the whole step, comma-separated (max-autotune's GEMM autotuning takes minutes)",
    )
    args = parser.parse_args()
    modes = [m for m in args.modes.split(",") if m]
    unknown = [m for m in modes if m not in MODES]
    if unknown:
        parser.error(f"unknown modes {unknown}: choose from {MODES}")
    device = torch.device(args.device)
    timer = Timer(device, flush_cache=False)
    timing = (
        "CUDA: median of CUDA-event samples of one step, the forms in turns, no L2 flush"
        if device.type == "cuda"
        else f"CPU ({torch.get_num_threads()} threads): median of wall-clock samples of one step, ~4 s per workload"
    )
    rows = []
    for name, build in workloads(device):
        if args.only and not any(o in name for o in args.only):
            continue
        torch._dynamo.reset()
        built, first_calls, losses = [], [], []
        for form, step in forms(build, modes):
            try:
                first, seconds = timer.once(step)
                second = step()
            except Exception as error:  # a form PyTorch cannot run is reported, not fatal
                message = str(error).strip().splitlines()
                rows.append({"workload": name, "form": form, "error": message[-1] if message else repr(error)})
                print(f"  {name} {form}: failed: {rows[-1]['error']}", file=sys.stderr)
                continue
            built.append((form, step))
            first_calls.append(seconds)
            losses.append([first.item(), second.item()])
        samples, warmup = args.samples, args.warmup
        if device.type == "cpu":
            one = first_calls[0]
            samples = max(1, min(args.samples, int(CPU_SECONDS_PER_WORKLOAD / (one * len(built)))))
            warmup = warmup if one < 0.05 else 0
        times = timer.interleaved([step for _, step in built], samples, warmup)
        eager_ms = statistics.median(times[0]) * 1e3
        for (form, _), ts, first, loss in zip(built, times, first_calls, losses):
            ms = statistics.median(ts) * 1e3
            difference = max(abs(a - b) / max(abs(b), 1e-12) for a, b in zip(loss, losses[0]))
            rows.append(
                {
                    "workload": name,
                    "form": form,
                    "ms": ms,
                    "speedup_over_eager": eager_ms / ms,
                    "first_call_ms": first * 1e3,
                    "samples": samples,
                    "spread": spread(ts),
                    "loss_difference": difference,
                }
            )
            print(f"  {name} {form}: {ms:.3f} ms", file=sys.stderr)
    report = {"device": str(device), "torch": torch.__version__, "timing": timing, "rows": rows}
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(f"torch {torch.__version__} on {device}\n{timing}\n")
        print(f"{'workload':18} {'form':30} {'ms':>10} {'vs eager':>9} {'first call ms':>14} {'samples':>8}")
        for r in rows:
            if "error" in r:
                print(f"{r['workload']:18} {r['form']:30} failed: {r['error']}")
                continue
            print(
                f"{r['workload']:18} {r['form']:30} {r['ms']:10.3f} {r['speedup_over_eager']:8.2f}x "
                f"{r['first_call_ms']:14.1f} {r['samples']:8}"
            )


if __name__ == "__main__":
    main()
