"""The OpenID Connect authentication backend: mozilla-django-oidc's code flow, with the checks it
leaves to us. It verifies the signature (keys from the provider's JWKS) and the nonce; here also
the audience (this client), the issuer, and that exp/iat are present and current. Users are found
by (issuer, subject), created on first sign-in, and their roles follow the group claim."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import jwt
import requests
from django.conf import settings
from django.contrib.auth.models import User
from django.core.exceptions import SuspiciousOperation
from django.db.models import QuerySet
from mozilla_django_oidc.auth import OIDCAuthenticationBackend

from governance.core.backends import RoleModelBackend
from governance.sso.selectors import STEP_UP_REQUEST_SESSION_KEY, STEP_UP_SESSION_KEY
from governance.sso.services import sso_user_create, sso_user_sync, step_up_record

logger = logging.getLogger(__name__)

# Clock skew allowed between the provider and this service, for exp/iat and auth_time.
CLOCK_SKEW_S = 30


class IdTokenRefused(SuspiciousOperation):
    """An ID token failed a check; the message says which (never the token itself)."""


# What a token endpoint answers (400, RFC 6749 5.2) for a code the browser brought that it will
# not exchange: spent, expired or never issued (`invalid_grant`), or not of this session's PKCE
# verifier (`invalid_grant` per RFC 7636 4.6; pyop and some others say `invalid_request`). Every
# other parameter of the exchange is the service's own.
CODE_REFUSALS = frozenset({"invalid_grant", "invalid_request"})


class AuthorizationCodeRefused(Exception):
    """The provider's token endpoint refused the authorization code: the browser's request is at
    fault (a forged, replayed or expired code), not the provider."""


def unverified_header(token: Any) -> dict[str, Any]:
    """The ID token's JOSE header, read before anything is verified (to pick the key)."""
    if not isinstance(token, str | bytes) or not token:
        raise IdTokenRefused("the provider's answer holds no ID token")
    try:
        header: dict[str, Any] = jwt.get_unverified_header(token)
    except jwt.InvalidTokenError as exc:
        raise IdTokenRefused(f"ID token refused: not a JWT ({exc})") from None
    return header


def require_algorithm(header: Mapping[str, Any], algorithm: str) -> None:
    """The token is signed with the one algorithm configured (never `none`, never HMAC with a
    public key), checked before any key is fetched."""
    if header.get("alg") != algorithm:
        raise IdTokenRefused(f"ID token algorithm {header.get('alg')!r} is not {algorithm}")


def signing_jwk(header: Mapping[str, Any], jwks: Any, algorithm: str) -> dict[str, Any]:
    """The key of the provider's JWKS that must have signed a token with `header`: the one its
    `kid` names, or, for a token without `kid`, the provider's only signing key. Anything else
    (another algorithm, `alg: none`, a `kid` naming no key, no `kid` among several keys) is
    refused naming the check, before any signature is looked at."""
    require_algorithm(header, algorithm)
    keys = jwks.get("keys") if isinstance(jwks, dict) else None
    if not isinstance(keys, list):
        raise IdTokenRefused("ID token refused: the provider's JWKS lists no keys")
    usable = [
        key
        for key in keys
        if isinstance(key, dict) and key.get("use", "sig") == "sig" and key.get("alg", algorithm) == algorithm
    ]
    kid = header.get("kid")
    if kid is None:
        if len(usable) != 1:
            raise IdTokenRefused(
                f"ID token has no key id (kid) and the provider publishes {len(usable)} {algorithm} signing keys"
            )
        return usable[0]
    named = [key for key in usable if key.get("kid") == kid]
    if len(named) != 1:
        raise IdTokenRefused(f"ID token key id (kid) names {len(named)} {algorithm} signing keys of the provider")
    return named[0]


