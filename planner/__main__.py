"""`python -m planner …`: plan a deployment, list models and GPUs.

Bad input prints one line naming the option and exits with status 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from planner import __version__
from planner.params import count_params
from planner.plan import KEEP_BF16_PARTS, PlanRequest, plan
from planner.specs import gpus, models, precisions

GIB = 1 << 30


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # one line, exit 2
        self.exit(2, f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="python -m planner", description="LLM serving capacity planner")
    parser.add_argument("--version", action="version", version=f"planner {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    p = commands.add_parser("plan", help="plan a deployment")
    p.add_argument("--model", required=True, help="catalog key or a path to a Hugging Face config.json")
    p.add_argument("--precision", required=True, choices=sorted(precisions()))
    p.add_argument("--group-size", type=int)
    p.add_argument("--kv-dtype", choices=["bf16", "fp8"], default="bf16")
    p.add_argument("--gpu", required=True, choices=sorted(gpus()))
    p.add_argument("--gpus-per-node", type=int, default=8)
    p.add_argument("--gpu-memory-utilization", type=float, default=0.9)
    p.add_argument("--max-model-len", type=int)
    p.add_argument("--concurrency", type=int, default=1)
    for name in ("tp", "pp", "ep", "dp"):
        p.add_argument(f"--{name}", type=int)
    p.add_argument("--keep-bf16", action="append", default=[], choices=KEEP_BF16_PARTS)
    p.add_argument("--format", choices=["json", "table"], default="table")
    commands.add_parser("models", help="list catalog models")
    commands.add_parser("gpus", help="list catalog GPUs")
    return parser


def _model_argument(value: str) -> str | dict[str, Any]:
    if value in models():
        return value
    path = Path(value)
    if path.suffix == ".json" or path.exists():
        try:
            return dict(json.loads(path.read_text(encoding="utf-8")))
        except (OSError, ValueError) as exc:
            raise ValueError(f"--model: cannot read config {value}: {exc}") from None
    raise ValueError(f"--model: unknown key {value!r}; known: {', '.join(sorted(models()))}")


def _table(contract: dict[str, Any]) -> str:
    m, p = contract["memory_per_gpu"], contract["parallel"]
    lines = [
        f"model {contract['model']} @ {contract['precision']}: {contract['params']['total'] / 1e9:.1f}B params, "
        f"{contract['params']['active_per_token'] / 1e9:.1f}B active",
        f"layout tp={p['tp']} pp={p['pp']} ep={p['ep']} dp={p['dp']} on {p['gpus']} GPUs ({p['nodes']} node(s)); "
        f"fits: {contract['fits']}",
        f"per GPU: weights {m['weights'] / GIB:.1f} GiB, KV {m['kv_cache'] / GIB:.1f} GiB, activations "
        f"{m['activations'] / GIB:.1f} GiB, overhead {m['overhead'] / GIB:.1f} GiB of {m['capacity'] / GIB:.1f} GiB",
        f"KV: {contract['kv_cache']['bytes_per_token']} B/token (model), "
        f"{contract['kv_cache']['bytes_per_token_per_gpu']} B/token/GPU, {contract['kv_cache']['capacity_tokens']} tokens; "
        f"max concurrency {contract['max_concurrency']}",
        f"throughput: {contract['throughput']['decode_tokens_per_s']} tok/s, TPOT {contract['throughput']['tpot_ms']} ms, "
        f"TTFT {contract['throughput']['ttft_ms']} ms",
        f"vllm: {contract['serving']['vllm']}",
        f"sglang: {contract['serving']['sglang']}",
    ]
    lines += [f"note: {note}" for note in contract["notes"]]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 0
    if args.command == "models":
        for key, spec in sorted(models().items()):
            counted = count_params(spec)
            print(
                f"{key:18} {spec.architecture:32} {counted.total / 1e9:8.1f}B total {counted.active_per_token / 1e9:6.1f}B active"
            )
        return 0
    if args.command == "gpus":
        for key, device in sorted(gpus().items()):
            print(
                f"{key:10} {device.name:40} {device.memory_mib / 1024:6.1f} GiB {device.hbm_bandwidth_gb_per_s:6.0f} GB/s"
            )
        return 0
    try:
        request = PlanRequest(
            model=_model_argument(args.model),
            precision=args.precision,
            gpu=args.gpu,
            group_size=args.group_size,
            kv_dtype=args.kv_dtype,
            gpus_per_node=args.gpus_per_node,
            max_model_len=args.max_model_len,
            concurrency=args.concurrency,
            tp=args.tp,
            pp=args.pp,
            ep=args.ep,
            dp=args.dp,
            gpu_memory_utilization=args.gpu_memory_utilization,
            keep_bf16=tuple(args.keep_bf16),
        )
        contract = plan(request).as_contract()
    except ValueError as exc:
        message = str(exc).splitlines()[0]
        option = message.split(":", 1)[0].replace("_", "-")
        print(
            f"python -m planner plan: error: --{option.lstrip('-')}: {message.split(':', 1)[-1].strip()}"
            if ":" in message
            else f"python -m planner plan: error: {message}",
            file=sys.stderr,
        )
        return 2
    print(json.dumps(contract, indent=2) if args.format == "json" else _table(contract))
    return 0


if __name__ == "__main__":
    sys.exit(main())
