"""Loading the catalog, versions that freeze once used, publishing, CEL validation on save."""

import shutil
from io import StringIO
from pathlib import Path

import pytest
from django.core.exceptions import ValidationError
from django.core.management import call_command

from governance.audit.actions import AuditAction
from governance.audit.models import AuditEvent
from governance.core.errors import ConflictError
from governance.licenses.catalog import CATALOG_DIR, CatalogError, load_documents
from governance.licenses.engine import TermError, TermSpec
from governance.licenses.models import FxRate, License, LicenseTerm, LicenseVersion
from governance.licenses.selectors import license_evaluate
from governance.licenses.services import (
    license_catalog_load,
    license_evaluation_store,
    license_version_publish,
)
from tests.conftest import Personas
from tests.licenses.helpers import BASE_FACTS


def _copy_catalog(tmp_path: Path) -> Path:
    target = tmp_path / "catalog"
    shutil.copytree(CATALOG_DIR, target, ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    return target


def test_catalog_has_every_reference_license_with_sources() -> None:
    documents = {doc.key: doc for doc in load_documents()}
    assert len(documents) == 25
    for doc in documents.values():
        assert doc.source_url.startswith("https://"), doc.key
        assert doc.terms, doc.key
    assert documents["apache-2.0"].spdx_id == "Apache-2.0"
    assert documents["llama-3.1"].scancode_key == "llama-3.1-license-2024"


def test_documents_are_parsed_once_per_content_and_an_edit_within_the_same_tick_is_read(tmp_path: Path) -> None:
    """load_documents keeps what it parsed, keyed by the files' contents: the same catalog is parsed
    once per process, and an edit that keeps the file's size and modification time (two writes in
    one tick) or a new or removed file is read again."""
    import os

    from governance.licenses import catalog as catalog_module

    catalog = _copy_catalog(tmp_path)
    calls = []
    original = catalog_module._documents

    def counted(directory: Path, texts: dict[Path, str]) -> tuple:
        calls.append(directory)
        return original(directory, texts)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(catalog_module, "_documents", counted)
        first = load_documents(catalog)
        assert load_documents(catalog) == first
        assert len(calls) == 1
        mit = catalog / "licenses" / "mit.yaml"
        stat = mit.stat()
        text = mit.read_text()
        assert "Keep the copyright" in text
        mit.write_text(text.replace("Keep the copyright", "Keep THE copyright"))  # same size
        os.utime(mit, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # and the same modification time
        edited = {doc.key: doc for doc in load_documents(catalog)}
        assert len(calls) == 2
        assert any("Keep THE copyright" in term.message for term in edited["mit"].terms), edited["mit"].terms
        (catalog / "licenses" / "apache-2.0.yaml").unlink()
        assert "apache-2.0" not in {doc.key for doc in load_documents(catalog)}
        assert len(calls) == 3
    # what a caller does with the list it was given does not reach the next caller's
    documents = load_documents(catalog)
    documents.clear()
    assert load_documents(catalog)


def test_load_is_idempotent_and_reports_changes(db: None) -> None:
    out = StringIO()
    call_command("load_license_catalog", stdout=out)
    assert "25 created" in out.getvalue()
    out = StringIO()
    call_command("load_license_catalog", stdout=out)
    assert "0 created, 0 updated, 25 unchanged" in out.getvalue()
    assert License.objects.count() == 25
    assert FxRate.objects.get(currency="CNY").usd_per_unit > 0
    assert AuditEvent.objects.filter(action=AuditAction.LICENSE_CATALOG_LOADED).count() == 1


def test_a_new_versions_digest_is_the_one_its_stored_terms_give(db: None) -> None:
    """Parity: a new version's digest is computed from the document's terms as they are written
    (license_catalog_load), and equals the digest read back from the stored rows
    (license_version_refresh_digest, what the admin and an update compute)."""
    from governance.licenses.services import license_version_refresh_digest

    license_catalog_load(actor="system:test")
    versions = list(LicenseVersion.objects.select_related("license"))
    assert len(versions) == 25
    for version in versions:
        stored = version.digest
        assert stored, version.license.key
        assert license_version_refresh_digest(version) == stored, version.license.key


def test_loading_reads_the_stored_catalog_in_a_few_queries(
    db: None, django_assert_max_num_queries, tmp_path: Path
) -> None:
    """The licenses and versions are read once, not looked up per document, and what is new is
    written in one insert per table: into an empty database the load took 382 queries (each test that
    needs licenses pays it; 88 when read once), a reload 142; now 17 and 7."""
    with django_assert_max_num_queries(20):
        license_catalog_load(actor="system:test")
    with django_assert_max_num_queries(10):
        report = license_catalog_load(actor="system:test")
    assert not report.changed
    # A license's own fields follow the file on a reload (its versions unchanged).
    catalog = _copy_catalog(tmp_path)
    mit = catalog / "licenses" / "mit.yaml"
    text = mit.read_text()
    name = next(line for line in text.splitlines() if line.startswith("name:"))
    mit.write_text(text.replace(name, "name: MIT License (renamed)"))
    license_catalog_load(actor="system:test", directory=catalog)
    assert License.objects.get(key="mit").name == "MIT License (renamed)"


def test_changed_file_updates_an_unused_version_and_conflicts_with_a_used_one(
    personas: Personas, tmp_path: Path
) -> None:
    license_catalog_load(actor="system:test")
    catalog = _copy_catalog(tmp_path)
    mit = catalog / "licenses" / "mit.yaml"
    mit.write_text(mit.read_text().replace("Keep the copyright", "Retain the copyright"))
    before = LicenseVersion.objects.get(license__key="mit").digest
    report = license_catalog_load(actor="system:test", directory=catalog)
    assert report.updated == ["mit 1.0"]
    assert LicenseVersion.objects.get(license__key="mit").digest != before
    # Once an evaluation references the version, it is frozen.
    version, evaluation = license_evaluate("mit", BASE_FACTS)
    license_evaluation_store(version=version, subject=personas.team, evaluation=evaluation, actor=personas.legal)
    mit.write_text(mit.read_text().replace("Retain the copyright", "Keep all copyright"))
    report = license_catalog_load(actor="system:test", directory=catalog)
    assert report.conflicts
    assert "bump the version" in report.conflicts[0]


def test_used_version_refuses_term_edits(personas: Personas) -> None:
    license_catalog_load(actor="system:test")
    version, evaluation = license_evaluate("llama-3.1", BASE_FACTS)
    license_evaluation_store(version=version, subject=personas.team, evaluation=evaluation, actor=personas.legal)
    term = version.terms.first()
    assert term is not None
    term.message = "changed"
    with pytest.raises(ValidationError, match="referenced by evaluations"):
        term.save()
    with pytest.raises(ValidationError):
        term.delete()
    version.text = "new full text"
    with pytest.raises(ValidationError):
        version.save()


def test_publishing_a_new_version_lists_subjects_to_reevaluate(personas: Personas) -> None:
    license_catalog_load(actor="system:test")
    old, evaluation = license_evaluate("qwen", BASE_FACTS)
    license_evaluation_store(version=old, subject=personas.team, evaluation=evaluation, actor=personas.legal)
    new = LicenseVersion.objects.create(license=old.license, version="2026-01-01", effective_date="2026-01-01")
    with pytest.raises(ConflictError, match="no terms"):
        license_version_publish(version=new, actor=personas.admin)
    for term in old.terms.all():
        term.pk = None
        term.version = new
        term.save()
    affected = license_version_publish(version=new, actor=personas.admin)
    assert affected == [("core.team", str(personas.team.code))]
    current, _ = license_evaluate("qwen", BASE_FACTS)
    assert current.version == "2026-01-01"
    event = AuditEvent.objects.get(action=AuditAction.LICENSE_VERSION_PUBLISHED)
    assert event.data["affected_subjects"] == [f"core.team:{personas.team.code}"]
    with pytest.raises(ConflictError, match="already published"):
        license_version_publish(version=new, actor=personas.admin)


@pytest.mark.parametrize(
    ("condition", "message"),
    [("facts.mau >", "does not compile"), ("facts.no_such_fact == 1", "fails on sample facts"), ("1 + 1", "boolean")],
)
def test_bad_cel_is_rejected_when_a_term_is_saved(condition: str, message: str) -> None:
    term = TermSpec(code="license.copy", severity="obligation", clause="1", condition=condition, message="m")
    with pytest.raises(TermError, match=message):
        term.validate()


def test_model_clean_names_the_condition_field(db: None) -> None:
    license_catalog_load(actor="system:test")
    term = LicenseTerm(
        version=LicenseVersion.objects.get(license__key="mit"),
        code="license.copy",
        severity="obligation",
        clause="1",
        condition="facts.mau >",
        message="m",
    )
    with pytest.raises(ValidationError) as raised:
        term.full_clean()
    assert "condition" in raised.value.message_dict


def test_admin_shows_the_cel_compile_error(personas: Personas, client) -> None:
    license_catalog_load(actor="system:test")
    personas.admin.is_staff = personas.admin.is_superuser = True
    personas.admin.save()
    client.force_login(personas.admin)
    version = LicenseVersion.objects.get(license__key="mit")
    term = version.terms.get()
    url = f"/admin/licenses/licenseversion/{version.pk}/change/"
    assert client.get(url).status_code == 200
    prefix = "terms"
    data = {
        "license": version.license.pk,
        "version": version.version,
        "effective_date": "1988-01-01",
        "text": "",
        f"{prefix}-TOTAL_FORMS": "1",
        f"{prefix}-INITIAL_FORMS": "1",
        f"{prefix}-MIN_NUM_FORMS": "0",
        f"{prefix}-MAX_NUM_FORMS": "1000",
        f"{prefix}-0-id": term.pk,
        f"{prefix}-0-version": version.pk,
        f"{prefix}-0-position": "0",
        f"{prefix}-0-code": "license.copy",
        f"{prefix}-0-severity": "obligation",
        f"{prefix}-0-clause": "x",
        f"{prefix}-0-condition": "facts.redistributes_original_weights &&",
        f"{prefix}-0-params": "{}",
        f"{prefix}-0-message": "m",
        f"{prefix}-0-how_to_comply": "",
        f"{prefix}-0-confidence": "verified",
        f"{prefix}-0-applies_to": "redistribution",
        f"{prefix}-0-value_from": "",
    }
    response = client.post(url, data)
    assert response.status_code == 200  # the form is shown again with the error
    assert "does not compile" in response.content.decode()
    term.refresh_from_db()
    assert term.condition != "facts.redistributes_original_weights &&"


def test_catalog_errors_name_file_and_term(tmp_path: Path) -> None:
    catalog = _copy_catalog(tmp_path)
    gemma = catalog / "licenses" / "gemma.yaml"
    gemma.write_text(gemma.read_text().replace("use: modified_files", "use: no_such_template"))
    with pytest.raises(CatalogError, match=r"gemma.yaml term 3: unknown template"):
        load_documents(catalog)


def test_a_bad_term_names_the_field_at_fault(db: None) -> None:
    """The admin form error lands on the field the engine complains about (not guessed from its text)."""
    from governance.licenses.models import LicenseTerm

    def field_of(**changes: object) -> list[str]:
        term = LicenseTerm(
            code="attribution.display",
            severity="obligation",
            clause="4.a",
            condition="facts.distributes",
            message="Display the notice.",
        )
        for name, value in changes.items():
            setattr(term, name, value)
        try:
            term.clean()
        except ValidationError as exc:
            return sorted(exc.message_dict)
        return []

    assert field_of() == []
    assert field_of(severity="blocker") == ["severity"]
    assert field_of(code="no.such_code") == ["code"]
    assert field_of(applies_to="everyone") == ["applies_to"]
    assert field_of(condition="facts.distributes &&") == ["condition"]
    assert field_of(message="Display {") == ["message"]


def test_a_bumped_version_of_a_used_license_loads_and_is_announced(
    personas: Personas, tmp_path: Path, django_capture_on_commit_callbacks
) -> None:
    """The upgrade path of an existing database: the catalog's new reading of a license comes as a
    bumped version (`.rN`), loads without conflict next to the frozen one, becomes current, and is
    announced like a publication so the requests evaluated under the old one are re-evaluated."""
    from governance.licenses.signals import version_published

    license_catalog_load(actor="system:test")
    version, evaluation = license_evaluate("mit", BASE_FACTS)
    license_evaluation_store(version=version, subject=personas.team, evaluation=evaluation, actor=personas.legal)
    catalog = _copy_catalog(tmp_path)
    mit = catalog / "licenses" / "mit.yaml"
    mit.write_text(mit.read_text().replace('version: "1.0"', 'version: "1.0.r2"').replace("Keep the", "Retain the"))
    announced: list[str] = []

    def receiver(sender: object, license_key: str, **kwargs: object) -> None:
        announced.append(license_key)

    version_published.connect(receiver, dispatch_uid="test-bumped-version")
    try:
        with django_capture_on_commit_callbacks(execute=True):
            report = license_catalog_load(actor="system:test", directory=catalog)
    finally:
        version_published.disconnect(dispatch_uid="test-bumped-version")
    assert report.conflicts == []
    assert report.created == ["mit 1.0.r2"]
    assert announced == ["mit"]
    assert license_evaluate("mit", BASE_FACTS)[0].version == "1.0.r2"
    assert LicenseVersion.objects.filter(license__key="mit").count() == 2
