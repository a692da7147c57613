"""Authorization matrix of the web UI: every web URL x every persona x own / other team, from one
table, with the API matrix's world (tests/test_authorization_matrix.py). A persona outside
`allowed` is refused (a redirect to the login page when anonymous, else 403 or 404); one inside
gets past authorization. Nothing answers 5xx. A row may also name objects whose ids a page must
not show to some personas (`hidden`): the same restriction the API applies to the same person.
`test_every_web_url_has_a_row` fails when a page is added without rows."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver

from tests.test_authorization_matrix import (
    ADMIN,
    ANON,
    AUDITOR,
    ENG,
    LEGAL,
    OTHER_REQ,
    PERSONAS,
    REQ,
    ROLES,
    World,
    _auditor_verification,
    _ci_token,
    artifacts,
    catalog,
    each_row_rolled_back,
    flow,
    world,
)

__all__ = ["artifacts", "catalog", "flow", "world"]

REQUESTERS = frozenset({REQ, OTHER_REQ})
REVIEWERS = frozenset({LEGAL, ENG})
# Who may see a submitted request of the requester's team: that team, reviewers, auditors, admins.
SEES_OWN_REVIEW = frozenset({REQ, LEGAL, ENG, AUDITOR, ADMIN})
# A draft is its team's alone (and auditors' and admins').
SEES_OWN_DRAFT = frozenset({REQ, AUDITOR, ADMIN})


def _teams(world: World) -> None:
    world.ids["own_team"] = str(world.personas.team.code)
    world.ids["other_team"] = str(world.personas.other_team.code)


def _license_text(world: World) -> None:
    """A license text found in a checkpoint (legal, auditors and admins read them; legal classifies)."""
    from governance.licenses.services import license_text_keep

    kept = license_text_keep(text="A license nobody has classified yet.", sha256="0" * 64, path="LICENSE")
    world.ids["license_text"] = kept.fingerprint


def _lead(world: World) -> None:
    """The requester leads their own team (platform), not the other one (research)."""
    _teams(world)
    world.personas.team.leads.add(world.personas.requester)


# Who manages a team once the requester leads their own: admins, and that lead for their team only.
MANAGES_OWN_TEAM = frozenset({ADMIN, REQ})


@dataclass(frozen=True)
class WebRow:
    name: str  # URL name in the web namespace
    method: str
    path: str  # with {placeholders} from World.ids
    allowed: frozenset[str]
    data: dict[str, Any] = field(default_factory=dict)
    note: str = ""
    prepare: Callable[[World], None] | None = None
    # {id placeholder: personas who may see that object}: everyone else must not find it on the page
    hidden: dict[str, frozenset[str]] = field(default_factory=dict)

    @property
    def id(self) -> str:
        return f"{self.method} {self.name} {self.note}".strip()


ROWS: list[WebRow] = [
    WebRow("dashboard", "GET", "/", ROLES, hidden={"own_draft": SEES_OWN_DRAFT}),
    WebRow("requests", "GET", "/requests/", ROLES, hidden={"own_draft": SEES_OWN_DRAFT, "own_review": SEES_OWN_REVIEW}),
    WebRow("wizard", "GET", "/requests/new", REQUESTERS),
    WebRow("wizard", "POST", "/requests/new", REQUESTERS, {"step": "x"}, note="invalid form"),
    WebRow("wizard-preview", "POST", "/requests/new/preview", REQUESTERS, {"step": "x"}),
    WebRow("wizard-artifact", "GET", "/requests/new/artifact?artifact={own_artifact}", REQUESTERS,
           hidden={"own_artifact": frozenset({REQ})}),
    WebRow("artifact", "GET", "/artifacts/{own_artifact}/", frozenset({REQ, LEGAL, ENG, AUDITOR, ADMIN})),
    WebRow("artifact-parent", "POST", "/artifacts/{own_artifact}/parent", frozenset({REQ}), {"parent": "x"}),
    WebRow("deployment", "GET", "/requests/{own_review}/", SEES_OWN_REVIEW),
    WebRow("deployment", "GET", "/requests/{own_draft}/", SEES_OWN_DRAFT, note="draft"),
    WebRow("deployment-blockers", "GET", "/requests/{own_review}/blockers", SEES_OWN_REVIEW),
    WebRow("deployment-blockers", "GET", "/requests/{own_draft}/blockers", SEES_OWN_DRAFT, note="draft"),
    WebRow("deployment-evals", "GET", "/requests/{own_review}/evals", SEES_OWN_REVIEW),
    WebRow("deployment-evals", "GET", "/requests/{own_draft}/evals", SEES_OWN_DRAFT, note="draft"),
    WebRow("eval-create", "POST", "/requests/{own_review}/evals/new", frozenset({ENG, ADMIN}), {"scheme": "fp8"}),
    WebRow("deployment-submit", "POST", "/requests/{own_draft}/submit", frozenset({REQ})),
    WebRow("deployment-start-review", "POST", "/requests/{own_submitted}/start-review", REVIEWERS),
    WebRow("deployment-review", "POST", "/requests/{own_review}/review", REVIEWERS,
           {"verdict": "reject", "comment": "matrix", "password": "wrong"}),
    WebRow("waiver-grant", "POST", "/requests/{own_review}/waivers", frozenset({LEGAL}), {"finding": "x"}),
    WebRow("usage-report", "POST", "/requests/{own_review}/usage", frozenset({REQ}), {"month": "2026-11"}),
    WebRow("obligation-acknowledge", "POST", "/requests/{own_review}/obligations/{obligation}/acknowledge",
           frozenset({REQ}), {"how_met": "footer"}),
    WebRow("obligation-review", "POST", "/requests/{own_review}/obligations/{obligation}/review",
           frozenset({LEGAL}), {"accept": "1"}),
    WebRow("licenses", "GET", "/licenses/", ROLES),
    WebRow("license", "GET", "/licenses/llama-3.1/", ROLES),
    WebRow("license-diff", "GET", "/licenses/llama-3.1/diff", ROLES),
    WebRow("license-text", "GET", "/licenses/texts/{license_text}", frozenset({LEGAL, AUDITOR, ADMIN}),
           prepare=_license_text),
    WebRow("license-text-classify", "POST", "/licenses/texts/{license_text}/classify", frozenset({LEGAL}),
           {"license": "mit"}, prepare=_license_text),
    WebRow("clusters", "GET", "/clusters/", ROLES),
    WebRow("cluster-test", "POST", "/clusters/{cluster}/test", frozenset({ENG, ADMIN})),
    WebRow("cluster-discover", "POST", "/clusters/{cluster}/discover", frozenset({ENG, ADMIN})),
    WebRow("audit", "GET", "/audit/", frozenset({AUDITOR, ADMIN, LEGAL, ENG}),
           hidden={"own_draft": SEES_OWN_DRAFT}),
    WebRow("audit", "GET", "/audit/?object_id={own_draft}", frozenset({AUDITOR, ADMIN, LEGAL, ENG}),
           note="filtered by a draft", hidden={"own_draft": SEES_OWN_DRAFT}),
    WebRow("audit-report-csv", "GET", "/audit/report.csv", frozenset({AUDITOR, ADMIN})),
    WebRow("audit-report-pdf", "GET", "/audit/report.pdf", frozenset({AUDITOR, ADMIN})),
    WebRow("deployment-withdraw", "POST", "/requests/{own_draft}/withdraw", frozenset({REQ})),
    WebRow("packet-preview", "POST", "/requests/{own_review}/packet-preview", REVIEWERS),
    WebRow("tokens", "GET", "/tokens/", frozenset({ADMIN}), note="team leads too"),
    WebRow("token-revoke", "POST", "/tokens/{ci_token}/revoke", frozenset({ADMIN}), prepare=_ci_token),
    WebRow("teams", "GET", "/teams/", frozenset({ADMIN}), note="no lead", prepare=_teams),
    WebRow("teams", "GET", "/teams/", MANAGES_OWN_TEAM, note="a lead", prepare=_lead,
           hidden={"other_team": frozenset({ADMIN})}),
    WebRow("team-create", "POST", "/teams/new", frozenset({ADMIN}), {"name": "matrix"}, prepare=_lead),
    WebRow("team", "GET", "/teams/{own_team}/", MANAGES_OWN_TEAM, note="own team", prepare=_lead),
    WebRow("team", "GET", "/teams/{other_team}/", frozenset({ADMIN}), note="other team", prepare=_lead),
    WebRow("team-member-add", "POST", "/teams/{own_team}/members", MANAGES_OWN_TEAM, {"username": "outsider"},
           note="own team", prepare=_lead),
    WebRow("team-member-add", "POST", "/teams/{other_team}/members", frozenset({ADMIN}), {"username": "outsider"},
           note="other team", prepare=_lead),
    WebRow("team-member-remove", "POST", "/teams/{own_team}/members/remove", MANAGES_OWN_TEAM,
           {"username": "outsider"}, note="own team", prepare=_lead),
    WebRow("team-member-remove", "POST", "/teams/{other_team}/members/remove", frozenset({ADMIN}),
           {"username": "req2"}, note="other team", prepare=_lead),
    WebRow("team-lead-add", "POST", "/teams/{own_team}/leads", MANAGES_OWN_TEAM, {"username": "outsider"},
           note="own team", prepare=_lead),
    WebRow("team-lead-add", "POST", "/teams/{other_team}/leads", frozenset({ADMIN}), {"username": "req2"},
           note="other team", prepare=_lead),
    WebRow("team-lead-remove", "POST", "/teams/{own_team}/leads/remove", MANAGES_OWN_TEAM, {"username": "req"},
           note="own team", prepare=_lead),
    WebRow("team-lead-remove", "POST", "/teams/{other_team}/leads/remove", frozenset({ADMIN}), {"username": "req2"},
           note="other team", prepare=_lead),
    WebRow("verify", "GET", "/verify/", ROLES),
    WebRow("verify", "POST", "/verify/", ROLES, note="no file"),
    WebRow("verification", "GET", "/verify/{verification}/", frozenset({AUDITOR}), note="the uploader only",
           prepare=_auditor_verification),
]  # fmt: skip


def _shown(html: str) -> str:
    """What a page shows of its records: its main part less the forms (a filter form and the
    language switcher echo the query string, which names the object asked for)."""
    start = html.find("<main")
    return re.sub(r"<form\b.*?</form>", "", html[start:] if start >= 0 else html, flags=re.S)


def _call(world: World, row: WebRow, persona: str) -> tuple[int, str, str]:
    client = Client(raise_request_exception=False)
    user = world.user(persona)
    if user is not None:
        client.force_login(user)
    path = row.path.format(**world.ids)
    response = client.get(path) if row.method == "GET" else client.post(path, row.data)
    body = response.content.decode(errors="replace") if not getattr(response, "streaming", False) else ""
    return response.status_code, response.get("Location", ""), body


def _refused(status: int, location: str) -> bool:
    return status in (403, 404) or (status == 302 and location.startswith("/accounts/login"))


def _row_mismatches(world: World, row: WebRow) -> list[str]:
    order = sorted(PERSONAS, key=lambda persona: persona in row.allowed)  # refused first: allowed ones may change state
    if row.prepare is not None:
        row.prepare(world)
    wrong: list[str] = []
    for persona in order:
        status, location, body = _call(world, row, persona)
        if status >= 500:
            wrong.append(f"{persona}: {status}")
            continue
        if _refused(status, location) == (persona in row.allowed):
            wrong.append(
                f"{persona} got {status} {location} ({'allowed' if persona in row.allowed else 'must be refused'})"
            )
        if persona in row.allowed and status == 200:
            shown = _shown(body)
            for key, may_see in row.hidden.items():
                object_id = world.ids[key]
                if persona not in may_see and object_id[:8] in shown:
                    wrong.append(f"{persona} sees {key} {object_id}")
    return wrong


def test_web_authorization_matrix(world: World) -> None:
    assert each_row_rolled_back(world, ROWS, _row_mismatches) == {}


def _web_names(patterns: list[URLPattern | URLResolver], namespace: str = "") -> set[str]:
    names: set[str] = set()
    for pattern in patterns:
        if isinstance(pattern, URLResolver):
            names |= _web_names(pattern.url_patterns, pattern.namespace or namespace)
        elif namespace == "web" and pattern.name:
            names.add(pattern.name)
    return names


def test_every_web_url_has_a_row() -> None:
    assert _web_names(get_resolver().url_patterns) - {row.name for row in ROWS} == set()
    assert ANON in PERSONAS
