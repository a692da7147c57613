from __future__ import annotations

from pathlib import Path

import pytest

from tests.deployments.conftest import Flow, artifacts, catalog, flow  # noqa: F401  (shared fixtures)


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The checkpoint bootstrap writes for the `local` cluster (random weights, no download)."""
    from planner.evaljob.tiny import save_tiny_checkpoint

    return save_tiny_checkpoint(tmp_path_factory.mktemp("models") / "tiny-qwen3-moe")
