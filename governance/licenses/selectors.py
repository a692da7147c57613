"""Reads: current license versions as engine specs (cached by digest), the FX table, evaluations."""

from __future__ import annotations

import threading
from typing import Any

from django.db.models import QuerySet

from governance.core.errors import NotFoundError
from governance.licenses.engine import Evaluation, FxTable, LicenseSpec, evaluate
from governance.licenses.models import FxRate, License, LicenseVersion

_spec_cache: dict[tuple[int, str], LicenseSpec] = {}
_spec_lock = threading.Lock()


def license_list() -> QuerySet[License]:
    return License.objects.all().order_by("key")


def license_current_version(key: str) -> LicenseVersion:
    """The newest published version of `key`; NotFoundError (404) for an unknown license."""
    version = (
        LicenseVersion.objects.select_related("license")
        .filter(license__key=key, published_at__isnull=False)
        .order_by("-effective_date", "-published_at")
        .first()
    )
    if version is None:
        raise NotFoundError(f"unknown license {key!r}", extra={"field": "license"})
    return version


def license_spec(version: LicenseVersion) -> LicenseSpec:
    """The engine's frozen view of a version. Versions are immutable once used, and a changed
    draft gets a new digest, so (pk, digest) is a safe cache key."""
    cache_key = (version.pk, version.digest)
    spec = _spec_cache.get(cache_key)
    if spec is None:
        terms = tuple(term.spec() for term in version.terms.all())
        spec = LicenseSpec(
            key=version.license.key,
            name=version.license.name,
            version=version.version,
            text_sha256=version.digest,
            terms=terms,
        )
        with _spec_lock:
            _spec_cache[cache_key] = spec
    return spec


def fx_table() -> FxTable:
    rates = list(FxRate.objects.all())
    usd = {rate.currency: rate.usd_per_unit for rate in rates}
    as_of = {rate.currency: rate.as_of for rate in rates}
    if "USD" not in usd:
        from datetime import date
        from decimal import Decimal

        usd["USD"], as_of["USD"] = Decimal(1), date(1970, 1, 1)
    return FxTable(usd_per_unit=usd, as_of=as_of)


def license_evaluate(key: str, facts: Any) -> tuple[LicenseVersion, Evaluation]:
    """Evaluate facts against the current version of `key` (reads only; nothing stored)."""
    version = license_current_version(key)
    return version, evaluate(license_spec(version), facts, fx_table())
