"""Unknown names answer with what was meant: the closest catalog models for an architecture key,
the expected field names for a GPU spec file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from planner.specs import closest_models, gpu_from_file, model
from tests.deployments.conftest import catalog  # noqa: F401  (fixture)


def test_closest_models_to_a_near_miss() -> None:
    assert closest_models("llama-3.3-70b")[0] == "llama-3.1-70b"
    assert closest_models("Qwen3-32B")[0] == "qwen3-32b"
    assert closest_models("zzzz") == []


def test_closest_models_to_a_hugging_face_repository_name() -> None:
    """What a requester pastes is often the repository: its organisation and the release's
    suffixes (-Instruct, a date) are not part of the architecture."""
    assert closest_models("meta-llama/Llama-3.3-70B-Instruct")[0] == "llama-3.1-70b"
    assert closest_models("Qwen/Qwen3-30B-A3B-Instruct-2507")[0] == "qwen3-30b-a3b"
    assert closest_models("deepseek-ai/DeepSeek-V3.1-Base")[0] == "deepseek-v3"


def test_an_unknown_model_key_names_the_closest() -> None:
    with pytest.raises(ValueError, match=r"model: unknown key 'llama-3.3-70b'; closest: llama-3.1-70b"):
        model("llama-3.3-70b")


def test_a_gpu_spec_with_a_wrong_field_lists_the_expected_names(tmp_path: Path) -> None:
    spec = tmp_path / "mi355x.json"
    spec.write_text(json.dumps({"name": "MI355X", "memory_gib": 288, "hbm_bandwidth_gb_per_s": 8000}))
    with pytest.raises(ValueError) as caught:
        gpu_from_file(spec)
    message = str(caught.value)
    assert "unknown fields ['memory_gib']" in message
    for name in ("name", "memory_mib", "hbm_bandwidth_gb_per_s", "bf16_tflops"):
        assert name in message
    assert "required:" in message


def test_a_gpu_spec_missing_a_field_lists_the_required_names(tmp_path: Path) -> None:
    spec = tmp_path / "x.json"
    spec.write_text(json.dumps({"name": "X", "memory_mib": 1000}))
    with pytest.raises(ValueError, match=r"missing required fields \['bf16_tflops', 'hbm_bandwidth_gb_per_s'\]"):
        gpu_from_file(spec)


@pytest.mark.usefixtures("catalog")
def test_registering_an_artifact_with_a_near_miss_key_names_the_closest(personas: Any) -> None:
    from governance.artifacts.services import artifact_register
    from governance.core.errors import ApplicationError

    data = {
        "name": "Llama-3.3-70B-Instruct",
        "source_repo": "meta-llama/Llama-3.3-70B-Instruct",
        "revision": "main",
        "weights_digest": "sha256:" + "cd" * 32,
        "license": "llama-3.1",
        "architecture_key": "llama-3.3-70b",
    }
    with pytest.raises(ApplicationError) as caught:
        artifact_register(actor=personas.requester, team=personas.team, data=data)
    assert "closest: llama-3.1-70b" in str(caught.value.extra)
