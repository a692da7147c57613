"""Query-parameter filtering for list endpoints: django-filter FilterSets, and a refusal of any
parameter a list neither filters, paginates nor formats by (a misspelt filter answers 400 naming
it instead of silently returning everything)."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

import django_filters
from django.core.exceptions import ValidationError
from django.db.models import QuerySet
from django_filters.rest_framework import DjangoFilterBackend
from rest_framework.request import Request
from rest_framework.settings import api_settings

from governance.core.errors import invalid_input


def refuse_unknown_params(params: Iterable[str], allowed: Iterable[str]) -> None:
    """400 naming the first query parameter not in `allowed`."""
    known = set(allowed)
    for name in params:
        if name not in known:
            raise invalid_input(name, f"unknown query parameter; this list takes {', '.join(sorted(known))}")


def paging_params(view: Any) -> set[str]:
    """The parameters the view's paginator and content negotiation read (page, page_size, format)."""
    names = {api_settings.URL_FORMAT_OVERRIDE} if api_settings.URL_FORMAT_OVERRIDE else set()
    paginator = getattr(view, "paginator", None)
    for attribute in (
        "page_query_param",
        "page_size_query_param",
        "limit_query_param",
        "offset_query_param",
        "cursor_query_param",
    ):
        name = getattr(paginator, attribute, None)
        if name:
            names.add(name)
    return names


class StrictFilterBackend(DjangoFilterBackend):
    """django-filter's backend; a view with a FilterSet also refuses parameters it does not know
    (the FilterSet's filters, the paginator's parameters, and the view's `extra_query_params`)."""

    def filter_queryset(self, request: Request, queryset: QuerySet[Any], view: Any) -> QuerySet[Any]:
        filterset_class = self.get_filterset_class(view, queryset)
        if filterset_class is not None:
            allowed = set(filterset_class.base_filters) | paging_params(view)
            refuse_unknown_params(request.query_params, allowed | set(getattr(view, "extra_query_params", ())))
        return super().filter_queryset(request, queryset, view)


class UtcIsoDateTimeField(django_filters.fields.IsoDateTimeField):
    """An ISO 8601 date-time, normalised to UTC before it reaches the database: PostgreSQL refuses
    offsets beyond ±15:59 that Python parses (`1486-08-20T11:44:27+20:23` was a 500), and a
    moment too close to year 1 or 9999 to convert is a 400 naming the parameter."""

    def to_python(self, value: Any) -> datetime | None:
        parsed = super().to_python(value)
        if parsed is None or parsed.tzinfo is None:
            return parsed
        try:
            return parsed.astimezone(UTC)
        except OverflowError:
            raise ValidationError("This moment is out of range.", code="invalid") from None


class UtcIsoDateTimeFilter(django_filters.IsoDateTimeFilter):
    field_class = UtcIsoDateTimeField
