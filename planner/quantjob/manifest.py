"""The weights digest of a checkpoint directory: SHA-256 over a manifest of its files' hashes.

The one implementation: the quantize job computes a derivative's digest with it on the node, and the
service (governance.artifacts.manifest re-exports it) computes an artifact's digest with it on
registration, so the two cannot drift apart. It lives in the planner because the node's payload runs
without Django and the planner may not import the service; the service may import the planner.

Files are read in 1 MiB chunks, so a multi-TB checkpoint is hashed without loading it. The manifest
is one line per regular file, sorted by relative path: `<sha256 hex> <size in bytes> <relative
path>\\n`; the digest is `sha256:` + SHA-256(manifest). Symbolic links are refused rather than
followed: a link's target can change after registration without any registered file changing.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator, Sequence
from pathlib import Path

CHUNK = 1 << 20


def resolve_inside_roots(path: str, roots: Sequence[str], field: str) -> Path:
    """`path` with every symbolic link resolved, provided it leads inside one of `roots` (each resolved
    too: a root may itself be a link). Links inside a checkpoint are refused by `iter_files`; this
    covers the directory itself (`<root>/link` -> anywhere) and any link on the way to it. The caller
    reads the returned path, not `path`, so the link cannot be moved between the check and the read.
    The message never says where a link leads."""
    if not isinstance(path, str) or not path.startswith("/") or "\0" in path:
        raise ValueError(f"{field}: an absolute path")
    resolved_roots = [os.path.realpath(root) for root in roots or () if isinstance(root, str) and root.startswith("/")]
    if not resolved_roots:
        raise ValueError(f"{field}: no model roots to check {path} against")
    resolved = os.path.realpath(path)
    for root in resolved_roots:
        if resolved == root or resolved.startswith(root.rstrip("/") + "/"):
            return Path(resolved)
    raise ValueError(f"{field}: {path} leads outside the model roots (through a symbolic link)")


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


def manifest_line(root: Path, path: Path) -> str:
    """One file's manifest line (the node's inspection hashes file by file, naming the one it is on)."""
    relative = path.relative_to(root).as_posix()
    if "\n" in relative:  # a newline in a name would forge a second manifest line
        raise ValueError(f"{relative!r}: file names with newlines are not allowed")
    try:
        relative.encode("utf-8")  # the manifest is UTF-8 text; pathlib keeps undecodable bytes as surrogates
    except UnicodeEncodeError:
        raise ValueError(f"{relative!r}: a file name that is not UTF-8") from None
    return f"{file_sha256(path)} {path.stat().st_size} {relative}\n"


def manifest_lines(root: Path) -> Iterator[str]:
    for path in iter_files(root):
        yield manifest_line(root, path)


def manifest(root: Path) -> list[str]:
    """The manifest's lines (the service stores them, so the node can name the file that differs)."""
    if not root.is_dir():
        raise ValueError(f"{root}: not a directory")
    lines = list(manifest_lines(root))
    if not lines:
        raise ValueError(f"{root}: no files to hash")
    return lines


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


# The quantize job's name for the same digest (its result.json field is `manifest_digest`).
manifest_digest = weights_digest
