"""The canary analysis end to end through real HTTP on loopback (tests/canary/fakes.py: the engine
and Prometheus are stand-ins, see there): live regression against the approved eval's candidate
answers, the serving metrics canary vs stable and vs the plan, the verdict, the gate's answer after
it, an engineering reviewer's decision on an inconclusive one, and no credential stored."""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from governance.audit.models import AuditEvent
from governance.canary.models import CanaryAnalysis, CanaryStatus
from governance.canary.prometheus import PromClient
from governance.canary.services import canary_analysis_decide, canary_analysis_request, canary_analysis_run
from governance.core.errors import ApplicationError, PermissionDeniedError
from governance.deployments.readiness import approved_eval
from governance.evaluations.models import EvalRun, JobKind, JobRun
from tests.canary.conftest import Rollout
from tests.canary.fakes import FakeEngine, FakePrometheus
from tests.conftest import Personas

pytestmark = pytest.mark.django_db

N_CASES = 64
CASES = [
    {"id": f"fact-{i:03d}", "category": "facts", "turns": [f"What is the code of part {i}?"], "key_items": [f"K{i}X"]}
    for i in range(N_CASES)
]
APPROVED = {case["id"]: f"The code of part {i} is K{i}X." for i, case in enumerate(CASES)}


def like_the_approved_weights(prompt: str) -> str:
    number = int(prompt.rsplit(" ", 1)[1].rstrip("?"))
    return APPROVED[f"fact-{number:03d}"]


def other_weights(prompt: str) -> str:
    return "I do not know the code of that part."


@pytest.fixture
def reference(rollout: Rollout) -> EvalRun:
    """The approved served eval as the eval job now leaves it: its cases and candidate answers."""
    run = approved_eval(rollout.evidence)
    assert run is not None
    evaluation = EvalRun.objects.get(code=run["eval"])
    text = "".join(json.dumps(case) + "\n" for case in CASES)
    evaluation.job = JobRun.objects.create(
        cluster=evaluation.cluster, kind=JobKind.EVAL, command=["true"], files={"eval_set.jsonl": text}, time_limit_s=60
    )
    evaluation.eval_set_sha256 = hashlib.sha256(text.encode()).hexdigest()
    evaluation.summary = {**(evaluation.summary or {}), "candidate_answers": APPROVED}
    evaluation.save()
    return evaluation


NOW = 1_800_000_000.0


def metrics(rollout: Rollout, canary_factor: dict[str, float] | None = None, missing: str = "") -> Callable[[str], Any]:
    """Series per query: stable around a base per metric, the canary the same times a factor."""
    plan = rollout.evidence["capacity_plan"]["result"]["throughput"]
    bases = {
        "time_to_first_token": plan["ttft_ms"] / 1000 * 0.5,
        "inter_token_latency": plan["tpot_ms"] / 1000 * 0.5,
        "e2e_request_latency": 2.0,
        "request_queue_time": 0.01,
        "kv_cache_usage_perc": 0.5,
        "num_requests_waiting": 1.0,
        "num_preemptions": 0.0,
        "prefix_cache": 0.6,
    }

    def series(query: str) -> list[float | None] | None:
        side = "canary" if 'deployment="canary"' in query else "stable"
        name = next(key for key in bases if key in query)
        if side == "canary" and missing == name:
            return None
        factor = (canary_factor or {}).get(name, 1.0) if side == "canary" else 1.0
        rng = random.Random(f"{side}{name}")
        return [bases[name] * factor * (1 + rng.uniform(-0.05, 0.05)) for _ in range(40)]

    return series


@pytest.fixture
def engine_like_approved() -> Iterator[FakeEngine]:
    with FakeEngine(like_the_approved_weights) as engine:
        yield engine


def analyse(
    rollout: Rollout, personas: Personas, engine: FakeEngine, series: Callable[[str], Any], **extra: Any
) -> CanaryAnalysis:
    analysis = canary_analysis_request(
        deployment=rollout.deployment,
        artifact_digest=rollout.digest,
        serving=rollout.serving(),
        endpoint=engine.url,
        model_name="Qwen3-30B-A3B-W4A16",
        canary_selector={"deployment": "canary"},
        stable_selector={"deployment": "stable"},
        sample_size=N_CASES,
        actor=personas.engineer,
        **extra,
    )
    with FakePrometheus(series) as prometheus:
        return canary_analysis_run(
            analysis_id=analysis.pk, prometheus=lambda: PromClient(prometheus.url, timeout_s=5), now=NOW
        )


