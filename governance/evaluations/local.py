"""The embedded default cluster: a `local` record whose jobs run on this host with this project's own
interpreter and checkout, and the tiny random-weight test model the first eval run can use."""

from __future__ import annotations

import importlib.util
import logging
import shlex
import subprocess
import sys
from pathlib import Path

from django.conf import settings
from django.db import transaction

from governance.audit.actions import AuditAction
from governance.audit.services import audit_record
from governance.evaluations.models import Cluster, ExecutorKind

logger = logging.getLogger(__name__)
LOCAL_CLUSTER = "local"
TINY_MODEL_DIR = "models/tiny-qwen3-moe"
CHECKOUT = Path(__file__).resolve().parents[2]


def local_cluster_ensure() -> tuple[Cluster, bool]:
    """Create the `local` cluster on first start; afterwards keep its interpreter and paths pointing at
    this checkout (a moved checkout or a rebuilt venv), leaving the rest to the admin."""
    wanted = {
        "python": sys.executable,
        "remote_root": str(Path(settings.VAR_DIR).resolve() / "jobs"),
        # Evals may read checkpoints only from here (the tiny model lands in var/models/).
        "model_roots": [str(Path(settings.VAR_DIR).resolve() / "models")],
        # Payloads import planner/ from this checkout even when it is not installed in the interpreter;
        # one math thread per job, because the jobs share this host's cores with the web tier and the
        # worker (two busy-waiting OpenMP threads on a loaded laptop made a CPU eval ~6x slower).
        "setup_lines": f"export PYTHONPATH={shlex.quote(str(CHECKOUT))} OMP_NUM_THREADS=1",
    }
    with transaction.atomic():
        cluster = Cluster.objects.select_for_update().filter(name=LOCAL_CLUSTER).first()
        if cluster is None:
            cluster = Cluster(name=LOCAL_CLUSTER, executor=ExecutorKind.LOCAL, default_time_limit_s=3600, **wanted)
            cluster.full_clean(exclude=["last_test_ok"])  # a nullable boolean: unknown until tested
            cluster.save()
            audit_record(
                actor="system:bootstrap",
                action=AuditAction.CLUSTER_REGISTERED,
                obj=cluster,
                data={"change": "created", "name": cluster.name, "executor": cluster.executor, **wanted},
            )
            return cluster, True
        if cluster.executor == ExecutorKind.LOCAL and any(getattr(cluster, k) != v for k, v in wanted.items()):
            for name, value in wanted.items():
                setattr(cluster, name, value)
            cluster.full_clean(exclude=["last_test_ok"])  # a nullable boolean: unknown until tested
            cluster.save()
            audit_record(
                actor="system:bootstrap",
                action=AuditAction.CLUSTER_REGISTERED,
                obj=cluster,
                data={"change": "updated", **wanted},
            )
    return cluster, False


def tiny_model_ensure() -> Path | None:
    """Write the tiny test checkpoint once, in a subprocess (torch never enters the web tier); None
    when the eval extra (torch) is not installed here."""
    target = Path(settings.VAR_DIR).resolve() / TINY_MODEL_DIR
    if (target / ".complete").exists():
        return target
    if importlib.util.find_spec("torch") is None:
        return None
    subprocess.run(  # noqa: S603 - fixed argv: this interpreter and a module of the project
        [sys.executable, "-m", "planner.evaljob.tiny", "--out", str(target)],
        cwd=CHECKOUT,
        check=True,
        capture_output=True,
        timeout=600,
    )
    return target
