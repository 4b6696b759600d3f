"""Which kernels torch.compile runs for the course's large block, and how long each takes.

    python bench/torch/block_profile.py [--dtype bf16] [--calls 10]

Builds the block of `models.py` (8 x 1024 x 768, 12 heads) on the GPU, compiles it, warms it up,
and prints `torch.profiler`'s table of CUDA kernels over `--calls` calls: the side of
`engine-bench roofline --only "block 8x1024"` that PyTorch gives (bench/NOTES-precision.md).
"""

import argparse
import os
import sys

import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import models  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dtype", choices=sorted(models.DTYPES), default="bf16")
    parser.add_argument("--calls", type=int, default=10)
    args = parser.parse_args()
    dtype = models.DTYPES[args.dtype]
    gen = torch.Generator().manual_seed(0)
    _, forward, inputs = models.block(models.BLOCK_SHAPES[1], "cuda", gen, dtype)
    x = inputs[0].to(dtype)
    compiled = torch.compile(forward)
    for _ in range(5):
        compiled(x)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(args.calls):
            compiled(x)
        torch.cuda.synchronize()
    print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=20, max_name_column_width=90))


if __name__ == "__main__":
    main()
