"""The request wizard (with its live license preview) and the request page with its actions.
Reads go through governance.web.selectors; writes call the deployments and evaluations services,
with input checked by the same serializers as the REST API."""

from __future__ import annotations

from typing import Any, cast

from django.contrib.auth.models import User
from django.db import transaction
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST
from django_ratelimit.exceptions import Ratelimited

from governance.approvals import services as approval_services
from governance.approvals.attempts import signoff_attempt, signoff_budget_allows
from governance.artifacts.api import ArtifactInputSerializer
from governance.artifacts.services import artifact_register
from governance.core.errors import ApplicationError, NotFoundError, invalid_input
from governance.core.models import Team
from governance.core.roles import Role
from governance.deployments import services
from governance.deployments.api import DeploymentInputSerializer, UsageInputSerializer
from governance.deployments.envelope import gate_check_command
from governance.deployments.models import DeploymentRequest
from governance.deployments.selectors import deployment_get, deployment_get_for_usage, latest_capacity_plan
from governance.evaluations.evals import (
    artifact_location_register,
    eval_screening_of_deployment,
    eval_served_request,
    local_checkpoint_config,
    local_weights_digest,
)
from governance.evaluations.models import Cluster
from governance.evaluations.selectors import artifact_weights_precision, cluster_by_name
from governance.sso.selectors import step_up_of_session
from governance.web import selectors
from governance.web.forms import (
    EvalRunForm,
    ObligationAckForm,
    ObligationReviewForm,
    ReviewForm,
    UsageForm,
    WaiverForm,
    WizardForm,
    apply_error,
)
from governance.web.views.common import act, roles_required, validated
from planner.quant.names import SCHEME_NAMES

# Where the API's field names land on the wizard form.
WIZARD_FIELDS = {
    "name": "new_name",
    "source_repo": "new_source_repo",
    "revision": "new_revision",
    "weights_digest": "new_weights_digest",
    "license": "new_license",
    "architecture_key": "new_architecture_key",
    "config": "new_config",
    "quantization_config": "new_quantization_config",
    "parent": "new_parent",
    "derivation": "new_derivation",
    "path": "new_path",
    "manifest": "new_path",
    "cluster": "new_cluster",
    "serving_plan.engine": "engine",
    "serving_plan.precision": "precision",
    "serving_plan.gpu": "gpu",
    "serving_plan.gpu_spec": "gpu_spec",
    "serving_plan.kv_dtype": "kv_dtype",
    "serving_plan.max_model_len": "max_model_len",
    "serving_plan.concurrency": "concurrency",
    "serving_plan.tp": "tp",
    "serving_plan.pp": "pp",
    "serving_plan.ep": "ep",
    "serving_plan.max_gpus": "max_gpus",
    "facts.monthly_revenue.amount": "revenue_amount",
    "facts.monthly_revenue.currency": "revenue_currency",
    "facts.derivative.kind": "derivative_kind",
    "facts.derivative.distribution": "derivative_distribution",
    "facts.derivative.name": "derivative_name",
}


def _user(request: HttpRequest) -> User:
    return cast(User, request.user)


def _wizard_form(request: HttpRequest, data: Any = None) -> WizardForm:
    choices = selectors.wizard_choices(request.user)
    initial = {"artifact": request.GET.get("artifact", "")}
    return WizardForm(
        data,
        artifacts=choices["artifacts"],
        licenses=choices["licenses"],
        teams=choices["teams"],
        clusters=choices["clusters"],
        initial=initial,
    )


def _wizard_page(request: HttpRequest, form: WizardForm, **context: Any) -> dict[str, Any]:
    """The wizard's context: the form, and what the picked artifact's own files say of it."""
    code = str((form.data.get("artifact") if form.is_bound else form.initial.get("artifact")) or "")
    return {"form": form, "described": selectors.wizard_artifact_facts(request.user, code), **context}


def _preview(request: HttpRequest, form: WizardForm) -> dict[str, Any]:
    """The license decision and the capacity verdict for what is typed so far (the template's
    `preview` and `capacity`)."""
    form.is_valid()  # the preview uses whatever is valid so far
    artifact = selectors.wizard_artifact(request.user, form.selected_artifact_code())
    data = form.cleaned_data
    if artifact is not None:
        model, path = artifact.architecture_key or artifact.config, artifact.source_repo
    else:
        model, path = data.get("new_architecture_key") or data.get("new_config"), data.get("new_source_repo") or ""
    return {
        "preview": selectors.license_preview(artifact, data.get("new_license") or "", form.facts()),
        "capacity": selectors.capacity_preview(
            model,
            path,
            form.serving_plan_so_far(artifact_weights_precision(artifact).precision if artifact is not None else ""),
        ),
    }


