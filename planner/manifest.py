"""The weights digest of a checkpoint directory, in the OpenSSF model-signing format.

The one implementation, shared by every cluster payload (eval, quantize, inspection) and the service
(governance.artifacts.manifest re-exports it), so the digest the service registers and the one a node
reports cannot drift apart. It lives in the planner because the node's payloads run without Django
(nor the model-signing library) and the planner may not import the service.

The digest is the one `model-signing` (OpenSSF, sigstore/model-transparency) puts in the subject of
its in-toto statement for the "files" serialization with SHA-256: SHA-256 over the files' own SHA-256
digests (raw bytes), in path order, path components compared one by one (the library sorts
`PurePosixPath` keys), git's own files at the top level (`.git`, `.gitattributes`, `.github`,
`.gitignore`) left out as the library leaves them out by default. So `model_signing verify` on a
serving node recomputes what the service approved (tests/artifacts/test_model_signing.py checks the
two against the library itself). Computed here without the library: the node may not have it, and
the formula is four lines.

The manifest the service stores (and names a differing file from) is one line per regular file,
sorted by relative path: `<sha256 hex> <size in bytes> <relative path>\\n`; the statement's resources
are the same pairs (`in_toto_statement`). Files are read in 1 MiB chunks, so a multi-TB checkpoint is
hashed without loading it. Symbolic links are refused rather than followed: a link's target can
change after registration without any registered file changing.

Artifacts registered before this format carry `sha256:` + SHA-256(manifest text); `digest_matches`
still accepts that form for them (both commit to the same per-file hashes), and nothing registers it
any more.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

CHUNK = 1 << 20
# model-signing's default ignore list (hashing.Config: ignore_git_paths), top level only.
GIT_PATHS = frozenset({".git", ".gitattributes", ".github", ".gitignore"})
STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
PREDICATE_TYPE = "https://model_signing/signature/v1.0"
# A manifest line's fields, spelled one way only: a second spelling of the same bytes (upper-case hex,
# a Unicode digit) would be a second manifest of the same digest that a string comparison rejects.
_SHA256 = re.compile(r"[0-9a-f]{64}")
_SIZE = re.compile(r"[0-9]{1,20}")
# What a file name in a manifest may not hold: every line break str.splitlines knows (\r, \v, \f,
# \x1c-\x1e, \x85, \u2028, \u2029: a parser splitting there would read one line as two, with a file
# the node never hashed) and the other control characters.
_CONTROL = re.compile(r"[\x00-\x1f\x7f\x85\u2028\u2029]")


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
        if path.relative_to(root).parts[0] in GIT_PATHS:
            continue
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


def path_problem(relative: str) -> str | None:
    """Why `relative` cannot be a manifest path, or None. A path is what the node found under the
    checkpoint root: relative, no empty, '.' or '..' component, no line break or control character."""
    if _CONTROL.search(relative):  # a line break in a name would forge a second manifest line
        return "file names with line breaks or control characters are not allowed"
    if relative.startswith("/") or any(part in ("", ".", "..") for part in relative.split("/")):
        return "not a path relative to the checkpoint directory"
    return None


def manifest_line(root: Path, path: Path) -> str:
    """One file's manifest line (the node's inspection hashes file by file, naming the one it is on)."""
    relative = path.relative_to(root).as_posix()
    if problem := path_problem(relative):
        raise ValueError(f"{relative!r}: {problem}")
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


def manifest_text_lines(text: str) -> list[str]:
    """A manifest text's lines, split at newlines only, as manifest_line writes them (str.splitlines
    also splits at CR, NEL, U+2028 ...: two parsers splitting differently would read two manifests)."""
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return [line + "\n" for line in lines]


def manifest_entries(lines: Iterable[str]) -> list[tuple[str, int, str]]:
    """(sha256 hex, size, relative path) of each manifest line; ValueError on a malformed one. The one
    parser of a manifest (the service, the signing, every node's check): a manifest from a node or a
    requester is read the same way everywhere. A path listed twice is refused: the digest would count
    both files, a check by name only one, so one directory would match the digest of another."""
    entries = []
    seen: set[str] = set()
    for number, line in enumerate(lines, start=1):
        text = line.removesuffix("\n")
        parts = text.split(" ", 2)
        if "\n" in text or len(parts) != 3 or not _SHA256.fullmatch(parts[0]) or not _SIZE.fullmatch(parts[1]):
            raise ValueError(f"manifest line {number}: not '<sha256 hex> <size> <relative path>'")
        sha, size, relative = parts
        if problem := path_problem(relative):
            raise ValueError(f"manifest line {number}: {relative[:200]!r}: {problem}")
        if relative in seen:
            raise ValueError(f"manifest line {number}: {relative[:200]!r} is listed twice")
        seen.add(relative)
        entries.append((sha, int(size), relative))
    return entries


def same_files(manifest_text: str, other: str) -> bool:
    """Whether two manifests list the same files: each path with the same hash and size. The digest
    alone does not say so (it counts the hashes in path order, not the names)."""
    try:
        return sorted(manifest_entries(manifest_text_lines(manifest_text))) == sorted(
            manifest_entries(manifest_text_lines(other))
        )
    except ValueError:
        return False


def _path_order(entry: tuple[str, int, str]) -> list[str]:
    return entry[2].split("/")


def digest_of_manifest(lines: str | Iterable[str]) -> str:
    """The OpenSSF model-signing root digest of the files a manifest lists."""
    if isinstance(lines, str):
        lines = manifest_text_lines(lines)
    digest = hashlib.sha256()
    for sha, _size, _relative in sorted(manifest_entries(lines), key=_path_order):
        digest.update(bytes.fromhex(sha))
    return "sha256:" + digest.hexdigest()


def legacy_digest(manifest_text: str) -> str:
    """The digest artifacts registered before the OpenSSF format carry: SHA-256 of the manifest text."""
    return "sha256:" + hashlib.sha256(manifest_text.encode("utf-8", "surrogatepass")).hexdigest()


def digest_matches(manifest_text: str, digest: str) -> bool:
    """Whether a manifest is the one `digest` names (in the OpenSSF format, or the legacy one)."""
    try:
        return digest in (digest_of_manifest(manifest_text), legacy_digest(manifest_text))
    except ValueError:
        return False


def in_toto_statement(lines: str | Iterable[str], model_name: str) -> dict[str, object]:
    """The in-toto statement model-signing signs for these files (the "files" serialization, SHA-256,
    no links, git files ignored): the subject is the root digest, the resources each file's."""
    if isinstance(lines, str):
        lines = manifest_text_lines(lines)
    entries = sorted(manifest_entries(lines), key=_path_order)
    root = digest_of_manifest([f"{sha} {size} {relative}\n" for sha, size, relative in entries])
    return {
        "_type": STATEMENT_TYPE,
        "subject": [{"name": model_name, "digest": {"sha256": root.removeprefix("sha256:")}}],
        "predicateType": PREDICATE_TYPE,
        "predicate": {
            "serialization": {
                "method": "files",
                "hash_type": "sha256",
                "allow_symlinks": False,
                "ignore_paths": sorted(GIT_PATHS),
            },
            "resources": [{"name": relative, "algorithm": "sha256", "digest": sha} for sha, _size, relative in entries],
        },
    }


def weights_digest(root: Path) -> str:
    if not root.is_dir():
        raise ValueError(f"{root}: not a directory")
    lines = list(manifest_lines(root))
    if not lines:
        raise ValueError(f"{root}: no files to hash")
    return digest_of_manifest(lines)


# The quantize job's name for the same digest (its result.json field is `manifest_digest`).
manifest_digest = weights_digest
