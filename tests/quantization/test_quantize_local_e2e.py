"""End to end on the embedded default's `local` executor: the real payload and llm-compressor quantize
the trained tiny model on CPU, and the derivative is registered with its lineage. Needs the quantize
environment (pip install -e '.[quantize]' into its own venv; QUANTIZE_PYTHON names its python)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from governance.artifacts.models import Derivation, ModelArtifact
from governance.artifacts.services import artifact_register
from governance.evaluations.models import Cluster, ExecutorKind
from governance.licenses.services import license_catalog_load
from governance.quantization.models import QuantizeStatus
from governance.quantization.services import quantize_run_request
from governance.quantization.tasks import quantize_runs_reconcile_task
from planner.manifest import manifest_digest
from tests.conftest import Personas
from tests.evaluations.conftest import drive

ROOT = Path(__file__).resolve().parents[2]
CHECKPOINT = ROOT / "planner" / "tinylm" / "checkpoint"
QUANTIZE_PYTHON = os.environ.get("QUANTIZE_PYTHON") or str(ROOT / "var" / "quantenv" / "bin" / "python")

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not Path(QUANTIZE_PYTHON).exists(), reason=f"no quantize environment at {QUANTIZE_PYTHON}"),
]


@pytest.mark.parametrize("recipe", ["w4a16-rtn", "w8a8-smoothquant-gptq"])
def test_local_quantize_registers_the_derivative_with_lineage(
    personas: Personas, settings: object, tmp_path: Path, recipe: str
) -> None:
    settings.QUANTIZE_PYTHON = QUANTIZE_PYTHON  # type: ignore[attr-defined]
    settings.JOB_POLL_INITIAL_S = 1  # type: ignore[attr-defined]
    license_catalog_load(actor="system:test")
    models = tmp_path / "models"
    shutil.copytree(CHECKPOINT, models / "tiny")
    cluster = Cluster.objects.create(
        name="local",
        executor=ExecutorKind.LOCAL,
        remote_root=str(tmp_path / "jobs"),
        model_roots=[str(models)],
        # one thread: on the 2-core CI machine the suite already outnumbers the cores (199 s at 2 threads)
        setup_lines=f"export PYTHONPATH={ROOT} OMP_NUM_THREADS=1",
        default_time_limit_s=1800,
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
        recipe_name=recipe,
        derivative_name=f"tiny-{recipe}",  # breaks Llama's naming rule: flagged at registration
        actor=personas.requester,
        model_path=str(models / "tiny"),
    )
    assert run.job is not None
    job = drive(run.job, timeout_s=1500)
    assert job.state == "succeeded", job.log_tail
    assert quantize_runs_reconcile_task() == [run.pk]  # the completion a worker would have driven
    run.refresh_from_db()
    assert run.status == QuantizeStatus.REGISTERED, run.reason
    assert run.derivative_id is not None
    derivative = ModelArtifact.objects.get(pk=run.derivative_id)
    assert derivative.parent == parent
    assert derivative.derivation == Derivation.QUANTIZE
    assert derivative.weights_digest == manifest_digest(Path(run.output_path))  # computed on the node
    assert derivative.config is not None
    assert run.tool_versions is not None
    assert run.license_findings is not None
    assert derivative.config["quantization_config"]["quant_method"] == "compressed-tensors"
    assert run.tool_versions["llmcompressor"] == "0.14.0.1"
    assert (run.calibration or {}).get("used") is (recipe != "w4a16-rtn")
    assert run.flagged
    assert "naming.prefix" in {f["code"] for f in run.license_findings}
