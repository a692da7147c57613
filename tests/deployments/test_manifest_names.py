"""The OpenSSF weights digest counts the files' hashes in path order, not their names: the same bytes
under other names (the weights that were evaluated as an unused file, an unused file as the weights)
have the same digest. Once the service holds a manifest of an artifact's files, every location of it
goes by those names: a second location's manifest may not rename them, and a location without one
is checked (eval, inspection) against them."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from governance.artifacts.models import ModelArtifact
from governance.artifacts.services import artifact_register
from governance.evaluations.evals import _location
from governance.evaluations.models import ArtifactLocation, Cluster, ExecutorKind
from planner.manifest import file_sha256, manifest_lines, weights_digest
from tests.conftest import Personas

pytestmark = pytest.mark.django_db


def _cluster(name: str, root: Path, tmp_path: Path, executor: str = ExecutorKind.LOCAL) -> Cluster:
    root.mkdir(parents=True, exist_ok=True)
    return Cluster.objects.create(
        name=name,
        executor=executor,
        python=sys.executable,
        remote_root=str(tmp_path / f"jobs-{name}"),
        model_roots=[str(root)],
        default_time_limit_s=300,
        **({"host": "gpu.example", "user": "svc"} if executor == ExecutorKind.SLURM else {}),
    )


@pytest.fixture
def registered(tmp_path: Path, personas: Personas, catalog: None) -> tuple[ModelArtifact, Path]:
    """An artifact whose files (weights.bin: evaluated; extra.bin: never loaded) lie on cluster one,
    its location there registered through the API (the manifest hashed from the files)."""
    one = _cluster("one", tmp_path / "models-one", tmp_path)
    checkpoint = tmp_path / "models-one" / "ckpt"
    checkpoint.mkdir()
    (checkpoint / "extra.bin").write_bytes(b"bytes nobody evaluated")
    (checkpoint / "weights.bin").write_bytes(b"the evaluated weights")
    artifact = artifact_register(
        actor=personas.requester,
        team=personas.team,
        data={
            "name": "renamed",
            "source_repo": "org/renamed",
            "revision": "r1",
            "weights_digest": weights_digest(checkpoint),
            "license": "apache-2.0",
            "architecture_key": "llama-3.1-8b",
        },
    )
    answer = personas.client(personas.requester).post(
        f"/api/v1/clusters/{one.code}/locations",
        {"artifact": str(artifact.code), "path": str(checkpoint)},
        format="json",
    )
    assert answer.status_code == 201, answer.json()
    return artifact, checkpoint


def test_a_second_location_may_not_list_the_same_bytes_under_other_names(
    registered: tuple[ModelArtifact, Path], personas: Personas, tmp_path: Path
) -> None:
    artifact, checkpoint = registered
    two = _cluster("two", tmp_path / "models-two", tmp_path, ExecutorKind.SLURM)
    extra, weights = file_sha256(checkpoint / "extra.bin"), file_sha256(checkpoint / "weights.bin")
    # path order kept (a < weights.bin), names swapped: the bytes nobody evaluated are loaded as the weights
    renamed = f"{extra} 22 a.bin\n{weights} 21 weights.bin\n"
    honest = "".join(manifest_lines(checkpoint))
    client = personas.client(personas.requester)
    path = f"/api/v1/clusters/{two.code}/locations"
    body = {"artifact": str(artifact.code), "path": str(tmp_path / "models-two" / "ckpt")}
    answer = client.post(path, {**body, "manifest": renamed}, format="json")
    assert answer.status_code == 400, answer.json()
    assert "manifest" in answer.json()["extra"]["fields"]
    assert not ArtifactLocation.objects.filter(cluster=two).exists()
    assert client.post(path, {**body, "manifest": honest}, format="json").status_code == 201


def test_a_location_without_a_manifest_is_checked_against_the_artifact_s_names(
    registered: tuple[ModelArtifact, Path], personas: Personas, tmp_path: Path
) -> None:
    artifact, checkpoint = registered
    two = _cluster("two", tmp_path / "models-two", tmp_path, ExecutorKind.SLURM)
    answer = personas.client(personas.requester).post(
        f"/api/v1/clusters/{two.code}/locations",
        {"artifact": str(artifact.code), "path": str(tmp_path / "models-two" / "ckpt")},
        format="json",
    )
    assert answer.status_code == 201, answer.json()
    # the eval job and the inspection on cluster two verify the files by the names read on cluster one
    assert _location(artifact, two, "candidate")["manifest"] == "".join(manifest_lines(checkpoint))


def test_the_same_location_registered_again_may_not_rename_the_files(
    registered: tuple[ModelArtifact, Path], personas: Personas
) -> None:
    """Before its first inspection passed, too: the location's own manifest already names the files."""
    artifact, checkpoint = registered
    one = Cluster.objects.get(name="one")
    extra, weights = file_sha256(checkpoint / "extra.bin"), file_sha256(checkpoint / "weights.bin")
    answer = personas.client(personas.requester).post(
        f"/api/v1/clusters/{one.code}/locations",
        {
            "artifact": str(artifact.code),
            "path": str(checkpoint),
            "manifest": f"{extra} 22 a.bin\n{weights} 21 weights.bin\n",
        },
        format="json",
    )
    assert answer.status_code == 400, answer.json()
    assert ArtifactLocation.objects.get(cluster=one).manifest == "".join(manifest_lines(checkpoint))
