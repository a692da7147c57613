"""A manifest from a requester (a location's `manifest`) or a node (an inspection, a quantize result)
is hostile text. The OpenSSF digest counts the files' hashes in path order; a check that goes by path
must read the same lines the digest did, or one directory passes for another's digest."""

from __future__ import annotations

from pathlib import Path

import pytest

from planner.evaljob.manifest import ArtifactMismatch, verify_artifact
from planner.inspectjob.checkpoint import inspect_checkpoint
from planner.manifest import digest_matches, digest_of_manifest, file_sha256, manifest_entries, weights_digest


def _approved(tmp_path: Path) -> tuple[Path, str, str, str]:
    """An approved directory of two files (a: the weights evaluated, b: other bytes), its digest and
    the two files' hashes."""
    root = tmp_path / "approved"
    root.mkdir()
    (root / "a").write_bytes(b"evaluated weights")
    (root / "b").write_bytes(b"never served weights")
    return root, weights_digest(root), file_sha256(root / "a"), file_sha256(root / "b")


def _served(tmp_path: Path, content: bytes) -> Path:
    root = tmp_path / "served"
    root.mkdir()
    (root / "a").write_bytes(content)
    return root


def test_a_path_listed_twice_does_not_let_other_bytes_pass_for_the_digest(tmp_path: Path) -> None:
    _root, digest, sha_a, sha_b = _approved(tmp_path)
    forged = f"{sha_a} 17 a\n{sha_b} 20 a\n"  # both hashes counted by the digest, the last kept by name
    served = _served(tmp_path, b"never served weights")
    assert not digest_matches(forged, digest)
    with pytest.raises(ArtifactMismatch):
        verify_artifact(served, digest, forged, "candidate")


def test_a_carriage_return_is_not_a_second_spelling_of_a_path(tmp_path: Path) -> None:
    _root, digest, sha_a, sha_b = _approved(tmp_path)
    # the digest's parser read "a" and "a\r" (two paths), the node's check "a" twice
    forged = f"{sha_a} 17 a\n{sha_b} 20 a\r\n"
    served = _served(tmp_path, b"never served weights")
    assert not digest_matches(forged, digest)
    with pytest.raises(ArtifactMismatch):
        verify_artifact(served, digest, forged, "candidate")


@pytest.mark.parametrize(
    "line",
    [
        "{sha} 1 ../outside",
        "{sha} 1 /etc/passwd",
        "{sha} 1 a//b",
        "{sha} 1 ./a",
        "{sha} 1 ",
        "{sha} 1 a\x00b",
        "{sha} 1 a\x0cb",
        "{sha} 1 a\u2028b",
        "{upper} 1 a",
        "{sha} \u00b2 a",  # a Unicode digit: str.isdigit says yes, int() says no
        "\t\t{short} 1 a",  # bytes.fromhex skips whitespace
        "{sha} 1",
        "not a manifest line at all",
    ],
)
def test_a_hostile_manifest_line_is_a_value_error(line: str) -> None:
    sha = "ab" * 32
    text = line.format(sha=sha, upper=sha.upper(), short="ab" * 31) + "\n"
    with pytest.raises(ValueError):
        manifest_entries([text])
    assert not digest_matches(text, "sha256:" + "0" * 64)


def test_a_path_with_spaces_is_a_path() -> None:
    sha = "cd" * 32
    assert manifest_entries([f"{sha} 5 weights dir/model one.safetensors\n"]) == [
        (sha, 5, "weights dir/model one.safetensors")
    ]
    assert digest_of_manifest(f"{sha} 5 weights dir/model one.safetensors") == digest_of_manifest(
        f"{sha} 5 weights dir/model one.safetensors\n"
    )


def test_the_inspection_hashes_what_the_digest_hashes_in_a_git_checkout(tmp_path: Path) -> None:
    """A Hugging Face checkout has .gitattributes (and may have .git): the registered digest and
    model-signing leave git's files out; the inspection must too, or it refuses every such checkout
    as not the registered files."""
    root = tmp_path / "checkout"
    (root / ".git" / "objects").mkdir(parents=True)
    (root / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (root / ".gitattributes").write_text("*.safetensors filter=lfs diff=lfs merge=lfs -text\n")
    (root / "config.json").write_text('{"model_type": "llama"}')
    (root / "LICENSE").write_text("Apache License 2.0")
    report = inspect_checkpoint(root)
    assert report.weights_digest == weights_digest(root)
    assert report.manifest is not None
    assert ".gitattributes" not in report.manifest
