"""A careless derivative fails the gate and a good one passes, on real weights made by the quantize job.

The derivatives are the ones committed in planner/tinylm/derivatives (`python -m planner.tinylm.derivatives`
made them with the quantize job's payload; their records hold the recipe, tool versions and manifest
digest): `w2a16-rtn` (int2, round to nearest, no calibration) and `w4a16-rtn` (int4, round to nearest).
Each is registered with lineage to the trained tiny model, located on the local cluster and given a
served eval through `transformers serve` (the compressed-tensors checkpoint decompressed at load), the
path a real review takes, on 15 cases per category of the default set, 64 new tokens.

Why 15 per category and a threshold of 0.2: the verdict is the one-sided 95% Clopper-Pearson upper
bound of the failure rate, per category and overall, against the threshold. With no failure in n cases
that bound is 1 - 0.05^(1/n): a category passes the review's 5% only from n = 59 on (236 cases, some
four times this test's time). On 15 cases a perfect category's bound is 18.1%, so at a threshold of 0.2
a derivative passes exactly when it fails no case in any category, and one failure in any category
(bound 27.9%) fails it. That still separates the two: on the whole set `w2a16-rtn` fails 67 of 400
cases, 57 of the 100 code completions (docs/quantization.md), so 15 code cases without a failure would
have a chance of about 0.43^15 = 3e-6 (answers are greedy: the outcome is the same on every run);
`w4a16-rtn` fails none of the 400.

The good derivative then reaches production as docs/canary.md has it: production is denied
`canary.missing`. A canary served by a second `transformers serve` on the careless `w2a16-rtn` answers
unlike the evaluated weights: the live regression fails and production stays denied. A canary served by
`transformers serve` on the approved weights passes, and production is allowed. (One test, not two: the
canary needs an approval given on a served eval of the W4A16 weights, which the gate half has just made;
a test of its own served the same eval again, baseline included: ~60 s of the CI machine's CPU.)
The engine-side series come from test exporters serving vLLM's metric names (vLLM cannot run here, and
`transformers serve` exports none: its series are read under vLLM's names, its stated stand-in), scraped
by Debian's Prometheus on loopback. The live regression's answers and the service's own client-side
TTFT/TPOT are the real engines'.
"""

from __future__ import annotations

from contextlib import ExitStack
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.utils import timezone

from governance.canary.models import CanaryAnalysis, CanaryStatus
from governance.canary.prometheus import PromClient, engine_queries
from governance.canary.services import canary_analysis_request, canary_analysis_run
from governance.deployments.models import DeploymentRequest
from governance.gate.choices import ReasonCode
from governance.gate.services import ci_token_issue
from tests.canary.conftest import Rollout
from tests.canary.exporter import VllmExporter
from tests.canary.promserver import loopback_prometheus, needs_prometheus, wait_for_samples
from tests.canary.served import transformers_serve
from tests.conftest import Personas
from tests.deployments.conftest import Flow, artifacts, catalog, flow  # noqa: F401  (shared fixtures)
from tests.gate.conftest import bearer, compute_capacity
from tests.quant.conftest import no_engine_left  # noqa: F401  (shared fixture)
from tests.quantization.served_tinylm import (
    CASES_PER_CATEGORY,
    THRESHOLD,
    served_eval,
    serving,
    tinylm_on_local_cluster,
)

SAMPLE = 4 * CASES_PER_CATEGORY  # every case the approved eval answered (60: at least the 59 the 5% rule needs)


def analyse(rollout: Rollout, personas: Personas, url: str, model: Path, client: PromClient) -> CanaryAnalysis:
    analysis = canary_analysis_request(
        deployment=rollout.deployment,
        artifact_digest=rollout.digest,
        serving=rollout.serving(),
        endpoint=url,
        model_name=str(model),  # transformers serve answers for the model it was started with
        canary_selector={"deployment": "canary"},
        stable_selector={"deployment": "stable"},
        sample_size=SAMPLE,
        actor=personas.engineer,
    )
    return canary_analysis_run(analysis_id=analysis.pk, prometheus=lambda: client)


