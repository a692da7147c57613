"""Reads of canary analyses: the gate's one statement, and the lists the API and pages show."""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping
from typing import Any

from django.conf import settings
from django.db.models import Avg, Max, Q, QuerySet

from governance.canary.models import CanaryAnalysis, MeasurementSource, PlanMeasurement
from governance.canary.risk import CanaryRecord, canary_reasons, envelope_digest, needs_records
from governance.core.errors import NotFoundError
from governance.core.prepared import fetch_all_prepared
from governance.deployments.models import DeploymentRequest
from governance.deployments.readiness import Reason
from governance.deployments.selectors import deployments_visible_to
from planner.engines.profile import release_numbers
from planner.engines.registry import SERVING_ENGINES
from planner.measured import MEASURED_FIGURES, LatencyRatio, MeasuredEvidence

# The gate's read (one statement, served by canary_request_idx and canary_promoted_idx): this
# request's analyses, and the passed ones of the same weights and envelope for the team's other
# requests ("already promoted"). Bounded: the newest rows decide.
_GATE_CANARY_SQL = """
SELECT CASE WHEN c.deployment_id = %s THEN 1 ELSE 0 END AS same_request, c.status, c.digest, c.envelope_digest
FROM canary_canaryanalysis c
WHERE c.deployment_id = %s
   OR (c.digest = %s AND c.envelope_digest = %s AND c.status IN ('passed', 'promoted')
       AND c.deployment_id IN (SELECT r.id FROM deployments_deploymentrequest r WHERE r.team_id = %s))
ORDER BY c.created_at DESC
LIMIT 100
"""


def canary_environments() -> tuple[str, ...]:
    return tuple(getattr(settings, "CANARY_ENVIRONMENTS", ("production",)))


def canary_gate_reasons(
    *, deployment: DeploymentRequest, environment: str, artifact_digest: str, serving: Mapping[str, Any]
) -> list[Reason]:
    """The gate's call-out: its canary reasons for one check. One indexed statement for quantized
    weights in a guarded environment; no query otherwise."""
    guarded = canary_environments()
    evidence = deployment.evidence or {}
    if not needs_records(environment=environment, guarded=guarded, evidence=evidence):
        return []  # low-risk whatever is on record: no query
    digest = artifact_digest.lower()
    envelope_sha = envelope_digest(serving)
    rows = fetch_all_prepared(
        _GATE_CANARY_SQL, [deployment.pk, deployment.pk, digest, envelope_sha, deployment.team_id]
    )
    records = [
        CanaryRecord(bool(row["same_request"]), row["status"], row["digest"], row["envelope_digest"]) for row in rows
    ]
    return canary_reasons(
        environment=environment,
        guarded=guarded,
        evidence=evidence,
        digest=digest,
        envelope_sha=envelope_sha,
        records=records,
    )


def canary_analyses(deployment: DeploymentRequest) -> QuerySet[CanaryAnalysis]:
    return CanaryAnalysis.objects.filter(deployment=deployment).order_by("-created_at")


def canary_analysis_get(code: Any) -> CanaryAnalysis:
    try:
        return CanaryAnalysis.objects.select_related("deployment").get(code=code)
    except (CanaryAnalysis.DoesNotExist, ValueError):
        raise NotFoundError("no such canary analysis") from None


EXPORT_LIMIT = 5000  # rows per export page: the newest; `before` pages on to older ones


def plan_measurements_visible(
    user: Any, *, cluster: str = "", engine: str = "", source: str = "", before: Any = None
) -> QuerySet[PlanMeasurement]:
    """The measured-vs-planned rows of the requests the user may see, newest first (ties by id), optionally of
    one cluster, engine and source (the calibration export's filters; served by plan_measure_export_idx), and
    older than the row whose code is `before` (the previous page's last: NotFoundError when the user sees no
    such row)."""
    rows = PlanMeasurement.objects.filter(deployment__in=deployments_visible_to(user).values("pk"))
    if cluster:
        rows = rows.filter(cluster=cluster)
    if engine:
        rows = rows.filter(engine=engine)
    if source:
        rows = rows.filter(source=source)
    if before is not None:
        cursor = rows.filter(code=before).values("created_at", "pk").first()
        if cursor is None:
            raise NotFoundError("no such row of this export")
        rows = rows.filter(
            Q(created_at__lt=cursor["created_at"]) | Q(created_at=cursor["created_at"], pk__lt=cursor["pk"])
        )
    return rows.select_related("deployment", "analysis").order_by("-created_at", "-pk")


