"""Cells of the service's CSV exports (audit trail, period report, calibration export): one rule for all."""

from __future__ import annotations

from typing import Any, TypeVar

T = TypeVar("T")

# Spreadsheets run a cell starting with one of these as a formula (CSV injection): a quote in front
# makes it text, which the spreadsheet shows without the quote.
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def csv_safe(value: T) -> T | str:
    """A text cell as a spreadsheet shows it and never runs it; numbers and empty cells as they are
    (a negative number is a number to the spreadsheet, not a formula)."""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value


def csv_safe_row(row: dict[str, Any]) -> dict[str, Any]:
    return {key: csv_safe(value) for key, value in row.items()}
