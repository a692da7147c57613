from typing import Any

from django.core.management.base import BaseCommand, CommandError

from governance.licenses.catalog import CatalogError
from governance.licenses.services import license_catalog_load


class Command(BaseCommand):
    help = "Load the license catalog YAML files (idempotent) and report what changed."

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            report = license_catalog_load(actor="system:load_license_catalog")
        except CatalogError as exc:
            raise CommandError(str(exc)) from None
        for label, items in (
            ("created", report.created),
            ("updated", report.updated),
            ("FX rates added", report.fx_created),
            ("CONFLICT", report.conflicts),
        ):
            for item in items:
                self.stdout.write(f"{label}: {item}")
        self.stdout.write(
            f"license catalog: {len(report.created)} created, {len(report.updated)} updated, "
            f"{len(report.unchanged)} unchanged, {len(report.conflicts)} conflicts"
        )
        if report.conflicts:
            raise CommandError("some catalog versions conflict with versions already in use")
