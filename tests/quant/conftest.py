from tests.evaluations.conftest import _fresh_connections, testcluster  # noqa: F401  (shared fixtures)
