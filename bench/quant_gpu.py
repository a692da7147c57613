"""Quantization on a GPU (run on the H200 through the device tool; needs CUDA):

1. Real INT8 W4A8 linear (per-token INT8 activations x per-channel INT8 weights, torch._int_mm)
   vs BF16 linear, at decode (M=1..64) and prefill (M=1024..8192) shapes of Qwen3-30B-A3B's
   experts, as ratios measured in one run; plus the real-vs-fake-quant tolerance.
2. The eval job on a model with Qwen3-30B-A3B's real dimensions and random BF16 weights:
   quantization time and eval throughput (cases/s) for baseline and W4A8.

    python3 bench/quant_gpu.py [--cases-per-category 5] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from planner.evaljob.run import run
from planner.evaljob.tiny import QWEN3_30B_A3B, random_model_spec, train_tokenizer
from planner.quant import numerics
from planner.quant.modules import int8_linear
from planner.quant.schemes import scheme


def cuda_time(fn, repeat: int = 50) -> float:  # type: ignore[no-untyped-def]
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    samples = []
    for _ in range(repeat):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        samples.append(start.elapsed_time(end))
    return statistics.median(samples)


def linear_bench() -> list[dict]:
    rows = []
    hidden, ff = QWEN3_30B_A3B["hidden_size"], QWEN3_30B_A3B["moe_intermediate_size"]
    for name, (out_features, in_features) in {"gate_up": (2 * ff, hidden), "down": (hidden, ff)}.items():
        weight = torch.randn(out_features, in_features, device="cuda", dtype=torch.bfloat16) * 0.02
        fake = scheme("w4a8").weight_fn()(weight).to(torch.bfloat16)
        weight_q, weight_scale = numerics.quantize_int8_per_channel(fake)
        for m in (1, 8, 16, 32, 64, 1024, 2048, 4096, 8192):
            x = torch.randn(m, in_features, device="cuda", dtype=torch.bfloat16)
            bf16 = cuda_time(lambda x=x, weight=weight: torch.nn.functional.linear(x, weight))
            int8 = cuda_time(lambda x=x, wq=weight_q, ws=weight_scale: int8_linear(x, wq, ws))
            x_q = numerics.quantize_int8_per_token(x)[0]
            if m < 17:
                x_q = torch.nn.functional.pad(x_q, (0, 0, 0, 17 - m))
            kernel = cuda_time(lambda x_q=x_q, wq=weight_q: torch._int_mm(x_q, wq.t()))
            real = int8_linear(x, weight_q, weight_scale).float()
            reference = torch.nn.functional.linear(numerics.fake_int8_per_token(x.float()), fake.float())
            error = float((real - reference).norm() / reference.norm())
            rows.append(
                {
                    "matrix": name,
                    "M": m,
                    "bf16_ms": bf16,
                    "int8_w4a8_ms": int8,
                    "int_mm_only_ms": kernel,
                    "int8_over_bf16": int8 / bf16,
                    "int_mm_over_bf16": kernel / bf16,
                    "real_vs_fake_rel_error": error,
                }
            )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cases-per-category", type=int, default=5)
    parser.add_argument("--max-new-tokens", type=int, default=16)
    parser.add_argument("--out", default=tempfile.mkdtemp(prefix="quant-gpu-"))
    parser.add_argument("--skip-linear", action="store_true")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    print(f"gpu: {torch.cuda.get_device_name(0)}, torch {torch.__version__}", flush=True)
    rows = [] if args.skip_linear else linear_bench()
    for row in rows:
        print(
            f"{row['matrix']:8} M={row['M']:5}: bf16 {row['bf16_ms']:.4f} ms, int8 W4A8 {row['int8_w4a8_ms']:.4f} ms "
            f"({row['int8_over_bf16']:.2f}x), _int_mm alone {row['int_mm_only_ms']:.4f} ms ({row['int_mm_over_bf16']:.2f}x), "
            f"real vs fake rel. error {row['real_vs_fake_rel_error']:.2e}",
            flush=True,
        )
    tokenizer = train_tokenizer(out / "tokenizer.json")
    summary = {"linear": rows}
    for scheme_name in ("w4a8",):
        spec = {
            "model": random_model_spec(QWEN3_30B_A3B, tokenizer),
            "scheme": scheme_name,
            "device": "cuda",
            "max_cases_per_category": args.cases_per_category,
            "max_new_tokens": args.max_new_tokens,
        }
        result = run(spec, out / scheme_name)
        summary[scheme_name] = {
            "timing": result["timing"],
            "versions": result["versions"],
            "overall": {k: result["overall"][k] for k in ("n", "failures", "upper_bound_95", "top1_agreement", "kl")},
        }
        print(json.dumps(summary[scheme_name], indent=1), flush=True)
    (out / "summary.json").write_text(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
