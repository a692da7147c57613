"""A property-based run of schemathesis over the project's own OpenAPI schema: on every
operation, generated inputs must never produce a 5xx nor a response that violates the schema.
Examples per operation are few (the suite's run time stays bounded); the seed is fixed."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from hypothesis import HealthCheck, given, settings
from schemathesis.specs.openapi.checks import response_schema_conformance

from governance.core.models import Team
from governance.core.roles import Role
from governance.core.tokens import api_token_issue
from governance.wsgi import application
from tests.conftest import make_user


@pytest.fixture
def api_schema(db: None, catalog: None, org_pki: Any) -> Iterator[Any]:
    # With the approvals PKI in place, as on any bootstrapped instance (without it, verifying a PDF
    # answers 503 "not initialised" by design).
    # Calls go straight to the WSGI application, whose request signals would close the test's
    # database connection (and its transaction); Django's own test client unhooks them the same way.
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    try:
        yield schemathesis.openapi.from_wsgi("/api/v1/schema/", application)
    finally:
        request_started.connect(close_old_connections)
        request_finished.connect(close_old_connections)


@pytest.fixture
def every_role_token(db: None) -> str:
    """One user holding every role, in a team: each operation runs its deepest code path."""
    team = Team.objects.create(name="fuzz")
    user = make_user("fuzz", *Role.values, team=team)
    return api_token_issue(user=user, name="fuzz").clear_text


def test_no_5xx_and_no_schema_violation(api_schema: Any, every_role_token: str) -> None:
    headers = {"Authorization": f"Bearer {every_role_token}"}
    failures: list[str] = []
    operations = [result.ok() for result in api_schema.get_all_operations()]
    assert len(operations) > 30  # the whole API, not a part of it

    for operation in operations:

        @given(case=operation.as_strategy())
        @settings(
            max_examples=4, deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck)
        )
        def check(case: Any) -> None:
            response = case.call(headers=headers)
            if response.status_code >= 500:
                failures.append(f"{case.method} {case.formatted_path}: {response.status_code} {response.text[:300]}")
                return
            try:
                case.validate_response(response, checks=[response_schema_conformance])
            except AssertionError as exc:  # schemathesis reports each violation as one
                failures.append(f"{case.method} {case.formatted_path}: {str(exc)[:500]}")

        check()
    assert not failures, "\n".join(failures)
