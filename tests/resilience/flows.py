"""Flows the fault tests share: a request taken to review over HTTP, an eval of the tiny model on a
local cluster, and the waits for the background work to end."""

from __future__ import annotations

import sys
from pathlib import Path

from governance.capacity.models import CapacityPlan
from governance.core.models import OutboxMessage
from governance.deployments.models import DeploymentRequest
from governance.evaluations.models import ACTIVE_STATES, Cluster, EvalRun, ExecutorKind, JobRun
from tests.conftest import ROOT
from tests.deployments.conftest import FACTS, SERVING
from tests.evaluations.conftest import locate
from tests.resilience.conftest import Stack, wait_until
from tests.resilience.helpers import Seed

# A smoke eval of the tiny model: 5 cases per category, short answers, a loose threshold.
SMOKE = {"threshold": 0.5, "max_cases_per_category": 5, "max_new_tokens": 8}


def local_cluster(tmp: Path, model: Path) -> Cluster:
    return Cluster.objects.create(
        name="local",
        executor=ExecutorKind.LOCAL,
        remote_root=str(tmp / "jobs"),
        model_roots=[str(model.parent)],
        python=sys.executable,
        setup_lines=f"export PYTHONPATH={ROOT} OMP_NUM_THREADS=1",
        default_time_limit_s=600,
    )


def create(stack: Stack, data: Seed, name: str, client: int = 0) -> str:
    body = {
        "artifact": str(data.artifact.code),
        "product_name": name,
        "environments": ["production"],
        "facts": FACTS,
        "serving_plan": SERVING,
    }
    answer = stack.call("POST", "/api/v1/deployments/", data.tokens[client], body)
    assert answer.status == 201, answer.body
    return str(answer.body["code"])


def to_review(stack: Stack, data: Seed, name: str) -> str:
    code = create(stack, data, name)
    answer = stack.call("POST", f"/api/v1/deployments/{code}/submit", data.tokens[0], {})
    assert answer.status == 200, answer.body
    answer = stack.call("POST", f"/api/v1/deployments/{code}/start-review", data.legal_token, {})
    assert answer.status == 200, answer.body
    return code


def request_eval(stack: Stack, data: Seed, code: str, model: Path) -> str:
    locate(code, "local", str(model))
    body = {"cluster": "local", "kind": "screening", "scheme": "w4a8", **SMOKE}
    answer = stack.call("POST", f"/api/v1/deployments/{code}/evals", data.engineer_token, body)
    assert answer.status == 202, answer.body
    return str(answer.body["code"])


def plans_of(code: str) -> list[CapacityPlan]:
    return list(CapacityPlan.objects.filter(deployment__code=code))


def wait_plans_done(codes: list[str], timeout_s: float) -> None:
    """Until each request's plans are done and its evidence records that: a plan is saved `done`
    first and its request's evidence refreshed after that commit (capacity.signals.plan_computed), so
    a test that read or changed the evidence as soon as the plan was done could have that refresh
    undo its change (failed once in CI) or read a digest about to change."""

    def done() -> bool:
        plans = [plan for code in codes for plan in plans_of(code)]
        if not plans or any(plan.status != "done" for plan in plans):
            return False
        rows = list(DeploymentRequest.objects.filter(code__in=codes).values_list("evidence", flat=True))
        return len(rows) == len(codes) and all(
            ((evidence or {}).get("capacity_plan") or {}).get("status") == "done" for evidence in rows
        )

    wait_until(done, timeout_s, f"the capacity plans of {codes} and their evidence")


def wait_eval_finished(eval_code: str, timeout_s: float) -> EvalRun:
    def finished() -> EvalRun | None:
        evaluation = EvalRun.objects.select_related("job").get(code=eval_code)
        job = evaluation.job
        if job is not None and job.state not in ACTIVE_STATES and evaluation.status != "running":
            return evaluation
        return None

    return wait_until(finished, timeout_s, f"eval {eval_code}", every_s=1)


def wait_outbox_acked(timeout_s: float) -> None:
    wait_until(lambda: not OutboxMessage.objects.filter(acked_at__isnull=True).exists(), timeout_s, "the outbox")


def job_of(eval_code: str) -> JobRun:
    job = EvalRun.objects.get(code=eval_code).job
    assert job is not None
    return job
