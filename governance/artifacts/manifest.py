"""The weights digest of a checkpoint directory: SHA-256 over a manifest of its files' hashes.

Files are read in 1 MiB chunks, so a multi-TB checkpoint is hashed without loading it. The
manifest is one line per regular file, sorted by relative path:
`<sha256 hex> <size in bytes> <relative path>\\n`; the digest is `sha256:` + SHA-256(manifest).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

CHUNK = 1 << 20


def iter_files(root: Path) -> Iterator[Path]:
    for path in sorted(root.rglob("*"), key=lambda p: p.relative_to(root).as_posix()):
        if path.is_symlink():
            raise ValueError(f"{path.relative_to(root)}: symbolic links are not hashed; copy the file in")
        if path.is_file():
            yield path


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def manifest_lines(root: Path) -> Iterator[str]:
    for path in iter_files(root):
        relative = path.relative_to(root).as_posix()
        if "\n" in relative:
            raise ValueError(f"{relative!r}: file names with newlines are not allowed")
        yield f"{file_sha256(path)} {path.stat().st_size} {relative}\n"


def weights_digest(root: Path) -> str:
    if not root.is_dir():
        raise ValueError(f"{root}: not a directory")
    digest = hashlib.sha256()
    count = 0
    for line in manifest_lines(root):
        digest.update(line.encode())
        count += 1
    if count == 0:
        raise ValueError(f"{root}: no files to hash")
    return "sha256:" + digest.hexdigest()
