"""python -m planner.inspectjob DIR [--manifest FILE] [--within ROOT]... --out result.json [--max-seconds N] [--max-memory-mb N]

Bounds itself first (RLIMIT_AS for memory, SIGALRM for wall time, RLIMIT_CPU as a backstop), inspects
DIR, and writes result.json atomically (a temporary file in the same directory, then os.replace),
followed by result.json.sha256 as every job payload does (planner.cluster.base.write_result): a job
killed mid-way leaves no result, never half of one. Exit 0 with the report; exit 2 with
`{"format": "governance.inspection/1", "refused": {"file", "message", "reason"}}` when the checkpoint
is refused, differs from --manifest, or the job's own bounds ran out. Never a traceback.
"""

from __future__ import annotations

import argparse
import json
import resource
import signal
import sys
from pathlib import Path
from types import FrameType
from typing import Any

from planner.cluster.base import write_result
from planner.evaljob.manifest import ArtifactMismatch, manifest_difference
from planner.inspectjob.checkpoint import inspect_checkpoint
from planner.inspectjob.report import InspectionRefused, InspectionTimeout

DEFAULT_MAX_SECONDS = 3600  # hashing 1 TB at ~1 GB/s takes ~17 min; the service passes its own
DEFAULT_MAX_MEMORY_MB = 2048


def _alarm(signum: int, frame: FrameType | None) -> None:
    raise InspectionTimeout


def apply_limits(max_seconds: int, max_memory_mb: int) -> None:
    """0 leaves a bound unset (the tests run main() in-process)."""
    if max_memory_mb > 0:
        limit = max_memory_mb << 20
        _, hard = resource.getrlimit(resource.RLIMIT_AS)
        resource.setrlimit(resource.RLIMIT_AS, (limit if hard == resource.RLIM_INFINITY else min(limit, hard), hard))
    if max_seconds > 0:
        signal.signal(signal.SIGALRM, _alarm)
        signal.alarm(max_seconds)
        _, hard = resource.getrlimit(resource.RLIMIT_CPU)
        soft = max_seconds + 30
        resource.setrlimit(resource.RLIMIT_CPU, (soft if hard == resource.RLIM_INFINITY else min(soft, hard), hard))


def inspect_to_json(root: Path, manifest_text: str | None, within: tuple[Path, ...] = ()) -> tuple[int, dict[str, Any]]:
    try:
        report = inspect_checkpoint(root, within=within)
        if manifest_text is not None and report.manifest is not None:
            try:
                difference = manifest_difference(manifest_text, report.manifest)
            except ArtifactMismatch as exc:
                raise InspectionRefused("--manifest", str(exc), reason="manifest") from None
            if difference:
                raise InspectionRefused(*difference, reason="manifest")
        return 0, report.to_json()
    except InspectionRefused as refusal:
        result = refusal.to_json()
    except InspectionTimeout:
        result = InspectionRefused(".", "the inspection ran out of time", reason="time_limit").to_json()
    except MemoryError:
        result = InspectionRefused(
            ".", "the inspection needs more memory than its limit", reason="memory_limit"
        ).to_json()
    except Exception as exc:  # a bug here must still leave a result the service can show, not a traceback
        result = InspectionRefused(".", f"internal error: {type(exc).__name__}: {exc}", reason="internal").to_json()
    return 2, result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m planner.inspectjob", description=__doc__.split("\n\n")[1])
    parser.add_argument("directory", type=Path)
    parser.add_argument("--manifest", type=Path, help="the registered manifest: name the file that differs")
    parser.add_argument("--out", type=Path, required=True, help="result.json to write (atomically)")
    parser.add_argument(
        "--within",
        type=Path,
        action="append",
        default=[],
        help="a model root DIR must resolve inside (repeatable; the service passes the cluster's)",
    )
    parser.add_argument("--max-seconds", type=int, default=DEFAULT_MAX_SECONDS, help="wall-clock bound; 0: none")
    parser.add_argument("--max-memory-mb", type=int, default=DEFAULT_MAX_MEMORY_MB, help="RLIMIT_AS; 0: none")
    parser.add_argument(
        "--job",
        action="store_true",
        help="run as the service's job: a refusal is a verdict in result.json and the job exits 0",
    )
    args = parser.parse_args(argv)
    apply_limits(args.max_seconds, args.max_memory_mb)
    manifest_text = None
    if args.manifest is not None:
        try:
            manifest_text = args.manifest.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            print(f"inspectjob: error: --manifest {args.manifest}: {exc}", file=sys.stderr)
            return 2
    code, result = inspect_to_json(args.directory, manifest_text, tuple(args.within))
    signal.alarm(0)
    try:
        data = json.dumps(result, ensure_ascii=False, sort_keys=True).encode()
    except ValueError as exc:  # UnicodeEncodeError too: the readers refuse what cannot be written, this is a bug
        code, result = (
            2,
            InspectionRefused(".", f"internal error: the report cannot be written: {exc}", reason="internal").to_json(),
        )
        data = json.dumps(result, ensure_ascii=False, sort_keys=True).encode()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    write_result(args.out.parent, data, name=args.out.name)
    refused = result.get("refused")
    print(f"refused: {refused['file']}: {refused['message']}" if refused else f"done: {result['weights_digest']}")
    return 0 if args.job else code
