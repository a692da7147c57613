"""The shapes of a deployment request in the API: what a requester sends, what every reader gets."""

from __future__ import annotations

import re
from typing import Any

from django.conf import settings
from django.utils import timezone
from rest_framework import serializers

from governance.artifacts.selectors import artifacts_visible_to
from governance.capacity.serializers import GPU_SPEC_HELP, MAX_MODEL_LEN, gpu_spec_validate
from governance.core.names import validate_printed_name
from governance.core.serializers import EngineVersionField, JsonObjectField, StrictSerializer
from governance.deployments.choices import ENGINE_CHOICES, SERVING_DEFAULTS, SERVING_PRECISIONS, Status
from governance.deployments.models import DeploymentRequest
from governance.deployments.readiness import finding_waived
from governance.deployments.selectors import (
    deployment_blockers,
    deployment_obligations,
    deployment_signoffs,
    deployment_waivers,
    latest_capacity_plan,
)
from governance.licenses.schema import FactsField
from planner.engines import engine_profile, serving_engine
from planner.specs import gpus

# The largest GPU budget a serving plan may state: the planner's largest layout (tp 16 x pp 64 x dp 256
# is more than any cluster; this bounds the number, not the search).
MAX_GPUS = 65_536


class ServingPlanSerializer(StrictSerializer):
    engine = serializers.ChoiceField(choices=ENGINE_CHOICES, default=SERVING_DEFAULTS["engine"])
    engine_version = EngineVersionField(
        required=False,
        help_text="the release the capacity plan is computed for (default: the planner's for the engine); "
        "one the planner has a memory profile for",
    )
    precision = serializers.ChoiceField(choices=SERVING_PRECISIONS)
    gpu = serializers.ChoiceField(choices=sorted(gpus()), required=False, help_text="catalog key (or gpu_spec)")
    gpu_spec = JsonObjectField(required=False, help_text=GPU_SPEC_HELP)
    kv_dtype = serializers.ChoiceField(choices=["bf16", "fp8"], default=SERVING_DEFAULTS["kv_dtype"])
    tp = serializers.IntegerField(required=False, min_value=1, max_value=16)
    pp = serializers.IntegerField(required=False, min_value=1, max_value=64)
    ep = serializers.IntegerField(required=False, min_value=1, max_value=256)
    dp = serializers.IntegerField(required=False, min_value=1, max_value=256)
    max_model_len = serializers.IntegerField(min_value=16, max_value=MAX_MODEL_LEN)
    gpu_memory_utilization = serializers.FloatField(
        default=SERVING_DEFAULTS["gpu_memory_utilization"], min_value=0.1, max_value=0.99
    )
    # Left out: not stored, and the engine runs its own default batch (services.evidence.serving_plan_inputs).
    concurrency = serializers.IntegerField(
        required=False,
        min_value=1,
        max_value=100_000,
        help_text="sequences served at once; left out, the engine's default batch (vLLM's --max-num-seqs "
        "default: 1024 on an H100 or H200, 256 on smaller GPUs), and the plan checks one full-length sequence",
    )
    max_gpus = serializers.IntegerField(
        required=False,
        min_value=1,
        max_value=MAX_GPUS,
        help_text="the GPU budget: at most this many GPUs of the plan's kind for the whole deployment (every "
        "replica); a capacity plan that needs more is `capacity.over_budget`",
    )

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        gpu_spec_validate(attrs)
        budget = attrs.get("max_gpus")
        fixed = attrs.get("tp", 1) * attrs.get("pp", 1) * attrs.get("dp", 1)
        if budget is not None and fixed > budget:  # a layout the request fixed itself can never fit it
            raise serializers.ValidationError(
                {"max_gpus": [f"the fixed layout takes {fixed} GPUs (tp x pp x dp), more than the budget of {budget}"]}
            )
        engine = serving_engine(attrs.get("engine", SERVING_DEFAULTS["engine"]))
        if attrs.get("engine_version") and engine.profile_key is not None:
            try:
                engine_profile(engine.profile_key, attrs["engine_version"])
            except ValueError as exc:
                raise serializers.ValidationError({"engine_version": [str(exc).partition(": ")[2]]}) from None
        return attrs


ENVIRONMENT = re.compile(r"^[a-z][a-z0-9-]{0,39}$")


