"""License texts found in checkpoints (issue 42): matched by fingerprint against the catalog's
standard texts and legal's classifications, classified only by legal, kept for the audit bundle. The
texts come from Debian's /usr/share/common-licenses at test time, never from the repository."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import pytest

from governance.audit.exports import write_bundle
from governance.licenses.selectors import license_text_match
from governance.licenses.services import license_catalog_load, license_text_keep
from planner.inspectjob import license_fingerprint
from tests.conftest import Personas

pytestmark = pytest.mark.django_db
LICENSES = Path("/usr/share/common-licenses")


@pytest.fixture
def catalog(db: None) -> None:
    license_catalog_load(actor="system:test")


def test_the_standard_apache_text_matches_the_catalog_however_it_is_wrapped(catalog: None) -> None:
    text = (LICENSES / "Apache-2.0").read_text()
    rewrapped = " ".join(text.split()).upper()  # another line width, other case: the same text

    match = license_text_match(license_fingerprint(rewrapped))

    assert match is not None
    assert (match.license, match.by) == ("apache-2.0", "catalog")
    assert license_text_match(license_fingerprint((LICENSES / "GPL-3").read_text())) is None


def test_only_legal_classifies_and_an_unknown_license_is_a_400_naming_the_field(
    personas: Personas, catalog: None
) -> None:
    kept = license_text_keep(text=(LICENSES / "MPL-2.0").read_text(), sha256="0" * 64, path="LICENSE")
    url = f"/api/v1/licenses/texts/{kept.fingerprint}"

    for user in (personas.requester, personas.engineer, personas.outsider):
        assert personas.client(user).post(f"{url}/classify", {"license": "mit"}, format="json").status_code in (
            403,
            404,
        )
    assert personas.client(personas.requester).get(url).status_code == 404  # a requester does not list texts
    unknown = personas.client(personas.legal).post(f"{url}/classify", {"license": "no-such"}, format="json")
    assert unknown.status_code == 400
    assert "license" in unknown.json()["extra"]["fields"]
    bad_version = personas.client(personas.legal).post(
        f"{url}/classify", {"license": "mit", "version": "9.9"}, format="json"
    )
    assert bad_version.status_code == 400
    assert "version" in bad_version.json()["extra"]["fields"]
    assert license_text_match(kept.fingerprint) is None

    done = personas.client(personas.legal).post(f"{url}/classify", {"license": "mit"}, format="json")

    assert done.status_code == 200, done.json()
    match = license_text_match(kept.fingerprint)
    assert match is not None
    assert (match.license, match.by) == ("mit", "classified")
    listed = personas.client(personas.auditor).get("/api/v1/licenses/texts/").json()
    assert [t["fingerprint"] for t in listed["results"]] == [kept.fingerprint]


def test_the_same_text_is_kept_once_and_exported_in_the_audit_bundle(catalog: None, audit_signing_key: Path) -> None:
    text = (LICENSES / "Apache-2.0").read_text()
    first = license_text_keep(text=text, sha256="1" * 64, path="LICENSE")
    again = license_text_keep(text=text.replace("\n", "\r\n"), sha256="2" * 64, path="LICENSE.txt")
    assert again.pk == first.pk

    buffer = io.BytesIO()
    write_bundle(buffer)

    name = first.fingerprint.removeprefix("sha256:")
    with zipfile.ZipFile(buffer) as bundle:
        assert bundle.read(f"license-texts/{name}.txt").decode() == text
        assert f"license-texts/{name}.json" in bundle.namelist()
