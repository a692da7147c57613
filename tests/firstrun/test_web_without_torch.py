"""The web tier (every governance module, `manage.py check`) runs where torch is not installed:
the Docker image and a web host are built without the [eval] extra."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# A meta-path finder that refuses torch (and what only the eval job needs) as if it were not installed.
BLOCKER = """
import sys
class _Absent:
    BLOCKED = ("torch", "transformers", "tokenizers", "numpy")
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in self.BLOCKED:
            raise ModuleNotFoundError(f"No module named {name!r} (blocked by the test)")
        return None
sys.meta_path.insert(0, _Absent())
"""


def _run(code: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DEBUG": "1", "DJANGO_SETTINGS_MODULE": "governance.settings"}
    return subprocess.run(
        [sys.executable, "-c", BLOCKER + code, *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_blocker_really_blocks_torch() -> None:
    result = _run("import torch")
    assert result.returncode != 0
    assert "blocked by the test" in result.stderr


def test_every_governance_module_imports_without_torch() -> None:
    code = (
        "import django, importlib, pkgutil\n"
        "django.setup()\n"
        "import governance\n"
        "names = [m.name for m in pkgutil.walk_packages(governance.__path__, 'governance.')]\n"
        "for name in names:\n"
        "    importlib.import_module(name)\n"
        "import governance.urls, governance.celery\n"
        "assert 'torch' not in sys.modules\n"
        "print(len(names))\n"
    )
    result = _run(code)
    assert result.returncode == 0, result.stderr[-3000:]
    assert int(result.stdout.strip()) > 50  # the walk really visited the apps


def test_manage_py_check_runs_without_torch_and_loads_none_of_the_slow_imports() -> None:
    """What made commands slow: torch (3-5 s), WeasyPrint and pyHanko (~3 s together), cel's
    interactive CLI and paramiko (~0.2-0.4 s each). One `manage.py check` with torch blocked answers
    both (a start-up of its own each cost ~2 s of CPU)."""
    code = (
        "import runpy; sys.argv = ['manage.py', 'check']\n"
        "try:\n    runpy.run_path('manage.py', run_name='__main__')\nexcept SystemExit as stop:\n"
        "    assert not stop.code, stop.code\n"
        "print(sorted(m for m in ('torch', 'cel.cli', 'prompt_toolkit', 'paramiko', 'weasyprint', 'pyhanko.sign') if m in sys.modules))\n"
    )
    result = _run(code)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "no issues" in result.stdout
    assert result.stdout.strip().splitlines()[-1] == "[]"


# `manage.py check` loads the URL configuration (every API module, DRF, drf-spectacular) on top of
# django.setup(); `help` does little more than setup. Measured here under load 12-15 on 2 shared
# cores: setup 1.6-2.0 s, check 1.8-2.3 s and help 1.7-2.5 s of CPU (ratios 1.1-1.4); importing
# torch alone costs 4 s, WeasyPrint + pyHanko ~3 s: either one brought back makes the ratio 2.5-3.5.
START_RATIO_LIMIT = 1.8
BASELINE = "import django; django.setup()"


def _cpu_seconds(argv: list[str], env: dict[str, str]) -> float:
    """The child's CPU time (user + system): on this shared machine the wall time mostly measures
    other jobs; CPU time grows under load too, which the baseline measured alongside cancels."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


COMMANDS = ("check", "help")


@pytest.fixture(scope="module")
def start_cpu_seconds() -> dict[str, float]:
    """Best of five CPU times of the bare setup and of each command, interleaved so that all see the
    same load. One baseline per round serves both commands (before, each command's test ran its own
    five: 20 start-ups of ~2 s of CPU where 15 say the same)."""
    env = {**os.environ, "DEBUG": "1", "DJANGO_SETTINGS_MODULE": "governance.settings"}
    best = {name: float("inf") for name in ("setup", *COMMANDS)}
    for _ in range(5):
        best["setup"] = min(best["setup"], _cpu_seconds([sys.executable, "-c", BASELINE], env))
        for command in COMMANDS:
            best[command] = min(best[command], _cpu_seconds([sys.executable, "manage.py", command], env))
    return best


@pytest.mark.parametrize("command", COMMANDS)
def test_management_command_starts_close_to_bare_django_setup(
    command: str, start_cpu_seconds: dict[str, float]
) -> None:
    baseline, command_time = start_cpu_seconds["setup"], start_cpu_seconds[command]
    ratio = command_time / baseline
    print(f"manage.py {command}: {command_time:.2f} s CPU, django.setup(): {baseline:.2f} s, ratio {ratio:.2f}")
    assert ratio < START_RATIO_LIMIT, (
        f"manage.py {command} took {command_time:.2f} s of CPU, {ratio:.2f}x a bare django.setup() ({baseline:.2f} s)"
    )


def test_scheme_names_match_the_torch_implementations() -> None:
    from planner.quant.names import SCHEME_NAMES
    from planner.quant.schemes import SCHEMES

    assert tuple(SCHEMES) == SCHEME_NAMES
