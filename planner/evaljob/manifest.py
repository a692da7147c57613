"""Verify a checkpoint directory on the cluster against its registered manifest before it is served.

The manifest format and the file hashing are planner.manifest's, the one implementation the
service registers digests with (one line per regular file, sorted by path: `<sha256 hex> <size>
<relative path>`; the weights digest is `sha256:` + SHA-256 of the manifest). With the registered
manifest the job names the file that differs; without it, only that the files do not match. A
message never gives what the files on the node hash to: the directory may hold another team's
weights, and their digest would tell which.
"""

from __future__ import annotations

from pathlib import Path

from planner.manifest import GIT_PATHS, digest_matches, file_sha256, manifest_text_lines
from planner.manifest import manifest_entries as parse_manifest


class ArtifactMismatch(ValueError):
    """The files on the cluster are not the registered weights: nothing is served."""


def manifest_entries(text: str) -> dict[str, tuple[str, int]]:
    """{path: (sha256, size)}, read by planner.manifest's one parser: the digest was computed over the
    same lines this check goes by (a path listed twice, or a line split where the digest's parser does
    not split, would let files the digest never counted pass)."""
    try:
        return {relative: (sha, size) for sha, size, relative in parse_manifest(manifest_text_lines(text))}
    except ValueError as exc:
        raise ArtifactMismatch(f"registered {exc}") from None


def _files(root: Path) -> list[str]:
    names = []
    for path in root.rglob("*"):
        if path.relative_to(root).parts[0] in GIT_PATHS:  # not part of any manifest (planner.manifest)
            continue
        if path.is_symlink():
            raise ArtifactMismatch(f"{path.relative_to(root)}: a symbolic link (not part of any registered manifest)")
        if path.is_file():
            names.append(path.relative_to(root).as_posix())
    return sorted(names)


def verify_artifact(root: Path, digest: str, manifest: str | None, role: str = "artifact") -> None:
    """Raise ArtifactMismatch naming the first file that is not as registered."""
    if not root.is_dir():
        raise ArtifactMismatch(f"{role} {digest}: {root} is not a directory on this node")
    if manifest is not None:
        if not digest_matches(manifest, digest):
            raise ArtifactMismatch(f"{role}: the registered manifest does not hash to {digest}")
        expected = manifest_entries(manifest)
        present = _files(root)
        for name in present:
            if name not in expected:
                raise ArtifactMismatch(f"{role} {digest}: {name} is not in the registered manifest")
        for name, (sha, size) in sorted(expected.items()):
            path = root / name
            if name not in present:
                raise ArtifactMismatch(f"{role} {digest}: {name} is missing")
            if path.stat().st_size != size or file_sha256(path) != sha:
                raise ArtifactMismatch(f"{role} {digest}: {name} differs from the registered manifest")
        return
    lines = []
    for name in _files(root):
        path = root / name
        lines.append(f"{file_sha256(path)} {path.stat().st_size} {name}\n")
    if not digest_matches("".join(lines), digest):
        raise ArtifactMismatch(f"{role}: the files at {root} do not match the registered {digest}")


def manifest_difference(registered: str, actual: str) -> tuple[str, str] | None:
    """The first file where two manifests differ and how, in verify_artifact's order and words: a file
    not in the registered manifest, then a registered file that is missing, then one that differs.
    None when they list the same files with the same hashes and sizes."""
    expected, present = manifest_entries(registered), manifest_entries(actual)
    for name in sorted(present):
        if name not in expected:
            return name, "is not in the registered manifest"
    for name, entry in sorted(expected.items()):
        if name not in present:
            return name, "is missing"
        if present[name] != entry:
            return name, "differs from the registered manifest"
    return None
