"""The CLI and the JSON contract of docs/contracts.md (field names and integer byte figures)."""

import dataclasses
import json
import re
from pathlib import Path

import pytest

from planner.plan import PlanRequest, plan
from tests.planner.cli import planner_cli

CONTRACT_KEYS = {
    "model",
    "precision",
    "params",
    "weights",
    "kv_cache",
    "parallel",
    "memory_per_gpu",
    "fits",
    "max_concurrency",
    "throughput",
    "serving",
    "notes",
}


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
    completed = planner_cli(
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


def test_cli_takes_a_cached_prefix_as_the_library_does() -> None:
    """--cached-prefix-len: prompt tokens already in the engine's prefix cache, not prefilled again."""
    args = ["--model", "qwen3-30b-a3b", "--precision", "fp8", "--gpu", "h200", "--tp", "1", "--input-len", "4096"]
    completed = planner_cli("plan", *args, "--cached-prefix-len", "3072", "--format", "json")
    assert completed.returncode == 0, completed.stderr
    printed = json.loads(completed.stdout)
    request = PlanRequest(model="qwen3-30b-a3b", precision="fp8", gpu="h200", tp=1, input_len=4096)
    cached = plan(dataclasses.replace(request, cached_prefix_len=3072)).as_contract()
    assert printed == json.loads(json.dumps(cached))
    assert printed["throughput_estimate"]["inputs"]["cached_prefix_len"] == 3072
    assert printed["throughput_estimate"]["ttft_ms"] < plan(request).as_contract()["throughput_estimate"]["ttft_ms"]


def test_cli_accepts_a_config_json(tmp_path: Path) -> None:
    config = Path(__file__).parent / "configs" / "qwen3-30b-a3b.json"
    completed = planner_cli("plan", "--model", str(config), "--precision", "fp8", "--gpu", "l40s", "--format", "table")
    assert completed.returncode == 0, completed.stderr
    assert "30.5B params" in completed.stdout


KIMI_FP8 = ["--model", "kimi-k2", "--precision", "fp8", "--gpu", "h200"]


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
        ([*KIMI_FP8, "--input-len", "2048", "--cached-prefix-len", "2048"], "--cached-prefix-len"),
        ([*KIMI_FP8, "--input-len", "2048", "--cached-prefix-len", "-1"], "--cached-prefix-len"),
        ([*KIMI_FP8, "--cached-prefix-len", "512"], "--cached-prefix-len"),  # needs --input-len
        ([*KIMI_FP8, "--input-len", "0"], "--input-len"),  # not its (absent) cached prefix
        ([*KIMI_FP8, "--max-model-len", "4096", "--input-len", "8000"], "--input-len"),
    ],
)
def test_cli_bad_input_is_one_line_naming_the_option(args: list[str], option: str) -> None:
    completed = planner_cli("plan", *args)
    assert completed.returncode == 2
    lines = completed.stderr.strip().splitlines()
    assert len(lines) == 1
    assert option in lines[0]


def test_cli_lists_models_and_gpus() -> None:
    assert "kimi-k2" in planner_cli("models").stdout
    assert "h200" in planner_cli("gpus").stdout


def test_engine_accounting_is_added_to_the_contract_in_the_engines_own_names() -> None:
    result = plan(
        PlanRequest(model="llama-3.1-8b", precision="bf16", gpu="h100-80g", tp=1, pp=1, dp=1, max_model_len=32768)
    ).as_contract()
    engine = result["engine"]
    assert engine["name"] == "vllm"
    assert engine["max_num_batched_tokens"] == 8192  # V1 default for `vllm serve` on an 80 GB Hopper
    figures = engine["memory_per_gpu"]
    assert figures["total_gpu_memory"] == result["gpu"]["total_memory_bytes"] == 81090 << 20
    assert figures["available_kv_cache_memory"] == result["memory_per_gpu"]["kv_cache"]
    assert figures["requested_memory"] == int(figures["total_gpu_memory"] * 0.9)
    assert figures["requested_memory"] == (
        figures["model_loading"]
        + figures["torch_peak_increase"]
        + figures["non_torch_memory"]
        + figures["available_kv_cache_memory"]
    )
    sglang = plan(
        PlanRequest(model="llama-3.1-8b", precision="bf16", gpu="h100-80g", tp=1, max_model_len=32768, engine="sglang")
    ).as_contract()
    theirs = sglang["engine"]["memory_per_gpu"]
    # SGLang keeps activations outside mem_fraction_static: its pool is the fraction less weights and
    # what is in use before the pool, with no activation term.
    assert theirs["kv_cache_memory"] == (
        theirs["mem_fraction_static_bytes"] - theirs["weights_memory"] - theirs["memory_before_kv_pool"]
    )
    assert sglang["memory_per_gpu"]["activations"] == 0


def test_gpu_spec_file_plans_on_a_gpu_outside_the_catalog(tmp_path: Path) -> None:
    spec = tmp_path / "rtx-a6000.json"
    spec.write_text(
        json.dumps({"name": "RTX A6000", "memory_mib": 48676, "hbm_bandwidth_gb_per_s": 768, "bf16_tflops": 155})
    )
    done = planner_cli("plan", "--model", "llama-3.1-8b", "--gpu-spec", str(spec), "--format", "json")
    assert done.returncode == 0, done.stderr
    contract = json.loads(done.stdout)
    assert contract["gpu"] == {"key": "rtx-a6000", "name": "RTX A6000", "total_memory_bytes": 48676 << 20}
    assert contract["precision"] == "bf16"  # "auto": a BF16 checkpoint
    spec.write_text(json.dumps({"name": "broken", "memory_mib": -1, "hbm_bandwidth_gb_per_s": 1, "bf16_tflops": 1}))
    bad = planner_cli("plan", "--model", "llama-3.1-8b", "--gpu-spec", str(spec))
    assert bad.returncode == 2
    assert "memory_mib must be a positive number" in bad.stderr


def test_cli_prints_the_trtllm_token_capacity_as_tokens() -> None:
    completed = planner_cli(
        "plan", "--model", "llama-3.1-8b", "--precision", "fp8", "--gpu", "h100-80g", "--engine", "trtllm"
    )
    assert completed.returncode == 0, completed.stderr
    line = next(line for line in completed.stdout.splitlines() if "max_tokens_in_paged_kv_cache" in line)
    assert "max_tokens_in_paged_kv_cache 0.00 GiB" not in line
    assert re.search(r"max_tokens_in_paged_kv_cache [0-9,]{5,}", line), line
