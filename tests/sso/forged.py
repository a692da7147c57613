"""ID tokens an attacker can make from a genuine one (without the provider's key), each with the
words of the check that refuses it: what the SSO tests send through the callback, in-process
(tests/sso/test_oidc.py) and through gunicorn (tests/resilience/test_sso_races.py)."""

from __future__ import annotations

import base64
import functools
import json
from typing import Any

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from tests.sso.conftest import CLIENT_SECRET


@functools.cache
def forger_pem() -> bytes:
    """An RSA key that is not the provider's (one per process: generating one costs CPU)."""
    forger = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return forger.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unsigned(header: dict[str, Any], claims: dict[str, Any]) -> str:
    return ".".join(b64(json.dumps(part).encode()) for part in (header, claims)) + "."


def kidless_id_tokens(claims: dict[str, Any]) -> dict[str, tuple[str, str]]:
    """ID tokens without a usable `kid`, each with the words of the check that refuses it."""
    return {
        "alg none": (_unsigned({"alg": "none", "typ": "JWT"}, claims), "algorithm"),
        # no kid header: checked with the provider's one key
        "RS256 without kid": (jwt.encode(claims, forger_pem(), algorithm="RS256"), "Signature verification failed"),
        "HS256 without kid": (jwt.encode(claims, CLIENT_SECRET, algorithm="HS256"), "algorithm"),
        "unknown kid": (
            jwt.encode(claims, forger_pem(), algorithm="RS256", headers={"kid": "no-such-key"}),
            "key id",
        ),
        "not a JWT": ("not-a-jwt", "not a JWT"),
    }


def forged_id_tokens(genuine: str) -> dict[str, tuple[Any, str]]:
    """Every shape made from the provider's genuine ID token `genuine`: those without a usable
    `kid`, those under the provider's own `kid`, garbage, and answers holding no token at all
    (the value may be a non-string: it stands where the token endpoint's `id_token` goes)."""
    claims = jwt.decode(genuine, options={"verify_signature": False})
    kid = jwt.get_unverified_header(genuine)["kid"]
    header, payload, signature = genuine.split(".")
    flipped = b64(bytes(b ^ 1 for b in base64.urlsafe_b64decode(signature + "==")))
    promoted = b64(json.dumps({**claims, "groups": ["gov-admins", "gov-legal"]}).encode())
    signed = "Signature verification failed"
    return {
        **kidless_id_tokens(claims),
        "the provider's kid, another key's signature": (
            jwt.encode(claims, forger_pem(), algorithm="RS256", headers={"kid": kid}),
            signed,
        ),
        "the provider's kid, its signature altered": (f"{header}.{payload}.{flipped}", signed),
        "the provider's signature over changed claims": (f"{header}.{promoted}.{signature}", signed),
        "alg none under the provider's kid": (_unsigned({"alg": "none", "kid": kid}, claims), "algorithm"),
        "HS256 under the provider's kid": (
            jwt.encode(claims, CLIENT_SECRET, algorithm="HS256", headers={"kid": kid}),
            "algorithm",
        ),
        "a kid that is not a string": (
            f"{b64(json.dumps({'alg': 'RS256', 'kid': {'$ne': ''}}).encode())}.{payload}.{signature}",
            "not a JWT",
        ),
        "a header that is a JSON list": (f"{b64(b'[1]')}.{payload}.{signature}", "not a JWT"),
        "a header that is not JSON": (f"{b64(b'{{{')}.{payload}.{signature}", "not a JWT"),
        "segments that are not base64": ("%%%.***.!!!", "not a JWT"),
        "two segments": (f"{header}.{payload}", "not a JWT"),
        "an empty token": ("", "no ID token"),
        "a number for a token": (12345, "no ID token"),
        "a JSON object for a token": ({"alg": "none"}, "no ID token"),
    }
