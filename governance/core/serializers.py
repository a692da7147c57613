"""Serializer base shared by every API input: unknown keys are an error naming them, not silently dropped."""

from __future__ import annotations

from typing import Any, ClassVar, cast

from django.http import QueryDict
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers
from rest_framework.utils.serializer_helpers import BindingDict


def _type_error(field: serializers.Field, value: Any) -> str | None:
    """What is wrong with a JSON value's type for `field`, or None. No coercion: 123 is not a
    string, "8" and 8.5 are not integers, true is not a number."""
    if isinstance(field, serializers.ChoiceField | serializers.JSONField) or value is None:
        return None  # choices are compared as given; JSON fields take any JSON
    if isinstance(field, serializers.CharField | serializers.UUIDField | serializers.DateTimeField):
        return None if isinstance(value, str) else "must be a string"
    if isinstance(field, serializers.IntegerField):
        return None if isinstance(value, int) and not isinstance(value, bool) else "must be an integer"
    if isinstance(field, serializers.FloatField | serializers.DecimalField):
        return None if isinstance(value, int | float) and not isinstance(value, bool) else "must be a number"
    if isinstance(field, serializers.BooleanField):
        return None if isinstance(value, bool) else "must be true or false"
    return None


class StrictSerializer(serializers.Serializer):
    """Unknown keys are an error. With `strict_types`, so is a JSON value of the wrong type (a
    JSON body only: form and multipart data are all strings)."""

    strict_types = False

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, dict):  # checked here, not in validate(): nested serializers have no initial_data
            unknown = set(data) - set(self.fields)
            if unknown:
                raise serializers.ValidationError({key: "unknown field" for key in sorted(unknown)})
            if self.strict_types and not isinstance(data, QueryDict):
                wrong = {
                    name: problem
                    for name, field in self.fields.items()
                    if name in data and not field.read_only and (problem := _type_error(field, data[name]))
                }
                if wrong:
                    raise serializers.ValidationError(wrong)
        return super().to_internal_value(data)


@extend_schema_field({"type": "object", "additionalProperties": True})
class JsonObjectField(serializers.JSONField):
    """A JSON object (a config.json, a quantization config), documented as one in the schema."""


@extend_schema_field({"oneOf": [{"type": "string"}, {"type": "object", "additionalProperties": True}]})
class KeyOrObjectField(serializers.JSONField):
    """A catalog key (string) or an inline object, documented as exactly that."""


class PrebuiltFieldsSerializer(StrictSerializer):
    """An input serializer whose fields are built and bound once per class, not per request.

    Why: DRF deep-copies every declared field (and, lazily, every nested serializer's fields) for
    each new serializer instance; for a small body that copy is most of the validation time (the
    gate's check: 0.26 ms of CPU, 0.06 ms without it). Validation keeps no state on the fields, so
    one bound set serves every request and thread. Only for inputs whose fields read neither
    `context` nor `partial` (they see the prototype's: none and False): no HiddenField, no
    CurrentUserDefault, no partial updates, no `instance`."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if kwargs.get("partial") or kwargs.get("context") or (args and args[0] is not None):
            raise TypeError(f"{type(self).__name__} validates new input only (no instance, context or partial)")
        super().__init__(*args, **kwargs)

    _prototype: ClassVar[Any]

    @property
    def fields(self) -> BindingDict:
        cls = type(self)
        prototype = cls.__dict__.get("_prototype")
        if prototype is None:
            # What DRF's `fields` does, once, for a prototype the fields stay bound to.
            prototype = serializers.Serializer.__new__(cls)
            serializers.Serializer.__init__(prototype)
            bound = BindingDict(prototype)
            for name, field in prototype.get_fields().items():
                bound[name] = field
                if isinstance(field, serializers.Serializer):
                    field.fields  # noqa: B018 (a nested serializer's fields: bound once too)
            prototype.__dict__["fields"] = bound
            cls._prototype = prototype
        return cast(BindingDict, prototype.__dict__["fields"])


# An engine release as the planner reads it (planner.engines.profile.release_numbers: ASCII major.minor,
# optionally .patch) and, anchored, nothing after it but a pre-, post- or local part ("rc1", ".post1",
# "+cu128"): the version is echoed in plan notes, pages and packets, so no spaces, quotes or lines. One
# flat character class after the numbers (no nested repetition: a 40-character value cannot backtrack).
ENGINE_RELEASE_PATTERN = r"^v?[0-9]+\.[0-9]+(\.[0-9]+)?[A-Za-z0-9.+_-]*$"
ENGINE_RELEASE_MESSAGE = "an engine release such as 0.11.0 (major.minor, optionally .patch, rc1, .post1 or +cu128)"


class EngineVersionField(serializers.RegexField):
    """An engine release (ENGINE_RELEASE_PATTERN), at most 40 characters; a 400 says what one looks like."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("max_length", 40)
        kwargs.setdefault("error_messages", {"invalid": ENGINE_RELEASE_MESSAGE})
        super().__init__(ENGINE_RELEASE_PATTERN, **kwargs)
