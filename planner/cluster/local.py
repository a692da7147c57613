"""LocalExecutor: runs the job script as a subprocess on this host (the embedded default)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from pathlib import Path

from planner.cluster.base import (
    ClusterError,
    JobOutput,
    JobRef,
    JobSpec,
    JobState,
    JobStatus,
    job_script,
    verify_result,
)

TIMEOUT_EXIT = 124  # coreutils `timeout`


class LocalExecutor:
    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        self._children: dict[int, subprocess.Popen[bytes]] = {}
        self._exit_codes: dict[int, int] = {}

    def submit(self, spec: JobSpec) -> JobRef:
        spec.validate()
        if spec.nodes != 1:
            raise ClusterError("nodes: the local executor runs on this one host", permanent=True)
        run_dir = self.root / spec.run_id / f"attempt-{spec.attempt}"
        run_dir.mkdir(parents=True, exist_ok=True)
        for name, data in {**spec.files, "job.sh": job_script(spec).encode()}.items():
            temporary = run_dir / f".{name}.tmp"
            temporary.write_bytes(data)
            temporary.replace(run_dir / name)
        log = (run_dir / "job.log").open("ab")
        argv = ["timeout", "--signal=TERM", "--kill-after=5", f"{spec.time_limit_s}s", "bash", str(run_dir / "job.sh")]
        try:
            process = subprocess.Popen(  # noqa: S603  (argv list of validated parts, no shell)
                argv, cwd=run_dir, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        except OSError as exc:
            raise ClusterError(f"cannot start job: {exc}", permanent=True) from None
        finally:
            log.close()
        self._children[process.pid] = process
        (run_dir / ".pid").write_text(str(process.pid))
        return JobRef(job_id=f"local-{process.pid}", run_dir=str(run_dir))

    def _alive(self, pid: int) -> bool:
        child = self._children.get(pid)
        if child is not None:
            return child.poll() is None  # also reaps our own zombies
        try:  # a child of this process started by another executor instance: reap it if it ended
            reaped, status = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            reaped, status = 0, 0
        if reaped:
            self._exit_codes[pid] = os.waitstatus_to_exitcode(status)
            return False
        if pid in self._exit_codes:
            return False
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        try:  # a zombie we cannot reap is not running
            return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][:1] != "Z"
        except (OSError, IndexError):
            return True

    def poll(self, refs: list[JobRef]) -> dict[JobRef, JobStatus]:
        statuses = {}
        for ref in refs:
            pid = int(ref.job_id.removeprefix("local-"))
            sentinel = Path(ref.run_dir) / ".exit_code"
            alive = self._alive(pid)
            child = self._children.get(pid)
            code = child.returncode if child is not None else self._exit_codes.get(pid)
            if not alive and code == TIMEOUT_EXIT:
                statuses[ref] = JobStatus(JobState.TIMEOUT, "TIMEOUT", TIMEOUT_EXIT, "time limit")
            elif sentinel.exists() and not alive:
                code = int(sentinel.read_text().strip() or 1)
                state = JobState.SUCCEEDED if code == 0 else JobState.FAILED
                statuses[ref] = JobStatus(state, "COMPLETED" if code == 0 else "FAILED", code)
            elif alive:
                statuses[ref] = JobStatus(JobState.RUNNING, "RUNNING")
            else:
                statuses[ref] = JobStatus(JobState.LOST, "", None, "process gone without an exit code")
        return statuses

    def fetch(self, ref: JobRef) -> JobOutput:
        run_dir = Path(ref.run_dir)

        def read(name: str) -> bytes | None:
            path = run_dir / name
            return path.read_bytes() if path.exists() else None

        result, problem = verify_result(read("result.json"), read("result.json.sha256"))
        log = read("job.log") or b""
        return JobOutput(
            result=result, result_ok=result is not None, log_tail=log[-4000:].decode(errors="replace"), problem=problem
        )

    def cancel(self, ref: JobRef) -> None:
        pid = int(ref.job_id.removeprefix("local-"))
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGTERM)

    def find_by_name(self, name: str, run_dir: str) -> JobRef | None:
        pid_file = Path(run_dir) / ".pid"
        return JobRef(job_id=f"local-{pid_file.read_text().strip()}", run_dir=run_dir) if pid_file.exists() else None
