"""The eval form starts at the request's own precision; a run whose threshold is looser than the
default says so on the request page (and the packet says it too: tests/approvals)."""

from __future__ import annotations

from typing import Any

from django.template.loader import render_to_string
from django.test import Client

from governance.evaluations.models import Cluster, EvalRun
from governance.web.selectors.deployment import DEFAULT_EVAL_THRESHOLD, eval_progress


def test_the_eval_form_defaults_to_the_requests_precision(flow: Any, artifacts: Any) -> None:
    code = flow.to_review(artifacts["apache"])  # serving precision fp8
    Cluster.objects.create(name="local", executor="local", remote_root="/tmp/evals")
    client = Client()
    client.force_login(flow.p.engineer)
    page = client.get(f"/requests/{code}/").content.decode()
    assert '<option value="fp8" selected>fp8</option>' in page


def test_a_looser_threshold_than_the_default_is_a_warning(db: None) -> None:
    loose = eval_progress(EvalRun(scheme="w4a8", threshold=0.2))
    strict = eval_progress(EvalRun(scheme="w4a8", threshold=DEFAULT_EVAL_THRESHOLD))
    assert (loose["loose_threshold"], strict["loose_threshold"]) == (True, False)
    code = "00000000-0000-0000-0000-000000000000"  # a running run's panel is polled at its request's URL
    html = render_to_string("web/partials/evals.html", {"evals": [loose, strict], "code": code})
    assert html.count('data-warning="eval.threshold_loose"') == 1
    assert "threshold 0.2 is looser than the default 0.05" in html
