"""Authorization matrix: every API endpoint x every persona x own / other team, from one table.

Each ROW names an endpoint (by URL name), a method, the object it is called on and the personas
allowed. A persona outside `allowed` must be refused (401, 403 or 404); one inside must get
past authorization (anything but 401/403/404). Nothing may answer 5xx. `test_every_endpoint_has_a_row`
fails when an endpoint is added without rows. To add a dimension (e.g. token scopes), add
personas to PERSONAS and a column to the rows; the runner stays the same.

"own" objects belong to the requester's team; `other_requester` is a requester of another
team, so every row also checks the other-team case.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, Protocol, TypeVar

import pytest
from django.contrib.auth.models import User
from django.db import transaction
from django.urls import URLPattern, URLResolver, get_resolver
from rest_framework.test import APIClient

from governance.capacity.services import capacity_plan_request
from governance.deployments.models import DeploymentRequest
from governance.evaluations.evals import eval_run_request
from governance.evaluations.models import Cluster, ExecutorKind
from governance.evaluations.services import cluster_discover
from tests.calibration.test_startup_logs import vllm_log
from tests.conftest import Personas
from tests.deployments import conftest as deployment_fixtures
from tests.deployments.conftest import Flow
from tests.evaluations.conftest import locate

# The deployment tests' fixtures, used here too.
catalog, artifacts, flow = deployment_fixtures.catalog, deployment_fixtures.artifacts, deployment_fixtures.flow

ANON, OUTSIDER, REQ, OTHER_REQ, LEGAL, ENG, AUDITOR, ADMIN = (
    "anonymous",
    "outsider",
    "requester",
    "other_requester",
    "legal",
    "engineer",
    "auditor",
    "admin",
)
PERSONAS = (ANON, OUTSIDER, REQ, OTHER_REQ, LEGAL, ENG, AUDITOR, ADMIN)
ROLES = frozenset({REQ, OTHER_REQ, LEGAL, ENG, AUDITOR, ADMIN})  # every persona holding a role
REVIEWERS = frozenset({LEGAL, ENG})
REQUESTERS = frozenset({REQ, OTHER_REQ})
DENIED = {401, 403, 404}

PLAN_INPUT = {"model": "qwen3-30b-a3b", "precision": "fp8", "gpu": "h200", "max_model_len": 8192}
SERVING = {"engine": "vllm", "precision": "fp8", "gpu": "h200", "max_model_len": 32768, "concurrency": 4}


@dataclass
class World:
    """The objects rows are called on: built once per test, and each row runs in a savepoint rolled
    back afterwards (`each_row_rolled_back`), so every row sees the world as built."""

    personas: Personas
    flow: Flow
    ids: dict[str, str] = field(default_factory=dict)

    def user(self, persona: str) -> User | None:
        return None if persona == ANON else getattr(self.personas, persona if persona != ENG else "engineer")


@dataclass(frozen=True)
class Row:
    name: str  # URL name, as in governance/urls.py
    method: str
    path: str  # with {placeholders} from World.ids
    allowed: frozenset[str]
    body: dict[str, Any] | Callable[[World, str], dict[str, Any]] | None = None
    note: str = ""
    prepare: Callable[[World], None] | None = None  # makes objects only this row needs (costly ones)

    @property
    def id(self) -> str:
        return f"{self.method} {self.name} {self.note}".strip()


def _review_body(world: World, persona: str) -> dict[str, Any]:
    """A sign-off re-enters the caller's own password (refused personas are refused before it is checked)."""
    digest = world.flow.get(world.personas.legal, world.ids["own_review"])["evidence_digest"]
    user = world.user(persona)
    password = f"pw-{user.username}" if user is not None else "x"
    return {"verdict": "reject", "evidence_digest": digest, "comment": "matrix", "password": password}


