"""A quantization_config comes from a checkpoint's own config.json (issue 42's inspection reads it on
the node), so its fields may have any JSON type: a wrong one is read as nothing known, never a crash
and never another precision (probe of issue 42: a list of config_groups was an internal error; GPTQ
`bits: "4"` read as w8a8; a string group_size raised TypeError)."""

from __future__ import annotations

from typing import Any

import pytest

from planner.hf_config import describe_quantization, infer_precision


@pytest.mark.parametrize(
    ("quantization_config", "key"),
    [
        ({"quant_method": "compressed-tensors", "config_groups": [1, 2], "format": 5}, None),
        ({"quant_method": "compressed-tensors", "config_groups": "group_0"}, None),
        ({"quant_method": "gptq", "bits": "4"}, None),
        ({"quant_method": "awq", "bits": [4]}, None),
        ({"quant_method": "gptq", "bits": True}, None),
        # only the group size is malformed: the scheme is still known, without a group
        ({"quant_method": "gptq", "bits": 4, "group_size": "128"}, "w4a16"),
        ({"quant_method": "awq", "bits": 4, "q_group_size": [128]}, "w4a16"),
    ],
    ids=lambda value: str(value),
)
def test_a_field_of_the_wrong_type_is_no_precision_not_a_crash(
    quantization_config: dict[str, Any], key: str | None
) -> None:
    config = {"quantization_config": quantization_config}
    described = describe_quantization(config)
    assert described is not None
    assert described["key"] == key
    assert (infer_precision(config) or {}).get("precision") == key
    if key is not None:
        assert described["group_size"] is None


@pytest.mark.parametrize(("bits", "key"), [(4, "w4a16"), (8, "w8a8")])
def test_gptq_with_integer_bits_is_read_as_before(bits: int, key: str) -> None:
    described = describe_quantization({"quantization_config": {"quant_method": "gptq", "bits": bits}})
    assert described is not None
    assert described["key"] == key
