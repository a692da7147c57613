"""A quantized derivative carries its parent's license files and a model card naming its base model,
the relation and the license (issue 42): read back by the same inspection legal relies on."""

from __future__ import annotations

import shutil
from pathlib import Path

from planner.inspectjob import inspect_checkpoint
from planner.quantjob.obligations import carry_obligations
from tests.conftest import ROOT

LICENSES = Path("/usr/share/common-licenses")
TINY = ROOT / "planner" / "tinylm" / "checkpoint"


def test_the_parents_license_files_and_a_card_are_written_into_the_derivative(tmp_path: Path) -> None:
    parent = tmp_path / "parent"
    shutil.copytree(TINY, parent)
    (parent / "LICENSE").write_text((LICENSES / "Apache-2.0").read_text())
    (parent / "NOTICE").write_text("Tiny Llama\nCopyright 2026 Acme Labs\n")
    (parent / "USE_POLICY.md").write_text("Do not use the tiny model for harm.\n")
    (tmp_path / "elsewhere.txt").write_text("secret")
    (parent / "LICENSE-extra").symlink_to(tmp_path / "elsewhere.txt")  # never followed
    derivative = tmp_path / "derivative"
    shutil.copytree(TINY, derivative)

    copied = carry_obligations(
        parent,
        derivative,
        {"base_model": "acme/tiny: base", "license": "apache-2.0", "output_name": "tiny-w4"},
        "w4a16",
    )

    assert copied == ["LICENSE", "NOTICE", "USE_POLICY.md"]
    assert not (derivative / "LICENSE-extra").exists()
    report = inspect_checkpoint(derivative).to_json()
    assert report["model_card"]["base_model"] == ["acme/tiny: base"]
    assert report["model_card"]["base_model_relation"] == "quantized"
    assert report["model_card"]["license"] == "apache-2.0"
    kinds = sorted(item["kind"] for item in report["license_files"])
    assert kinds == ["license", "notice", "use_policy"]
    parent_text = (parent / "LICENSE").read_text()
    assert next(f for f in report["license_files"] if f["kind"] == "license")["text"] == parent_text


def test_a_base_model_name_with_line_breaks_stays_one_field_of_the_card(tmp_path: Path) -> None:
    """The base model is the parent's source_repo, free text typed at registration: a line break in
    it (or U+2028, a line break to str.splitlines) must not close the front matter early or add a
    field (probe of issue 42: it ended the card at '---', so its license was never read)."""
    parent, derivative = tmp_path / "parent", tmp_path / "derivative"
    shutil.copytree(TINY, parent)
    shutil.copytree(TINY, derivative)
    (parent / "LICENSE").write_text("MIT License\n")
    for name in ("org/x\n---\nlicense: mit\n", "org/y\u2028---\u2028license: mit"):
        carry_obligations(parent, derivative, {"base_model": name, "license": "llama-3.1"}, "w4a16")
        report = inspect_checkpoint(derivative).to_json()
        assert report["model_card"]["base_model"] == [name]
        assert report["model_card"]["license"] == "llama-3.1"
        assert not [p for p in report["problems"] if p["file"] == "README.md"]
