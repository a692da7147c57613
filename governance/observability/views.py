"""GET /metrics for Prometheus. Not public: the scraper presents METRICS_TOKEN as a bearer token
or connects from a network in METRICS_ALLOWED_NETWORKS; with neither configured nobody may scrape.
What it shows (queue depths, refusal codes, job states) helps an attacker time an attack."""

from __future__ import annotations

import hmac
import ipaddress
import logging
import os

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, CollectorRegistry, generate_latest, multiprocess

from governance.core.prometheus import MULTIPROC_ENV
from governance.observability.collectors import DatabaseCollector

logger = logging.getLogger(__name__)


def _multiprocess() -> bool:
    return bool(os.environ.get(MULTIPROC_ENV))


def scrape_allowed(request: HttpRequest) -> tuple[bool, int]:
    """(allowed, status to answer when not): a bearer token that matches, or a source address in
    an allowed network. REMOTE_ADDR only: a forwarded-for header is the client's to write."""
    token: str = settings.METRICS_TOKEN
    header = request.headers.get("Authorization", "")
    if token and header.startswith("Bearer "):
        presented = header.removeprefix("Bearer ").strip()
        if hmac.compare_digest(presented.encode(), token.encode()):
            return True, 200
        return False, 401
    networks: list[ipaddress.IPv4Network | ipaddress.IPv6Network] = settings.METRICS_ALLOWED_NETWORKS
    try:
        address = ipaddress.ip_address(request.META.get("REMOTE_ADDR", ""))
    except ValueError:
        address = None
    if address is not None and any(address in network for network in networks):
        return True, 200
    return False, 401 if token else 403


@never_cache
@require_GET
def metrics(request: HttpRequest) -> HttpResponse:
    allowed, status = scrape_allowed(request)
    if not allowed:
        response = HttpResponse(
            "metrics need a bearer token (METRICS_TOKEN) or an allowed network\n",
            status=status,
            content_type="text/plain",
        )
        if status == 401:
            response["WWW-Authenticate"] = 'Bearer realm="metrics"'
        return response
    if _multiprocess():
        # Values every process wrote under PROMETHEUS_MULTIPROC_DIR, summed.
        in_process = CollectorRegistry()
        multiprocess.MultiProcessCollector(in_process)
    else:
        in_process = REGISTRY
    from_database = CollectorRegistry(auto_describe=False)
    from_database.register(DatabaseCollector())
    body = generate_latest(in_process) + generate_latest(from_database)
    return HttpResponse(body, content_type=CONTENT_TYPE_LATEST)
