"""Loading the license catalog data files (YAML) into validated term specs. Pure Python."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from datetime import date
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

import yaml

from governance.licenses.engine import TERM_FIELDS, TermError, TermSpec

CATALOG_DIR = Path(__file__).resolve().parent
TERM_KEYS = {"use", *TERM_FIELDS}
LICENSE_KEYS = {
    "key",
    "name",
    "version",
    "effective_date",
    "scancode_key",
    "spdx_id",
    "source_url",
    "notes",
    "terms",
    "text_fingerprints",
}
FINGERPRINT = re.compile(r"^sha256:[0-9a-f]{64}$")


class CatalogError(ValueError):
    pass


# libyaml's parser where PyYAML was built with it (the wheels are): the same safe constructor, so the same
# values, at a tenth of the pure-Python parser's CPU. The catalog is loaded by `load_license_catalog` and by
# every test that needs licenses (~480 of them: 0.1 s of CPU each went to parsing).
_SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _parse(path: Path) -> Any:
    return _parse_text(path.read_text(encoding="utf-8"))


def _parse_text(text: str) -> Any:
    return yaml.load(text, Loader=_SAFE_LOADER)  # noqa: S506  (a safe loader)


@dataclass(frozen=True, slots=True)
class LicenseDocument:
    key: str
    name: str
    version: str
    effective_date: date
    scancode_key: str | None
    spdx_id: str | None
    source_url: str
    notes: str
    terms: tuple[TermSpec, ...]
    path: str
    # Fingerprints (planner.inspectjob.license_fingerprint: SHA-256 of the normalised text) of the
    # license's standard text as published, so a checkpoint carrying it matches with no one
    # classifying it first. The text itself is not kept in the repository; each entry says where
    # the text it was computed from comes from.
    text_fingerprints: tuple[str, ...] = ()


def term_from_dict(data: dict[str, Any], templates: dict[str, dict[str, Any]], where: str) -> TermSpec:
    unknown = set(data) - TERM_KEYS
    if unknown:
        raise CatalogError(f"{where}: unknown keys {sorted(unknown)}")
    merged: dict[str, Any] = {}
    if "use" in data:
        if data["use"] not in templates:
            raise CatalogError(f"{where}: unknown template {data['use']!r}")
        merged = dict(templates[data["use"]])
    params = {**merged.get("params", {}), **data.get("params", {})}
    merged.update({k: v for k, v in data.items() if k != "use"})
    merged["params"] = params
    missing = {"code", "severity", "clause", "condition", "message"} - set(merged)
    if missing:
        raise CatalogError(f"{where}: missing {sorted(missing)}")
    term = TermSpec(
        code=merged["code"],
        severity=merged["severity"],
        clause=str(merged["clause"]),
        condition=merged["condition"],
        message=" ".join(str(merged["message"]).split()),
        how_to_comply=" ".join(str(merged.get("how_to_comply", "")).split()),
        params=params,
        confidence=merged.get("confidence", "verified"),
        applies_to=merged.get("applies_to", "deployment"),
        value_from=merged.get("value_from"),
    )
    try:
        term.validate()
    except TermError as exc:
        raise CatalogError(f"{where}: {exc}") from None
    return term


def load_templates(directory: Path = CATALOG_DIR) -> dict[str, dict[str, Any]]:
    templates: dict[str, dict[str, Any]] = _parse(directory / "templates.yaml")
    return templates


def load_documents(directory: Path = CATALOG_DIR) -> list[LicenseDocument]:
    """Every license file, parsed and validated; raises CatalogError naming the file and term.

    Parsed once per content of the files: validating the terms (their CEL conditions compiled) was a
    sixth of each catalog load's CPU, and the catalog is loaded at every start and by every test that
    needs licenses. The files are read each time and keyed by their SHA-256, so an edited, new or
    removed file is parsed again (a modification time can miss an edit made within its tick)."""
    paths = [directory / "templates.yaml", *sorted((directory / "licenses").glob("*.yaml"))]
    texts = {path: path.read_text(encoding="utf-8") for path in paths}
    key = (
        str(directory),
        tuple((path.name, hashlib.sha256(text.encode()).hexdigest()) for path, text in texts.items()),
    )
    documents = _PARSED.get(key)
    if documents is None:
        if len(_PARSED) >= 8:  # a test's own catalogs in temporary folders: keep the cache small
            _PARSED.clear()
        documents = _PARSED[key] = _documents(directory, texts)
    return list(documents)


_PARSED: dict[tuple[str, tuple[tuple[str, str], ...]], tuple[LicenseDocument, ...]] = {}


def _documents(directory: Path, texts: dict[Path, str]) -> tuple[LicenseDocument, ...]:
    templates: dict[str, dict[str, Any]] = _parse_text(texts[directory / "templates.yaml"])
    documents = []
    for path in sorted(path for path in texts if path.parent.name == "licenses"):
        data = _parse_text(texts[path])
        where = path.name
        unknown = set(data) - LICENSE_KEYS
        if unknown:
            raise CatalogError(f"{where}: unknown keys {sorted(unknown)}")
        if data.get("key") != path.stem:
            raise CatalogError(f"{where}: key {data.get('key')!r} must match the file name")
        terms = tuple(
            term_from_dict(term, templates, f"{where} term {index}") for index, term in enumerate(data["terms"])
        )
        fingerprints = tuple(str(item.get("sha256", "")) for item in data.get("text_fingerprints") or [])
        bad = [f for f in fingerprints if not FINGERPRINT.fullmatch(f)]
        if bad:
            raise CatalogError(f"{where}: text_fingerprints: {bad[0]!r} is not 'sha256:' and 64 hex digits")
        effective = data["effective_date"]
        if not isinstance(effective, date):
            raise CatalogError(f"{where}: effective_date must be a date (YYYY-MM-DD)")
        documents.append(
            LicenseDocument(
                key=data["key"],
                name=data["name"],
                version=str(data["version"]),
                effective_date=effective,
                scancode_key=data.get("scancode_key"),
                spdx_id=data.get("spdx_id"),
                source_url=data["source_url"],
                notes=" ".join(str(data.get("notes", "")).split()),
                terms=terms,
                path=str(path.relative_to(directory)),
                text_fingerprints=fingerprints,
            )
        )
    return tuple(documents)


def load_fx_defaults(directory: Path = CATALOG_DIR) -> tuple[date, str, dict[str, Decimal]]:
    data = _parse(directory / "fx_rates.yaml")
    try:
        rates = {currency: Decimal(value) for currency, value in data["usd_per_unit"].items()}
    except InvalidOperation as exc:
        raise CatalogError(f"fx_rates.yaml: bad rate: {exc}") from None
    return data["as_of"], data["source"], rates
