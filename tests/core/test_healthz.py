from unittest import mock

import pytest
from django.db import OperationalError
from django.test import Client


@pytest.mark.django_db
def test_healthz_ok_when_database_and_broker_answer() -> None:
    response = Client().get("/healthz")
    assert response.status_code == 200
    assert response.json()["checks"] == {"database": "ok", "broker": "ok"}


@pytest.mark.django_db
def test_healthz_503_when_database_unreachable() -> None:
    from django.db import connections

    with mock.patch.object(
        type(connections["default"]),
        "cursor",
        autospec=True,
        side_effect=OperationalError("connection refused"),
    ):
        response = Client().get("/healthz")
    assert response.status_code == 503
    body = response.json()
    assert body["status"] == "fail"
    assert body["checks"]["database"].startswith("fail")
    assert body["checks"]["broker"] == "ok"


@pytest.mark.django_db
def test_healthz_503_when_broker_unreachable(settings: object) -> None:
    from governance.celery import app

    with mock.patch.object(app, "connection_for_write", side_effect=ConnectionRefusedError("no broker")):
        response = Client().get("/healthz")
    assert response.status_code == 503
    assert response.json()["checks"]["broker"].startswith("fail")