def _signoff_body(world: World, persona: str) -> dict[str, Any]:
    """A rejection in the role the persona holds (legal by default), with the persona's own password."""
    digest = world.flow.get(world.personas.legal, world.ids["own_review"])["evidence_digest"]
    user = world.user(persona)
    role = "engineering" if persona == ENG else "legal"
    password = f"pw-{user.username}" if user is not None else "x"
    return {"role": role, "decision": "reject", "evidence_digest": digest, "password": password, "comment": "matrix"}


def _render_packet(world: World) -> None:
    from governance.approvals.services import packet_complete, packet_render_for_review

    deployment = DeploymentRequest.objects.get(code=world.ids["own_review"])
    packet = packet_render_for_review(deployment=deployment, actor=world.personas.legal)
    packet_complete(packet_id=packet.pk)  # the heavy worker's render, inline
    packet.refresh_from_db()
    world.ids["packet_sha"] = packet.pdf_sha256


def _auditor_verification(world: World) -> None:
    """An upload waiting for the heavy worker, by the auditor: only its uploader reads it."""
    from governance.approvals.models import VerificationJob

    job = VerificationJob.objects.create(
        requested_by=world.personas.auditor, upload=b"%PDF-1.7", upload_size=8, upload_sha256="0" * 64
    )
    world.ids["verification"] = str(job.code)


def _proposed_waiver(world: World) -> None:
    """A waiver of a blocker proposed by another legal reviewer: the matrix's legal persona may confirm it."""
    from datetime import timedelta

    from django.utils import timezone

    from governance.deployments.models import Waiver
    from tests.conftest import make_user

    waiver = Waiver.objects.create(
        request=DeploymentRequest.objects.get(code=world.ids["own_review"]),
        license_key="llama-3.1",
        finding_code="aup.prohibited_use",
        clause="AUP 2.a",
        severity="blocker",
        reason="matrix",
        expires_at=timezone.now() + timedelta(days=30),
        granted_by=make_user("legal-proposer", "legal_reviewer"),
        needs_confirmation=True,
        permission_name="permission.pdf",
        permission_size=3,
        permission_sha256="ab" * 32,
    )
    world.ids["waiver"] = str(waiver.code)


def _ci_token(world: World) -> None:
    from datetime import timedelta

    from django.utils import timezone

    from governance.gate.services import ci_token_issue

    token, _clear = ci_token_issue(
        actor=world.personas.admin,
        team=world.personas.team,
        name="matrix",
        expires_at=timezone.now() + timedelta(days=1),
    )
    world.ids["ci_token"] = str(token.code)


def _ci_token_body(world: World, persona: str) -> dict[str, Any]:
    from datetime import timedelta

    from django.utils import timezone

    return {"name": f"x-{persona}", "team": "platform", "expires_at": (timezone.now() + timedelta(days=30)).isoformat()}


def _quantize_run(world: World) -> None:
    from governance.artifacts.models import ModelArtifact
    from governance.quantization.services import quantize_run_request

    run = quantize_run_request(
        parent=ModelArtifact.objects.get(code=world.ids["own_artifact"]),
        cluster=Cluster.objects.get(code=world.ids["cluster"]),
        recipe_name="w4a16-rtn",
        derivative_name="Llama-matrix-w4a16",
        actor=world.personas.requester,
        model_path="/models/m",
        distribution="internal",
    )
    world.ids["quantize_run"] = str(run.code)
    assert run.job is not None
    world.ids["quantize_job"] = str(run.job.code)


def _license_text(world: World) -> None:
    """A text found in a checkpoint (issue 42): legal classifies it, auditors and admins read it."""
    from governance.licenses.services import license_text_keep

    kept = license_text_keep(text="Matrix License\n\nPermission is granted.\n", sha256="0" * 64, path="LICENSE")
    world.ids["license_text"] = kept.fingerprint


def _signature(world: World) -> None:
    """The artifact's model-signing bundle (its content is not what this matrix checks)."""
    from governance.artifacts.models import ArtifactSignature, ModelArtifact

    artifact = ModelArtifact.objects.get(code=world.ids["own_artifact"])
    ArtifactSignature.objects.get_or_create(
        artifact=artifact, defaults={"bundle": "{}", "bundle_sha256": "0" * 64, "signer_sha256": "0" * 64}
    )


