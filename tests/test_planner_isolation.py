"""planner/ must import on a GPU node where Django is not installed."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_planner_never_imports_django() -> None:
    code = (
        "import importlib, pkgutil, sys\n"
        "import planner\n"
        "for m in pkgutil.walk_packages(planner.__path__, 'planner.'):\n"
        "    if m.name.split('.')[1] in {'quant', 'evaljob'}:\n"
        "        continue  # need torch; checked on the eval path\n"
        "    gpu_job = ('kernels', 'run', '__main__', 'timing', 'gemms', 'system', 'collectives')\n"
        "    if m.name in {f'planner.calibrate.{name}' for name in gpu_job}:\n"
        "        continue  # the GPU job (torch, triton); its profile reader is imported here\n"
        "    importlib.import_module(m.name)\n"
        "assert not any(n == 'django' or n.startswith('django.') for n in sys.modules), 'django imported'\n"
        "print('ok')\n"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"
    for path in (ROOT / "planner").rglob("*.py"):
        text = path.read_text()
        assert "import django" not in text, path
        assert "from django" not in text, path
