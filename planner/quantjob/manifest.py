"""The manifest digest of a checkpoint directory, computed on the node. The same format as the
service's artifact digest (governance.artifacts.manifest; a test holds the two equal): one line per
regular file sorted by relative path, `<sha256 hex> <size> <relative path>\\n`, digest = sha256:
of the manifest. The planner may not import Django apps, hence this copy."""

from __future__ import annotations

import hashlib
from pathlib import Path

CHUNK = 1 << 20


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def manifest(root: Path) -> list[str]:
    if not root.is_dir():
        raise ValueError(f"{root}: not a directory")
    lines = []
    for path in sorted(root.rglob("*"), key=lambda p: p.relative_to(root).as_posix()):
        relative = path.relative_to(root).as_posix()
        if path.is_symlink():
            raise ValueError(f"{relative}: symbolic links are not hashed")
        if path.is_file():
            if "\n" in relative:
                raise ValueError(f"{relative!r}: file names with newlines are not allowed")
            lines.append(f"{file_sha256(path)} {path.stat().st_size} {relative}\n")
    if not lines:
        raise ValueError(f"{root}: no files to hash")
    return lines


def manifest_digest(root: Path) -> str:
    return "sha256:" + hashlib.sha256("".join(manifest(root)).encode()).hexdigest()