def _calibration(world: World) -> None:
    from governance.calibration.services import calibration_run_request

    cluster = Cluster.objects.get(code=world.ids["cluster"])
    run = calibration_run_request(cluster=cluster, gpu="h200", model="qwen3-30b-a3b", actor=world.personas.engineer)
    world.ids["calibration"] = str(run.code)


def _canary(world: World) -> None:
    from governance.canary.models import CanaryAnalysis

    deployment = DeploymentRequest.objects.get(code=world.ids["own_review"])
    analysis = CanaryAnalysis.objects.create(deployment=deployment, digest="sha256:x", envelope={}, envelope_digest="e")
    world.ids["canary"] = str(analysis.code)


ROWS: list[Row] = [
    Row("me", "GET", "/api/v1/me", ROLES),
    Row("schema", "GET", "/api/v1/schema/", frozenset(PERSONAS)),
    Row("license-list", "GET", "/api/v1/licenses/", ROLES),
    Row("license-detail", "GET", "/api/v1/licenses/apache-2.0/", ROLES),
    Row("license-evaluate", "POST", "/api/v1/licenses/evaluate", ROLES, {"license": "apache-2.0", "facts": {}}),
    Row("planner-plan", "POST", "/api/v1/planner/plan", ROLES, PLAN_INPUT),
    Row("capacity-plan-create", "POST", "/api/v1/capacity/plans", ROLES, PLAN_INPUT),
    Row("capacity-plan-detail", "GET", "/api/v1/capacity/plans/{draft_plan}", frozenset({REQ, AUDITOR, ADMIN}),
        note="plan of own draft"),
    Row("capacity-plan-detail", "GET", "/api/v1/capacity/plans/{review_plan}", frozenset({REQ, LEGAL, ENG, AUDITOR, ADMIN}),
        note="plan of own request in review"),
    Row("capacity-plan-detail", "GET", "/api/v1/capacity/plans/{loose_plan}", frozenset({REQ, AUDITOR, ADMIN}),
        note="plan of no request, asked by requester"),
    Row("artifact-list", "GET", "/api/v1/artifacts", ROLES),
    Row("artifact-list", "POST", "/api/v1/artifacts", frozenset({REQ, OTHER_REQ}), {"name": "x"}),
    Row("artifact-share", "POST", "/api/v1/artifacts/{own_artifact}/share", frozenset({REQ}), {"team": "research"}),
    Row("artifact-detail", "GET", "/api/v1/artifacts/{own_artifact}", frozenset({REQ, LEGAL, ENG, AUDITOR, ADMIN})),
    Row("artifact-inspections", "GET", "/api/v1/artifacts/{own_artifact}/inspections",
        frozenset({REQ, LEGAL, ENG, AUDITOR, ADMIN}), note="as the artifact"),
    Row("artifact-signature", "GET", "/api/v1/artifacts/{own_artifact}/signature",
        frozenset({REQ, LEGAL, ENG, AUDITOR, ADMIN}), note="as the artifact", prepare=_signature),
    Row("license-text-list", "GET", "/api/v1/licenses/texts/", ROLES, note="filtered: legal, auditors, admins",
        prepare=_license_text),
    Row("license-text-detail", "GET", "/api/v1/licenses/texts/{license_text}", frozenset({LEGAL, AUDITOR, ADMIN}),
        prepare=_license_text),
    Row("license-text-classify", "POST", "/api/v1/licenses/texts/{license_text}/classify", frozenset({LEGAL}),
        {"license": "apache-2.0"}, prepare=_license_text),
    Row("deployment-list", "GET", "/api/v1/deployments/", ROLES | {OUTSIDER}),
    Row("deployment-list", "POST", "/api/v1/deployments/", frozenset({REQ, OTHER_REQ}), {"product_name": "x"}),
    Row("deployment-detail", "GET", "/api/v1/deployments/{own_draft}", frozenset({REQ, AUDITOR, ADMIN}), note="draft"),
    Row("deployment-detail", "GET", "/api/v1/deployments/{own_review}", frozenset({REQ, LEGAL, ENG, AUDITOR, ADMIN}),
        note="in review"),
    Row("deployment-detail", "PATCH", "/api/v1/deployments/{own_draft}", frozenset({REQ}), {"product_name": "Renamed"}),
    Row("deployment-submit", "POST", "/api/v1/deployments/{own_draft}/submit", frozenset({REQ})),
    Row("deployment-withdraw", "POST", "/api/v1/deployments/{own_draft}/withdraw", frozenset({REQ}),
        note="its requester (or a team lead)"),
    Row("deployment-start-review", "POST", "/api/v1/deployments/{own_submitted}/start-review", REVIEWERS),
    Row("deployment-review", "POST", "/api/v1/deployments/{own_review}/review", REVIEWERS, _review_body),
    Row("deployment-revoke", "POST", "/api/v1/deployments/{own_review}/revoke", frozenset({LEGAL, ADMIN}),
        {"reason": "matrix"}),
    Row("deployment-waivers", "POST", "/api/v1/deployments/{own_review}/waivers", frozenset({LEGAL}),
        {"license": "llama-3.1", "finding_code": "attribution.display", "reason": "matrix",
         "expires_at": "2099-01-01T00:00:00Z"}),
    Row("deployment-waiver-confirm", "POST", "/api/v1/deployments/{own_review}/waivers/{waiver}/confirm",
        frozenset({LEGAL}), note="a second legal reviewer", prepare=_proposed_waiver),
    Row("deployment-usage", "POST", "/api/v1/deployments/{own_review}/usage", frozenset({REQ}),
        {"month": "2026-10", "monthly_active_users": 10}),
    Row("obligation-ack", "POST", "/api/v1/deployments/{own_review}/obligations/{obligation}/acknowledge",
        frozenset({REQ}), {"how_met": "footer"}),
    Row("obligation-review", "POST", "/api/v1/deployments/{own_review}/obligations/{obligation}/review",
        frozenset({LEGAL}), {"accept": True}),
    Row("cluster-list", "GET", "/api/v1/clusters", ROLES),
    Row("cluster-test", "POST", "/api/v1/clusters/{cluster}/test", frozenset({ENG, ADMIN})),
    Row("cluster-discover", "POST", "/api/v1/clusters/{cluster}/discover", frozenset({ENG, ADMIN})),
    # a requester places only its own team's artifacts (the other team's requester: 403); others no role
    Row("artifact-location-create", "POST", "/api/v1/clusters/{cluster}/locations", frozenset({REQ, ENG, ADMIN}),
        lambda world, persona: {"artifact": world.ids["own_artifact"], "path": "/models/placed"}),
    Row("deployment-evals", "POST", "/api/v1/deployments/{own_review}/evals", frozenset({ENG, ADMIN}),
        {"cluster": "matrix", "kind": "screening", "scheme": "w8a8"}),
    Row("eval-detail", "GET", "/api/v1/evals/{draft_eval}", frozenset({REQ, AUDITOR, ADMIN}), note="eval of own draft"),
    Row("job-detail", "GET", "/api/v1/jobs/{draft_job}", frozenset({REQ, AUDITOR, ADMIN}), note="job of own draft"),
    Row("job-detail", "GET", "/api/v1/jobs/{discovery_job}", frozenset({ENG, AUDITOR, ADMIN}), note="discovery job"),
    Row("job-detail", "GET", "/api/v1/jobs/{quantize_job}", frozenset({REQ, ENG, AUDITOR, ADMIN}),
        prepare=_quantize_run, note="quantize job: its requester reads it, log included"),
    Row("job-cancel", "POST", "/api/v1/jobs/{review_job}/cancel", frozenset({ENG, ADMIN}), note="job of own review"),
    Row("job-cancel", "POST", "/api/v1/jobs/{draft_job}/cancel", frozenset({ADMIN}), note="job of own draft"),
    Row("audit-events", "GET", "/api/v1/audit/events", frozenset({LEGAL, ENG, AUDITOR, ADMIN})),
    Row("audit-checkpoints", "GET", "/api/v1/audit/checkpoints", frozenset({LEGAL, ENG, AUDITOR, ADMIN})),
    Row("audit-export-jsonl", "GET", "/api/v1/audit/events/export.jsonl", frozenset({AUDITOR, ADMIN})),
    Row("audit-export-csv", "GET", "/api/v1/audit/events/export.csv", frozenset({AUDITOR, ADMIN})),
    Row("audit-bundle", "GET", "/api/v1/audit/bundle", frozenset({AUDITOR, ADMIN})),
    Row("approval-verify", "POST", "/api/v1/approvals/verify", ROLES, note="any role verifies (docs/access.md)"),
    Row("approval-verification", "GET", "/api/v1/approvals/verifications/{verification}", frozenset({AUDITOR}),
        note="the uploader only", prepare=_auditor_verification),
    Row("quantize-recipes", "GET", "/api/v1/quantize/recipes", ROLES),
    Row("quantize-create", "POST", "/api/v1/quantize", REQUESTERS, {}, note="bad body: past authorization"),
    Row("quantize-detail", "GET", "/api/v1/quantize/{quantize_run}", frozenset({REQ, LEGAL, ENG, AUDITOR, ADMIN}),
        prepare=_quantize_run),
    Row("approval-ca", "GET", "/api/v1/approvals/ca.pem", frozenset(PERSONAS), note="public trust root"),
    Row("approval-crl", "GET", "/api/v1/approvals/crl", frozenset(PERSONAS), note="public CRL"),
    Row("approval-packet", "POST", "/api/v1/approvals/deployments/{own_review}/packet", frozenset({LEGAL, ENG, ADMIN}),
        note="render before signing"),
    Row("approval-packet", "GET", "/api/v1/approvals/deployments/{own_review}/packet", frozenset({REQ, LEGAL, ENG, AUDITOR, ADMIN}),
        prepare=_render_packet),
    Row("approval-packet-by-hash", "GET", "/api/v1/approvals/packets/{packet_sha}",
        frozenset({REQ, LEGAL, ENG, AUDITOR, ADMIN}), prepare=_render_packet),
    Row("approval-signoffs", "GET", "/api/v1/approvals/deployments/{own_review}/signoffs",
        frozenset({REQ, LEGAL, ENG, AUDITOR, ADMIN})),
    Row("approval-signoffs", "POST", "/api/v1/approvals/deployments/{own_review}/signoffs", REVIEWERS, _signoff_body),
    Row("gate-check", "POST", "/api/v1/gate/check", frozenset(), {"deployment": "x"}, note="bearer CI tokens only"),
    Row("gate-decision-list", "GET", "/api/v1/gate/decisions", ROLES, note="filtered to visible requests"),
    Row("deployment-gate-decisions", "GET", "/api/v1/deployments/{own_review}/gate-decisions",
        frozenset({REQ, LEGAL, ENG, AUDITOR, ADMIN})),
    Row("gate-token-list", "GET", "/api/v1/gate/tokens", ROLES | {OUTSIDER}, note="filtered to led teams"),
    Row("gate-token-list", "POST", "/api/v1/gate/tokens", frozenset({ADMIN}),
        _ci_token_body, note="admin or team lead"),
    Row("gate-token-revoke", "POST", "/api/v1/gate/tokens/{ci_token}/revoke", frozenset({ADMIN}), prepare=_ci_token),
    Row("cluster-calibrations", "GET", "/api/v1/clusters/{cluster}/calibrations", ROLES),
    Row("cluster-calibrations", "POST", "/api/v1/clusters/{cluster}/calibrations", frozenset({ENG, ADMIN}),
        {"gpu": "h200", "model": "qwen3-30b-a3b", "gpus": 1}),
    Row("calibration-detail", "GET", "/api/v1/calibrations/{calibration}", ROLES, prepare=_calibration),
    Row("cluster-startup-logs", "GET", "/api/v1/clusters/{cluster}/startup-logs", ROLES),
    Row("cluster-startup-logs", "POST", "/api/v1/clusters/{cluster}/startup-logs", frozenset({ENG, ADMIN}),
        {"text": vllm_log(60.0), "gpu": "h100-80g", "model": "llama-3.1-8b", "precision": "bf16"}),
    Row("gate-argo", "POST", "/api/v1/gate/argo", frozenset(), {"deployment": "x"}, note="bearer CI tokens only"),
    Row("gate-flagger", "POST", "/api/v1/gate/flagger/confirm-promotion", frozenset(), {"name": "x"},
        note="bearer CI tokens only"),
    Row("gate-github", "POST", "/api/v1/gate/github/protection-rule", frozenset(), {"event": {}},
        note="bearer CI tokens only"),
    Row("canary-analyses", "POST", "/api/v1/canary/analyses", frozenset({ENG, ADMIN}), {"deployment": "x"},
        note="or the pipeline's CI token"),
    Row("canary-analysis", "GET", "/api/v1/canary/analyses/{canary}", frozenset({REQ, LEGAL, ENG, AUDITOR, ADMIN}),
        prepare=_canary),
    Row("canary-analysis-decide", "POST", "/api/v1/canary/analyses/{canary}/decide", frozenset({ENG}),
        {"decision": "promote", "reason": "matrix"}, prepare=_canary),
    Row("canary-plan-measurements", "GET", "/api/v1/canary/plan-measurements", frozenset({ENG, AUDITOR, ADMIN}),
        note="filtered to visible requests"),
]  # fmt: skip


