"""Issue 43: a name printed in the signed approval packet (product, artifact, team, target cluster, a
derivative's planned name, a licensor's permission file) refuses Unicode control (Cc) and format
(Cf) characters, so a bidi override or a zero-width character cannot make the signed text read
otherwise than what is stored. One validator (governance.core.names) serves every serializer and
form that takes such a name; each refusal is a 400 naming the field."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.exceptions import ValidationError
from django.test import Client

from governance.artifacts.models import ModelArtifact
from governance.core.models import Team
from governance.core.names import printed_name_problem, validate_printed_name
from governance.deployments.models import DeploymentRequest
from governance.web.forms import TeamForm
from governance.web.forms.wizard import WizardForm
from tests.conftest import Personas
from tests.deployments import conftest as deployment_fixtures
from tests.deployments.conftest import FACTS, SERVING, Flow, digest_of

catalog, artifacts, flow = deployment_fixtures.catalog, deployment_fixtures.artifacts, deployment_fixtures.flow

HIDDEN = {
    "\u202e": "U+202E",  # RIGHT-TO-LEFT OVERRIDE: "Acme\u202etnatsissA" prints as "AcmeAssistant" reversed
    "\u2066": "U+2066",  # LEFT-TO-RIGHT ISOLATE
    "\u200b": "U+200B",  # ZERO WIDTH SPACE
    "\u200d": "U+200D",  # ZERO WIDTH JOINER
    "\ufeff": "U+FEFF",  # ZERO WIDTH NO-BREAK SPACE (a BOM)
    "\u00ad": "U+00AD",  # SOFT HYPHEN
    "\x07": "U+0007",  # BEL (Cc)
    "\n": "U+000A",  # a line break in a one-line name (Cc)
    "\x85": "U+0085",  # NEXT LINE (Cc)
}
PRINTABLE = ["Acme Assistant", "Café Ünïcode-2 (EU)", "北京 助手", "مساعد أكمي", "Acme 🚀", "O'Brien & Co."]


@pytest.mark.parametrize("character", list(HIDDEN))
def test_a_control_or_format_character_is_refused_naming_it(character: str) -> None:
    problem = printed_name_problem(f"Acme{character}Assistant")
    assert problem is not None
    assert HIDDEN[character] in problem
    with pytest.raises(ValidationError) as raised:
        validate_printed_name(f"Acme{character}Assistant")
    assert HIDDEN[character] in str(raised.value)


@pytest.mark.parametrize("name", PRINTABLE)
def test_printable_names_in_any_script_pass(name: str) -> None:
    assert printed_name_problem(name) is None
    validate_printed_name(name)


BIDI = "Acme\u202etnatsissA"


def _fields(response: Any) -> dict[str, Any]:
    body = response.json()
    assert response.status_code == 400, body
    return dict(body["extra"]["fields"])


def test_the_deployment_api_refuses_hidden_characters_in_printed_names(
    flow: Flow, personas: Personas, artifacts: dict[str, ModelArtifact]
) -> None:
    client = flow.client(personas.requester)
    body = {
        "artifact": str(artifacts["apache"].code),
        "product_name": "Acme Assistant",
        "environments": ["production"],
        "facts": FACTS,
        "serving_plan": SERVING,
    }
    for change, field in (
        ({"product_name": BIDI}, "product_name"),
        ({"target_cluster": "gpu\u200bfarm"}, "target_cluster"),
        (
            {"facts": {**FACTS, "derivative": {"kind": "fine_tune", "distribution": "public", "name": BIDI}}},
            "facts.derivative.name",
        ),
    ):
        fields = _fields(client.post("/api/v1/deployments/", {**body, **change}, format="json"))
        assert field in fields, fields
        assert "U+" in str(fields[field]), fields
    assert not DeploymentRequest.objects.exists()
    code = flow.create(artifacts["apache"])["code"]
    fields = _fields(client.patch(f"/api/v1/deployments/{code}", {"product_name": BIDI}, format="json"))
    assert "product_name" in fields
    assert DeploymentRequest.objects.get(code=code).product_name == "Acme Assistant"


def test_the_artifact_api_refuses_hidden_characters_in_its_name(personas: Personas, catalog: None) -> None:
    body = {
        "name": "Qwen3\u202e-30B",
        "source_repo": "org/Qwen3-30B",
        "revision": "abc123",
        "weights_digest": digest_of("bidi"),
        "license": "apache-2.0",
        "architecture_key": "qwen3-30b-a3b",
    }
    fields = _fields(personas.client(personas.requester).post("/api/v1/artifacts", body, format="json"))
    assert "name" in fields, fields
    assert not ModelArtifact.objects.filter(weights_digest=digest_of("bidi")).exists()


def test_a_team_name_with_hidden_characters_is_shown_on_the_form(personas: Personas) -> None:
    admin = Client()
    admin.force_login(personas.admin)
    refused = admin.post("/teams/new", {"name": "infer\u202eence"})
    assert refused.status_code == 400
    assert "U+202E" in refused.content.decode()
    assert not Team.objects.filter(name__contains="\u202e").exists()
    assert not TeamForm({"name": "infer\u200bence"}).is_valid()


@pytest.mark.parametrize("field", ["product_name", "new_name", "derivative_name"])
def test_the_wizard_refuses_hidden_characters_in_the_names_it_takes(field: str) -> None:
    with pytest.raises(ValidationError):
        WizardForm.base_fields[field].clean(BIDI)
    assert WizardForm.base_fields[field].clean("Acme Assistant") == "Acme Assistant"
