"""PyTorch's side of `bench fp8`: the MLP 512-2048-512 with both products in FP8 against bf16.

    python bench/torch/fp8.py --json > torch-fp8.json
    python bench/torch/fp8.py --batch 1024

The forms mirror bench/src/fp8.rs: weights quantized once to e4m3 with one scale per tensor
(`max|w| / 448`); activations quantized on every call, either with a scale measured on the call
(dynamic) or with one fixed from a calibration batch (static: `max|t|` there times a margin of 2,
over 448, then divide, clamp to +-448 and cast); each product through `torch._scaled_mm` with its
bias and a bf16 output; GELU in bf16. Each form runs eager and under torch.compile, and the static
one also with `use_fast_accum=True` (the FP8 tensor cores' faster, less exact accumulation, which
`bench fp8` does not use). The bare products are timed too, at the MLP's shapes and at a wider
one, so the report shows where FP8 pays. Timing is models.py's: interleaved CUDA-event samples,
the L2 evicted before each, medians. Errors are `max |y - y_f32| / max |y_f32|`.
"""

import argparse
import json
import statistics
import sys

import torch
import torch.nn.functional as F

from models import MLP_FEATURES, MLP_HIDDEN, Timer, param

E4M3 = torch.float8_e4m3fn
E4M3_MAX = 448.0
CALIBRATION_MARGIN = 2.0


def quantize(t, scale):
    """`t / scale`, clamped to e4m3's finite range and cast."""
    return (t.float() / scale).clamp(-E4M3_MAX, E4M3_MAX).to(E4M3)


def amax_scale(t, margin=1.0):
    return (t.abs().amax().float() * margin / E4M3_MAX).reshape(())


def fp8_forms(w1, b1, w2, b2, calibration):
    """The dynamic and static FP8 forward functions of the MLP, weights quantized once."""
    s1, s2 = amax_scale(w1), amax_scale(w2)
    # `_scaled_mm` takes its second operand column-major: the transposed view of a row-major weight.
    q1, q2 = quantize(w1, s1).t(), quantize(w2, s2).t()
    b1, b2 = b1.to(torch.bfloat16), b2.to(torch.bfloat16)

    def product(xq, sx, q, s, bias, fast):
        return torch._scaled_mm(xq, q, scale_a=sx, scale_b=s, bias=bias, out_dtype=torch.bfloat16, use_fast_accum=fast)

    def dynamic(x):
        sx = amax_scale(x)
        h = F.gelu(product(quantize(x, sx), sx, q1, s1, b1, False))
        sh = amax_scale(h)
        return product(quantize(h, sh), sh, q2, s2, b2, False)

    def hidden_static(x, sx):
        return F.gelu(product(quantize(x, sx), sx, q1, s1, b1, False))

    sx = amax_scale(calibration, CALIBRATION_MARGIN)
    sh = amax_scale(hidden_static(calibration, sx), CALIBRATION_MARGIN)

    def static(fast):
        def forward(x):
            h = F.gelu(product(quantize(x, sx), sx, q1, s1, b1, fast))
            return product(quantize(h, sh), sh, q2, s2, b2, fast)

        return forward

    return dynamic, static(False), static(True), (sx.item(), sh.item())


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, action="append")
    parser.add_argument("--samples", type=int, default=50)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    device = torch.device("cuda")
    if torch.cuda.get_device_capability(device) < (8, 9):
        sys.exit("FP8 tensor cores need compute capability 8.9 or newer")
    timer = Timer(device)
    gen = torch.Generator().manual_seed(0)
    w1 = param((MLP_HIDDEN, MLP_FEATURES), MLP_FEATURES, gen, device)
    b1 = param((MLP_HIDDEN,), MLP_FEATURES, gen, device)
    w2 = param((MLP_FEATURES, MLP_HIDDEN), MLP_HIDDEN, gen, device)
    b2 = param((MLP_FEATURES,), MLP_HIDDEN, gen, device)
    report = {"device": torch.cuda.get_device_name(device), "torch": torch.__version__, "batches": [], "products": []}
    with torch.no_grad():
        for batch in args.batch or [4096, 1024]:
            x = torch.randn(batch, MLP_FEATURES, generator=gen).to(device)
            calibration = torch.randn(batch, MLP_FEATURES, generator=gen).to(device).to(torch.bfloat16)
            reference = F.linear(F.gelu(F.linear(x, w1, b1)), w2, b2)
            wb = [t.to(torch.bfloat16) for t in (w1, b1, w2, b2)]

            def bf16(x, wb=wb):
                return F.linear(F.gelu(F.linear(x, wb[0], wb[1])), wb[2], wb[3])

            dynamic, static, static_fast, scales = fp8_forms(w1, b1, w2, b2, calibration)
            xb = x.to(torch.bfloat16)
            forms = {"bf16": bf16, "fp8 dynamic": dynamic, "fp8 static": static, "fp8 static fast-accum": static_fast}
            fns = []
            rows = []
            for name, f in forms.items():
                torch._dynamo.reset()
                compiled = torch.compile(f)
                for label, g in ((f"{name} eager", f), (f"{name} compiled", compiled)):
                    y = g(xb)
                    error = ((y.float() - reference).abs().max() / reference.abs().max()).item()
                    rows.append({"form": label, "relative_error": error})
                    fns.append(lambda g=g: g(xb))
            times = timer.interleaved(fns, args.samples, args.warmup)
            bf16_compiled = None
            for row, ts in zip(rows, times):
                row["ms"] = statistics.median(ts) * 1e3
                if row["form"] == "bf16 compiled":
                    bf16_compiled = row["ms"]
            for row in rows:
                row["speedup_over_bf16_compiled"] = bf16_compiled / row["ms"]
                print(f"  batch {batch}: {row['form']:28} {row['ms']:.4f} ms  {row['speedup_over_bf16_compiled']:.2f}x  error {row['relative_error']:.1e}", file=sys.stderr)
            report["batches"].append({"batch": batch, "static_scales": scales, "rows": rows})
        # The bare products: the MLP's two shapes, and a square one where the tensor cores bound both.
        for m, k, n in [(4096, 512, 2048), (4096, 2048, 512), (8192, 8192, 8192)]:
            a = torch.randn(m, k, generator=gen).to(device)
            b = torch.randn(n, k, generator=gen).to(device)
            sa, sb = amax_scale(a), amax_scale(b)
            aq, bq = quantize(a, sa), quantize(b, sb).t()
            ab, bb = a.to(torch.bfloat16), b.to(torch.bfloat16).t()
            fns = [
                lambda: ab @ bb,
                lambda: torch._scaled_mm(aq, bq, scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16),
                lambda: torch._scaled_mm(aq, bq, scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16, use_fast_accum=True),
            ]
            ts = [statistics.median(t) * 1e3 for t in timer.interleaved(fns, args.samples, args.warmup)]
            flops = 2 * m * k * n
            row = {"m": m, "k": k, "n": n, "bf16_ms": ts[0], "fp8_ms": ts[1], "fp8_fast_accum_ms": ts[2],
                   "bf16_tflops": flops / ts[0] / 1e9, "fp8_tflops": flops / ts[1] / 1e9, "fp8_fast_accum_tflops": flops / ts[2] / 1e9}
            print(f"  {m}x{k}x{n}: bf16 {ts[0]:.4f} ms, fp8 {ts[1]:.4f} ms ({ts[0] / ts[1]:.2f}x), fast-accum {ts[2]:.4f} ms ({ts[0] / ts[2]:.2f}x)", file=sys.stderr)
            report["products"].append(row)
    if args.json:
        print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
