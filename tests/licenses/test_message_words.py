"""Finding messages in words: no Python repr of an assumed value ("None", "True"), no "USD unknown"."""

from __future__ import annotations

from typing import Any

import pytest

from governance.licenses.facts import CONSERVATIVE_DEFAULTS
from tests.deployments.conftest import catalog  # noqa: F401  (fixture)
from tests.licenses.helpers import BASE_FACTS


def _evaluate(client: Any, license_key: str, facts: dict[str, Any]) -> list[dict[str, Any]]:
    response = client.post("/api/v1/licenses/evaluate", {"license": license_key, "facts": facts}, format="json")
    assert response.status_code == 200, response.json()
    return list(response.json()["findings"])


@pytest.mark.usefixtures("catalog")
def test_assumed_facts_are_said_in_words(personas: Any) -> None:
    findings = _evaluate(personas.client(personas.legal), "kimi-k2-modified-mit", {"use_case": "external_commercial"})
    assumed = [f["message"] for f in findings if f["code"] == "facts.assumed"]
    assert len(assumed) == len(CONSERVATIVE_DEFAULTS) - 1
    for message in assumed:
        for repr_ in ("None", "True", "False", "{'", "[]"):
            assert repr_ not in message, message
    revenue = next(m for m in assumed if m.startswith("monthly_revenue"))
    assert "not stated: every revenue threshold counts as crossed" in revenue


@pytest.mark.usefixtures("catalog")
def test_an_unknown_revenue_is_not_usd_unknown(personas: Any) -> None:
    facts = {k: v for k, v in BASE_FACTS.items() if k != "monthly_revenue"}
    findings = _evaluate(personas.client(personas.legal), "kimi-k2-modified-mit", facts)
    messages = " ".join(f["message"] for f in findings)
    assert "USD unknown" not in messages
    assert "monthly revenue not stated" in messages
