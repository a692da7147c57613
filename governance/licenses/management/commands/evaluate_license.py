"""python manage.py evaluate_license --license KEY --facts FILE.json: the API's JSON, on stdout."""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from governance.core.errors import ApplicationError
from governance.licenses.facts import FactsError
from governance.licenses.selectors import license_evaluate


class Command(BaseCommand):
    help = "Evaluate deployment facts (a JSON file; '-' for stdin) against a license; prints the API's JSON."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--license", required=True, dest="license_key")
        parser.add_argument("--facts", required=True, help="JSON file with the facts object ('-' for stdin)")

    def handle(self, *args: Any, **options: Any) -> None:
        import sys

        try:
            source = sys.stdin if options["facts"] == "-" else open(options["facts"], encoding="utf-8")  # noqa: SIM115
            with source:
                facts = json.load(source)
        except OSError as exc:
            raise CommandError(f"--facts: cannot read {options['facts']}: {exc.strerror}") from None
        except json.JSONDecodeError as exc:
            raise CommandError(f"--facts: not valid JSON: {exc}") from None
        if isinstance(facts, dict) and set(facts) == {"license", "facts"}:
            facts = facts["facts"]  # accept a whole API request body too
        try:
            _version, evaluation = license_evaluate(options["license_key"], facts)
        except FactsError as exc:
            raise CommandError(f"invalid facts: {exc}") from None
        except ApplicationError as exc:
            raise CommandError(exc.message) from None
        self.stdout.write(json.dumps(evaluation.as_contract(), indent=2, ensure_ascii=False))
