"""The deployment list: filters declared in a FilterSet, unknown parameters refused, and a
number of queries that does not grow with the rows on the page."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from governance.deployments import services as deployment_services
from governance.deployments.models import DeploymentRequest
from governance.evaluations.models import Cluster, EvalKind, EvalRun, EvalStatus, ExecutorKind
from tests.deployments.conftest import FACTS, Flow

# Queries for one page of the list, whatever its length: the caller's roles, the count, the
# page, one per prefetched collection (obligations, waivers, decisions, eval runs) and two for
# the latest capacity plans. Before the prefetching, 2 rows took 20 queries.
LIST_QUERIES = 8


def _rich_request(flow: Flow, artifacts: dict[str, Any], personas: Any, cluster: Cluster, index: int) -> str:
    """A request under review with a capacity plan and an eval run, and either a waiver (qwen)
    or obligations (llama)."""
    if index % 2:
        code = flow.to_review(artifacts["llama"])
    else:
        code = flow.to_review(artifacts["qwen"], {**FACTS, "monthly_active_users": 200_000_000})
        expires = (timezone.now() + timedelta(days=30)).isoformat()
        waiver = {
            "license": "qwen",
            "finding_code": "threshold.licensor_approval",
            "reason": "signed",
            "expires_at": expires,
        }
        assert flow.post(personas.legal, code, "waivers", waiver).status_code == 201
    flow.compute_capacity(code)
    deployment = DeploymentRequest.objects.get(code=code)
    evaluation = EvalRun.objects.create(
        request=deployment,
        cluster=cluster,
        scheme="fp8",
        kind=EvalKind.SERVED,
        candidate_digest=deployment.artifact.weights_digest,  # a served eval of this request's weights
        engine="vllm",
        serving=(deployment.evidence or {})["capacity_plan"]["result"]["parallel"],
        status=EvalStatus.FAILED,
        summary={"pass": False, "overall": {"n": 400, "upper_bound_95": 0.3}},
        eval_set_sha256="e" * 64,
    )
    deployment_services.on_eval_finished(evaluation=evaluation)  # as after the run: it is evidence
    return code


def _list(flow: Flow, user: Any) -> list[dict[str, Any]]:
    response = flow.client(user).get("/api/v1/deployments/", {"page_size": 50})
    assert response.status_code == 200, response.json()
    return list(response.json()["results"])


def test_list_queries_do_not_grow_with_rows(
    flow: Flow, artifacts, personas, tmp_path, django_assert_max_num_queries
) -> None:
    cluster = Cluster.objects.create(name="lab", executor=ExecutorKind.LOCAL, remote_root=str(tmp_path / "runs"))
    codes = [_rich_request(flow, artifacts, personas, cluster, i) for i in range(2)]
    with CaptureQueriesContext(connection) as two:
        rows = _list(flow, personas.legal)
    with django_assert_max_num_queries(LIST_QUERIES):
        rows = _list(flow, personas.legal)
    assert {row["code"] for row in rows} == set(codes)
    codes += [_rich_request(flow, artifacts, personas, cluster, i) for i in range(2, 10)]
    with CaptureQueriesContext(connection) as ten:
        rows = _list(flow, personas.legal)
    with django_assert_max_num_queries(LIST_QUERIES):
        rows = _list(flow, personas.legal)
    assert len(ten.captured_queries) == len(two.captured_queries)
    # What the prefetched rows show is what the detail view (no prefetch) shows.
    assert {row["code"] for row in rows} == set(codes)
    for row in rows:
        detail = flow.get(personas.legal, row["code"])
        for key in ("licenses", "obligations", "waivers", "decisions", "capacity_plan", "blockers"):
            assert row[key] == detail[key], key
        assert row["capacity_plan"]
        assert any(b["code"] == "eval.failed" for b in row["blockers"])
        assert not any(b.get("finding") == "threshold.licensor_approval" for b in row["blockers"])  # waived
    assert sum(bool(row["waivers"]) for row in rows) == 5
    assert sum(bool(row["obligations"]) for row in rows) == 5


def test_list_refuses_unknown_parameters(flow: Flow, artifacts, personas) -> None:
    flow.create(artifacts["apache"])
    client = flow.client(personas.requester)
    for name in ("artifact", "stauts", "team__name"):
        response = client.get("/api/v1/deployments/", {name: "x"})
        assert response.status_code == 400, (name, response.json())
        assert name in response.json()["extra"]["fields"], response.json()
    for params in ({"page": 1, "page_size": 5}, {"status": "draft", "flagged": "false", "team": personas.team.name}):
        response = client.get("/api/v1/deployments/", params)
        assert response.status_code == 200, (params, response.json())
        assert response.json()["count"] == 1
    assert client.get("/api/v1/deployments/", {"product": "acme"}).json()["count"] == 1
    assert client.get("/api/v1/deployments/", {"product": "nothing"}).json()["count"] == 0
    assert client.get("/api/v1/deployments/", {"flagged": "true"}).json()["count"] == 0
    bad = client.get("/api/v1/deployments/", {"flagged": "maybe"})
    assert bad.status_code == 400
    assert "flagged" in bad.json()["extra"]["fields"]
