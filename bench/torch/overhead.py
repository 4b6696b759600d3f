"""What a call costs the host in PyTorch, eager and torch.compile, and where the MLP's curves cross.

    python bench/torch/overhead.py --device cuda --json > torch-overhead.json
    python bench/torch/overhead.py --device cpu

The figures calibrate the engine's `ENGINE_HOST_OVERHEAD=python` (see
engine/src/host_overhead.rs and bench/NOTES-overhead.md):

- `eager_op_us`: host time of one eager op on a one-element tensor (`x + 1.0`): Python, argument
  parsing, the dispatcher, the launch; on CUDA the loop never waits for the device, so this is
  what a launch-bound eager model pays per op.
- `compiled_call_us`: host time of one call of `torch.compile(lambda x: x + 1.0)`: the guards,
  AOTAutograd's runtime wrappers, Inductor's `call` function and its one kernel launch.
- `compiled_kernel_us`: what each more kernel adds to a compiled call: 16 chained products of a
  1 x 8 row by an 8 x 8 matrix (16 library calls, which Inductor never fuses) against one.
- `mlp`: the MLP 512-2048-512 (as models/src/phase5.rs) eager and compiled at batches 1 to
  4096, each the mean of a loop of calls ended by one synchronisation: per-call cost as a caller
  who keeps the device busy sees it.
"""

import argparse
import json
import math
import time

import torch
import torch.nn.functional as F

CALLS = 2000


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def per_call_us(f, device, calls=CALLS, rounds=5):
    """Median over `rounds` of the mean wall time of `calls` calls, in microseconds."""
    for _ in range(max(10, calls // 10)):
        f()
    sync(device)
    means = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(calls):
            f()
        sync(device)
        means.append((time.perf_counter() - start) / calls * 1e6)
    means.sort()
    return means[len(means) // 2]


def chain(ops):
    def forward(x):
        for i in range(ops):
            x = x * 1.0001 if i % 2 else x + 0.5
        return x

    return forward


def matmuls(w, count):
    def forward(x):
        for _ in range(count):
            x = x @ w
        return x

    return forward


def mlp(device):
    gen = torch.Generator().manual_seed(0)

    def param(shape, fan_in):
        return (torch.randn(shape, generator=gen) / math.sqrt(fan_in)).to(device)

    w1, b1 = param((2048, 512), 512), param((2048,), 512)
    w2, b2 = param((512, 2048), 2048), param((512,), 2048)
    return lambda x: F.linear(F.gelu(F.linear(x, w1, b1)), w2, b2)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    device = torch.device(args.device)
    report = {"device": str(device), "torch": torch.__version__, "threads": torch.get_num_threads()}
    with torch.no_grad():
        x = torch.ones(1, device=device)
        report["eager_op_us"] = per_call_us(lambda: x + 1.0, device)
        torch._dynamo.reset()
        one = torch.compile(chain(1))
        report["compiled_call_us"] = per_call_us(lambda: one(x), device)
        w = torch.ones(8, 8, device=device) / 8
        x8 = torch.ones(1, 8, device=device)
        torch._dynamo.reset()
        one_mm, sixteen_mm = torch.compile(matmuls(w, 1)), torch.compile(matmuls(w, 16))
        many = per_call_us(lambda: sixteen_mm(x8), device) - per_call_us(lambda: one_mm(x8), device)
        report["compiled_kernel_us"] = many / 15
        forward = mlp(device)
        rows = []
        for batch in [1, 4, 16, 64, 256, 1024, 4096]:
            inp = torch.randn(batch, 512, device=device)
            torch._dynamo.reset()
            compiled = torch.compile(forward)
            calls = 400 if device.type == "cuda" else max(5, int(2000 / batch))
            eager = per_call_us(lambda: forward(inp), device, calls)
            comp = per_call_us(lambda: compiled(inp), device, calls)
            rows.append({"batch": batch, "eager_us": eager, "compiled_us": comp, "speedup": eager / comp})
        report["mlp"] = rows
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(f"torch {report['torch']} on {device} ({report['threads']} threads)")
        for key in ("eager_op_us", "compiled_call_us", "compiled_kernel_us"):
            print(f"{key:20} {report[key]:8.2f}")
        print(f"{'batch':>6} {'eager us':>10} {'compiled us':>12} {'speedup':>8}")
        for r in rows:
            print(f"{r['batch']:6} {r['eager_us']:10.1f} {r['compiled_us']:12.1f} {r['speedup']:7.2f}x")


if __name__ == "__main__":
    main()
