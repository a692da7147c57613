"""UI tests reuse the deployments tests' catalog, artifacts and API-driven flow; compiled catalogs
(.mo) are built once per session, as `make` does, so the Chinese pages can be checked."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.core.management import call_command

from tests.approvals.conftest import sign_flow  # noqa: F401  (fixture)
from tests.deployments.conftest import artifacts, catalog, flow  # noqa: F401  (fixtures)

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session", autouse=True)
def compiled_messages() -> None:
    call_command("compilemessages", locale=["zh_Hans"], ignore_patterns=[".venv", "var", "node_modules"], verbosity=0)
