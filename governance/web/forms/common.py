"""What every form shares: a service's refusal shown on the form."""

from __future__ import annotations

from django import forms

from governance.core.errors import ApplicationError


def apply_error(form: forms.Form, error: ApplicationError, prefixes: dict[str, str] | None = None) -> None:
    """Show a service's 400 on the form: each named field on its input, the rest at the top."""
    fields = (error.extra or {}).get("fields") or {}
    placed = False
    for name, messages in fields.items():
        target = (prefixes or {}).get(name, name)
        target = target.removeprefix("facts.").replace(".", "_")
        if target in form.fields:
            for message in messages if isinstance(messages, list) else [messages]:
                form.add_error(target, str(message))
            placed = True
    if not placed:
        form.add_error(None, error.message)
