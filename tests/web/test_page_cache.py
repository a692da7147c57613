"""The web UI's page cache (governance/web/pagecache.py): a reload of a page nothing changed is
served without rendering, and never shows anything stale, another person's page, someone else's
CSRF token or a lost message.

These tests commit (transactional_db), as production requests do: inside a test's transaction
the page cache stays off, since a transaction's own writes do not change the database snapshot."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from governance.deployments.models import DeploymentRequest, ObligationItem
from governance.web import pagecache
from tests.conftest import Personas
from tests.deployments.conftest import FACTS, Flow

# Above USD 20M a month: Kimi K2's display obligation applies.
LARGE = {**FACTS, "monthly_revenue": {"amount": 25_000_000, "currency": "USD"}}

pytestmark = pytest.mark.skipif(connection.vendor != "postgresql", reason="the page cache keys on PostgreSQL")

SIGN_IN = re.compile(r'FROM "django_session"|FROM auth_user u WHERE u.id')
CSRF_FIELD = re.compile(r'name="csrfmiddlewaretoken" value="([^"]+)"')


@pytest.fixture(autouse=True)
def _empty_cache() -> None:
    pagecache.cache.clear()


def _get(client: Client, url: str) -> tuple[str, int]:
    """The page, and how many queries it took beyond signing the viewer in (the session, when not
    in a shared cache, and the user): 0 when it came from the page cache."""
    with CaptureQueriesContext(connection) as captured:
        response = client.get(url)
    assert response.status_code == 200, (url, response.status_code)
    own = [q["sql"] for q in captured if not SIGN_IN.search(q["sql"])]
    return response.content.decode(), len(own)


def _browser(user: User) -> Client:
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    return client


def _without_csrf(body: str) -> str:
    return CSRF_FIELD.sub("", re.sub(r'"X-CSRFToken": "[^"]+"', "", body))


def test_a_reload_of_an_unchanged_page_is_served_from_the_cache(
    transactional_db: None, personas: Personas, flow: Flow, artifacts: Any
) -> None:
    code = flow.to_review(artifacts["kimi"])
    client = _browser(personas.legal)
    for url in ("/", "/requests/", f"/requests/{code}/", "/licenses/", "/audit/"):
        first, rendered = _get(client, url)
        again, served = _get(client, url)
        assert rendered > 0, url
        assert served == 0, url  # the session and the user (with the snapshot), nothing else
        assert _without_csrf(again) == _without_csrf(first), url


def test_any_commit_shows_on_the_next_view(
    transactional_db: None, personas: Personas, flow: Flow, artifacts: Any
) -> None:
    code = flow.to_review(artifacts["kimi"], LARGE)
    requester = _browser(personas.requester)
    page, _ = _get(requester, f"/requests/{code}/")
    assert "footer of every page" not in page
    item = ObligationItem.objects.filter(request__code=code).first()
    assert item is not None
    # Another client (the API) writes: the cached page may not be served any more.
    response = flow.post(
        personas.requester, code, f"obligations/{item.code}/acknowledge", {"how_met": "footer of every page"}
    )
    assert response.status_code == 200
    page, queries = _get(requester, f"/requests/{code}/")
    assert "footer of every page" in page
    assert queries > 0
    # A write the page does not show still renders it again: keys name the snapshot, not tables.
    DeploymentRequest.objects.filter(code=code).update(product_name="Renamed Assistant")
    page, _ = _get(requester, f"/requests/{code}/")
    assert "Renamed Assistant" in page


def test_a_cached_page_carries_the_viewer_s_own_csrf_token(
    transactional_db: None, personas: Personas, flow: Flow, artifacts: Any
) -> None:
    code = flow.to_review(artifacts["kimi"], LARGE)
    first, second = _browser(personas.requester), _browser(personas.requester)  # two sessions, one person
    _get(first, f"/requests/{code}/")
    page, queries = _get(second, f"/requests/{code}/")
    assert queries == 0  # the same person's page, from the cache
    tokens = set(CSRF_FIELD.findall(page))
    assert len(tokens) == 1
    token = tokens.pop()
    assert f'"X-CSRFToken": "{token}"' in page
    item = ObligationItem.objects.filter(request__code=code).first()
    assert item is not None
    # The token from the cached page works for its own session, and only there.
    url = f"/requests/{code}/obligations/{item.code}/acknowledge"
    assert first.post(url, {"how_met": "on the box", "csrfmiddlewaretoken": token}).status_code == 403
    response = second.post(url, {"how_met": "on the box", "csrfmiddlewaretoken": token})
    assert response.status_code == 302
    # The message that write left is shown on the next view (rendered, not a cached page), once.
    shown, queries = _get(second, f"/requests/{code}/")
    assert "Obligation acknowledged." in shown
    assert queries > 0
    assert "Obligation acknowledged." not in _get(second, f"/requests/{code}/")[0]


def test_each_person_and_language_has_their_own_page(
    transactional_db: None, personas: Personas, flow: Flow, artifacts: Any
) -> None:
    flow.to_review(artifacts["kimi"])
    legal, engineer = _browser(personas.legal), _browser(personas.engineer)
    _get(legal, "/")
    theirs, queries = _get(engineer, "/")
    assert queries > 0  # not the legal reviewer's cached page
    assert f'<span class="who">{personas.engineer.username}</span>' in theirs
    english, _ = _get(legal, "/")
    assert '<html lang="en">' in english
    legal.cookies["django_language"] = "zh-hans"
    chinese, queries = _get(legal, "/")
    assert queries > 0
    assert '<html lang="zh-hans">' in chinese


def test_the_clock_and_the_code_are_part_of_the_key(
    transactional_db: None, personas: Personas, monkeypatch: pytest.MonkeyPatch
) -> None:
    client = _browser(personas.requester)
    _get(client, "/licenses/")
    assert _get(client, "/licenses/")[1] == 0
    real_time = pagecache.time.time
    monkeypatch.setattr(pagecache.time, "time", lambda: real_time() + 120)  # past the minute
    assert _get(client, "/licenses/")[1] > 0
    assert _get(client, "/licenses/")[1] == 0
    monkeypatch.setattr(pagecache, "code_version", lambda: "another release")
    assert _get(client, "/licenses/")[1] > 0


def test_turned_off_every_view_renders(transactional_db: None, personas: Personas, settings: Any) -> None:
    client = _browser(personas.requester)
    _get(client, "/licenses/")
    settings.WEB_PAGE_CACHE_SECONDS = 0
    assert _get(client, "/licenses/")[1] > 0


def test_inside_a_transaction_every_view_renders(personas: Personas) -> None:
    """A test's own transaction (as `db` gives): its writes leave the snapshot as it was, so the
    backend hands out none and every view renders."""
    client = _browser(personas.requester)
    _get(client, "/licenses/")
    assert _get(client, "/licenses/")[1] > 0


def test_pages_that_are_not_plain_200s_are_not_kept(transactional_db: None, personas: Personas) -> None:
    client = _browser(personas.requester)
    assert client.get("/licenses/no-such-license/").status_code == 404
    assert client.get("/licenses/no-such-license/").status_code == 404
    outsider = _browser(personas.outsider)
    assert outsider.get("/").status_code == 403  # the role check runs before the cache