@roles_required(Role.REQUESTER)
def wizard(request: HttpRequest) -> HttpResponse:
    if request.method != "POST":
        form = _wizard_form(request)
        return render(request, "web/wizard.html", _wizard_page(request, form))
    form = _wizard_form(request, request.POST)
    if "preview" in request.POST or not form.is_valid():  # the no-JavaScript preview, or errors to show
        return render(request, "web/wizard.html", _wizard_page(request, form, **_preview(request, form)))
    try:
        with transaction.atomic():
            deployment = _create(request, form)
    except ApplicationError as exc:
        apply_error(form, exc, WIZARD_FIELDS)
        context = _wizard_page(request, form, **_preview(request, form))
        return render(request, "web/wizard.html", context, status=400)
    return HttpResponseRedirect(reverse("web:deployment", args=[deployment.code]))


@roles_required(Role.REQUESTER)
def wizard_artifact(request: HttpRequest) -> HttpResponse:
    """htmx: what the artifact picked in the wizard says of itself (precision, parent, license)."""
    described = selectors.wizard_artifact_facts(request.user, str(request.GET.get("artifact", "")))
    return render(request, "web/partials/artifact_facts.html", {"described": described})


def _create(request: HttpRequest, form: WizardForm) -> Any:
    user = _user(request)
    team = Team.objects.filter(members=user, name=form.cleaned_data.get("team") or "").first()
    if team is None:
        raise ApplicationError(_("You are not a member of any team; ask an administrator."))
    artifact = selectors.wizard_artifact(user, form.selected_artifact_code())
    if artifact is None:
        artifact = _register(user, team, form)
    payload = {
        "artifact": str(artifact.code),
        "product_name": form.cleaned_data["product_name"],
        "environments": form.environment_list(),
        "facts": form.facts(),
        # left empty, the precision the weights are stored in (what the checkpoint says, not what is typed)
        "serving_plan": form.serving_plan(stored_precision=artifact_weights_precision(artifact).precision),
    }
    data = validated(DeploymentInputSerializer(data=payload, context={"user": user}))
    data["team"] = team  # the team chosen; the service checks membership and that the artifact is usable by it
    # The check submit makes, with its message, before anything is written: the wizard does not create
    # a request that cannot be submitted (the API creates the draft and refuses at submit).
    services.require_servable_precision(DeploymentRequest(artifact=artifact, serving_plan=data["serving_plan"]))
    return services.deployment_create(actor=user, data=data)


def _register(user: User, team: Team, form: WizardForm) -> Any:
    """A new artifact from the wizard's fields, and its location when given (its files are then read
    there: the inspection is queued after commit)."""
    payload = form.artifact_payload()
    where = form.location()
    cluster = None
    if where is not None:
        cluster = cluster_by_name(where[0])
        if cluster is None:
            raise invalid_input("cluster", "choose the cluster the files lie on")
        if not where[1]:
            raise invalid_input("path", "the checkpoint directory on the cluster")
        if not payload["weights_digest"]:
            payload["weights_digest"] = local_weights_digest(cluster=cluster, path=where[1])
        if not payload.get("architecture_key") and payload.get("config") is None:
            found = local_checkpoint_config(cluster=cluster, path=where[1])
            if found is not None:
                payload["config"] = found
    data = validated(ArtifactInputSerializer(data=payload, context={"user": user, "team": team}))
    artifact = artifact_register(actor=user, team=team, data=data)
    if cluster is not None and where is not None:
        artifact_location_register(artifact=artifact, cluster=cluster, path=where[1], actor=user)
    return artifact


@require_POST
@roles_required(Role.REQUESTER)
def wizard_preview(request: HttpRequest) -> HttpResponse:
    """htmx: the license decision and the capacity verdict for what is typed so far."""
    form = _wizard_form(request, request.POST)
    return render(request, "web/partials/preview.html", {**_preview(request, form), "form": form})


# --- the request page -------------------------------------------------------------------------


@roles_required()
def deployment(request: HttpRequest, code: str) -> HttpResponse:
    page = selectors.deployment_page(request.user, code)
    context: dict[str, Any] = {"page": page, "d": page.request}
    # Only the forms the page shows (the template's conditions): each form copies its fields.
    if page.actions["waive"] and page.findings_waivable:
        context["waiver_form"] = WaiverForm(findings=page.findings_waivable)
    if page.actions["review_roles"]:
        context["review_form"] = ReviewForm(
            roles=page.actions["review_roles"], initial={"evidence_digest": page.request.evidence_digest}
        )
    if page.actions["usage"]:
        context["usage_form"] = UsageForm()
    if page.actions["eval_form"]:
        precision = str((page.request.serving_plan or {}).get("precision", ""))
        context["eval_form"] = EvalRunForm(
            clusters=list(Cluster.objects.order_by("name").values_list("name", flat=True)),
            # the scheme the request will serve, when it is one the eval job quantizes to
            initial={"scheme": precision} if precision in SCHEME_NAMES else {},
        )
    if page.request.evidence:
        # the approved config as the gate checks it, ready for a pipeline (GOV_TOKEN from its secrets)
        context["gate_command"] = gate_check_command(
            deployment=str(page.request.code),
            environment=(page.request.environments or ["production"])[0],
            evidence=page.request.evidence,
            base_url=request.build_absolute_uri("/"),
        )
    return render(request, "web/deployment.html", context)


