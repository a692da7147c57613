"""UI tests reuse the deployments tests' catalog, artifacts and API-driven flow; compiled catalogs
(.mo) are built once per session, as `make` does, so the Chinese pages can be checked."""

from __future__ import annotations

from pathlib import Path

from tests.approvals.conftest import sign_flow  # noqa: F401  (fixture)
from tests.deployments.conftest import artifacts, catalog, flow  # noqa: F401  (fixtures)

ROOT = Path(__file__).resolve().parents[2]
