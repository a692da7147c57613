"""What a checkpoint can put into the report must be something result.json and the service's database
can hold (probe of issue 42): a JSON string escaping a NUL or an unpaired UTF-16 surrogate, a NUL in a
license text, a tensor dimension of thousands of digits, or thousands of license files. Each is refused
naming the file (or, in the model card, a problem), never a traceback that leaves no result.json."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from planner.inspectjob import InspectionRefused, InspectLimits, inspect_checkpoint
from tests.conftest import ROOT
from tests.planner import inspect_checkpoints as ckpt

MIT_TEXT = "MIT License\n\nPermission is hereby granted, free of charge.\n"
BF16_TENSOR = {"dtype": "BF16", "shape": [2, 2], "data_offsets": [0, 8]}


def _refusal(root: Path, limits: InspectLimits | None = None) -> InspectionRefused:
    with pytest.raises(InspectionRefused) as caught:
        inspect_checkpoint(root, limits=limits or InspectLimits())
    return caught.value


def _storable(report: dict[str, object]) -> bool:
    """What the job writes (UTF-8 JSON) and PostgreSQL's jsonb accepts (no U+0000)."""
    text = json.dumps(report, ensure_ascii=False)
    text.encode("utf-8")  # raises on an unpaired surrogate
    return "\\u0000" not in text and "\x00" not in text


@pytest.mark.parametrize("escape", ["\\u0000", "\\ud800", "\\udc80"])
def test_config_json_with_a_string_the_report_cannot_hold(tmp_path: Path, escape: str) -> None:
    root = ckpt.bf16(tmp_path / "m")
    (root / "config.json").write_text('{"model_type": "llama' + escape + '", "torch_dtype": "bfloat16"}')
    refusal = _refusal(root)
    assert refusal.path == "config.json"
    assert "NUL" in refusal.message or "surrogate" in refusal.message


@pytest.mark.parametrize("escape", ["\\u0000", "\\ud800"])
def test_a_safetensors_tensor_name_the_report_cannot_hold(tmp_path: Path, escape: str) -> None:
    root = ckpt.bf16(tmp_path / "m")
    header = ('{"model.layers.0.mlp.' + escape + '.weight": ' + json.dumps(BF16_TENSOR) + "}").encode()
    ckpt.raw_safetensors(root / "extra.safetensors", header, b"\0" * 8)
    assert _refusal(root).path == "extra.safetensors"


def test_a_surrogate_pair_is_a_character_not_a_refusal(tmp_path: Path) -> None:
    root = ckpt.bf16(tmp_path / "m")
    config = json.loads((root / "config.json").read_text())
    (root / "config.json").write_text(json.dumps({**config, "model_type": "llama\U0001f999"}, ensure_ascii=True))
    report = inspect_checkpoint(root).to_json()
    assert report["config"]["model_type"] == "llama\U0001f999"
    assert _storable(report)


def test_a_license_text_with_a_nul_byte_is_refused_naming_it(tmp_path: Path) -> None:
    root = ckpt.bf16(tmp_path / "m")
    (root / "LICENSE").write_bytes(b"MIT License\n\x00Permission is hereby granted")
    refusal = _refusal(root)
    assert refusal.path == "LICENSE"
    assert "NUL" in refusal.message


def test_model_card_fields_the_report_cannot_hold_are_problems(tmp_path: Path) -> None:
    root = ckpt.bf16(tmp_path / "m")
    (root / "LICENSE").write_text("MIT License\n")
    (root / "README.md").write_text('---\nlicense: "mit\\0x"\nbase_model: ["org/a\\ud800", "org/b"]\n---\n# M\n')
    report = inspect_checkpoint(root)
    assert report.model_card is not None
    assert report.model_card.license is None
    assert report.model_card.base_model == ("org/b",)
    fields = [p.message for p in report.problems if p.code == "card.field" and p.file == "README.md"]
    assert any(m.startswith("license:") for m in fields)
    assert any(m.startswith("base_model:") for m in fields)
    assert _storable(report.to_json())


def test_a_tensor_dimension_of_thousands_of_digits_is_refused(tmp_path: Path) -> None:
    root = ckpt.bf16(tmp_path / "m")
    shape = ",".join(["9" * 4000] * 3)
    header = ('{"x.weight": {"dtype": "BF16", "shape": [' + shape + '], "data_offsets": [0, 8]}}').encode()
    ckpt.raw_safetensors(root / "extra.safetensors", header, b"\0" * 8)
    refusal = _refusal(root)
    assert refusal.path == "extra.safetensors"
    assert "shape" in refusal.message


def test_thousands_of_license_files_are_refused_naming_the_first_past_the_bound(tmp_path: Path) -> None:
    root = ckpt.bf16(tmp_path / "m")
    for number in range(12):
        (root / f"LICENSE.{number:02d}").write_text(f"text {number}\n")
    refusal = _refusal(root, InspectLimits(max_license_files=10))
    assert refusal.path == "LICENSE.10"
    assert "license files" in refusal.message


def test_license_texts_are_bounded_in_total_not_only_each(tmp_path: Path) -> None:
    root = ckpt.bf16(tmp_path / "m")
    for number in range(3):
        (root / f"NOTICE.{number}").write_text("x" * 1000)
    refusal = _refusal(root, InspectLimits(max_license_bytes=2000, max_license_total_bytes=2500))
    assert refusal.path == "NOTICE.2"


def test_the_job_never_leaves_a_traceback_instead_of_a_result(tmp_path: Path) -> None:
    """Before the fix, a surrogate in the model card reached json.dumps(...).encode() in main():
    a UnicodeEncodeError traceback, and no result.json for the service to read."""
    root = ckpt.bf16(tmp_path / "m")
    (root / "LICENSE").write_text("MIT License\n")
    (root / "README.md").write_text('---\nlicense: "mit\\ud800"\n---\n')
    out = tmp_path / "out" / "result.json"
    done = subprocess.run(
        [sys.executable, "-m", "planner.inspectjob", str(root), "--out", str(out), "--job"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )
    assert "Traceback" not in done.stderr + done.stdout
    assert done.returncode == 0
    result = json.loads(out.read_text(encoding="utf-8"))
    assert result["model_card"]["license"] is None


def test_a_license_file_changed_between_its_reading_and_its_hashing_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A text kept must be one the approved digest covers: a file swapped while the inspection ran
    (a link to another file while the text was read, the original back for hashing) is refused."""
    from planner.inspectjob import checkpoint

    root = ckpt.bf16(tmp_path / "m")
    (root / "LICENSE").write_text(MIT_TEXT)
    original = checkpoint.read_license

    def swapped_after_reading(*args: object, **kwargs: object) -> object:
        read = original(*args, **kwargs)  # type: ignore[arg-type]
        (root / "LICENSE").write_text(MIT_TEXT + "amended\n")
        return read

    monkeypatch.setattr(checkpoint, "read_license", swapped_after_reading)
    refusal = _refusal(root)
    assert refusal.path == "LICENSE"
    assert "changed" in refusal.message
