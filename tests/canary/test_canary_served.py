"""Acceptance with the real parts: the committed tiny model's W4A16 derivative (planner/tinylm/
derivatives/w4a16-rtn) is given a served eval through `transformers serve` and approved for staging
and production; production is denied `canary.missing`. A canary served by a second `transformers
serve` on another committed checkpoint (the careless `w2a16-rtn` of the same parent) answers unlike
the evaluated weights: the live regression fails and production stays denied. A canary served by
`transformers serve` on the approved weights passes, and production is allowed.

The engine-side series come from test exporters serving vLLM's metric names (vLLM cannot run here,
and `transformers serve` exports none: its series are read under vLLM's names, its stated stand-in),
scraped by Debian's Prometheus on loopback. The live regression's answers and the service's own
client-side TTFT/TPOT are the real engines'."""

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
from governance.gate.services import ci_token_issue
from tests.canary.conftest import Rollout
from tests.canary.exporter import VllmExporter
from tests.canary.promserver import loopback_prometheus, needs_prometheus, wait_for_samples
from tests.canary.served import transformers_serve
from tests.conftest import Personas
from tests.deployments.conftest import Flow, artifacts, catalog, flow  # noqa: F401  (shared fixtures)
from tests.gate.conftest import compute_capacity
from tests.quant.conftest import no_engine_left  # noqa: F401  (shared fixture)
from tests.quantization.served_tinylm import CASES_PER_CATEGORY, served_eval, serving, tinylm_on_local_cluster

pytestmark = [pytest.mark.slow, needs_prometheus]

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


@pytest.mark.usefixtures("no_engine_left")
def test_a_canary_of_other_weights_fails_the_live_regression_one_of_the_approved_weights_passes(
    flow: Flow,  # noqa: F811 - the shared fixture
    personas: Personas,
    tmp_path: Path,
    settings: Any,
    django_capture_on_commit_callbacks: Any,
) -> None:
    settings.CANARY_METRICS_WINDOW_S = 60
    tiny = tinylm_on_local_cluster(flow, personas, tmp_path, settings)
    good = tiny.registered["w4a16-rtn"]
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

        evaluation = served_eval(flow, personas, tiny.cluster, code, django_capture_on_commit_callbacks)
        assert evaluation.status == "passed", evaluation.summary
        assert evaluation.summary is not None
        assert len(evaluation.summary["candidate_answers"]) == SAMPLE
        assert flow.approve(code)["status"] == "approved"
        personas.team.leads.add(personas.requester)
        _, token = ci_token_issue(
            actor=personas.requester, team=personas.team, name="deploy", expires_at=timezone.now() + timedelta(days=1)
        )
        layout = plan["parallel"]
        rollout = Rollout(
            code,
            token,
            serving={
                **{k: serving("w4a16")[k] for k in ("engine", "precision", "gpu", "max_model_len")},
                **{k: layout[k] for k in ("tp", "pp", "ep")},
                "engine_version": evaluation.engine_version,  # the version the approval is bound to
            },
        )
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
