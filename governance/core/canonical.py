"""Canonical JSON (RFC 8785 / JCS) and the SHA-256 digests built on it.

Digests are computed over the exact canonical bytes, so two systems that agree on the data
agree on the digest whatever their key order or float formatting.
"""

from __future__ import annotations

import hashlib
from typing import Any

import rfc8785


def canonical_json(value: Any) -> bytes:
    """RFC 8785 bytes of `value`. Raises ValueError for NaN/inf or non-JSON types."""
    try:
        return rfc8785.dumps(value)
    except (rfc8785.CanonicalizationError, TypeError) as exc:
        raise ValueError(f"value cannot be canonicalized: {exc}") from exc


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def canonical_sha256(value: Any) -> str:
    """Hex SHA-256 of the canonical JSON of `value`."""
    return sha256_hex(canonical_json(value))
