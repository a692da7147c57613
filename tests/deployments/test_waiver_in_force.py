"""One "waiver in force" rule (issue 44): the model's Python form, its query form, the selector's
two branches (prefetched or not) and the evidence's reading (readiness.waiver_in_force) agree."""

from __future__ import annotations

import itertools
from datetime import timedelta

from django.utils import timezone

from governance.deployments.models import DeploymentRequest, Waiver
from governance.deployments.readiness import waiver_in_force
from governance.deployments.selectors import active_waivers
from tests.deployments.conftest import Flow


def test_every_form_of_the_waiver_rule_agrees(flow: Flow, artifacts: dict) -> None:
    deployment = DeploymentRequest.objects.get(code=flow.create(artifacts["apache"])["code"])
    now = timezone.now()
    p = flow.p
    for index, (expired, blocker, confirmed) in enumerate(itertools.product([False, True], repeat=3)):
        Waiver.objects.create(
            request=deployment,
            license_key="apache-2.0",
            finding_code=f"code.{index}",
            severity="blocker" if blocker else "approval",
            reason="r",
            expires_at=now + timedelta(days=-1 if expired else 1),
            granted_by=p.legal,
            needs_confirmation=blocker,
            confirmed_by=p.engineer if confirmed else None,
            confirmed_at=now if confirmed else None,
            permission_name="permission.pdf" if blocker else "",
            permission_sha256="a" * 64 if blocker else "",
        )
    waivers = list(Waiver.objects.filter(request=deployment))
    in_force = {w.pk for w in waivers if w.in_force(now)}
    assert in_force == set(Waiver.objects.filter(Waiver.in_force_q(now)).values_list("pk", flat=True))
    assert len(in_force) == 3  # unexpired: the non-blocker either way, the blocker once confirmed
    assert {w.pk for w in active_waivers(deployment, now)} == in_force
    prefetched = DeploymentRequest.objects.prefetch_related("waivers").get(pk=deployment.pk)
    assert {w.pk for w in active_waivers(prefetched, now)} == in_force
    for w in waivers:  # the evidence's copy of a waiver, read by the readiness rule
        as_evidence = {
            "license": w.license_key,
            "code": w.finding_code,
            "clause": w.clause,
            "expires_at": w.expires_at.isoformat(),
            "permission": {"sha256": w.permission_sha256} if w.permission_sha256 else None,
            "confirmed_by": w.confirmed_by.username if w.confirmed_by else None,
        }
        finding = {"code": w.finding_code, "clause": "", "severity": w.severity}
        assert waiver_in_force(as_evidence, w.license_key, finding, now) == (w.pk in in_force), w.finding_code