class OidcBackend(OIDCAuthenticationBackend):
    def retrieve_matching_jwk(self, token: Any) -> jwt.PyJWK:
        """The library's version indexes `kid` in the token and in each key (a token or a key
        without one answered 500): here a refusal names the check, and a provider with one key
        and no `kid` works. The JWKS not answering, or not as JSON, is the provider failing (502)."""
        header = unverified_header(token)
        require_algorithm(header, self.OIDC_RP_SIGN_ALGO)  # before asking the provider anything
        response = requests.get(
            self.OIDC_OP_JWKS_ENDPOINT,
            verify=self.get_settings("OIDC_VERIFY_SSL", True),
            timeout=self.get_settings("OIDC_TIMEOUT", None),
            proxies=self.get_settings("OIDC_PROXY", None),
        )
        response.raise_for_status()
        key = signing_jwk(header, response.json(), self.OIDC_RP_SIGN_ALGO)
        try:
            return jwt.PyJWK(key, algorithm=self.OIDC_RP_SIGN_ALGO)
        except jwt.PyJWKError as exc:
            raise IdTokenRefused(f"ID token refused: the provider's signing key is not usable ({exc})") from None

    def raise_token_response_error(self, response: requests.Response) -> None:
        """A refused code (400 with an error of CODE_REFUSALS) is the client's error; any other
        failure of the token endpoint (5xx, 401 invalid_client, an answer that is not JSON) stays
        the provider's (requests.HTTPError)."""
        if response.status_code == 400:
            try:
                error = response.json().get("error")
            except (ValueError, AttributeError):
                error = None
            if error in CODE_REFUSALS:
                raise AuthorizationCodeRefused(f"the provider refused the authorization code ({error})")
        super().raise_token_response_error(response)

    def _verify_jws(self, payload: Any, key: Any) -> dict[str, Any]:
        require_algorithm(unverified_header(payload), self.OIDC_RP_SIGN_ALGO)
        try:
            claims: dict[str, Any] = jwt.decode(
                payload,
                key,
                algorithms=[self.OIDC_RP_SIGN_ALGO],
                audience=self.OIDC_RP_CLIENT_ID,
                issuer=settings.OIDC_ISSUER,
                leeway=CLOCK_SKEW_S,
                options={"require": ["exp", "iat", "iss", "aud", "sub"]},
            )
        except jwt.InvalidTokenError as exc:
            # PyJWT's messages name the failed check: "Signature has expired", "Audience doesn't match"…
            raise IdTokenRefused(f"ID token refused: {exc}") from None
        return claims

    def get_userinfo(self, access_token: Any, id_token: Any, payload: dict[str, Any]) -> dict[str, Any]:
        """The ID token's claims: roles come from the ID token's group claim (as documented), so no
        userinfo round trip."""
        return payload

    def verify_claims(self, claims: dict[str, Any]) -> bool:
        return bool(claims.get("sub"))

    def filter_users_by_claims(self, claims: dict[str, Any]) -> QuerySet[User]:
        return User.objects.filter(
            external_identity__issuer=settings.OIDC_ISSUER, external_identity__subject=str(claims["sub"])
        )

    def create_user(self, claims: dict[str, Any]) -> User:
        return sso_user_create(issuer=settings.OIDC_ISSUER, claims=claims)

    def update_user(self, user: User, claims: dict[str, Any]) -> User:
        return sso_user_sync(user=user, claims=claims)

    def get_or_create_user(self, access_token: Any, id_token: Any, payload: dict[str, Any]) -> User | None:
        session = self.request.session
        requested = session.pop(STEP_UP_REQUEST_SESSION_KEY, None)
        user: User | None = super().get_or_create_user(access_token, id_token, payload)
        if user is None or not isinstance(requested, dict):
            return user
        if requested.get("user") != user.pk:
            # A step-up must be the signer themselves, not a switch to another account.
            raise IdTokenRefused("step-up signed in as a different user")
        auth_time = payload.get("auth_time")
        when: datetime | None = None
        if isinstance(auth_time, int) and auth_time + CLOCK_SKEW_S >= int(requested.get("at", 0)):
            try:
                when = datetime.fromtimestamp(auth_time, tz=UTC)
            except (OverflowError, OSError, ValueError):  # a year past 9999: no time at all
                when = None
        if when is None:
            # The provider did not re-authenticate (it ignored prompt=login / max_age=0): no step-up.
            logger.warning("sso: step-up came back without a fresh auth_time", extra={"user": user.pk})
            return user
        # Good for one signature: the row says whether a sign-off took it (the session cannot,
        # being read by concurrent requests before any writes it back).
        step_up = step_up_record(user=user, auth_time=when)
        session[STEP_UP_SESSION_KEY] = {"user": user.pk, "id": str(step_up.pk)}
        return user


class SessionOnlyBackend(RoleModelBackend):
    """LOCAL_LOGIN_ENABLED off: sessions of signed-in users still resolve, but no password signs anyone in."""

    def authenticate(
        self, request: Any, username: str | None = None, password: str | None = None, **kwargs: Any
    ) -> None:
        return None