def by_metric(analysis: CanaryAnalysis) -> dict[str, dict[str, Any]]:
    return {f"{c['kind']}:{c['metric']}": c for c in analysis.checks}


def test_a_canary_serving_the_approved_weights_passes_and_production_is_allowed(
    rollout: Rollout, personas: Personas, reference: EvalRun, engine_like_approved: FakeEngine
) -> None:
    assert rollout.codes("production") == ["canary.missing"]

    analysis = analyse(rollout, personas, engine_like_approved, metrics(rollout))

    assert analysis.status == CanaryStatus.PASSED, analysis.checks
    checks = by_metric(analysis)
    assert checks["regression:live_regression"]["verdict"] == "passed"
    assert "0 of 64 cases" in checks["regression:live_regression"]["detail"]
    assert checks["stable:ttft_seconds"]["p_value"] is not None
    assert checks["plan:ttft_seconds"]["verdict"] == "passed"
    # the service's own client-side figures, measured on the live path
    assert analysis.measurements["client_ttft_seconds"]["n"] == N_CASES
    assert analysis.measurements["reference_eval"] == str(reference.code)
    assert rollout.check("production")["decision"] == "allow"
    actions = list(
        AuditEvent.objects.filter(action__in=[810, 811, 812]).order_by("id").values_list("action", flat=True)
    )
    assert actions == [810, 811, 812]


def test_a_canary_serving_other_weights_fails_the_live_regression_and_production_stays_denied(
    rollout: Rollout, personas: Personas, reference: EvalRun
) -> None:
    with FakeEngine(other_weights) as engine:
        analysis = analyse(rollout, personas, engine, metrics(rollout))

    assert analysis.status == CanaryStatus.FAILED
    check = by_metric(analysis)["regression:live_regression"]
    assert check["verdict"] == "failed"
    assert "64 of 64 cases answered unlike the approved weights" in check["detail"]
    assert rollout.codes("production") == ["canary.failed"]


def test_a_canary_ttft_40_percent_above_stable_fails_stating_values_p_value_and_threshold(
    rollout: Rollout, personas: Personas, reference: EvalRun, engine_like_approved: FakeEngine
) -> None:
    analysis = analyse(rollout, personas, engine_like_approved, metrics(rollout, {"time_to_first_token": 1.4}))

    assert analysis.status == CanaryStatus.FAILED
    check = by_metric(analysis)["stable:ttft_seconds"]
    assert check["verdict"] == "failed"
    assert check["canary"] == pytest.approx(check["stable"] * 1.4, rel=0.06)
    assert check["threshold"] == 0.2
    assert check["p_value"] < 0.02
    assert f"p = {check['p_value']:.3g}" in check["detail"]
    assert rollout.codes("production") == ["canary.failed"]


def test_no_canary_series_is_a_failed_check(
    rollout: Rollout, personas: Personas, reference: EvalRun, engine_like_approved: FakeEngine
) -> None:
    analysis = analyse(rollout, personas, engine_like_approved, metrics(rollout, missing="kv_cache_usage_perc"))

    assert analysis.status == CanaryStatus.FAILED
    check = by_metric(analysis)["stable:kv_cache_usage"]
    assert check["verdict"] == "failed"
    assert "no data" in check["detail"]


def test_a_borderline_canary_is_inconclusive_until_an_engineer_promotes_it_with_a_reason(
    rollout: Rollout, personas: Personas, reference: EvalRun, engine_like_approved: FakeEngine
) -> None:
    # e2e latency 18% above stable: significant, within the allowed 20% but beyond 0.8 of it
    analysis = analyse(rollout, personas, engine_like_approved, metrics(rollout, {"e2e_request_latency": 1.18}))
    assert analysis.status == CanaryStatus.INCONCLUSIVE, analysis.checks
    assert rollout.codes("production") == ["canary.pending"]

    with pytest.raises(PermissionDeniedError):
        canary_analysis_decide(analysis=analysis, decision="promote", reason="fine", actor=personas.requester)
    with pytest.raises(ApplicationError):
        canary_analysis_decide(analysis=analysis, decision="promote", reason="  ", actor=personas.engineer)

    decided = canary_analysis_decide(
        analysis=analysis, decision="promote", reason="e2e within SLO at p99", actor=personas.engineer
    )

    assert decided.status == CanaryStatus.PROMOTED
    event = AuditEvent.objects.filter(action=813).get()
    assert event.data["reason"] == "e2e within SLO at p99"
    assert rollout.check("production")["decision"] == "allow"


