"""Every page bench/ui.py measures reads a fixed number of queries, whatever the number of rows:
the same count with 2 requests as with 20 (in varied states, each with its obligations), with 2
CI tokens as with 20, and with a short audit trail as with a longer one."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from governance.deployments.choices import Status
from governance.deployments.models import DeploymentRequest, ObligationItem
from governance.gate.services import ci_token_issue
from tests.conftest import Personas
from tests.deployments.conftest import Flow
from tests.web.test_pages import _queries, browser

# (who, page) as bench/ui.py measures them; "request" is the first request's page.
BENCH_PAGES = [
    ("requester", "/"),
    ("legal", "/"),
    ("requester", "/requests/"),
    ("requester", "/requests/new"),
    ("legal", "request"),
    ("requester", "/licenses/"),
    ("requester", "/licenses/kimi-k2-modified-mit/"),
    ("requester", "/clusters/"),
    ("auditor", "/audit/"),
    ("requester", "/tokens/"),
    ("requester", "/verify/"),
]
STATES = [Status.DRAFT, Status.SUBMITTED, Status.IN_REVIEW, Status.APPROVED, Status.REJECTED]


# An obligation's own columns, copied onto each cloned request.
COPIED = ("license_key", "finding_code", "clause", "params", "message", "fingerprint")


def _grow(personas: Personas, first: DeploymentRequest, total: int) -> None:
    """Copies of the first request (as bench/ui.py makes them) up to `total` requests, each with
    the first one's obligations, some flagged; and as many CI tokens of the requester's team."""
    have = DeploymentRequest.objects.count()
    copies = DeploymentRequest.objects.bulk_create(
        DeploymentRequest(
            team=first.team,
            requester=first.requester,
            artifact=first.artifact,
            product_name=f"Product {i}",
            facts=first.facts,
            serving_plan=first.serving_plan,
            status=STATES[i % len(STATES)],
            evidence=first.evidence,
            evidence_digest=first.evidence_digest,
            flagged=i % 3 == 0,
            flag_reason="usage",
        )
        for i in range(have, total)
    )
    template = list(first.obligations.all())
    ObligationItem.objects.bulk_create(
        ObligationItem(request=copy, **{name: getattr(o, name) for name in COPIED}) for copy in copies for o in template
    )
    for index in range(_tokens(personas), total):
        ci_token_issue(
            actor=personas.admin,
            team=personas.team,
            name=f"deploy-{index}",
            expires_at=timezone.now() + timedelta(days=30),
        )


def _tokens(personas: Personas) -> int:
    from governance.core.models import ApiToken

    return ApiToken.objects.filter(team=personas.team).count()


@pytest.mark.parametrize(("username", "page"), BENCH_PAGES)
def test_bench_pages_take_the_same_queries_with_2_and_20_requests(
    username: str, page: str, personas: Personas, flow: Flow, artifacts: Any, django_assert_max_num_queries: Any
) -> None:
    personas.team.leads.add(personas.requester)  # the tokens page: a team lead's view
    code = flow.to_review(artifacts["kimi"])
    first = DeploymentRequest.objects.get(code=code)
    user: User = getattr(personas, username)
    client = browser(user)
    url = f"/requests/{code}/" if page == "request" else page
    _grow(personas, first, 2)
    client.get(url)  # warm per-process caches (license specs, content types)
    few = _queries(client, url)
    flow.to_review(artifacts["kimi"])  # a second real request: more audit events, findings, plans
    _grow(personas, first, 20)
    assert DeploymentRequest.objects.count() == 20
    many = _queries(client, url)
    assert many == few, f"{url} as {username}: {few} queries with 2 requests, {many} with 20"
    with django_assert_max_num_queries(MAX_QUERIES):
        client.get(url)


MAX_QUERIES = 16
