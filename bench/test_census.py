"""Which tests build the approvals PKI, and which of those also drive a request to a signed approval.

    DJANGO_SETTINGS_MODULE=governance.settings_tests .venv/bin/python bench/test_census.py [--list]

Collects the suite (nothing runs, no database) and reads each test's fixture closure as pytest
resolves it: a test builds the PKI when the closure holds `org_pki`, or when it holds `flow` and
signs or calls `flow.ensure_pki()` (`flow` builds the PKI lazily, on the first signature). It
signs when the source of the test, of a
fixture in its closure, or of a helper either calls by name (one level, in tests/) signs: a call
of `.approve(`, `.approve_signed(`, `.sign(`, `approved_request(`, `sign_off(` or a POST to
`/signoffs`. Counts test functions (a parametrized test once) and collected items.
"""

from __future__ import annotations

import ast
import inspect
import re
import sys
import textwrap
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
SIGNS = re.compile(r"\.approve(?:_signed)?\(|\.sign\(|\bapproved_request\(|\bsign_off\(|/signoffs")
# What makes `flow` build the PKI on demand besides a signature: tests.deployments.conftest.Flow.ensure_pki
# (`approve` calls it; a test that posts a review to be recorded calls it first).
REVIEWS = re.compile(r"\.ensure_pki\(")


def _source(function: Callable[..., Any]) -> str:
    try:
        return textwrap.dedent(inspect.getsource(function))
    except (OSError, TypeError):
        return ""


def _called_helpers(source: str, namespace: dict[str, Any]) -> list[Callable[..., Any]]:
    """The functions of tests/ a source calls by a bare name (one level deep)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    helpers: list[Callable[..., Any]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            target = namespace.get(node.func.id)
            if inspect.isfunction(target) and target.__module__.startswith("tests."):
                helpers.append(target)
    return helpers


def _matches(pattern: re.Pattern[str], function: Callable[..., Any]) -> bool:
    source = _source(function)
    if pattern.search(source):
        return True
    return any(pattern.search(_source(helper)) for helper in _called_helpers(source, function.__globals__))


def _signs(function: Callable[..., Any]) -> bool:
    return _matches(SIGNS, function)


class Census:
    def __init__(self) -> None:
        self.items: list[tuple[str, bool, bool]] = []  # (test function, builds the PKI, signs)
        self.through_flow: set[str] = set()  # test functions that get the PKI only as `flow` takes it

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        for item in items:
            if not isinstance(item, pytest.Function):
                continue
            closure = set(item.fixturenames)
            fixtures = [
                definition.func
                for definitions in item._fixtureinfo.name2fixturedefs.values()
                for definition in definitions
                if definition.func.__module__.startswith("tests.")
            ]
            signs = _signs(item.function) or any(_signs(fixture) for fixture in fixtures)
            reviews = _matches(REVIEWS, item.function) or any(_matches(REVIEWS, fixture) for fixture in fixtures)
            pki = "org_pki" in closure or ("flow" in closure and (signs or reviews))
            name = f"{item.path.relative_to(ROOT)}::{item.originalname}"
            self.items.append((name, pki, pki and signs))
            if "flow" in closure and "org_pki" not in item.function.__code__.co_varnames:
                self.through_flow.add(name)


def main(argv: list[str]) -> int:
    census = Census()
    code = pytest.main(["--collect-only", "-qq", "-p", "no:cacheprovider", "-p", "no:xdist", "tests"], plugins=[census])
    if code not in (0, 5):
        return int(code)
    functions: dict[str, tuple[bool, bool]] = {}
    for name, pki, signed in census.items:
        before = functions.get(name, (False, False))
        functions[name] = (before[0] or pki, before[1] or signed)
    items, total = Counter((pki, signed) for _, pki, signed in census.items), len(census.items)
    pki_f = sum(1 for pki, _ in functions.values() if pki)
    signed_f = sum(1 for _, signed in functions.values() if signed)
    print(f"test functions: {len(functions)}; collected items: {total}")
    print(
        f"build the PKI: {pki_f} functions ({pki_f / len(functions):.1%}), {sum(n for (p, _), n in items.items() if p)} items"
    )
    print(
        f"build the PKI and a signed approval: {signed_f} functions ({signed_f / len(functions):.1%}), "
        f"{sum(n for (_, s), n in items.items() if s)} items"
    )
    unsigned_flow = sum(
        1 for name, (pki, signed) in functions.items() if pki and not signed and name in census.through_flow
    )
    print(f"build the PKI without signing anything, through `flow.ensure_pki()`: {unsigned_flow} functions")
    if "--list" in argv:
        by_file = Counter(name.split("::")[0] for name, (_, signed) in functions.items() if signed)
        for path, count in by_file.most_common():
            print(f"{count:4d}  {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
