from tests.gate.conftest import Gate, artifacts, catalog, flow, gate  # noqa: F401
