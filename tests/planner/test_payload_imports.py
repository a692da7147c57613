"""The cluster payloads import each other one way: tinylm (the test model and its derivatives) may use
the quantize job and the eval jobs, the quantize job the eval jobs, and the eval jobs neither. The
shared pieces (the eval set's loading, the one prompt layout, the eval families' texts) live in
planner/evaljob (cases.py, families.py), the bottom of that order."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PLANNER = Path(__file__).resolve().parents[2] / "planner"
# Each payload, and the payloads it must never import (directly or inside a function).
NEVER = {"evaljob": ("planner.quantjob", "planner.tinylm"), "quantjob": ("planner.tinylm",)}


def imported_modules(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return names


@pytest.mark.parametrize("payload", sorted(NEVER))
def test_a_payload_never_imports_one_above_it(payload: str) -> None:
    wrong = sorted(
        f"{path.relative_to(PLANNER.parent)} imports {name}"
        for path in (PLANNER / payload).rglob("*.py")
        for name in imported_modules(path)
        if name.startswith(NEVER[payload])
    )
    assert wrong == []


def test_the_prompt_layout_has_one_definition() -> None:
    defining = sorted(
        str(path.relative_to(PLANNER.parent))
        for path in PLANNER.rglob("*.py")
        if any(
            isinstance(node, ast.FunctionDef) and node.name == "prompt_text"
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        )
    )
    assert defining == ["planner/evaljob/cases.py"]
