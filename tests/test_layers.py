"""Import rule: each app imports only apps below it, so the apps built on top (approvals, gate, web)
can change without touching the base, and no cycle can form.

    core  <-  audit  <-  licenses, sso  <-  artifacts  <-  evaluations  <-  calibration, quantization  <-  capacity
          <-  deployments  <-  approvals  <-  canary  <-  gate  <-  web, observability

Apps of one layer do not import each other. Lower apps announce events with Django signals (each app's
signals.py) and the app above connects receivers in its AppConfig.ready(). `planner` is a library
without Django: it imports neither Django nor `governance`. The project modules at the top of
`governance/` (settings, urls, celery) wire everything together and are exempt. Imports inside
functions count too: a lazy import is still a dependency."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

LAYERS: dict[str, int] = {
    "core": 0,
    "audit": 1,
    "licenses": 2,
    "sso": 2,  # users and roles from the provider's ID token; a sign-off (approvals) takes its step-up
    "artifacts": 3,
    "evaluations": 4,  # an eval names registered artifacts (candidate, baseline, where they lie)
    "calibration": 5,  # calibration runs are jobs on a cluster (evaluations)
    "quantization": 5,  # quantize runs: artifacts + evaluations (jobs) + licenses
    "capacity": 6,  # a plan naming a cluster reads its calibration profile (a direct call)
    "deployments": 7,
    "approvals": 8,
    "canary": 9,  # canary analyses of approved requests; the gate reads them (canary.selectors)
    "gate": 10,  # the gate reads the approvals' verified packet state and the canary analyses
    "web": 11,  # the UI sits on every app, approvals and gate included
    "observability": 11,  # /metrics reads every app's tables; the instruments themselves are core.metrics
}


def _imports(path: Path, root: Path = ROOT) -> list[tuple[int, str]]:
    """Every module a file imports, as an absolute dotted name: `from governance import deployments`
    reads as governance.deployments, and relative imports are resolved against the file's package."""
    package = path.relative_to(root).with_suffix("").parts[:-1]
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = ".".join(package[: len(package) - node.level + 1] if node.level else ())
            module = ".".join(part for part in (base, node.module or "") if part)
            if "." in module:
                found.append((node.lineno, module))
            else:  # `from governance import deployments`: the names are the modules
                found.extend((node.lineno, f"{module}.{alias.name}") for alias in node.names)
    return sorted(found)


def _app_of(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == "governance" else None


def upward_imports(root: Path = ROOT) -> list[str]:
    problems = []
    for app_dir in sorted(p for p in (root / "governance").iterdir() if (p / "apps.py").exists()):
        app = app_dir.name
        if app not in LAYERS:
            problems.append(f"{app}: not placed in a layer (add it to LAYERS in {Path(__file__).name})")
            continue
        for path in app_dir.rglob("*.py"):
            for line, module in _imports(path, root):
                target = _app_of(module)
                if target is None or target == app or target not in LAYERS:
                    continue
                if LAYERS[target] >= LAYERS[app]:
                    problems.append(f"{path.relative_to(root)}:{line} {app} imports {module} ({target} is not below)")
    return problems


def planner_imports() -> list[str]:
    problems = []
    for path in (ROOT / "planner").rglob("*.py"):
        for line, module in _imports(path):
            if module.split(".")[0] in ("django", "rest_framework", "governance"):
                problems.append(f"{path.relative_to(ROOT)}:{line} planner imports {module}")
    return problems


def test_no_app_imports_upwards_or_sideways() -> None:
    assert upward_imports() == []


def test_planner_imports_no_django_and_no_governance() -> None:
    assert planner_imports() == []


def test_the_rule_catches_an_upward_import(tmp_path: Path) -> None:
    """The checker itself: a core module that imports deployments is reported, however it is spelt
    (inside a function, `from governance import ...`, a relative import)."""
    fake = tmp_path / "governance"
    for app in ("core", "deployments"):
        (fake / app).mkdir(parents=True)
        (fake / app / "apps.py").write_text("")
    (fake / "core" / "bad.py").write_text(
        "def f():\n    from governance.deployments.models import DeploymentRequest\n"
        "from governance import deployments\n"
        "from ..deployments import services\n"
    )
    (fake / "deployments" / "ok.py").write_text("from governance.core.models import Team\nfrom . import apps\n")
    assert upward_imports(tmp_path) == [
        f"governance/core/bad.py:{line} core imports {module} (deployments is not below)"
        for line, module in (
            (2, "governance.deployments.models"),
            (3, "governance.deployments"),
            (4, "governance.deployments"),
        )
    ]
