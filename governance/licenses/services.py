"""Writes to the license catalog. Each writes its audit event in the same transaction."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date
from decimal import Decimal
from functools import partial
from pathlib import Path

from django.contrib.auth.models import AnonymousUser, User
from django.db import models, transaction
from django.utils import timezone

from governance.audit.actions import AuditAction
from governance.audit.services import audit_record
from governance.core.canonical import canonical_sha256
from governance.core.errors import ConflictError, PermissionDeniedError
from governance.core.roles import Role, has_role
from governance.core.services import write_service
from governance.licenses.catalog import CATALOG_DIR, LicenseDocument, load_documents, load_fx_defaults
from governance.licenses.engine import Evaluation, TermSpec
from governance.licenses.models import FxRate, License, LicenseEvaluation, LicenseTerm, LicenseText, LicenseVersion
from governance.licenses.signals import text_classified, version_published
from planner.inspectjob import license_fingerprint

Actor = User | AnonymousUser | str | None


def terms_digest(
    *, key: str, version: str, effective_date: date, terms: list[TermSpec] | tuple[TermSpec, ...], text: str
) -> str:
    """SHA-256 of the canonical JSON of everything the engine uses, plus the full text when present."""
    return canonical_sha256(
        {
            "key": key,
            "version": version,
            "effective_date": effective_date.isoformat(),
            "terms": [term.as_document() for term in terms],
            "text_sha256": canonical_sha256(text) if text else None,
        }
    )


def license_version_refresh_digest(version: LicenseVersion) -> str:
    terms = [term.spec() for term in version.terms.all()]
    version.digest = terms_digest(
        key=version.license.key,
        version=version.version,
        effective_date=version.effective_date,
        terms=terms,
        text=version.text,
    )
    LicenseVersion.objects.filter(pk=version.pk).update(digest=version.digest)
    return version.digest


@dataclass
class CatalogReport:
    created: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    conflicts: list[str] = field(default_factory=list)
    fx_created: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return bool(self.created or self.updated or self.fx_created)


def _term_rows(version: LicenseVersion, terms: tuple[TermSpec, ...]) -> list[LicenseTerm]:
    return [
        LicenseTerm(version=version, position=index, **{**term.as_document(), "value_from": term.value_from or ""})
        for index, term in enumerate(terms)
    ]


def _write_terms(version: LicenseVersion, terms: tuple[TermSpec, ...]) -> None:
    version.terms.all().delete()
    LicenseTerm.objects.bulk_create(_term_rows(version, terms))


def _license_fields(document: LicenseDocument) -> dict[str, str]:
    return {
        "name": document.name,
        "scancode_key": document.scancode_key or "",
        "spdx_id": document.spdx_id or "",
        "source_url": document.source_url,
        "notes": document.notes,
    }


def _licenses_sync(documents: list[LicenseDocument], stored: dict[str, License]) -> set[str]:
    """Every document's license row: the missing ones created in one insert, the stored ones brought
    up to date (saved only when a field changed). Returns the keys created now."""
    missing = {
        document.key: License(key=document.key, **_license_fields(document))
        for document in documents
        if document.key not in stored
    }
    License.objects.bulk_create(missing.values())
    stored.update(missing)
    for document in documents:
        if document.key in missing:
            continue
        license_, fields = stored[document.key], _license_fields(document)
        changed = [name for name, value in fields.items() if getattr(license_, name) != value]
        if changed:
            for name in changed:
                setattr(license_, name, fields[name])
            license_.save(update_fields=[*changed, "updated_at"])
    return set(missing)


def _versions_create(
    documents: list[LicenseDocument], licenses: dict[str, License], new_licenses: set[str], report: CatalogReport
) -> None:
    """The documents' versions, none of them stored yet, created with their terms in two inserts.
    A new version's terms are the document's: its digest is computed from them as written (the same
    value license_version_refresh_digest reads back from the rows; tested)."""
    now = timezone.now()
    created = LicenseVersion.objects.bulk_create(
        LicenseVersion(
            license=licenses[document.key],
            version=document.version,
            effective_date=document.effective_date,
            published_at=now,
            digest=terms_digest(
                key=document.key,
                version=document.version,
                effective_date=document.effective_date,
                terms=document.terms,
                text="",
            ),
        )
        for document in documents
    )
    LicenseTerm.objects.bulk_create(
        row for version, document in zip(created, documents, strict=True) for row in _term_rows(version, document.terms)
    )
    for version, document in zip(created, documents, strict=True):
        report.created.append(f"{document.key} {document.version}")
        if (
            document.key not in new_licenses
            and LicenseEvaluation.objects.filter(version__license=version.license, version__published_at__isnull=False)
            .exclude(version=version)
            .exists()
        ):
            # A new version of a license requests were evaluated under (a new text, or the catalog's
            # new reading of it): announce it as a publication does, so they are re-evaluated.
            transaction.on_commit(partial(version_published.send, sender=LicenseVersion, license_key=document.key))


def _version_refresh(document: LicenseDocument, version: LicenseVersion, report: CatalogReport) -> None:
    """A stored version of the document: unchanged, updated to the document's terms, or a conflict
    when its terms differ and evaluations reference it."""
    label = f"{document.key} {document.version}"
    wanted = terms_digest(
        key=document.key,
        version=document.version,
        effective_date=document.effective_date,
        terms=document.terms,
        text=version.text,
    )
    if wanted == version.digest:
        report.unchanged.append(label)
    elif version.is_locked:
        report.conflicts.append(
            f"{label}: terms differ from {document.path} but evaluations reference it; bump the version"
        )
    else:
        version.effective_date = document.effective_date
        version.published_at = version.published_at or timezone.now()
        version.save(update_fields=["effective_date", "published_at"])
        _write_terms(version, document.terms)
        license_version_refresh_digest(version)
        report.updated.append(label)


@write_service
def license_catalog_load(*, actor: Actor, directory: Path = CATALOG_DIR) -> CatalogReport:
    """Load the YAML catalog (idempotent): new versions are created, unused changed ones updated.

    The stored licenses and versions are read in two queries, not looked up per document, and what is
    new is written in one insert per table: loading the catalog into an empty database took 382
    queries (each test that needs licenses does it), a reload 142; then 88 and 7, now 17 and 7 (0.034 s
    of CPU to 0.016 s, with the parsed documents kept: governance.licenses.catalog.load_documents)."""
    documents = load_documents(directory)
    as_of, source, rates = load_fx_defaults(directory)
    report = CatalogReport()
    keys = {document.key for document in documents}
    with transaction.atomic():
        licenses = {license_.key: license_ for license_ in License.objects.select_for_update().filter(key__in=keys)}
        versions = {
            (version.license.key, version.version): version
            for version in LicenseVersion.objects.filter(license__key__in=keys).select_related("license")
        }
        new_licenses = _licenses_sync(documents, licenses)
        _versions_create(
            [document for document in documents if (document.key, document.version) not in versions],
            licenses,
            new_licenses,
            report,
        )
        for document in documents:
            version = versions.get((document.key, document.version))
            if version is not None:
                _version_refresh(document, version, report)
        stored = set(FxRate.objects.filter(currency__in=rates).values_list("currency", flat=True))
        missing = [currency for currency in rates if currency not in stored]
        # ignore_conflicts: a load running at the same time may have added the same currency
        FxRate.objects.bulk_create(
            [FxRate(currency=c, usd_per_unit=rates[c], as_of=as_of, source=source) for c in missing],
            ignore_conflicts=True,
        )
        report.fx_created.extend(missing)
        if report.changed:
            audit_record(
                actor=actor,
                action=AuditAction.LICENSE_CATALOG_LOADED,
                data={"created": report.created, "updated": report.updated, "fx_created": report.fx_created},
            )
    return report


@write_service
def license_version_publish(*, version: LicenseVersion, actor: Actor) -> list[tuple[str, str]]:
    """Publish `version` (it becomes current). Returns the subjects evaluated under older versions
    of the same license, which must be re-evaluated (the deployments app queues that)."""
    with transaction.atomic():
        version = LicenseVersion.objects.select_for_update(of=("self",)).select_related("license").get(pk=version.pk)
        if version.published_at is not None:
            raise ConflictError(f"{version} is already published")
        if not version.terms.exists():
            raise ConflictError(f"{version} has no terms", extra={"field": "terms"})
        license_version_refresh_digest(version)
        version.published_at = timezone.now()
        version.save(update_fields=["published_at"])
        affected = sorted(
            set(
                LicenseEvaluation.objects.filter(version__license=version.license)
                .exclude(version=version)
                .values_list("subject_type", "subject_id")
            )
        )
        audit_record(
            actor=actor,
            action=AuditAction.LICENSE_VERSION_PUBLISHED,
            obj=version,
            data={
                "license": version.license.key,
                "version": version.version,
                "digest": version.digest,
                "affected_subjects": [f"{t}:{i}" for t, i in affected],
            },
        )
        key = version.license.key
        transaction.on_commit(lambda: version_published.send(sender=LicenseVersion, license_key=key))
    return affected


@write_service
def license_term_saved(*, term: LicenseTerm, actor: Actor, deleted: bool = False) -> None:
    """After an admin edit of a (draft or unused) version's term: refresh the digest, audit it."""
    with transaction.atomic():
        version = term.version
        digest = license_version_refresh_digest(version)
        audit_record(
            actor=actor,
            action=AuditAction.LICENSE_TERM_DELETED if deleted else AuditAction.LICENSE_TERM_CHANGED,
            obj=version,
            data={
                "term": term.code,
                "clause": term.clause,
                "severity": term.severity,
                "condition": term.condition,
                "deleted": deleted,
                "digest": digest,
            },
        )


