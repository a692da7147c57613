"""Bench-only URLs and settings for bench/gate.py's floors: what a token-authenticated DRF POST
costs when it does the least a fail-closed decision log must do, measured beside the gate.

- `POST /bench/floor/write`: parse the JSON body and commit it as one row (one INSERT, its own
  transaction, as the gate's write is): the floor of any endpoint that stores before answering.
- `POST /bench/floor/audit`: the same body as one audit event (`audit_record`: the chain append,
  one prepared statement): the floor of any endpoint that must be in the audit trail first.
- `POST /bench/gate-nopeek`, `POST /bench/gate-orm`: the gate check with its state read another
  way (`gate_variant`), so the hand-written read and the body peek are measured against what
  they replace, in the same run.

Never part of the product: only the bench's own server loads them (settings module
`bench.gate_settings`).
"""

from __future__ import annotations

from django.db import connection
from django.urls import include, path
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

TABLE = "bench_floor_write"


class FloorWrite(APIView):
    def post(self, request: Request) -> Response:
        with connection.cursor() as cursor:
            cursor.execute(f"INSERT INTO {TABLE} (body) VALUES (%s::jsonb) RETURNING id", [request.body.decode()])
            (row_id,) = cursor.fetchone()
        return Response({"id": row_id})


class FloorAudit(APIView):
    def post(self, request: Request) -> Response:
        from governance.audit.actions import AuditAction
        from governance.audit.services import audit_record

        event = audit_record(actor=request.user, action=AuditAction.GATE_DECISION, data=dict(request.data))
        return Response({"seq": event.seq})


def gate_variant(*, orm: bool) -> object:
    """The gate check (gate.api.GateCheckApi: same validation, decision, log and answer) with
    its state read another way, for bench/gate.py --variants, which decides whether the gate's
    hand-written read and body peek still earn their place (issue 27: >= 20% on a user-facing
    figure):

    - `orm=False` ("gate-nopeek"): no body peek; the token resolved on its own (core.tokens), then
      the gate's one SQL statement for the state: two reads instead of one.
    - `orm=True` ("gate-orm"): the token resolved on its own, then the request and its state through
      the ORM selectors the page and the sign-off use (deployments.selectors.
      deployment_readiness_state, approvals.selectors.approval_state: request, sign-offs, packet,
      verification), handed to the gate as if its statement had read them."""
    from governance.core.tokens import api_token_resolve
    from governance.gate.api import GateCheckApi, _deployment_code

    class View(GateCheckApi):
        def resolve_token(self, request: Request, credentials: str) -> object:
            token = api_token_resolve(credentials)
            code = _deployment_code(request) if orm and token is not None else None
            if code is not None:
                request._request.gate_preloaded = (code, _orm_state(code))  # type: ignore[attr-defined]
            return token

    return View.as_view()


def _orm_state(code: object) -> object:
    """The request with the columns the gate's statement adds (gate.selectors._GATE_SQL), from the
    ORM selectors."""
    from governance.approvals.selectors import approval_state
    from governance.deployments.models import DeploymentRequest
    from governance.deployments.readiness import SIGNING_ROLES
    from governance.deployments.selectors import deployment_readiness_state

    deployment = DeploymentRequest.objects.filter(code=code).prefetch_related("decisions").first()
    if deployment is None:
        return None
    signatures = deployment_readiness_state(deployment).signatures
    for role in SIGNING_ROLES:
        found = signatures.get(role)
        setattr(deployment, f"gate_{role}_digest", found.evidence_digest if found else None)
        setattr(deployment, f"gate_{role}_voided", int(found.voided) if found else 0)
    verified = approval_state(deployment)
    columns = {
        "approval_pdf_sha256": verified.pdf_sha256 if verified else None,
        "approval_packet_digest": verified.evidence_digest if verified else None,
        "approval_verified_sha256": verified.pdf_sha256 if verified else None,
        "approval_legal_valid": verified.legal_valid if verified else None,
        "approval_engineering_valid": verified.engineering_valid if verified else None,
        "approval_verified_digest": verified.evidence_digest if verified else None,
        "approval_verified_at": verified.verified_at if verified else None,
    }
    for name, value in columns.items():
        setattr(deployment, name, value)
    return deployment


def create_table() -> None:
    with connection.cursor() as cursor:
        cursor.execute(f"CREATE TABLE IF NOT EXISTS {TABLE} (id bigserial PRIMARY KEY, body jsonb NOT NULL)")


urlpatterns = [
    path("bench/floor/write", FloorWrite.as_view()),
    path("bench/floor/audit", FloorAudit.as_view()),
    path("", include("governance.urls")),
    # named as the gate's own URL so that a gate:check token reaches it (core.tokens.SCOPE_ENDPOINTS);
    # after the product's: the first of two equal namespaces is the one reverse() uses
    path(
        "bench/",
        include(
            (
                [
                    path("gate-orm", gate_variant(orm=True), name="gate-check"),
                    path("gate-nopeek", gate_variant(orm=False), name="gate-check"),
                ],
                "v1",
            )
        ),
    ),
]
