"""Artifacts API: register, list, read."""

from __future__ import annotations

import json
from typing import Any, cast

from django.contrib.auth.models import User
from django.db.models import QuerySet
from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import serializers
from rest_framework.exceptions import NotFound
from rest_framework.generics import ListAPIView
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from governance.artifacts.models import DIGEST_VALIDATOR, ArtifactSignature, Derivation, Modality, ModelArtifact
from governance.artifacts.selectors import artifact_digest_registered, artifact_get, artifacts_visible_to
from governance.artifacts.services import artifact_register, artifact_share
from governance.core.errors import invalid_input
from governance.core.names import validate_printed_name
from governance.core.permissions import role_permission
from governance.core.roles import Role
from governance.core.selectors import team_by_name, team_choose
from governance.core.serializers import JsonObjectField, StrictSerializer

# A config.json is a few KiB (the largest published, multimodal ones with their vision towers, ~30
# KiB): beyond this a paste is a mistake (a weight index, a tokenizer) or an attack on the planner.
CONFIG_MAX_BYTES = 256 * 1024
# What a Sigstore bundle is served as (the model-signing library writes v0.3 bundles).
BUNDLE_MEDIA_TYPE = "application/vnd.dev.sigstore.bundle.v0.3+json"


def _bounded_object(value: Any) -> Any:
    if not isinstance(value, dict):
        raise serializers.ValidationError("must be a JSON object (the checkpoint's config.json)")
    size = len(json.dumps(value, ensure_ascii=False).encode())
    if size > CONFIG_MAX_BYTES:
        raise serializers.ValidationError(
            f"{size:,} bytes: larger than the {CONFIG_MAX_BYTES:,} bytes a config.json takes"
        )
    return value


class ArtifactInputSerializer(StrictSerializer):
    team = serializers.CharField(max_length=120, required=False, help_text="team name (default: your only team)")
    name = serializers.CharField(max_length=200, validators=[validate_printed_name])
    source_repo = serializers.CharField(max_length=300)
    revision = serializers.CharField(max_length=100)
    weights_digest = serializers.CharField(max_length=71, validators=[DIGEST_VALIDATOR])
    license = serializers.RegexField(r"^[a-z0-9][a-z0-9.-]{0,63}$", help_text="license catalog key, e.g. llama-3.1")
    architecture_key = serializers.CharField(max_length=64, required=False, allow_blank=True)
    config = JsonObjectField(required=False, help_text="the checkpoint's config.json, when not a catalog model")
    modality = serializers.ChoiceField(choices=Modality.choices, default=Modality.TEXT)
    quantization_config = JsonObjectField(required=False, help_text="the checkpoint's quantization config")
    parent = serializers.UUIDField(required=False, allow_null=True)  # type: ignore[assignment]  # DRF's Field.parent
    derivation = serializers.ChoiceField(choices=Derivation.choices, default=Derivation.NONE)
    merged_with = serializers.ListField(child=serializers.UUIDField(), required=False)

    def validate_config(self, value: Any) -> Any:
        return _bounded_object(value)

    def validate_quantization_config(self, value: Any) -> Any:
        return _bounded_object(value)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        # Unique per team: only the registering team's own artifacts are asked about (another team's
        # would tell which weights it holds). The web wizard passes the team it chose in the context.
        team = self.context.get("team") or team_choose(self.context["user"], attrs.get("team"))
        if artifact_digest_registered(attrs["weights_digest"], team):
            raise serializers.ValidationError(
                {"weights_digest": f"team {team.name} has registered an artifact with this digest already"}
            )
        visible = artifacts_visible_to(self.context["user"])
        if attrs.get("parent"):
            attrs["parent"] = visible.filter(code=attrs["parent"]).first()
            if attrs["parent"] is None:
                raise serializers.ValidationError({"parent": "no such artifact"})
        merged = []
        for code in attrs.get("merged_with", []):
            found = visible.filter(code=code).first()
            if found is None:
                raise serializers.ValidationError({"merged_with": f"no such artifact {code}"})
            merged.append(found)
        attrs["merged_with"] = merged
        return attrs