def by_metric(analysis: CanaryAnalysis) -> dict[str, dict[str, Any]]:
    return {f"{c['kind']}:{c['metric']}": c for c in analysis.checks}


@pytest.mark.slow
@needs_prometheus
@pytest.mark.usefixtures("no_engine_left")
def test_the_careless_derivative_is_denied_the_good_one_is_allowed_and_reaches_production_by_its_canary(
    flow: Flow,  # noqa: F811 - the shared fixture
    personas: Personas,
    tmp_path: Path,
    settings: Any,
    django_capture_on_commit_callbacks: Any,
) -> None:
    settings.CANARY_METRICS_WINDOW_S = 60
    tiny = tinylm_on_local_cluster(flow, personas, tmp_path, settings)
    cluster, registered = tiny.cluster, tiny.registered
    personas.team.leads.add(personas.requester)
    _, token = ci_token_issue(
        actor=personas.requester, team=personas.team, name="deploy", expires_at=timezone.now() + timedelta(days=1)
    )

    # The careless derivative: its served eval fails, the request is blocked by eval.failed, the gate denies.
    careless = registered["w2a16-rtn"]
    code = flow.create(careless, serving_plan=serving("w2a16"))["code"]
    assert flow.post(personas.requester, code, "submit").status_code == 200
    assert flow.post(personas.legal, code, "start-review").status_code == 200
    compute_capacity(flow, code)  # refused: no engine has a 2-bit kernel (a blocker of its own)
    evaluation = served_eval(flow, personas, cluster, code, django_capture_on_commit_callbacks)
    assert evaluation.summary is not None
    overall, code_cases = evaluation.summary["overall"], evaluation.summary["categories"]["code"]
    print(f"w2a16-rtn: {overall['failures']}/{overall['n']} failures, bound {overall['upper_bound_95']:.3f}, "
          + ", ".join(f"{k} {v['failures']}/{v['n']}" for k, v in evaluation.summary["categories"].items()))  # fmt: skip
    assert evaluation.status == "failed", overall
    assert overall["upper_bound_95"] > THRESHOLD
    assert code_cases["failures"] >= 1  # code completions lose their key items, as on the whole set
    assert evaluation.candidate_digest == careless.weights_digest
    blockers = {b["code"]: b["message"] for b in flow.get(personas.engineer, code)["blockers"]}
    assert ReasonCode.EVAL_FAILED in blockers, blockers
    assert careless.weights_digest in blockers[ReasonCode.EVAL_FAILED]
    check = {
        "deployment": code,
        "environment": "production",
        "artifact_digest": careless.weights_digest,
        "serving": {**{k: serving("w2a16")[k] for k in ("engine", "precision", "gpu", "max_model_len")},
                    "tp": 1, "pp": 1, "ep": 1},
    }  # fmt: skip
    denied = bearer(token).post("/api/v1/gate/check", check, format="json").json()
    assert denied["decision"] == "deny"
    assert ReasonCode.EVAL_FAILED in [r["code"] for r in denied["reasons"]], denied["reasons"]

    # The good derivative of the same parent: its served eval passes (the baseline's answers are the careless
    # one's, cached), the request is approved, the gate allows staging; production waits for a canary.
    good = registered["w4a16-rtn"]
    code = flow.create(good, serving_plan=serving("w4a16"), environments=["staging", "production"])["code"]
    assert flow.post(personas.requester, code, "submit").status_code == 200
    assert flow.post(personas.legal, code, "start-review").status_code == 200
    compute_capacity(flow, code)
    plan = (DeploymentRequest.objects.get(code=code).evidence or {})["capacity_plan"]["result"]
    ttft_s, tpot_s = plan["throughput"]["ttft_ms"] / 1000, plan["throughput"]["tpot_ms"] / 1000

    with ExitStack() as stack:
        # the canary's and the stable deployment's engine series, both as planned; scraped from now on
        # so that the analysis' window holds samples of both by the time it reads them
        canary_series = stack.enter_context(VllmExporter(0.5 * ttft_s, 0.5 * tpot_s, 0.5))
        stable_series = stack.enter_context(VllmExporter(0.5 * ttft_s, 0.5 * tpot_s, 0.5))
        targets = {"deployment=canary": canary_series.address, "deployment=stable": stable_series.address}
        client = stack.enter_context(loopback_prometheus(tmp_path / "prom", targets))

        evaluation = served_eval(flow, personas, cluster, code, django_capture_on_commit_callbacks)
        assert evaluation.summary is not None
        assert evaluation.status == "passed", evaluation.summary
        assert evaluation.summary["overall"]["failures"] == 0
        assert len(evaluation.summary["candidate_answers"]) == SAMPLE
        assert not [b for b in flow.get(personas.engineer, code)["blockers"] if b["code"].startswith("eval.")]
        assert flow.approve(code)["status"] == "approved"
        layout = (DeploymentRequest.objects.get(code=code).evidence or {})["capacity_plan"]["result"]["parallel"]
        approved_serving: dict[str, Any] = {
            **{k: serving("w4a16")[k] for k in ("engine", "precision", "gpu", "max_model_len")},
            **{k: layout[k] for k in ("tp", "pp", "ep")},
            "engine_version": evaluation.engine_version,  # the version the approval is bound to
        }
        check = {
            "deployment": code,
            "environment": "staging",  # quantized weights reach production through a canary (issue 45)
            "artifact_digest": good.weights_digest,
            "serving": approved_serving,
        }
        allowed = bearer(token).post("/api/v1/gate/check", check, format="json").json()
        assert allowed["decision"] == "allow", allowed["reasons"]
        production = bearer(token).post("/api/v1/gate/check", {**check, "environment": "production"}, format="json")
        assert [r["code"] for r in production.json()["reasons"]] == [ReasonCode.CANARY_MISSING]
        rollout = Rollout(code, token, serving=approved_serving)
        assert rollout.codes("production") == ["canary.missing"]

        # two real engines: the careless derivative of the same parent, and the approved weights
        other_url = stack.enter_context(transformers_serve(tiny.path("w2a16-rtn"), tmp_path / "logs" / "other.log"))
        approved_url = stack.enter_context(
            transformers_serve(tiny.path("w4a16-rtn"), tmp_path / "logs" / "approved.log")
        )
        wait_for_samples(client, engine_queries("vllm", {"deployment": "canary"})["ttft_seconds"], 2, step=15)

        wrong = analyse(rollout, personas, other_url, tiny.path("w2a16-rtn"), client)
        regression = by_metric(wrong)["regression:live_regression"]
        print(f"other weights: {regression['detail']}; {wrong.measurements.get('wall_s')} s")
        assert wrong.status == CanaryStatus.FAILED
        assert regression["verdict"] == "failed"
        assert f"of {SAMPLE} cases answered unlike the approved weights" in regression["detail"]
        # only the live regression failed: the serving metrics were as planned and like stable
        assert [c["metric"] for c in wrong.checks if c["verdict"] != "passed"] == ["live_regression"], wrong.checks
        assert rollout.codes("production") == ["canary.failed"]

        right = analyse(rollout, personas, approved_url, tiny.path("w4a16-rtn"), client)
        regression = by_metric(right)["regression:live_regression"]
        print(f"approved weights: {regression['detail']}; {right.measurements.get('wall_s')} s")
        assert right.status == CanaryStatus.PASSED, right.checks
        assert f"0 of {SAMPLE} cases" in regression["detail"]
        assert right.measurements["reference_eval"] == str(evaluation.code)
        assert right.measurements["metric_names"] == "vllm"  # transformers serve's stated stand-in
        # the service's own client-side figures of the real engine, measured on the live path
        assert right.measurements["client_ttft_seconds"]["n"] == SAMPLE
        assert right.measurements["client_tpot_seconds"]["median"] > 0
        assert rollout.check("production")["decision"] == "allow"
