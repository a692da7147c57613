"""Contract tests of the progressive-delivery adapters (governance/gate/adapters.py): each answers
its tool's documented payload with the gate's one decision and refuses an unauthenticated caller.

- Argo Rollouts `web` metric provider: the AnalysisTemplate POSTs `jsonBody` with the headers it
  names and reads `jsonPath: "{$.phase}"` (successCondition `result == "Successful"`,
  failureCondition `result == "Failed"`; anything else is Inconclusive: a pause).
- Flagger webhook `confirm-promotion`: POST `{name, namespace, phase, checksum, metadata}`, metadata
  a map of strings; 2xx advances, anything else halts."""

from __future__ import annotations

import json
from typing import Any

import pytest
from rest_framework.test import APIClient

from governance.canary.models import CanaryStatus
from governance.gate.models import GateDecision
from tests.canary.conftest import Rollout
from tests.canary.test_gate_canary import record
from tests.gate.conftest import bearer

pytestmark = pytest.mark.django_db


def argo_body(rollout: Rollout) -> dict[str, Any]:
    return {
        "deployment": rollout.code,
        "environment": "production",
        "artifact_digest": rollout.digest,
        "serving": rollout.serving(),
    }


def flagger_payload(rollout: Rollout) -> dict[str, Any]:
    return {
        "name": "qwen",
        "namespace": "serving",
        "phase": "Progressing",
        "checksum": "85d557f47b",
        "metadata": {
            "deployment": rollout.code,
            "environment": "production",
            "artifact_digest": rollout.digest,
            "serving": json.dumps(rollout.serving()),
        },
    }


def test_argo_web_metric_phases_follow_the_gate(rollout: Rollout) -> None:
    client = bearer(rollout.token)

    missing = client.post("/api/v1/gate/argo", argo_body(rollout), format="json")
    assert missing.status_code == 200
    assert missing.json()["phase"] == "Failed"
    assert [r["code"] for r in missing.json()["reasons"]] == ["canary.missing"]

    record(rollout, CanaryStatus.RUNNING)
    assert client.post("/api/v1/gate/argo", argo_body(rollout), format="json").json()["phase"] == "Inconclusive"

    record(rollout, CanaryStatus.PASSED)
    passed = client.post("/api/v1/gate/argo", argo_body(rollout), format="json").json()
    assert passed["phase"] == "Successful"
    assert passed["decision"] == "allow"
    # the same decision, logged like every gate check
    assert GateDecision.objects.filter(code=passed["decision_id"], decision="allow").exists()


def test_flagger_confirm_promotion_advances_only_on_allow(rollout: Rollout) -> None:
    client = bearer(rollout.token)

    halted = client.post("/api/v1/gate/flagger/confirm-promotion", flagger_payload(rollout), format="json")
    assert halted.status_code == 412
    assert [r["code"] for r in halted.json()["reasons"]] == ["canary.missing"]

    record(rollout, CanaryStatus.PASSED)
    advanced = client.post("/api/v1/gate/flagger/confirm-promotion", flagger_payload(rollout), format="json")
    assert advanced.status_code == 200
    assert advanced.json()["decision"] == "allow"
    assert advanced.json()["canary"] == {"name": "qwen", "namespace": "serving", "phase": "Progressing"}


def test_flagger_metadata_serving_must_be_json(rollout: Rollout) -> None:
    payload = flagger_payload(rollout)
    payload["metadata"]["serving"] = "tp=2"
    response = bearer(rollout.token).post("/api/v1/gate/flagger/confirm-promotion", payload, format="json")
    assert response.status_code == 400
    assert "metadata.serving" in str(response.json())


@pytest.mark.parametrize(
    ("url", "payload"),
    [("/api/v1/gate/argo", argo_body), ("/api/v1/gate/flagger/confirm-promotion", flagger_payload)],
)
def test_an_unauthenticated_caller_is_refused(rollout: Rollout, url: str, payload: Any) -> None:
    assert APIClient().post(url, payload(rollout), format="json").status_code == 401
    assert bearer("gov_" + "x" * 40).post(url, payload(rollout), format="json").status_code == 401
    assert not GateDecision.objects.exists()


# GitHub's `deployment_protection_rule` event (action `requested`), the fields its docs list.
def github_event(environment: str = "production") -> dict[str, Any]:
    return {
        "action": "requested",
        "environment": environment,
        "event": "push",
        "deployment_callback_url": "https://api.github.com/repos/acme/serving/actions/runs/1234/deployment_protection_rule",
        "deployment": {"id": 1, "sha": "a" * 40, "ref": "main", "environment": environment, "payload": {}},
        "repository": {"full_name": "acme/serving"},
        "installation": {"id": 42},
        "sender": {"login": "github-actions[bot]"},
    }


def test_github_protection_rule_answers_the_callback_body(rollout: Rollout) -> None:
    client = bearer(rollout.token)
    relay = {"event": github_event(), "check": argo_body(rollout)}

    rejected = client.post("/api/v1/gate/github/protection-rule", relay, format="json")
    assert rejected.status_code == 200
    assert rejected.json()["callback_url"].endswith("/actions/runs/1234/deployment_protection_rule")
    body = rejected.json()["body"]
    assert body["environment_name"] == "production"
    assert body["state"] == "rejected"
    assert "canary.missing" in body["comment"]
    assert len(body["comment"]) <= 1024

    record(rollout, CanaryStatus.PASSED)
    approved = client.post("/api/v1/gate/github/protection-rule", relay, format="json").json()["body"]
    assert approved["state"] == "approved"

    other = {"event": github_event("staging"), "check": argo_body(rollout)}
    mismatch = client.post("/api/v1/gate/github/protection-rule", other, format="json")
    assert mismatch.status_code == 400
    assert "check.environment" in str(mismatch.json())
    assert APIClient().post("/api/v1/gate/github/protection-rule", relay, format="json").status_code == 401
