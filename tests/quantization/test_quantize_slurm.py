"""The same quantize job through the real sshd + Slurm test cluster (scripts/testcluster): submitted
over SSH, run by Slurm as the cluster's user, registered with its lineage when it ends.

The cluster's user must be able to run the quantize environment's interpreter: name one it can run in
QUANTIZE_CLUSTER_PYTHON (a venv whose base interpreter lies under /root, as on the dev machines, is
not executable by that user, and the test is skipped saying so)."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest

from governance.artifacts.models import Derivation
from governance.artifacts.services import artifact_register
from governance.evaluations.models import Cluster
from governance.licenses.services import license_catalog_load
from governance.quantization.models import QuantizeStatus
from governance.quantization.services import quantize_run_complete, quantize_run_request
from planner.cluster.slurm import SlurmSSHExecutor
from planner.manifest import manifest_digest
from tests.conftest import Personas
from tests.evaluations.conftest import drive, testcluster  # noqa: F401  (the session fixture)

ROOT = Path(__file__).resolve().parents[2]
CHECKPOINT = ROOT / "planner" / "tinylm" / "checkpoint"
QUANTIZE_PYTHON = os.environ.get("QUANTIZE_CLUSTER_PYTHON", "")
CLUSTER_SETUP = os.environ.get("QUANTIZE_CLUSTER_SETUP", "")  # e.g. an LD_LIBRARY_PATH that interpreter needs

pytestmark = [
    pytest.mark.slow,
    pytest.mark.cluster,
    pytest.mark.skipif(
        not QUANTIZE_PYTHON, reason="QUANTIZE_CLUSTER_PYTHON: no quantize environment the cluster's user can run"
    ),
]


@pytest.fixture(autouse=True)
def _fresh_connections() -> Any:
    yield
    SlurmSSHExecutor.close_all()


def test_quantize_through_slurm_registers_the_derivative(
    personas: Personas,
    settings: Any,
    request: pytest.FixtureRequest,
    testcluster: dict[str, Any],  # noqa: F811
) -> None:
    settings.JOB_POLL_INITIAL_S = 1
    settings.JOB_POLL_MAX_S = 2
    license_catalog_load(actor="system:test")
    # The cluster's user reads the parent and writes the derivative beside it: a directory it can reach
    # (pytest's own tmp_path lies under a root-only directory).
    shared = Path(tempfile.mkdtemp(prefix="quantize-slurm-", dir="/var/tmp"))
    request.addfinalizer(lambda: shutil.rmtree(shared, ignore_errors=True))
    models = shared / "models"
    shutil.copytree(CHECKPOINT, models / "tiny")
    for path in (shared, models):
        path.chmod(0o777)
    cluster = Cluster.objects.create(
        name="testcluster",
        host=testcluster["host"],
        port=testcluster["port"],
        user=testcluster["user"],
        host_keys=testcluster["known_hosts_text"],
        key_path=testcluster["key_path"],
        remote_root=testcluster["remote_root"],
        partition=testcluster["partition"],
        model_roots=[str(models)],
        python=QUANTIZE_PYTHON,
        setup_lines=f"export PYTHONPATH={ROOT} OMP_NUM_THREADS=2 HF_HOME=/tmp/hf-govcluster\n{CLUSTER_SETUP}",
        default_time_limit_s=1500,
    )
    parent = artifact_register(
        actor=personas.requester,
        team=personas.team,
        data={
            "name": "Llama-tiny",
            "source_repo": "planner/tinylm",
            "revision": "local",
            "weights_digest": manifest_digest(CHECKPOINT),
            "license": "llama-3.1",
            "config": json.loads((CHECKPOINT / "config.json").read_text()),
        },
    )
    run = quantize_run_request(
        parent=parent,
        cluster=cluster,
        recipe_name="w4a16-rtn",
        derivative_name="Llama-tiny-w4a16-rtn",
        actor=personas.requester,
        model_path=str(models / "tiny"),
    )
    assert run.job is not None
    job = drive(run.job, timeout_s=1500)
    assert job.state == "succeeded", job.log_tail
    run = quantize_run_complete(run_id=run.pk)
    assert run.status == QuantizeStatus.REGISTERED, run.reason
    assert run.derivative is not None
    assert run.derivative.derivation == Derivation.QUANTIZE
    assert run.derivative.parent == parent
    assert run.derivative.weights_digest == manifest_digest(Path(run.output_path))
    assert not run.flagged  # named "Llama-…": the naming rule is kept
    assert run.license_findings is not None
    assert ("naming.prefix", "obligation") in {(f["code"], f["severity"]) for f in run.license_findings}
