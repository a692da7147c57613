"""A team's canary and fleet measurements calibrate its next plans on that cluster (issue 47): a request whose
target cluster has three of the team's TPOT measurements there (of its GPU, engine, release line and replica
shape) is planned with the corrected TPOT, the narrower interval and a note saying where they come from, shown on
the request page in English and Chinese; with two the catalog's stands and a note says why; measurements of
another cluster, GPU, engine or release line, and every other team's, are never used."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.cache import cache

from governance.canary.models import CanaryAnalysis, CanaryStatus, MeasurementSource, PlanMeasurement
from governance.canary.selectors import measured_evidence_for
from governance.capacity.services import capacity_plan_run
from governance.deployments.models import DeploymentRequest
from governance.deployments.selectors import latest_capacity_plan
from governance.deployments.services import planner_inputs
from governance.evaluations.models import Cluster, ExecutorKind
from tests.conftest import Personas
from tests.deployments.conftest import Flow
from tests.web.test_capacity_fragment import _capacity
from tests.web.test_pages import browser

pytestmark = pytest.mark.django_db

GOOD = (1.15, 1.20)  # the team's TPOT measurements on gpu-a; a third, folded from a canary and its fleet, is 1.10
ODD = 3.0  # every measurement that must not count: far enough to move the median if it did


def measure(
    deployment: DeploymentRequest,
    rows: tuple[tuple[str, float], ...],
    *,
    layout: dict[str, int],
    cluster: str = "gpu-a",
    gpu: str = "h200",
    engine: str = "vllm",
    version: str = "0.11.0",
    figure: str = "tpot_ms",
) -> CanaryAnalysis:
    """One canary analysis of `deployment` and its rows against the plan, as the canary and fleet record them:
    (source, measured / the catalog's figure) each."""
    envelope = {"engine": engine, "engine_version": version, "gpu": gpu, "precision": "fp8", **layout}
    analysis = CanaryAnalysis.objects.create(
        deployment=deployment,
        digest="sha256:" + "0" * 64,
        envelope=envelope,
        envelope_digest="0" * 64,
        status=CanaryStatus.PASSED,
        cluster=cluster,
    )
    for source, ratio in rows:
        PlanMeasurement.objects.create(
            deployment=deployment,
            analysis=analysis,
            source=source,
            cluster=cluster,
            engine=engine,
            engine_version=version,
            gpu=gpu,
            layout=layout,
            figure=figure,
            planned=10.0,
            measured=10.0 * ratio,
            ratio=ratio,
            catalog_ratio=ratio,
            position="inside",
            verdict="as_planned",
        )
    return analysis


def planned(flow: Flow, artifacts: dict[str, Any], cluster: str) -> tuple[str, dict[str, Any]]:
    code = flow.create(artifacts["apache"], target_cluster=cluster)["code"]
    assert flow.post(flow.p.requester, code, "submit").status_code == 200
    flow.compute_capacity(code)
    stored = latest_capacity_plan(DeploymentRequest.objects.get(code=code))
    assert stored is not None
    assert stored.result is not None, stored.error
    return code, stored.result


def width(result: dict[str, Any], path: str) -> float:
    return float(result["intervals"][path]["high"] - result["intervals"][path]["low"])


def test_a_plan_takes_its_team_s_canary_measurements_on_the_cluster_and_says_so(
    flow: Flow, artifacts: dict[str, Any], personas: Personas
) -> None:
    for name in ("gpu-a", "gpu-b"):
        Cluster.objects.create(name=name, executor=ExecutorKind.LOCAL, remote_root=f"/tmp/{name}")
    # Before any measurement: the catalog's TPOT, as a what-if plan (no team) also gets.
    first, catalog = planned(flow, artifacts, "gpu-a")
    layout = {key: catalog["parallel"][key] for key in ("tp", "pp", "ep")}
    wider = {**layout, "tp": layout["tp"] * 2}  # replicas of another shape than the plan's
    owner = DeploymentRequest.objects.get(code=first)
    theirs = DeploymentRequest.objects.get(code=flow.create(artifacts["apache"], target_cluster="gpu-a")["code"])
    DeploymentRequest.objects.filter(pk=theirs.pk).update(team=personas.other_team)
    theirs.refresh_from_db()

    canary, fleet = MeasurementSource.CANARY, MeasurementSource.FLEET
    # The team's own on gpu-a: three canary analyses, one folded with its fleet's re-checks (mean 1.10).
    measure(owner, ((canary, 1.05), (fleet, 1.15), (fleet, 1.10)), layout=layout)
    for ratio in GOOD:
        measure(owner, ((canary, ratio),), layout=layout)
    # None of these count for the team's plan on gpu-a.
    for _ in range(3):
        measure(theirs, ((canary, ODD),), layout=layout)  # another team's, on the same cluster
        measure(owner, ((canary, ODD),), layout=layout, cluster="gpu-b")
        measure(owner, ((canary, ODD),), layout=layout, gpu="h100-80g")
        measure(owner, ((canary, ODD),), layout=layout, engine="sglang", version="0.5.2")
        measure(owner, ((canary, ODD),), layout=layout, version="0.10.2")
        measure(owner, ((canary, ODD),), layout=wider)
        measure(owner, ((canary, ODD),), layout=layout, figure="kv_cache_usage")

    code, result = planned(flow, artifacts, "gpu-a")
    factor = 1.15  # the median of 1.10, 1.15, 1.20
    assert result["throughput"]["tpot_ms"] == pytest.approx(catalog["throughput"]["tpot_ms"] * factor, abs=0.011)
    assert result["throughput"]["decode_tokens_per_s"] == pytest.approx(
        catalog["throughput"]["decode_tokens_per_s"] / factor, abs=0.11
    )
    assert result["throughput_estimate"]["team_correction"] == {"tpot_ms": factor}
    assert result["throughput"]["ttft_ms"] == catalog["throughput"]["ttft_ms"]  # no TTFT measured
    tpot = result["intervals"]["throughput.tpot_ms"]
    assert tpot["n"] == 3
    assert "3 of your canary measurements on cluster gpu-a" in tpot["basis"]
    assert width(result, "throughput.tpot_ms") < width(catalog, "throughput.tpot_ms")
    assert result["intervals"]["throughput.ttft_ms"] == catalog["intervals"]["throughput.ttft_ms"]
    assert any(n.startswith("TPOT from 3 of your canary measurements on cluster gpu-a") for n in result["notes"])
    # The memory figures are the startup logs' business: unchanged.
    assert result["memory_per_gpu"] == catalog["memory_per_gpu"]

    # The other team's plan on gpu-a takes its own three, never these.
    inputs = planner_inputs(DeploymentRequest.objects.get(code=code))
    other = capacity_plan_run(inputs, team_id=personas.other_team.pk)
    assert other["throughput_estimate"]["team_correction"] == {"tpot_ms": ODD}
    # A what-if plan is no team's: the catalog's.
    assert "team_correction" not in capacity_plan_run(inputs)["throughput_estimate"]

    # The request page and its Chinese: the interval from the team's measurements, the note among the plan's.
    cache.clear()
    client = browser(personas.legal)
    english = _capacity(client, code)
    assert ", from 3 of your canary measurements</li>" in english
    assert "TPOT from 3 of your canary measurements on cluster gpu-a" in english
    chinese = _capacity(client, code, "zh-hans")
    assert "依据您的 3 次金丝雀实测" in chinese
    assert ", from 3 of your canary measurements</li>" not in chinese  # the planner's own note stays English


def test_two_measurements_leave_the_catalog_standing_with_a_note(
    flow: Flow, artifacts: dict[str, Any], personas: Personas
) -> None:
    Cluster.objects.create(name="gpu-a", executor=ExecutorKind.LOCAL, remote_root="/tmp/gpu-a")
    first, catalog = planned(flow, artifacts, "gpu-a")
    layout = {key: catalog["parallel"][key] for key in ("tp", "pp", "ep")}
    owner = DeploymentRequest.objects.get(code=first)
    for ratio in GOOD:
        measure(owner, ((MeasurementSource.CANARY, ratio),), layout=layout)
    _, result = planned(flow, artifacts, "gpu-a")
    assert result["throughput"] == catalog["throughput"]
    assert result["intervals"] == catalog["intervals"]
    assert any(
        n.startswith("TPOT: 2 of your canary measurements on cluster gpu-a") and "fewer than 3" in n
        for n in result["notes"]
    )


def test_the_selector_reads_one_measurement_per_analysis_and_skips_unknown_versions_and_layouts(
    flow: Flow, artifacts: dict[str, Any], personas: Personas
) -> None:
    owner = DeploymentRequest.objects.get(code=flow.create(artifacts["apache"])["code"])
    canary, fleet = MeasurementSource.CANARY, MeasurementSource.FLEET
    measure(owner, ((canary, 1.0), (fleet, 1.2), (fleet, 1.4)), layout={"tp": 2, "pp": 1})
    measure(owner, ((canary, 2.0),), layout={"tp": 1}, version="")  # no version: no release line
    measure(owner, ((canary, 2.0),), layout={"pp": 1})  # no tp: no replica shape
    evidence = measured_evidence_for(
        team_id=personas.team.pk, cluster="gpu-a", gpu="h200", engine="vllm", release_line="0.11"
    )
    assert evidence is not None
    [ratio] = evidence.ratios
    assert (ratio.figure, ratio.gpus_per_replica, round(ratio.ratio, 4)) == ("tpot_ms", 2, 1.2)
    assert evidence.where == "cluster gpu-a"
    assert (
        measured_evidence_for(
            team_id=personas.other_team.pk, cluster="gpu-a", gpu="h200", engine="vllm", release_line="0.11"
        )
        is None
    )
