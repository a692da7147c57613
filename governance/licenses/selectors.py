"""Reads: current license versions as engine specs (cached by digest), the FX table, evaluations."""

from __future__ import annotations

import difflib
import functools
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from django.db.models import QuerySet

from governance.core.errors import NotFoundError, invalid_input
from governance.core.roles import Role, has_role
from governance.licenses.catalog import load_documents
from governance.licenses.engine import Evaluation, FxTable, LicenseSpec, evaluate
from governance.licenses.models import FxRate, License, LicenseText, LicenseVersion

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


@dataclass(frozen=True, slots=True)
class TextMatch:
    """What a license text found in a checkpoint is, as far as the organisation knows."""

    license: str  # catalog key
    version: str
    by: str  # "classified" (a legal reviewer said so) or "catalog" (the standard text's fingerprint)


@functools.cache
def catalog_text_fingerprints() -> dict[str, str]:
    """Fingerprint -> license key of the standard texts the catalog names (read once per process)."""
    return {fp: document.key for document in load_documents() for fp in document.text_fingerprints}


def license_text_match(fingerprint: str) -> TextMatch | None:
    """The license a text is: a legal reviewer's classification first, else the catalog's standard text."""
    classified = (
        LicenseText.objects.filter(fingerprint=fingerprint, classified_as__isnull=False)
        .select_related("classified_as__license")
        .first()
    )
    if classified is not None and classified.classified_as is not None:
        version = classified.classified_as
        return TextMatch(version.license.key, version.version, "classified")
    key = catalog_text_fingerprints().get(fingerprint)
    if key is None:
        return None
    try:
        current = license_current_version(key)
    except NotFoundError:
        return None
    return TextMatch(key, current.version, "catalog")


def license_text_get(fingerprint: str) -> LicenseText:
    found = (
        LicenseText.objects.select_related("classified_as__license", "classified_by")
        .filter(fingerprint=fingerprint)
        .first()
    )
    if found is None:
        raise NotFoundError("no such license text")
    return found


def license_texts_visible_to(user: Any) -> QuerySet[LicenseText]:
    """License texts found in checkpoints: legal reviewers classify them, auditors and admins read
    them; a requester sees the texts of their own artifacts on the artifact's page, not this list."""
    if not has_role(user, Role.LEGAL_REVIEWER, Role.AUDITOR, Role.ADMIN):
        return LicenseText.objects.none()
    return LicenseText.objects.select_related("classified_as__license", "classified_by").order_by("-created_at")


# difflib's cost grows with the product of the two texts' lengths: license texts are a few thousand
# lines at most, and only classified texts are candidates.
DIFF_MAX_LINES = 400


def license_text_closest(text: LicenseText) -> tuple[LicenseText | None, float, list[str]]:
    """The classified text this one most resembles (by difflib's ratio over words), and a line diff
    from it to this one (unified format, at most DIFF_MAX_LINES lines); (None, 0.0, []) when none."""
    words = text.text.split()
    best, best_ratio = None, 0.0
    for candidate in LicenseText.objects.filter(classified_as__isnull=False).exclude(pk=text.pk):
        ratio = difflib.SequenceMatcher(None, candidate.text.split(), words, autojunk=False).quick_ratio()
        if ratio > best_ratio:
            best, best_ratio = candidate, ratio
    if best is None:
        return None, 0.0, []
    ratio = difflib.SequenceMatcher(None, best.text.split(), words, autojunk=False).ratio()
    diff = list(
        difflib.unified_diff(
            best.text.splitlines(),
            text.text.splitlines(),
            fromfile=best.fingerprint,
            tofile=text.fingerprint,
            lineterm="",
        )
    )
    return best, ratio, diff[:DIFF_MAX_LINES]


def license_version_get(key: str, version: str | None) -> LicenseVersion:
    """One published version of a license (default: the current one); a 400 naming the field otherwise."""
    if not version:
        try:
            return license_current_version(key)
        except NotFoundError:
            raise invalid_input("license", f"unknown license {key!r}") from None
    found = (
        LicenseVersion.objects.select_related("license")
        .filter(license__key=key, version=version, published_at__isnull=False)
        .first()
    )
    if found is None:
        raise invalid_input("version", f"{key} has no published version {version!r}")
    return found


def license_text_bundle_files() -> Iterator[tuple[str, bytes]]:
    """The audit bundle's copy of every license text found in a checkpoint, named by fingerprint
    (the evidence of each request names the fingerprints it relied on), with who classified it."""
    for text in LicenseText.objects.select_related("classified_as__license", "classified_by").order_by("pk").iterator():
        name = text.fingerprint.removeprefix("sha256:")
        yield f"license-texts/{name}.txt", text.text.encode()
        record = {
            "fingerprint": text.fingerprint,
            "sha256": text.sha256,
            "first_seen_path": text.first_seen_path,
            "classified_as": f"{text.classified_as.license.key} {text.classified_as.version}"
            if text.classified_as
            else None,
            "classified_by": text.classified_by.username if text.classified_by else None,
            "classified_at": text.classified_at.isoformat() if text.classified_at else None,
        }
        yield f"license-texts/{name}.json", json.dumps(record, sort_keys=True).encode()
