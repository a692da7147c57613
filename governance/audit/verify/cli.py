"""Offline verifier for audit bundles: needs only the standard library and `cryptography`.

`python -m governance.audit.verify` runs `main`; the package docstring gives the usage and exit statuses."""

from __future__ import annotations

import argparse
import json
import sys
import zipfile

from governance.audit.verify.bundle import verify_bundle
from governance.audit.verify.checks import EXIT_USAGE


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m governance.audit.verify", description=(__doc__ or "").split("\n")[0]
    )
    parser.add_argument("bundle", help="the zip made by an audit export")
    parser.add_argument(
        "--public-key",
        help="PEM of the service's checkpoint key obtained independently (else the bundle's own copy is used)",
    )
    parser.add_argument(
        "--checkpoints",
        help="the service's published checkpoint log (JSON Lines, kept outside the database): anchors the chain",
    )
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    args = parser.parse_args(argv)
    try:
        key_pem = open(args.public_key, "rb").read() if args.public_key else None  # noqa: SIM115
        published = open(args.checkpoints, "rb").read() if args.checkpoints else None  # noqa: SIM115
        report = verify_bundle(args.bundle, key_pem, published)
    except (OSError, zipfile.BadZipFile, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if not args.public_key:
        report.warnings.append(
            "checked against the bundle's own public key; pass --public-key for an independent check"
        )
    if args.json:
        print(json.dumps(report.as_dict(), indent=2))
    else:
        print(report.summary())
    return report.exit_code
