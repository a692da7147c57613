"""The eval an approval relied on has a typed home (deployments.Approval), written when the approval
happens; the migration that introduced it fills it in for approvals already given from their audit
events, so later evidence compares a fresh eval with the same run either way."""

from __future__ import annotations

import importlib

from django.apps import apps

from governance.deployments.models import Approval, DeploymentRequest
from governance.evaluations.models import EvalRun
from tests.gate.conftest import Gate

migration = importlib.import_module("governance.deployments.migrations.0007_approval_record")


def test_approvals_given_before_the_record_are_filled_in_from_the_audit_trail(gate: Gate) -> None:
    deployment = DeploymentRequest.objects.get(code=gate.code)
    [approved] = EvalRun.objects.filter(request=deployment)
    [recorded] = Approval.objects.filter(deployment=deployment)
    assert recorded.relied_on_eval == approved
    assert recorded.evidence_digest == deployment.evidence_digest

    Approval.objects.all().delete()  # as before the migration: the audit event alone names the eval
    migration.approvals_from_audit(apps, None)
    [rebuilt] = Approval.objects.filter(deployment=deployment)
    assert rebuilt.relied_on_eval == approved
    assert rebuilt.evidence_digest == recorded.evidence_digest
    assert abs((rebuilt.approved_at - recorded.approved_at).total_seconds()) < 5
