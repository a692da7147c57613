"""Issue 43: the decision log takes its locks in the documented order, the rows it references (the
token, the request) before the audit chain head. A writer that holds one of those rows and then
appends to the chain (a token's revoke, a request's evidence refresh) is waited for, never
deadlocked with, and what it changed is what the decision sees: a revoked token logs nothing (401),
a changed request is decided again. Two database connections, the writer's held open by the test."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from django.db import connection, transaction

from governance.audit.models import AuditChainHead
from governance.core.models import ApiToken
from governance.core.tokens import api_token_resolve, api_token_revoke
from governance.deployments.choices import Status
from governance.deployments.models import DeploymentRequest
from governance.gate.choices import ReasonCode
from governance.gate.conditions import GateCheck
from governance.gate.models import GateDecision
from governance.gate.selectors import gate_deployment_for_token
from governance.gate.services import GateTokenRevokedError, gate_decide
from tests.gate.conftest import Gate

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def _in_thread(work: Callable[[], Any]) -> tuple[threading.Thread, dict[str, Any]]:
    """`work` on its own database connection; its result or exception lands in the dict."""
    out: dict[str, Any] = {}

    def run() -> None:
        try:
            out["result"] = work()
        except Exception as exc:  # handed to the test
            out["error"] = exc
        finally:
            connection.close()

    thread = threading.Thread(target=run)
    thread.start()
    return thread, out


def _decide_in_thread(gate: Gate) -> tuple[threading.Thread, dict[str, Any]]:
    """A gate check that read the token and the request, now logging its decision."""
    token = api_token_resolve(gate.token)
    assert isinstance(token, ApiToken)
    deployment = gate_deployment_for_token(token, gate.code, "production")
    body = gate.body()
    check = GateCheck(body["environment"], body["artifact_digest"], body["serving"])
    return _in_thread(lambda: gate_decide(token=token, deployment=deployment, check=check))


def _head_is_free() -> None:
    """Inside the writer's transaction: the chain head is not held by the waiting check (NOWAIT
    raises at once otherwise; before the fix the check held it while it waited for our row)."""
    AuditChainHead.objects.select_for_update(nowait=True).get(pk=1)


def test_a_revoke_holding_the_token_is_waited_for_and_the_check_logs_nothing(gate: Gate) -> None:
    token = ApiToken.objects.get(prefix=gate.token[:12])
    thread = None
    with transaction.atomic():
        ApiToken.objects.select_for_update().get(pk=token.pk)  # what the revoke holds first
        thread, out = _decide_in_thread(gate)
        time.sleep(0.5)  # the check reaches its log and waits for the token row
        assert thread.is_alive(), out
        _head_is_free()
        api_token_revoke(token=token, actor="system:test")  # then the chain head, then commit
    thread.join(timeout=30)
    assert not thread.is_alive()
    assert isinstance(out.get("error"), GateTokenRevokedError), out
    assert not GateDecision.objects.filter(token=token).exists()


def test_an_edit_holding_the_request_is_waited_for_and_the_check_decides_again(gate: Gate) -> None:
    deployment = DeploymentRequest.objects.get(code=gate.code)
    with transaction.atomic():
        DeploymentRequest.objects.select_for_update().get(pk=deployment.pk)  # deployment_lock
        thread, out = _decide_in_thread(gate)
        time.sleep(0.5)
        assert thread.is_alive(), out
        _head_is_free()
        DeploymentRequest.objects.filter(pk=deployment.pk).update(status=Status.REVOKED)
    thread.join(timeout=30)
    assert not thread.is_alive()
    decision, _approval = out["result"]
    # Decided from the request as the writer left it, not as first read: the approval was revoked.
    assert decision.decision == "deny"
    assert ReasonCode.REVOKED in [reason["code"] for reason in decision.reasons]
    assert list(GateDecision.objects.values_list("code", flat=True)) == [decision.code]
