"""Server-rendered UI views. They read through selectors and write through services only."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from governance.core.roles import user_roles


@login_required
def home(request: HttpRequest) -> HttpResponse:
    return render(request, "web/home.html", {"roles": sorted(user_roles(request.user))})
