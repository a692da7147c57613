"""The sign-off fixtures (a request ready for sign-off, the organisation's PKI) for the readiness tests."""

from tests.approvals.conftest import sign_flow
from tests.deployments.conftest import artifacts, catalog

__all__ = ["artifacts", "catalog", "sign_flow"]
