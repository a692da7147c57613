"""The embedded default cluster (`make run` runs this through bootstrap when DEBUG is on)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from governance.evaluations.local import local_cluster_ensure, tiny_model_ensure


class Command(BaseCommand):
    help = "Create or refresh the `local` cluster (this host, this interpreter) and the tiny test model."

    def handle(self, *args: Any, **options: Any) -> None:
        cluster, created = local_cluster_ensure()
        self.stdout.write(
            f"cluster {cluster.name!r} {'created' if created else 'ready'}: jobs in {cluster.remote_root}"
        )
        model = tiny_model_ensure()
        if model is None:
            self.stdout.write("tiny test model: not made")
        else:
            self.stdout.write(f"tiny test model: {model}")
