"""Dashboard, request list, license catalog, clusters and the audit trail (read pages)."""

from __future__ import annotations

import csv
import io
from datetime import date, timedelta
from typing import cast

from django.contrib import messages
from django.contrib.auth.models import User
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseBadRequest, HttpResponseRedirect
from django.shortcuts import render
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils import timezone, translation
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST

from governance.core.csvcells import csv_safe_row
from governance.core.roles import Role, has_role
from governance.deployments.choices import Status
from governance.deployments.selectors import deployments_visible_to
from governance.evaluations.models import Cluster
from governance.evaluations.services import cluster_discover, cluster_test_connection
from governance.licenses.selectors import (
    license_list,
    license_text_closest,
    license_text_match,
    license_texts_visible_to,
    license_version_get,
)
from governance.licenses.services import license_text_classify
from governance.web import labels, selectors
from governance.web.forms import AuditFilterForm
from governance.web.selectors.report import REPORT_COLUMNS, period_report
from governance.web.views.common import CountedPaginator, act, roles_required

PAGE_SIZE = 50


@roles_required()
def dashboard(request: HttpRequest) -> HttpResponse:
    return render(request, "web/dashboard.html", {"board": selectors.dashboard(request.user)})


@roles_required()
def deployment_list(request: HttpRequest) -> HttpResponse:
    status = request.GET.get("status") or None
    rows, counted = selectors.deployments_page(request.user, status)
    page = CountedPaginator(rows, PAGE_SIZE, counted).get_page(request.GET.get("page"))
    statuses = [{"value": s, "label": labels.label("status", s)} for s in Status.values]
    return render(request, "web/deployment_list.html", {"page": page, "status": status, "statuses": statuses})


@roles_required()
def license_catalog(request: HttpRequest) -> HttpResponse:
    return render(request, "web/licenses.html", {"licenses": selectors.license_catalog()})


@roles_required()
def license_detail(request: HttpRequest, key: str) -> HttpResponse:
    return render(request, "web/license_detail.html", selectors.license_detail(key, request.GET.get("version")))


@roles_required()
def license_diff(request: HttpRequest, key: str) -> HttpResponse:
    detail = selectors.license_detail(key)
    old, new = request.GET.get("old", ""), request.GET.get("new", "")
    diff = selectors.license_version_diff(key, old, new) if old and new else None
    return render(request, "web/license_diff.html", {**detail, "diff": diff, "old": old, "new": new})


@roles_required(Role.LEGAL_REVIEWER, Role.AUDITOR, Role.ADMIN)
def license_text(request: HttpRequest, fingerprint: str) -> HttpResponse:
    """A license text found in a checkpoint, its diff from the closest classified one, and (legal)
    the form that classifies it."""
    text = license_texts_visible_to(request.user).filter(fingerprint=fingerprint).first()
    if text is None:
        raise Http404
    closest, ratio, diff = license_text_closest(text)
    context = {
        "text": text,
        "match": license_text_match(text.fingerprint),
        "closest": (
            {
                "fingerprint": closest.fingerprint,
                "classified_as": str(closest.classified_as),
                "similarity": f"{ratio:.0%}",
                "diff": diff,
            }
            if closest
            else None
        ),
        "can_classify": has_role(request.user, Role.LEGAL_REVIEWER),
        "licenses": license_list(),
    }
    return render(request, "web/license_text.html", context)


@require_POST
@roles_required(Role.LEGAL_REVIEWER)
def license_text_classify_view(request: HttpRequest, fingerprint: str) -> HttpResponse:
    text = license_texts_visible_to(request.user).filter(fingerprint=fingerprint).first()
    if text is None:
        raise Http404
    key, note = request.POST.get("license", ""), request.POST.get("note", "")
    return act(
        request,
        lambda: license_text_classify(
            text=text, version=license_version_get(key, None), actor=cast(User, request.user), note=note
        ),
        _("Classified. Artifacts carrying this text now match it."),
        reverse("web:license-text", args=[fingerprint]),
    )


@roles_required()
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
def audit(request: HttpRequest) -> HttpResponse:
    visible = deployments_visible_to(request.user).order_by("-created_at")
    form = AuditFilterForm(request.GET or None, deployments=list(visible.values_list("code", "product_name")[:500]))
    filters = form.filters() if form.is_valid() else {}
    page = Paginator(selectors.audit_page(request.user, filters), PAGE_SIZE).get_page(request.GET.get("page"))
    query = request.GET.copy()
    query.pop("page", None)
    can_export = has_role(request.user, Role.AUDITOR, Role.ADMIN)
    return render(
        request, "web/audit.html", {"form": form, "page": page, "query": query.urlencode(), "can_export": can_export}
    )


# --- the period report ---------------------------------------------------------------------------


def _report_dates(request: HttpRequest) -> tuple[date, date] | HttpResponse:
    """`since` and `until` (YYYY-MM-DD, both included; default: the last 30 days), or a 400 naming the field."""
    today = timezone.now().date()
    found: dict[str, date] = {}
    for name, default in (("since", today - timedelta(days=30)), ("until", today)):
        text = request.GET.get(name, "")
        try:
            found[name] = date.fromisoformat(text) if text else default
        except ValueError:
            return HttpResponseBadRequest(f"{name}: not a date (YYYY-MM-DD): {text[:40]}", content_type="text/plain")
    if found["since"] > found["until"]:
        return HttpResponseBadRequest("since: after until", content_type="text/plain")
    return found["since"], found["until"]


@roles_required(Role.AUDITOR, Role.ADMIN)
def audit_report_csv(request: HttpRequest) -> HttpResponse:
    dates = _report_dates(request)
    if isinstance(dates, HttpResponse):
        return dates
    rows = period_report(*dates)
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=REPORT_COLUMNS)
    writer.writeheader()
    for row in rows:
        writer.writerow(csv_safe_row(row))
    response = HttpResponse(buffer.getvalue(), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="period-report-{dates[0]}-{dates[1]}.csv"'
    return response


@roles_required(Role.AUDITOR, Role.ADMIN)
def audit_report_pdf(request: HttpRequest) -> HttpResponse:
    from weasyprint import HTML  # seconds to import: only when a PDF is asked for

    dates = _report_dates(request)
    if isinstance(dates, HttpResponse):
        return dates
    # The report's text is English: its dates are too, whatever the auditor's UI language (one
    # format per document, as per language).
    with translation.override("en"):
        html = render_to_string(
            "web/period_report.html", {"rows": period_report(*dates), "since": dates[0], "until": dates[1]}
        )
    pdf = HTML(string=html).write_pdf()
    response = HttpResponse(pdf, content_type="application/pdf")
    response["Content-Disposition"] = f'attachment; filename="period-report-{dates[0]}-{dates[1]}.pdf"'
    return response