@write_service
def fx_rate_set(*, currency: str, usd_per_unit: Decimal, as_of: date, source: str, actor: Actor) -> FxRate:
    with transaction.atomic():
        rate, _ = FxRate.objects.update_or_create(
            currency=currency, defaults={"usd_per_unit": usd_per_unit, "as_of": as_of, "source": source}
        )
        audit_record(
            actor=actor,
            action=AuditAction.FX_RATE_CHANGED,
            obj=("licenses.fxrate", currency),
            data={"currency": currency, "usd_per_unit": str(usd_per_unit), "as_of": as_of.isoformat()},
        )
    return rate


@write_service
def license_evaluation_store(
    *, version: LicenseVersion, subject: models.Model, evaluation: Evaluation, actor: Actor
) -> LicenseEvaluation:
    """Store an evaluation of `subject` (this locks the version against edits) and audit it."""
    subject_type, subject_id = subject._meta.label_lower, str(getattr(subject, "code", subject.pk))
    with transaction.atomic():
        stored = LicenseEvaluation.objects.create(
            version=version,
            subject_type=subject_type,
            subject_id=subject_id,
            facts=evaluation.facts,
            decision=evaluation.decision,
            findings=[finding.as_dict() for finding in evaluation.findings],
            engine_version=evaluation.engine_version,
        )
        audit_record(
            actor=actor,
            action=AuditAction.LICENSE_EVALUATED,
            obj=subject,
            data={"license": version.license.key, "version": version.version, "decision": evaluation.decision},
        )
    return stored


