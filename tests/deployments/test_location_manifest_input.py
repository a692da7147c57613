"""A location's `manifest` through the API is hostile text: whatever it holds, the answer is a 400
naming `manifest` (or a 201 for an honest one), never a 500, and nothing is stored."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from governance.artifacts.services import artifact_register
from governance.evaluations.models import ArtifactLocation, Cluster, ExecutorKind
from planner.manifest import digest_of_manifest, legacy_digest
from tests.conftest import Personas

pytestmark = pytest.mark.django_db
SHA = "ab" * 32


@pytest.mark.parametrize(
    ("manifest", "says"),
    [
        (f"{SHA} 1 a\ud800b\n", "surrogate"),  # JSON carries it, UTF-8 (and PostgreSQL) cannot
        (f"{SHA} 1 a\x00b\n", "NUL"),
        (f"{SHA} 1 ../../etc/passwd\n", "not a path relative"),
        (f"{SHA} 1 a\n{SHA} 1 a\n", "listed twice"),
        (f"{SHA} 1 a\r\n", "control characters"),
        (f"{SHA.upper()} 1 a\n", "manifest line 1"),
    ],
)
@pytest.mark.parametrize("form", ["openssf", "legacy"])
def test_a_hostile_manifest_is_a_400(
    personas: Personas, catalog: None, tmp_path: Path, manifest: str, says: str, form: str
) -> None:
    """The requester registers the digest its own manifest hashes to (in either form): only the
    manifest's content can be refused."""
    try:
        digest = digest_of_manifest(manifest) if form == "openssf" else legacy_digest(manifest)
    except ValueError:
        digest = legacy_digest(manifest)
    artifact = artifact_register(
        actor=personas.requester,
        team=personas.team,
        data={
            "name": "hostile",
            "source_repo": "org/hostile",
            "revision": "r1",
            "weights_digest": digest,
            "license": "apache-2.0",
            "architecture_key": "llama-3.1-8b",
        },
    )
    cluster = Cluster.objects.create(
        name="slurm-a",
        executor=ExecutorKind.SLURM,
        host="gpu.example",
        user="svc",
        python=sys.executable,
        remote_root=str(tmp_path / "jobs"),
        model_roots=[str(tmp_path / "models")],
    )
    body = json.dumps({"artifact": str(artifact.code), "path": str(tmp_path / "models" / "x"), "manifest": manifest})
    answer = personas.client(personas.requester).post(
        f"/api/v1/clusters/{cluster.code}/locations", body, content_type="application/json"
    )
    assert answer.status_code == 400, answer.content[:300]
    assert "manifest" in answer.json()["extra"]["fields"]
    assert says in answer.json()["message"]
    assert not ArtifactLocation.objects.exists()
