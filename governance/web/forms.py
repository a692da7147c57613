"""HTML forms: labels, help text and types for the browser. They only shape input into the
dictionaries the services take; the services (and the API's serializers) hold every rule."""

from __future__ import annotations

import json
from typing import Any, cast

from django import forms
from django.utils.translation import gettext_lazy as _

from governance.core.errors import ApplicationError
from governance.deployments.choices import Engine, ReviewVerdict
from governance.licenses.facts import AUP_CATEGORIES, DERIVATIVE_KINDS, DISTRIBUTIONS
from planner.quant.names import SCHEME_NAMES
from planner.specs import gpus, precisions

USE_CASE_CHOICES = [
    ("external_commercial", _("External commercial product")),
    ("internal", _("Internal use only")),
    ("evaluation", _("Evaluation")),
    ("research", _("Research")),
]
DERIVATIVE_LABELS = {
    "none": _("None: the weights as published"),
    "fine_tune": _("Fine-tune"),
    "quantize": _("Quantize"),
    "distill": _("Distill"),
    "merge": _("Merge"),
}
DISTRIBUTION_LABELS = {
    "none": _("Not distributed"),
    "internal": _("Inside the company"),
    "public": _("Published"),
}
AUP_LABELS = {
    "military": _("Military"),
    "weapons": _("Weapons"),
    "critical_infrastructure": _("Critical infrastructure"),
    "medical_advice": _("Medical advice"),
    "law_enforcement": _("Law enforcement"),
    "immigration": _("Immigration"),
    "surveillance": _("Surveillance"),
    "automated_legal_decisions": _("Automated legal decisions"),
    "disinformation": _("Disinformation"),
    "csam": _("Child sexual abuse material"),
    "illegal_activity": _("Illegal activity"),
    "impersonation": _("Impersonation"),
    "malware": _("Malware"),
    "harassment": _("Harassment"),
    "unlicensed_professional_practice": _("Unlicensed professional practice"),
    "discrimination": _("Discrimination"),
    "personal_data": _("Personal data without consent"),
    "fraud": _("Fraud, scams, phishing"),
    "spam": _("Spam"),
    "undisclosed_ai_content": _("Undisclosed AI-generated content"),
    "defamation": _("Defamation"),
    "sexually_explicit": _("Sexually explicit content"),
    "violent_extremism": _("Violent extremism or terrorism"),
    "self_harm": _("Promoting self-harm"),
    "ip_infringement": _("Intellectual-property infringement"),
    "safety_circumvention": _("Circumventing safety filters"),
}


def apply_error(form: forms.Form, error: ApplicationError, prefixes: dict[str, str] | None = None) -> None:
    """Show a service's 400 on the form: each named field on its input, the rest at the top."""
    fields = (error.extra or {}).get("fields") or {}
    placed = False
    for name, messages in fields.items():
        target = (prefixes or {}).get(name, name)
        target = target.removeprefix("facts.").replace(".", "_")
        if target in form.fields:
            for message in messages if isinstance(messages, list) else [messages]:
                form.add_error(target, str(message))
            placed = True
    if not placed:
        form.add_error(None, error.message)


