"""The hash chain, in plain Python shared by the service, the live check and the offline verifier.

Scheme (documented for auditors): each event's `body` is its RFC 8785 canonical JSON, stored
and exported byte for byte. With `H = SHA-256` over raw bytes,

    hash_n = H( bytes.fromhex(hash_{n-1}) || H(body_n) )        hash_0 = "0" * 64 (genesis)

Hex strings are lower-case. A checkpoint signs the canonical JSON of
{"origin", "seq", "head_hash", "time"} with Ed25519.
"""

from __future__ import annotations

import hashlib

GENESIS_HASH = "0" * 64


def chain_hash(prev_hash: str, body: bytes) -> str:
    return hashlib.sha256(bytes.fromhex(prev_hash) + hashlib.sha256(body).digest()).hexdigest()
