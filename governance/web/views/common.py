"""What every UI view shares: role checks, and turning a service's refusal into a message."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any, TypeVar

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.db.models import QuerySet
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.utils.functional import cached_property
from rest_framework import serializers

from governance.core.errors import ApplicationError, NotFoundError, PermissionDeniedError
from governance.core.roles import has_role
from governance.web import access

View = TypeVar("View", bound=Callable[..., HttpResponse])


class CountedPaginator(Paginator):
    """A Paginator that counts a query of its own: the same rows, without what only their display
    needs (joins for names), so the count does not join them too."""

    def __init__(self, object_list: Any, per_page: int, counted: QuerySet[Any]) -> None:
        super().__init__(object_list, per_page)
        self._counted = counted

    @cached_property
    def count(self) -> int:
        return self._counted.count()


def roles_required(*roles: str) -> Callable[[View], View]:
    """Logged in and holding one of `roles` (any role of the service when none is named)."""

    def decorator(view: View) -> View:
        @wraps(view)
        def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            user_roles = access.roles(request.user)  # with the navigation's team-lead flag: one query
            allowed = has_role(request.user, *roles) if roles else bool(user_roles)
            if not allowed:
                raise PermissionDenied
            try:
                return view(request, *args, **kwargs)
            except NotFoundError as exc:
                raise Http404(exc.message) from None
            except PermissionDeniedError as exc:
                raise PermissionDenied(exc.message) from None

        return login_required(wrapped)  # type: ignore[return-value]

    return decorator


def act(request: HttpRequest, action: Callable[[], Any], success: str, redirect_to: str) -> HttpResponseRedirect:
    """Run a service call from a POST; report success or the service's reason, then go back (PRG)."""
    try:
        action()
    except (NotFoundError, PermissionDeniedError):
        raise
    except ApplicationError as exc:
        messages.error(request, _error_text(exc))
    else:
        messages.success(request, success)
    return HttpResponseRedirect(redirect_to)


def _error_text(exc: ApplicationError) -> str:
    blockers = (exc.extra or {}).get("blockers")
    if blockers:
        return exc.message + ": " + "; ".join(str(b.get("message", b.get("code"))) for b in blockers)
    return exc.message


def serializer_errors(errors: Any, prefix: str = "") -> dict[str, list[str]]:
    """DRF's nested error dict, flattened to `field` / `parent.field` names."""
    flat: dict[str, list[str]] = {}
    if isinstance(errors, dict):
        for name, value in errors.items():
            flat.update(serializer_errors(value, f"{prefix}{name}."))
    elif isinstance(errors, list) and all(not isinstance(e, dict | list) for e in errors):
        flat[prefix.rstrip(".") or "non_field_errors"] = [str(e) for e in errors]
    elif isinstance(errors, list):
        for index, item in enumerate(errors):
            flat.update(serializer_errors(item, f"{prefix}{index}."))
    else:
        flat[prefix.rstrip(".")] = [str(errors)]
    return flat


def validated(serializer: serializers.Serializer[Any]) -> dict[str, Any]:
    """The API's own input rules applied to what the form collected; a 400 naming the fields otherwise."""
    if not serializer.is_valid():
        fields = serializer_errors(serializer.errors)
        summary = "; ".join(f"{name}: {' '.join(msgs)}" for name, msgs in fields.items())
        raise ApplicationError(f"Invalid input. {summary}", extra={"fields": fields})
    return dict(serializer.validated_data)
