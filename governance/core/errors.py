"""The one error type domain code raises; the API exception handler turns it into one shape."""

from __future__ import annotations

from typing import Any


class ApplicationError(Exception):
    """A failure the caller can act on. `status` is the HTTP status the API answers with."""

    status: int = 400

    def __init__(self, message: str, *, extra: dict[str, Any] | None = None, status: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.extra = extra or {}
        if status is not None:
            self.status = status


def invalid_input(field: str, message: str) -> ApplicationError:
    """A 400 naming the bad field, in the shape of a serializer validation error."""
    return ApplicationError(f"Invalid input. {field}: {message}", extra={"fields": {field: [message]}})


class NotFoundError(ApplicationError):
    status = 404


class PermissionDeniedError(ApplicationError):
    status = 403


class ConflictError(ApplicationError):
    status = 409
