"""License API: evaluate facts (stateless), list licenses, show one with its current terms."""

from __future__ import annotations

from typing import Any, cast

from django.contrib.auth.models import User
from django.db.models import QuerySet
from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import serializers
from rest_framework.generics import ListAPIView
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from governance.core.errors import NotFoundError
from governance.core.exceptions import validation_error_response
from governance.core.permissions import role_permission
from governance.core.roles import Role
from governance.core.serializers import StrictSerializer
from governance.licenses.choices import FACTS_ASSUMED, FindingCode, LicenseDecision, Severity
from governance.licenses.engine import TERM_FIELDS
from governance.licenses.facts import FactsError
from governance.licenses.models import License, LicenseTerm, LicenseText, LicenseVersion
from governance.licenses.schema import FactsField
from governance.licenses.selectors import (
    license_current_version,
    license_evaluate,
    license_list,
    license_text_closest,
    license_text_match,
    license_texts_visible_to,
    license_version_get,
)
from governance.licenses.services import license_text_classify


class EvaluateInputSerializer(StrictSerializer):
    license = serializers.CharField(max_length=64)
    facts = FactsField(help_text="deployment facts (docs/contracts.md); missing facts are assumed conservatively")


class FindingSerializer(serializers.Serializer):
    code = serializers.ChoiceField(choices=[*FindingCode.values, FACTS_ASSUMED])
    severity = serializers.ChoiceField(choices=Severity.values)
    clause = serializers.CharField()
    message = serializers.CharField()
    params = serializers.DictField()
    confidence = serializers.CharField()
    applies_to = serializers.CharField()
    how_to_comply = serializers.CharField()


class LicenseRefSerializer(serializers.Serializer):
    key = serializers.CharField()
    version = serializers.CharField()
    text_sha256 = serializers.CharField()


class EvaluateOutputSerializer(serializers.Serializer):
    decision = serializers.ChoiceField(choices=LicenseDecision.values)
    license = LicenseRefSerializer()
    findings = FindingSerializer(many=True)


class LicenseEvaluateApi(APIView):
    @extend_schema(
        request=EvaluateInputSerializer,
        responses=EvaluateOutputSerializer,
        summary="Check deployment facts against a license (stateless)",
    )
    def post(self, request: Request) -> Response:
        if not isinstance(request.data, dict):
            return validation_error_response({"non_field_errors": ["expected a JSON object"]})
        serializer = EvaluateInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        try:
            _version, evaluation = license_evaluate(serializer.validated_data["license"], request.data["facts"])
        except FactsError as exc:
            return validation_error_response(exc.fields)
        return Response(evaluation.as_contract())


class TermOutputSerializer(serializers.ModelSerializer):
    class Meta:
        model = LicenseTerm
        fields = [name for name in TERM_FIELDS if name != "value_from"]


class VersionOutputSerializer(serializers.ModelSerializer):
    text_sha256 = serializers.CharField(source="digest")

    class Meta:
        model = LicenseVersion
        fields = ["version", "effective_date", "published_at", "text_sha256"]


class LicenseOutputSerializer(serializers.ModelSerializer):
    class Meta:
        model = License
        fields = ["key", "name", "scancode_key", "spdx_id", "source_url", "notes"]


class LicenseDetailOutputSerializer(LicenseOutputSerializer):
    current_version = serializers.SerializerMethodField()
    versions = VersionOutputSerializer(many=True, read_only=True)
    terms = serializers.SerializerMethodField()

    class Meta(LicenseOutputSerializer.Meta):
        fields = [*LicenseOutputSerializer.Meta.fields, "current_version", "versions", "terms"]

    def get_current_version(self, obj: License) -> dict[str, Any]:
        return dict(VersionOutputSerializer(self.context["version"]).data)

    @extend_schema(responses=TermOutputSerializer(many=True))
    def get_terms(self, obj: License) -> list[dict[str, Any]]:
        return list(TermOutputSerializer(self.context["version"].terms.all(), many=True).data)


