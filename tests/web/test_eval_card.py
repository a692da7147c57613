"""The eval card as a reviewer reads it (issue 46): the live count of answers from the served job's
log (it said "0 of 0 cases done" while the log showed 20/20 baseline answers), the engine version
while the run is in progress ("transformers ?"), per category the baseline and candidate accuracy
with the difference, and /requests/<code>/evals opened directly is a whole page."""

from __future__ import annotations

import re
from typing import Any

from django.template.loader import render_to_string
from django.test import Client
from django.utils import translation

from governance.deployments.models import DeploymentRequest
from governance.evaluations.evals import summarise
from governance.evaluations.models import Cluster, EvalKind, EvalRun, EvalStatus, JobRun, JobRunState
from governance.web.selectors.deployment import eval_progress

LOG = "\n".join(
    [
        "verified baseline sha256:aa",
        "verified candidate sha256:bb",
        "engine transformers 5.24.0",
        "baseline: 0 cached, 20 to ask",
        "baseline: starting python on port 4000",
        *(f"progress baseline {n}/20" for n in range(1, 21)),
        "candidate: 0 cached, 20 to ask",
        *(f"progress candidate {n}/20" for n in range(1, 4)),
    ]
)


def _running(log: str) -> EvalRun:
    job = JobRun(state=JobRunState.RUNNING, log_tail=log)
    return EvalRun(scheme="w4a16", kind=EvalKind.SERVED, engine="transformers", status=EvalStatus.RUNNING, job=job)


def test_the_served_jobs_answers_are_counted_while_it_runs(db: None) -> None:
    progress = eval_progress(_running(LOG))
    assert (progress["done"], progress["total"]) == (23, 40)
    assert [(p["label"], p["done"], p["total"]) for p in progress["phases"]] == [
        ("baseline", 20, 20),
        ("candidate", 3, 20),
    ]
    with translation.override("en"):  # a zh page request earlier in the thread leaves zh active
        html = render_to_string(
            "web/partials/evals.html", {"evals": [progress], "code": "00000000-0000-0000-0000-000000000000"}
        )
    assert "23 of 40 answers" in html
    assert "Served through transformers 5.24.0" in html


def test_cached_baseline_answers_count_as_done(db: None) -> None:
    log = "engine vllm 0.11.0\nbaseline: every answer cached, engine not started\ncandidate: 0 cached, 20 to ask\n"
    progress = eval_progress(_running(log + "progress candidate 5/20"))
    assert (progress["done"], progress["total"]) == (25, 40)


def test_each_category_shows_baseline_and_candidate_accuracy_and_the_difference(db: None) -> None:
    block = {"n": 20, "failures": 1, "upper_bound_95": 0.2, "pass": True}
    result = {
        "pass": True,
        "overall": {**block, "baseline_accuracy": 0.9, "quantized_accuracy": 0.85},
        "categories": {"math": {**block, "baseline_accuracy": 0.9, "quantized_accuracy": 0.85}},
    }
    summary = summarise(result)
    assert round(summary["categories"]["math"]["accuracy_difference"], 3) == -0.05
    job = JobRun(state=JobRunState.SUCCEEDED, log_tail="")
    run = EvalRun(scheme="w4a16", kind=EvalKind.SERVED, status=EvalStatus.PASSED, job=job, summary=summary)
    with translation.override("en"):
        html = render_to_string("web/partials/evals.html", {"evals": [eval_progress(run)], "code": "x"})
    assert "Baseline accuracy" in html
    assert "0.900" in html
    assert "0.850" in html
    assert "-0.050" in html


def test_the_default_sets_categories_are_named_in_the_readers_language(db: None) -> None:
    """The zh card listed the categories by their keys (math, code, zh_summary, multi_turn), found
    walking the first run through the pages in Chinese; a category outside the table keeps its key."""
    block = {"n": 5, "failures": 0, "upper_bound_95": 0.45, "pass": True}
    names = ("math", "code", "zh_summary", "multi_turn", "lm_eval:gsm8k")
    summary = summarise({"pass": True, "overall": block, "categories": {name: block for name in names}})
    run = EvalRun(
        scheme="w4a16",
        kind=EvalKind.SERVED,
        status=EvalStatus.PASSED,
        job=JobRun(state=JobRunState.SUCCEEDED, log_tail=""),
        summary=summary,
    )
    with translation.override("zh-hans"):
        html = render_to_string("web/partials/evals.html", {"evals": [eval_progress(run)], "code": "x"})
    cells = re.findall(r'<tr data-category="([^"]+)"><td>([^<]+)</td>', html)
    assert dict(cells) == {
        "math": "数学",
        "code": "代码",
        "zh_summary": "中文摘要",
        "multi_turn": "多轮对话",
        "lm_eval:gsm8k": "lm_eval:gsm8k",
    }, cells


