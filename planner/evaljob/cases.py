"""The eval set: the default JSONL shipped with the payload, or the user's own; versioned by SHA-256.
Standard library only: the served eval job (a small client process) imports it without torch."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

DEFAULT_SET = Path(__file__).resolve().parent / "data" / "default-v1.jsonl"


def load_cases(path: str | None, limit: int | None) -> tuple[list[dict[str, Any]], str]:
    raw = Path(path or DEFAULT_SET).read_bytes()
    cases = [json.loads(line) for line in raw.decode("utf-8").splitlines() if line.strip()]
    for index, case in enumerate(cases):
        for key in ("id", "category", "turns", "key_items"):
            if key not in case:
                raise ValueError(f"eval set line {index + 1}: missing {key}")
    if limit:
        per_category: dict[str, int] = {}
        kept = []
        for case in cases:
            if per_category.get(case["category"], 0) < limit:
                per_category[case["category"]] = per_category.get(case["category"], 0) + 1
                kept.append(case)
        cases = kept
    return cases, hashlib.sha256(raw).hexdigest()


def prompt_text(case: dict[str, Any]) -> str:
    return "\n".join(f"User: {turn}" for turn in case["turns"]) + "\nAssistant:"
