"""Filters that turn stored codes into translated names (no logic beyond a table look-up)."""

from __future__ import annotations

from django import template

from governance.web import labels

register = template.Library()


@register.filter
def status_label(code: str) -> str:
    return labels.status(code)


@register.filter
def obligation_status_label(code: str) -> str:
    return labels.obligation_status(code)


@register.filter
def review_role_label(code: str) -> str:
    return labels.review_role(code)


@register.filter
def capacity_status_label(code: str) -> str:
    return labels.capacity_status(code)


@register.filter
def eval_status_label(code: str) -> str:
    return labels.eval_status(code)


@register.filter
def gib(value: int | float | None) -> float:
    """Bytes as GiB (the unit the charts and tables use)."""
    return (value or 0) / 1024**3
