"""Concurrent writers of one team: creates racing edits of the team's other requests (issue 18).

Before the lock order, a create took the audit chain head and then locked the team row (through
`select_for_update().select_related("team")`) while an edit held the team row and waited for the
chain head: PostgreSQL answered `DeadlockDetected` and the API a 500."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from django.db import connection, connections

from governance.audit.actions import AuditAction
from governance.audit.integrity import verify_live_chain
from governance.audit.keys import load_signing_key
from governance.audit.models import AuditEvent
from governance.audit.services import audit_checkpoint_create
from governance.deployments.models import DeploymentRequest
from tests.conftest import Personas
from tests.deployments.conftest import FACTS, SERVING, Flow

WRITERS = 6
ROUNDS = 6


@pytest.mark.django_db(transaction=True)
def test_creates_racing_edits_of_the_same_team_never_500(personas: Personas, artifacts: dict[str, Any]) -> None:
    if connection.vendor != "postgresql":
        pytest.skip("row-lock deadlocks are a PostgreSQL matter")
    flow = Flow(personas)
    drafts = [flow.create(artifacts["apache"])["code"] for _ in range(WRITERS)]
    artifact = str(artifacts["apache"].code)
    answers: list[tuple[str, int, Any]] = []
    barrier = threading.Barrier(WRITERS * 2)

    def creator(writer: int) -> None:
        client = flow.client(personas.requester)
        client.raise_request_exception = False
        try:
            barrier.wait()
            for n in range(ROUNDS):
                body = {
                    "artifact": artifact,
                    "product_name": f"created-{writer}-{n}",
                    "environments": ["production"],
                    "facts": FACTS,
                    "serving_plan": SERVING,
                }
                response = client.post("/api/v1/deployments/", body, format="json")
                answers.append(("create", response.status_code, response.content[:300]))
        finally:
            connections.close_all()

    def editor(writer: int) -> None:
        client = flow.client(personas.requester)
        client.raise_request_exception = False
        try:
            barrier.wait()
            for n in range(ROUNDS):
                body = {"product_name": f"edited-{writer}-{n}"}
                response = client.patch(f"/api/v1/deployments/{drafts[writer]}", body, format="json")
                answers.append(("edit", response.status_code, response.content[:300]))
        finally:
            connections.close_all()

    threads = [threading.Thread(target=creator, args=(w,)) for w in range(WRITERS)]
    threads += [threading.Thread(target=editor, args=(w,)) for w in range(WRITERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    failures = [answer for answer in answers if answer[1] not in (200, 201)]
    assert failures == []
    assert len(answers) == WRITERS * ROUNDS * 2
    # Every accepted change is present exactly once, with exactly one audit event.
    for writer in range(WRITERS):
        for n in range(ROUNDS):
            assert DeploymentRequest.objects.filter(product_name=f"created-{writer}-{n}").count() == 1
        assert DeploymentRequest.objects.get(code=drafts[writer]).product_name == f"edited-{writer}-{ROUNDS - 1}"
    created = AuditEvent.objects.filter(action=AuditAction.DEPLOYMENT_CREATED)
    assert created.count() == WRITERS * (ROUNDS + 1)
    assert created.values("object_id").distinct().count() == WRITERS * (ROUNDS + 1)
    assert AuditEvent.objects.filter(action=AuditAction.DEPLOYMENT_UPDATED).count() == WRITERS * ROUNDS
    audit_checkpoint_create()
    assert verify_live_chain(load_signing_key().public_key()).ok
