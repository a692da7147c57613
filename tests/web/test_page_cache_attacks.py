"""The web UI's page cache (governance/web/pagecache.py) under attack and careless use: another
person's or another database's page, a page for a role or team the viewer lost, a flood of distinct
URLs evicting the throttle counters or filling the cache, CSRF tokens and stored text that looks
like the marker, error pages.

Transactional (each request commits), as production requests are: inside a test's transaction the
page cache stays off."""

from __future__ import annotations

import re
import secrets
from typing import Any

import psycopg
import pytest
from django.contrib.auth.models import Group
from django.core.cache import caches
from django.db import connection
from django.test import Client

from governance.core.roles import Role
from governance.deployments.models import DeploymentRequest
from governance.web import pagecache
from tests.conftest import Personas
from tests.deployments.conftest import Flow
from tests.web.test_page_cache import CSRF_FIELD, _browser, _get

pytestmark = pytest.mark.skipif(connection.vendor != "postgresql", reason="the page cache keys on PostgreSQL")

LOCMEM = "django.core.cache.backends.locmem.LocMemCache"


@pytest.fixture(autouse=True)
def _empty_caches(settings: Any) -> None:
    for alias in settings.CACHES:
        caches[alias].clear()


# --- who sees a cached page -------------------------------------------------------------------


def test_a_lost_role_team_or_account_is_never_served_the_cached_page(
    transactional_db: None, personas: Personas, flow: Flow, artifacts: Any
) -> None:
    code = flow.to_review(artifacts["kimi"])
    legal, requester = _browser(personas.legal), _browser(personas.requester)
    _get(legal, "/audit/")
    assert _get(legal, "/audit/")[1] == 0  # cached
    personas.legal.groups.remove(Group.objects.get(name=Role.LEGAL_REVIEWER))
    assert legal.get("/audit/").status_code == 403
    assert legal.get("/").status_code == 403
    # A team's requests leave the list of someone who left the team.
    assert code in _get(requester, "/requests/")[0]
    assert _get(requester, "/requests/")[1] == 0
    personas.team.members.remove(personas.requester)
    page, queries = _get(requester, "/requests/")
    assert queries > 0
    assert code not in page
    # A deactivated account is signed out, cached page or not.
    _get(requester, "/licenses/")
    type(personas.requester).objects.filter(pk=personas.requester.pk).update(is_active=False)
    response = requester.get("/licenses/")
    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/")


def test_logging_out_and_another_person_signing_in_on_the_same_browser(
    transactional_db: None, personas: Personas
) -> None:
    browser = _browser(personas.legal)
    page, _ = _get(browser, "/")
    _get(browser, "/")  # cached now
    token = CSRF_FIELD.findall(page)[0]
    assert browser.post("/accounts/logout/", {"csrfmiddlewaretoken": token}).status_code == 302
    assert browser.get("/").status_code == 302  # to the login page
    browser.force_login(personas.engineer)
    theirs, queries = _get(browser, "/")
    assert queries > 0
    assert f'<span class="who">{personas.engineer.username}</span>' in theirs
    assert personas.legal.username not in re.findall(r'<span class="who">([^<]+)</span>', theirs)


def test_the_accept_language_header_alone_picks_the_page_s_language(transactional_db: None, personas: Personas) -> None:
    client = _browser(personas.requester)
    english, _ = _get(client, "/licenses/")
    assert '<html lang="en">' in english
    response = client.get("/licenses/", HTTP_ACCEPT_LANGUAGE="zh-Hans,zh;q=0.9")
    assert '<html lang="zh-hans">' in response.content.decode()
    assert "Accept-Language" in response["Vary"]


# --- CSRF -------------------------------------------------------------------------------------


def test_a_fresh_session_served_a_cached_page_gets_its_own_csrf_cookie(
    transactional_db: None, personas: Personas
) -> None:
    rendered = _browser(personas.requester).get("/verify/")
    fresh = _browser(personas.requester)  # signed in, no CSRF cookie yet
    response = fresh.get("/verify/")
    assert response.status_code == 200
    # The same headers as the rendered page (the middleware's: CSP, framing, Vary, no store).
    assert {k for k, _ in response.items() if k != "X-Request-ID"} == {
        k for k, _ in rendered.items() if k != "X-Request-ID"
    }
    cookie = response.cookies.get("csrftoken")
    assert cookie is not None
    assert cookie.value
    body = response.content.decode()
    tokens = set(CSRF_FIELD.findall(body)) | set(re.findall(r'"X-CSRFToken": "([^"]+)"', body))
    assert len(tokens) == 1
    assert len(tokens.pop()) == 64  # Django's masked token, not a 32-character marker


def test_stored_text_that_looks_like_a_marker_is_shown_as_it_is(
    transactional_db: None, personas: Personas, flow: Flow, artifacts: Any
) -> None:
    code = flow.to_review(artifacts["kimi"])
    lookalike = secrets.token_hex(16)
    DeploymentRequest.objects.filter(code=code).update(product_name=lookalike)
    first, second = _browser(personas.requester), _browser(personas.requester)
    assert lookalike in _get(first, f"/requests/{code}/")[0]
    page, queries = _get(second, f"/requests/{code}/")
    assert queries == 0
    assert lookalike in page


