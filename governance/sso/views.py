"""Sign-in, step-up and sign-out through the OpenID Connect provider (mozilla-django-oidc views)."""

from __future__ import annotations

import logging
import time
from typing import Any
from urllib.parse import urlencode

import requests
from django.conf import settings
from django.contrib import auth
from django.contrib.auth import BACKEND_SESSION_KEY
from django.contrib.auth import views as auth_views
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseBase
from django.shortcuts import redirect
from django.urls import reverse
from mozilla_django_oidc.views import OIDCAuthenticationCallbackView, OIDCAuthenticationRequestView

from governance.sso.backends import AuthorizationCodeRefused, IdTokenRefused
from governance.sso.selectors import STEP_UP_REQUEST_SESSION_KEY

logger = logging.getLogger(__name__)
SSO_BACKEND = "governance.sso.backends.OidcBackend"


def _require_sso() -> None:
    if not settings.SSO_ENABLED:
        raise Http404("single sign-on is not configured")


class SsoSignInView(OIDCAuthenticationRequestView):
    """GET /oidc/authenticate/: to the provider. `?step_up=1` (signed in already) asks it to
    authenticate again whatever session it holds: prompt=login and max_age=0."""

    def get(self, request: HttpRequest) -> HttpResponse:
        _require_sso()
        return super().get(request)

    def get_extra_params(self, request: HttpRequest) -> dict[str, str]:
        params: dict[str, str] = dict(super().get_extra_params(request))
        if request.GET.get("step_up") == "1" and request.user.is_authenticated:
            request.session[STEP_UP_REQUEST_SESSION_KEY] = {"user": request.user.pk, "at": int(time.time())}
            params.update(prompt="login", max_age="0")
        else:
            request.session.pop(STEP_UP_REQUEST_SESSION_KEY, None)
        return params


class SsoCallbackView(OIDCAuthenticationCallbackView):
    """GET /oidc/callback/: the provider's answer. A refused ID token answers 403 naming the check."""

    def get(self, request: HttpRequest) -> HttpResponse:
        _require_sso()
        try:
            response: HttpResponse = super().get(request)
        except IdTokenRefused as exc:
            logger.warning("sso: sign-in refused: %s", exc)
            return HttpResponse(f"sign-in refused: {exc}\n", status=403, content_type="text/plain")
        except AuthorizationCodeRefused as exc:
            # A forged, replayed or expired code: the browser's request is bad (400), not the provider.
            logger.warning("sso: sign-in refused: %s", exc)
            return HttpResponse(
                "sign-in failed: the identity provider refused this sign-in code (used already, expired "
                "or not one it issued); start again\n",
                status=400,
                content_type="text/plain",
            )
        except requests.RequestException as exc:
            # The provider failed (5xx, an unexpected answer) or did not answer: a bad gateway. Its
            # own answer stays in the log, never in the page.
            logger.warning("sso: the provider failed the code exchange or did not answer: %s", type(exc).__name__)
            return HttpResponse(
                "sign-in failed: the identity provider did not answer as it should; try again later\n",
                status=502,
                content_type="text/plain",
            )
        if request.user.is_authenticated and request.session.get(BACKEND_SESSION_KEY) == SSO_BACKEND:
            # Roles follow the provider's groups only at sign-in: a bounded session means someone
            # removed at the provider loses access here within SSO_SESSION_MAX_AGE_S.
            request.session.set_expiry(settings.SSO_SESSION_MAX_AGE_S)
        return response


def step_up(request: HttpRequest) -> HttpResponse:
    """GET /oidc/step-up/?next=…: re-authenticate at the provider before signing."""
    _require_sso()
    if not request.user.is_authenticated:
        return redirect(settings.LOGIN_URL)
    query = {"step_up": "1"}
    if request.GET.get("next"):
        query["next"] = request.GET["next"]
    return redirect(f"{reverse('oidc_authentication_init')}?{urlencode(query)}")


def provider_logout_url(request: HttpRequest) -> str:
    """Where to send the browser to end the provider's session too (RP-initiated logout), when
    the provider has an end-session endpoint; else back to the sign-in page."""
    home = request.build_absolute_uri(reverse(settings.LOGOUT_REDIRECT_URL))
    endpoint = settings.OIDC_OP_LOGOUT_ENDPOINT
    id_token = request.session.get("oidc_id_token")
    if not endpoint or not id_token:
        return home
    return f"{endpoint}?{urlencode({'id_token_hint': id_token, 'post_logout_redirect_uri': home})}"


def logout(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
    """POST /accounts/logout/: signed in through the provider, the provider's session ends too;
    else Django's logout."""
    if request.method == "POST" and settings.SSO_ENABLED and request.session.get("oidc_id_token"):
        target = provider_logout_url(request)
        auth.logout(request)
        return redirect(target)
    return auth_views.LogoutView.as_view()(request, *args, **kwargs)
