"""The wizard takes what the planner CLI takes: a GPU outside the catalog (the fields of
--gpu-spec, pasted as JSON) and a pasted config.json; a bad paste is shown on its own input
naming the bad field, never as a 500 or only at the top of the form."""

from __future__ import annotations

import json
import re
from html import unescape
from typing import Any

from django.test import Client

from governance.deployments.models import DeploymentRequest
from tests.conftest import Personas
from tests.deployments.test_custom_gpu import SPEC
from tests.deployments.test_pasted_config import QWEN
from tests.web.test_wizard_teams import FORM


def _client(personas: Personas) -> Client:
    client = Client()
    client.force_login(personas.requester)
    return client


def _error_of(page: str, field: str) -> str:
    """The error text shown with one input (its described-by error element)."""
    found = re.search(rf'<ul class="errorlist" id="id_{field}_errors">(.*?)</ul>', page, flags=re.S)
    return unescape(found.group(1)) if found else ""


def test_a_custom_gpu_request_from_the_wizard(personas: Personas, artifacts: Any) -> None:
    client = _client(personas)
    page = client.get("/requests/new").content.decode()
    assert 'name="gpu_spec"' in page
    form = {**FORM, "artifact": str(artifacts["apache"].code), "gpu": "", "gpu_spec": json.dumps(SPEC)}
    made = client.post("/requests/new", form)
    assert made.status_code == 302, made.content.decode()[:3000]
    deployment = DeploymentRequest.objects.get()
    assert deployment.serving_plan["gpu"] == "lab-x2"
    assert deployment.serving_plan["gpu_spec"]["memory_mib"] == SPEC["memory_mib"]


def test_a_bad_gpu_spec_is_shown_on_its_input(personas: Personas, artifacts: Any) -> None:
    client = _client(personas)
    bad = {**SPEC, "memory_gb": 80}
    form = {**FORM, "artifact": str(artifacts["apache"].code), "gpu": "", "gpu_spec": json.dumps(bad)}
    refused = client.post("/requests/new", form)
    assert refused.status_code == 400
    error = _error_of(refused.content.decode(), "gpu_spec")
    assert "memory_gb" in error
    assert "hbm_bandwidth_gb_per_s" in error
    not_json = client.post("/requests/new", {**form, "gpu_spec": "{memory: 80"})
    assert not_json.status_code == 200  # the form's own check: not valid JSON
    assert "JSON" in _error_of(not_json.content.decode(), "gpu_spec")
    assert DeploymentRequest.objects.count() == 0


def test_a_pasted_config_missing_a_field_is_shown_on_the_config_input(personas: Personas, artifacts: Any) -> None:
    client = _client(personas)
    config = {k: v for k, v in QWEN.items() if k != "num_hidden_layers"}
    form = {
        **FORM,
        "new_name": "pasted",
        "new_source_repo": "acme/pasted",
        "new_revision": "1",
        "new_weights_digest": "sha256:" + "c" * 64,
        "new_license": "apache-2.0",
        "new_config": json.dumps(config),
    }
    refused = client.post("/requests/new", form)
    assert refused.status_code == 400
    assert "config.num_hidden_layers" in _error_of(refused.content.decode(), "new_config")
    made = client.post("/requests/new", {**form, "new_config": json.dumps(QWEN)})
    assert made.status_code == 302, made.content.decode()[:3000]
    assert DeploymentRequest.objects.get().artifact.config == QWEN
