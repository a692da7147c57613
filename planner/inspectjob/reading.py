"""Bounded reads of a checkpoint's small files: the walk that refuses links and special files, JSON
with a size and depth bound, text with a size bound. Every refusal names the file, relative to the root."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from planner.cluster.base import unstorable_in_json
from planner.inspectjob.report import InspectionRefused, InspectionTimeout, InspectLimits
from planner.manifest import GIT_PATHS, path_problem


@contextmanager
def reading(relative: str) -> Iterator[None]:
    """Name the file when reading it runs out of memory or time, or the OS refuses it."""
    try:
        yield
    except MemoryError:
        raise InspectionRefused(
            relative, "reading it needs more memory than the job's limit", reason="memory_limit"
        ) from None
    except InspectionTimeout:
        raise InspectionRefused(
            relative, "the inspection ran out of time while reading it", reason="time_limit"
        ) from None
    except OSError as exc:
        raise InspectionRefused(relative, f"cannot be read: {exc.strerror or exc}") from None


def walk(root: Path, limits: InspectLimits) -> list[tuple[str, int]]:
    """Every regular file under root as (relative POSIX path, size), sorted; refuses a symbolic link, a
    FIFO, socket or device (opening a FIFO would block), a name with a line break or control character
    (it would forge a manifest line) and one that is not UTF-8 (the manifest and result.json are). Directories are not followed through links: each entry is lstat-ed."""
    if root.is_symlink():
        raise InspectionRefused(".", f"the checkpoint root {root} is a symbolic link; give the resolved path")
    if not root.is_dir():
        raise InspectionRefused(".", f"{root} is not a directory")
    found: list[tuple[str, int]] = []
    pending = [root]
    while pending:
        directory = pending.pop()
        with reading(directory.relative_to(root).as_posix()), os.scandir(directory) as entries:
            for entry in entries:
                if directory == root and entry.name in GIT_PATHS:
                    continue  # git's own files are in no manifest (planner.manifest): not hashed, not walked
                path = Path(entry.path)
                relative = path.relative_to(root).as_posix()
                if problem := path_problem(relative):  # a line break would forge a manifest line
                    raise InspectionRefused(repr(relative), problem)
                try:
                    relative.encode("utf-8")  # os.scandir keeps undecodable bytes as lone surrogates
                except UnicodeEncodeError:
                    raise InspectionRefused(repr(relative), "a file name that is not UTF-8") from None
                info = entry.stat(follow_symlinks=False)
                if stat.S_ISLNK(info.st_mode):
                    raise InspectionRefused(relative, f"a symbolic link (to {os.readlink(path)!r}); copy the file in")
                if stat.S_ISDIR(info.st_mode):
                    pending.append(path)
                elif stat.S_ISREG(info.st_mode):
                    found.append((relative, info.st_size))
                    if len(found) > limits.max_files:
                        raise InspectionRefused(relative, f"more than {limits.max_files:,} files in the checkpoint")
                else:
                    raise InspectionRefused(relative, "not a regular file (a FIFO, socket or device)")
    return sorted(found)


def read_bounded(root: Path, relative: str, max_bytes: int, what: str) -> bytes:
    """The whole file, refused when stat says it is larger than max_bytes (checked before reading)."""
    path = root / relative
    with reading(relative):
        size = path.stat().st_size
        if size > max_bytes:
            raise InspectionRefused(relative, f"{size:,} bytes; a {what} is at most {max_bytes:,} bytes")
        with path.open("rb") as handle:
            data = handle.read(size + 1)  # not max_bytes + 1: read(n) allocates n bytes before reading
    if len(data) > size:
        raise InspectionRefused(relative, "grew while it was being read")
    return data


def read_prefix(root: Path, relative: str, max_bytes: int) -> bytes:
    with reading(relative), (root / relative).open("rb") as handle:
        return handle.read(min(max_bytes, os.fstat(handle.fileno()).st_size))


def depth(value: Any) -> int:
    """Nesting depth of parsed JSON, without recursion."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict | list):
            deepest = max(deepest, level)
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, level + 1) for child in children if isinstance(child, dict | list))
    return deepest


def parse_json(data: bytes, relative: str, limits: InspectLimits, *, check_depth: bool = True) -> Any:
    """Strict UTF-8 JSON, nested at most limits.max_json_depth deep. Deeper input than the interpreter's
    recursion limit makes the C decoder raise RecursionError (caught); shallower but too deep is measured
    on the parsed value (check_depth=False: the caller checks the structure itself, as the safetensors
    header reader does, since measuring a 300,000-tensor header would double its parse time)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InspectionRefused(relative, f"not UTF-8 (byte {exc.start})") from None
    with reading(relative):
        try:
            value = json.loads(text)
        except RecursionError:
            raise InspectionRefused(relative, f"JSON nested deeper than {limits.max_json_depth} levels") from None
        except ValueError as exc:
            raise InspectionRefused(relative, f"not valid JSON ({exc})") from None
    if check_depth and depth(value) > limits.max_json_depth:
        raise InspectionRefused(relative, f"JSON nested deeper than {limits.max_json_depth} levels")
    found = unstorable_in_json(text, value)  # result.json and the service's database could not carry it
    if found:
        raise InspectionRefused(relative, f"a JSON string holds {found}, which the report cannot carry")
    return value


def load_json(root: Path, relative: str, max_bytes: int, limits: InspectLimits, what: str) -> Any:
    return parse_json(read_bounded(root, relative, max_bytes, what), relative, limits)
