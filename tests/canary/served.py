"""Real serving engines for the canary tests: `transformers serve` on a committed tiny checkpoint,
started the way the served eval job starts it (planner.evaljob.served.Engine: its own session,
tethered to this process, stopped with its process group) from the same launch (transformers_launch)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from planner.evaljob.engines import transformers_launch
from planner.evaljob.served import Engine, free_port, substitute

HEALTH_TIMEOUT_S = 300  # a loaded 2-core CI machine: the tiny model loads in seconds, the imports take longer


@contextmanager
def transformers_serve(model: Path, log: Path) -> Iterator[str]:
    """`transformers serve <model>` on a free loopback port; yields its base URL once healthy."""
    launch = transformers_launch().as_spec(health_timeout_s=HEALTH_TIMEOUT_S)
    port = str(free_port())
    values = {"{python}": sys.executable, "{host}": "127.0.0.1", "{port}": port, "{model}": str(model)}
    log.parent.mkdir(parents=True, exist_ok=True)
    engine = Engine(substitute(launch["argv"], values), log)
    try:
        engine.wait_healthy(f"http://127.0.0.1:{port}{launch['health_path']}", HEALTH_TIMEOUT_S)
        yield f"http://127.0.0.1:{port}"
    finally:
        engine.stop()
