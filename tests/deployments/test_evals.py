"""An eval run through a (local) cluster becomes evidence; a failing gate blocks engineering approval."""

from __future__ import annotations

import sys
from pathlib import Path

from governance.deployments.models import DeploymentRequest
from governance.evaluations.evals import eval_run_request
from governance.evaluations.models import Cluster, ExecutorKind
from planner.evaljob.tiny import TINY_QWEN3_MOE, random_model_spec, train_tokenizer
from tests.deployments.conftest import Flow
from tests.evaluations.conftest import drive, locate

ROOT = Path(__file__).resolve().parents[2]


def test_failing_eval_is_evidence_and_blocks_engineering(
    flow: Flow, artifacts, personas, tmp_path, settings, django_capture_on_commit_callbacks
) -> None:
    settings.JOB_POLL_INITIAL_S = 0.5
    settings.JOB_POLL_MAX_S = 1.0
    cluster = Cluster.objects.create(
        name="local",
        executor=ExecutorKind.LOCAL,
        remote_root=str(tmp_path / "runs"),
        default_time_limit_s=600,
        setup_lines=f"export PATH={Path(sys.executable).parent}:$PATH PYTHONPATH={ROOT}",
    )
    code = flow.to_review(artifacts["apache"])
    request = DeploymentRequest.objects.get(code=code)
    tokenizer = train_tokenizer(tmp_path / "tokenizer.json")
    evaluation = eval_run_request(
        cluster=cluster,
        scheme="fp8",  # the served precision: its eval is the one that counts
        deployment=request,
        actor=personas.engineer,
        max_cases_per_category=2,
        max_new_tokens=4,
        model={
            **random_model_spec(TINY_QWEN3_MOE, Path("tokenizer.json"), dtype="float32"),
            "device": "cpu",
        },
        extra_files={"tokenizer.json": tokenizer.read_text()},
    )
    # Nothing is in the evidence until the run ends: the served precision still has no eval.
    assert "eval.missing" in [b["code"] for b in flow.get(personas.engineer, code)["blockers"]]
    with django_capture_on_commit_callbacks(execute=True):
        job = drive(evaluation.job, timeout_s=240)  # type: ignore[arg-type]
    assert job.state == "succeeded", job.reason + job.log_tail
    evaluation.refresh_from_db()
    assert evaluation.status == "failed"  # 8 cases cannot pass a 5% gate: the bound is >= 0.31
    assert evaluation.summary is not None
    assert evaluation.summary["overall"]["n"] == 8
    assert set(evaluation.summary["categories"]) == {"math", "code", "zh_summary", "multi_turn"}
    body = flow.get(personas.engineer, code)
    # A screening run simulates the quantization: its failure is shown with the run, and the
    # request still needs a served eval of its weights (screening never satisfies readiness).
    assert "eval.missing" in [b["code"] for b in body["blockers"]]
    request.refresh_from_db()
    assert request.evidence is not None
    assert request.evidence["eval_results"][0]["scheme"] == "fp8"
    assert request.evidence["eval_results"][0]["status"] == "failed"
    detail = flow.client(personas.auditor).get(f"/api/v1/evals/{evaluation.code}").json()
    assert detail["summary"]["overall"]["upper_bound_95"] >= 0.31


def test_eval_request_api_validates_input(flow: Flow, artifacts, personas) -> None:
    code = flow.to_review(artifacts["apache"])
    client = flow.client(personas.engineer)
    for body, field in (
        ({"cluster": "x", "kind": "screening", "scheme": "w3a3"}, "scheme"),
        ({"cluster": "x", "kind": "bogus"}, "kind"),
        ({"cluster": "x", "model_path": "/m"}, "model_path"),  # the free-text path is gone
        ({"cluster": "nope", "kind": "screening", "scheme": "w4a8"}, "cluster"),
    ):
        response = client.post(f"/api/v1/deployments/{code}/evals", body, format="json")
        assert response.status_code == 400
        assert field in response.json()["extra"]["fields"]
    assert (
        flow.client(personas.requester).post(f"/api/v1/deployments/{code}/evals", {}, format="json").status_code == 403
    )


def test_uploaded_eval_set_is_validated_and_shipped(flow: Flow, artifacts, personas, tmp_path) -> None:
    import json

    import pytest

    from governance.core.errors import ApplicationError
    from governance.evaluations.evals import validate_eval_set
    from governance.evaluations.models import JobRun

    Cluster.objects.create(name="c2", executor=ExecutorKind.LOCAL, remote_root=str(tmp_path), model_roots=["/models"])
    code = flow.to_review(artifacts["apache"])
    locate(code, "c2", "/models/x")
    client = flow.client(personas.engineer)
    body = {"cluster": "c2", "kind": "screening", "scheme": "w8a8"}
    bad = client.post(f"/api/v1/deployments/{code}/evals", {**body, "eval_set": '{"id": "a"}\n'}, format="json")
    assert bad.status_code == 400
    assert "eval_set" in bad.json()["extra"]["fields"]
    assert JobRun.objects.count() == 0
    own = "\n".join(
        json.dumps({"id": f"c{i}", "category": "ops", "turns": ["hi"], "key_items": ["x"]}) for i in range(3)
    )
    ok = client.post(f"/api/v1/deployments/{code}/evals", {**body, "eval_set": own}, format="json")
    assert ok.status_code == 202, ok.json()
    job = JobRun.objects.get()
    assert job.files["eval_set.jsonl"] == own
    assert json.loads(job.files["spec.json"])["eval_set"] == "eval_set.jsonl"
    with pytest.raises(ApplicationError, match="no cases"):
        validate_eval_set("")
