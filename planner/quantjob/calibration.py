"""The calibration set: texts of the eval families, generated from their own seed and never an eval
case (planner.evaljob.families leaves those out). Rebuild: python -m planner.quantjob.calibration

A real run names a cluster-local JSONL file instead (one {"text": …} per line); either way the
job records the SHA-256 of the exact bytes it calibrated on.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

DEFAULT_CALIBRATION = Path(__file__).resolve().parent / "data" / "calibration-v1.jsonl"
SEED = 20261202  # apart from the training seed and the eval set's
SAMPLES = 256


def build(out: Path = DEFAULT_CALIBRATION, count: int = SAMPLES) -> str:
    from planner.evaljob.cases import prompt_text
    from planner.evaljob.families import examples

    lines = [
        json.dumps({"family": e.family, "text": prompt_text(e.turns) + e.answer}, ensure_ascii=False)
        for e in examples(SEED, count)
    ]
    data = ("\n".join(lines) + "\n").encode()
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(data)
    return hashlib.sha256(data).hexdigest()


def load(path: Path, limit: int) -> tuple[list[str], str]:
    """(texts, sha256 of the file's bytes); a line without a string `text` is refused by number."""
    raw = path.read_bytes()
    texts: list[str] = []
    for number, line in enumerate(raw.decode("utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except ValueError:
            raise ValueError(f"calibration line {number}: not JSON") from None
        if not isinstance(item, dict) or not isinstance(item.get("text"), str):
            raise ValueError(f"calibration line {number}: needs a string 'text'")
        texts.append(item["text"])
    if not texts:
        raise ValueError("calibration: no samples")
    return texts[:limit], hashlib.sha256(raw).hexdigest()


if __name__ == "__main__":
    print(f"{DEFAULT_CALIBRATION.name} sha256 {build()}")
