"""The web tier (every governance module, `manage.py check`) runs where torch is not installed:
the Docker image and a web host are built without the [eval] extra."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

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


# The start-up's CPU time against a bare django.setup() is bench/startup.py's figure (a test until
# issue 44: 15 start-ups for what the import check above decides).


def test_scheme_names_match_the_torch_implementations() -> None:
    from planner.quant.names import SCHEME_NAMES
    from planner.quant.schemes import SCHEMES

    assert tuple(SCHEMES) == SCHEME_NAMES
