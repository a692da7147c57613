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
        texts = [str(m) for m in (messages if isinstance(messages, list) else [messages])]
        # A field inside a pasted document (config.num_hidden_layers) is shown on the document's input,
        # still naming the inner field.
        outer = name.split(".", 1)[0]
        if name not in (prefixes or {}) and outer in (prefixes or {}) and "." in name:
            target, texts = (prefixes or {})[outer], [f"{name}: {text}" for text in texts]
        target = target.removeprefix("facts.").replace(".", "_")
        if target in form.fields:
            for text in texts:
                form.add_error(target, text)
            placed = True
    if not placed:
        form.add_error(None, error.message)
