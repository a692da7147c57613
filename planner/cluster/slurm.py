"""SlurmSSHExecutor: sbatch/squeue/sacct/scontrol/scancel over SSH (paramiko), host keys pinned.

One SSH connection per worker process and cluster, reused under a lock, with keepalive. Every
remote command is an argv list joined with shlex; every user-controlled value is validated
against an allow-list first (JobSpec.validate). Files go up over SFTP (temp name + rename).
"""

from __future__ import annotations

import io
import re
import shlex
import threading
from dataclasses import dataclass
from typing import ClassVar

import paramiko

from planner.cluster.base import (
    ClusterError,
    JobOutput,
    JobRef,
    JobSpec,
    JobState,
    JobStatus,
    check_path,
    job_script,
    map_slurm_state,
    slurm_time,
    verify_result,
)

COMMAND_TIMEOUT_S = 60
_JOB_ID = re.compile(r"^\d+(_\d+)?$")
_SCONTROL = re.compile(r"JobId=(\d+) .*?JobName=(\S*) .*?JobState=(\S+) Reason=(\S+).*?ExitCode=(\d+):(\d+)")


@dataclass(frozen=True, slots=True)
class SshTarget:
    host: str
    port: int
    user: str
    key_path: str
    known_hosts: str  # pinned host keys, known_hosts format
    remote_root: str


