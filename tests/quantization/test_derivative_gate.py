"""A careless derivative fails the gate and a good one passes, on real weights made by the quantize job.

The derivatives are the ones committed in planner/tinylm/derivatives (`python -m planner.tinylm.derivatives`
made them with the quantize job's payload; their records hold the recipe, tool versions and manifest
digest): `w2a16-rtn` (int2, round to nearest, no calibration) and `w4a16-rtn` (int4, round to nearest).
Each is registered with lineage to the trained tiny model, located on the local cluster and given a
served eval through `transformers serve` (the compressed-tensors checkpoint decompressed at load), the
path a real review takes, on 15 cases per category of the default set, 64 new tokens.

Why 15 per category and a threshold of 0.2: the verdict is the one-sided 95% Clopper-Pearson upper
bound of the failure rate, per category and overall, against the threshold. With no failure in n cases
that bound is 1 - 0.05^(1/n): a category passes the review's 5% only from n = 59 on (236 cases, some
four times this test's time). On 15 cases a perfect category's bound is 18.1%, so at a threshold of 0.2
a derivative passes exactly when it fails no case in any category, and one failure in any category
(bound 27.9%) fails it. That still separates the two: on the whole set `w2a16-rtn` fails 67 of 400
cases, 57 of the 100 code completions (docs/quantization.md), so 15 code cases without a failure would
have a chance of about 0.43^15 = 3e-6 (answers are greedy: the outcome is the same on every run);
`w4a16-rtn` fails none of the 400.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.utils import timezone

from governance.deployments.models import DeploymentRequest
from governance.gate.choices import ReasonCode
from governance.gate.services import ci_token_issue
from tests.conftest import Personas
from tests.deployments.conftest import Flow, artifacts, catalog, flow  # noqa: F401  (shared fixtures)
from tests.gate.conftest import bearer, compute_capacity
from tests.quant.conftest import no_engine_left  # noqa: F401  (shared fixture)
from tests.quantization.served_tinylm import THRESHOLD, served_eval, serving, tinylm_on_local_cluster


@pytest.mark.slow
@pytest.mark.usefixtures("no_engine_left")
def test_the_careless_derivative_is_blocked_and_denied_the_good_one_passes_and_is_allowed(
    flow: Flow,  # noqa: F811 - the shared fixture
    personas: Personas,
    tmp_path: Path,
    settings: Any,
    django_capture_on_commit_callbacks: Any,
) -> None:
    tiny = tinylm_on_local_cluster(flow, personas, tmp_path, settings)
    cluster, registered = tiny.cluster, tiny.registered
    personas.team.leads.add(personas.requester)
    _, token = ci_token_issue(
        actor=personas.requester, team=personas.team, name="deploy", expires_at=timezone.now() + timedelta(days=1)
    )

    # The careless derivative: its served eval fails, the request is blocked by eval.failed, the gate denies.
    careless = registered["w2a16-rtn"]
    code = flow.create(careless, serving_plan=serving("w2a16"))["code"]
    assert flow.post(personas.requester, code, "submit").status_code == 200
    assert flow.post(personas.legal, code, "start-review").status_code == 200
    compute_capacity(flow, code)  # refused: no engine has a 2-bit kernel (a blocker of its own)
    evaluation = served_eval(flow, personas, cluster, code, django_capture_on_commit_callbacks)
    assert evaluation.summary is not None
    overall, code_cases = evaluation.summary["overall"], evaluation.summary["categories"]["code"]
    print(f"w2a16-rtn: {overall['failures']}/{overall['n']} failures, bound {overall['upper_bound_95']:.3f}, "
          + ", ".join(f"{k} {v['failures']}/{v['n']}" for k, v in evaluation.summary["categories"].items()))  # fmt: skip
    assert evaluation.status == "failed", overall
    assert overall["upper_bound_95"] > THRESHOLD
    assert code_cases["failures"] >= 1  # code completions lose their key items, as on the whole set
    assert evaluation.candidate_digest == careless.weights_digest
    blockers = {b["code"]: b["message"] for b in flow.get(personas.engineer, code)["blockers"]}
    assert ReasonCode.EVAL_FAILED in blockers, blockers
    assert careless.weights_digest in blockers[ReasonCode.EVAL_FAILED]
    check = {
        "deployment": code,
        "environment": "production",
        "artifact_digest": careless.weights_digest,
        "serving": {**{k: serving("w2a16")[k] for k in ("engine", "precision", "gpu", "max_model_len")},
                    "tp": 1, "pp": 1, "ep": 1},
    }  # fmt: skip
    denied = bearer(token).post("/api/v1/gate/check", check, format="json").json()
    assert denied["decision"] == "deny"
    assert ReasonCode.EVAL_FAILED in [r["code"] for r in denied["reasons"]], denied["reasons"]

    # The good derivative of the same parent: its served eval passes, the request is approved, the gate allows.
    good = registered["w4a16-rtn"]
    code = flow.create(good, serving_plan=serving("w4a16"), environments=["staging", "production"])["code"]
    assert flow.post(personas.requester, code, "submit").status_code == 200
    assert flow.post(personas.legal, code, "start-review").status_code == 200
    compute_capacity(flow, code)
    evaluation = served_eval(flow, personas, cluster, code, django_capture_on_commit_callbacks)
    assert evaluation.summary is not None
    assert evaluation.status == "passed", evaluation.summary
    assert evaluation.summary["overall"]["failures"] == 0
    assert not [b for b in flow.get(personas.engineer, code)["blockers"] if b["code"].startswith("eval.")]
    assert flow.approve(code)["status"] == "approved"
    layout = (DeploymentRequest.objects.get(code=code).evidence or {})["capacity_plan"]["result"]["parallel"]
    check = {
        "deployment": code,
        "environment": "staging",  # quantized weights reach production through a canary (issue 45)
        "artifact_digest": good.weights_digest,
        "serving": {**{k: serving("w4a16")[k] for k in ("engine", "precision", "gpu", "max_model_len")},
                    **{k: layout[k] for k in ("tp", "pp", "ep")},
                    "engine_version": evaluation.engine_version},  # the version the approval is bound to
    }  # fmt: skip
    allowed = bearer(token).post("/api/v1/gate/check", check, format="json").json()
    assert allowed["decision"] == "allow", allowed["reasons"]
    production = bearer(token).post("/api/v1/gate/check", {**check, "environment": "production"}, format="json")
    assert [r["code"] for r in production.json()["reasons"]] == [ReasonCode.CANARY_MISSING]
