"""Rendered read pages kept in the cache, keyed on everything they show, so a page nobody changed
is not rendered again.

Why: a read page's time is almost all its queries and Django's template rendering (a 50-row
table, the request page's sections), while people reload the same pages far more often than
anything is written. A cached page costs what any signed-in page costs (the session, the user
query, the navigation's check) plus one cache read.

What a page's key holds, and why each part keeps a cached page from going stale:
- The database snapshot (`pg_current_snapshot()`), read by the user query the authentication
  backend runs anyway (governance.core.backends): it names which transactions are visible, so any
  commit anywhere (a decision, an eval run's progress, a token's last use, a membership) gives
  every page a new key. Two snapshots that are equal see exactly the same rows. The page's own
  queries run after that read, so what it shows is never older than its key (at worst newer, and
  a newer snapshot never equals the older key). Only read outside a transaction (autocommit):
  inside one, the transaction's own writes do not change the snapshot.
  The snapshot is the server's, not the database's (transaction ids are shared by all databases
  of a PostgreSQL server), so the key also names the database (`database_identity`): two
  deployments on one server sharing a cache (staging and production) would otherwise serve each
  other's pages to the same user id.
- The user (roles, teams and names live in the database, so the snapshot covers their changes),
  the language, the full path with its query string and whether htmx asked.
- The minute (`WEB_PAGE_CACHE_SECONDS`): some labels depend on the clock (a waiver that expired,
  an eval run stuck for 30 minutes, a token's expiry); they lag by at most that long.
- The code: a digest of the package's source, templates, compiled translations and static
  manifest, so a deploy never serves pages rendered by the previous release.

What is never cached: anything but a GET, a page with messages waiting to be shown (they are
rendered into it), a response that is not a plain 200 HTML page or that sets a cookie, and any
page on SQLite (no snapshot to key on).

Bounds: every distinct query string is a page of its own, so a person could fill the cache with
`?n=1`, `?n=2`, ... Pages live in a cache of their own (the `pages` alias: without CACHE_URL a
per-process memory cache apart from the throttle counters, which pages would otherwise push out
of LocMemCache's 300 entries), a page larger than MAX_PAGE_BYTES is not kept, and one person's
pages kept per `WEB_PAGE_CACHE_SECONDS` stop at PAGES_PER_PERSON (the rest are rendered, as with
the cache off).

The CSRF token: a page is rendered with a random marker where its CSRF token goes (the
`csrf_token` context processor below), stored with that marker, and each response gets the
requester's own token in its place. The marker is new for each render, so no content stored in
the database can contain it.
"""

from __future__ import annotations

import functools
import hashlib
import secrets
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from django.conf import settings
from django.contrib import messages
from django.core.cache import caches
from django.db import DatabaseError, connection, transaction
from django.http import HttpRequest, HttpResponse
from django.middleware.csrf import get_token
from django.utils.connection import ConnectionProxy
from django.utils.translation import get_language

from governance.core.backends import SNAPSHOT_ATTR  # the database snapshot the user query saw

# Set on the request while a cacheable page renders: the marker the CSRF token is rendered as.
_MARKER_ATTR = "_web_csrf_marker"
_PREFIX = "web:page:"
# The pages' own cache (settings.CACHES), looked up per use as django.core.cache.cache is.
cache: Any = ConnectionProxy(caches, "pages")
# A larger page is rendered each time (a license diff of two long texts, say), not kept.
MAX_PAGE_BYTES = 256 * 1024
# Pages one person may add to the cache per WEB_PAGE_CACHE_SECONDS (a reload found in the cache
# adds none; a page polled every 2 seconds adds one per write anywhere); past that, rendered.
PAGES_PER_PERSON = 120

View = TypeVar("View", bound=Callable[..., HttpResponse])


def csrf_token(request: HttpRequest) -> dict[str, Any]:
    """Context processor (after Django's own, which it overrides): the marker while a cacheable page
    renders; otherwise nothing, and Django's token stands."""
    marker = getattr(request, _MARKER_ATTR, None)
    return {"csrf_token": marker} if marker else {}