class WizardForm(forms.Form):
    """One page: the artifact, the deployment's facts, derivative plans and the serving plan."""

    # -- the artifact
    artifact = forms.ChoiceField(
        label=_("Model artifact"),
        required=False,
        help_text=_("A registered checkpoint, or register a new one below."),
    )
    new_name = forms.CharField(label=_("Name"), required=False, max_length=200)
    new_source_repo = forms.CharField(
        label=_("Source repository"), required=False, max_length=300, help_text=_("e.g. moonshotai/Kimi-K2-Instruct")
    )
    new_revision = forms.CharField(label=_("Revision"), required=False, max_length=100)
    new_weights_digest = forms.CharField(
        label=_("Weights digest"),
        required=False,
        max_length=71,
        help_text=_("sha256:… of the weight files (manage.py artifact_digest DIR computes it)."),
    )
    new_license = forms.ChoiceField(label=_("License"), required=False)
    new_architecture_key = forms.CharField(
        label=_("Architecture (planner catalog key)"), required=False, max_length=64, help_text=_("e.g. kimi-k2")
    )
    new_config = forms.CharField(
        label=_("config.json"),
        required=False,
        widget=forms.Textarea(attrs={"rows": 4}),
        help_text=_("Paste the checkpoint's config.json when the architecture is not in the catalog."),
    )
    # -- the deployment
    product_name = forms.CharField(label=_("Product name"), max_length=200)
    environments = forms.CharField(
        label=_("Environments"),
        required=False,
        initial="production",
        help_text=_("Comma-separated, e.g. staging, production."),
    )
    use_case = forms.ChoiceField(
        label=_("Use case"),
        choices=USE_CASE_CHOICES,
        help_text=_("Several licenses grant research or internal use freely and restrict commercial use."),
    )
    commercial_entity = forms.BooleanField(label=_("We are a commercial entity"), required=False, initial=True)
    hosted_service = forms.BooleanField(
        label=_("Served to third parties (API, SaaS, app)"),
        required=False,
        help_text=_("Hosting for others triggers separate-license and display terms in some licenses."),
    )
    production = forms.BooleanField(label=_("Production use"), required=False, initial=True)
    monthly_active_users = forms.IntegerField(
        label=_("Monthly active users"),
        min_value=0,
        required=False,
        help_text=_("Kimi K2 and Qwen count users at any time; thresholds are strict (more than)."),
    )
    monthly_active_users_at_model_release = forms.IntegerField(
        label=_("Monthly active users on the model's release date"),
        min_value=0,
        required=False,
        help_text=_("Llama counts monthly active users on the model's release date."),
    )
    revenue_amount = forms.DecimalField(
        label=_("Monthly revenue"),
        min_value=0,
        max_digits=20,
        decimal_places=2,
        required=False,
        help_text=_(
            "Kimi K2 requires a display notice above USD 20 million a month (converted at the FX table's rate)."
        ),
    )
    revenue_currency = forms.CharField(label=_("Currency"), max_length=3, initial="USD")
    org_country = forms.CharField(
        label=_("Principal place of business"),
        max_length=2,
        required=False,
        help_text=_("ISO country code. Some licenses do not grant multimodal rights in the EU."),
    )
    multimodal = forms.BooleanField(label=_("Multimodal model"), required=False)
    outputs_used_to_train_other_models = forms.BooleanField(
        label=_("Outputs used to train other models"),
        required=False,
        help_text=_("Some licenses forbid using outputs to improve other models."),
    )
    intended_uses = forms.MultipleChoiceField(
        label=_("Intended uses on an acceptable-use list"),
        required=False,
        choices=[(c, AUP_LABELS[c]) for c in AUP_CATEGORIES],
        widget=forms.CheckboxSelectMultiple,
        help_text=_("Tick any that apply; a prohibited use blocks the deployment."),
    )
    guardrails_removed = forms.BooleanField(
        label=_("Safety guardrails removed"),
        required=False,
        help_text=_("Some licenses end when guardrails are removed."),
    )
    # -- derivative plans
    derivative_kind = forms.ChoiceField(
        label=_("Derivative"), choices=[(k, DERIVATIVE_LABELS[k]) for k in DERIVATIVE_KINDS], initial="none"
    )
    derivative_distribution = forms.ChoiceField(
        label=_("Distribution of the derivative"),
        choices=[(k, DISTRIBUTION_LABELS[k]) for k in DISTRIBUTIONS],
        initial="none",
        help_text=_("Naming and notice terms apply when a derivative is distributed."),
    )
    derivative_name = forms.CharField(label=_("Derivative name"), max_length=200, required=False)
    redistributes_original_weights = forms.BooleanField(label=_("Original weights redistributed"), required=False)
    # -- serving plan
    engine = forms.ChoiceField(label=_("Serving engine"), choices=Engine.choices, initial=Engine.VLLM)
    precision = forms.ChoiceField(label=_("Precision"), choices=[(p, p) for p in sorted(precisions())])
    gpu = forms.ChoiceField(label=_("GPU"), choices=[(g, g) for g in sorted(gpus())], initial="h200")
    kv_dtype = forms.ChoiceField(label=_("KV cache type"), choices=[("bf16", "bf16"), ("fp8", "fp8")])
    max_model_len = forms.IntegerField(label=_("Context length (tokens)"), min_value=16, initial=131072)
    concurrency = forms.IntegerField(label=_("Concurrent sequences"), min_value=1, initial=8)
    tp = forms.IntegerField(label=_("Tensor parallel"), min_value=1, max_value=16, required=False)
    pp = forms.IntegerField(label=_("Pipeline parallel"), min_value=1, max_value=64, required=False)
    ep = forms.IntegerField(label=_("Expert parallel"), min_value=1, max_value=256, required=False)

    def __init__(self, *args: Any, artifacts: list[Any], licenses: list[tuple[str, str]], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.artifacts = {str(a.code): a for a in artifacts}
        cast(forms.ChoiceField, self.fields["artifact"]).choices = [("", _("— register a new artifact —"))] + [
            (str(a.code), f"{a.name} ({a.license.key})") for a in artifacts
        ]
        cast(forms.ChoiceField, self.fields["new_license"]).choices = [("", "—")] + [
            (key, f"{name} ({key})") for key, name in licenses
        ]

    def clean_new_config(self) -> Any:
        text = self.cleaned_data.get("new_config") or ""
        if not text.strip():
            return None
        try:
            return json.loads(text)
        except ValueError as exc:
            raise forms.ValidationError(_("Not valid JSON: %(error)s"), params={"error": exc}) from None

    def selected_artifact(self) -> Any:
        return self.artifacts.get(self.cleaned_data.get("artifact") or "")

    def facts(self) -> dict[str, Any]:
        """The facts as the evaluate API takes them. Works on a partly valid form too (the live
        preview runs while the user is still typing): an unanswered fact is left out, so the
        engine assumes its most conservative value and says so."""
        data = self.cleaned_data
        facts: dict[str, Any] = {name: data[name] for name in (
            "use_case", "commercial_entity", "hosted_service", "production", "multimodal",
            "outputs_used_to_train_other_models", "redistributes_original_weights", "guardrails_removed",
            "monthly_active_users", "monthly_active_users_at_model_release") if data.get(name) is not None}  # fmt: skip
        if data.get("revenue_amount") is not None:
            facts["monthly_revenue"] = {"amount": float(data["revenue_amount"]),
                                        "currency": (data.get("revenue_currency") or "USD").upper()}  # fmt: skip
        if data.get("org_country"):
            facts["org_country"] = data["org_country"].upper()
        if data.get("derivative_kind"):
            facts["derivative"] = {"kind": data["derivative_kind"],
                                   "distribution": data.get("derivative_distribution") or "none",
                                   "name": data.get("derivative_name") or None}  # fmt: skip
        facts["intended_uses"] = list(data.get("intended_uses") or [])
        return facts

    def serving_plan(self) -> dict[str, Any]:
        data = self.cleaned_data
        plan = {name: data[name] for name in ("engine", "precision", "gpu", "kv_dtype", "max_model_len", "concurrency")}
        plan.update({name: data[name] for name in ("tp", "pp", "ep") if data.get(name)})
        return plan

    def environment_list(self) -> list[str]:
        return [e.strip() for e in (self.cleaned_data.get("environments") or "").split(",") if e.strip()]

    def artifact_payload(self) -> dict[str, Any]:
        """The register-artifact input (validated by the API's serializer in the view)."""
        data = self.cleaned_data
        payload: dict[str, Any] = {
            "name": data.get("new_name") or "",
            "source_repo": data.get("new_source_repo") or "",
            "revision": data.get("new_revision") or "",
            "weights_digest": data.get("new_weights_digest") or "",
            "license": data.get("new_license") or "",
        }
        if data.get("new_architecture_key"):
            payload["architecture_key"] = data["new_architecture_key"]
        if data.get("new_config") is not None:
            payload["config"] = data["new_config"]
        return payload


class ObligationAckForm(forms.Form):
    how_met = forms.CharField(
        label=_("How is it met?"),
        max_length=4000,
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text=_("e.g. where the notice is displayed."),
    )


class ObligationReviewForm(forms.Form):
    accept = forms.TypedChoiceField(
        label=_("Decision"),
        choices=[("true", _("Accept")), ("false", _("Reject"))],
        coerce=lambda v: v == "true",
    )
    comment = forms.CharField(label=_("Comment"), max_length=4000, required=False)


class WaiverForm(forms.Form):
    finding = forms.ChoiceField(label=_("Finding"))
    reason = forms.CharField(
        label=_("Reason and reference"),
        max_length=4000,
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text=_("e.g. the licensor's written approval and its reference."),
    )
    expires_at = forms.DateTimeField(
        label=_("Expires at"),
        widget=forms.DateTimeInput(attrs={"type": "datetime-local"}),
        input_formats=["%Y-%m-%dT%H:%M", "%Y-%m-%d %H:%M", "%Y-%m-%d"],
    )

    def __init__(self, *args: Any, findings: list[dict[str, Any]], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        cast(forms.ChoiceField, self.fields["finding"]).choices = [
            (f"{f['license']}|{f['code']}|{f['clause']}", f"{f['license']}: {f['code']} ({f['clause']})")
            for f in findings
        ]

    def finding_parts(self) -> tuple[str, str, str]:
        license_key, code, clause = self.cleaned_data["finding"].split("|", 2)
        return license_key, code, clause


class ReviewForm(forms.Form):
    role = forms.ChoiceField(label=_("Review as"))
    verdict = forms.ChoiceField(label=_("Verdict"), choices=[(ReviewVerdict.APPROVE, _("Approve")),
                                                              (ReviewVerdict.REJECT, _("Reject"))])  # fmt: skip
    evidence_digest = forms.RegexField(regex=r"^[0-9a-f]{64}$", widget=forms.HiddenInput)
    comment = forms.CharField(
        label=_("Comment"), max_length=4000, required=False, widget=forms.Textarea(attrs={"rows": 2})
    )
    password = forms.CharField(
        label=_("Your password"),
        max_length=4096,
        strip=False,
        widget=forms.PasswordInput(attrs={"autocomplete": "current-password"}),
        help_text=_("Signing asks for your password again: the signature is yours alone."),
    )

    def __init__(self, *args: Any, roles: list[dict[str, Any]], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        cast(forms.ChoiceField, self.fields["role"]).choices = [(r["value"], r["label"]) for r in roles]


class UsageForm(forms.Form):
    month = forms.RegexField(label=_("Month"), regex=r"^\d{4}-(0[1-9]|1[0-2])$", help_text=_("YYYY-MM"))
    monthly_active_users = forms.IntegerField(label=_("Monthly active users"), min_value=0)
    revenue_amount = forms.DecimalField(label=_("Monthly revenue"), min_value=0, max_digits=20, decimal_places=2,
                                        required=False)  # fmt: skip
    revenue_currency = forms.CharField(label=_("Currency"), max_length=3, initial="USD")

    def revenue(self) -> dict[str, Any] | None:
        amount = self.cleaned_data.get("revenue_amount")
        if amount is None:
            return None
        return {"amount": float(amount), "currency": self.cleaned_data["revenue_currency"].upper()}


class EvalRunForm(forms.Form):
    cluster = forms.ChoiceField(label=_("Cluster"))
    scheme = forms.ChoiceField(label=_("Quantization scheme"), choices=[(s, s) for s in sorted(SCHEME_NAMES)])
    model_path = forms.RegexField(
        label=_("Checkpoint directory on the cluster"),
        regex=r"^/[A-Za-z0-9_./-]{1,400}$",
        help_text=_("An absolute path; the baseline and the quantized model are both built from it."),
    )
    threshold = forms.FloatField(label=_("Gate threshold (failure rate)"), min_value=0.001, max_value=0.5, initial=0.05)
    max_cases_per_category = forms.IntegerField(
        label=_("Cases per category (empty: all)"), min_value=1, max_value=10_000, required=False
    )
    max_new_tokens = forms.IntegerField(
        label=_("Tokens generated per case"),
        min_value=1,
        max_value=1024,
        initial=64,
        help_text=_("Longer answers show more of what quantization loses, and take longer."),
    )

    def __init__(self, *args: Any, clusters: list[str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        cast(forms.ChoiceField, self.fields["cluster"]).choices = [(name, name) for name in clusters]


class AuditFilterForm(forms.Form):
    actor = forms.CharField(label=_("Actor"), max_length=150, required=False)
    action = forms.ChoiceField(label=_("Action"), required=False)
    object_id = forms.CharField(label=_("Object id"), max_length=64, required=False)
    since = forms.DateTimeField(label=_("Since"), required=False, widget=forms.DateInput(attrs={"type": "date"}))
    until = forms.DateTimeField(label=_("Until"), required=False, widget=forms.DateInput(attrs={"type": "date"}))

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        from governance.audit.actions import AuditAction

        super().__init__(*args, **kwargs)
        cast(forms.ChoiceField, self.fields["action"]).choices = [("", _("any"))] + [
            (a.label, a.label) for a in AuditAction
        ]

    def filters(self) -> dict[str, Any]:
        from governance.audit.actions import AuditAction

        data = self.cleaned_data
        result: dict[str, Any] = {}
        if data.get("actor"):
            result["actor"] = data["actor"]
        if data.get("action"):
            result["action"] = int(next(a for a in AuditAction if a.label == data["action"]))
        if data.get("object_id"):
            result["object_id"] = data["object_id"]
        for name in ("since", "until"):
            if data.get(name):
                result[name] = data[name]
        return result


class CiTokenForm(forms.Form):
    """A team CI token; the gate service (with the API's serializer) checks every rule."""

    name = forms.CharField(label=_("Name"), max_length=120, help_text=_("Say where it is used, e.g. deploy-prod."))
    team = forms.ChoiceField(label=_("Team"))
    scopes = forms.MultipleChoiceField(
        label=_("Scopes"),
        widget=forms.CheckboxSelectMultiple,
        initial=["gate:check"],
        help_text=_("A CI token reaches only what its scopes name."),
    )
    environments = forms.CharField(
        label=_("Environments"),
        max_length=400,
        required=False,
        initial="production",
        help_text=_("Comma-separated; empty: any environment of the team's requests."),
    )
    deployments = forms.CharField(
        label=_("Only these requests"),
        max_length=4000,
        required=False,
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text=_("Request ids, comma- or line-separated; empty: every request of the team."),
    )
    expires_at = forms.DateField(
        label=_("Expires on"),
        widget=forms.DateInput(format="%Y-%m-%d", attrs={"type": "date"}),  # the only format type=date takes
        help_text=_("At most 366 days ahead; the token stops working at the start of that day (UTC)."),
    )

    def __init__(self, *args: Any, teams: list[Any], scopes: list[tuple[str, str]], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        cast(forms.ChoiceField, self.fields["team"]).choices = [(t.name, t.name) for t in teams]
        cast(forms.MultipleChoiceField, self.fields["scopes"]).choices = scopes

    def payload(self) -> dict[str, Any]:
        """What the API's CiTokenInputSerializer takes."""
        data = self.cleaned_data
        split = lambda text: [part.strip() for part in (text or "").replace("\n", ",").split(",") if part.strip()]  # noqa: E731
        return {
            "name": data["name"],
            "team": data["team"],
            "scopes": list(data["scopes"]),
            "environments": split(data.get("environments")),
            "deployments": split(data.get("deployments")),
            "expires_at": f"{data['expires_at'].isoformat()}T00:00:00Z",
        }


class VerifyForm(forms.Form):
    file = forms.FileField(
        label=_("Approval packet (PDF)"),
        widget=forms.FileInput(attrs={"accept": "application/pdf,.pdf"}),
        help_text=_("The file is checked here and not kept; only the result is recorded under its SHA-256."),
    )
