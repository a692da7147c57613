import pytest
import yaml
from django.contrib.auth.models import Group
from openapi_spec_validator import validate
from rest_framework import serializers
from rest_framework.test import APIClient, APIRequestFactory
from rest_framework.views import APIView

from governance.core.errors import ApplicationError
from governance.core.roles import Role
from governance.core.tokens import api_token_issue
from tests.conftest import Personas


@pytest.mark.django_db
def test_every_role_exists_as_a_group() -> None:
    assert set(Group.objects.values_list("name", flat=True)) >= set(Role.values)
    assert set(Role.values) == {"requester", "legal_reviewer", "engineering_reviewer", "auditor", "admin"}


@pytest.mark.django_db
def test_schema_is_valid_openapi() -> None:
    response = APIClient().get("/api/v1/schema/")
    assert response.status_code == 200
    document = yaml.safe_load(response.content)
    assert document["openapi"].startswith("3.")
    validate(document)
    assert "/api/v1/me" in document["paths"]


@pytest.mark.django_db
def test_swagger_ui_is_served_from_vendored_assets() -> None:
    response = APIClient().get("/api/docs/")
    assert response.status_code == 200
    html = response.content.decode()
    assert "swagger-ui" in html
    assert "cdn" not in html.lower()


def test_me_refuses_anonymous(db: None) -> None:
    response = APIClient().get("/api/v1/me")
    assert response.status_code in (401, 403)
    assert set(response.json()) == {"message", "extra"}


def test_me_refuses_an_outsider_without_role(personas: Personas) -> None:
    response = personas.client(personas.outsider).get("/api/v1/me")
    assert response.status_code == 403
    assert "role" in response.json()["message"]


def test_me_shows_roles_and_teams(personas: Personas) -> None:
    response = personas.client(personas.requester).get("/api/v1/me")
    assert response.status_code == 200
    assert response.json() == {"username": "req", "roles": ["requester"], "teams": ["platform"]}


def test_bearer_token_authenticates_and_is_hashed_at_rest(personas: Personas) -> None:
    issued = api_token_issue(user=personas.auditor, name="ci")
    assert issued.clear_text not in (issued.token.digest, issued.token.prefix)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {issued.clear_text}")
    assert client.get("/api/v1/me").json()["username"] == "aud"
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {issued.clear_text}x")
    response = client.get("/api/v1/me")
    assert response.status_code == 401
    assert response.json()["message"] == "Invalid, expired or revoked token."


class _EchoInput(serializers.Serializer):
    name = serializers.CharField()
    count = serializers.IntegerField(min_value=0)


class _EchoApi(APIView):
    authentication_classes: list[type] = []
    permission_classes: list[type] = []

    def post(self, request):
        serializer = _EchoInput(data=request.data)
        serializer.is_valid(raise_exception=True)
        if serializer.validated_data["name"] == "conflict":
            raise ApplicationError("name is taken", extra={"field": "name"}, status=409)
        raise RuntimeError("boom")


def test_validation_error_names_the_field() -> None:
    request = APIRequestFactory().post("/x", {"name": "a", "count": -1}, format="json")
    response = _EchoApi.as_view()(request)
    assert response.status_code == 400
    assert "count" in response.data["message"]
    assert list(response.data["extra"]["fields"]) == ["count"]


def test_application_error_and_unexpected_error_share_the_shape() -> None:
    request = APIRequestFactory().post("/x", {"name": "conflict", "count": 1}, format="json")
    response = _EchoApi.as_view()(request)
    assert response.status_code == 409
    assert response.data == {"message": "name is taken", "extra": {"field": "name"}}
    request = APIRequestFactory().post("/x", {"name": "other", "count": 1}, format="json")
    response = _EchoApi.as_view()(request)
    assert response.status_code == 500
    assert "boom" not in str(response.data)
    assert set(response.data) == {"message", "extra"}


@pytest.mark.django_db
def test_request_id_is_echoed_and_generated() -> None:
    client = APIClient()
    response = client.get("/healthz", HTTP_X_REQUEST_ID="abc12345-trace")
    assert response["X-Request-ID"] == "abc12345-trace"
    response = client.get("/healthz", HTTP_X_REQUEST_ID="bad id\n")
    assert response["X-Request-ID"] != "bad id\n"
    assert len(response["X-Request-ID"]) == 32
