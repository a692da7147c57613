"""The embedded default cluster: a `local` record whose jobs run on this host with this project's own
interpreter and checkout, and the trained tiny model (planner/tinylm) the first eval run can use."""

from __future__ import annotations

import logging
import shlex
import shutil
import sys
from pathlib import Path

from django.conf import settings
from django.db import transaction

from governance.audit.actions import AuditAction
from governance.audit.services import audit_record
from governance.evaluations.models import Cluster, ExecutorKind

logger = logging.getLogger(__name__)
LOCAL_CLUSTER = "local"
TINY_MODEL_DIR = "models/tiny-llama"
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
    """Copy the trained tiny model committed in planner/tinylm/checkpoint into the model root once
    (the marker sits beside it, so the directory's digest is the committed checkpoint's own)."""
    target = Path(settings.VAR_DIR).resolve() / TINY_MODEL_DIR
    marker = target.with_name(f".{target.name}.complete")
    if marker.exists() and target.is_dir():
        return target
    source = CHECKOUT / "planner" / "tinylm" / "checkpoint"
    staging = target.with_name(f".{target.name}.tmp")
    shutil.rmtree(staging, ignore_errors=True)
    shutil.copytree(source, staging)
    shutil.rmtree(target, ignore_errors=True)
    staging.rename(target)
    marker.write_text("planner/tinylm/checkpoint\n")
    return target