def test_the_credential_is_read_from_the_named_variable_and_never_stored(
    rollout: Rollout, personas: Personas, reference: EvalRun, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = "sk-canary-" + "9" * 20
    monkeypatch.setenv("CANARY_TEST_KEY", secret)
    with FakeEngine(like_the_approved_weights, api_key=secret) as engine:
        analysis = analyse(rollout, personas, engine, metrics(rollout), credential_ref="CANARY_TEST_KEY")
    assert analysis.status == CanaryStatus.PASSED, analysis.checks
    assert set(engine.authorizations) == {f"Bearer {secret}"}
    stored = json.dumps(list(CanaryAnalysis.objects.values()), default=str) + json.dumps(
        list(AuditEvent.objects.values("data")), default=str
    )
    assert secret not in stored
    assert "CANARY_TEST_KEY" in stored  # the reference is


def test_an_endpoint_carrying_a_credential_is_refused(rollout: Rollout, personas: Personas) -> None:
    with pytest.raises(ApplicationError) as refused:
        canary_analysis_request(
            deployment=rollout.deployment,
            artifact_digest=rollout.digest,
            serving=rollout.serving(),
            endpoint="http://user:sk-secret@127.0.0.1:9/",
            actor=personas.engineer,
        )
    assert "endpoint" in str(refused.value)
    assert not CanaryAnalysis.objects.exists()


def test_the_job_is_resumable_and_leaves_a_finished_analysis_alone(
    rollout: Rollout, personas: Personas, reference: EvalRun, monkeypatch: pytest.MonkeyPatch
) -> None:
    from datetime import timedelta

    from django.utils import timezone

    from governance.canary import services

    sent: list[int] = []
    monkeypatch.setattr(services, "canary_analysis_send", sent.append)
    pending = canary_analysis_request(
        deployment=rollout.deployment,
        artifact_digest=rollout.digest,
        serving=rollout.serving(),
        endpoint="http://127.0.0.1:9",
        actor=personas.engineer,
    )
    long_ago = timezone.now() - timedelta(hours=2)
    CanaryAnalysis.objects.filter(pk=pending.pk).update(created_at=long_ago)
    stalled = CanaryAnalysis.objects.create(
        deployment=rollout.deployment,
        digest=rollout.digest,
        envelope={},
        envelope_digest="e",
        status=CanaryStatus.RUNNING,
        started_at=long_ago,
    )
    fresh = CanaryAnalysis.objects.create(
        deployment=rollout.deployment, digest=rollout.digest, envelope={}, envelope_digest="e"
    )

    assert services.canary_analyses_resume() == sorted([pending.pk, stalled.pk])
    assert sorted(sent) == sorted([pending.pk, stalled.pk])
    assert fresh.pk not in sent

    # a rerun of the stalled one starts over; the endpoint at port 9 answers nothing: failed, named
    rerun = canary_analysis_run(analysis_id=stalled.pk, prometheus=lambda: None, now=NOW)
    assert rerun.status == CanaryStatus.FAILED
    assert AuditEvent.objects.filter(action=811, data__resumed=True).exists()
    # finished: a resent task changes nothing
    again = canary_analysis_run(analysis_id=stalled.pk, prometheus=lambda: None, now=NOW)
    assert again.finished_at == rerun.finished_at
    assert AuditEvent.objects.filter(action=812).count() == 1


def test_an_analysis_past_its_time_limit_fails_naming_it(rollout: Rollout, personas: Personas) -> None:
    from governance.canary.services import canary_analysis_timed_out

    analysis = CanaryAnalysis.objects.create(
        deployment=rollout.deployment, digest=rollout.digest, envelope={}, envelope_digest="e",
        status=CanaryStatus.RUNNING,
    )  # fmt: skip
    done = canary_analysis_timed_out(analysis_id=analysis.pk, seconds=900)
    assert done.status == CanaryStatus.FAILED
    assert "900 s" in done.error
