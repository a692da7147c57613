"""Serializer base shared by every API input: unknown keys are an error naming them, not silently dropped."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers


class StrictSerializer(serializers.Serializer):
    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, dict):  # checked here, not in validate(): nested serializers have no initial_data
            unknown = set(data) - set(self.fields)
            if unknown:
                raise serializers.ValidationError({key: "unknown field" for key in sorted(unknown)})
        return super().to_internal_value(data)