@pytest.fixture
def world(
    personas: Personas, flow: Flow, artifacts: dict[str, Any], tmp_path: Any, quantize_python: str, org_pki: Any
) -> World:
    """`org_pki`: the review and sign-off rows sign with a bare client, not through the flow."""
    world = World(personas, flow)
    apache = artifacts["llama"]  # a license with obligations (for the obligation rows)
    world.ids["own_artifact"] = str(apache.code)
    world.ids["own_draft"] = flow.create(apache)["code"]
    submitted = flow.create(apache)["code"]
    assert flow.post(personas.requester, submitted, "submit").status_code == 200
    world.ids["own_submitted"] = submitted
    world.ids["own_review"] = flow.to_review(apache)
    obligations = flow.get(personas.requester, world.ids["own_review"])["obligations"]
    world.ids["obligation"] = obligations[0]["code"]
    for key, deployment_key in (("draft_plan", "own_draft"), ("review_plan", "own_review")):
        deployment = DeploymentRequest.objects.get(code=world.ids[deployment_key])
        plan = capacity_plan_request(inputs=PLAN_INPUT, actor=personas.requester, subject=deployment)
        world.ids[key] = str(plan.code)
    world.ids["loose_plan"] = str(capacity_plan_request(inputs=PLAN_INPUT, actor=personas.requester).code)
    cluster = Cluster.objects.create(
        name="matrix",
        executor=ExecutorKind.LOCAL,
        remote_root=str(tmp_path / "runs"),
        model_roots=["/models"],
        python=quantize_python,  # quantize runs are accepted only where llm-compressor is
    )
    world.ids["cluster"] = str(cluster.code)
    locate(world.ids["own_review"], "matrix", "/models/m")
    for key, deployment_key in (("draft", "own_draft"), ("review", "own_review")):
        evaluation = eval_run_request(
            cluster=cluster,
            scheme="w8a8",
            model={"path": "/models/m"},
            actor=personas.engineer,
            deployment=DeploymentRequest.objects.get(code=world.ids[deployment_key]),
        )
        world.ids[f"{key}_eval"] = str(evaluation.code)
        assert evaluation.job is not None
        world.ids[f"{key}_job"] = str(evaluation.job.code)
    world.ids["discovery_job"] = str(cluster_discover(cluster=cluster, actor=personas.engineer).code)
    return world


