"""What a fresh user of the planner met (issue 31): the launch commands state the step budget that
was planned, an unknown engine release is refused, any number of replicas, a pinned layout that does
not fit is named, every engine's command is printed, and a plan that does not fit fails the CLI with
its margin."""

from __future__ import annotations

import json

import pytest

from planner.plan import PlanRequest, plan
from tests.planner.cli import planner_cli
from tests.planner.requests import PlanArgs, plan_request

LLAMA_A100: PlanArgs = {"model": "llama-3.1-8b", "precision": "bf16", "gpu": "a100-80g", "max_model_len": 32768}


def test_launch_commands_state_the_step_budget_and_the_sequences_planned() -> None:
    """The plan prefilled in vLLM's 2048-token A100 budget; a command without the flag leaves the
    engine to pick, and SGLang's own default (8192) is not what was planned."""
    result = plan(plan_request(LLAMA_A100, concurrency=16, max_num_seqs=64)).as_contract()
    assert result["engine"]["max_num_batched_tokens"] == 2048
    assert "--max-num-batched-tokens 2048" in result["serving"]["vllm"]
    assert "--chunked-prefill-size 2048" in result["serving"]["sglang"]
    assert "--max_num_tokens 2048" in result["serving"]["tensorrt_llm"]
    # --max-num-seqs as asked, not overwritten by the concurrency
    assert "--max-num-seqs 64" in result["serving"]["vllm"]
    assert "--max-running-requests 64" in result["serving"]["sglang"]
    asked = plan(plan_request(LLAMA_A100, max_num_batched_tokens=4096)).as_contract()
    assert "--max-num-batched-tokens 4096" in asked["serving"]["vllm"]


@pytest.mark.parametrize(("engine", "version"), [("vllm", "9.0"), ("vllm", "0.18.0"), ("sglang", "0.6.0")])
def test_an_unknown_engine_release_is_refused_naming_the_field(engine: str, version: str) -> None:
    """Newer than every profile. An older release is planned with the oldest profile (issue 47:
    tests/planner/test_team_evidence.py)."""
    with pytest.raises(ValueError, match=r"^engine_version: "):
        plan(plan_request(LLAMA_A100, engine=engine, engine_version=version))


def test_known_releases_still_plan() -> None:
    for engine, version in (
        ("vllm", "0.6.4"),
        ("vllm", "0.10.1"),
        ("vllm", "0.17.0"),
        ("sglang", "0.4.9"),
        ("vllm", "0.1.0"),
    ):
        assert plan(plan_request(LLAMA_A100, engine=engine, engine_version=version)).chosen.fits


def test_cli_refuses_an_unknown_engine_release() -> None:
    done = planner_cli("plan", "--model", "llama-3.1-8b", "--gpu", "a100-80g", "--engine-version", "9.0.0")
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1
    assert "--engine-version" in done.stderr


def test_three_replicas() -> None:
    pinned = plan(plan_request(LLAMA_A100, tp=1, dp=3)).as_contract()
    assert pinned["parallel"]["dp"] == 3
    assert pinned["parallel"]["gpus"] == 3
    assert "--data-parallel-size 3" in pinned["serving"]["vllm"]
    # The search takes 3 replicas when 2 hold too few sequences and 4 would be one GPU more than needed.
    one = plan(plan_request(LLAMA_A100, tp=1, dp=1)).chosen.max_concurrency
    searched = plan(plan_request(LLAMA_A100, tp=1, concurrency=2 * one + 1)).as_contract()
    assert searched["fits"]
    assert searched["parallel"]["dp"] == 3


def test_a_pinned_layout_that_does_not_fit_is_named() -> None:
    result = plan(PlanRequest(model="kimi-k2", precision="bf16", gpu="a100-80g", tp=8, pp=1, dp=1, ep=8))
    assert not result.chosen.fits
    assert not any("No layout of up to" in note for note in result.notes)
    assert any(note.startswith("The pinned layout tp=8 pp=1 ep=8 dp=1 does not fit") for note in result.notes)


def test_the_table_prints_every_engines_command() -> None:
    done = planner_cli("plan", "--model", "llama-3.1-8b", "--gpu", "h100-80g")
    assert done.returncode == 0, done.stderr
    assert any(line.startswith("tensorrt_llm: trtllm-serve ") for line in done.stdout.splitlines())


