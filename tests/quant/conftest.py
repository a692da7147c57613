from pathlib import Path

import pytest

from tests.evaluations.conftest import _fresh_connections, testcluster  # noqa: F401  (shared fixtures)


@pytest.fixture(scope="session")
def tiny_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny random-weight checkpoint (with its chat template), written once per session."""
    from planner.evaljob.tiny import save_tiny_checkpoint

    return save_tiny_checkpoint(tmp_path_factory.mktemp("models") / "tiny-qwen3-moe")