@roles_required()
def deployment_evals(request: HttpRequest, code: str) -> HttpResponse:
    """htmx: the eval-run panel, polled while a run is active; opened directly (no HX-Request
    header: a bookmarked or shared link), the same panel inside a whole page."""
    runs = selectors.deployment_evals(request.user, code)
    if request.headers.get("HX-Request") == "true":
        return render(request, "web/partials/evals.html", {"evals": runs, "code": code})
    target = deployment_get(request.user, code)
    return render(request, "web/evals.html", {"evals": runs, "code": code, "d": target})


@roles_required()
def deployment_blockers(request: HttpRequest, code: str) -> HttpResponse:
    """htmx: the blocker list, polled while the capacity plan computes or an eval runs."""
    return render(request, "web/partials/blockers.html", selectors.deployment_blockers_part(request.user, code))


def _page(code: str, anchor: str = "") -> str:
    return reverse("web:deployment", args=[code]) + (f"#{anchor}" if anchor else "")


@require_POST
@roles_required(Role.REQUESTER)
def deployment_submit(request: HttpRequest, code: str) -> HttpResponse:
    target = deployment_get(request.user, code)
    return act(
        request,
        lambda: services.deployment_submit(deployment=target, actor=_user(request)),
        _("Submitted for review. The capacity plan is being computed."),
        _page(code),
    )


@require_POST
@roles_required()
def deployment_withdraw(request: HttpRequest, code: str) -> HttpResponse:
    """The requester or a team lead takes a draft or submitted request back (the service checks who)."""
    target = deployment_get(request.user, code)
    reason = str(request.POST.get("reason", ""))[:4000]
    return act(
        request,
        lambda: services.deployment_withdraw(deployment=target, actor=_user(request), reason=reason),
        _("Withdrawn. The request has left every queue."),
        _page(code),
    )


@require_POST
@roles_required(Role.LEGAL_REVIEWER, Role.ENGINEERING_REVIEWER)
def deployment_start_review(request: HttpRequest, code: str) -> HttpResponse:
    target = deployment_get(request.user, code)
    return act(
        request,
        lambda: services.deployment_start_review(deployment=target, actor=_user(request)),
        _("Review started."),
        _page(code),
    )


def _obligation(user: Any, code: str, item: str) -> Any:
    found = deployment_get(user, code).obligations.filter(code=item).first()
    if found is None:
        raise NotFoundError("no such obligation")
    return found


@require_POST
@roles_required(Role.REQUESTER)
def obligation_acknowledge(request: HttpRequest, code: str, item: str) -> HttpResponse:
    obligation = _obligation(request.user, code, item)
    form = ObligationAckForm(request.POST)
    how_met = form.cleaned_data["how_met"] if form.is_valid() else ""
    return act(
        request,
        lambda: services.obligation_acknowledge(item=obligation, actor=_user(request), how_met=how_met),
        _("Obligation acknowledged."),
        _page(code, "obligations"),
    )


@require_POST
@roles_required(Role.LEGAL_REVIEWER)
def obligation_review(request: HttpRequest, code: str, item: str) -> HttpResponse:
    obligation = _obligation(request.user, code, item)
    form = ObligationReviewForm(request.POST)
    if not form.is_valid():
        return act(request, lambda: _raise_form(form), "", _page(code, "obligations"))
    return act(
        request,
        lambda: services.obligation_review(
            item=obligation,
            actor=_user(request),
            accept=form.cleaned_data["accept"],
            comment=form.cleaned_data["comment"],
        ),
        _("Obligation reviewed."),
        _page(code, "obligations"),
    )


def _raise_form(form: Any) -> None:
    errors = {name: [str(e) for e in errs] for name, errs in form.errors.items()}
    summary = "; ".join(f"{name}: {' '.join(msgs)}" for name, msgs in errors.items())
    raise ApplicationError(f"Invalid input. {summary}", extra={"fields": errors})


