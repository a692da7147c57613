"""Dashboard, request list, license catalog, clusters and the audit trail (read pages)."""

from __future__ import annotations

from typing import cast

from django.contrib import messages
from django.contrib.auth.models import User
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST

from governance.core.roles import Role, has_role
from governance.deployments.choices import Status
from governance.deployments.selectors import deployments_visible_to
from governance.evaluations.models import Cluster
from governance.evaluations.services import cluster_discover, cluster_test_connection
from governance.web import labels, selectors
from governance.web.forms import AuditFilterForm
from governance.web.pagecache import cached_page
from governance.web.views.common import CountedPaginator, act, roles_required

PAGE_SIZE = 50


@roles_required()
@cached_page
def dashboard(request: HttpRequest) -> HttpResponse:
    return render(request, "web/dashboard.html", {"board": selectors.dashboard(request.user)})


@roles_required()
@cached_page
def deployment_list(request: HttpRequest) -> HttpResponse:
    status = request.GET.get("status") or None
    rows, counted = selectors.deployments_page(request.user, status)
    page = CountedPaginator(rows, PAGE_SIZE, counted).get_page(request.GET.get("page"))
    statuses = [{"value": s, "label": labels.label("status", s)} for s in Status.values]
    return render(request, "web/deployment_list.html", {"page": page, "status": status, "statuses": statuses})


@roles_required()
@cached_page
def license_catalog(request: HttpRequest) -> HttpResponse:
    return render(request, "web/licenses.html", {"licenses": selectors.license_catalog()})


@roles_required()
@cached_page
def license_detail(request: HttpRequest, key: str) -> HttpResponse:
    return render(request, "web/license_detail.html", selectors.license_detail(key, request.GET.get("version")))


@roles_required()
@cached_page
def license_diff(request: HttpRequest, key: str) -> HttpResponse:
    detail = selectors.license_detail(key)
    old, new = request.GET.get("old", ""), request.GET.get("new", "")
    diff = selectors.license_version_diff(key, old, new) if old and new else None
    return render(request, "web/license_diff.html", {**detail, "diff": diff, "old": old, "new": new})


@roles_required()
@cached_page
def clusters(request: HttpRequest) -> HttpResponse:
    can_operate = has_role(request.user, Role.ENGINEERING_REVIEWER, Role.ADMIN)
    return render(request, "web/clusters.html", {"clusters": selectors.clusters(), "can_operate": can_operate})


@require_POST
@roles_required(Role.ENGINEERING_REVIEWER, Role.ADMIN)
def cluster_test(request: HttpRequest, code: str) -> HttpResponse:
    cluster = Cluster.objects.filter(code=code).first()
    if cluster is None:
        return HttpResponseRedirect(reverse("web:clusters"))
    tested = cluster_test_connection(cluster=cluster)
    if tested.last_test_ok:
        messages.success(request, _("Connection to %(name)s works.") % {"name": cluster.name})
    else:
        messages.error(
            request,
            _("Connection to %(name)s failed: %(reason)s") % {"name": cluster.name, "reason": tested.last_test_message},
        )
    return HttpResponseRedirect(reverse("web:clusters"))


@require_POST
@roles_required(Role.ENGINEERING_REVIEWER, Role.ADMIN)
def cluster_discover_view(request: HttpRequest, code: str) -> HttpResponse:
    cluster = Cluster.objects.filter(code=code).first()
    target = reverse("web:clusters")
    if cluster is None:
        return HttpResponseRedirect(target)
    return act(
        request,
        lambda: cluster_discover(cluster=cluster, actor=cast(User, request.user)),
        _("Discovery job queued; the GPUs appear here when it finishes."),
        target,
    )


@roles_required(Role.AUDITOR, Role.ADMIN, Role.LEGAL_REVIEWER, Role.ENGINEERING_REVIEWER)
@cached_page
def audit(request: HttpRequest) -> HttpResponse:
    visible = deployments_visible_to(request.user).order_by("-created_at")
    form = AuditFilterForm(request.GET or None, deployments=list(visible.values_list("code", "product_name")[:500]))
    filters = form.filters() if form.is_valid() else {}
    page = Paginator(selectors.audit_page(filters), PAGE_SIZE).get_page(request.GET.get("page"))
    query = request.GET.copy()
    query.pop("page", None)
    can_export = has_role(request.user, Role.AUDITOR, Role.ADMIN)
    return render(
        request, "web/audit.html", {"form": form, "page": page, "query": query.urlencode(), "can_export": can_export}
    )
