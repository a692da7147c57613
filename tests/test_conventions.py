"""scripts/check-conventions (run by `make lint`): the tree passes, and each rule fails on a violation
planted in a copy of the file it guards, so a rule that silently stopped matching is caught."""

from __future__ import annotations

import shutil
import subprocess
import sys
from importlib.machinery import SourceFileLoader
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "check-conventions"


def _checker() -> ModuleType:
    loader = SourceFileLoader("check_conventions", str(SCRIPT))
    module = ModuleType(loader.name)
    sys.modules[loader.name] = module  # dataclasses look the module up while the class is built
    loader.exec_module(module)
    return module


def _plant(tmp_path: Path, relative: str, addition: str) -> Path:
    """A copy of the tree's file at `relative` under tmp_path, with `addition` appended."""
    target = tmp_path / relative
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(ROOT / relative, target)
    with target.open("a") as out:
        out.write(addition)
    return target


def test_the_tree_follows_the_conventions() -> None:
    assert _checker().check(ROOT) == []


PLANTED = [
    pytest.param(
        "governance/deployments/selectors.py",
        "\n\ndef planted() -> bool:\n    from django.db import connection\n\n    return connection.vendor == 'sqlite'\n",
        "vendor-branch",
        id="vendor-branch",
    ),
    pytest.param(
        "governance/web/selectors/deployment.py",
        "\n\ndef planted(request: Any) -> bool:\n    return request.status in (Status.APPROVED, Status.REVOKED)\n",
        "web-role-status",
        id="web-status-compare",
    ),
    pytest.param(
        "governance/web/selectors/deployment.py",
        "\n\ndef planted(user: Any) -> bool:\n    return has_role(user, Role.ADMIN)\n",
        "web-role-status",
        id="web-has-role",
    ),
    pytest.param(
        "templates/web/deployment.html",
        '\n{% if d.status == "approved" %}<p>approved</p>{% endif %}\n',
        "web-role-status",
        id="template-status",
    ),
    pytest.param(
        "governance/licenses/services.py",
        "\n\ndef planted() -> None:\n    with transaction.atomic():\n        pass\n",
        "bare-atomic",
        id="bare-atomic",
    ),
    pytest.param(
        "governance/gate/selectors.py",
        "\n\ndef planted() -> int:\n    from governance.audit.models import AuditEvent\n\n"
        "    return AuditEvent.objects.count()\n",
        "audit-reads",
        id="audit-reads",
    ),
]


@pytest.mark.parametrize(("relative", "addition", "rule"), PLANTED)
def test_a_planted_violation_fails_the_check(tmp_path: Path, relative: str, addition: str, rule: str) -> None:
    target = _plant(tmp_path, relative, addition)
    planted_line = len((ROOT / relative).read_text().splitlines()) + 2
    findings = _checker().check(tmp_path)
    assert findings, "the planted violation was not found"
    assert all(f"[{rule}]" in finding for finding in findings), findings
    lines = [int(finding.split(":")[1]) for finding in findings]
    assert all(line >= planted_line for line in lines), (findings, planted_line)
    # The script as `make lint` runs it: exit 1, naming the file.
    result = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path)], capture_output=True, text=True, check=False)
    assert result.returncode == 1
    assert str(target.relative_to(tmp_path)) in result.stdout


def test_a_write_service_may_open_savepoints(tmp_path: Path) -> None:
    """The rule is about the boundary: an atomic block inside a @write_service function passes."""
    _plant(
        tmp_path,
        "governance/licenses/services.py",
        "\n\n@write_service\ndef planted() -> None:\n    with transaction.atomic():\n        pass\n",
    )
    assert _checker().check(tmp_path) == []


def test_exemptions_name_files_that_exist() -> None:
    """An exemption outliving its file would silently widen the rule for a new file of that name."""
    checker = _checker()
    exempt = [path for rule in checker.RULES for path in rule.exempt]
    exempt += [key.split("::")[0] for key in checker.ATOMIC_EXEMPT_FUNCTIONS]
    assert [path for path in exempt if not (ROOT / path).exists()] == []
