"""License texts and the model card as the node's inspection finds them (issue 42). The license texts
come from Debian's /usr/share/common-licenses at test time; none is copied into the repository."""

from __future__ import annotations

import hashlib
import re
import textwrap
from pathlib import Path

import pytest

from planner.inspectjob import InspectionRefused, inspect_checkpoint, license_fingerprint, normalise_license_text
from tests.planner import inspect_checkpoints as ckpt

COMMON = Path("/usr/share/common-licenses")
needs_texts = pytest.mark.skipif(not (COMMON / "Apache-2.0").is_file(), reason="Debian's common-licenses absent")


def _rewrapped(text: str) -> str:
    """The same words, wrapped at 50 columns, indented, with CRLF line ends and a byte-order mark."""
    words = re.split(r"\s+", text.strip())
    return "\ufeff" + "\r\n".join("   " + line for line in textwrap.wrap(" ".join(words), 50)) + "\r\n\r\n"


@needs_texts
def test_apache_text_rewrapped_has_the_same_fingerprint_and_gpl3_another() -> None:
    apache = (COMMON / "Apache-2.0").read_text(encoding="utf-8")
    gpl3 = (COMMON / "GPL-3").read_text(encoding="utf-8")
    assert _rewrapped(apache) != apache
    assert license_fingerprint(_rewrapped(apache)) == license_fingerprint(apache)
    assert license_fingerprint(apache.upper()) == license_fingerprint(apache)
    assert license_fingerprint(gpl3) != license_fingerprint(apache)
    assert license_fingerprint(apache.replace("Apache", "Apache ", 1)) == license_fingerprint(apache)
    assert license_fingerprint(apache.replace("2.0", "2.1", 1)) != license_fingerprint(apache)
    expected = hashlib.sha256(normalise_license_text(apache).encode()).hexdigest()
    assert license_fingerprint(apache) == f"sha256:{expected}"


def test_normalisation_is_nfkc_whitespace_and_case() -> None:
    assert (
        normalise_license_text("\ufeff  \uff2c\uff49\uff43\uff45\uff4e\uff53\uff45\u00a0TERMS\n\n\tof \ufb01le  ")
        == "license terms of file"
    )


@needs_texts
def test_license_files_are_found_at_the_top_level_and_fingerprinted(tmp_path: Path) -> None:
    root = ckpt.bf16(tmp_path / "m")
    apache = (COMMON / "Apache-2.0").read_bytes()
    (root / "LICENSE").write_bytes(apache)
    (root / "USE_POLICY.md").write_text("Acceptable use: be kind.\n")
    (root / "notice.txt").write_text("Built with Tiny\n")
    (root / "original").mkdir()
    (root / "original" / "LICENSE").write_bytes(apache)  # not the artifact's own license file
    report = inspect_checkpoint(root).to_json()
    found = {entry["path"]: entry for entry in report["license_files"]}
    assert set(found) == {"LICENSE", "USE_POLICY.md", "notice.txt"}
    assert {path: entry["kind"] for path, entry in found.items()} == {
        "LICENSE": "license",
        "USE_POLICY.md": "use_policy",
        "notice.txt": "notice",
    }
    assert found["LICENSE"]["sha256"] == hashlib.sha256(apache).hexdigest()
    assert found["LICENSE"]["fingerprint"] == license_fingerprint(apache.decode())
    assert found["LICENSE"]["text"] == apache.decode()
    kinds = {entry["path"]: entry["kind"] for entry in report["files"]}
    assert (kinds["LICENSE"], kinds["original/LICENSE"]) == ("license", "other")
    assert "license.missing" not in {p["code"] for p in report["problems"]}


def test_no_license_file_is_a_finding(tmp_path: Path) -> None:
    report = inspect_checkpoint(ckpt.bf16(tmp_path / "m")).to_json()
    assert report["license_files"] == []
    assert "license.missing" in {p["code"] for p in report["problems"]}


def test_a_license_that_is_not_utf8_is_kept_with_a_problem(tmp_path: Path) -> None:
    root = ckpt.bf16(tmp_path / "m")
    (root / "LICENCE").write_bytes("Copyright © 2025 Ünïcode GmbH".encode("latin-1"))
    report = inspect_checkpoint(root).to_json()
    entry = report["license_files"][0]
    assert (entry["path"], entry["utf8"]) == ("LICENCE", False)
    assert "GmbH" in entry["text"]
    assert any(p["code"] == "license.not_utf8" and p["file"] == "LICENCE" for p in report["problems"])


CARD = """---
license: other
license_name: llama3.1
license_link: https://example.com/llama3_1/LICENSE
base_model:
- meta-llama/Llama-3.1-8B-Instruct
base_model_relation: quantized
tags: [w4a16]
---

# A quantized model
"""


def test_model_card_front_matter(tmp_path: Path) -> None:
    root = ckpt.bf16(tmp_path / "m")
    (root / "README.md").write_text(CARD)
    report = inspect_checkpoint(root).to_json()
    assert report["model_card"] == {
        "license": "other",
        "license_name": "llama3.1",
        "license_link": "https://example.com/llama3_1/LICENSE",
        "base_model": ["meta-llama/Llama-3.1-8B-Instruct"],
        "base_model_relation": "quantized",
    }
    assert {f["path"]: f["kind"] for f in report["files"]}["README.md"] == "model_card"


@pytest.mark.parametrize(
    ("text", "code"),
    [
        ("# no front matter\n", "card.no_front_matter"),
        ("---\nlicense: mit\n", "card.unterminated"),
        ("---\nlicense: [unclosed\n---\n", "card.yaml"),
        ("---\n!!python/object/apply:os.system ['true']\n---\n", "card.yaml"),
        ("---\n- a list\n---\n", "card.yaml"),
    ],
)
def test_a_card_without_usable_front_matter_is_a_problem(tmp_path: Path, text: str, code: str) -> None:
    root = ckpt.bf16(tmp_path / "m")
    (root / "README.md").write_text(text)
    report = inspect_checkpoint(root).to_json()
    assert report["model_card"] is None
    assert any(p["code"] == code and p["file"] == "README.md" for p in report["problems"])


def test_a_deeply_nested_card_is_refused(tmp_path: Path) -> None:
    root = ckpt.bf16(tmp_path / "m")
    (root / "README.md").write_text("---\nlicense: " + "[" * 50_000 + "]" * 50_000 + "\n---\n")
    with pytest.raises(InspectionRefused) as caught:
        inspect_checkpoint(root)
    assert caught.value.path == "README.md"


def test_a_card_with_a_base_model_string_and_a_bad_field(tmp_path: Path) -> None:
    root = ckpt.bf16(tmp_path / "m")
    (root / "README.md").write_text("---\nlicense: {a: 1}\nbase_model: org/base\n---\n")
    report = inspect_checkpoint(root).to_json()
    assert report["model_card"]["base_model"] == ["org/base"]
    assert report["model_card"]["license"] is None
    assert any(p["code"] == "card.field" for p in report["problems"])


def test_the_problem_codes_docs_list_are_the_codes_the_inspection_writes() -> None:
    package = Path(__file__).resolve().parents[2] / "planner" / "inspectjob"
    pattern = r'"((?:config|index|safetensors|weights|precision|card|license)\.(?!json")[a-z_]+)"'
    written = {code for path in package.glob("*.py") for code in re.findall(pattern, path.read_text())}
    docs = (Path(__file__).resolve().parents[2] / "docs" / "inspection.md").read_text()
    listed = set(re.findall(r"`([a-z]+\.[a-z_]+)`", docs.split("Problem codes:", 1)[1].split("\n\n", 1)[0]))
    assert written == listed
