"""Offline verifier for audit bundles: needs only the standard library and `cryptography`.

    python -m governance.audit.verify BUNDLE.zip --public-key KEY.pem --checkpoints PUBLISHED.jsonl [--json]

Checks the manifest digests, every event hash, gapless seq, fork freedom (each event links to
the one before), every checkpoint signature, and that each checkpoint's head is in the chain.

Checkpoints inside the bundle come from the database, which a superuser can rewrite together
with the chain (and the export signs a fresh one over whatever it finds). Only checkpoints
published outside the database (`--checkpoints`, the service's published log) anchor the
chain: events after the last trusted checkpoint are reported as UNANCHORED. A bundle is a prefix
of the chain: published checkpoints beyond its head are listed, not failed, unless the bundle was
signed after one of them (then its tail was cut).
Exit status: 0 verified and anchored, 1 verification failed (the report names the first bad
seq), 2 bad usage, 3 verified but events after the last trusted checkpoint are unanchored.

The same checks run against the live database through `manage.py audit_verify`.

Layout: `checks` (the chain checks, on records already read), `bundle` (reading the zip and the
published checkpoint log), `cli` (this command). Callers import from `governance.audit.verify`.
"""

from governance.audit.verify.bundle import (
    BODY_MARKER,
    CHECKPOINTS_FILE,
    EVENTS_FILE,
    MANIFEST_FILE,
    PUBLIC_KEY_FILE,
    read_checkpoints,
    split_line,
    verify_bundle,
)
from governance.audit.verify.checks import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_UNANCHORED,
    EXIT_USAGE,
    CheckpointRecord,
    EventRecord,
    VerifyReport,
    load_public_key,
    verify_chain,
)
from governance.audit.verify.cli import main

__all__ = [
    "BODY_MARKER",
    "CHECKPOINTS_FILE",
    "EVENTS_FILE",
    "EXIT_FAILED",
    "EXIT_OK",
    "EXIT_UNANCHORED",
    "EXIT_USAGE",
    "MANIFEST_FILE",
    "PUBLIC_KEY_FILE",
    "CheckpointRecord",
    "EventRecord",
    "VerifyReport",
    "load_public_key",
    "main",
    "read_checkpoints",
    "split_line",
    "verify_bundle",
    "verify_chain",
]
