"""The audit filter, team CI tokens and packet verification forms."""

from __future__ import annotations

from typing import Any, cast

from django import forms
from django.utils.translation import gettext_lazy as _


class AuditFilterForm(forms.Form):
    actor = forms.CharField(label=_("Actor"), max_length=150, required=False)
    action = forms.ChoiceField(label=_("Action"), required=False)
    deployment = forms.ChoiceField(label=_("Deployment request"), required=False)
    object_id = forms.CharField(label=_("Object id"), max_length=64, required=False)
    since = forms.DateTimeField(label=_("Since"), required=False, widget=forms.DateInput(attrs={"type": "date"}))
    until = forms.DateTimeField(label=_("Until"), required=False, widget=forms.DateInput(attrs={"type": "date"}))

    def __init__(self, *args: Any, deployments: list[tuple[Any, str]] | None = None, **kwargs: Any) -> None:
        """`deployments`: (code, product name) of the requests the user may see, to filter by."""
        from governance.audit.actions import AuditAction
        from governance.web import labels

        super().__init__(*args, **kwargs)
        names = labels.audit_action_names()
        worded = sorted(((a.label, names.get(int(a), a.label)) for a in AuditAction), key=lambda c: str(c[1]))
        cast(forms.ChoiceField, self.fields["action"]).choices = [("", _("any")), *worded]
        cast(forms.ChoiceField, self.fields["deployment"]).choices = [("", _("any"))] + [
            (str(code), f"{name} ({str(code)[:8]})") for code, name in deployments or []
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
        if data.get("deployment"):  # one of the requests offered: the user may see it
            result["object_id"] = data["deployment"]
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