# --- what is kept -----------------------------------------------------------------------------


def test_head_requests_and_error_pages_are_answered_and_not_kept(
    transactional_db: None, personas: Personas, monkeypatch: pytest.MonkeyPatch
) -> None:
    client = _browser(personas.requester)
    head = client.head("/licenses/")
    assert head.status_code == 200
    assert head.content == b""
    assert _get(client, "/licenses/")[1] > 0  # the HEAD kept nothing
    missing = "/requests/00000000-0000-0000-0000-000000000000/"
    assert client.get(missing).status_code == 404
    assert client.get(missing).status_code == 404
    # An exception while the marker is set: a 500, and the next page is whole again.
    from governance.web import selectors

    def broken() -> None:
        raise RuntimeError("boom")

    monkeypatch.setattr(selectors, "license_catalog", broken)
    client.raise_request_exception = False
    assert client.get("/licenses/?broken").status_code == 500
    monkeypatch.undo()
    page, _ = _get(client, "/verify/")
    assert len(CSRF_FIELD.findall(page)[0]) == 64


# --- problems found ---------------------------------------------------------------------------


def test_two_databases_on_one_server_never_share_pages(
    transactional_db: None, personas: Personas, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Transaction ids, and so pg_current_snapshot(), belong to the whole PostgreSQL server: two
    deployments whose databases share a server (staging and production, review apps) see the same
    snapshot at the same moment. If they also share a cache, the same user id on the same path
    would be served the other deployment's page."""
    params = connection.get_connection_params()
    params["dbname"] = "postgres"
    ours, other = connection.cursor(), psycopg.connect(**{k: v for k, v in params.items() if k != "cursor_factory"})
    try:
        for _attempt in range(200):
            ours.execute("SELECT pg_current_snapshot()::text")
            before = ours.fetchone()[0]
            theirs = other.execute("SELECT pg_current_snapshot()::text").fetchone()[0]  # type: ignore[index]
            ours.execute("SELECT pg_current_snapshot()::text")
            if ours.fetchone()[0] == before:  # nothing committed anywhere in between
                assert theirs == before  # another database, the same snapshot
                break
        else:
            pytest.skip("the server never stood still for three reads")
    finally:
        ours.close()
        other.close()
    client = _browser(personas.requester)
    _get(client, "/licenses/")
    assert _get(client, "/licenses/")[1] == 0
    monkeypatch.setattr(pagecache, "database_identity", lambda: "another database on the same server")
    assert _get(client, "/licenses/")[1] > 0


def test_a_flood_of_page_views_does_not_evict_the_throttle_counters(
    transactional_db: None, personas: Personas, flow: Flow, artifacts: Any, settings: Any
) -> None:
    """Without CACHE_URL every cache is this process's memory, which LocMemCache bounds at 300
    entries by dropping the oldest. The sign-off throttle (a password is re-entered) keeps its
    counters there: page views of distinct URLs must not push them out."""
    settings.CACHES = {alias: {"BACKEND": LOCMEM, "LOCATION": f"flood-{alias}"} for alias in settings.CACHES}
    settings.SESSION_ENGINE = "django.contrib.sessions.backends.db"
    settings.SIGNOFF_RATE = "2/h"
    code = flow.to_review(artifacts["kimi"])
    browser = Client()
    browser.force_login(personas.legal)
    form = {"role": "legal", "verdict": "approve", "evidence_digest": "0" * 64, "password": "guess"}
    statuses = [browser.post(f"/requests/{code}/review", form).status_code for _ in range(3)]
    assert statuses == [403, 403, 429]  # a wrong password, twice; then throttled
    for n in range(320):
        assert browser.get(f"/verify/?n={n}").status_code == 200
    assert browser.post(f"/requests/{code}/review", form).status_code == 429


def test_one_person_cannot_fill_the_cache(
    transactional_db: None, personas: Personas, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each distinct query string is a page of its own: one person's pages kept per minute are
    bounded, and the pages past that are rendered, not kept."""
    monkeypatch.setattr(pagecache, "PAGES_PER_PERSON", 3)
    client = _browser(personas.requester)
    for n in range(3):
        _get(client, f"/licenses/?n={n}")
    assert _get(client, "/licenses/?n=0")[1] == 0  # kept
    _get(client, "/licenses/?n=3")
    assert _get(client, "/licenses/?n=3")[1] > 0  # past the bound: rendered each time
    other = _browser(personas.legal)
    assert _get(other, "/licenses/?n=3")[1] > 0
    assert _get(other, "/licenses/?n=3")[1] == 0  # another person's bound


def test_a_very_large_page_is_not_kept(
    transactional_db: None, personas: Personas, monkeypatch: pytest.MonkeyPatch
) -> None:
    client = _browser(personas.requester)
    size = len(client.get("/licenses/").content)
    monkeypatch.setattr(pagecache, "MAX_PAGE_BYTES", size // 2)
    _get(client, "/licenses/?large")
    assert _get(client, "/licenses/?large")[1] > 0
    monkeypatch.setattr(pagecache, "MAX_PAGE_BYTES", size * 2)
    _get(client, "/licenses/?small")
    assert _get(client, "/licenses/?small")[1] == 0
