"""Registering a location is the door a hostile checkpoint comes in by (probe of issue 42): through the
API, a directory the files cannot be hashed from is a 400 naming the path, never a 500, and a path that
lies in a model root only by its spelling (a symbolic link on the way leads elsewhere) is refused by
the service and, on the node, by the inspection itself."""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from governance.artifacts.models import ModelArtifact
from governance.artifacts.services import artifact_register
from governance.evaluations.models import ArtifactLocation, Cluster, ExecutorKind
from planner.inspectjob import InspectionRefused, inspect_checkpoint
from planner.inspectjob.run import main
from tests.conftest import ROOT, Personas

pytestmark = pytest.mark.django_db

TINY = ROOT / "planner" / "tinylm" / "checkpoint"


@pytest.fixture
def models(tmp_path: Path, catalog: None) -> Path:
    root = tmp_path / "models"
    root.mkdir()
    Cluster.objects.create(
        name="local",
        executor=ExecutorKind.LOCAL,
        python=sys.executable,
        remote_root=str(tmp_path / "jobs"),
        model_roots=[str(root)],
        default_time_limit_s=300,
    )
    return root


def _register(personas: Personas, name: str, digest: str) -> ModelArtifact:
    return artifact_register(
        actor=personas.requester,
        team=personas.team,
        data={
            "name": name,
            "source_repo": f"org/{name}",
            "revision": "r1",
            "weights_digest": digest,
            "license": "apache-2.0",
            "architecture_key": "llama-3.1-8b",
        },
    )


def _post(personas: Personas, artifact: ModelArtifact, path: Path) -> Any:
    cluster = Cluster.objects.get(name="local")
    return personas.client(personas.requester).post(
        f"/api/v1/clusters/{cluster.code}/locations", {"artifact": str(artifact.code), "path": str(path)}, format="json"
    )


def test_a_file_name_that_is_not_utf8_is_a_400_naming_the_path(personas: Personas, models: Path) -> None:
    directory = models / "tiny-badname"
    shutil.copytree(TINY, directory)
    with open(os.fsencode(directory) + b"/notes-\xff.txt", "wb") as handle:
        handle.write(b"x")
    artifact = _register(personas, "tiny-badname", "sha256:" + "0" * 64)

    response = _post(personas, artifact, directory)

    assert response.status_code == 400, response.content
    body = str(response.json())
    assert "path" in body
    assert "notes-" in body
    assert "UTF-8" in body
    assert not ArtifactLocation.objects.filter(artifact=artifact).exists()


def test_a_path_through_a_link_out_of_the_model_roots_is_refused(
    personas: Personas, models: Path, tmp_path: Path
) -> None:
    """`models/shared` is a link to a directory outside the model roots: `models/shared/ckpt` is inside
    them by its spelling only. Before the fix its files were hashed (the 400 even told their digest) and,
    once registered under that digest, inspected: their license texts stored as the artifact's."""
    outside = tmp_path / "elsewhere"
    shutil.copytree(TINY, outside / "ckpt")
    (models / "shared").symlink_to(outside)
    digest = (
        "sha256:"
        + hashlib.sha256(
            "".join(__import__("planner.manifest").manifest.manifest_lines(outside / "ckpt")).encode()
        ).hexdigest()
    )
    artifact = _register(personas, "tiny-outside", digest)

    response = _post(personas, artifact, models / "shared" / "ckpt")

    assert response.status_code == 400, response.content
    body = str(response.json())
    assert "path" in body
    assert "model roots" in body
    assert not ArtifactLocation.objects.filter(artifact=artifact).exists()


def test_the_node_refuses_a_directory_that_resolves_outside_its_model_roots(tmp_path: Path) -> None:
    """The service's check is lexical on a Slurm cluster (the files are not on its host): the node
    resolves the path and compares it with the model roots it is given."""
    models, outside = tmp_path / "models", tmp_path / "elsewhere"
    shutil.copytree(TINY, outside / "ckpt")
    models.mkdir()
    (models / "shared").symlink_to(outside)
    with pytest.raises(InspectionRefused) as caught:
        inspect_checkpoint(models / "shared" / "ckpt", within=(models,))
    assert caught.value.path == "."
    assert "outside" in caught.value.message
    # a model root that is itself a link (/models -> /lustre/models) is resolved the same way: allowed
    linked_root = tmp_path / "models-link"
    linked_root.symlink_to(outside)
    assert inspect_checkpoint(outside / "ckpt", within=(linked_root,), hash_files=False).files
    out = tmp_path / "out" / "result.json"
    argv = [str(models / "shared" / "ckpt"), "--out", str(out), "--within", str(models)]
    assert main([*argv, "--max-seconds", "0", "--max-memory-mb", "0"]) == 2
    assert "outside" in out.read_text()
