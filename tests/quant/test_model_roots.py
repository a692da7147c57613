"""A model directory is checked where it leads, not as text (issue 43): on the node, every job payload
resolves a checkpoint path's symbolic links and refuses one that leads outside the cluster's model
roots (each resolved too) before anything is read."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import planner.manifest as hashing
from planner.evaljob import served
from planner.manifest import manifest_lines, resolve_inside_roots, weights_digest
from planner.quantjob import recipes
from planner.quantjob import run as quantjob


def _checkpoint(path: Path, weights: bytes) -> dict[str, Any]:
    path.mkdir(parents=True)
    (path / "config.json").write_text('{"model_type": "tiny"}\n')
    (path / "model.safetensors").write_bytes(weights)
    return {"path": str(path), "digest": weights_digest(path), "manifest": "".join(manifest_lines(path))}


@pytest.fixture
def layout(tmp_path: Path) -> dict[str, Any]:
    """root/base (a real checkpoint), root/link -> elsewhere/ckpt (outside the root), root/alias ->
    root/base, and a root that is itself a link (roots may be links: they are resolved too)."""
    root = tmp_path / "models"
    base = _checkpoint(root / "base", b"\x01" * 32)
    foreign = _checkpoint(tmp_path / "elsewhere" / "ckpt", b"\x02" * 32)
    (root / "link").symlink_to(tmp_path / "elsewhere" / "ckpt", target_is_directory=True)
    (root / "alias").symlink_to(root / "base", target_is_directory=True)
    (tmp_path / "root-link").symlink_to(root, target_is_directory=True)
    return {"root": root, "base": base, "foreign": foreign}


@pytest.fixture
def no_reading(monkeypatch: pytest.MonkeyPatch) -> None:
    def read(path: Path) -> str:
        raise AssertionError(f"{path} was read")

    monkeypatch.setattr(hashing, "file_sha256", read)
    monkeypatch.setattr("planner.evaljob.manifest.file_sha256", read)


def test_a_path_is_checked_where_it_leads(layout: dict[str, Any], tmp_path: Path) -> None:
    root = layout["root"]
    assert resolve_inside_roots(str(root / "base"), [str(root)], "model_path") == root / "base"
    assert resolve_inside_roots(str(root / "alias"), [str(root)], "model_path") == root / "base"
    assert resolve_inside_roots(str(root / "base"), [str(tmp_path / "root-link")], "model_path") == root / "base"
    with pytest.raises(ValueError, match=r"^model_path: .*outside the model roots") as caught:
        resolve_inside_roots(str(root / "link"), [str(root)], "model_path")
    assert "elsewhere" not in str(caught.value)  # where the link leads is not told
    with pytest.raises(ValueError, match="outside the model roots"):
        resolve_inside_roots(str(root / "link" / "config.json"), [str(root)], "model_path")
    with pytest.raises(ValueError, match="no model roots"):
        resolve_inside_roots(str(root / "base"), [], "model_path")


def test_the_served_job_refuses_a_linked_artifact_before_reading_it(layout: dict[str, Any], no_reading: None) -> None:
    root = layout["root"]
    linked = {**layout["foreign"], "path": str(root / "link")}  # the foreign files, registered through the link
    spec = {"artifacts": {"baseline": layout["base"], "candidate": linked}, "model_roots": [str(root)]}
    with pytest.raises(ValueError, match=r"artifacts\.baseline\.path|artifacts\.candidate\.path") as caught:
        served.verify(spec)
    assert "outside the model roots" in str(caught.value)
    with pytest.raises(ValueError, match="no model roots"):  # a spec without roots is refused, not trusted
        served.verify({"artifacts": {"baseline": layout["base"], "candidate": layout["base"]}})


def test_the_served_job_reads_the_resolved_directory(layout: dict[str, Any]) -> None:
    root = layout["root"]
    alias = {**layout["base"], "path": str(root / "alias")}
    spec: dict[str, Any] = {"artifacts": {"baseline": layout["base"], "candidate": alias}, "model_roots": [str(root)]}
    served.verify(spec)
    assert spec["artifacts"]["candidate"]["path"] == str(root / "base")  # what the engine is given


def test_the_quantize_job_refuses_a_linked_parent_or_output_before_reading(
    layout: dict[str, Any], no_reading: None, tmp_path: Path
) -> None:
    root = layout["root"]
    spec = {
        "model_path": str(root / "link"),
        "parent_digest": layout["foreign"]["digest"],
        "recipe": recipes.recipe("w4a16-gptq"),
        "output_dir": str(root / "derivatives" / "out"),
        "output_name": "out",
        "model_roots": [str(root)],
    }
    with pytest.raises(ValueError, match=r"^model_path: .*outside the model roots"):
        quantjob.run(spec, tmp_path / "attempt")
    (root / "escape").symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    with pytest.raises(ValueError, match=r"^output_dir: .*outside the model roots"):
        quantjob.run({**spec, "model_path": str(root / "base"), "output_dir": str(root / "escape" / "out")}, tmp_path)
    with pytest.raises(ValueError, match=r"^calibration\.path: .*outside the model roots"):
        quantjob.run(
            {**spec, "model_path": str(root / "base"), "calibration": {"path": str(root / "link" / "config.json")}},
            tmp_path,
        )
    assert not (tmp_path / "elsewhere" / "out").exists()


def test_the_screening_job_refuses_a_linked_model_before_loading_it(layout: dict[str, Any], tmp_path: Path) -> None:
    from planner.evaljob import run as screening

    root = layout["root"]
    spec = {"model": {"path": str(root / "link")}, "scheme": "w8a8", "model_roots": [str(root)], "device": "cpu"}
    with pytest.raises(ValueError, match=r"^model\.path: .*outside the model roots"):
        screening.run(spec, tmp_path / "attempt")