def test_the_margin_is_reported_and_a_plan_that_does_not_fit_fails_the_cli() -> None:
    fits = plan(plan_request(LLAMA_A100, tp=1, dp=1)).as_contract()
    margin = fits["fit_margin"]
    assert margin["sequences"] == fits["max_concurrency"] - 1 > 0
    assert margin["kv_bytes_per_gpu"] > 0
    assert margin["kv_bytes_per_gpu"] < fits["memory_per_gpu"]["kv_cache"]
    args = ["plan", "--model", "kimi-k2", "--precision", "bf16", "--gpu", "a100-80g", "--tp", "8", "--ep", "8"]
    done = planner_cli(*args, "--pp", "1", "--dp", "1", "--format", "json")
    assert done.returncode == 3
    contract = json.loads(done.stdout)  # the plan is still printed, for the figures
    assert contract["fits"] is False
    short = -contract["fit_margin"]["kv_bytes_per_gpu"]
    assert short > 0
    assert "does not fit" in done.stderr
    assert f"{short / (1 << 30):.1f} GiB per GPU" in done.stderr


def test_a_plan_short_of_the_concurrency_says_by_how_many_sequences() -> None:
    one = plan(plan_request(LLAMA_A100, tp=1, dp=1)).chosen.max_concurrency
    over = plan(plan_request(LLAMA_A100, tp=1, dp=1, concurrency=one + 5)).as_contract()
    assert over["fits"] is False
    assert over["fit_margin"]["sequences"] == -5
    assert over["fit_margin"]["kv_bytes_per_gpu"] < 0
    done = planner_cli(
        "plan", "--model", "llama-3.1-8b", "--gpu", "a100-80g", "--max-model-len", "32768", "--tp", "1", "--dp", "1",
        "--concurrency", str(one + 5),
    )  # fmt: skip
    assert done.returncode == 3
    assert "5 sequences short" in done.stderr


QUEUED: PlanArgs = {
    "model": "llama-3.1-8b",
    "precision": "bf16",
    "gpu": "h100-80g",
    "tp": 1,
    "dp": 1,
    "max_model_len": 4096,
}
SERVICE: PlanArgs = {"input_len": 1024, "output_len": 256}


def test_max_num_seqs_below_the_concurrency_queues_the_rest() -> None:
    """vLLM and SGLang run at most --max-num-seqs / --max-running-requests sequences; the other
    requests of a closed loop wait in the engine's queue. TPOT and tokens/s are those of the running
    batch; the wait lands in TTFT (Little's law: 64 clients over 16 slots wait 3 service cycles)."""
    capped = plan(plan_request(QUEUED, SERVICE, concurrency=64, max_num_seqs=16))
    running = plan(plan_request(QUEUED, SERVICE, concurrency=16, max_num_seqs=16))
    assert capped.throughput.batch == 16
    assert capped.throughput.tpot_ms == pytest.approx(running.throughput.tpot_ms, rel=1e-9)
    assert capped.throughput.decode_tokens_per_s == pytest.approx(running.throughput.decode_tokens_per_s, rel=1e-9)
    cycle_ms = running.throughput.ttft_ms + 255 * running.throughput.tpot_ms
    assert capped.throughput.ttft_ms == pytest.approx(running.throughput.ttft_ms + 3 * cycle_ms, rel=0.02)
    assert capped.as_contract()["throughput_estimate"]["inputs"]["queued_per_replica"] == 48


def test_a_capped_engine_needs_room_for_its_running_sequences_only() -> None:
    """The engine never holds more than max_num_seqs sequences per replica: those are what must fit."""
    held = plan(plan_request(QUEUED, {"max_model_len": 131072})).chosen.max_concurrency
    result = plan(plan_request(QUEUED, {"max_model_len": 131072}, concurrency=held + 8, max_num_seqs=held))
    assert result.chosen.fits
    assert result.as_contract()["fit_margin"]["sequences"] == 0


def test_the_verdict_says_whether_the_engine_starts_apart_from_the_concurrency() -> None:
    """vLLM starts when its pool holds one max_model_len sequence per replica (it refuses to start
    otherwise); holding fewer sequences than the concurrency only makes requests wait. `starts` says
    the first, `fits` the second, and the CLI's message tells them apart."""
    one = plan(plan_request(LLAMA_A100, tp=1, dp=1)).chosen.max_concurrency
    short = plan(plan_request(LLAMA_A100, tp=1, dp=1, concurrency=one + 5)).as_contract()
    assert short["starts"] is True
    assert short["fits"] is False
    heavy = plan(PlanRequest(model="kimi-k2", precision="bf16", gpu="a100-80g", tp=8, pp=1, dp=1, ep=8))
    assert heavy.as_contract()["starts"] is False
    done = planner_cli(
        "plan", "--model", "llama-3.1-8b", "--gpu", "a100-80g", "--max-model-len", "32768", "--tp", "1", "--dp", "1",
        "--concurrency", str(one + 5),
    )  # fmt: skip
    assert "the engine starts" in done.stderr
