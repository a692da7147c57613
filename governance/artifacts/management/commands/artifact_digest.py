from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from governance.artifacts.manifest import manifest_lines, weights_digest


class Command(BaseCommand):
    help = "Compute the weights digest (sha256 over the file manifest) of a local checkpoint directory."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("directory")
        parser.add_argument("--manifest", action="store_true", help="also print the manifest")

    def handle(self, *args: Any, **options: Any) -> None:
        root = Path(options["directory"])
        try:
            if options["manifest"]:
                for line in manifest_lines(root):
                    self.stdout.write(line, ending="")
            self.stdout.write(weights_digest(root))
        except (OSError, ValueError) as exc:
            raise CommandError(str(exc)) from None
