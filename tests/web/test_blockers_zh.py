"""Chinese all the way (issue 46): a reviewer whose UI is in zh-hans read English inside the blocker
list ("no legal signature is on record"). The API and the gate keep the English `message` (their
contract); the web layer words each reason by its code, with the parameters the message names."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

import pytest
from django.test import Client
from django.utils import translation

from governance.deployments.readiness import ReadinessState, Signature, readiness
from governance.web.labels import blocker_guidance

NOW = datetime(2026, 12, 1, tzinfo=UTC)
DIGEST = "sha256:" + "c" * 64
CJK = re.compile(r"[\u4e00-\u9fff]")
# an English phrase: three words of lower-case Latin letters in a row
ENGLISH = re.compile(r"\b[a-z]{2,}\s+[a-z]{2,}\s+[a-z]{2,}\b")


def _evidence(plan: dict[str, Any] | None, evals: list[dict[str, Any]]) -> dict[str, Any]:
    finding = {"severity": "blocker", "code": "use.prohibited", "clause": "4", "message": "Use is prohibited."}
    approval = {**finding, "severity": "approval", "code": "threshold.licensor_approval"}
    return {
        "artifact": {"weights_digest": DIGEST},
        "serving_envelope": {"engine": "vllm", "precision": "fp8"},
        "licenses": [{"license": "llama-3.1", "findings": [finding, approval]}],
        "obligations": [
            {"license": "llama-3.1", "code": "attribution.display", "clause": "1.b", "status": "open"},
            {"license": "llama-3.1", "code": "notice.keep", "clause": "1.c", "status": "acknowledged"},
        ],
        "capacity_plan": plan,
        "eval_results": evals,
    }


def _run(**changes: Any) -> dict[str, Any]:
    return {
        "kind": "served",
        "scheme": "fp8",
        "status": "failed",
        "candidate_digest": DIGEST,
        "engine": "vllm",
        "serving": {},
        "overall": {"upper_bound_95": 0.2},
        **changes,
    }


def _blockers() -> list[dict[str, Any]]:
    plans = [
        None,
        {"status": "pending"},
        {"status": "failed"},
        {"status": "done", "fits": False, "result": {"notes": ["No layout fits 2 GPUs"]}},
        {"status": "done", "fits": True, "result": {"verdict": "tight", "notes": ["Tight: 3% headroom"]}},
    ]
    evals = [[], [_run()], [_run(status="passed", serving={"tp": 4})], [_run(status="passed", candidate_digest="x")]]
    signatures = {"legal": Signature("legal", "old", voided=True)}
    found: dict[str, dict[str, Any]] = {}
    for plan, runs in zip(plans, [*evals, []], strict=True):
        state = ReadinessState(evidence=_evidence(plan, runs), evidence_digest="d", signatures=signatures)
        for reason in readiness(state, NOW):
            found.setdefault(reason.code, reason.as_blocker())
    pending = ReadinessState(
        evidence=_evidence(None, []), evidence_digest="d", signatures={}, running_evals=(_run(status="running"),)
    )
    for reason in readiness(pending, NOW):
        found.setdefault(reason.code, reason.as_blocker())
    return list(found.values())


def test_every_reason_reads_in_chinese_in_the_zh_ui() -> None:
    blockers = _blockers()
    assert len(blockers) >= 14, sorted(b["code"] for b in blockers)
    with translation.override("zh-hans"):
        shown = [blocker_guidance(b, None) for b in blockers]
    for row in shown:
        for key in ("message_text", "todo", "who"):
            text = re.sub(r"<[^>]+>|sha256:\w+|[\w.-]*\d[\w.-]*", "", str(row[key]))
            assert CJK.search(row[key]), (row["code"], key, row[key])
            assert not ENGLISH.search(text), (row["code"], key, row[key])
    # the API's contract is unchanged: the English message stays beside the translated one
    assert {row["message"] for row in shown} == {b["message"] for b in blockers}


def test_the_english_ui_reads_the_reasons_own_message() -> None:
    with translation.override("en"):
        for blocker in _blockers():
            assert blocker_guidance(blocker, None)["message_text"] == blocker["message"]


@pytest.mark.django_db
def test_the_zh_request_page_lists_the_blockers_in_chinese(sign_flow: Any, artifacts: dict[str, Any]) -> None:
    code = sign_flow.ready(artifacts["apache"], with_eval=False)
    client = Client()
    client.force_login(sign_flow.p.legal)
    page = client.get(f"/requests/{code}/", HTTP_ACCEPT_LANGUAGE="zh-hans").content.decode()
    assert 'data-code="signature.missing"' in page
    assert "no legal signature is on record" not in page
    assert "eval served" not in page


def test_the_checkpoints_and_the_usage_reasons_read_in_chinese_too() -> None:
    inspection = {
        "status": "done",
        "license_files": [
            {"kind": "license", "path": "LICENSE", "license": "mit", "matches": "mit 1.0", "fingerprint": "sha256:ab"},
            {"kind": "use_policy", "path": "USE_POLICY.md", "fingerprint": "sha256:1234567890abcdef1234"},
        ],
        "model_card": {"license": "llama3.1"},
    }
    evidence = {
        "artifact": {
            "declared_license": "apache-2.0",
            "parent_check": {
                "status": "mismatch",
                "parent_name": "Other-bf16",
                "parent_digest": "sha256:" + "0" * 64,
                "differences": ["config.json hidden_size 64 here, 96 in the parent"],
            },
            "weights": {"quantized": True, "precision": "w4a16", "summary": "w4a16 (int4 weights)"},
            "inspection": inspection,
        },
        "serving_envelope": {"precision": "fp8"},
        "capacity_plan": {"status": "done", "fits": True, "result": {}},
    }
    state = ReadinessState(
        evidence=evidence, evidence_digest="d", signatures={}, flagged=True, flag_reason="usage 2026-11 crossed"
    )
    reasons = [r for r in readiness(state, NOW) if not r.code.startswith(("signature.", "eval."))]
    codes = {r.code for r in reasons}
    assert {
        "license.mismatch",
        "license.unidentified",
        "weights.precision_mismatch",
        "artifact.parent_missing",
        "artifact.parent_mismatch",
    } <= codes
    with translation.override("zh-hans"):
        for reason in reasons:
            text = blocker_guidance(reason.as_blocker(), None)["message_text"]
            assert CJK.search(text), (reason.code, text)
