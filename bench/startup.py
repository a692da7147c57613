"""A management command's start-up against a bare `django.setup()`, in CPU time.

`manage.py check` loads the URL configuration (every API module, DRF, drf-spectacular) on top of
django.setup(); `help` does little more than setup. What made commands slow was an import at start-up:
torch (3-5 s), WeasyPrint + pyHanko (~3 s together), cel's interactive CLI and paramiko (0.2-0.4 s
each); tests/firstrun/test_web_without_torch.py asserts that `check` loads none of them. This prints
the seconds: the child's CPU time (user + system), best of N, the commands and the baseline
interleaved so that all see the same load.

    python bench/startup.py [--repeats 5]

Measured under load 12-15 on the 2-core CI machine: setup 1.6-2.0 s, check 1.8-2.3 s, help 1.7-2.5 s
(ratios 1.1-1.4); either slow import brought back makes the ratio 2.5-3.5. Target: ratio < 1.8.
(A test until issue 44: 15 start-ups, ~22 s of the suite's CPU, for what the import check decides.)
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BASELINE = "import django; django.setup()"
COMMANDS = ("check", "help")
TARGET_RATIO = 1.8


def cpu_seconds(argv: list[str], env: dict[str, str]) -> float:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    env = {**os.environ, "DEBUG": "1", "DJANGO_SETTINGS_MODULE": "governance.settings"}
    best = {name: float("inf") for name in ("setup", *COMMANDS)}
    for _ in range(args.repeats):
        best["setup"] = min(best["setup"], cpu_seconds([sys.executable, "-c", BASELINE], env))
        for command in COMMANDS:
            best[command] = min(best[command], cpu_seconds([sys.executable, "manage.py", command], env))
    report = {
        "cpu_s": {name: round(value, 3) for name, value in best.items()},
        "ratio_to_setup": {command: round(best[command] / best["setup"], 2) for command in COMMANDS},
        "target_ratio": TARGET_RATIO,
    }
    report["met"] = all(ratio < TARGET_RATIO for ratio in report["ratio_to_setup"].values())
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
