"""Serializer base shared by every API input: unknown keys are an error naming them, not silently dropped."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers


class StrictSerializer(serializers.Serializer):
    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, dict):  # checked here, not in validate(): nested serializers have no initial_data
            unknown = set(data) - set(self.fields)
            if unknown:
                raise serializers.ValidationError({key: "unknown field" for key in sorted(unknown)})
        return super().to_internal_value(data)


@extend_schema_field({"type": "object", "additionalProperties": True})
class JsonObjectField(serializers.JSONField):
    """A JSON object (a config.json, a quantization config), documented as one in the schema."""


@extend_schema_field({"oneOf": [{"type": "string"}, {"type": "object", "additionalProperties": True}]})
class KeyOrObjectField(serializers.JSONField):
    """A catalog key (string) or an inline object, documented as exactly that."""
