"""The approved serving envelope as the gate checks it (tp/pp/ep from the plan when the request did
not fix them), and the copyable `scripts/gate-check` command built from it, quoted for the shell."""

from __future__ import annotations

import shlex
from typing import Any

from governance.deployments.envelope import approved_envelope, gate_check_command

EVIDENCE: dict[str, Any] = {
    "artifact": {"weights_digest": "sha256:" + "ab" * 32},
    "serving_envelope": {"engine": "vllm", "precision": "fp8", "gpu": "h200", "max_model_len": 32768},
    "capacity_plan": {"result": {"parallel": {"tp": 8, "pp": 1, "ep": 8, "dp": 1}}},
}


def test_the_envelope_states_everything_the_gate_checks() -> None:
    assert approved_envelope(EVIDENCE) == {
        "engine": "vllm",
        "precision": "fp8",
        "gpu": "h200",
        "kv_dtype": "bf16",
        "tp": 8,
        "pp": 1,
        "ep": 8,
        "max_model_len": 32768,
        "gpu_memory_utilization": 0.9,
    }


def test_a_fixed_layout_wins_over_the_plans() -> None:
    evidence = {**EVIDENCE, "serving_envelope": {**EVIDENCE["serving_envelope"], "tp": 4, "pp": 2}}
    envelope = approved_envelope(evidence)
    assert (envelope["tp"], envelope["pp"], envelope["ep"]) == (4, 2, 8)


def test_no_plan_yet_means_one_gpu_per_dimension() -> None:
    envelope = approved_envelope({"serving_envelope": {"engine": "sglang", "precision": "w4a8", "gpu": "b200"}})
    assert (envelope["tp"], envelope["pp"], envelope["ep"], envelope["max_model_len"]) == (1, 1, 1, None)


def test_the_command_carries_the_approved_config_and_is_shell_safe() -> None:
    command = gate_check_command(
        deployment="6f1c1e9e-0000-4000-8000-000000000001",
        environment="prod; rm -rf /",
        evidence=EVIDENCE,
        base_url="https://governance.example/",
    )
    argv = shlex.split(command.replace("\\\n", " "))
    # the token is the team's CI token, set in the pipeline's secrets: never printed on a page
    assert argv[:2] == ["GOV_URL=https://governance.example", "scripts/gate-check"]
    options = dict(zip(argv[2::2], argv[3::2], strict=True))
    assert options == {
        "--deployment": "6f1c1e9e-0000-4000-8000-000000000001",
        "--environment": "prod; rm -rf /",
        "--artifact-digest": "sha256:" + "ab" * 32,
        "--engine": "vllm",
        "--precision": "fp8",
        "--gpu": "h200",
        "--kv-dtype": "bf16",
        "--tp": "8",
        "--pp": "1",
        "--ep": "8",
        "--max-model-len": "32768",
        "--gpu-memory-utilization": "0.9",
    }


def test_the_request_page_offers_the_command(flow: Any, artifacts: Any) -> None:
    from django.test import Client

    code = flow.to_review(artifacts["apache"])
    client = Client()
    client.force_login(flow.p.requester)
    page = client.get(f"/requests/{code}/").content.decode()
    assert 'id="gate-command"' in page
    assert f"--deployment {code}" in page
    assert "--artifact-digest sha256:" in page
    assert "--max-model-len 32768" in page
    assert 'data-copy="gate-command"' in page


def test_the_command_names_the_engine_version_the_approval_is_bound_to() -> None:
    """Issue 43: the gate requires serving.engine_version once the approved eval recorded one, so
    the command a page offers carries it (and leaves it out while no eval binds a version)."""
    served = {
        "kind": "served",
        "scheme": "fp8",
        "status": "passed",
        "candidate_digest": EVIDENCE["artifact"]["weights_digest"],
        "engine": "vllm",
        "engine_version": "0.11.0",
        "serving": {"precision": "fp8", "tp": 8, "pp": 1, "ep": 8, "dp": 1},
        "overall": {"upper_bound_95": 0.01},
    }

    def options(evidence: dict[str, Any]) -> dict[str, str]:
        command = gate_check_command(deployment="d", environment="production", evidence=evidence, base_url="https://g/")
        argv = shlex.split(command.replace("\\\n", " "))
        return dict(zip(argv[2::2], argv[3::2], strict=True))

    assert options({**EVIDENCE, "eval_results": [served]})["--engine-version"] == "0.11.0"
    assert "--engine-version" not in options(EVIDENCE)