def test_the_eval_panel_opened_directly_is_a_whole_page(flow: Any, artifacts: Any) -> None:
    code = flow.to_review(artifacts["apache"])
    Cluster.objects.create(name="local", executor="local", remote_root="/tmp/evals")
    client = Client()
    client.force_login(flow.p.engineer)
    direct = client.get(f"/requests/{code}/evals").content.decode()
    assert "<html" in direct
    assert 'id="eval-runs"' in direct
    polled = client.get(f"/requests/{code}/evals", HTTP_HX_REQUEST="true").content.decode()
    assert "<html" not in polled
    assert 'id="eval-runs"' in polled


def test_the_packet_shows_each_categorys_accuracy_and_the_difference() -> None:
    from governance.approvals.packet_render import PacketInput, render_html

    block = {"n": 20, "failures": 1, "upper_bound_95": 0.2, "threshold": 0.05, "pass": True}
    categories = summarise({"categories": {"math": {**block, "baseline_accuracy": 0.9, "quantized_accuracy": 0.85}}})[
        "categories"
    ]
    data = PacketInput(
        deployment_code="c",
        evidence_digest="7e" * 32,
        evidence={"eval_results": [{"eval": "e1", "scheme": "w4a16", "kind": "served", "status": "passed"}]},
        eval_categories={"e1": categories},
        audit_checkpoint=None,
        signatures=[],
        organisation="Acme",
    )
    with translation.override("en"):
        html = render_html(data)
    assert "Candidate accuracy" in html
    assert "-0.050" in html


def test_the_panel_keeps_polling_until_the_verdict_is_written(flow: Any, artifacts: Any) -> None:
    """A job is saved finished in one transaction and its eval run's verdict written in the next
    (evaluations.signals.job_finished on commit). A poll between the two read the job as done and
    the run as still running: the panel and the blocker list stopped polling with the run shown as
    running, for good (the browser walkthrough waited its 10 minutes on a run that had passed)."""
    code = flow.to_review(artifacts["apache"])
    flow.compute_capacity(code)  # nothing else pending: the eval alone keeps the blocker list polled
    cluster = Cluster.objects.create(name="local", executor="local", remote_root="/tmp/evals")
    job = JobRun.objects.create(
        cluster=cluster, kind="eval", command=["true"], time_limit_s=60, state=JobRunState.SUCCEEDED, log_tail=LOG
    )
    run = EvalRun.objects.create(
        request=DeploymentRequest.objects.get(code=code),
        cluster=cluster,
        scheme="w4a16",
        status=EvalStatus.RUNNING,
        job=job,
    )
    client = Client()
    client.force_login(flow.p.engineer)
    panel = client.get(f"/requests/{code}/evals", HTTP_HX_REQUEST="true").content.decode()
    assert 'hx-trigger="every 2s"' in panel
    blockers = client.get(f"/requests/{code}/blockers", HTTP_HX_REQUEST="true").content.decode()
    assert 'hx-trigger="every 2s"' in blockers
    page = client.get(f"/requests/{code}/").content.decode()
    assert page.count('hx-trigger="every 2s"') >= 2  # the panel and the blocker list, polled
    # the verdict written: both stop polling
    run.status = EvalStatus.PASSED
    run.save(update_fields=["status"])
    assert 'hx-trigger="every 2s"' not in client.get(f"/requests/{code}/evals", HTTP_HX_REQUEST="true").content.decode()
    assert (
        'hx-trigger="every 2s"' not in client.get(f"/requests/{code}/blockers", HTTP_HX_REQUEST="true").content.decode()
    )
