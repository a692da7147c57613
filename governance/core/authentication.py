"""`Authorization: Bearer <token>` for machines; the UI uses the session.

Scopes are enforced here, before any view runs: a scoped token that reaches an endpoint outside
its scopes is refused with 403, whatever the view's own permissions say.
"""

from __future__ import annotations

from typing import Any

from rest_framework import authentication, exceptions
from rest_framework.request import Request

from governance.core.tokens import api_token_resolve, token_reaches_endpoint


class BearerTokenAuthentication(authentication.BaseAuthentication):
    keyword = "Bearer"
    REFUSED = "Invalid, expired or revoked token."  # one answer for every token that is not live

    def authenticate(self, request: Request) -> tuple[Any, Any] | None:
        header = authentication.get_authorization_header(request).decode("latin-1")
        if not header:
            return None
        scheme, _, credentials = header.partition(" ")
        if scheme.lower() != self.keyword.lower():
            return None
        credentials = credentials.strip()
        if not credentials:
            raise exceptions.AuthenticationFailed("Empty bearer token.")
        token = self.resolve(request, credentials)
        if token is None:
            raise exceptions.AuthenticationFailed(self.REFUSED)
        match = request._request.resolver_match
        if not token_reaches_endpoint(token, match.view_name if match else None, request.method or ""):
            raise exceptions.PermissionDenied(
                f"This token's scopes ({', '.join(token.scopes)}) do not reach this endpoint."
            )
        return token.user, token

    def resolve(self, request: Request, credentials: str) -> Any:
        """The live token for `credentials`, or None. A view may resolve it its own way, under the
        same rules (`resolve_token`: the gate reads its state with it, in one statement)."""
        view = (request.parser_context or {}).get("view")
        own = getattr(view, "resolve_token", None)
        return own(request, credentials) if own is not None else api_token_resolve(credentials)

    def authenticate_header(self, request: Request) -> str:
        return self.keyword
