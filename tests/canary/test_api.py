"""The canary analyses over the API: the pipeline's CI token starts one and reads it; the token's
coverage holds; an engineering reviewer decides an inconclusive one; no caller without credentials."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from governance.canary.models import CanaryAnalysis, CanaryStatus
from governance.core.tokens import TokenScope
from governance.gate.services import ci_token_issue
from tests.canary.conftest import Rollout
from tests.conftest import Personas
from tests.gate.conftest import bearer

pytestmark = pytest.mark.django_db


def body(rollout: Rollout, **changes: Any) -> dict[str, Any]:
    return {
        "deployment": rollout.code,
        "artifact_digest": rollout.digest,
        "serving": rollout.serving(),
        "endpoint": "http://canary.internal:8000",
        "model": "Qwen3-30B-A3B-W4A16",
        "credential_ref": "CANARY_KEY",
        "canary_selector": {"deployment": "canary"},
        "stable_selector": {"deployment": "stable"},
        **changes,
    }


def test_the_pipeline_starts_a_canary_analysis_with_its_ci_token_and_reads_it(rollout: Rollout) -> None:
    response = bearer(rollout.token).post("/api/v1/canary/analyses", body(rollout), format="json")

    assert response.status_code == 202, response.json()
    assert response.json()["status"] == "pending"
    code = response.json()["code"]
    read = bearer(rollout.token).get(f"/api/v1/canary/analyses/{code}")
    assert read.status_code == 200
    assert read.json()["credential_ref"] == "CANARY_KEY"
    assert rollout.codes("production") == ["canary.pending"]


def test_no_caller_without_credentials_and_no_token_of_another_scope(rollout: Rollout, personas: Personas) -> None:
    assert APIClient().post("/api/v1/canary/analyses", body(rollout), format="json").status_code in (401, 403)
    _, usage_token = ci_token_issue(
        actor=personas.requester,
        team=personas.team,
        name="usage",
        scopes=[TokenScope.USAGE_WRITE],
        expires_at=timezone.now() + timedelta(days=1),
    )
    assert bearer(usage_token).post("/api/v1/canary/analyses", body(rollout), format="json").status_code == 403
    _, staging_only = ci_token_issue(
        actor=personas.requester,
        team=personas.team,
        name="staging",
        environments=["staging"],
        expires_at=timezone.now() + timedelta(days=1),
    )
    assert bearer(staging_only).post("/api/v1/canary/analyses", body(rollout), format="json").status_code == 403
    assert not CanaryAnalysis.objects.exists()


def test_bad_input_names_the_field(rollout: Rollout) -> None:
    response = bearer(rollout.token).post(
        "/api/v1/canary/analyses", body(rollout, artifact_digest="sha256:" + "0" * 64), format="json"
    )
    assert response.status_code == 400
    assert "artifact_digest" in str(response.json())
    response = bearer(rollout.token).post(
        "/api/v1/canary/analyses", body(rollout, credential_ref="sk-live-123"), format="json"
    )
    assert response.status_code == 400
    assert "credential_ref" in str(response.json())


def test_an_engineering_reviewer_decides_an_inconclusive_analysis_over_the_api(
    rollout: Rollout, personas: Personas
) -> None:
    code = bearer(rollout.token).post("/api/v1/canary/analyses", body(rollout), format="json").json()["code"]
    CanaryAnalysis.objects.filter(code=code).update(status=CanaryStatus.INCONCLUSIVE)
    url = f"/api/v1/canary/analyses/{code}/decide"

    assert personas.client(personas.requester).post(url, {"decision": "promote", "reason": "x"}).status_code == 403
    response = personas.client(personas.engineer).post(
        url, {"decision": "roll_back", "reason": "queue wait doubled"}, format="json"
    )

    assert response.status_code == 200, response.json()
    assert response.json()["status"] == "rolled_back"
    assert response.json()["decision_reason"] == "queue wait doubled"
    assert rollout.codes("production") == ["canary.failed"]
