"""The request page's forms: obligations, waivers, sign-off, usage reports and eval runs."""

from __future__ import annotations

from typing import Any, cast

from django import forms
from django.conf import settings
from django.utils.translation import gettext_lazy as _

from governance.deployments.choices import SignOffDecision
from planner.quant.names import SCHEME_NAMES


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
    verdict = forms.ChoiceField(
        label=_("Verdict"), choices=[(SignOffDecision.APPROVE, _("Approve")), (SignOffDecision.REJECT, _("Reject"))]
    )
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
        if settings.SSO_ENABLED:
            # Under single sign-on a fresh sign-in at the provider (/oidc/step-up/) re-authenticates instead.
            self.fields["password"].required = False
            self.fields["password"].help_text = _(
                "Signing asks you to sign in again: enter your password, or sign in again at your identity "
                "provider (/oidc/step-up/) just before signing."
            )


class UsageForm(forms.Form):
    month = forms.RegexField(label=_("Month"), regex=r"^\d{4}-(0[1-9]|1[0-2])$", help_text=_("YYYY-MM"))
    monthly_active_users = forms.IntegerField(label=_("Monthly active users"), min_value=0)
    revenue_amount = forms.DecimalField(
        label=_("Monthly revenue"), min_value=0, max_digits=20, decimal_places=2, required=False
    )
    revenue_currency = forms.CharField(label=_("Currency"), max_length=3, initial="USD")

    def revenue(self) -> dict[str, Any] | None:
        amount = self.cleaned_data.get("revenue_amount")
        if amount is None:
            return None
        return {"amount": float(amount), "currency": self.cleaned_data["revenue_currency"].upper()}


class EvalRunForm(forms.Form):
    cluster = forms.ChoiceField(label=_("Cluster"))
    scheme = forms.ChoiceField(label=_("Quantization scheme"), choices=[(s, s) for s in sorted(SCHEME_NAMES)])
    kind = forms.ChoiceField(
        label=_("Kind of eval"),
        choices=[
            ("served", _("Served: this request's artifact vs its parent, through the plan's engine")),
            ("screening", _("Screening: quantization simulated in one process (never counts for approval)")),
        ],
        initial="served",
        help_text=_("The weights are read where their artifact is recorded on the cluster."),
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
