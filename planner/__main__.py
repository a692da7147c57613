"""`python -m planner …`: plan a deployment, check a plan against an engine's startup log, list models and GPUs.

Bad input prints one line naming the option and exits with status 2. A plan that does not fit is
printed, and the command exits with status 3 saying by how much.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from planner import __version__
from planner.checklog import EngineLog, compare, format_checks, log_request, parse_log
from planner.engines import ENGINES
from planner.intervals import describe
from planner.params import count_params
from planner.perf import ARRIVALS
from planner.plan import AUTO_PRECISION, KEEP_BF16_PARTS, PlanRequest, check_cached_prefix, plan
from planner.specs import GpuSpec, gpu_from_file, gpus, models, precisions

GIB = 1 << 30
EXIT_DOES_NOT_FIT = 3  # 2 is bad input


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # one line, exit 2
        self.exit(2, f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="python -m planner", description="LLM serving capacity planner")
    parser.add_argument("--version", action="version", version=f"planner {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    p = commands.add_parser("plan", help="plan a deployment")
    p.add_argument("--model", required=True, help="catalog key or a path to a Hugging Face config.json")
    _add_common(p)
    p.add_argument("--gpus-per-node", type=int, default=8)
    p.add_argument("--concurrency", type=int, default=1)
    p.add_argument("--ep", type=int)
    p.add_argument("--dp", type=int)
    p.add_argument("--keep-bf16", action="append", default=[], choices=KEEP_BF16_PARTS)
    p.add_argument("--input-len", type=int, help="prompt tokens per request (default 1024)")
    p.add_argument("--output-len", type=int, help="generated tokens per request (default 1024)")
    p.add_argument(
        "--cached-prefix-len",
        type=int,
        default=0,
        help="leading prompt tokens already in the engine's prefix cache, not prefilled again (below --input-len)",
    )
    p.add_argument(
        "--arrival",
        choices=ARRIVALS,
        default="burst",
        help="burst: the closed loop's requests sent at once, waves aligned (vllm bench serve's default); "
        "spread: one at a time; poisson: an open loop at --request-rate",
    )
    p.add_argument(
        "--request-rate",
        type=float,
        help="with --arrival poisson: requests/s over all replicas (--concurrency: the most in flight)",
    )
    p.add_argument(
        "--range-ratio",
        type=float,
        default=1.0,
        help="each request's input and output lengths drawn uniformly from [ratio x len, len], as "
        "sglang.bench_serving --random-range-ratio draws them (default 1: fixed lengths; 0: that client's own "
        "default, prompts from 1 token)",
    )
    p.add_argument(
        "--num-prompts",
        type=int,
        help="plan a finite benchmark run of this many requests (its first wave starts at once: "
        "vllm bench serve / sglang.bench_serving --num-prompts); default: the steady state",
    )
    p.add_argument("--calibration", help="calibration profile JSON (python -m planner.calibrate run)")
    c = commands.add_parser("check-log", help="hold the plan for a startup log's settings against the log")
    c.add_argument("log", metavar="FILE", help="an engine startup log (vLLM, SGLang)")
    c.add_argument("--model", help="catalog key or config.json (default: the log's model, matched in the catalog)")
    _add_common(c)
    commands.add_parser("models", help="list catalog models")
    commands.add_parser("gpus", help="list catalog GPUs")
    return parser


def _add_common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--precision", default=None, choices=[*sorted(precisions()), AUTO_PRECISION])
    p.add_argument("--group-size", type=int)
    p.add_argument("--kv-dtype", choices=["bf16", "fp8"], default=None)
    p.add_argument("--gpu", choices=sorted(gpus()))
    p.add_argument("--gpu-spec", metavar="FILE.json", help="a GPU outside the catalog (catalog fields as JSON)")
    p.add_argument("--gpu-memory-utilization", type=float)
    p.add_argument("--max-model-len", type=int)
    p.add_argument("--tp", type=int)
    p.add_argument("--pp", type=int)
    p.add_argument("--engine", choices=ENGINES, default=None)
    p.add_argument("--engine-version")
    p.add_argument("--max-num-batched-tokens", type=int)
    p.add_argument("--max-num-seqs", type=int)
    p.add_argument(
        "--scheduler-recv-interval", type=int, help="SGLang: new requests are taken in once every N decode steps"
    )
    p.add_argument("--format", choices=["json", "table"], default="table")


def _gpu_argument(args: argparse.Namespace, log: EngineLog | None = None) -> str | GpuSpec:
    if args.gpu_spec:
        return gpu_from_file(args.gpu_spec)
    if args.gpu:
        return str(args.gpu)
    total = log.figures.get("total_gpu_memory") if log else None
    if total:  # the log's CUDA total picks the catalog GPU (within 0.5%)
        for key, device in gpus().items():
            if abs(device.memory_bytes - total) <= 0.005 * total:
                return key
    raise ValueError("--gpu: required (or --gpu-spec FILE.json)")


def _model_from_log(log: EngineLog) -> tuple[str, str]:
    """(catalog key, precision) for the log's model path, matched on the repository name."""
    path = str(log.settings.get("model_path", "")).rstrip("/")
    name = path.rsplit("/", 1)[-1].lower()
    matches = [
        (len(spec.hf_repo), key, spec)
        for key, spec in models().items()
        if spec.hf_repo and name.startswith(spec.hf_repo.rsplit("/", 1)[-1].lower().removesuffix("-instruct"))
    ]
    if not name or not matches:
        raise ValueError(f"--model: the log's model {path or '(none)'} is not in the catalog; pass --model")
    _length, key, spec = max(matches)
    for marker, scheme in (("fp8", "fp8"), ("w8a8", "w8a8"), ("int8", "w8a8"), ("awq", "w4a16"), ("gptq", "w4a16")):
        if marker in name:
            return key, scheme
    return key, spec.checkpoint_precision or "bf16"


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


