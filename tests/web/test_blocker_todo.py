""" "What to do" about a blocker that needs the licensor's permission (issue 46): it said "…or legal
records a waiver", as if one reviewer could lift a blocker. A blocker is waived only with the licensor's
written permission attached and a second legal reviewer's confirmation (readiness.waiver_in_force):
the guidance says both, in the reader's language, on the page and in the packet."""

from __future__ import annotations

from django.utils import translation

from governance.web.labels import blocker_guidance

BLOCKER = {
    "code": "license.blocker",
    "message": "llama-3.1: use.non_commercial (1): commercial use not permitted",
    "fix": "…",
    "role": "requester",
    "license": "llama-3.1",
}


def test_a_blockers_todo_names_the_licensors_permission_and_the_two_reviewers() -> None:
    with translation.override("en"):
        todo = blocker_guidance(BLOCKER, None)["todo"]
    assert "licensor's written permission" in todo
    assert "second legal reviewer confirms" in todo
    assert "legal records a waiver" not in todo


def test_the_same_guidance_in_chinese() -> None:
    with translation.override("zh-hans"):
        todo = blocker_guidance(BLOCKER, None)["todo"]
    assert "许可方的书面许可" in todo
    assert "第二位法务审核人" in todo


def test_a_licensor_approval_is_recorded_as_a_waiver_by_legal() -> None:
    with translation.override("en"):
        todo = blocker_guidance({**BLOCKER, "code": "license.licensor_approval_required", "role": "legal"}, None)
    assert "licensor's approval" in todo["todo"]
    assert todo["anchor"] == "waivers"
