"""The UI follows what the checkpoint says of itself (issue 42): the wizard shows the picked artifact's
detected precision, lineage and license instead of asking for them, serves at the detected precision by
default and refuses a precision the weights are not stored in with the API's own 400 message; a parent is
chosen in the UI (at registration, or later on the artifact's page); the artifact page lists what the
inspection found, per file."""

from __future__ import annotations

import json
import re
from html import unescape
from pathlib import Path
from typing import Any

import pytest
from django.test import Client

from governance.artifacts.models import Derivation, ModelArtifact
from governance.artifacts.services import artifact_register
from governance.deployments.models import DeploymentRequest
from governance.evaluations.models import ArtifactInspection, Cluster, ExecutorKind, InspectionStatus
from planner.inspectjob import inspect_checkpoint
from tests.conftest import Personas
from tests.deployments.conftest import SERVING, Flow, digest_of
from tests.deployments.test_weights_precision import W4A16_CONFIG
from tests.planner import inspect_checkpoints as ckpt
from tests.web.test_wizard_teams import FORM

pytestmark = pytest.mark.django_db

APACHE = Path("/usr/share/common-licenses/Apache-2.0")  # Debian's copy, never one in the repository


def _client(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _error_of(page: str, field: str) -> str:
    found = re.search(rf'<ul class="errorlist" id="id_{field}_errors">(.*?)</ul>', page, flags=re.S)
    return unescape(re.sub(r"<[^>]+>", "", found.group(1))).strip() if found else ""


def _derivative(personas: Personas, parent: ModelArtifact | None) -> ModelArtifact:
    """The quantize job's w4a16 derivative (its config.json's quantization_config), as in the API test."""
    data: dict[str, Any] = {
        "name": "Qwen3-30B-A3B-W4A16",
        "source_repo": "org/Qwen3-30B-A3B-W4A16",
        "revision": "q1",
        "weights_digest": digest_of("Qwen3-30B-A3B-W4A16"),
        "license": "apache-2.0",
        "architecture_key": "qwen3-30b-a3b",
        "quantization_config": W4A16_CONFIG,
    }
    if parent is not None:
        data.update(derivation=Derivation.QUANTIZE, parent=parent)
    return artifact_register(actor=personas.requester, team=personas.team, data=data)


def test_the_wizard_refuses_a_w4a16_derivative_declared_bf16_with_the_apis_message(
    flow: Flow, personas: Personas, artifacts: dict[str, ModelArtifact]
) -> None:
    derivative = _derivative(personas, artifacts["apache"])
    api_code = flow.create(derivative, serving_plan={**SERVING, "precision": "bf16"})["code"]
    api = flow.post(personas.requester, api_code, "submit")
    assert api.status_code == 400
    api_message = api.json()["extra"]["fields"]["serving_plan.precision"][0]
    DeploymentRequest.objects.all().delete()

    refused = _client(personas.requester).post(
        "/requests/new", {**FORM, "artifact": str(derivative.code), "precision": "bf16"}
    )

    assert refused.status_code == 400
    assert _error_of(refused.content.decode(), "precision") == api_message
    assert "w4a16 (compressed-tensors, group 128), not bf16" in api_message
    assert DeploymentRequest.objects.count() == 0


def test_the_request_pages_submit_refuses_it_too(
    flow: Flow, personas: Personas, artifacts: dict[str, ModelArtifact]
) -> None:
    """A draft made through the API with the wrong precision, submitted from its page."""
    derivative = _derivative(personas, artifacts["apache"])
    code = flow.create(derivative, serving_plan={**SERVING, "precision": "bf16"})["code"]

    page = _client(personas.requester).post(f"/requests/{code}/submit", follow=True).content.decode()

    assert "the weights are w4a16 (compressed-tensors, group 128), not bf16" in unescape(page)
    assert DeploymentRequest.objects.get(code=code).status == "draft"


def test_the_precision_defaults_to_the_one_the_weights_are_stored_in(
    personas: Personas, artifacts: dict[str, ModelArtifact]
) -> None:
    derivative = _derivative(personas, artifacts["apache"])
    client = _client(personas.requester)

    made = client.post("/requests/new", {**FORM, "artifact": str(derivative.code), "precision": ""})

    assert made.status_code == 302, made.content.decode()[:3000]
    assert DeploymentRequest.objects.get().serving_plan["precision"] == "w4a16"


def test_the_wizard_shows_what_the_picked_artifact_says_of_itself(
    personas: Personas, artifacts: dict[str, ModelArtifact]
) -> None:
    derivative = _derivative(personas, artifacts["apache"])
    client = _client(personas.requester)

    part = unescape(client.get("/requests/new/artifact", {"artifact": str(derivative.code)}).content.decode())
    whole = unescape(client.get("/requests/new", {"artifact": str(derivative.code)}).content.decode())

    for page in (part, whole):
        assert "w4a16 (compressed-tensors, group 128)" in page
        assert "Qwen3-30B-A3B" in page  # the parent
        assert "apache-2.0" in page
    assert 'data-precision="w4a16"' in part
    other = _client(personas.other_requester).get("/requests/new/artifact", {"artifact": str(derivative.code)})
    assert "w4a16" not in other.content.decode()  # another team's artifact is not described


def test_a_new_quantized_artifact_names_its_parent_in_the_wizard(
    personas: Personas, artifacts: dict[str, ModelArtifact]
) -> None:
    client = _client(personas.requester)
    page = client.get("/requests/new").content.decode()
    assert 'name="new_parent"' in page
    form = {
        **FORM,
        "precision": "",
        "new_name": "Qwen3-30B-A3B-W4A16",
        "new_source_repo": "acme/Qwen3-30B-A3B-W4A16",
        "new_revision": "1",
        "new_weights_digest": "sha256:" + "d" * 64,
        "new_license": "apache-2.0",
        "new_architecture_key": "qwen3-30b-a3b",
        "new_quantization_config": json.dumps(W4A16_CONFIG),
        "new_parent": str(artifacts["apache"].code),
        "new_derivation": "quantize",
    }

    made = client.post("/requests/new", form)

    assert made.status_code == 302, made.content.decode()[:3000]
    created = DeploymentRequest.objects.get()
    assert created.artifact.parent == artifacts["apache"]
    assert created.artifact.derivation == Derivation.QUANTIZE
    assert created.serving_plan["precision"] == "w4a16"


def test_the_parent_is_named_later_on_the_artifacts_page(
    flow: Flow, personas: Personas, artifacts: dict[str, ModelArtifact], django_capture_on_commit_callbacks: Any
) -> None:
    """A quantized checkpoint registered without a parent: the page names one, and the request's
    artifact.parent_missing goes (it could never get a served eval before: no baseline)."""
    orphan = _derivative(personas, None)
    code = flow.create(orphan, serving_plan={**SERVING, "precision": "w4a16"})["code"]
    assert flow.post(personas.requester, code, "submit").status_code == 200
    assert "artifact.parent_missing" in [b["code"] for b in flow.get(personas.legal, code)["blockers"]]
    page = f"/artifacts/{orphan.code}/"

    outsider = _client(personas.other_requester).post(
        page + "parent", {"parent": str(artifacts["apache"].code), "derivation": "quantize"}
    )
    assert outsider.status_code == 404
    shown = _client(personas.requester).get(page).content.decode()
    assert 'name="parent"' in shown
    with django_capture_on_commit_callbacks(execute=True):  # its requests are evaluated again after commit
        done = _client(personas.requester).post(
            page + "parent", {"parent": str(artifacts["apache"].code), "derivation": "quantize"}
        )

    assert done.status_code == 302
    orphan.refresh_from_db()
    assert orphan.parent == artifacts["apache"]
    assert orphan.derivation == Derivation.QUANTIZE
    assert "artifact.parent_missing" not in [b["code"] for b in flow.get(personas.legal, code)["blockers"]]


def test_the_artifact_page_lists_what_the_inspection_found_per_file(
    personas: Personas, artifacts: dict[str, ModelArtifact], tmp_path: Path
) -> None:
    root = ckpt.write(
        tmp_path / "m", ckpt._linears(ckpt._packed), ckpt.base_config(quantization_config=ckpt.W4A16_CT), 2
    )
    (root / "LICENSE").write_bytes(APACHE.read_bytes())
    report = inspect_checkpoint(root).to_json()
    for item in report["license_files"]:
        item.pop("text")
    artifact = artifact_register(
        actor=personas.requester,
        team=personas.team,
        data={
            "name": "tiny-w4a16",
            "source_repo": "org/tiny-w4a16",
            "revision": "r1",
            "weights_digest": report["weights_digest"],
            "license": "apache-2.0",
            "architecture_key": "qwen3-30b-a3b",
        },
    )
    cluster = Cluster.objects.create(name="local", executor=ExecutorKind.LOCAL, remote_root=str(tmp_path / "jobs"))
    ArtifactInspection.objects.create(
        artifact=artifact,
        cluster=cluster,
        path=str(root),
        status=InspectionStatus.PASSED,
        weights_digest=report["weights_digest"],
        precision=report["precision"],
        report=report,
    )

    page = unescape(_client(personas.requester).get(f"/artifacts/{artifact.code}/").content.decode())

    for shard in ("model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"):
        row = re.search(rf'<tr data-file="{re.escape(shard)}">(.*?)</tr>', page, flags=re.S)
        assert row, shard
        assert "I32" in row.group(1)
        assert "BF16" in row.group(1)
    assert "w4a16 (compressed-tensors, group 32)" in page
    assert "compressed-tensors" in page  # the config's quantization
    assert re.search(r'<tr data-license-file="LICENSE">.*?apache-2.0', page, flags=re.S)
    assert _client(personas.outsider).get(f"/artifacts/{artifact.code}/").status_code in (403, 404)


def test_a_new_artifact_is_registered_from_its_location_and_read_there(
    personas: Personas, artifacts: dict[str, ModelArtifact], tmp_path: Path
) -> None:
    """On the local cluster: the digest is hashed from the files, the config.json read from them, the
    location recorded and the inspection of the files queued (the job itself: tests/evaluations)."""
    import shutil
    import sys

    from governance.evaluations.models import ArtifactLocation
    from planner.manifest import weights_digest
    from tests.conftest import ROOT

    models = tmp_path / "models"
    directory = models / "tinylm"
    shutil.copytree(ROOT / "planner" / "tinylm" / "checkpoint", directory)
    Cluster.objects.create(
        name="local",
        executor=ExecutorKind.LOCAL,
        python=sys.executable,
        remote_root=str(tmp_path / "jobs"),
        model_roots=[str(models)],
    )
    client = _client(personas.requester)
    form = {
        **FORM,
        "precision": "",
        "new_cluster": "local",
        "new_path": str(directory),
        "new_name": "tinylm",
        "new_source_repo": "acme/tinylm",
        "new_revision": "1",
        "new_license": "apache-2.0",
    }

    made = client.post("/requests/new", form)

    assert made.status_code == 302, made.content.decode()[:3000]
    artifact = DeploymentRequest.objects.get().artifact
    assert artifact.weights_digest == weights_digest(directory)
    assert artifact.config is not None
    assert artifact.config["hidden_size"] == 256
    location = ArtifactLocation.objects.get(artifact=artifact)
    assert location.path == str(directory)
    assert ArtifactInspection.objects.filter(artifact=artifact, status=InspectionStatus.RUNNING).exists()

    outside = client.post("/requests/new", {**form, "new_name": "x", "new_path": str(tmp_path / "jobs")})
    assert outside.status_code == 400
    assert "model roots" in _error_of(outside.content.decode(), "new_path")