def _calibration(path: str | None) -> Any:
    if not path:
        return None
    from planner.calibrate.profile import load

    return load(path)


def _intervals(contract: dict[str, Any]) -> list[str]:
    """One line a figure: "TPOT 9.9 ms, 80% interval 8.6-19.5 ms, from 41 held-out runs"."""
    lines = []
    for path, interval in contract["intervals"].items():
        figure: Any = contract
        for step in path.split("."):
            figure = figure[step]
        lines.append(f"  {describe(path, figure, interval)}")
    return ["intervals (from the planner's errors on runs it was not fitted to; basis in the JSON):", *lines]


def _table(contract: dict[str, Any]) -> str:
    m, p = contract["memory_per_gpu"], contract["parallel"]
    lines = [
        f"model {contract['model']} @ {contract['precision']}: {contract['params']['total'] / 1e9:.1f}B params, "
        f"{contract['params']['active_per_token'] / 1e9:.1f}B active",
        f"layout tp={p['tp']} pp={p['pp']} ep={p['ep']} dp={p['dp']} on {p['gpus']} GPUs ({p['nodes']} node(s)); "
        f"fits: {contract['fits']}; verdict: {contract['verdict']}",
        f"per GPU: weights {m['weights'] / GIB:.1f} GiB, KV {m['kv_cache'] / GIB:.1f} GiB, activations "
        f"{m['activations'] / GIB:.1f} GiB, overhead {m['overhead'] / GIB:.1f} GiB of {m['capacity'] / GIB:.1f} GiB",
        f"KV: {contract['kv_cache']['bytes_per_token']} B/token (model), "
        f"{contract['kv_cache']['bytes_per_token_per_gpu']} B/token/GPU, {contract['kv_cache']['capacity_tokens']} tokens; "
        f"max concurrency {contract['max_concurrency']}",
        f"throughput: {contract['throughput']['decode_tokens_per_s']} tok/s, TPOT {contract['throughput']['tpot_ms']} ms, "
        f"TTFT {contract['throughput']['ttft_ms']} ms",
        *_intervals(contract),
        f"{contract['engine']['name']} {contract['engine']['version']} accounting: "
        + ", ".join(
            f"{name} {value:,}" if "tokens" in name else f"{name} {value / GIB:.2f} GiB"
            for name, value in contract["engine"]["memory_per_gpu"].items()
        ),
        *(f"{name}: {command}" for name, command in contract["serving"].items()),
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
        if args.command == "check-log":
            return _check_log(args)
        check_cached_prefix(args.cached_prefix_len, args.input_len)
        chosen_model = _model_argument(args.model)
        request = PlanRequest(
            model=chosen_model,
            # A pasted config.json: serve the checkpoint directory it came from, not a made-up name.
            model_path=None if isinstance(chosen_model, str) else str(Path(args.model).resolve().parent),
            precision=args.precision or AUTO_PRECISION,
            gpu=_gpu_argument(args),
            group_size=args.group_size,
            kv_dtype=args.kv_dtype or "bf16",
            gpus_per_node=args.gpus_per_node,
            max_model_len=args.max_model_len,
            concurrency=args.concurrency,
            tp=args.tp,
            pp=args.pp,
            ep=args.ep,
            dp=args.dp,
            gpu_memory_utilization=args.gpu_memory_utilization or 0.9,
            keep_bf16=tuple(args.keep_bf16),
            engine=args.engine or "vllm",
            engine_version=args.engine_version,
            max_num_batched_tokens=args.max_num_batched_tokens,
            max_num_seqs=args.max_num_seqs,
            scheduler_recv_interval=args.scheduler_recv_interval,
            input_len=args.input_len,
            output_len=args.output_len,
            cached_prefix_len=args.cached_prefix_len,
            calibration=_calibration(args.calibration),
            arrival=args.arrival,
            request_rate=args.request_rate,
            range_ratio=args.range_ratio,
            num_prompts=args.num_prompts,
        )
        result = plan(request)
        contract = result.as_contract()
    except ValueError as exc:
        return _usage_error(args.command, exc)
    print(json.dumps(contract, indent=2) if args.format == "json" else _table(contract))
    if not contract["fits"]:  # the plan is printed for its figures, and the exit status says it fails
        print(f"python -m planner plan: {_shortfall(contract, result.chosen.cuda_graphs_fit)}", file=sys.stderr)
        return EXIT_DOES_NOT_FIT
    return 0


def _shortfall(contract: dict[str, Any], graphs_fit: bool) -> str:
    margin, layout = contract["fit_margin"], contract["parallel"]
    causes = []
    if margin["kv_bytes_per_gpu"] < 0:
        kv = f"the KV cache is {-margin['kv_bytes_per_gpu'] / GIB:.1f} GiB per GPU short"
        if margin["sequences"] < 0:
            kv += f", {-margin['sequences']} sequences short of the concurrency"
        causes.append(kv)
    if not graphs_fit:  # the KV cache may hold them all: the graphs stop the engine
        causes.append(contract["fit_reason"])
    short = "does not fit: " + ("; ".join(causes) or contract["fit_reason"])
    if contract["starts"]:
        short += "; the engine starts, and the requests beyond what it holds wait"
    elif contract["max_concurrency"] < layout["dp"]:
        short += "; the engine does not start (not one max_model_len sequence per replica)"
    else:
        short += "; the engine does not start"
    return short + (
        f" (tp={layout['tp']} pp={layout['pp']} ep={layout['ep']} dp={layout['dp']}, "
        f"{contract['max_concurrency']} full-length sequences held)"
    )


def _usage_error(command: str, exc: ValueError) -> int:
    message = str(exc).splitlines()[0]
    option = message.split(":", 1)[0].replace("_", "-")
    print(
        f"python -m planner {command}: error: --{option.lstrip('-')}: {message.split(':', 1)[-1].strip()}"
        if ":" in message
        else f"python -m planner {command}: error: {message}",
        file=sys.stderr,
    )
    return 2


def _check_log(args: argparse.Namespace) -> int:
    try:
        text = Path(args.log).read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise ValueError(f"log: cannot read {args.log}: {exc}") from None
    log = parse_log(text)
    settings = log.settings
    if args.model:
        model, default_precision = _model_argument(args.model), AUTO_PRECISION
    else:
        model, default_precision = _model_from_log(log)
    device = _gpu_argument(args, log)
    request = log_request(
        log,
        model=model,
        precision=args.precision or default_precision,
        gpu=device,
        engine_version=args.engine_version,
        engine=args.engine,
        group_size=args.group_size,
        kv_dtype=args.kv_dtype,
        max_model_len=args.max_model_len,
        tp=args.tp,
        pp=args.pp,
        gpu_memory_utilization=args.gpu_memory_utilization,
        max_num_batched_tokens=args.max_num_batched_tokens,
        max_num_seqs=args.max_num_seqs,
    )
    engine, version = request.engine, request.engine_version
    result = plan(request)
    checks = compare(log, result)
    if args.format == "json":
        rows = [{"figure": c.name, "plan": c.planned, "log": c.logged, "error": c.error} for c in checks]
        print(json.dumps({"engine": engine, "version": version, "settings": settings, "figures": rows}, indent=2))
        return 0
    layout = result.chosen.layout
    print(
        f"{engine} {version or '(version not in log)'}: {result.model.key} @ {result.precision.key} on "
        f"{result.gpu.name}, tp={layout.tp} pp={layout.pp}, gpu_memory_utilization={request.gpu_memory_utilization}, "
        f"max_model_len={result.max_model_len}, max_num_batched_tokens={request.max_num_batched_tokens}, "
        f"max_num_seqs={request.max_num_seqs}"
    )
    print(format_checks(checks) if checks else "the log has none of the figures the planner computes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
