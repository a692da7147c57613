"""Against the real sshd + Slurm test cluster (scripts/testcluster): every path of the job lifecycle."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import paramiko
import pytest

from governance.audit.actions import AuditAction
from governance.audit.models import AuditEvent
from governance.core.errors import ApplicationError
from governance.evaluations.models import Cluster, JobKind, JobRun
from governance.evaluations.services import cluster_discover, cluster_test_connection, jobrun_cancel, jobrun_create
from planner.cluster.base import ClusterError, JobRef, JobSpec, JobState
from planner.cluster.slurm import SlurmSSHExecutor
from tests.conftest import Personas
from tests.evaluations.conftest import RESULT_WRITER, drive, target

pytestmark = pytest.mark.cluster


def _slurm_jobs_named(name_prefix: str) -> list[str]:
    out = subprocess.run(["scontrol", "-o", "show", "job"], capture_output=True, text=True, check=False).stdout
    return [line.split()[0] for line in out.splitlines() if f"JobName={name_prefix}" in line]


def test_submit_poll_fetch_with_checksum(cluster: Cluster) -> None:
    run = jobrun_create(
        cluster=cluster, kind=JobKind.COMMAND, command=["python3", "-c", RESULT_WRITER], time_limit_s=60
    )
    started = time.monotonic()
    run = drive(run)
    assert run.state == "succeeded", run.reason
    assert run.result == {"answer": 42, "attempt": "1"}
    assert run.job_id.isdigit()
    assert run.run_dir.endswith("/attempt-1")
    assert time.monotonic() - started < 30
    changes = AuditEvent.objects.filter(action=AuditAction.JOB_STATE_CHANGED, object_id=str(run.code))
    assert [e.data["to"] for e in changes][-1] == "succeeded"


def test_result_with_a_bad_checksum_is_a_failure(cluster: Cluster) -> None:
    writer = "open('result.json', 'w').write('{}'); open('result.json.sha256', 'w').write('0' * 64)"
    run = drive(jobrun_create(cluster=cluster, kind=JobKind.COMMAND, command=["python3", "-c", writer]))
    assert run.state == "failed"
    assert "checksum" in run.reason


def test_failing_job_ends_failed_with_its_log_tail(cluster: Cluster) -> None:
    command = ["python3", "-c", "import sys; print('loading weights'); sys.exit('CUDA out of memory')"]
    run = drive(jobrun_create(cluster=cluster, kind=JobKind.COMMAND, command=command))
    assert run.state == "failed"
    assert "exit code 1" in run.reason
    assert "CUDA out of memory" in run.log_tail


def test_cancel_of_a_running_job(cluster: Cluster, personas: Personas) -> None:
    run = jobrun_create(cluster=cluster, kind=JobKind.COMMAND, command=["sleep", "300"])
    deadline = time.monotonic() + 60
    from governance.evaluations.services import jobrun_poll, jobrun_submit

    jobrun_submit(run_id=run.pk)
    while time.monotonic() < deadline:
        jobrun_poll(run_id=run.pk, force=True)
        run.refresh_from_db()
        if run.state == "running":
            break
        time.sleep(0.5)
    assert run.state == "running"
    jobrun_cancel(run=run, actor=personas.engineer)
    run = drive(run)
    assert run.state == "cancelled"
    assert run.slurm_state.startswith("CANCELLED")


@pytest.mark.slow
def test_timeout_is_retried_once_with_more_time(cluster: Cluster) -> None:
    # Attempt 1 sleeps past its 10 s limit; attempt 2 (20 s) finishes.
    script = f'if [ "$GOV_ATTEMPT" = 1 ]; then sleep 300; fi; python3 -c "{RESULT_WRITER}"'
    run = drive(
        jobrun_create(cluster=cluster, kind=JobKind.COMMAND, command=["bash", "-c", script], time_limit_s=10),
        timeout_s=240,
    )
    assert run.state == "succeeded", run.reason
    assert run.attempt == 2
    assert run.timeout_retried is True
    assert run.time_limit_s == 20
    assert run.result == {"answer": 42, "attempt": "2"}
    reasons = [e.data.get("reason", "") for e in AuditEvent.objects.filter(object_id=str(run.code))]
    assert any("timed out" in reason for reason in reasons)


def test_a_job_that_vanished_without_its_sentinel_is_lost(cluster: Cluster, testcluster: dict[str, Any]) -> None:
    executor = SlurmSSHExecutor(target(testcluster))
    ghost = JobRef(job_id="999999", run_dir=f"{testcluster['remote_root']}/ghost/attempt-1")
    assert executor.poll([ghost])[ghost].state == JobState.LOST
    from django.utils import timezone

    run = JobRun.objects.create(
        cluster=cluster,
        kind=JobKind.COMMAND,
        command=["true"],
        time_limit_s=60,
        state="pending",
        job_id="999999",
        run_dir=ghost.run_dir,
        submitted_at=timezone.now() - timedelta(minutes=5),
    )
    assert drive(run).state == "lost"


def test_changed_host_key_is_a_permanent_error(cluster: Cluster, testcluster: dict[str, Any]) -> None:
    other = paramiko.Ed25519Key.from_private_key_file(testcluster["key_path"])  # any key but the host's
    forged = f"[127.0.0.1]:{testcluster['port']} ssh-ed25519 {other.get_base64()}\n"
    with pytest.raises(ClusterError) as raised:
        SlurmSSHExecutor(target(testcluster, known_hosts=forged)).run(["true"])
    assert raised.value.permanent is True
    assert "host key changed" in raised.value.message
    with pytest.raises(ClusterError) as unknown:
        SlurmSSHExecutor(target(testcluster, known_hosts="")).run(["true"])
    assert unknown.value.permanent is True
    cluster.host_keys = forged
    cluster.save()
    tested = cluster_test_connection(cluster=cluster)
    assert tested.last_test_ok is False
    run = drive(jobrun_create(cluster=cluster, kind=JobKind.COMMAND, command=["true"]))
    assert run.state == "failed"
    assert "host key changed" in run.reason


def test_sshd_down_mid_poll_is_transient_and_polling_resumes(cluster: Cluster, testcluster: dict[str, Any]) -> None:
    from governance.evaluations.services import jobrun_poll, jobrun_submit

    run = jobrun_create(
        cluster=cluster, kind=JobKind.COMMAND, command=["bash", "-c", f'sleep 6; python3 -c "{RESULT_WRITER}"']
    )
    jobrun_submit(run_id=run.pk)
    pid_file = Path(testcluster["sshd_pid_file"])
    os.kill(int(pid_file.read_text()), signal.SIGTERM)  # the listener
    subprocess.run(["pkill", "-f", f"sshd: {testcluster['user']}"], check=False)  # and live sessions
    time.sleep(0.5)
    try:
        SlurmSSHExecutor.close_all()
        step = jobrun_poll(run_id=run.pk, force=True)
        run.refresh_from_db()
        assert step.poll_in is not None  # rescheduled, not failed
        assert run.state == "pending"
        assert "polling paused" in run.reason
    finally:
        subprocess.run(["/usr/sbin/sshd", "-f", testcluster["sshd_config"]], check=True)
    time.sleep(0.5)
    run = drive(run)
    assert run.state == "succeeded"
    assert len(_slurm_jobs_named(f"gov-{run.code.hex[:20]}")) == 1


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("partition", "debug; rm -rf ~"),
        ("partition", "debug\n#SBATCH --uid=0"),
        ("account", "$(id)"),
        ("qos", "`reboot`"),
        ("gres_pattern", "gpu:{gpus} --wrap=x"),
    ],
)
def test_injection_is_rejected_before_reaching_the_cluster(cluster: Cluster, field: str, value: str) -> None:
    setattr(cluster, field, value)
    cluster.save()
    before = len(_slurm_jobs_named("gov-"))
    with pytest.raises(ApplicationError) as raised:
        jobrun_create(cluster=cluster, kind=JobKind.COMMAND, command=["true"], gpus=1)
    assert raised.value.status == 400
    assert JobRun.objects.count() == 0
    assert len(_slurm_jobs_named("gov-")) == before


@pytest.mark.parametrize(
    "spec",
    [
        JobSpec(run_id="$(touch /tmp/pwned)", attempt=1, command=("true",)),
        JobSpec(run_id="ok", attempt=1, command=("echo", "a\n#SBATCH --uid=0")),
        JobSpec(run_id="ok", attempt=1, command=("true",), files={"../../.bashrc": b"x"}),
        JobSpec(run_id="ok", attempt=1, command=("true",), partition="a b"),
    ],
)
def test_spec_validation_refuses_shell_metacharacters(spec: JobSpec, testcluster: dict[str, Any]) -> None:
    with pytest.raises(ClusterError) as raised:
        SlurmSSHExecutor(target(testcluster)).submit(spec)
    assert raised.value.permanent is True
    assert not Path("/tmp/pwned").exists()


def test_discovery_records_nodes_and_no_gpus(cluster: Cluster, testcluster: dict[str, Any]) -> None:
    run = drive(cluster_discover(cluster=cluster, actor=None))
    assert run.state == "succeeded", run.reason + run.log_tail
    cluster.refresh_from_db()
    assert cluster.inventory is not None
    assert cluster.inventory["gpus"] == []  # no GPU on this node
    assert [node["name"] for node in cluster.inventory["nodes"]] == [testcluster["node"]]
    assert cluster.discovered_at is not None


def test_one_poll_cycle_of_many_jobs_reuses_one_connection(cluster: Cluster, testcluster: dict[str, Any]) -> None:
    executor = SlurmSSHExecutor(target(testcluster))
    refs = [
        executor.submit(JobSpec(run_id=f"many{i}", attempt=1, command=("true",), partition="debug")) for i in range(10)
    ]
    opened = SlurmSSHExecutor.connections_opened
    statuses = executor.poll(refs)
    assert SlurmSSHExecutor.connections_opened == opened  # the cached connection served the whole cycle
    assert set(statuses) == set(refs)
