"""The CLI and the JSON contract of DESIGN.md (field names and integer byte figures)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from planner.plan import PlanRequest, plan

ROOT = Path(__file__).resolve().parents[2]
CONTRACT_KEYS = {
    "model", "precision", "params", "weights", "kv_cache", "parallel", "memory_per_gpu", "fits",
    "max_concurrency", "throughput", "serving", "notes",
}  # fmt: skip


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "planner", *args], cwd=ROOT, capture_output=True, text=True, check=False
    )


def test_contract_shape_and_integer_bytes() -> None:
    result = plan(PlanRequest(model="deepseek-v3", precision="fp8", gpu="h200", max_model_len=131072)).as_contract()
    assert set(result) >= CONTRACT_KEYS
    assert set(result["params"]) == {"total", "active_per_token"}
    assert set(result["weights"]) == {"total_bytes", "per_gpu_bytes"}
    assert set(result["kv_cache"]) == {"bytes_per_token", "bytes_per_token_per_gpu", "capacity_tokens"}
    assert set(result["parallel"]) == {"tp", "pp", "ep", "dp", "gpus", "nodes"}
    assert set(result["memory_per_gpu"]) == {"weights", "kv_cache", "activations", "overhead", "total", "capacity"}
    assert set(result["throughput"]) == {"decode_tokens_per_s", "tpot_ms", "ttft_ms"}
    for group in ("weights", "kv_cache", "memory_per_gpu"):
        assert all(isinstance(v, int) and not isinstance(v, bool) for v in result[group].values()), group
    assert result["kv_cache"]["capacity_tokens"] % 16 == 0  # whole 16-token blocks
    assert result["fits"] is True
    assert result["parallel"]["gpus"] == 8
    assert result["serving"]["vllm"].startswith("vllm serve deepseek-ai/DeepSeek-V3")
    assert "--max-model-len 131072" in result["serving"]["vllm"]
    assert result["serving"]["sglang"].startswith("python -m sglang.launch_server")
    assert any("vLLM" in note for note in result["notes"])
    assert any("upper bound" in note for note in result["notes"])


def test_fixed_layout_is_honoured_and_flags_are_emitted() -> None:
    result = plan(
        PlanRequest(
            model="qwen3-235b-a22b", precision="fp8", gpu="h200", tp=8, ep=8, kv_dtype="fp8", max_model_len=32768
        )
    ).as_contract()
    assert result["parallel"] == {"tp": 8, "pp": 1, "ep": 8, "dp": 1, "gpus": 8, "nodes": 1}
    command = result["serving"]["vllm"]
    for flag in ("--tensor-parallel-size 8", "--enable-expert-parallel", "--kv-cache-dtype fp8", "--quantization fp8"):
        assert flag in command


def test_a_model_that_cannot_fit_says_so() -> None:
    result = plan(PlanRequest(model="kimi-k2", precision="bf16", gpu="a100-80g", tp=8, pp=1, dp=1, ep=8)).as_contract()
    assert result["fits"] is False
    assert any("Rejected" in note and "exceed" in note for note in result["notes"])


def test_search_prefers_fewest_gpus() -> None:
    small = plan(PlanRequest(model="qwen3-30b-a3b", precision="bf16", gpu="h200", max_model_len=32768)).as_contract()
    assert small["parallel"]["gpus"] == 1
    big = plan(PlanRequest(model="deepseek-v3", precision="bf16", gpu="h200", max_model_len=32768)).as_contract()
    assert big["parallel"]["gpus"] == 16  # 1.34 TB of BF16 weights do not fit on 8 x 141 GB
    assert big["parallel"]["nodes"] == 2


def test_cli_json_matches_the_library() -> None:
    completed = _cli(
        "plan",
        "--model",
        "mixtral-8x7b",
        "--precision",
        "w4a16",
        "--gpu",
        "h100-80g",
        "--max-model-len",
        "32768",
        "--format",
        "json",
    )
    assert completed.returncode == 0, completed.stderr
    printed = json.loads(completed.stdout)
    direct = plan(
        PlanRequest(model="mixtral-8x7b", precision="w4a16", gpu="h100-80g", max_model_len=32768)
    ).as_contract()
    assert printed == direct


def test_cli_accepts_a_config_json(tmp_path: Path) -> None:
    config = Path(__file__).parent / "configs" / "qwen3-30b-a3b.json"
    completed = _cli("plan", "--model", str(config), "--precision", "fp8", "--gpu", "l40s", "--format", "table")
    assert completed.returncode == 0, completed.stderr
    assert "30.5B params" in completed.stdout


@pytest.mark.parametrize(
    ("args", "option"),
    [
        (["--model", "nope", "--precision", "fp8", "--gpu", "h200"], "--model"),
        (["--model", "kimi-k2", "--precision", "fp8", "--gpu", "h200", "--tp", "3"], "--tp"),
        (["--model", "kimi-k2", "--precision", "fp8", "--gpu", "h200", "--tp", "16"], "--tp"),
        (["--model", "kimi-k2", "--precision", "fp9", "--gpu", "h200"], "--precision"),
        (
            ["--model", "kimi-k2", "--precision", "fp8", "--gpu", "h200", "--gpu-memory-utilization", "1.5"],
            "--gpu-memory-utilization",
        ),
        (["--model", "kimi-k2", "--precision", "fp8", "--gpu", "h200", "--group-size", "64"], "--group-size"),
    ],
)
def test_cli_bad_input_is_one_line_naming_the_option(args: list[str], option: str) -> None:
    completed = _cli("plan", *args)
    assert completed.returncode == 2
    lines = completed.stderr.strip().splitlines()
    assert len(lines) == 1
    assert option in lines[0]


def test_cli_lists_models_and_gpus() -> None:
    assert "kimi-k2" in _cli("models").stdout
    assert "h200" in _cli("gpus").stdout
