"""The committed tiny model and its two derivatives on a `local` cluster, the path a real review
takes: registered with lineage, located, and given a served eval through `transformers serve`. Used by
tests/quantization/test_derivative_gate.py (the careless one denied, the good one allowed, then its
canary through `transformers serve`)."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from governance.artifacts.services import artifact_register
from governance.evaluations.models import Cluster, EvalRun, ExecutorKind, JobRun
from planner.manifest import manifest_digest
from planner.tinylm import derivatives
from tests.conftest import ROOT, Personas
from tests.deployments.conftest import Flow
from tests.evaluations.conftest import drive

CASES_PER_CATEGORY = 15
THRESHOLD = 0.2  # the lowest a perfect derivative passes on 15 cases per category (see tests/quantization/test_derivative_gate.py)


def serving(precision: str) -> dict[str, Any]:
    return {"engine": "transformers", "precision": precision, "gpu": "h200", "max_model_len": 512, "concurrency": 4}


def register_pair(personas: Personas, models: Path) -> tuple[Any, dict[str, Any]]:
    parent_dir = models / "tiny-llama"
    parent = artifact_register(
        actor=personas.requester,
        team=personas.team,
        data={
            "name": "tiny-llama",
            "source_repo": "planner/tinylm/checkpoint",
            "revision": "local",
            "weights_digest": manifest_digest(parent_dir),
            "license": "apache-2.0",
            "config": json.loads((parent_dir / "config.json").read_text()),
        },
    )
    registered = {}
    for recipe in derivatives.RECIPES:
        made = derivatives.record(recipe)
        path = models / "derivatives" / recipe
        # the committed files are what the quantize job made: the same digest, the same parent
        assert manifest_digest(path) == made["manifest_digest"], f"{recipe}: committed files changed"
        assert made["parent_digest"] == parent.weights_digest
        registered[recipe] = artifact_register(
            actor=personas.requester,
            team=personas.team,
            data={
                "name": made["name"],
                "source_repo": f"planner/tinylm/derivatives/{recipe}",
                "revision": "local",
                "weights_digest": made["manifest_digest"],
                "license": "apache-2.0",
                "derivation": "quantize",
                "parent": parent,
                "config": json.loads((path / "config.json").read_text()),
                "quantization_config": {"recipe": made["recipe"], "checkpoint": made["quantization_config"]},
            },
        )
    return parent, registered


def served_eval(flow: Flow, personas: Personas, cluster: Cluster, code: str, capture: Any) -> EvalRun:
    body = {
        "cluster": cluster.name,
        "max_cases_per_category": CASES_PER_CATEGORY,
        "max_new_tokens": 64,
        "threshold": THRESHOLD,
    }
    response = flow.client(personas.engineer).post(f"/api/v1/deployments/{code}/evals", body, format="json")
    assert response.status_code == 202, response.json()
    assert response.json()["kind"] == "served"
    run = JobRun.objects.get(code=response.json()["job"]["code"])
    started = time.monotonic()
    with capture(execute=True):
        run = drive(run, timeout_s=900)
    assert run.state == "succeeded", run.reason + run.log_tail
    evaluation = EvalRun.objects.get(code=response.json()["code"])
    print(f"served eval of {evaluation.candidate_digest[:19]}…: {time.monotonic() - started:.1f} s")
    return evaluation


@dataclass
class TinyLlama:
    cluster: Cluster
    models: Path
    parent: Any
    registered: dict[str, Any]  # recipe -> artifact

    def path(self, recipe: str) -> Path:
        return self.models / "derivatives" / recipe


def tinylm_on_local_cluster(flow: Flow, personas: Personas, tmp_path: Path, settings: Any) -> TinyLlama:
    """Copy the checkpoint and its derivatives under tmp_path, make the `local` cluster serving from
    there, register the parent and both derivatives with lineage and locate each on the cluster."""
    # transformers serve reads a compressed-tensors checkpoint only with the package (the eval extra pins it)
    assert importlib.util.find_spec("compressed_tensors"), "compressed-tensors is missing: make setup (eval extra)"
    settings.JOB_POLL_INITIAL_S = 0.5
    settings.JOB_POLL_MAX_S = 1.0
    models = tmp_path / "models"
    shutil.copytree(derivatives.CHECKPOINT, models / "tiny-llama")
    for recipe in derivatives.RECIPES:
        shutil.copytree(derivatives.DERIVATIVES / recipe, models / "derivatives" / recipe)
    # A PYTHONPATH the test runs with (packages beside the venv) reaches the engine too; no quantize job
    # runs here, whose own interpreter it could shadow.
    inherited = os.environ.get("PYTHONPATH")
    cluster = Cluster.objects.create(
        name="local",
        executor=ExecutorKind.LOCAL,
        remote_root=str(tmp_path / "runs"),
        model_roots=[str(models)],
        default_time_limit_s=900,
        setup_lines=f"export PATH={Path(sys.executable).parent}:$PATH "
        f"PYTHONPATH={ROOT}{':' + inherited if inherited else ''} OMP_NUM_THREADS=1",
    )
    parent, registered = register_pair(personas, models)
    engineer = flow.client(personas.engineer)
    for artifact, path in [(parent, models / "tiny-llama")] + [
        (registered[r], models / "derivatives" / r) for r in derivatives.RECIPES
    ]:
        located = engineer.post(
            f"/api/v1/clusters/{cluster.code}/locations",
            {"artifact": str(artifact.code), "path": str(path)},
            format="json",
        )
        assert located.status_code == 201, located.json()
    return TinyLlama(cluster, models, parent, registered)