def _call(world: World, row: Row, persona: str) -> int:
    client = APIClient()
    user = world.user(persona)
    if user is not None:
        # A fresh instance: Django caches permissions on the user object, and a row that changed a
        # membership is rolled back in the database only.
        client.force_authenticate(User.objects.get(pk=user.pk))
    path = row.path.format(**world.ids)
    body = row.body(world, persona) if callable(row.body) else row.body
    response = getattr(client, row.method.lower())(path, body or {}, format="json")
    return response.status_code


class _Identified(Protocol):
    @property
    def id(self) -> str: ...


RowT = TypeVar("RowT", bound=_Identified)


def each_row_rolled_back(
    world: World, rows: list[RowT], check: Callable[[World, RowT], list[str]]
) -> dict[str, list[str]]:
    """Run `check` on every row inside a savepoint that is rolled back afterwards, and return what
    was wrong, by row id. One world for all rows instead of one per row (building it is ~1 s, and
    the two matrices have 116 rows); a row's writes, and the ids its `prepare` added, are undone
    before the next row, as a fresh world would be. An exception in a row is that row's finding."""
    found: dict[str, list[str]] = {}
    built = dict(world.ids)
    for row in rows:
        try:
            with transaction.atomic():
                wrong = check(world, row)
                transaction.set_rollback(True)
        except Exception as exc:
            wrong = [f"raised {exc!r}"]
        world.ids = dict(built)
        if wrong:
            found[row.id] = wrong
    return found