@extend_schema_view(get=extend_schema(summary="The license catalog"))
class LicenseListApi(ListAPIView):
    serializer_class = LicenseOutputSerializer

    def get_queryset(self) -> QuerySet[License]:
        return license_list()


class LicenseDetailApi(APIView):
    @extend_schema(responses=LicenseDetailOutputSerializer, summary="A license with its current version's terms")
    def get(self, request: Request, key: str) -> Response:
        version = license_current_version(key)
        serializer = LicenseDetailOutputSerializer(version.license, context={"version": version})
        return Response(serializer.data)


class LicenseTextOutputSerializer(serializers.ModelSerializer):
    classified_as = serializers.SerializerMethodField()
    classified_by = serializers.CharField(source="classified_by.username", default=None)
    matches = serializers.SerializerMethodField()
    size = serializers.SerializerMethodField()

    class Meta:
        model = LicenseText
        fields = [
            "fingerprint",
            "sha256",
            "first_seen_path",
            "size",
            "classified_as",
            "classified_by",
            "classified_at",
            "classification_note",
            "matches",
            "created_at",
        ]

    def get_classified_as(self, obj: LicenseText) -> str | None:
        version = obj.classified_as
        return f"{version.license.key} {version.version}" if version else None

    def get_matches(self, obj: LicenseText) -> dict[str, str] | None:
        match = license_text_match(obj.fingerprint)
        return {"license": match.license, "version": match.version, "by": match.by} if match else None

    def get_size(self, obj: LicenseText) -> int:
        return len(obj.text.encode())


class LicenseTextDetailSerializer(LicenseTextOutputSerializer):
    text = serializers.CharField()
    closest = serializers.SerializerMethodField()

    class Meta(LicenseTextOutputSerializer.Meta):
        fields = [*LicenseTextOutputSerializer.Meta.fields, "text", "closest"]

    def get_closest(self, obj: LicenseText) -> dict[str, Any] | None:
        best, ratio, diff = license_text_closest(obj)
        if best is None:
            return None
        return {
            "fingerprint": best.fingerprint,
            "classified_as": self.get_classified_as(best),
            "similarity": round(ratio, 4),
            "diff": diff,
        }


@extend_schema_view(get=extend_schema(summary="License texts found in checkpoints (legal reviewers, auditors)"))
class LicenseTextListApi(ListAPIView):
    serializer_class = LicenseTextOutputSerializer

    def get_queryset(self) -> QuerySet[LicenseText]:
        return license_texts_visible_to(self.request.user)


class LicenseTextDetailApi(APIView):
    @extend_schema(responses=LicenseTextDetailSerializer, summary="A license text, with a diff from the closest known")
    def get(self, request: Request, fingerprint: str) -> Response:
        text = license_texts_visible_to(request.user).filter(fingerprint=fingerprint).first()
        if text is None:
            raise NotFoundError("no such license text")
        return Response(LicenseTextDetailSerializer(text).data)


class LicenseTextClassifyInputSerializer(StrictSerializer):
    license = serializers.RegexField(r"^[a-z0-9][a-z0-9.-]{0,63}$", help_text="catalog key, e.g. llama-3.1")
    version = serializers.CharField(max_length=40, required=False, help_text="default: the current version")
    note = serializers.CharField(max_length=2000, required=False, allow_blank=True, default="")


class LicenseTextClassifyApi(APIView):
    permission_classes = [role_permission(Role.LEGAL_REVIEWER)]

    @extend_schema(
        request=LicenseTextClassifyInputSerializer,
        responses=LicenseTextOutputSerializer,
        summary="Classify a license text once as a catalog license version (legal reviewers)",
    )
    def post(self, request: Request, fingerprint: str) -> Response:
        text = license_texts_visible_to(request.user).filter(fingerprint=fingerprint).first()
        if text is None:
            raise NotFoundError("no such license text")
        serializer = LicenseTextClassifyInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        version = license_version_get(data["license"], data.get("version"))
        classified = license_text_classify(
            text=text, version=version, actor=cast(User, request.user), note=data["note"]
        )
        return Response(LicenseTextOutputSerializer(classified).data)
