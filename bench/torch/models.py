"""PyTorch's side of `bench models`: the same workloads, eager against torch.compile.

    python bench/torch/models.py --device cuda --json > torch-models.json
    python bench/torch/models.py --device cuda --dtype bf16 --json > torch-models-bf16.json
    python bench/torch/models.py --device cpu --only mlp

Each workload mirrors models/src/phase5.rs op for op (the MLP 512-2048-512 with exact GELU, the
naive pre-norm transformer block, naive softmax and layer norm, the 16 M-element pointwise
chains), so the two JSON reports compare row by row. Timing follows the engine's `Bench`: the
first call of the compiled function on the wall clock (tracing and compiling), then eager and
compiled samples taken in turns; on CUDA each sample is bracketed by CUDA events after a write of
256 MB that evicts the L2, on the CPU by a monotonic clock. Medians are reported. `--dtype bf16`
(or f16) converts every input and parameter, as `bench models --dtype` does (`model.to(dtype)`).
"""

import argparse
import json
import math
import statistics
import sys
import time

import torch
import torch.nn.functional as F

MLP_FEATURES, MLP_HIDDEN = 512, 2048
MLP_BATCHES = [1, 16, 256, 4096]
LAYER_NORM_EPS = 1e-5
POINTWISE_ELEMENTS = 1 << 24
# (batch, seq, d_model, heads), as BlockShape::SMALL and BlockShape::LARGE.
BLOCK_SHAPES = [(4, 128, 512, 8), (8, 1024, 768, 12)]
CPU_SECONDS_PER_WORKLOAD = 3.0
DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}


def param(shape, fan_in, gen, device):
    return (torch.randn(shape, generator=gen) / math.sqrt(fan_in)).to(device)


def naive_softmax(x):
    shifted = torch.exp(x - x.amax(-1, keepdim=True))
    return shifted / shifted.sum(-1, keepdim=True)


def naive_layer_norm(x, weight, bias):
    centered = x - x.mean(-1, keepdim=True)
    variance = (centered * centered).mean(-1, keepdim=True)
    return centered / torch.sqrt(variance + LAYER_NORM_EPS) * weight + bias


def mlp(batch, device, gen, dtype):
    w1 = param((MLP_HIDDEN, MLP_FEATURES), MLP_FEATURES, gen, device).to(dtype)
    b1 = param((MLP_HIDDEN,), MLP_FEATURES, gen, device).to(dtype)
    w2 = param((MLP_FEATURES, MLP_HIDDEN), MLP_HIDDEN, gen, device).to(dtype)
    b2 = param((MLP_FEATURES,), MLP_HIDDEN, gen, device).to(dtype)

    def forward(x):
        return F.linear(F.gelu(F.linear(x, w1, b1)), w2, b2)

    return f"mlp bs={batch}", forward, [torch.randn(batch, MLP_FEATURES, generator=gen).to(device)]


def block(shape, device, gen, dtype):
    batch, seq, d, heads = shape
    head_dim = d // heads

    def p(shape, fan_in):
        return param(shape, fan_in, gen, device).to(dtype)

    ones_zeros = (torch.ones(d), torch.zeros(d), torch.ones(d), torch.zeros(d))
    ln1_w, ln1_b, ln2_w, ln2_b = (t.to(device, dtype) for t in ones_zeros)
    wq, wk, wv, wo = (p((d, d), d) for _ in range(4))
    bq, bk, bv, bo = (p((d,), d) for _ in range(4))
    fc1_w, fc1_b = p((4 * d, d), d), p((4 * d,), d)
    fc2_w, fc2_b = p((d, 4 * d), 4 * d), p((d,), 4 * d)

    def attention(x):
        def split(t):
            return t.reshape(batch, seq, heads, head_dim).transpose(1, 2)

        q, k, v = split(F.linear(x, wq, bq)), split(F.linear(x, wk, bk)), split(F.linear(x, wv, bv))
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(head_dim)
        attended = naive_softmax(scores) @ v
        return F.linear(attended.transpose(1, 2).contiguous().reshape(batch, seq, d), wo, bo)

    def forward(x):
        h = x + attention(naive_layer_norm(x, ln1_w, ln1_b))
        hidden = F.gelu(F.linear(naive_layer_norm(h, ln2_w, ln2_b), fc1_w, fc1_b))
        return h + F.linear(hidden, fc2_w, fc2_b)

    x = torch.randn(batch, seq, d, generator=gen).to(device)
    return f"block {batch}x{seq}x{d}", forward, [x]


def pointwise_chain(ops):
    """`ops` ops cycling through sin(x), x * 1.0001, x + 0.5, as phase5::pointwise_chain."""

    def forward(x):
        for i in range(ops):
            x = torch.sin(x) if i % 3 == 0 else x * 1.0001 if i % 3 == 1 else x + 0.5
        return x

    return forward


def repeated_tanh(x):
    for _ in range(8):
        x = torch.tanh(x)
    return x


