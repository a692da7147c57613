"""Signed weights in the OpenSSF model-signing format (issue 42): the weights digest is the one the
`model-signing` library computes, and what the service signs verifies with the library's own CLI,
as a serving node would run it before the engine starts (docs/inspection.md)."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from google.protobuf import json_format
from model_signing import hashing as ms_hashing
from model_signing._signing import signing as ms_payload

from governance.approvals import pki
from governance.approvals.models import Authority
from governance.artifacts.models import ArtifactSignature
from governance.artifacts.signing import FORMAT, artifact_sign, library_manifest
from governance.audit.actions import AuditAction
from governance.audit.models import AuditEvent
from planner.evaljob.manifest import ArtifactMismatch, verify_artifact
from planner.manifest import (
    digest_matches,
    digest_of_manifest,
    in_toto_statement,
    legacy_digest,
    manifest,
    weights_digest,
)
from tests.conftest import ROOT, Personas
from tests.deployments.conftest import catalog  # noqa: F401  (shared fixture)

TINY = ROOT / "planner" / "tinylm" / "checkpoint"
CLI = Path(sys.executable).with_name("model_signing")


def _awkward_checkpoint(root: Path) -> Path:
    """Names whose text order is not the library's path order ("a.txt" < "a/b" as text; the library
    compares components, so a/b comes first), a nested folder, non-ASCII, and git's own files."""
    root.mkdir()
    (root / "a").mkdir()
    (root / "a" / "b").write_bytes(b"inner")
    (root / "a.txt").write_text("outer")
    (root / "a-b").write_text("dash")
    (root / "模型.json").write_text("{}")
    (root / ".git").mkdir()
    (root / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (root / ".gitattributes").write_text("*.safetensors filter=lfs\n")
    return root


def _library(root: Path) -> dict[str, Any]:
    statement = ms_payload.Payload(ms_hashing.Config().hash(root)).statement
    return json.loads(json_format.MessageToJson(statement.pb))


@pytest.mark.parametrize("which", ["tiny", "awkward"])
def test_the_weights_digest_is_the_model_signing_librarys(tmp_path: Path, which: str) -> None:
    root = shutil.copytree(TINY, tmp_path / "tiny") if which == "tiny" else _awkward_checkpoint(tmp_path / "m")
    theirs = _library(root)
    ours: dict[str, Any] = in_toto_statement(manifest(root), root.name)

    assert weights_digest(root) == "sha256:" + theirs["subject"][0]["digest"]["sha256"]
    assert ours["subject"] == theirs["subject"]
    assert ours["predicateType"] == theirs["predicateType"]
    assert ours["predicate"]["resources"] == theirs["predicate"]["resources"]  # names, order and digests
    assert ".git/HEAD" not in json.dumps(ours)


def test_the_library_reads_the_services_manifest_as_its_own(tmp_path: Path) -> None:
    root = _awkward_checkpoint(tmp_path / "m")
    assert library_manifest("".join(manifest(root)), "m") == ms_hashing.Config().hash(root)


def test_a_digest_of_the_earlier_format_still_verifies_and_nothing_else_does(tmp_path: Path) -> None:
    root = shutil.copytree(TINY, tmp_path / "tiny")
    text = "".join(manifest(root))
    old = legacy_digest(text)
    assert old != digest_of_manifest(text)
    assert digest_matches(text, old)
    assert digest_matches(text, digest_of_manifest(text))
    verify_artifact(root, old, None)  # an artifact registered before the change still runs its eval
    verify_artifact(root, old, text)
    (root / "config.json").write_text("{}")
    with pytest.raises(ArtifactMismatch):
        verify_artifact(root, old, None)
    assert not digest_matches(text, "sha256:" + hashlib.sha256(b"other").hexdigest())


def _verify(root: Path, bundle: Path, chain: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(CLI), "verify", "certificate", str(root), "--signature", str(bundle), "--certificate_chain", str(chain)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.django_db
@pytest.mark.usefixtures("catalog")
def test_signed_files_verify_with_the_librarys_cli_and_a_changed_byte_does_not(
    personas: Personas, org_pki: Authority, tmp_path: Path
) -> None:
    from governance.artifacts.services import artifact_register

    root = shutil.copytree(TINY, tmp_path / "tiny")
    artifact = artifact_register(
        actor=personas.requester,
        team=personas.team,
        data={
            "name": "tiny",
            "source_repo": "org/tiny",
            "revision": "r1",
            "weights_digest": weights_digest(root),
            "license": "apache-2.0",
            "architecture_key": "llama-3.1-8b",
        },
    )
    signature = artifact_sign(artifact=artifact, manifest="".join(manifest(root)), source="inspection")
    assert signature is not None
    assert artifact_sign(artifact=artifact, manifest="".join(manifest(root)), source="inspection") == signature
    assert ArtifactSignature.objects.filter(artifact=artifact).count() == 1
    event = AuditEvent.objects.get(action=AuditAction.ARTIFACT_SIGNED)
    assert event.data["bundle_sha256"] == signature.bundle_sha256
    assert event.data["format"] == FORMAT

    # What a serving node does: the bundle from the API, the organisation's root CA, the library's CLI.
    client = personas.client(personas.requester)
    answer = client.get(f"/api/v1/artifacts/{artifact.code}/signature")
    assert answer.status_code == 200, answer.content
    bundle = tmp_path / "model.sig"
    bundle.write_bytes(answer.content)
    assert hashlib.sha256(answer.content).hexdigest() == signature.bundle_sha256
    chain = tmp_path / "ca.pem"
    chain.write_text(org_pki.certificate_pem)
    done = _verify(root, bundle, chain)
    assert done.returncode == 0, done.stdout + done.stderr

    statement = json.loads(__import__("base64").b64decode(json.loads(bundle.read_text())["dsseEnvelope"]["payload"]))
    assert "sha256:" + statement["subject"][0]["digest"]["sha256"] == artifact.weights_digest

    (root / "config.json").write_bytes((root / "config.json").read_bytes() + b" ")
    assert _verify(root, bundle, chain).returncode != 0  # one changed byte
    (root / "config.json").write_bytes((root / "config.json").read_bytes()[:-1])
    assert _verify(root, bundle, chain).returncode == 0  # the byte put back

    # a root the organisation is not: the chain in the bundle does not lead to it
    other = pki.make_root_ca("Someone Else", key=rsa.generate_private_key(public_exponent=65537, key_size=2048))
    other_ca = tmp_path / "other.pem"
    other_ca.write_text(pki.cert_pem(other.certificate))
    assert _verify(root, bundle, other_ca).returncode != 0


@pytest.mark.django_db
@pytest.mark.usefixtures("catalog")
def test_another_teams_signature_is_not_readable(personas: Personas, org_pki: Authority, tmp_path: Path) -> None:
    from governance.artifacts.services import artifact_register

    root = shutil.copytree(TINY, tmp_path / "tiny")
    artifact = artifact_register(
        actor=personas.requester,
        team=personas.team,
        data={
            "name": "tiny",
            "source_repo": "org/tiny",
            "revision": "r1",
            "weights_digest": weights_digest(root),
            "license": "apache-2.0",
            "architecture_key": "llama-3.1-8b",
        },
    )
    assert personas.client(personas.requester).get(f"/api/v1/artifacts/{artifact.code}/signature").status_code == 404
    artifact_sign(artifact=artifact, manifest="".join(manifest(root)), source="inspection")
    assert (
        personas.client(personas.other_requester).get(f"/api/v1/artifacts/{artifact.code}/signature").status_code == 404
    )