def calibration_groups(rows: Iterable[PlanMeasurement]) -> list[dict[str, Any]]:
    """Per cluster, engine, GPU and figure: how many measurements, the median measured / planned
    ratio (what a calibration scales the planner's figure by), and how many were worse than planned."""
    groups: dict[tuple[str, str, str, str], list[PlanMeasurement]] = {}
    for row in rows:
        groups.setdefault((row.cluster, row.engine, row.gpu, row.figure), []).append(row)
    out = []
    for (cluster, engine, gpu, figure), members in sorted(groups.items()):
        ratios = [m.ratio for m in members if m.ratio is not None]
        out.append(
            {
                "cluster": cluster,
                "engine": engine,
                "gpu": gpu,
                "figure": figure,
                "n": len(ratios),
                "median_ratio": round(statistics.median(ratios), 4) if ratios else None,
                "worse": sum(1 for m in members if m.verdict == "worse"),
            }
        )
    return out


def plan_measurements_of(deployment: DeploymentRequest, limit: int = 30) -> list[PlanMeasurement]:
    """The request page's rows: the newest measured-vs-planned figures of one request."""
    return list(
        PlanMeasurement.objects.filter(deployment=deployment).select_related("analysis").order_by("-created_at")[:limit]
    )


# The newest canary analyses a plan is calibrated from (each a measurement: planner.measured): enough for any
# median, and a bound on the read however many deployments a team has run on a cluster.
MEASURED_ANALYSES = 200


def measured_evidence_for(
    *, team_id: int, cluster: str, gpu: str, engine: str, release_line: str
) -> MeasuredEvidence | None:
    """The team's canary and fleet measurements of TPOT and TTFT on `cluster` (its name, as the rows hold it), of
    this GPU, engine (the planner's profile name: vllm, sglang, trtllm) and release line, as the planner takes
    them (planner.measured; None when there is none). One measurement per canary analysis: the mean of its rows'
    catalog ratios (its own window and the fleet re-checks of the deployment it became, averaged in the database
    however long that fleet has run). Only the team's own requests count: a row's cluster is the name its
    pipeline gave the canary, which no other team's plan may take on trust, and the rows are the team's as the
    calibration export scopes them."""
    spellings = [
        spelling
        for served in SERVING_ENGINES
        if served.profile_key == engine
        for spelling in (served.name, *served.aliases)
    ]
    grouped = list(
        PlanMeasurement.objects.filter(
            deployment__team_id=team_id,
            cluster=cluster,
            gpu=gpu,
            engine__in=spellings,
            figure__in=list(MEASURED_FIGURES),
            source__in=[MeasurementSource.CANARY, MeasurementSource.FLEET],
            analysis__isnull=False,
            catalog_ratio__gt=0,
        )
        .values("analysis_id", "figure", "engine_version")
        .annotate(ratio=Avg("catalog_ratio"), newest=Max("created_at"))
        .order_by("-newest")[: MEASURED_ANALYSES * len(MEASURED_FIGURES)]
    )
    shapes = dict(
        CanaryAnalysis.objects.filter(pk__in={row["analysis_id"] for row in grouped}).values_list("pk", "envelope")
    )
    ratios = []
    for row in grouped:
        try:
            release = release_numbers(str(row["engine_version"] or ""))
        except ValueError:  # no version recorded (or none the planner reads): its release line is unknown
            continue
        envelope = shapes.get(row["analysis_id"]) or {}
        tp, pp = envelope.get("tp"), envelope.get("pp") or 1
        if f"{release[0]}.{release[1]}" != release_line or not isinstance(tp, int) or not isinstance(pp, int):
            continue  # another release line; or a layout not stated, so no replica shape to compare
        ratios.append(LatencyRatio(row["figure"], float(row["ratio"]), max(tp, 1) * max(pp, 1)))
    if not ratios:
        return None
    return MeasuredEvidence(
        where=f"cluster {cluster}", gpu=gpu, engine=engine, release_line=release_line, ratios=tuple(ratios)
    )
