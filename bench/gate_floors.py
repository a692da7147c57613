"""Bench-only URLs and settings for bench/gate.py's floors: what a token-authenticated DRF POST
costs when it does the least a fail-closed decision log must do, measured beside the gate.

- `POST /bench/floor/write`: parse the JSON body and commit it as one row (one INSERT, its own
  transaction, as the gate's write is): the floor of any endpoint that stores before answering.
- `POST /bench/floor/audit`: the same body as one audit event (`audit_record`: the chain append,
  one prepared statement): the floor of any endpoint that must be in the audit trail first.

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


def create_table() -> None:
    with connection.cursor() as cursor:
        cursor.execute(f"CREATE TABLE IF NOT EXISTS {TABLE} (id bigserial PRIMARY KEY, body jsonb NOT NULL)")


urlpatterns = [
    path("bench/floor/write", FloorWrite.as_view()),
    path("bench/floor/audit", FloorAudit.as_view()),
    path("", include("governance.urls")),
]