class DeploymentInputSerializer(StrictSerializer):
    team = serializers.CharField(max_length=120, required=False)
    artifact = serializers.UUIDField()
    product_name = serializers.CharField(max_length=200, validators=[validate_printed_name])
    environments = serializers.ListField(child=serializers.RegexField(ENVIRONMENT), default=list, max_length=10)
    facts = FactsField(help_text="deployment facts, validated like POST /api/v1/licenses/evaluate")
    serving_plan = ServingPlanSerializer()
    target_cluster = serializers.CharField(
        max_length=120, required=False, allow_blank=True, validators=[validate_printed_name]
    )
    # The approval packet's language; left out, the language the request was made in (the UI's, or
    # the API call's Accept-Language). Fixed at creation: an update may not change it.
    language = serializers.ChoiceField(choices=[code for code, _name in settings.LANGUAGES], required=False)

    def validate_artifact(self, value: Any) -> Any:
        artifact = artifacts_visible_to(self.context["user"]).filter(code=value).first()
        if artifact is None:
            raise serializers.ValidationError("no such artifact")
        return artifact

    def validate_facts(self, value: Any) -> Any:
        if not isinstance(value, dict):
            raise serializers.ValidationError("must be a JSON object")
        return value


class DeploymentUpdateSerializer(DeploymentInputSerializer):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs["partial"] = True
        super().__init__(*args, **kwargs)
        self.fields.pop("team")
        self.fields.pop("language")


class DeploymentOutputSerializer(serializers.ModelSerializer):
    team = serializers.CharField(source="team.name")
    requester = serializers.CharField(source="requester.username")
    artifact = serializers.UUIDField(source="artifact.code")
    licenses = serializers.SerializerMethodField()
    obligations = serializers.SerializerMethodField()
    waivers = serializers.SerializerMethodField()
    decisions = serializers.SerializerMethodField()
    capacity_plan = serializers.SerializerMethodField()
    blockers = serializers.SerializerMethodField()

    class Meta:
        model = DeploymentRequest
        fields = [
            "code",
            "team",
            "requester",
            "artifact",
            "product_name",
            "environments",
            "facts",
            "serving_plan",
            "target_cluster",
            "language",
            "status",
            "submitted_at",
            "approved_at",
            "approval_expires_at",
            "evidence_digest",
            "flagged",
            "flag_reason",
            "licenses",
            "obligations",
            "waivers",
            "decisions",
            "capacity_plan",
            "blockers",
            "created_at",
            "updated_at",
        ]

    def get_licenses(self, obj: DeploymentRequest) -> list[dict[str, Any]]:
        # "waived" as the readiness rule decides it: the evidence's waivers in force now.
        waivers, now = (obj.evidence or {}).get("waivers", []), timezone.now()
        result = []
        for evaluation in (obj.evidence or {}).get("licenses", []):
            findings = [
                {**finding, "waived": finding_waived(waivers, evaluation["license"], finding, now)}
                for finding in evaluation["findings"]
            ]
            result.append({**evaluation, "findings": findings})
        return result

    def get_obligations(self, obj: DeploymentRequest) -> list[dict[str, Any]]:
        return [
            {
                "code": str(o.code),
                "license": o.license_key,
                "finding_code": o.finding_code,
                "clause": o.clause,
                "params": o.params,
                "message": o.message,
                "status": o.status,
                "how_met": o.how_met,
                "review_comment": o.review_comment,
            }
            for o in deployment_obligations(obj)
        ]

    def get_waivers(self, obj: DeploymentRequest) -> list[dict[str, Any]]:
        now = timezone.now()
        return [
            {
                "code": str(w.code),
                "license": w.license_key,
                "finding_code": w.finding_code,
                "clause": w.clause,
                "severity": w.severity,
                "reason": w.reason,
                "expires_at": w.expires_at,
                "status": (
                    "expired" if w.expires_at <= now else "active" if w.is_confirmed else "awaiting_confirmation"
                ),
                "active": w.in_force(now),
                "granted_by": w.granted_by.username,
                "confirmed_by": w.confirmed_by.username if w.confirmed_by else None,
                "confirmed_at": w.confirmed_at,
                "permission": (
                    {"name": w.permission_name, "size": w.permission_size, "sha256": w.permission_sha256}
                    if w.permission_sha256
                    else None
                ),
            }
            for w in deployment_waivers(obj)
        ]

    def get_decisions(self, obj: DeploymentRequest) -> list[dict[str, Any]]:
        return [
            {
                "role": d.role,
                "verdict": d.decision,
                "reviewer": d.signer.username,
                "evidence_digest": d.evidence_digest,
                "comment": d.comment,
                "voided": d.voided_at is not None,
                "void_reason": d.void_reason,
                "created_at": d.created_at,
            }
            for d in deployment_signoffs(obj)
        ]

    def get_capacity_plan(self, obj: DeploymentRequest) -> dict[str, Any] | None:
        stored = latest_capacity_plan(obj)
        return None if stored is None else {"code": str(stored.code), "status": stored.status, "fits": stored.fits}

    def get_blockers(self, obj: DeploymentRequest) -> list[dict[str, Any]]:
        return deployment_blockers(obj) if obj.status not in (Status.DRAFT,) else []
