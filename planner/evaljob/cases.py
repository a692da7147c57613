"""The eval set: the default JSONL shipped with the payload, or the user's own; versioned by SHA-256.
Standard library only: the served eval job (a small client process) imports it without torch."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

DEFAULT_SET = Path(__file__).resolve().parent / "data" / "default-v1.jsonl"

# A case id is a name, never a path: letters, digits and `_ . : -`, starting with a letter or digit
# (no `/`, `\\`, `..` prefix or hidden name), or a non-negative integer. The service checks it on
# submission (governance.evaluations.evals) and the node again when it loads the set.
CASE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}")
CASE_ID_MAX_INT = 2**63 - 1


def case_id_problem(value: Any) -> str | None:
    """What is wrong with a case id, or None."""
    if isinstance(value, bool) or not isinstance(value, str | int):
        return "id must be a string or an integer"
    if isinstance(value, int):
        return None if 0 <= value <= CASE_ID_MAX_INT else "id: an integer id must be between 0 and 2^63-1"
    if not CASE_ID.fullmatch(value):
        return "id must be 1-128 letters, digits, '_', '.', ':' or '-', starting with a letter or digit"
    return None


def case_file_name(case_id: str | int) -> str:
    """The cache file of a case: a hash of its id (JSON-encoded, so 1 and "1" differ), never the id
    itself, so no id can name a file outside its cache directory."""
    return hashlib.sha256(json.dumps(case_id).encode()).hexdigest() + ".json"


def load_cases(path: str | None, limit: int | None) -> tuple[list[dict[str, Any]], str]:
    raw = Path(path or DEFAULT_SET).read_bytes()
    cases = []
    seen: set[tuple[type, str | int]] = set()
    for number, line in enumerate(raw.decode("utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        case = json.loads(line)
        if not isinstance(case, dict):
            raise ValueError(f"eval set line {number}: not a JSON object")
        for key in ("id", "category", "turns", "key_items"):
            if key not in case:
                raise ValueError(f"eval set line {number}: missing {key}")
        problem = case_id_problem(case["id"])
        if problem:
            raise ValueError(f"eval set line {number}: {problem}")
        if (type(case["id"]), case["id"]) in seen:
            raise ValueError(f"eval set line {number}: id {case['id']!r} appears twice")
        seen.add((type(case["id"]), case["id"]))
        cases.append(case)
    if limit:
        per_category: dict[str, int] = {}
        kept = []
        for case in cases:
            if per_category.get(case["category"], 0) < limit:
                per_category[case["category"]] = per_category.get(case["category"], 0) + 1
                kept.append(case)
        cases = kept
    return cases, hashlib.sha256(raw).hexdigest()


def prompt_text(turns: Sequence[str]) -> str:
    """A case's turns as the prompt every payload writes (the eval jobs, the tiny model's training
    and the calibration set): the one home of the "User: …\nAssistant:" layout."""
    return "\n".join(f"User: {turn}" for turn in turns) + "\nAssistant:"
