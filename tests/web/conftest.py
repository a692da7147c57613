"""UI tests reuse the deployments tests' catalog, artifacts and API-driven flow; compiled catalogs
(.mo) are built once per session, as `make` does, so the Chinese pages can be checked."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.approvals.conftest import sign_flow  # noqa: F401  (fixture)
from tests.conftest import compile_messages
from tests.deployments.conftest import artifacts, catalog, flow  # noqa: F401  (fixtures)

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session", autouse=True)
def compiled_messages() -> None:
    compile_messages()
