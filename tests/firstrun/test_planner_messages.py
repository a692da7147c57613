"""Launch commands name what to serve; a layout that breaks a rule says which rule and what would work."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from planner.plan import PlanRequest, plan
from tests.planner.cli import planner_cli

DENSE = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "vocab_size": 128256,
    "max_position_embeddings": 131072,
    "head_dim": 128,
    "tie_word_embeddings": False,
}


def _plan_fp8_on_h100(config: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return planner_cli("plan", "--model", str(config), "--precision", "fp8", "--gpu", "h100-80g", *extra)


def test_cli_serves_the_directory_of_a_pasted_config(tmp_path: Path) -> None:
    checkpoint = tmp_path / "Llama-3.1-8B-Instruct"
    checkpoint.mkdir()
    (checkpoint / "config.json").write_text(json.dumps(DENSE))
    result = _plan_fp8_on_h100(checkpoint / "config.json", "--format", "json")
    assert result.returncode == 0, result.stderr
    serving = json.loads(result.stdout)["serving"]
    assert serving["vllm"].startswith(f"vllm serve {checkpoint} ")
    assert f"--model-path {checkpoint} " in serving["sglang"]
    assert "custom" not in json.dumps(serving)


def test_inline_config_serves_its_own_name_or_a_placeholder() -> None:
    named = plan(
        PlanRequest(
            model={**DENSE, "_name_or_path": "meta-llama/Llama-3.1-8B-Instruct"}, precision="fp8", gpu="h100-80g"
        )
    ).as_contract()
    assert named["serving"]["vllm"].startswith("vllm serve meta-llama/Llama-3.1-8B-Instruct ")
    anonymous = plan(PlanRequest(model=DENSE, precision="fp8", gpu="h100-80g")).as_contract()
    assert anonymous["serving"]["vllm"].startswith("vllm serve MODEL_PATH ")
    given = plan(PlanRequest(model=DENSE, precision="fp8", gpu="h100-80g", model_path="org/my-llama")).as_contract()
    assert given["serving"]["vllm"].startswith("vllm serve org/my-llama ")


def test_ep_on_a_dense_model_names_the_rule_and_a_valid_layout(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps(DENSE))
    result = _plan_fp8_on_h100(tmp_path / "config.json", "--tp", "8", "--ep", "8")
    assert result.returncode == 2
    assert "no valid layout for tp=8 ep=8: ep > 1 needs an MoE model (this model is dense)" in result.stderr
    assert "try tp=8 pp=1 ep=1 dp=1" in result.stderr
    # The suggestion is itself a valid layout.
    assert plan(PlanRequest(model=DENSE, precision="fp8", gpu="h100-80g", tp=8, pp=1, ep=1, dp=1)).as_contract()


def test_planner_api_answers_400_with_the_rule(db: None, personas) -> None:
    response = personas.client(personas.engineer).post(
        "/api/v1/planner/plan", {"model": DENSE, "precision": "fp8", "gpu": "h100-80g", "tp": 8, "ep": 8}, format="json"
    )
    assert response.status_code == 400
    assert "ep > 1 needs an MoE model" in response.json()["message"]
    assert "try tp=8" in response.json()["message"]
