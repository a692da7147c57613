"""The request wizard: the artifact, the deployment's facts, derivative plans and the serving plan.
It only shapes input into the dictionaries the services take; the services hold every rule."""

from __future__ import annotations

import json
from typing import Any, cast

from django import forms
from django.utils.text import format_lazy
from django.utils.translation import gettext_lazy as _

from governance.artifacts.models import Derivation
from governance.core.names import validate_printed_name
from governance.deployments.choices import DEFAULT_ENGINE, ENGINE_CHOICES
from governance.licenses.facts import AUP_CATEGORIES, BOOLEAN_FACTS, DERIVATIVE_KINDS, DISTRIBUTIONS
from governance.web import labels
from planner.specs import GPU_OPTIONAL_FIELDS, GPU_REQUIRED_FIELDS, gpus, precisions


class WizardForm(forms.Form):
    """One page: the artifact, the deployment's facts, derivative plans and the serving plan."""

    # -- the artifact
    artifact = forms.ChoiceField(
        label=_("Model artifact"),
        required=False,
        help_text=_("A registered checkpoint, or register a new one below."),
    )
    new_name = forms.CharField(label=_("Name"), required=False, max_length=200, validators=[validate_printed_name])
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
    new_quantization_config = forms.CharField(
        label=_("quantization_config"),
        required=False,
        widget=forms.Textarea(attrs={"rows": 3, "spellcheck": "false"}),
        help_text=_(
            "The checkpoint's quantization_config, when its config.json is not pasted above. Reading the files "
            "on a cluster (a location below) replaces it with what the tensors say."
        ),
    )
    new_parent = forms.ChoiceField(
        label=_("Made from (parent artifact)"),
        required=False,
        help_text=_("The checkpoint these weights were made from: a quantized checkpoint is evaluated against it."),
    )
    new_derivation = forms.ChoiceField(
        label=_("How it was made from its parent"),
        required=False,
        choices=labels.choices("derivative", Derivation.values),
        initial=Derivation.NONE,
    )
    new_cluster = forms.ChoiceField(
        label=_("Cluster where the files lie"),
        required=False,
        help_text=_("Optional: the files are read there (precision, license texts) once the artifact is registered."),
    )
    new_path = forms.CharField(
        label=_("Checkpoint directory"),
        required=False,
        max_length=400,
        help_text=_(
            "Inside one of the cluster's model roots. On the local cluster the weights digest is computed "
            "from the files when left empty."
        ),
    )
    # -- the deployment
    team = forms.ChoiceField(
        label=_("Team"),
        required=False,
        help_text=_("The team the request is filed under: its members and leads see and act on it."),
    )
    product_name = forms.CharField(label=_("Product name"), max_length=200, validators=[validate_printed_name])
    environments = forms.CharField(
        label=_("Environments"),
        required=False,
        initial="production",
        help_text=_("Comma-separated, e.g. staging, production."),
    )
    use_case = forms.ChoiceField(
        label=_("Use case"),
        choices=labels.choices("use_case"),
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
        choices=labels.choices("aup", AUP_CATEGORIES),
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
        label=_("Derivative"), choices=labels.choices("derivative", DERIVATIVE_KINDS), initial="none"
    )
    derivative_distribution = forms.ChoiceField(
        label=_("Distribution of the derivative"),
        choices=labels.choices("distribution", DISTRIBUTIONS),
        initial="none",
        help_text=_("Naming and notice terms apply when a derivative is distributed."),
    )
    derivative_name = forms.CharField(
        label=_("Derivative name"), max_length=200, required=False, validators=[validate_printed_name]
    )
    redistributes_original_weights = forms.BooleanField(label=_("Original weights redistributed"), required=False)
    # -- serving plan
    engine = forms.ChoiceField(label=_("Serving engine"), choices=ENGINE_CHOICES, initial=DEFAULT_ENGINE)
    precision = forms.ChoiceField(
        label=_("Precision"),
        required=False,
        help_text=_(
            "Quantized weights are served at the precision they are stored in; BF16 weights may be quantized "
            "by the engine at load (which needs an eval of its own)."
        ),
    )
    gpu = forms.ChoiceField(
        label=_("GPU"),
        choices=[("", _("— a GPU outside the catalog (describe it below) —"))] + [(g, g) for g in sorted(gpus())],
        initial="h200",
        required=False,
    )
    gpu_spec = forms.CharField(
        label=_("GPU outside the catalog (JSON)"),
        required=False,
        max_length=4000,
        widget=forms.Textarea(attrs={"rows": 3, "spellcheck": "false"}),
        # format_lazy, not %: the text is translated per request, in the reader's language
        help_text=format_lazy(
            _(
                "The fields of the planner's --gpu-spec: required {required}; optional key, {optional} "
                "(cuda_sm: the compute capability x 10, 90 for an H100). Leave the GPU above empty."
            ),
            required=", ".join(GPU_REQUIRED_FIELDS),
            optional=", ".join(GPU_OPTIONAL_FIELDS),
        ),
    )
    kv_dtype = forms.ChoiceField(label=_("KV cache type"), choices=[("bf16", "bf16"), ("fp8", "fp8")])
    max_model_len = forms.IntegerField(label=_("Context length (tokens)"), min_value=16, initial=131072)
    concurrency = forms.IntegerField(
        label=_("Concurrent sequences"),
        min_value=1,
        required=False,
        help_text=_(
            "Left empty: the engine's default batch (vLLM: 1,024 sequences per replica on an H100 or H200), "
            "and the plan checks that one full-length sequence fits."
        ),
    )
    max_gpus = forms.IntegerField(
        label=_("GPU budget (at most this many GPUs)"),
        min_value=1,
        required=False,
        help_text=_(
            "How many GPUs of this kind the deployment may take, every replica included: a plan that fits "
            "only on more does not fit your budget. Left empty: no budget."
        ),
    )
    tp = forms.IntegerField(label=_("Tensor parallel"), min_value=1, max_value=16, required=False)
    pp = forms.IntegerField(label=_("Pipeline parallel"), min_value=1, max_value=64, required=False)
    ep = forms.IntegerField(label=_("Expert parallel"), min_value=1, max_value=256, required=False)

    def __init__(
        self,
        *args: Any,
        artifacts: list[tuple[Any, str, str]],
        licenses: list[tuple[str, str]],
        teams: list[str] | None = None,
        clusters: list[str] | None = None,
        **kwargs: Any,
    ) -> None:
        """`artifacts`: (code, name, license key) of each artifact to offer (wizard_choices);
        `teams`: the names of the user's teams (one of several must be chosen); `clusters`: names."""
        super().__init__(*args, **kwargs)
        self.teams = list(teams or [])
        team_choices: list[tuple[str, Any]] = [(name, name) for name in self.teams]
        if len(self.teams) > 1:  # a deliberate choice, never the first one by default
            team_choices.insert(0, ("", _("— choose the team —")))
        cast(forms.ChoiceField, self.fields["team"]).choices = team_choices
        cast(forms.ChoiceField, self.fields["artifact"]).choices = [("", _("— register a new artifact —"))] + [
            (str(code), f"{name} ({license_key})") for code, name, license_key in artifacts
        ]
        cast(forms.ChoiceField, self.fields["new_license"]).choices = [("", "—")] + [
            (key, f"{name} ({key})") for key, name in licenses
        ]
        offered = [(str(code), f"{name} ({license_key})") for code, name, license_key in artifacts]
        cast(forms.ChoiceField, self.fields["new_parent"]).choices = [("", _("— none: as published —")), *offered]
        cast(forms.ChoiceField, self.fields["new_cluster"]).choices = [("", "—")] + [(c, c) for c in clusters or []]
        cast(forms.ChoiceField, self.fields["precision"]).choices = [
            ("", _("— as the weights are stored —")),
            *((p, p) for p in sorted(precisions())),
        ]

    def clean_team(self) -> str:
        chosen = str(self.cleaned_data.get("team") or "")
        if not chosen and len(self.teams) == 1:
            return self.teams[0]
        if not chosen and self.teams:
            raise forms.ValidationError(_("Choose the team this request is filed under."))
        return chosen

    def _json_or_none(self, name: str) -> Any:
        """A pasted JSON box: empty is None, anything else must parse (the API validates the rest)."""
        text = self.cleaned_data.get(name) or ""
        if not text.strip():
            return None
        try:
            return json.loads(text)
        except ValueError as exc:
            raise forms.ValidationError(_("Not valid JSON: %(error)s"), params={"error": exc}) from None

    def clean_new_config(self) -> Any:
        return self._json_or_none("new_config")

    def clean_new_quantization_config(self) -> Any:
        return self._json_or_none("new_quantization_config")

    def clean_gpu_spec(self) -> Any:
        return self._json_or_none("gpu_spec")

    def selected_artifact_code(self) -> str:
        """The code of the registered artifact chosen (one offered), or "" (register a new one)."""
        return str(self.cleaned_data.get("artifact") or "")

    def facts(self) -> dict[str, Any]:
        """The facts as the evaluate API takes them. Works on a partly valid form too (the live
        preview runs while the user is still typing): an unanswered fact is left out, so the
        engine assumes its most conservative value and says so."""
        data = self.cleaned_data
        facts: dict[str, Any] = {
            name: data[name]
            for name in ("use_case", *BOOLEAN_FACTS, "monthly_active_users", "monthly_active_users_at_model_release")
            if data.get(name) is not None
        }
        if data.get("revenue_amount") is not None:
            facts["monthly_revenue"] = {
                "amount": float(data["revenue_amount"]),
                "currency": (data.get("revenue_currency") or "USD").upper(),
            }
        if data.get("org_country"):
            facts["org_country"] = data["org_country"].upper()
        if data.get("derivative_kind"):
            facts["derivative"] = {
                "kind": data["derivative_kind"],
                "distribution": data.get("derivative_distribution") or "none",
                "name": data.get("derivative_name") or None,
            }
        facts["intended_uses"] = list(data.get("intended_uses") or [])
        return facts

    def serving_plan(self, stored_precision: str = "") -> dict[str, Any]:
        """The serving plan; left empty, the precision is the one the weights are stored in."""
        data = self.cleaned_data
        plan = {name: data[name] for name in ("engine", "precision", "kv_dtype", "max_model_len")}
        plan["precision"] = plan["precision"] or stored_precision
        plan.update(
            {name: data[name] for name in ("gpu", "concurrency", "tp", "pp", "ep", "max_gpus") if data.get(name)}
        )
        if data.get("gpu_spec") is not None:  # the API checks it (serving_plan.gpu_spec), as --gpu-spec does
            plan["gpu_spec"] = data["gpu_spec"]
        return plan

    def serving_plan_so_far(self, stored_precision: str = "") -> dict[str, Any]:
        """The serving plan from the fields valid so far (the live preview runs while the user types;
        the serializer refuses what is still missing); left empty, the precision is the stored one."""
        data = self.cleaned_data
        plan = {name: data[name] for name in ("engine", "precision", "kv_dtype", "max_model_len") if name in data}
        if not plan.get("precision") and stored_precision:
            plan["precision"] = stored_precision
        plan.update(
            {name: data[name] for name in ("gpu", "concurrency", "tp", "pp", "ep", "max_gpus") if data.get(name)}
        )
        if data.get("gpu_spec") is not None:
            plan["gpu_spec"] = data["gpu_spec"]
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
        if data.get("new_quantization_config") is not None:
            payload["quantization_config"] = data["new_quantization_config"]
        if data.get("new_parent"):
            payload["parent"] = data["new_parent"]
        if data.get("new_derivation"):
            payload["derivation"] = data["new_derivation"]
        return payload

    def location(self) -> tuple[str, str] | None:
        """(cluster name, directory) where a new artifact's files lie, when given."""
        cluster, path = self.cleaned_data.get("new_cluster") or "", self.cleaned_data.get("new_path") or ""
        return (cluster, path) if cluster or path else None
