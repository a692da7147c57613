import pytest

from governance.core.canonical import canonical_json, canonical_sha256


def test_canonical_json_sorts_keys_and_normalises_numbers() -> None:
    assert canonical_json({"b": 1, "a": [1.0, "é"]}) == '{"a":[1,"é"],"b":1}'.encode()
    assert canonical_sha256({"x": 1, "y": 2}) == canonical_sha256({"y": 2, "x": 1})
    assert canonical_sha256({"x": 1}) != canonical_sha256({"x": 2})


def test_canonical_json_rejects_nan() -> None:
    with pytest.raises(ValueError, match="canonicalized"):
        canonical_json({"x": float("nan")})