class ArtifactOutputSerializer(serializers.ModelSerializer):
    team = serializers.CharField(source="team.name")
    license = serializers.CharField(source="license.key")
    license_version = serializers.CharField(source="license_version.version")
    parent = serializers.SerializerMethodField()  # type: ignore[assignment]  # DRF's Field.parent
    licenses = serializers.SerializerMethodField()

    class Meta:
        model = ModelArtifact
        fields = [
            "code",
            "team",
            "name",
            "source_repo",
            "revision",
            "weights_digest",
            "license",
            "license_version",
            "architecture_key",
            "modality",
            "quantization_config",
            "parent",
            "derivation",
            "licenses",
            "created_at",
        ]

    def get_parent(self, obj: ModelArtifact) -> str | None:
        return str(obj.parent.code) if obj.parent else None

    def get_licenses(self, obj: ModelArtifact) -> list[str]:
        return [f"{v.license.key} {v.version}" for v in obj.license_versions()]


@extend_schema_view(get=extend_schema(summary="Artifacts of your teams (reviewers and auditors: all)"))
class ArtifactListCreateApi(ListAPIView):
    serializer_class = ArtifactOutputSerializer

    def get_queryset(self) -> QuerySet[ModelArtifact]:
        return artifacts_visible_to(self.request.user)

    @extend_schema(
        request=ArtifactInputSerializer,
        responses={201: ArtifactOutputSerializer},
        summary="Register a model checkpoint (requester)",
    )
    def post(self, request: Request) -> Response:
        if not role_permission(Role.REQUESTER)().has_permission(request, self):
            return Response({"message": "Only requesters register artifacts.", "extra": {}}, status=403)
        serializer = ArtifactInputSerializer(data=request.data, context={"user": request.user})
        serializer.is_valid(raise_exception=True)
        team = team_choose(request.user, serializer.validated_data.get("team"))
        artifact = artifact_register(actor=cast(User, request.user), team=team, data=serializer.validated_data)
        return Response(ArtifactOutputSerializer(artifact).data, status=201)


class ArtifactDetailApi(APIView):
    @extend_schema(responses=ArtifactOutputSerializer, summary="One artifact with its license lineage")
    def get(self, request: Request, code: str) -> Response:
        return Response(ArtifactOutputSerializer(artifact_get(request.user, code)).data)


class ArtifactSignatureApi(APIView):
    @extend_schema(
        responses={(200, BUNDLE_MEDIA_TYPE): OpenApiTypes.BINARY},
        summary="The artifact's OpenSSF model-signing bundle (verify with `model_signing verify certificate`)",
    )
    def get(self, request: Request, code: str) -> HttpResponse:
        artifact = artifact_get(request.user, code)
        signature = ArtifactSignature.objects.filter(artifact=artifact).first()
        if signature is None:
            raise NotFound("no signature yet: the artifact is signed once an inspection has read its files")
        response = HttpResponse(signature.bundle, content_type=BUNDLE_MEDIA_TYPE)
        response["Content-Disposition"] = 'attachment; filename="model.sig"'
        return response


class ArtifactShareInputSerializer(StrictSerializer):
    team = serializers.CharField(max_length=120, help_text="name of the team to share with")


class ArtifactShareApi(APIView):
    @extend_schema(
        request=ArtifactShareInputSerializer,
        responses=ArtifactOutputSerializer,
        summary="Share an artifact with another team (requesters of the owning team)",
    )
    def post(self, request: Request, code: str) -> Response:
        artifact = artifact_get(request.user, code)
        serializer = ArtifactShareInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        team = team_by_name(serializer.validated_data["team"])
        if team is None:
            raise invalid_input("team", "no such team")
        shared = artifact_share(artifact=artifact, team=team, actor=cast(User, request.user))
        return Response(ArtifactOutputSerializer(shared).data)