class SlurmSSHExecutor:
    _connections: ClassVar[dict[SshTarget, paramiko.SSHClient]] = {}
    _lock: ClassVar[threading.Lock] = threading.Lock()
    connections_opened: ClassVar[int] = 0  # observability: how many SSH handshakes this process made

    def __init__(self, target: SshTarget) -> None:
        check_path(target.remote_root, "remote_root")
        self.target = target

    # --- connection -----------------------------------------------------------------------
    def _connect(self) -> paramiko.SSHClient:
        client = paramiko.SSHClient()
        client.set_missing_host_key_policy(paramiko.RejectPolicy())  # unknown or changed key: refuse
        host_keys = client.get_host_keys()
        for line in self.target.known_hosts.splitlines():
            entry = paramiko.hostkeys.HostKeyEntry.from_line(line) if line.strip() else None
            if entry is not None:
                for name in entry.hostnames:
                    host_keys.add(name, entry.key.get_name(), entry.key)
        try:
            client.connect(
                self.target.host,
                port=self.target.port,
                username=self.target.user,
                key_filename=self.target.key_path,
                look_for_keys=False,
                allow_agent=False,
                timeout=10,
                banner_timeout=10,
                auth_timeout=10,
            )
        except paramiko.BadHostKeyException:
            raise ClusterError(
                "host key changed: refusing to connect (pinned key does not match)", permanent=True
            ) from None
        except paramiko.AuthenticationException as exc:
            raise ClusterError(f"authentication failed: {exc}", permanent=True) from None
        except paramiko.SSHException as exc:
            permanent = "known_hosts" in str(exc)
            raise ClusterError(f"ssh: {exc}", permanent=permanent) from None
        except (TimeoutError, OSError, EOFError) as exc:
            raise ClusterError(f"cannot reach {self.target.host}:{self.target.port}: {exc}", permanent=False) from None
        transport = client.get_transport()
        if transport is not None:
            transport.set_keepalive(30)
        type(self).connections_opened += 1
        return client

    def _client(self) -> paramiko.SSHClient:
        with self._lock:
            client = self._connections.get(self.target)
            transport = client.get_transport() if client else None
            if client is None or transport is None or not transport.is_active():
                client = self._connect()
                self._connections[self.target] = client
            return client

    def _drop(self) -> None:
        with self._lock:
            client = self._connections.pop(self.target, None)
        if client is not None:
            client.close()

    @classmethod
    def close_all(cls) -> None:
        with cls._lock:
            clients = list(cls._connections.values())
            cls._connections.clear()
        for client in clients:
            client.close()

    def run(self, argv: list[str], timeout: int = COMMAND_TIMEOUT_S) -> tuple[int, str, str]:
        command = shlex.join(argv)
        try:
            stdin, stdout, stderr = self._client().exec_command(command, timeout=timeout)
            # Close every file object here, in this thread: left to the garbage collector, paramiko may
            # finalize stdin inside its transport thread and deadlock the next open_session().
            stdin.close()
            try:
                out = stdout.read().decode(errors="replace")
                err = stderr.read().decode(errors="replace")
                return stdout.channel.recv_exit_status(), out, err
            finally:
                stdout.close()
                stderr.close()
        except ClusterError:
            raise
        except (TimeoutError, paramiko.SSHException, OSError, EOFError) as exc:
            self._drop()
            raise ClusterError(f"ssh command failed: {exc}", permanent=False) from None

    def _sftp(self) -> paramiko.SFTPClient:
        try:
            return self._client().open_sftp()
        except (paramiko.SSHException, OSError, EOFError) as exc:
            self._drop()
            raise ClusterError(f"sftp: {exc}", permanent=False) from None

    # --- executor interface --------------------------------------------------------------------
    def run_dir(self, spec: JobSpec) -> str:
        return check_path(f"{self.target.remote_root}/{spec.run_id}/attempt-{spec.attempt}", "run_dir")

    def submit(self, spec: JobSpec) -> JobRef:
        spec.validate()
        run_dir = self.run_dir(spec)
        code, _out, err = self.run(["mkdir", "-p", run_dir])
        if code != 0:
            raise ClusterError(f"cannot create {run_dir}: {err.strip()}", permanent=False)
        sftp = self._sftp()
        try:
            for name, data in {**spec.files, "job.sh": job_script(spec).encode()}.items():
                temporary = f"{run_dir}/.{name}.tmp"
                sftp.putfo(io.BytesIO(data), temporary)
                sftp.posix_rename(temporary, f"{run_dir}/{name}")
            sftp.chmod(f"{run_dir}/job.sh", 0o700)
        except (OSError, paramiko.SSHException) as exc:
            raise ClusterError(f"upload failed: {exc}", permanent=False) from None
        finally:
            sftp.close()
        argv = [
            "sbatch",
            "--parsable",
            f"--job-name={spec.name}",
            f"--comment={spec.run_id}",
            f"--time={slurm_time(spec.time_limit_s)}",
            f"--cpus-per-task={spec.cpus}",
            f"--nodes={int(spec.nodes)}",
            f"--output={run_dir}/slurm-%j.out",
            f"--chdir={run_dir}",
        ]
        for flag, value in (
            ("--partition", spec.partition),
            ("--account", spec.account),
            ("--qos", spec.qos),
            ("--gres", spec.gres),
        ):
            if value:
                argv.append(f"{flag}={value}")
        if spec.mem_mb:
            argv.append(f"--mem={int(spec.mem_mb)}")
        argv.append(f"{run_dir}/job.sh")
        code, out, err = self.run(argv)
        if code != 0:
            permanent = any(word in err for word in ("Invalid", "invalid", "not available", "denied"))
            raise ClusterError(f"sbatch refused the job: {err.strip()}", permanent=permanent)
        job_id = out.strip().split(";")[0]
        if not _JOB_ID.match(job_id):
            raise ClusterError(f"sbatch answered {out.strip()!r}, not a job id", permanent=False)
        return JobRef(job_id=job_id, run_dir=run_dir)

    def find_by_name(self, name: str, run_dir: str) -> JobRef | None:
        """After an SSH failure during sbatch: did the job get submitted? Never submit twice."""
        code, out, _err = self.run(["squeue", "-h", f"--name={name}", "-o", "%i"])
        ids = [line.strip() for line in out.splitlines() if line.strip()] if code == 0 else []
        if not ids:
            _code, out, _err = self.run(["scontrol", "-o", "show", "job"])
            ids = [m.group(1) for m in _SCONTROL.finditer(out) if m.group(2) == name]
        return JobRef(job_id=ids[0], run_dir=run_dir) if ids else None

    def poll(self, refs: list[JobRef]) -> dict[JobRef, JobStatus]:
        if not refs:
            return {}
        by_id = {ref.job_id: ref for ref in refs}
        statuses: dict[JobRef, JobStatus] = {}
        code, out, err = self.run(
            ["sacct", "-X", "-P", "-n", "-j", ",".join(by_id), "--format=JobID,State,ExitCode,Reason"]
        )
        if code == 0 and "disabled" not in (out + err).lower():
            for line in out.splitlines():
                parts = line.split("|")
                if len(parts) >= 3 and parts[0] in by_id:
                    exit_code = int(parts[2].split(":")[0]) if parts[2].split(":")[0].isdigit() else None
                    statuses[by_id[parts[0]]] = JobStatus(
                        map_slurm_state(parts[1]), parts[1], exit_code, parts[3] if len(parts) > 3 else ""
                    )
        else:
            self._poll_without_accounting(by_id, statuses)
        missing = [ref for ref in refs if ref not in statuses]
        if missing:
            self._sentinels(missing, statuses)
        return statuses

    def _poll_without_accounting(self, by_id: dict[str, JobRef], statuses: dict[JobRef, JobStatus]) -> None:
        code, out, _err = self.run(["squeue", "-h", "-j", ",".join(by_id), "-o", "%i|%T|%r"])
        if code == 0:
            for line in out.splitlines():
                job_id, _, rest = line.partition("|")
                raw, _, reason = rest.partition("|")
                if job_id in by_id:
                    statuses[by_id[job_id]] = JobStatus(map_slurm_state(raw), raw, None, reason)
        if all(ref in statuses for ref in by_id.values()):
            return
        # Finished jobs stay in the controller for MinJobAge: one call lists them all.
        code, out, _err = self.run(["scontrol", "-o", "show", "job"])
        if code == 0:
            for match in _SCONTROL.finditer(out):
                job_id, _name, raw, reason, exit_code, _signal = match.groups()
                ref = by_id.get(job_id)
                if ref is not None and ref not in statuses:
                    statuses[ref] = JobStatus(map_slurm_state(raw), raw, int(exit_code), reason)

    def _sentinels(self, refs: list[JobRef], statuses: dict[JobRef, JobStatus]) -> None:
        """Jobs Slurm no longer knows: the exit-code sentinel tells; without it the job is lost."""
        sftp = self._sftp()
        try:
            for ref in refs:
                try:
                    with sftp.open(f"{ref.run_dir}/.exit_code") as handle:
                        code = int(handle.read().decode().strip() or 1)
                    state = JobState.SUCCEEDED if code == 0 else JobState.FAILED
                    statuses[ref] = JobStatus(state, "COMPLETED" if code == 0 else "FAILED", code, "sentinel")
                except FileNotFoundError:
                    statuses[ref] = JobStatus(JobState.LOST, "", None, "job vanished without its exit sentinel")
        finally:
            sftp.close()

    def fetch(self, ref: JobRef) -> JobOutput:
        sftp = self._sftp()

        def read(path: str, tail: int | None = None) -> bytes | None:
            try:
                with sftp.open(path) as handle:
                    if tail is not None:
                        size = handle.stat().st_size or 0
                        handle.seek(max(0, size - tail))
                    return handle.read()
            except FileNotFoundError:
                return None

        try:
            result, problem = verify_result(
                read(f"{ref.run_dir}/result.json"), read(f"{ref.run_dir}/result.json.sha256")
            )
            log = read(f"{ref.run_dir}/slurm-{ref.job_id}.out", tail=4000) or b""
        except (OSError, paramiko.SSHException) as exc:
            raise ClusterError(f"fetch failed: {exc}", permanent=False) from None
        finally:
            sftp.close()
        return JobOutput(
            result=result, result_ok=result is not None, log_tail=log.decode(errors="replace"), problem=problem
        )

    def cancel(self, ref: JobRef) -> None:
        if not _JOB_ID.match(ref.job_id):
            raise ClusterError(f"job id {ref.job_id!r} is not valid", permanent=True)
        code, _out, err = self.run(["scancel", ref.job_id])
        if code != 0:
            raise ClusterError(f"scancel failed: {err.strip()}", permanent=False)
