"""One error shape for every API failure: {"message": str, "extra": {...}}.

Validation errors name each bad field in `message` and list them in `extra.fields`;
unexpected exceptions are logged with the request id and answered without a stack trace.
"""

from __future__ import annotations

import logging
from typing import Any

from django.conf import settings
from django.core.exceptions import PermissionDenied, RequestDataTooBig
from django.core.exceptions import ValidationError as DjangoValidationError
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.views.defaults import page_not_found
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler

from governance.core.errors import ApplicationError
from governance.core.logging import current_request_id

logger = logging.getLogger(__name__)


def _flatten(detail: Any, prefix: str = "") -> dict[str, list[str]]:
    """Turn DRF's nested error detail into {"a.b[0].c": ["msg", ...]}."""
    fields: dict[str, list[str]] = {}
    if isinstance(detail, dict):
        for key, value in detail.items():
            if isinstance(key, int) or (isinstance(key, str) and key.isdigit()):
                name = f"{prefix}[{key}]"  # DRF reports list items as {index: errors}
            else:
                name = str(key) if not prefix else f"{prefix}.{key}"
            if key == "non_field_errors" and not prefix:
                name = "non_field_errors"
            fields.update(_flatten(value, name))
    elif isinstance(detail, list):
        if all(not isinstance(item, dict | list) for item in detail):
            fields[prefix or "non_field_errors"] = [str(item) for item in detail]
        else:
            for index, item in enumerate(detail):
                fields.update(_flatten(item, f"{prefix}[{index}]"))
    else:
        fields[prefix or "non_field_errors"] = [str(detail)]
    return fields


def validation_error_response(detail: Any) -> Response:
    fields = _flatten(detail)
    parts = [f"{name}: {'; '.join(messages)}" for name, messages in fields.items()]
    message = "Invalid input. " + " | ".join(parts) if parts else "Invalid input."
    return Response({"message": message, "extra": {"fields": fields}}, status=status.HTTP_400_BAD_REQUEST)


def api_exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    if isinstance(exc, ApplicationError):
        return Response({"message": exc.message, "extra": exc.extra}, status=exc.status)
    if isinstance(exc, RequestDataTooBig):  # raised by Django's request.body / form parsing past the limit
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        return Response(
            {"message": f"Request body too large: the limit is {limit} bytes.", "extra": {"max_bytes": limit}},
            status=status.HTTP_413_REQUEST_ENTITY_TOO_LARGE,
        )
    if isinstance(exc, DjangoValidationError):
        detail = exc.message_dict if hasattr(exc, "error_dict") else exc.messages
        return validation_error_response(detail)
    if isinstance(exc, exceptions.ValidationError):
        return validation_error_response(exc.detail)
    if isinstance(exc, Http404):
        exc = exceptions.NotFound()
    elif isinstance(exc, PermissionDenied):
        exc = exceptions.PermissionDenied()
    response = exception_handler(exc, context)
    if response is not None:
        detail = response.data.get("detail", "") if isinstance(response.data, dict) else response.data
        response.data = {"message": str(detail), "extra": {}}
        return response
    logger.exception("unhandled error in API view")
    return Response(
        {
            "message": "Internal error; the request id identifies it in the logs.",
            "extra": {"request_id": current_request_id()},
        },
        status=status.HTTP_500_INTERNAL_SERVER_ERROR,
    )


def not_found(request: HttpRequest, exception: Exception) -> HttpResponse:
    """The 404 of a path no route matches (`handler404`): under /api/ the API's JSON error shape, as
    the API's own 404s answer (a client reads `message`, not an HTML page); elsewhere the page."""
    if request.path.startswith("/api/"):
        return JsonResponse({"message": f"no such API endpoint: {request.path}", "extra": {}}, status=404)
    return page_not_found(request, exception)
