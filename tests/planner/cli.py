"""The planner's command line as a user runs it (python -m planner ...), from the repository root."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def planner_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "planner", *args], cwd=ROOT, capture_output=True, text=True, check=False
    )