def license_text_keep(*, text: str, sha256: str, path: str) -> LicenseText:
    """Keep a license text found in a checkpoint, once per normalised text (its fingerprint is
    computed here from the text, not taken from the node)."""
    fingerprint = license_fingerprint(text)
    kept, _ = LicenseText.objects.get_or_create(
        fingerprint=fingerprint, defaults={"text": text, "sha256": sha256[:64], "first_seen_path": path[:200]}
    )
    return kept


@write_service
def license_text_classify(*, text: LicenseText, version: LicenseVersion, actor: User, note: str = "") -> LicenseText:
    """A legal reviewer says once which license a text found in a checkpoint is; every artifact with
    the same text then matches it. Reclassifying is allowed (a mistake corrected) and audited."""
    if not has_role(actor, Role.LEGAL_REVIEWER):
        raise PermissionDeniedError("only a legal reviewer classifies license texts")
    with transaction.atomic():
        text = LicenseText.objects.select_for_update(of=("self",)).get(pk=text.pk)
        previous = text.classified_as
        text.classified_as, text.classified_by, text.classified_at = version, actor, timezone.now()
        text.classification_note = note[:2000]
        text.save()
        audit_record(
            actor=actor,
            action=AuditAction.LICENSE_TEXT_CLASSIFIED,
            obj=text,
            data={
                "fingerprint": text.fingerprint,
                "license": version.license.key,
                "version": version.version,
                "previous": f"{previous.license.key} {previous.version}" if previous else None,
                "note": note[:500],
            },
        )
        fingerprint = text.fingerprint
        transaction.on_commit(lambda: text_classified.send(sender=LicenseText, fingerprint=fingerprint))
    return text
