"""The executor interface, job descriptions, validation of everything that reaches a shell, and the
job script (which writes a sentinel with its exit code so completion is known without accounting)."""

from __future__ import annotations

import argparse
import enum
import hashlib
import json
import os
import re
import shlex
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol


class ClusterError(Exception):
    """`permanent` errors (bad host key, bad auth, invalid input) are not retried."""

    def __init__(self, message: str, *, permanent: bool) -> None:
        super().__init__(message)
        self.message = message
        self.permanent = permanent


class JobState(enum.StrEnum):
    PENDING = "pending"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    TIMEOUT = "timeout"
    RETRYABLE = "retryable"  # PREEMPTED, NODE_FAIL: retry after a grace period
    LOST = "lost"  # vanished without its sentinel

    @property
    def active(self) -> bool:
        return self in (JobState.PENDING, JobState.RUNNING)


# Slurm state -> executor state (planner reference, slurm-ssh.md). COMPLETED is checked against the result.
SLURM_STATES: dict[str, JobState] = {
    "PENDING": JobState.PENDING,
    "CONFIGURING": JobState.PENDING,
    "REQUEUED": JobState.PENDING,
    "REQUEUE_HOLD": JobState.PENDING,
    "REQUEUE_FED": JobState.PENDING,
    "RESV_DEL_HOLD": JobState.PENDING,
    "RUNNING": JobState.RUNNING,
    "COMPLETING": JobState.RUNNING,
    "SUSPENDED": JobState.RUNNING,
    "STAGE_OUT": JobState.RUNNING,
    "SIGNALING": JobState.RUNNING,
    "RESIZING": JobState.RUNNING,
    "COMPLETED": JobState.SUCCEEDED,
    "FAILED": JobState.FAILED,
    "OUT_OF_MEMORY": JobState.FAILED,
    "BOOT_FAIL": JobState.FAILED,
    "DEADLINE": JobState.FAILED,
    "SPECIAL_EXIT": JobState.FAILED,
    "CANCELLED": JobState.CANCELLED,
    "REVOKED": JobState.CANCELLED,
    "TIMEOUT": JobState.TIMEOUT,
    "PREEMPTED": JobState.RETRYABLE,
    "NODE_FAIL": JobState.RETRYABLE,
}


def map_slurm_state(raw: str) -> JobState:
    """'CANCELLED by 1001' -> CANCELLED; unknown states count as running (never as done)."""
    return SLURM_STATES.get(raw.split()[0].rstrip("+") if raw else "", JobState.RUNNING)


_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,100}$")
_TOKEN = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
_GRES = re.compile(r"^[A-Za-z0-9_.:-]{1,64}$")
_PATH = re.compile(r"^/[A-Za-z0-9_./-]{1,400}$")
_FILE = re.compile(r"^[A-Za-z0-9_.-]{1,100}$")


def _check(pattern: re.Pattern[str], value: str, field_name: str) -> str:
    if not isinstance(value, str) or not pattern.fullmatch(value):
        raise ClusterError(f"{field_name}: {value!r} is not allowed (pattern {pattern.pattern})", permanent=True)
    return value


def check_path(value: str, field_name: str) -> str:
    _check(_PATH, value, field_name)
    if "/../" in value + "/" or value.endswith("/.."):
        raise ClusterError(f"{field_name}: '..' is not allowed", permanent=True)
    return value


@dataclass(frozen=True, slots=True)
class JobSpec:
    """One attempt of one run. Every field is validated before anything reaches a cluster."""

    run_id: str
    attempt: int
    command: tuple[str, ...]  # argv of the payload, run in the attempt directory
    files: Mapping[str, bytes] = field(default_factory=dict)  # uploaded next to the job script
    time_limit_s: int = 1800
    partition: str | None = None
    account: str | None = None
    qos: str | None = None
    gres: str | None = None
    cpus: int = 1
    nodes: int = 1  # one allocation across nodes: the engine's own multi-node launch runs inside it
    mem_mb: int | None = None
    setup: tuple[str, ...] = ()  # environment lines from the cluster record (module load …)

    @property
    def name(self) -> str:
        return f"gov-{self.run_id}-a{self.attempt}"

    def validate(self) -> None:
        _check(_NAME, self.run_id, "run_id")
        if not 1 <= self.attempt <= 10:
            raise ClusterError("attempt: must be 1..10", permanent=True)
        if not 10 <= self.time_limit_s <= 7 * 24 * 3600:
            raise ClusterError("time_limit_s: must be 10 s .. 7 days", permanent=True)
        if not 1 <= self.cpus <= 512:
            raise ClusterError("cpus: must be 1..512", permanent=True)
        if not 1 <= self.nodes <= 256:
            raise ClusterError("nodes: must be 1..256", permanent=True)
        for name, value, pattern in (
            ("partition", self.partition, _TOKEN),
            ("account", self.account, _TOKEN),
            ("qos", self.qos, _TOKEN),
            ("gres", self.gres, _GRES),
        ):
            if value is not None:
                _check(pattern, value, name)
        if not self.command:
            raise ClusterError("command: empty", permanent=True)
        for part in (*self.command, *self.setup):
            if "\n" in part or "\r" in part or "\0" in part:
                raise ClusterError("command/setup: newlines and NUL are not allowed", permanent=True)
        for name in self.files:
            _check(_FILE, name, "files")
            if name in ("job.sh", ".exit_code") or name.startswith("slurm-"):
                raise ClusterError(f"files: {name!r} is reserved", permanent=True)


