"""The node's artifact check says that files do not match, never what they hash to (issue 43): the
directory may be another team's, and its digest tells which weights that team holds."""

from __future__ import annotations

from pathlib import Path

import pytest

from planner.evaljob.manifest import ArtifactMismatch, verify_artifact
from planner.manifest import manifest_lines, weights_digest


def _checkpoint(path: Path, weights: bytes) -> Path:
    path.mkdir(parents=True)
    (path / "config.json").write_text('{"model_type": "tiny"}\n')
    (path / "model.safetensors").write_bytes(weights)
    return path


def test_a_directory_of_other_weights_is_refused_without_its_digest(tmp_path: Path) -> None:
    ours = _checkpoint(tmp_path / "ours", b"\x01" * 32)
    theirs = _checkpoint(tmp_path / "theirs", b"\x02" * 32)
    registered, foreign = weights_digest(ours), weights_digest(theirs)
    with pytest.raises(ArtifactMismatch, match="do not match") as caught:
        verify_artifact(theirs, registered, None, "candidate")
    assert foreign not in str(caught.value)
    assert foreign.removeprefix("sha256:")[:12] not in str(caught.value)
    # with the registered manifest, the file that differs is named; no digest of the foreign files
    with pytest.raises(ArtifactMismatch, match=r"model\.safetensors differs") as caught:
        verify_artifact(theirs, registered, "".join(manifest_lines(ours)), "candidate")
    assert foreign not in str(caught.value)
    # a registered manifest that does not hash to the digest: no hash of it in the message either
    stray = "".join(manifest_lines(theirs))
    with pytest.raises(ArtifactMismatch, match="registered manifest") as caught:
        verify_artifact(theirs, registered, stray, "candidate")
    assert foreign not in str(caught.value)
