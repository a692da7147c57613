"""The sign-off and deployment fixtures (a request ready for sign-off, the organisation's PKI, the
license catalog, artifacts, the API flow) for the readiness tests."""

from tests.approvals.conftest import sign_flow
from tests.deployments.conftest import artifacts, catalog, flow

__all__ = ["artifacts", "catalog", "flow", "sign_flow"]
