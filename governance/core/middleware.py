"""Request middleware: a request id for logs and audit events, body size limits, security headers."""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse

from governance.core.logging import request_id_var

# A caller-supplied id is echoed into logs and headers, so accept only a safe shape.
_REQUEST_ID_RE = re.compile(r"^[A-Za-z0-9._-]{8,64}$")


class RequestIdMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        supplied = request.headers.get("X-Request-ID", "")
        request_id = supplied if _REQUEST_ID_RE.match(supplied) else uuid.uuid4().hex
        request.request_id = request_id  # type: ignore[attr-defined]
        token = request_id_var.set(request_id)
        try:
            response = self.get_response(request)
        finally:
            request_id_var.reset(token)
        response["X-Request-ID"] = request_id
        return response


class RequestSizeLimitMiddleware:
    """Refuses a body larger than API_MAX_BODY_BYTES (or the path's own limit) with 413 before any
    view or parser reads it: DRF's parsers read the stream and would not stop on their own."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if request.path in settings.UPLOAD_BOUND_PATHS:
            limit = settings.APPROVALS_MAX_UPLOAD_BYTES + settings.UPLOAD_FRAMING_BYTES
        else:
            limit = settings.REQUEST_MAX_BYTES_BY_PATH.get(request.path, settings.API_MAX_BODY_BYTES)
        try:
            length = int(request.META.get("CONTENT_LENGTH") or 0)
        except ValueError:
            return JsonResponse({"message": "Invalid Content-Length header.", "extra": {}}, status=400)
        if length > limit:
            return JsonResponse(
                {
                    "message": f"Request body too large: {length} bytes, at most {limit} bytes.",
                    "extra": {"limit": limit},
                },
                status=413,
            )
        return self.get_response(request)


class SecurityHeadersMiddleware:
    """Headers Django's SecurityMiddleware does not set: no browser features, and API answers
    (tokens, evidence) never kept in shared caches."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        response.setdefault("Permissions-Policy", "camera=(), microphone=(), geolocation=(), payment=(), usb=()")
        response.setdefault("Cross-Origin-Resource-Policy", "same-origin")
        if request.path.startswith("/api/"):
            response.setdefault("Cache-Control", "no-store")
        return response


def too_many_requests(request: HttpRequest, exception: Exception) -> HttpResponse:
    """django-ratelimit's answer for a throttled login post or web sign-off."""
    return HttpResponse("Too many attempts; wait a minute.", status=429, content_type="text/plain")