def workloads(device, dtype):
    """The workloads of `bench models`, in its order, each built when reached, every input and
    parameter converted to `dtype`."""
    gen = torch.Generator().manual_seed(0)
    # The tensors are made on `device` in float32, then converted: the converting device is one
    # that holds them, whatever the dtype.
    target = torch.device(device)

    def converted(build):
        name, forward, inputs = build()
        return name, forward, [t.to(dtype) for t in inputs]

    for batch in MLP_BATCHES:
        yield lambda batch=batch: converted(lambda: mlp(batch, target, gen, dtype))
    for shape in BLOCK_SHAPES:
        yield lambda shape=shape: converted(lambda: block(shape, target, gen, dtype))

    def big(*shape):
        return torch.randn(*shape, generator=gen).to(device, dtype)

    yield lambda: ("naive softmax 4096x4096", naive_softmax, [big(4096, 4096)])
    yield lambda: (
        "naive layer norm 8192x1024",
        naive_layer_norm,
        [big(8192, 1024), (torch.rand(1024, generator=gen) + 0.5).to(device, dtype), big(1024)],
    )
    yield lambda: (
        "add-relu-mul 16M",
        lambda x, bias: torch.relu(x + bias) * 2.0,
        [big(POINTWISE_ELEMENTS), big(POINTWISE_ELEMENTS)],
    )
    for ops in (8, 16):
        yield lambda ops=ops: (f"{ops}-op chain 16M", pointwise_chain(ops), [big(POINTWISE_ELEMENTS)])
    yield lambda: ("8x tanh 16M", repeated_tanh, [big(POINTWISE_ELEMENTS)])


class Timer:
    """Interleaved samples of several functions, medians on the device's clock; on CUDA the L2 is
    evicted before each sample unless `flush_cache` is false (a training loop's steady state)."""

    def __init__(self, device, flush_cache=True):
        self.device = device
        flushes = flush_cache and device.type == "cuda"
        self.flush = torch.empty(256 << 20, dtype=torch.int8, device=device) if flushes else None

    def sync(self):
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def once(self, f):
        self.sync()
        start = time.perf_counter()
        out = f()
        self.sync()
        return out, time.perf_counter() - start

    def interleaved(self, fs, samples, warmup):
        for _ in range(warmup):
            for f in fs:
                f()
        self.sync()
        times = [[] for _ in fs]
        if self.device.type == "cuda":
            events = [[(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(samples)] for _ in fs]
            for s in range(samples):
                for f, ev in zip(fs, events):
                    if self.flush is not None:
                        self.flush.zero_()
                    ev[s][0].record()
                    f()
                    ev[s][1].record()
            self.sync()
            for ts, ev in zip(times, events):
                ts.extend(start.elapsed_time(end) / 1e3 for start, end in ev)
        else:
            for _ in range(samples):
                for f, ts in zip(fs, times):
                    start = time.perf_counter()
                    f()
                    ts.append(time.perf_counter() - start)
        return times


def spread(samples):
    if len(samples) < 2:
        return 0.0
    q = statistics.quantiles(samples, n=4, method="inclusive")
    return (q[2] - q[0]) / statistics.median(samples)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--samples", type=int, default=25)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--only", action="append", default=[])
    parser.add_argument("--dtype", choices=sorted(DTYPES), default="f32")
    args = parser.parse_args()
    dtype = DTYPES[args.dtype]
    device = torch.device(args.device)
    timer = Timer(device)
    timing = (
        "CUDA: median of interleaved CUDA-event samples, L2 flushed before each"
        if device.type == "cuda"
        else f"CPU ({torch.get_num_threads()} threads): median of interleaved wall-clock samples, ~3 s per workload"
    )
    rows = []
    with torch.no_grad():
        for build in workloads(device, dtype):
            name, forward, inputs = build()
            if args.only and not any(o in name for o in args.only):
                continue
            torch._dynamo.reset()
            compiled = torch.compile(forward)
            eager_out, eager_once = timer.once(lambda: forward(*inputs))
            compiled_out, first_call = timer.once(lambda: compiled(*inputs))
            scale = max(1.0, eager_out.abs().max().item())
            difference = (eager_out.float() - compiled_out.float()).abs().max().item() / scale
            del eager_out, compiled_out
            samples, warmup = args.samples, args.warmup
            if device.type == "cpu":
                samples = max(1, min(args.samples, int(CPU_SECONDS_PER_WORKLOAD / (2 * eager_once))))
                warmup = warmup if eager_once < 0.05 else 0
            eager, comp = timer.interleaved([lambda: forward(*inputs), lambda: compiled(*inputs)], samples, warmup)
            row = {
                "workload": name,
                "eager_ms": statistics.median(eager) * 1e3,
                "compiled_ms": statistics.median(comp) * 1e3,
                "speedup": statistics.median(eager) / statistics.median(comp),
                "first_call_ms": first_call * 1e3,
                "samples": samples,
                "eager_spread": spread(eager),
                "compiled_spread": spread(comp),
                "max_difference": difference,
            }
            print(f"  {name}: eager {row['eager_ms']:.3f} ms, torch.compile {row['compiled_ms']:.3f} ms", file=sys.stderr)
            rows.append(row)
    report = {"device": str(device), "dtype": args.dtype, "torch": torch.__version__, "timing": timing, "rows": rows}
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(f"torch {torch.__version__} on {device} in {args.dtype}\n{timing}\n")
        print(f"{'workload':28} {'eager ms':>10} {'compiled ms':>12} {'speedup':>8} {'first call ms':>14} {'samples':>8}")
        for r in rows:
            print(
                f"{r['workload']:28} {r['eager_ms']:10.3f} {r['compiled_ms']:12.3f} {r['speedup']:7.2f}x "
                f"{r['first_call_ms']:14.1f} {r['samples']:8}"
            )


if __name__ == "__main__":
    main()
