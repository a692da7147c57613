"""Hostile inputs through gunicorn (issue 18): each answers a 4xx naming the field (or the limit),
never a 500, and nothing is saved. Before: bodies over 2.5 MB, JSON nested 10,000 deep, integers of
10**400 and 2**60, NUL and lone surrogates, malformed eval sets and unknown or coerced eval keys
were 500s or silently accepted."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from governance.deployments.models import DeploymentRequest
from governance.evaluations.models import JobRun
from tests.deployments.conftest import FACTS, SERVING
from tests.evaluations.conftest import locate
from tests.resilience.conftest import Stack
from tests.resilience.flows import local_cluster, to_review
from tests.resilience.helpers import seed

pytestmark = [pytest.mark.fault, pytest.mark.postgres]


@pytest.mark.django_db(transaction=True)
def test_hostile_inputs_are_4xx_naming_the_field_and_save_nothing(
    stack: Stack, tiny_model: Path, tmp_path: Path
) -> None:
    data = seed(1)
    local_cluster(tmp_path, tiny_model)
    code = to_review(stack, data, "target of the eval cases")
    token = data.tokens[0]
    base = {
        "artifact": str(data.artifact.code),
        "product_name": "X",
        "environments": ["production"],
        "facts": FACTS,
        "serving_plan": SERVING,
    }

    def raw(body: dict[str, Any]) -> bytes:
        return json.dumps(body, ensure_ascii=True).encode()  # a lone surrogate travels as \\ud800

    creates: list[tuple[bytes, int, str]] = [
        (raw({**base, "product_name": "x" * 2_000_000}), 413, "1048576 bytes"),
        (b'{"facts": ' + b"[" * 10_000 + b"]" * 10_000 + b"}", 400, "nested deeper"),
        (raw({**base, "facts": {**FACTS, "monthly_active_users": 10**400}}), 400, "facts.monthly_active_users"),
        (raw({**base, "facts": {**FACTS, "monthly_active_users": 2**60}}), 400, "facts.monthly_active_users"),
        (raw({**base, "product_name": "a\x00b"}), 400, "product_name"),
        (raw({**base, "product_name": "x\ud800y"}), 400, "product_name"),
        (b'{"artifact": ', 400, "JSON"),
    ]
    before = DeploymentRequest.objects.count()
    for body, status, named in creates:
        answer = stack.call_raw("POST", "/api/v1/deployments/", token, body)
        assert answer.status == status, (named, answer.body)
        assert named in json.dumps(answer.body), (named, answer.body)
    assert DeploymentRequest.objects.count() == before

    evals: list[tuple[dict[str, Any], str]] = [
        ({"eval_set": '{"id": "a"}\n'}, "eval_set"),  # a case without its fields
        ({"surprise": 1}, "surprise"),  # unknown keys are refused, not ignored
        ({"max_cases_per_category": "8"}, "max_cases_per_category"),  # no coercion of strings
        ({"threshold": True}, "threshold"),
    ]
    locate(code, "local", str(tiny_model))
    good = {"cluster": "local", "kind": "screening", "scheme": "w4a8"}
    for change, field in evals:
        answer = stack.call("POST", f"/api/v1/deployments/{code}/evals", data.engineer_token, {**good, **change})
        assert answer.status == 400, (field, answer.body)
        assert field in answer.body["extra"]["fields"], (field, answer.body)
    assert not JobRun.objects.exists()
