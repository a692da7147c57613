"""The Ed25519 key that signs checkpoints. It lives in a file (path from settings), never in the database."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from django.conf import settings

from governance.core.errors import ApplicationError


def signing_key_path() -> Path:
    return Path(settings.AUDIT_SIGNING_KEY_PATH)


def generate_signing_key(path: Path | None = None) -> bool:
    """Create the key file (mode 0600) if absent. Returns True when a key was created."""
    path = path or signing_key_path()
    if path.exists():
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    pem = Ed25519PrivateKey.generate().private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    # O_EXCL: two processes bootstrapping at once must not overwrite each other's key.
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return False
    with os.fdopen(fd, "wb") as handle:
        handle.write(pem)
    return True


def load_signing_key() -> Ed25519PrivateKey:
    path = signing_key_path()
    try:
        key = serialization.load_pem_private_key(path.read_bytes(), password=None)
    except FileNotFoundError:
        raise ApplicationError(
            f"audit signing key not found at {path}; run `manage.py audit_keygen`", status=503
        ) from None
    if not isinstance(key, Ed25519PrivateKey):
        raise ApplicationError(f"audit signing key at {path} is not an Ed25519 key", status=503)
    return key


def public_key_pem(public_key: Ed25519PublicKey) -> bytes:
    return public_key.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)


def key_id(public_key: Ed25519PublicKey) -> str:
    raw = public_key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return hashlib.sha256(raw).hexdigest()