@functools.cache
def code_version() -> str:
    """A digest of what renders a page: the package's Python source, the templates, the compiled
    translations and the static files' manifest (its hashed names are in the page)."""
    base = Path(settings.BASE_DIR)
    digest = hashlib.sha256()
    roots = [(base / "governance", "*.py"), (base / "templates", "*.html"), (base / "locale", "*.mo")]
    # Each file is named relative to its own root: the static manifest lives in the var directory,
    # which production keeps outside the code (the image: /var/lib/governance vs /app).
    files = [(root, path) for root, pattern in roots for path in root.rglob(pattern)]
    static_root = Path(settings.STATIC_ROOT)
    if (static_root / "staticfiles.json").exists():
        files.append((static_root, static_root / "staticfiles.json"))
    for root, path in sorted(files):
        digest.update(f"{root.name}/{path.relative_to(root)}".encode())
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()[:16]


def database_identity() -> str:
    """The database the snapshot is read in: its server's system identifier (unique to a server,
    even where two have the same address) and its name, read once per process and settings."""
    config = connection.settings_dict
    return _database_identity(connection.alias, str(config["NAME"]), str(config["HOST"]), str(config["PORT"]))


@functools.cache
def _database_identity(*configured: str) -> str:  # the arguments: what the answer is cached by
    try:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute("SELECT system_identifier::text || '/' || current_database() FROM pg_control_system()")
            return str(cursor.fetchone()[0])
    except DatabaseError:  # a hosted server may refuse pg_control_system(): the settings name it
        return "/".join(configured)


def _bucket(seconds: int) -> str:
    return str(int(time.time() // seconds))


def page_key(request: HttpRequest, view_name: str) -> str | None:
    """The page's cache key, or None when this request's page may not be cached."""
    seconds = settings.WEB_PAGE_CACHE_SECONDS
    snapshot = getattr(request.user, SNAPSHOT_ATTR, None)
    if not seconds or snapshot is None or request.method != "GET":
        return None
    if len(messages.get_messages(request)):  # counting does not mark them shown
        return None
    parts = [
        code_version(),
        database_identity(),
        view_name,
        str(request.user.pk),
        get_language() or "",
        "htmx" if request.headers.get("HX-Request") else "",
        request.get_full_path(),
        snapshot,
        _bucket(seconds),
    ]
    return _PREFIX + hashlib.sha256("\x1f".join(parts).encode()).hexdigest()


def _cacheable(response: HttpResponse) -> bool:
    return (
        response.status_code == 200
        and not response.streaming
        and not response.cookies
        and response.get("Content-Type", "").startswith("text/html")
        and len(response.content) <= MAX_PAGE_BYTES
    )


def _within_budget(request: HttpRequest) -> bool:
    """Whether this person may add one more page in this WEB_PAGE_CACHE_SECONDS (counted)."""
    seconds = settings.WEB_PAGE_CACHE_SECONDS
    counter = f"{_PREFIX}count:{request.user.pk}:{_bucket(seconds)}"
    cache.add(counter, 0, seconds)
    try:
        return int(cache.incr(counter)) <= PAGES_PER_PERSON
    except ValueError:  # expired between the two calls: keep nothing this time
        return False


def cached_page(view: View) -> View:
    """Serve `view`'s page from the cache while nothing it shows has changed (see the module's
    docstring); render and keep it otherwise. Put it under the role check, so a refused user never
    reaches the cache."""
    view_name = f"{view.__module__}.{view.__qualname__}"

    @functools.wraps(view)
    def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        key = page_key(request, view_name)
        if key is None:
            return view(request, *args, **kwargs)
        stored = cache.get(key)
        if stored is not None:
            marker, body = stored
            return HttpResponse(body.replace(marker, get_token(request)))
        marker = secrets.token_hex(16)
        setattr(request, _MARKER_ATTR, marker)
        try:
            response = view(request, *args, **kwargs)
        finally:
            delattr(request, _MARKER_ATTR)
        if response.streaming:
            return response
        body = response.content.decode(response.charset)
        if _cacheable(response) and _within_budget(request):
            cache.set(key, (marker, body), settings.WEB_PAGE_CACHE_SECONDS)
        response.content = body.replace(marker, get_token(request)).encode(response.charset)
        return response

    return wrapped  # type: ignore[return-value]
