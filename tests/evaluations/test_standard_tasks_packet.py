"""The approval packet states the standard tasks (lm-eval) of a served eval, per task and metric
with standard errors, and says nothing of them for a run that asked for none."""

from __future__ import annotations

from typing import Any

from governance.approvals.packet_render import PacketInput, render_html


def packet(item: dict[str, Any]) -> str:
    evidence = {"request": {"facts": {}}, "eval_results": [item]}
    return render_html(
        PacketInput(
            deployment_code="d1",
            evidence_digest="d" * 64,
            evidence=evidence,
            eval_categories={},
            audit_checkpoint=None,
            signatures=[],
            organisation="Org",
        )
    )


def test_the_packet_states_standard_tasks_with_their_standard_errors() -> None:
    served = {"eval": "e1", "kind": "served", "scheme": "w4a8", "status": "passed", "engine": "vllm", "serving": {}}
    standard = {
        "harness": "lm-eval",
        "lm_eval_version": "0.4.13",
        "tasks_dir_sha256": "f" * 64,
        "tasks": {
            "tiny_copy": {
                "version": 1.0,
                "n": 6,
                "metrics": {
                    "exact_match": {
                        "baseline": 1.0,
                        "baseline_stderr": 0.0,
                        "candidate": 0.8333,
                        "candidate_stderr": 0.1667,
                        "delta": -0.1667,
                        "delta_stderr": 0.1667,
                    }
                },
            }
        },
    }
    html = packet({**served, "standard_tasks": standard})
    assert "Standard tasks (lm-eval 0.4.13" in html
    assert "f" * 64 in html
    assert "<td>tiny_copy</td><td>exact_match</td>" in html
    assert "0.8333 ± 0.1667" in html
    assert "-0.1667 ± 0.1667" in html
    assert "Standard tasks" not in packet(served)
