"""PrebuiltFieldsSerializer: fields built once per class, validation still per instance."""

from __future__ import annotations

import pytest
from rest_framework import serializers

from governance.core.serializers import PrebuiltFieldsSerializer, StrictSerializer


class Inner(StrictSerializer):
    size = serializers.IntegerField(min_value=1)


class Outer(PrebuiltFieldsSerializer):
    name = serializers.CharField()
    inner = Inner()


def test_fields_are_built_once_and_shared() -> None:
    first, second = Outer(data={}), Outer(data={})
    assert first.fields is second.fields
    first_inner, second_inner = first.fields["inner"], second.fields["inner"]
    assert isinstance(first_inner, Inner)
    assert isinstance(second_inner, Inner)
    assert first_inner.fields is second_inner.fields  # nested: once too


def test_each_instance_validates_its_own_data() -> None:
    good = Outer(data={"name": "a", "inner": {"size": 2}})
    bad = Outer(data={"name": "b", "inner": {"size": 0}})
    assert bad.is_valid() is False
    assert good.is_valid() is True
    assert good.validated_data == {"name": "a", "inner": {"size": 2}}
    assert "inner" in bad.errors
    assert "size" in bad.errors["inner"]
    unknown = Outer(data={"name": "c", "inner": {"size": 1}, "extra": 1})
    assert unknown.is_valid() is False
    assert unknown.errors == {"extra": "unknown field"}  # StrictSerializer's rule still holds


@pytest.mark.parametrize("kwargs", [{"partial": True}, {"context": {"request": object()}}])
def test_what_shared_fields_cannot_honour_is_refused(kwargs: dict[str, object]) -> None:
    with pytest.raises(TypeError):
        Outer(data={}, **kwargs)
    with pytest.raises(TypeError):
        Outer(object())  # an instance to update
