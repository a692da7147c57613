"""Team CI tokens (create, the secret shown once, revoke) and the approval packet verifier.
Writes go through governance.gate.services and governance.approvals.services, with the API's
own input serializer; reads through governance.web.selectors."""

from __future__ import annotations

from datetime import timedelta
from typing import Any, cast

from django.conf import settings
from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.translation import gettext as _
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_POST
from django_ratelimit.exceptions import Ratelimited

from governance.approvals.api import VerifyRateThrottle, verification_queue
from governance.approvals.choices import VerificationStatus
from governance.core.errors import ApplicationError, NotFoundError, PermissionDeniedError
from governance.core.models import Team
from governance.gate.api import CiTokenInputSerializer, ci_token_issue_from_input
from governance.gate.services import CI_SCOPES, ci_token_revoke
from governance.web import labels, selectors
from governance.web.forms import CiTokenForm, VerifyForm, apply_error
from governance.web.views.common import act, roles_required, validated

DEFAULT_LIFETIME = timedelta(days=90)


def _token_form(request: HttpRequest, teams: list[Team], data: Any = None) -> CiTokenForm:
    scopes = [(str(scope), f"{scope}: {labels.label('token_scope', scope)}") for scope in sorted(CI_SCOPES)]
    initial: dict[str, Any] = {
        "expires_at": (timezone.now() + DEFAULT_LIFETIME).date(),
        "team": teams[0].name if teams else "",
    }
    return CiTokenForm(data, teams=teams, scopes=scopes, initial=initial)


def _manager_teams(request: HttpRequest) -> list[Team]:
    """403 unless the user is an admin or leads a team (as the API refuses an issue)."""
    teams = selectors.token_teams(request.user)
    if not teams:
        raise PermissionDenied
    return teams


@never_cache
@roles_required()
def tokens(request: HttpRequest) -> HttpResponse:
    teams = _manager_teams(request)
    if request.method != "POST":
        return render(
            request,
            "web/tokens.html",
            {"form": _token_form(request, teams), "tokens": selectors.ci_tokens(request.user)},
        )
    form = _token_form(request, teams, request.POST)
    if form.is_valid():
        try:
            data = validated(CiTokenInputSerializer(data=form.payload()))
            team = next(t for t in teams if t.name == data["team"])
            token, secret = ci_token_issue_from_input(cast(User, request.user), team, data)
        except (NotFoundError, PermissionDeniedError):
            raise
        except ApplicationError as exc:
            apply_error(form, exc, {"deployments": "deployments", "expires_at": "expires_at"})
        else:
            # The one response that carries the secret: rendered here, never stored, never cached.
            return render(request, "web/token_created.html", {"token": token, "secret": secret})
    context = {"form": form, "tokens": selectors.ci_tokens(request.user)}
    return render(request, "web/tokens.html", context, status=400)


@require_POST
@roles_required()
def token_revoke(request: HttpRequest, code: str) -> HttpResponse:
    token = selectors.ci_token(request.user, code)
    if token is None:
        raise NotFoundError("no such CI token")
    return act(
        request,
        lambda: ci_token_revoke(actor=cast(User, request.user), token=token),
        _("Token %(name)s revoked: it no longer works.") % {"name": token.name},
        reverse("web:tokens"),
    )


@roles_required()
def verify(request: HttpRequest) -> HttpResponse:
    """The upload form. A file is queued for the heavy worker (never verified in this request) and
    the browser is sent to its verification page, which follows the worker's progress."""
    if request.method != "POST":
        return render(request, "web/verify.html", {"form": VerifyForm()})
    if not VerifyRateThrottle().allow_request(request, None):  # type: ignore[arg-type]
        raise Ratelimited()  # the API's budget: one per user, whichever way the file comes
    form = VerifyForm(request.POST, request.FILES)
    status = 400
    if form.is_valid():
        upload = form.cleaned_data["file"]
        if upload.size > settings.APPROVALS_MAX_UPLOAD_BYTES:
            form.add_error(
                "file", _("The file is larger than %(size)s bytes.") % {"size": settings.APPROVALS_MAX_UPLOAD_BYTES}
            )
        else:
            try:
                job = verification_queue(upload, cast(User, request.user))
            except (NotFoundError, PermissionDeniedError):
                raise
            except ApplicationError as exc:  # not a PDF, too many waiting, no PKI yet
                form.add_error("file", exc.message)
                status = exc.status if 400 <= exc.status < 500 else 400
            else:
                return redirect("web:verification", code=job.code)
    return render(request, "web/verify.html", {"form": form}, status=status)


@never_cache
@roles_required()
def verification(request: HttpRequest, code: str) -> HttpResponse:
    """One upload's verification, for its uploader: progress while the worker works (the section
    asks again every 2 s through htmx), then the report or the reason there is none."""
    job = selectors.verification_job(request.user, code)
    if job is None:
        raise NotFoundError("no such verification")
    report = None
    if job.status == VerificationStatus.DONE and job.result is not None:
        report = selectors.verification_report(job.result)
    context = {"form": VerifyForm(), "job": job, "report": report, "finished": job.finished_at is not None}
    return render(request, "web/verify.html", context)
