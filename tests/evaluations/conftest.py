"""The real test cluster (sshd + Slurm on loopback), brought up by scripts/testcluster."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from governance.evaluations.models import ACTIVE_STATES, Cluster, JobRun
from governance.evaluations.services import jobrun_poll, jobrun_submit
from planner.cluster.slurm import SlurmSSHExecutor, SshTarget

ROOT = Path(__file__).resolve().parents[2]
CLUSTER_DIR = Path("/var/tmp/governance-testcluster")


@pytest.fixture(scope="session")
def testcluster() -> dict[str, Any]:
    """Idempotent: starts the cluster if it is not running (CI's .ci/run starts it first)."""
    completed = subprocess.run(
        [str(ROOT / "scripts" / "testcluster"), "up"], capture_output=True, text=True, check=False
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    info = json.loads((CLUSTER_DIR / "cluster.json").read_text())
    info["known_hosts_text"] = Path(info["known_hosts"]).read_text()
    return info


@pytest.fixture(autouse=True)
def _fresh_connections() -> Iterator[None]:
    yield
    SlurmSSHExecutor.close_all()


@pytest.fixture
def cluster(db: None, testcluster: dict[str, Any], settings: Any) -> Cluster:
    settings.JOB_POLL_INITIAL_S = 0.5
    settings.JOB_POLL_MAX_S = 1.0
    settings.JOB_LOST_GRACE_S = 3
    return Cluster.objects.create(
        name="testcluster",
        host=testcluster["host"],
        port=testcluster["port"],
        user=testcluster["user"],
        host_keys=testcluster["known_hosts_text"],
        key_path=testcluster["key_path"],
        remote_root=testcluster["remote_root"],
        partition=testcluster["partition"],
        default_time_limit_s=120,
    )


def target(info: dict[str, Any], known_hosts: str | None = None) -> SshTarget:
    return SshTarget(
        host=info["host"],
        port=info["port"],
        user=info["user"],
        key_path=info["key_path"],
        known_hosts=known_hosts if known_hosts is not None else info["known_hosts_text"],
        remote_root=info["remote_root"],
    )


def drive(run: JobRun, timeout_s: float = 150) -> JobRun:
    """Run the submit/poll services in this process the way the Celery tasks chain them."""
    deadline = time.monotonic() + timeout_s
    next_submit: float | None = 0.0
    while time.monotonic() < deadline:
        run.refresh_from_db()
        if run.state not in ACTIVE_STATES:
            return run
        step = jobrun_submit(run_id=run.pk) if run.state == "queued" else jobrun_poll(run_id=run.pk, force=True)
        next_submit = step.resubmit_in
        time.sleep(min(step.poll_in or next_submit or 0.5, 1.0))
    raise AssertionError(f"run still {run.state} after {timeout_s} s: {run.reason}")


RESULT_WRITER = (
    "import hashlib, json, os; d = json.dumps({'answer': 42, 'attempt': os.environ['GOV_ATTEMPT']}).encode(); "
    "open('result.json', 'wb').write(d); open('result.json.sha256', 'w').write(hashlib.sha256(d).hexdigest())"
)


def locate(code: str, cluster_name: str, path: str) -> None:
    """Record where the request's baseline (its artifact's parent, else the artifact) lies on a
    cluster, as an operator would; fixture artifacts carry made-up digests, so this writes the row
    directly instead of hashing the files through the service."""
    from governance.deployments.models import DeploymentRequest
    from governance.evaluations.models import ArtifactLocation, Cluster

    artifact = DeploymentRequest.objects.select_related("artifact").get(code=code).artifact
    ArtifactLocation.objects.update_or_create(
        artifact=artifact.parent or artifact, cluster=Cluster.objects.get(name=cluster_name), defaults={"path": path}
    )
