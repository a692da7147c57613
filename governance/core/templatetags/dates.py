"""`{{ value|day }}` and `{{ value|moment }}`: the one date and the one date-and-time format of the
active language (governance/formats), for datetimes, dates and the ISO 8601 strings that evidence
documents and audit records store. Templates use these instead of `date:"…"` with a format name,
so no page or packet mixes formats."""

from __future__ import annotations

from datetime import date, datetime
from typing import Any

from django import template
from django.utils import dateformat
from django.utils.dateparse import parse_date, parse_datetime
from django.utils.formats import get_format
from django.utils.timezone import get_current_timezone, is_aware

register = template.Library()


def _parse(value: Any) -> date | datetime | None:
    if isinstance(value, date):  # datetime is a date too
        return value
    if isinstance(value, str) and value:
        # ISO 8601 as evidence and audit records store it ("…Z"), or the period report's "… UTC"
        text = value.strip().replace("Z", "+00:00").replace(" UTC", "+00:00")
        try:
            return parse_datetime(text) or parse_date(text)
        except ValueError:
            return None
    return None


def format_moment(value: Any) -> str:
    """A date and time in the active language's format, in the current time zone; a bare date
    prints as a date. Anything unparseable prints as given (never an exception in a page)."""
    parsed = _parse(value)
    if parsed is None:
        return "" if value is None else str(value)
    if not isinstance(parsed, datetime):
        return format_day(parsed)
    if is_aware(parsed):
        parsed = parsed.astimezone(get_current_timezone())
    return dateformat.format(parsed, get_format("DATETIME_FORMAT"))


def format_day(value: Any) -> str:
    """The date (in the current time zone for an aware datetime) in the active language's format."""
    parsed = _parse(value)
    if parsed is None:
        return "" if value is None else str(value)
    if isinstance(parsed, datetime) and is_aware(parsed):
        parsed = parsed.astimezone(get_current_timezone())
    return dateformat.format(parsed, get_format("DATE_FORMAT"))


register.filter("moment", format_moment)
register.filter("day", format_day)