def _row_mismatches(world: World, row: Row) -> list[str]:
    # Refused personas first: an allowed call may change state (submit, review) the others then see.
    order = sorted(PERSONAS, key=lambda persona: persona in row.allowed)
    if row.prepare is not None:
        row.prepare(world)
    wrong: list[str] = []
    for persona in order:
        status = _call(world, row, persona)
        if status >= 500:
            wrong.append(f"{persona}: {status}")
        elif (status in DENIED) == (persona in row.allowed):
            wrong.append(f"{persona} got {status} ({'allowed' if persona in row.allowed else 'must be refused'})")
    return wrong


def test_authorization_matrix(world: World) -> None:
    assert each_row_rolled_back(world, ROWS, _row_mismatches) == {}


def test_a_row_sees_the_world_as_built_whatever_the_rows_before_it_did(world: World) -> None:
    """The runner's isolation: a row that submits the draft and adds an id does not leak either."""
    draft = world.ids["own_draft"]
    submit = Row("deployment-submit", "POST", "/api/v1/deployments/{own_draft}/submit", frozenset({REQ}))

    def check(world: World, row: Row) -> list[str]:
        if not row.note:  # the first row: submits the draft and adds an id
            world.ids["added"] = "x"
            assert _call(world, row, REQ) == 200
            return []
        status = DeploymentRequest.objects.get(code=draft).status
        return [f"added={world.ids.get('added')}, status={status}"]

    found = each_row_rolled_back(world, [submit, replace(submit, note="after")], check)
    assert found == {"POST deployment-submit after": ["added=None, status=draft"]}


def _api_names(patterns: list[URLPattern | URLResolver], prefix: str = "") -> set[str]:
    names: set[str] = set()
    for pattern in patterns:
        if isinstance(pattern, URLResolver):
            names |= _api_names(pattern.url_patterns, prefix + str(pattern.pattern))
        elif prefix.startswith("api/v1/") and pattern.name:
            names.add(pattern.name)
    return names


def test_every_endpoint_has_a_row() -> None:
    assert _api_names(get_resolver().url_patterns) - {row.name for row in ROWS} == set()
