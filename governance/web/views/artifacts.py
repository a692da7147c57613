"""The artifact page: what its own files say of it (per file), its lineage, and naming its parent."""

from __future__ import annotations

import uuid
from typing import cast

from django.contrib import messages
from django.contrib.auth.models import User
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST

from governance.artifacts.selectors import artifact_get
from governance.artifacts.services import artifact_parent_set
from governance.core.roles import Role
from governance.web import selectors
from governance.web.views.common import act, roles_required


@roles_required()
def artifact(request: HttpRequest, code: str) -> HttpResponse:
    return render(request, "web/artifact.html", {"page": selectors.artifact_page(request.user, code)})


@require_POST
@roles_required(Role.REQUESTER)
def artifact_parent(request: HttpRequest, code: str) -> HttpResponse:
    """Name the checkpoint the artifact was made from (the service checks who and which)."""
    target = artifact_get(request.user, code)
    page = reverse("web:artifact", args=[target.code]) + "#lineage"
    try:
        parent_code = str(uuid.UUID(str(request.POST.get("parent", ""))))
    except ValueError:
        parent_code = ""
    parent = selectors.wizard_artifact(request.user, parent_code)
    if parent is None:
        messages.error(request, _("Choose the parent artifact."))
        return HttpResponseRedirect(page)
    return act(
        request,
        lambda: artifact_parent_set(
            artifact=target,
            parent=parent,
            derivation=str(request.POST.get("derivation", "")),
            actor=cast(User, request.user),
        ),
        _("The parent is named. Requests for this artifact are evaluated again."),
        page,
    )