@require_POST
@roles_required(Role.LEGAL_REVIEWER)
def waiver_grant(request: HttpRequest, code: str) -> HttpResponse:
    page_findings = selectors.deployment_page(request.user, code).findings_waivable
    form = WaiverForm(request.POST, findings=page_findings)
    if not form.is_valid():
        return act(request, lambda: _raise_form(form), "", _page(code, "waivers"))
    license_key, finding_code, clause = form.finding_parts()
    target = deployment_get(request.user, code)
    return act(
        request,
        lambda: services.waiver_grant(
            deployment=target,
            actor=_user(request),
            license_key=license_key,
            finding_code=finding_code,
            clause=clause,
            reason=form.cleaned_data["reason"],
            expires_at=form.cleaned_data["expires_at"],
        ),
        _("Waiver recorded."),
        _page(code, "waivers"),
    )


@require_POST
@roles_required(Role.LEGAL_REVIEWER, Role.ENGINEERING_REVIEWER)
def deployment_review(request: HttpRequest, code: str) -> HttpResponse:
    if not signoff_budget_allows(request):  # the password is re-entered here: the API's budget, shared
        raise Ratelimited()
    target = deployment_get(request.user, code)
    actions = selectors.deployment_actions(request.user, target)
    form = ReviewForm(request.POST, roles=actions["review_roles"])
    if not form.is_valid():
        return act(request, lambda: _raise_form(form), "", _page(code, "signoff"))
    data = form.cleaned_data
    user = _user(request)

    def signed() -> Any:
        return signoff_attempt(
            request,
            user,
            lambda: approval_services.sign_off(
                deployment=target,
                user=user,
                role=data["role"],
                decision=data["verdict"],
                password=data["password"],
                step_up_id=step_up_of_session(request, user),
                evidence_digest=data["evidence_digest"],
                comment=data["comment"],
            ),
            lambda: approval_services.signoff_refuse_locked_out(
                deployment=target,
                user=user,
                role=data["role"],
                decision=data["verdict"],
                evidence_digest=data["evidence_digest"],
            ),
        )

    return act(
        request,
        signed,
        _("Your decision is recorded; the packet is being signed (the sign-off list shows when it is)."),
        _page(code, "signoff"),
    )


@require_POST
@roles_required(Role.LEGAL_REVIEWER, Role.ENGINEERING_REVIEWER)
def packet_preview(request: HttpRequest, code: str) -> HttpResponse:
    """Render the exact packet a reviewer is about to sign (the service refuses outside review)."""
    target = deployment_get(request.user, code)
    return act(
        request,
        lambda: approval_services.packet_render_for_review(deployment=target, actor=_user(request)),
        _("The packet you would sign is ready: download it below and read it before deciding."),
        _page(code, "signoff"),
    )


@require_POST
@roles_required(Role.REQUESTER)
def usage_report(request: HttpRequest, code: str) -> HttpResponse:
    # The request first: someone outside its team gets 404, not a form error about a page they cannot see.
    target = deployment_get_for_usage(request.user, code, token=None)  # a requester of the owning team
    form = UsageForm(request.POST)
    if not form.is_valid():
        return act(request, lambda: _raise_form(form), "", _page(code, "usage"))

    def record() -> None:
        revenue = form.revenue()
        validated(
            UsageInputSerializer(
                data={
                    "month": form.cleaned_data["month"],
                    "monthly_active_users": form.cleaned_data["monthly_active_users"],
                    **({"monthly_revenue": revenue} if revenue else {}),
                }
            )
        )
        services.usage_report_record(
            deployment=target,
            actor=_user(request),
            month=form.cleaned_data["month"],
            monthly_active_users=form.cleaned_data["monthly_active_users"],
            revenue=revenue,
        )

    return act(request, record, _("Usage recorded."), _page(code, "usage"))


@require_POST
@roles_required(Role.ENGINEERING_REVIEWER, Role.ADMIN)
def eval_run_create(request: HttpRequest, code: str) -> HttpResponse:
    target = deployment_get(request.user, code)
    names = list(Cluster.objects.order_by("name").values_list("name", flat=True))
    form = EvalRunForm(request.POST, clusters=names)
    if not form.is_valid():
        return act(request, lambda: _raise_form(form), "", _page(code, "evals"))
    data = form.cleaned_data
    cluster = Cluster.objects.get(name=data["cluster"])
    options = {
        "threshold": data["threshold"],
        "max_cases_per_category": data.get("max_cases_per_category"),
        "max_new_tokens": data["max_new_tokens"],
    }

    def start() -> object:
        if data["kind"] == "screening":
            return eval_screening_of_deployment(
                deployment=target, cluster=cluster, scheme=data["scheme"], actor=_user(request), **options
            )
        stored = latest_capacity_plan(target)
        return eval_served_request(
            deployment=target,
            cluster=cluster,
            actor=_user(request),
            plan_result=stored.result if stored is not None else None,
            **options,
        )

    return act(
        request,
        start,
        _("Eval run queued."),
        _page(code, "evals"),
    )
