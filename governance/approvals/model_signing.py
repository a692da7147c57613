"""Signed weights in the OpenSSF model-signing format (the `model-signing` library), with the
organisation's PKI (this app's). The apps that read an artifact's files announce it (evaluations'
`artifact_inspected`, quantization's `derivative_registered`); this app's receivers sign.

The service signs a manifest it holds, not a directory: the files lie on a cluster the service may
not reach, and the manifest was read from them on the node (an inspection, or the quantize job's
report) and checked against the weights digest before it is signed. The library hashes a directory
itself; here its hashing step is given that manifest instead (`_KnownManifest`), and everything else
(the in-toto statement, DSSE, the Sigstore bundle, the certificate chain) is the library's own. A
serving node verifies the bundle against the files with the library's CLI (docs/inspection.md).

The private key never touches a disk: the library reads a key from a path, so it is handed a pipe
(`/dev/fd/N`) that holds the decrypted key until it is read.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import pathlib
import tempfile
from collections.abc import Iterator
from typing import Any

from cryptography.hazmat.primitives import serialization

from governance.approvals import pki
from governance.approvals.services.certificates import model_signer
from governance.artifacts.models import SIGNATURE_FORMAT, ArtifactSignature, ModelArtifact
from governance.audit.actions import AuditAction
from governance.audit.services import audit_record
from governance.core.services import write_service
from planner.manifest import GIT_PATHS, digest_of_manifest, manifest_entries, manifest_text_lines

logger = logging.getLogger(__name__)

FORMAT = SIGNATURE_FORMAT


def library_manifest(manifest_text: str, model_name: str) -> Any:
    """The library's manifest (`model_signing.manifest.Manifest`) of the files a manifest text lists
    ("files" serialization, SHA-256, no links, git files ignored: the parameters its own hashing
    records). The library is imported here, not at module level: it brings Sigstore's client, about
    half a second of imports every web and worker process would pay."""
    from model_signing import manifest as ms_manifest
    from model_signing._hashing.hashing import Digest  # the library's own digest type; no public alias

    serialization = ms_manifest.SerializationType.from_args(
        {"method": "files", "hash_type": "sha256", "allow_symlinks": False, "ignore_paths": sorted(GIT_PATHS)}
    )
    items = [
        serialization.new_item(relative, Digest("sha256", bytes.fromhex(sha)))
        for sha, _size, relative in manifest_entries(manifest_text_lines(manifest_text))
    ]
    return ms_manifest.Manifest(model_name, items, serialization)


def _known_manifest(manifest: Any) -> Any:
    """The library's hashing step (`model_signing.hashing.Config`), answered with a manifest already
    read from the files."""
    from model_signing import hashing as ms_hashing

    class KnownManifest(ms_hashing.Config):
        def hash(self, model_path: Any, *, files_to_hash: Any = None) -> Any:
            return manifest

    return KnownManifest()


@contextlib.contextmanager
def _key_pipe(key_pem: bytes) -> Iterator[pathlib.Path]:
    """A path the key can be read from once, without writing it to a file."""
    read_end, write_end = os.pipe()
    try:
        os.write(write_end, key_pem)  # a P-256 PEM is ~240 bytes: far below a pipe's buffer
        os.close(write_end)
        write_end = -1
        yield pathlib.Path(f"/dev/fd/{read_end}")
    finally:
        if write_end != -1:
            os.close(write_end)
        os.close(read_end)


def sign_manifest(manifest_text: str, model_name: str, signer: pki.IssuedEc, chain_pem: str) -> str:
    """The Sigstore bundle (JSON text) of a manifest, signed with `signer`; `chain_pem` (the root CA)
    travels in the bundle so a verifier needs only the root it trusts."""
    from model_signing import signing as ms_signing

    key_pem = signer.key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    with tempfile.TemporaryDirectory(prefix="model-sign-") as work, _key_pipe(key_pem) as key_path:
        folder = pathlib.Path(work)
        (folder / "signer.pem").write_text(pki.cert_pem(signer.certificate))
        (folder / "chain.pem").write_text(chain_pem)
        config = ms_signing.Config().set_hashing_config(_known_manifest(library_manifest(manifest_text, model_name)))
        config.use_certificate_signer(
            private_key=key_path, signing_certificate=folder / "signer.pem", certificate_chain=[folder / "chain.pem"]
        )
        config.sign(folder / model_name, folder / "model.sig")
        return (folder / "model.sig").read_text()


@write_service
def artifact_sign(*, artifact: ModelArtifact, manifest: str, source: str) -> ArtifactSignature | None:
    """Sign an artifact's files once, from a manifest read from them. None (nothing signed) when the
    artifact carries a digest of the legacy format (its statement's subject would not be its digest)
    or the PKI is not set up; a second call returns the first signature."""
    existing = ArtifactSignature.objects.filter(artifact=artifact).first()
    if existing is not None:
        return existing
    try:
        if digest_of_manifest(manifest) != artifact.weights_digest:
            return None
    except ValueError:
        return None
    issued = model_signer()
    if issued is None:
        return None
    signer, chain_pem = issued
    bundle = sign_manifest(manifest, _model_name(artifact), signer, chain_pem)
    signature, created = ArtifactSignature.objects.get_or_create(
        artifact=artifact,
        defaults={
            "bundle": bundle,
            "bundle_sha256": hashlib.sha256(bundle.encode()).hexdigest(),
            "signer_sha256": pki.fingerprint(signer.certificate),
            "source": source,
        },
    )
    if created:
        audit_record(
            actor=f"system:{source}",
            action=AuditAction.ARTIFACT_SIGNED,
            obj=artifact,
            data={
                "weights_digest": artifact.weights_digest,
                "bundle_sha256": signature.bundle_sha256,
                "signer_sha256": signature.signer_sha256,
                "format": FORMAT,
            },
        )
    return signature


def artifact_sign_quietly(*, artifact: ModelArtifact, manifest: str, source: str) -> None:
    """artifact_sign for a receiver, after the work that read the files committed: a failure to sign
    is logged, never raised into the sender; the next inspection signs."""
    try:
        artifact_sign(artifact=artifact, manifest=manifest, source=source)
    except Exception:
        logger.exception("signing the files of artifact %s failed", artifact.code)


def on_artifact_inspected(sender: Any = None, *, artifact: ModelArtifact, **kwargs: Any) -> None:
    """Receiver of evaluations' artifact_inspected: sign the manifest the node read, when its newest
    inspection passed (the inspection checked that manifest against the weights digest)."""
    from governance.evaluations.models import ArtifactInspection, InspectionStatus

    report = (
        ArtifactInspection.objects.filter(artifact=artifact, status=InspectionStatus.PASSED)
        .order_by("-created_at")
        .values_list("report", flat=True)
        .first()
    )
    manifest = (report or {}).get("manifest")
    if isinstance(manifest, str):
        artifact_sign_quietly(artifact=artifact, manifest=manifest, source="inspection")


def on_derivative_registered(sender: Any = None, *, artifact: ModelArtifact, manifest: str, **kwargs: Any) -> None:
    """Receiver of quantization's derivative_registered: the quantize job's own reading of what it made
    (checked against its digest before the derivative was registered)."""
    artifact_sign_quietly(artifact=artifact, manifest=manifest, source="quantize")


def _model_name(artifact: ModelArtifact) -> str:
    # The statement's subject name is informative only (the library says so); a safe file name.
    name = "".join(c if c.isalnum() or c in "-_." else "-" for c in artifact.name).strip(".-") or "model"
    return name[:100]
