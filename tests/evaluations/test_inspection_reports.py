"""The service reads the node's inspection report as data to check, not to trust (probe of issue 42):
a report that contradicts itself, has fields of the wrong types or carries more text than any
inspection writes is refused with a reason, never stored as a pass and never a crash; a result
holding text the database cannot store fails the job with a reason instead of failing every poll."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from governance.artifacts.models import ModelArtifact
from governance.artifacts.services import artifact_register
from governance.evaluations.inspections import artifact_inspection_complete, artifact_inspection_request
from governance.evaluations.models import (
    ArtifactInspection,
    ArtifactLocation,
    Cluster,
    ExecutorKind,
    InspectionStatus,
    JobRunState,
)
from governance.evaluations.selectors import artifact_weights_precision
from governance.licenses.models import License, LicenseText
from governance.licenses.services import license_catalog_load
from planner.cluster.base import verify_result
from planner.inspectjob import inspect_checkpoint, license_fingerprint
from tests.conftest import Personas
from tests.planner import inspect_checkpoints as ckpt

pytestmark = pytest.mark.django_db

MIT = "MIT License\n\nPermission is hereby granted, free of charge, to any person obtaining a copy\n"


@pytest.fixture
def w4a16_report(tmp_path: Path) -> dict[str, Any]:
    root = ckpt.w4a16(tmp_path / "m")
    (root / "LICENSE").write_text(MIT)
    return inspect_checkpoint(root).to_json()


def _inspection(personas: Personas, report: dict[str, Any], tmp_path: Path) -> ArtifactInspection:
    if not License.objects.exists():
        license_catalog_load(actor="system:test")
    cluster = Cluster.objects.create(
        name="local", executor=ExecutorKind.LOCAL, python=sys.executable, remote_root=str(tmp_path / "jobs")
    )
    artifact: ModelArtifact = artifact_register(
        actor=personas.requester,
        team=personas.team,
        data={
            "name": "tiny-w4a16",
            "source_repo": "org/tiny-w4a16",
            "revision": "r1",
            "weights_digest": report["weights_digest"],
            "license": "apache-2.0",
            "architecture_key": "llama-3.1-8b",
        },
    )
    location = ArtifactLocation.objects.create(artifact=artifact, cluster=cluster, path=str(tmp_path / "m"))
    return artifact_inspection_request(location=location, actor=personas.requester)


def _complete(inspection: ArtifactInspection, result: Any) -> ArtifactInspection:
    job = inspection.job
    assert job is not None
    job.state, job.result = JobRunState.SUCCEEDED, result
    job.save()
    return artifact_inspection_complete(inspection_id=inspection.pk)


def test_an_honest_report_passes_and_the_fingerprint_is_the_services_own(
    personas: Personas, w4a16_report: dict[str, Any], tmp_path: Path
) -> None:
    lying = {
        **w4a16_report,
        "license_files": [{**w4a16_report["license_files"][0], "fingerprint": "sha256:" + "0" * 64}],
    }
    inspection = _complete(_inspection(personas, lying, tmp_path), lying)
    assert inspection.status == InspectionStatus.PASSED
    assert inspection.report is not None
    assert inspection.report["license_files"][0]["fingerprint"] == license_fingerprint(MIT)
    assert artifact_weights_precision(inspection.artifact).precision == "w4a16"


def test_a_report_whose_precision_contradicts_its_own_tensors_is_refused(
    personas: Personas, w4a16_report: dict[str, Any], tmp_path: Path
) -> None:
    """The node claims bf16 for packed int4 weights: the service must not store bf16 as the weights."""
    assert w4a16_report["tensors"]["linear_by_kind"].get("int_packed")
    lying = {**w4a16_report, "precision": {**w4a16_report["precision"], "key": "bf16", "summary": "bf16"}}
    inspection = _complete(_inspection(personas, lying, tmp_path), lying)
    assert inspection.status == InspectionStatus.REFUSED
    assert "precision" in inspection.reason
    assert artifact_weights_precision(inspection.artifact).source != "inspection"


@pytest.mark.parametrize(
    "change",
    [
        {"precision": "bf16"},
        {"precision": {"key": 4}},
        {"precision": {"key": "int3", "summary": "int3"}},
        {"license_files": "LICENSE"},
        {"license_files": ["LICENSE"]},
        {"license_files": [{"path": "LICENSE", "kind": "license", "text": 5}]},
        {"model_card": ["apache-2.0"]},
        {"model_card": {"license": {"a": 1}}},
        {"tensors": []},
        {"problems": "none"},
        {"manifest": "0" * 64 + " 1 config.json\n"},
        {"license_files": [{"path": "LICENSE", "kind": "license", "text": MIT, "sha256": "0" * 64}]},
        {"structure": {"tensors": -1, "names_sha256": "a", "shapes_sha256": "b"}},
        {"safetensors": [{"path": 3, "tensors": 1, "dtypes": {}}]},
        {"config": {"architectures": [], "dimensions": {"hidden_size": "64"}}},
    ],
    ids=lambda change: f"{next(iter(change))}={str(next(iter(change.values())))[:20]}",
)
def test_a_report_with_fields_of_the_wrong_type_is_refused_not_a_crash(
    personas: Personas, w4a16_report: dict[str, Any], tmp_path: Path, change: dict[str, Any]
) -> None:
    report = {**w4a16_report, **change}
    inspection = _complete(_inspection(personas, report, tmp_path), report)
    assert inspection.status == InspectionStatus.REFUSED
    assert next(iter(change)) in inspection.reason


@pytest.mark.parametrize("shape", ["a thousand files", "one text of 8 MiB"])
def test_more_license_text_than_an_inspection_writes_is_refused_and_nothing_kept(
    personas: Personas, w4a16_report: dict[str, Any], tmp_path: Path, shape: str
) -> None:
    item = w4a16_report["license_files"][0]
    if shape == "a thousand files":
        files = [{**item, "path": f"LICENSE.{n}", "text": f"{MIT} {n}"} for n in range(1000)]
    else:
        files = [{**item, "text": "x" * (8 << 20)}]
    report = {**w4a16_report, "license_files": files}
    inspection = _complete(_inspection(personas, report, tmp_path), report)
    assert inspection.status == InspectionStatus.REFUSED
    assert "license_files" in inspection.reason
    assert LicenseText.objects.count() == 0


@pytest.mark.parametrize("escape", [b"\\u0000", b"\\ud800"])
def test_a_result_the_database_cannot_store_is_not_a_valid_result(escape: bytes) -> None:
    import hashlib

    raw = b'{"format": "governance.inspection/1", "note": "a' + escape + b'b"}'
    result, problem = verify_result(raw, hashlib.sha256(raw).hexdigest().encode())
    assert result is None
    assert "NUL" in problem or "surrogate" in problem