def slurm_time(seconds: int) -> str:
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}"


@dataclass(frozen=True, slots=True)
class JobRef:
    job_id: str
    run_dir: str  # the attempt directory


@dataclass(frozen=True, slots=True)
class JobStatus:
    state: JobState
    raw_state: str = ""
    exit_code: int | None = None
    reason: str = ""


@dataclass(frozen=True, slots=True)
class JobOutput:
    result: dict[str, Any] | None  # result.json when present and its checksum matched
    result_ok: bool
    log_tail: str
    problem: str = ""


class Executor(Protocol):
    def submit(self, spec: JobSpec) -> JobRef: ...
    def poll(self, refs: list[JobRef]) -> dict[JobRef, JobStatus]: ...
    def fetch(self, ref: JobRef) -> JobOutput: ...
    def cancel(self, ref: JobRef) -> None: ...
    def find_by_name(self, name: str, run_dir: str) -> JobRef | None: ...


def job_script(spec: JobSpec) -> str:
    """The batch script (run in the attempt directory: sbatch --chdir, or the local cwd). The trap writes `.exit_code` however the payload ends (unless killed
    with SIGKILL, e.g. on timeout: then Slurm's own state tells, or the job counts as lost)."""
    lines = [
        "#!/bin/bash",
        "# written by governance: one attempt of one run",
        "set -uo pipefail",
        "trap 'echo $? > .exit_code.tmp && mv .exit_code.tmp .exit_code' EXIT",
        f"export GOV_RUN_ID={shlex.quote(spec.run_id)} GOV_ATTEMPT={int(spec.attempt)}",
        *spec.setup,
        "set -e",
        shlex.join(spec.command),
    ]
    return "\n".join(lines) + "\n"


def write_atomic(path: Path, data: bytes) -> None:
    """Temporary name, then rename: a reader (or a requeued job) never sees half a file."""
    temporary = path.with_name(f".{path.name}.tmp")
    temporary.write_bytes(data)
    os.replace(temporary, path)


def write_result(out: Path, data: bytes, name: str = "result.json") -> None:
    """What verify_result checks: the file first, then its checksum, each written atomically."""
    write_atomic(out / name, data)
    write_atomic(out / f"{name}.sha256", hashlib.sha256(data).hexdigest().encode())


def job_main(
    prog: str,
    run: Callable[[dict[str, Any], Path], dict[str, Any]],
    done: Callable[[dict[str, Any]], str],
    argv: list[str] | None = None,
) -> int:
    """The command line of a job payload: `python -m <prog> run --spec spec.json --out DIR`. Runs
    `run(spec, out)`, prints `done: <done(result)>`; a bad spec or an unreadable file exits 2."""
    parser = argparse.ArgumentParser(prog=f"python -m {prog}")
    commands = parser.add_subparsers(dest="command", required=True)
    run_parser = commands.add_parser("run")
    run_parser.add_argument("--spec", required=True)
    run_parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    try:
        result = run(json.loads(Path(args.spec).read_text()), Path(args.out))
    except (OSError, ValueError, KeyError) as exc:
        print(f"{prog.split('.')[-1]}: error: {exc}", file=sys.stderr)
        return 2
    print(f"done: {done(result)}", flush=True)
    return 0


# JSON may escape a character that the service's database cannot store (PostgreSQL holds no U+0000
# in text or jsonb, and refuses half of a UTF-16 surrogate pair): a payload that echoes a checkpoint's
# strings (the inspection) could otherwise write a result that fails every poll when it is saved.
# Searching the raw text is cheap; the parsed value is walked only when such an escape appears.
_HAZARDOUS_ESCAPE = re.compile(r"\\u(?:0000|[dD][89a-fA-F][0-9a-fA-F]{2})")
_SURROGATE = re.compile("[\ud800-\udfff]")


def unstorable(text: str) -> str | None:
    """What in `text` the service cannot store, in words (a NUL, an unpaired surrogate); None if nothing."""
    if "\x00" in text:
        return "a NUL character"
    if _SURROGATE.search(text):
        return "an unpaired UTF-16 surrogate"
    return None


def unstorable_in_json(text: str, value: Any) -> str | None:
    """What `unstorable` objects to in any string (key or value) of `value`, parsed from JSON `text`;
    None at once when the text escapes nothing of the kind. Without recursion."""
    if not _HAZARDOUS_ESCAPE.search(text):
        return None
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            found = unstorable(item)
            if found:
                return found
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return None


def verify_result(raw: bytes | None, checksum: bytes | None) -> tuple[dict[str, Any] | None, str]:
    """result.json is valid only with a matching result.json.sha256 written after it."""
    if raw is None:
        return None, "no result.json"
    if checksum is None:
        return None, "no result.json.sha256"
    expected = checksum.decode(errors="replace").split()[0] if checksum.strip() else ""
    if hashlib.sha256(raw).hexdigest() != expected:
        return None, "result.json does not match its checksum"
    try:
        parsed = json.loads(raw)
    except ValueError:
        return None, "result.json is not JSON"
    if not isinstance(parsed, dict):
        return None, "result.json is not an object"
    found = unstorable_in_json(raw.decode("utf-8", errors="replace"), parsed)
    if found:
        return None, f"result.json holds {found}, which the service cannot store"
    return parsed, ""
