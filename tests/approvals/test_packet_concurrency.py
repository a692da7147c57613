"""The concurrency in the packet's engine command agrees with the plan's figure (issue 46): a request
with no concurrency printed "max concurrency 48,521" beside `--max-num-seqs 1`. Now the launch runs the
engine's default batch, the packet says so and where it comes from, and the figure is what the argv
runs. Checked end to end (the request's plan) and in the signed PDF, in English and Chinese."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from django.test import Client

from governance.approvals.packet_content import concurrency_text
from governance.approvals.packet_render import PacketInput, render_packet
from governance.deployments.models import DeploymentRequest
from governance.deployments.services import planner_inputs
from tests.approvals.test_packet_content import _evidence, compiled  # noqa: F401
from tests.conftest import Personas
from tests.deployments.conftest import SERVING, Flow

COMMAND = (
    "vllm serve meta-llama/Llama-3.1-70B-Instruct --tensor-parallel-size 4 --max-model-len 131072 "
    "--gpu-memory-utilization 0.9 --max-num-seqs 1024 --max-num-batched-tokens 8192"
)


def _plan_evidence(concurrency: int | None) -> dict[str, Any]:
    evidence = _evidence()
    result = evidence["capacity_plan"]["result"]
    result["parallel"] = {"tp": 4, "pp": 1, "ep": 1, "dp": 1, "gpus": 4, "nodes": 1}
    result["max_concurrency"] = 48_521
    result["engine"] = {"name": "vllm", "max_num_seqs": 1024 if concurrency is None else concurrency}
    result["serving"] = {"vllm": COMMAND}
    if concurrency is not None:
        evidence["serving_envelope"]["concurrency"] = concurrency
    return evidence


def test_the_figure_is_what_the_launch_runs_and_says_where_its_batch_comes_from() -> None:
    default = _plan_evidence(None)
    text = concurrency_text(default["capacity_plan"]["result"], default["serving_envelope"])
    assert text.startswith("1,024 sequences at once: --max-num-seqs 1024 on each of 1 replica")
    assert "vLLM's default: no concurrency was given" in text
    assert "the KV cache holds 48,521 full-length sequences" in text
    given = _plan_evidence(64)
    text = concurrency_text(given["capacity_plan"]["result"], given["serving_envelope"])
    assert text.startswith("64 sequences at once: --max-num-seqs 64 on each of 1 replica, the request's concurrency")


def test_a_request_with_no_concurrency_launches_the_engines_default_batch(
    personas: Personas, flow: Flow, artifacts: Any
) -> None:
    serving = {key: value for key, value in SERVING.items() if key != "concurrency"}
    code = flow.create(artifacts["apache"], serving_plan=serving)["code"]
    deployment = DeploymentRequest.objects.get(code=code)
    assert "concurrency" not in deployment.serving_plan  # not stored as if the requester had said 1
    assert planner_inputs(deployment)["max_num_seqs"] == 1024  # vLLM's default on an H200
    assert flow.post(personas.requester, code, "submit").status_code == 200
    flow.compute_capacity(code)
    deployment.refresh_from_db()
    evidence = deployment.evidence
    assert evidence is not None
    result = evidence["capacity_plan"]["result"]
    assert "--max-num-seqs 1024" in result["serving"]["vllm"]
    assert result["serving_argv"]["vllm"][result["serving_argv"]["vllm"].index("--max-num-seqs") + 1] == "1024"
    assert result["engine"]["max_num_seqs"] == 1024
    text = concurrency_text(result, evidence["serving_envelope"])
    running = min(result["max_concurrency"], 1024 * result["parallel"]["dp"])
    assert text.startswith(f"{running:,} sequences at once: --max-num-seqs 1024")
    # the request page says the same beside its commands
    client = Client()
    client.force_login(personas.requester)
    page = client.get(f"/requests/{code}/").content.decode()
    assert f"{running:,} sequences at once: --max-num-seqs 1024 on each of" in page
    assert "vLLM&#x27;s default: no concurrency was given" in page
    # a stated concurrency is launched as stated, as before
    stated = flow.create(artifacts["apache"], serving_plan={**serving, "concurrency": 16})["code"]
    assert "max_num_seqs" not in planner_inputs(DeploymentRequest.objects.get(code=stated))


def _text(tmp_path: Path, language: str) -> str:
    data = PacketInput(
        deployment_code="c",
        evidence_digest="7e" * 32,
        evidence=_plan_evidence(None),
        eval_categories={},
        audit_checkpoint=None,
        signatures=[],
        organisation="Acme GmbH",
        language=language,
    )
    pdf = tmp_path / f"packet-{language}.pdf"
    pdf.write_bytes(render_packet(data))
    layout = subprocess.run(["pdftotext", "-layout", str(pdf), "-"], capture_output=True, text=True, check=True)
    return layout.stdout


@pytest.mark.skipif(shutil.which("pdftotext") is None, reason="needs poppler's pdftotext")
@pytest.mark.parametrize(
    ("language", "words"),
    [
        ("en", ("1,024 sequences at once", "vLLM's default: no concurrency was given", "48,521 full-length")),
        ("zh-hans", ("同时运行 1,024 个序列", "vLLM 的默认值：未给出并发数", "48,521 个完整长度")),  # noqa: RUF001
    ],
)
def test_the_packet_states_the_batch_beside_its_command(
    tmp_path: Path,
    compiled: None,  # noqa: F811
    language: str,
    words: tuple[str, ...],
) -> None:
    text = _text(tmp_path, language)
    flat = re.sub(r"\s+", " ", text)
    for phrase in words:
        assert phrase in flat or phrase.replace(" ", "") in flat.replace(" ", ""), (phrase, flat[-3000:])
    assert "--max-num-seqs 1024" in flat  # the command, beside the figure
    assert "--max- " not in flat  # its flags are never cut
    assert "--max-num-seqs 1 " not in flat
