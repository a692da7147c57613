"""The key-encryption key (KEK) that protects every PKI private key at rest. It never enters the
database: it comes from settings (APPROVALS_KEY_ENCRYPTION_KEY or its `_FILE` secret), or, on a
DEBUG instance only, from a file `pki_init` generates."""

from __future__ import annotations

import os
import secrets
from pathlib import Path

from django.conf import settings

from governance.core.errors import ApplicationError

MIN_KEK_LENGTH = 32


def key_encryption_key() -> bytes:
    configured: str = settings.APPROVALS_KEY_ENCRYPTION_KEY
    if configured:
        if len(configured) < MIN_KEK_LENGTH:
            raise ApplicationError(
                f"APPROVALS_KEY_ENCRYPTION_KEY must have at least {MIN_KEK_LENGTH} characters", status=503
            )
        return configured.encode()
    path = Path(settings.APPROVALS_KEK_PATH)
    if settings.DEBUG and path.exists():
        return path.read_bytes().strip()
    raise ApplicationError(
        "no key-encryption key for the approvals PKI: set APPROVALS_KEY_ENCRYPTION_KEY or APPROVALS_KEY_ENCRYPTION_KEY_FILE",
        status=503,
    )


def ensure_development_kek() -> bool:
    """DEBUG without a configured KEK: create one (mode 0600). Returns True when created."""
    if settings.APPROVALS_KEY_ENCRYPTION_KEY or not settings.DEBUG:
        return False
    path = Path(settings.APPROVALS_KEK_PATH)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return False
    with os.fdopen(fd, "w") as handle:
        handle.write(secrets.token_urlsafe(48))
    return True
