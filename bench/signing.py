"""Signing an artifact's files in the OpenSSF model-signing format, against hashing them.

What the service adds to a registration once the files are read (governance.approvals.model_signing:
the library's statement, DSSE and bundle from a manifest, the key handed over through a pipe), and
what a serving node pays to verify it (`model_signing verify certificate`: every file hashed again),
each beside the hashing the registration already does in the same run (the baseline).

    python bench/signing.py [--repeats 5]

Prints one JSON object: medians in ms for the tiny checkpoint and for a manifest of 2,000 files
(signing reads the manifest only, so its cost grows with the number of files, not their bytes), and
the ratios sign/hash and verify/hash.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "governance.settings_tests")

import django  # noqa: E402

django.setup()

from cryptography.hazmat.primitives.asymmetric import rsa  # noqa: E402

from governance.approvals import pki  # noqa: E402
from governance.approvals.model_signing import sign_manifest  # noqa: E402
from planner.manifest import digest_of_manifest, manifest_lines  # noqa: E402

TINY = ROOT / "planner" / "tinylm" / "checkpoint"


def _median_ms(samples: list[float]) -> float:
    return round(statistics.median(samples) * 1000, 2)


def _timed(work: Callable[[], object], repeats: int) -> list[float]:
    samples = []
    for _ in range(repeats):
        started = time.perf_counter()
        work()
        samples.append(time.perf_counter() - started)
    return samples


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    root = pki.make_root_ca("Bench", key=rsa.generate_private_key(public_exponent=65537, key_size=2048))
    signer = pki.make_model_signer(root, "Bench")
    chain = pki.cert_pem(root.certificate)
    figures: dict[str, object] = {}
    with tempfile.TemporaryDirectory() as work:
        folder = Path(work)
        tiny = shutil.copytree(TINY, folder / "tiny")
        text = "".join(manifest_lines(tiny))
        sign_manifest(text, "tiny", signer, chain)  # the library's imports, once
        hashing = _timed(lambda: digest_of_manifest(manifest_lines(tiny)), args.repeats)
        signing = _timed(lambda: sign_manifest(text, "tiny", signer, chain), args.repeats)
        (folder / "model.sig").write_text(sign_manifest(text, "tiny", signer, chain))
        (folder / "ca.pem").write_text(chain)
        cli = Path(sys.executable).with_name("model_signing")
        argv = [str(cli), "verify", "certificate", str(tiny), "--signature", str(folder / "model.sig")]
        argv += ["--certificate_chain", str(folder / "ca.pem")]
        verifying = _timed(lambda: subprocess.run(argv, capture_output=True, check=True), args.repeats)
        bare = _timed(lambda: subprocess.run([sys.executable, "-c", "pass"], check=True), args.repeats)
        figures["tiny"] = {
            "hash_files_ms": _median_ms(hashing),
            "sign_ms": _median_ms(signing),
            "verify_cli_ms": _median_ms(verifying),
            "bare_interpreter_ms": _median_ms(bare),
            "sign_over_hash": round(statistics.median(signing) / statistics.median(hashing), 2),
            "verify_over_bare_interpreter": round(statistics.median(verifying) / statistics.median(bare), 2),
        }
        many = "".join(f"{i:064x} {i} shard-{i:05d}.safetensors\n" for i in range(2000))
        digest = _timed(lambda: digest_of_manifest(many), args.repeats)
        signed = _timed(lambda: sign_manifest(many, "many", signer, chain), args.repeats)
        figures["manifest_2000_files"] = {
            "digest_of_manifest_ms": _median_ms(digest),
            "sign_ms": _median_ms(signed),
            "sign_over_digest": round(statistics.median(signed) / statistics.median(digest), 2),
        }
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
